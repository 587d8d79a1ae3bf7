//! `cargo bench --bench auth`: what auth costs a read. Two release daemons serve the same
//! copy of the real corpus (`../shared/corpora/realvault.tar.gz`), each with its own state
//! directory: one open (local mode), one with `AUTH_REQUIRED=true` and a personal access
//! token made by `notevault token create`. Both answer `GET /v1/notes/{note}?limit=200`
//! over the same notes, a fixed number of requests at 8 keep-alive connections (the PAT
//! daemon with `Authorization: Bearer nvp_…` on every request); the daemon's CPU time per
//! request is utime + stime from `/proc/<pid>/stat` before and after, beside p50, p99 and
//! req/s. The two run in turn over several rounds, the order swapped each round (this
//! machine's speed drifts 20–40% over minutes), and each round's ratio PAT / open is
//! printed with their median. Target: the median ≤ 1.05 (≤ 5% more CPU per request).
//!
//! Environment: `NOTEVAULT_CORPUS` (the tarball; without it the bench says so and exits
//! 0), `NOTEVAULT_BENCH_ROUNDS` (default 6), `NOTEVAULT_BENCH_REQUESTS` (per daemon and
//! round, default 40000), `NOTEVAULT_BENCH_AUTH_CONTROL=1` (a control run: the second
//! daemon is open too, still sent the token, so the ratio shows what two open daemons
//! differ by on this machine).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the editor and the operator: they write the vault and read the environment"
)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use hyper::StatusCode;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::Value;

const CONNECTIONS: usize = 8;
const SLUGS: usize = 2000;
const READ_LIMIT: usize = 200;
const TARGET_RATIO: f64 = 1.05;

/// Slug characters sent as they are; `/` stays raw (the routes accept it raw or as `%2F`).
const SLUG: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

fn main() -> ExitCode {
    common::bench_main("auth", run)
}

fn setting(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .with_context(|| format!("{name}={v:?}: expected a positive integer")),
        Err(_) => Ok(default),
    }
}

/// One of the two daemons.
struct Mode {
    label: &'static str,
    daemon: common::Daemon,
    addr: SocketAddr,
    token: Option<String>,
}

/// One measured load of one daemon.
struct Measure {
    cpu_us_per_request: f64,
    p50: Duration,
    p99: Duration,
    rps: f64,
}

