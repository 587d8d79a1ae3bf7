//! `cargo bench --bench writes`: the write pipeline and review on the real corpus
//! (`../shared/corpora/realvault.tar.gz`), each figure beside its target or its reference
//! (the git CLI committing the same change), in one run. See `benches/README.md`.
//!
//! - create and `:edit` latency (p50/p99, history commit included) vs `git add FILE &&
//!   git commit` of the same change;
//! - applied writes per second with 16 concurrent clients, rate limit off;
//! - `:listRevisions` (a page of 50) on a note with 10,000 revisions, and `:rollback`.
//!
//! Environment: `NOTEVAULT_CORPUS` (the tarball), `NOTEVAULT_BENCH_REVISIONS` (default
//! 10000), `NOTEVAULT_BENCH_SECONDS` (throughput run, default 10), `NOTEVAULT_BENCH_BIN`
//! (another daemon binary, to compare two builds).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the editor and the operator: they write the vault and read the environment"
)]

mod common;

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use common::{copy, corpus, git, ms, start_bin, stats, wait_history, wait_idle, BIN};
use serde_json::{json, Value};

async fn post(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    body: &Value,
) -> Result<(u16, Value)> {
    let res = client
        .post(url)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await?;
    let status = res.status().as_u16();
    Ok((status, res.json().await?))
}

/// [`post`] that must answer `want` (else the error names `what`): the body, and how
/// long the request took.
async fn post_timed(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    body: &Value,
    want: u16,
    what: &str,
) -> Result<(Value, Duration)> {
    let t = Instant::now();
    let (status, answer) = post(client, url, key, body).await?;
    let took = t.elapsed();
    if status != want {
        bail!("{what}: {status} {answer}");
    }
    Ok((answer, took))
}

