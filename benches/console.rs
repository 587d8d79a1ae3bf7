//! `cargo bench --bench console`: the console's review page with 1,000 pending writes.
//! A release daemon serves a copy of `vault-example/` (no corpus needed) under the
//! `review` policy; 1,000 agent writes are queued through `POST /v1/notes` (each a new
//! note of ~40 lines, so each pending write carries a diff of that size); a session is
//! signed in with the link `notevault login-link` prints; then `GET /` (the whole review
//! page: the first 100 cards with their diffs, the decided list, the counts),
//! `GET /pending` (the list when it changed) and the page's poll while nothing changed
//! (`GET /pending?version=…`, 204) are timed at one connection, and the time
//! the daemon spent is read from its CPU counters (utime + stime per request).
//!
//! Target: the review page with 1,000 pending writes renders in under 100 ms of server
//! time. Environment: `NOTEVAULT_BENCH_ROUNDS` (requests per page, default 50).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the operator: they read the environment"
)]

mod common;

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

const PENDING: usize = 1000;

fn main() -> ExitCode {
    common::bench_main("console", run)
}

fn rounds() -> usize {
    std::env::var("NOTEVAULT_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(50)
}

fn note_body(i: usize) -> String {
    let mut body = format!("# Proposal {i}\n\n");
    for line in 0..40 {
        body.push_str(&format!(
            "- item {line} of proposal {i}: a line an agent wrote, with a [[link]] and #tag\n"
        ));
    }
    body
}

fn run() -> Result<()> {
    let root = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-console");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root)?;
    let vault = root.join("vault");
    let state = root.join("state");
    common::copy(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("vault-example"),
        &vault,
    )?;
    let daemon = common::start(&vault, &state)?;
    let base = daemon.base.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let res = client
            .patch(format!(
                "{base}/v1/vault/write-settings?update_mask=write_policy"
            ))
            .json(&serde_json::json!({"write_policy": "review"}))
            .send()
            .await?;
        ensure!(res.status() == 200, "policy: {}", res.status());
        let started = Instant::now();
        let mut queued = 0;
        for chunk in (0..PENDING).collect::<Vec<_>>().chunks(8) {
            let sends = chunk.iter().map(|&i| {
                client
                    .post(format!("{base}/v1/notes"))
                    .header("Idempotency-Key", format!("bench-console-{i}"))
                    .json(&serde_json::json!({
                        "slug": format!("proposals/p{i:04}"),
                        "content": note_body(i),
                        "agent_id": "bench-agent",
                    }))
                    .send()
            });
            for res in futures::future::join_all(sends).await {
                let res = res?;
                ensure!(res.status() == 202, "queue: {}", res.status());
                queued += 1;
            }
        }
        println!(
            "queued {queued} writes in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let link = Command::new(common::BIN)
            .args(["login-link", "--state-dir"])
            .arg(&state)
            .arg(&vault)
            .output()?;
        ensure!(link.status.success(), "login-link: {link:?}");
        let link = String::from_utf8(link.stdout)?.trim().to_string();
        let res = client.get(&link).send().await?;
        let cookie = res
            .headers()
            .get("set-cookie")
            .context("no session cookie")?
            .to_str()?
            .split(';')
            .next()
            .unwrap_or_default()
            .to_string();
        let ticks = common::clock_ticks_per_second()? as f64;
        let review = client
            .get(format!("{base}/"))
            .header("cookie", &cookie)
            .send()
            .await?
            .text()
            .await?;
        let poll = review
            .split("hx-get=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .context("no poller on the review page")?
            .to_string();
        for path in ["/", "/pending", poll.as_str()] {
            let expect = if path == poll { 204 } else { 200 };
            let mut times = Vec::new();
            let mut bytes = 0;
            let cpu_before = common::cpu_ticks(daemon.child.id())?;
            for _ in 0..rounds() {
                let t = Instant::now();
                let res = client
                    .get(format!("{base}{path}"))
                    .header("cookie", &cookie)
                    .send()
                    .await?;
                ensure!(res.status() == expect, "{path}: {}", res.status());
                bytes = res.bytes().await?.len();
                times.push(t.elapsed());
            }
            let cpu = (common::cpu_ticks(daemon.child.id())? - cpu_before) as f64 / ticks;
            let per_request = Duration::from_secs_f64(cpu / rounds() as f64);
            let (p50, p99) = common::stats(times);
            println!(
                "GET {:<9} with {PENDING} pending: p50 {} p99 {} (wall, one connection), daemon CPU {} per request, {} KiB; target < 100 ms",
                if path == poll { "(poll 204)" } else { path },
                common::ms(p50),
                common::ms(p99),
                common::ms(per_request),
                bytes / 1024
            );
        }
        Ok(())
    })
}