fn run() -> Result<()> {
    let rounds = setting("NOTEVAULT_BENCH_ROUNDS", 6)?;
    let requests = setting("NOTEVAULT_BENCH_REQUESTS", 40_000)?;
    let control = std::env::var_os("NOTEVAULT_BENCH_AUTH_CONTROL").is_some();
    let Some(corpus) = common::corpus() else {
        println!("skipped: the corpus tarball was not found (NOTEVAULT_CORPUS)");
        return Ok(());
    };
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
    };
    let work = target.join("bench-corpus/auth-run");
    std::fs::create_dir_all(&work)?;
    let vault = work.join("vault");
    let open_state = work.join("state-open");
    let pat_state = work.join("state-pat");
    common::copy(&corpus, &vault)?;
    for state in [&open_state, &pat_state] {
        let _ = std::fs::remove_dir_all(state);
    }
    let result = measure(&vault, &open_state, &pat_state, rounds, requests, control);
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn measure(
    vault: &Path,
    open_state: &Path,
    pat_state: &Path,
    rounds: usize,
    requests: usize,
    control: bool,
) -> Result<()> {
    let token = create_token(vault, pat_state)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // One at a time: each start scans the corpus and writes its history bootstrap.
    let open = common::start(vault, open_state)?;
    rt.block_on(settle(&open, open_state, None))?;
    let auth: &[(&str, &str)] = if control {
        &[]
    } else {
        &[("AUTH_REQUIRED", "true")]
    };
    let pat = common::start_env(common::BIN, vault, pat_state, auth)?;
    rt.block_on(settle(&pat, pat_state, Some(&token)))?;
    let mut modes = [
        Mode {
            label: "open",
            addr: address(&open)?,
            daemon: open,
            token: None,
        },
        Mode {
            label: "PAT",
            addr: address(&pat)?,
            daemon: pat,
            token: Some(token),
        },
    ];
    rt.block_on(async {
        let slugs = slugs(modes[0].addr).await?;
        let paths: Arc<Vec<String>> = Arc::new(
            slugs
                .iter()
                .map(|s| {
                    format!(
                        "/v1/notes/{}?limit={READ_LIMIT}",
                        utf8_percent_encode(s, SLUG)
                    )
                })
                .collect(),
        );
        // The PAT daemon refuses a read without the token and serves it with one.
        let mut bare = common::Conn::open(modes[1].addr).await?;
        let (status, _) = bare.get(&paths[0]).await?;
        let expected = if control {
            StatusCode::OK
        } else {
            StatusCode::UNAUTHORIZED
        };
        ensure!(status == expected, "no token: {status}");
        if control {
            modes[1].label = "open (control)";
            println!("CONTROL RUN: the second daemon is open too (NOTEVAULT_BENCH_AUTH_CONTROL)");
        }
        // Warm both: every note read once, the page cache and the catalog touched.
        for mode in &modes {
            let warm = load(mode, paths.clone(), paths.len()).await?;
            ensure!(warm.1 == 0, "{}: {} answers were not 200", mode.label, warm.1);
        }
        let hz = common::clock_ticks_per_second()?;
        println!("notevault auth bench");
        println!(
            "  date      {}",
            chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
        );
        println!(
            "  machine   {} cores; client and both daemons share them",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        println!(
            "  load      GET /v1/notes/{{note}}?limit={READ_LIMIT} over {} notes, {requests} requests per daemon and round, {CONNECTIONS} connections",
            paths.len()
        );
        println!(
            "  CPU       utime+stime of the daemon ({hz} ticks/s) over the load, per request"
        );
        println!("  rounds    {rounds}, the order swapped each round");
        println!();
        println!("| round | open CPU/req | PAT CPU/req | PAT / open | open p50 / p99 / req/s | PAT p50 / p99 / req/s |");
        println!("|---|---|---|---|---|---|");
        let mut ratios = Vec::new();
        for round in 0..rounds {
            let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            let mut got: [Option<Measure>; 2] = [None, None];
            for i in order {
                got[i] = Some(measure_one(&mut modes[i], paths.clone(), requests, hz).await?);
            }
            let [Some(open), Some(pat)] = got else {
                unreachable!("both modes ran")
            };
            let ratio = pat.cpu_us_per_request / open.cpu_us_per_request;
            ratios.push(ratio);
            println!(
                "| {} ({} first) | {:.1} us | {:.1} us | {ratio:.3} | {} / {} / {:.0} | {} / {} / {:.0} |",
                round + 1,
                modes[order[0]].label,
                open.cpu_us_per_request,
                pat.cpu_us_per_request,
                common::us(open.p50),
                common::us(open.p99),
                open.rps,
                common::us(pat.p50),
                common::us(pat.p99),
                pat.rps,
            );
        }
        ratios.sort_by(f64::total_cmp);
        let median = if ratios.len() % 2 == 1 {
            ratios[ratios.len() / 2]
        } else {
            (ratios[ratios.len() / 2 - 1] + ratios[ratios.len() / 2]) / 2.0
        };
        println!();
        println!(
            "median PAT / open CPU per request over {rounds} rounds: {median:.3} (min {:.3}, max {:.3}); target <= {TARGET_RATIO:.2}: {}",
            ratios[0],
            ratios[ratios.len() - 1],
            if median <= TARGET_RATIO { "met" } else { "MISSED" }
        );
        anyhow::Ok(())
    })?;
    for mode in &mut modes {
        ensure!(
            mode.daemon.child.try_wait()?.is_none(),
            "the {} daemon exited",
            mode.label
        );
    }
    Ok(())
}

/// `notevault token create --name bench` in the PAT daemon's state directory.
fn create_token(vault: &Path, state: &Path) -> Result<String> {
    let out = Command::new(common::BIN)
        .args(["token", "create", "--name", "bench", "--state-dir"])
        .arg(state)
        .arg(vault)
        .env_remove("NOTEVAULT_CONFIG")
        .output()?;
    ensure!(
        out.status.success(),
        "token create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout)?.trim().to_string();
    ensure!(token.starts_with("nvp_"), "token create printed {token:?}");
    Ok(token)
}

fn address(daemon: &common::Daemon) -> Result<SocketAddr> {
    daemon
        .base
        .trim_start_matches("http://")
        .parse()
        .context("daemon address")
}

/// Wait until the daemon's history bootstrap is written and its index caught up, then a
/// little more: nothing of its start-up runs while it is measured.
async fn settle(daemon: &common::Daemon, state: &Path, token: Option<&str>) -> Result<()> {
    common::wait_history(state).await?;
    let addr = address(daemon)?;
    let mut conn = match token {
        Some(t) => common::Conn::open_with_token(addr, t).await?,
        None => common::Conn::open(addr).await?,
    };
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let (status, body) = conn.get("/v1/index-status").await?;
        ensure!(status == StatusCode::OK, "index-status: {status}");
        let st: Value = serde_json::from_slice(&body)?;
        if st["indexed_seq"] == st["committed_seq"] {
            break;
        }
        ensure!(Instant::now() < deadline, "the index did not catch up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(())
}

/// Up to `SLUGS` slugs spread over the vault.
async fn slugs(addr: SocketAddr) -> Result<Vec<String>> {
    let mut conn = common::Conn::open(addr).await?;
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut path = "/v1/notes?page_size=500".to_string();
        if let Some(t) = &token {
            path.push_str("&page_token=");
            path.push_str(&utf8_percent_encode(t, NON_ALPHANUMERIC).to_string());
        }
        let (status, body) = conn.get(&path).await?;
        ensure!(status == StatusCode::OK, "GET {path}: {status}");
        let page: Value = serde_json::from_slice(&body)?;
        for note in page["notes"].as_array().context("notes")? {
            all.push(note["slug"].as_str().context("slug")?.to_string());
        }
        match page["next_page_token"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
    }
    let step = (all.len() / SLUGS).max(1);
    Ok(all.into_iter().step_by(step).take(SLUGS).collect())
}

/// The daemon's CPU time over `requests` reads, per request, with the load's latencies.
async fn measure_one(
    mode: &mut Mode,
    paths: Arc<Vec<String>>,
    requests: usize,
    hz: u64,
) -> Result<Measure> {
    let pid = mode.daemon.child.id();
    let before = common::cpu_ticks(pid)?;
    let began = Instant::now();
    let (latencies, errors) = load(mode, paths, requests).await?;
    let wall = began.elapsed();
    let after = common::cpu_ticks(pid)?;
    ensure!(errors == 0, "{}: {errors} answers were not 200", mode.label);
    let cpu_s = after.saturating_sub(before) as f64 / hz as f64;
    let (p50, p99) = common::stats(latencies);
    Ok(Measure {
        cpu_us_per_request: cpu_s * 1e6 / requests as f64,
        p50,
        p99,
        rps: requests as f64 / wall.as_secs_f64(),
    })
}

/// `requests` reads of `paths` in turn over `CONNECTIONS` keep-alive connections, each
/// sending its next request as soon as its last answer is read: the latencies of the 200
/// answers, and how many were not 200.
async fn load(
    mode: &Mode,
    paths: Arc<Vec<String>>,
    requests: usize,
) -> Result<(Vec<Duration>, usize)> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        let (paths, next, token, addr) =
            (paths.clone(), next.clone(), mode.token.clone(), mode.addr);
        tasks.push(tokio::spawn(async move {
            let mut conn = match &token {
                Some(t) => common::Conn::open_with_token(addr, t).await?,
                None => common::Conn::open(addr).await?,
            };
            let mut latencies = Vec::with_capacity(requests / CONNECTIONS + 1);
            let mut errors = 0;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests {
                    break;
                }
                let t0 = Instant::now();
                let (status, _) = conn.get(&paths[i % paths.len()]).await?;
                if status == StatusCode::OK {
                    latencies.push(t0.elapsed());
                } else {
                    errors += 1;
                }
            }
            anyhow::Ok((latencies, errors))
        }));
    }
    let mut all = Vec::with_capacity(requests);
    let mut errors = 0;
    for task in tasks {
        let (latencies, e) = task.await??;
        all.extend(latencies);
        errors += e;
    }
    Ok((all, errors))
}