/// How many commits `history.git` has (0 when it cannot be read).
fn history_commits(state: &Path) -> u64 {
    std::process::Command::new("git")
        .arg("--git-dir")
        .arg(state.join("history.git"))
        .args(["rev-list", "--count", "HEAD"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// A word of letters only, different for each `i` (a search term of its own).
fn word_of(mut i: usize) -> String {
    let mut w = String::from("zq");
    loop {
        w.push((b'a' + (i % 26) as u8) as char);
        i /= 26;
        if i == 0 {
            break w;
        }
    }
}

fn row(what: &str, got: &str, reference: &str) {
    println!("| {what} | {got} | {reference} |");
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("writes bench failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<()> {
    let Some(corpus) = corpus() else {
        println!("skipped: ../shared/corpora/realvault.tar.gz not found");
        return Ok(());
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-corpus/writes-run");
    std::fs::create_dir_all(&root)?;
    let vault = root.join("vault");
    let state = root.join("state");
    let git_copy = root.join("git");
    let _ = std::fs::remove_dir_all(&state);
    copy(&corpus, &vault)?;
    copy(&corpus, &git_copy)?;
    eprintln!("preparing the git reference repository (untimed)...");
    git(&git_copy, &["init", "-q"])?;
    // No background repack of the 44k loose objects while the daemon is measured.
    git(&git_copy, &["config", "gc.auto", "0"])?;
    git(&git_copy, &["config", "maintenance.auto", "false"])?;
    git(&git_copy, &["add", "-A"])?;
    git(&git_copy, &["commit", "-q", "-m", "init"])?;

    let bin = std::env::var("NOTEVAULT_BENCH_BIN").unwrap_or_else(|_| BIN.to_string());
    let daemon = start_bin(&bin, &vault, &state)?;
    wait_history(&state).await?;
    // The start's tail (index merges, the catch-up rescan) is not in the figures.
    wait_idle(daemon.child.id(), Duration::from_secs(120)).await?;
    let client = reqwest::Client::new();
    let n = 200;

    // Create latency.
    let mut creates = Vec::new();
    let mut versions = Vec::new();
    for i in 0..n {
        let body = json!({"slug": format!("bench/c{i}"), "content": format!("# Bench note {i}\n\nfirst version\n"), "agent_id": "bench"});
        let (receipt, took) = post_timed(
            &client,
            &format!("{}/v1/notes", daemon.base),
            &format!("c{i}"),
            &body,
            201,
            &format!("create {i}"),
        )
        .await?;
        creates.push(took);
        versions.push(
            receipt["version_id"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    // :edit latency.
    let mut edits = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let body = json!({"version_id": v, "old_string": "first version", "new_string": "second version", "agent_id": "bench"});
        let (_, took) = post_timed(
            &client,
            &format!("{}/v1/notes/bench%2Fc{i}:edit", daemon.base),
            &format!("e{i}"),
            &body,
            200,
            &format!("edit {i}"),
        )
        .await?;
        edits.push(took);
    }
    // Read your writes: each create, then a search for its one word with `min_seq` (the
    // index publishes changes in a row together, at most every 50 ms, unless a search
    // waits for one).
    let mut fresh = Vec::new();
    for i in 0..n {
        let word = word_of(i);
        let body = json!({"slug": format!("bench/r{i}"), "content": format!("# Read back {i}\n\n{word}\n"), "agent_id": "bench"});
        let (receipt, _) = post_timed(
            &client,
            &format!("{}/v1/notes", daemon.base),
            &format!("r{i}"),
            &body,
            201,
            &format!("create {i}"),
        )
        .await?;
        let seq = receipt["committed_seq"].as_i64().unwrap_or_default();
        let t = Instant::now();
        let found: Value = client
            .get(format!("{}/v1/search?q={word}&min_seq={seq}", daemon.base))
            .send()
            .await?
            .json()
            .await?;
        fresh.push(t.elapsed());
        // (Another note may share the word's stem: `zqy` and `zqi`.)
        if found["results"][0]["slug"] != format!("bench/r{i}") {
            bail!("search for {word} at seq {seq} does not find bench/r{i} first: {found}");
        }
    }
    // The git CLI committing the same changes.
    std::fs::create_dir_all(git_copy.join("bench"))?;
    let mut git_creates = Vec::new();
    let mut git_edits = Vec::new();
    let g = 50;
    for i in 0..g {
        let file = format!("bench/c{i}.md");
        std::fs::write(
            git_copy.join(&file),
            format!("# Bench note {i}\n\nfirst version\n"),
        )?;
        let t = Instant::now();
        git(&git_copy, &["add", &file])?;
        git(&git_copy, &["commit", "-q", "-m", "create"])?;
        git_creates.push(t.elapsed());
    }
    for i in 0..g {
        let file = format!("bench/c{i}.md");
        std::fs::write(
            git_copy.join(&file),
            format!("# Bench note {i}\n\nsecond version\n"),
        )?;
        let t = Instant::now();
        git(&git_copy, &["add", &file])?;
        git(&git_copy, &["commit", "-q", "-m", "edit"])?;
        git_edits.push(t.elapsed());
    }

    // Throughput: 16 clients creating notes.
    let seconds: u64 = std::env::var("NOTEVAULT_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let commits_before = history_commits(&state);
    let until = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..16 {
        let client = client.clone();
        let base = daemon.base.clone();
        tasks.push(tokio::spawn(async move {
            let mut ok = Vec::new();
            let mut i = 0;
            while Instant::now() < until {
                let body =
                    json!({"slug": format!("load/w{w}-{i}"), "content": format!("load {w} {i}\n")});
                let t = Instant::now();
                if let Ok((201, _)) = post(
                    &client,
                    &format!("{base}/v1/notes"),
                    &format!("l{w}-{i}"),
                    &body,
                )
                .await
                {
                    ok.push(t.elapsed());
                }
                i += 1;
            }
            ok
        }));
    }
    let mut loaded = Vec::new();
    for t in tasks {
        loaded.extend(t.await?);
    }
    let applied = loaded.len();
    let rate = applied as f64 / started.elapsed().as_secs_f64();
    let commits = history_commits(&state).saturating_sub(commits_before);
    let (t50, t99) = stats(loaded);

    // A note with many revisions.
    let revisions: usize = std::env::var("NOTEVAULT_BENCH_REVISIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    eprintln!("writing {revisions} revisions of one note...");
    let (_, r) = post(
        &client,
        &format!("{}/v1/notes", daemon.base),
        "rev-0",
        &json!({"slug": "bench/many", "content": "counter 0\n"}),
    )
    .await?;
    let mut version = r["version_id"].as_str().unwrap_or_default().to_string();
    let mut listed_versions = vec![version.clone()];
    for i in 1..revisions {
        let body = json!({"version_id": version, "old_string": format!("counter {}", i - 1), "new_string": format!("counter {i}")});
        let (r, _) = post_timed(
            &client,
            &format!("{}/v1/notes/bench%2Fmany:edit", daemon.base),
            &format!("rev-{i}"),
            &body,
            200,
            &format!("revision {i}"),
        )
        .await?;
        version = r["version_id"].as_str().unwrap_or_default().to_string();
        listed_versions.push(version.clone());
    }
    let mut lists = Vec::new();
    for i in 0..500 {
        let url = if i % 2 == 0 {
            format!(
                "{}/v1/notes/bench%2Fmany:listRevisions?page_size=50",
                daemon.base
            )
        } else {
            format!(
                "{}/v1/notes/bench%2Fmany:listRevisions?page_size=50&order_by=created_at%20asc",
                daemon.base
            )
        };
        let t = Instant::now();
        let res = client.get(&url).send().await?;
        let ok = res.status().is_success();
        let _ = res.bytes().await?;
        lists.push(t.elapsed());
        if !ok {
            bail!("listRevisions failed");
        }
    }
    // Rollbacks to recent and to old revisions.
    let mut rollbacks_recent = Vec::new();
    let mut rollbacks_old = Vec::new();
    for i in 0..20 {
        for (old, out) in [(false, &mut rollbacks_recent), (true, &mut rollbacks_old)] {
            let target = if old {
                &listed_versions[i]
            } else {
                &listed_versions[listed_versions.len() - 2 - i]
            };
            let (_, took) = post_timed(
                &client,
                &format!("{}/v1/notes/bench%2Fmany:rollback", daemon.base),
                &format!("rb-{old}-{i}"),
                &json!({"revision_id": target}),
                200,
                "rollback",
            )
            .await?;
            out.push(took);
        }
    }
    drop(daemon);

    let (c50, c99) = stats(creates);
    let (e50, e99) = stats(edits);
    let (gc50, gc99) = stats(git_creates);
    let (ge50, ge99) = stats(git_edits);
    let (l50, l99) = stats(lists);
    let (f50, f99) = stats(fresh);
    let (rr50, rr99) = stats(rollbacks_recent);
    let (ro50, ro99) = stats(rollbacks_old);
    println!(
        "\n## writes ({} notes in the vault, 2-core machine)\n",
        44_432
    );
    println!("| figure | notevault | reference / target |");
    println!("|---|---|---|");
    row(
        "create p50 / p99 (history commit included)",
        &format!("{} / {}", ms(c50), ms(c99)),
        &format!(
            "git add+commit {} / {}; target p50 ≤ 2 ms, ≥ 40× faster",
            ms(gc50),
            ms(gc99)
        ),
    );
    row(
        "create speed-up over git (p50)",
        &format!("{:.1}×", gc50.as_secs_f64() / c50.as_secs_f64()),
        "target ≥ 40×",
    );
    row(
        ":edit p50 / p99",
        &format!("{} / {}", ms(e50), ms(e99)),
        &format!(
            "git add+commit {} / {}; target p50 ≤ 8 ms, p99 ≤ 25 ms",
            ms(ge50),
            ms(ge99)
        ),
    );
    row(
        ":edit speed-up over git (p50)",
        &format!("{:.1}×", ge50.as_secs_f64() / e50.as_secs_f64()),
        "target ≥ 10×",
    );
    row(
        "search with `min_seq` right after each create, p50 / p99",
        &format!("{} / {}", ms(f50), ms(f99)),
        "(no target: read-your-writes waits for the index)",
    );
    row(
        "applied creates/s, 16 clients",
        &format!("{rate:.0}/s ({applied} in {seconds} s)"),
        "target ≥ 500/s",
    );
    row(
        "create p50 / p99 at 16 clients",
        &format!("{} / {}", ms(t50), ms(t99)),
        "target p99 ≤ 50 ms",
    );
    row(
        "history commits for those creates (writes per commit)",
        &format!(
            "{commits} ({:.1})",
            applied as f64 / (commits.max(1)) as f64
        ),
        "one commit per group of writes that arrive together",
    );
    row(
        &format!(":listRevisions, page of 50, {revisions} revisions, p50 / p99"),
        &format!("{} / {}", ms(l50), ms(l99)),
        "target p50 ≤ 2 ms",
    );
    row(
        ":rollback to a recent revision p50 / p99",
        &format!("{} / {}", ms(rr50), ms(rr99)),
        "(no target)",
    );
    row(
        &format!(":rollback to a revision ~{revisions} commits back p50 / p99"),
        &format!("{} / {}", ms(ro50), ms(ro99)),
        "(no target)",
    );
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}
