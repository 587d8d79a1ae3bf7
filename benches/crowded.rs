//! `cargo bench --bench crowded`: what a create costs in a crowded folder, and how large
//! history grows when one folder fills (issue 46), on the real corpus.
//!
//! 1. The corpus plus a folder `crowded/` of `NOTEVAULT_BENCH_CROWD` (default 20,000)
//!    notes an editor made before the start. Single-client creates alternate between a
//!    new folder (`fresh/`, empty at the start) and `crowded/`, `NOTEVAULT_BENCH_CREATES`
//!    (default 200) each: p50/p99 of each and their ratio (target ≤ 1.5).
//! 2. `NOTEVAULT_BENCH_FILL` (default 10,000) creates into the corpus's largest folder
//!    (`tldr/pages/common`) by 16 clients: creates/s and p50/p99. Then, once the daemon
//!    is idle (history's background packing done), `history.git`'s size against a copy
//!    of it after `git gc --aggressive --prune=now` (target ≤ 2×), `git fsck --full` of
//!    the daemon's own repository, and every commit's tree readable (`git rev-list
//!    --objects --all`).
//!
//! `NOTEVAULT_BENCH_BIN` measures another daemon binary (to compare two builds).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the editor and the operator: they write the vault and read the environment"
)]

mod common;

use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use common::{copy, corpus, env_num, ms, start_bin, stats, wait_history, wait_idle, BIN};
use serde_json::json;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crowded bench failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// One create; its latency, or the answer when it is not 201.
async fn create(
    client: &reqwest::Client,
    base: &str,
    slug: &str,
    content: &str,
) -> Result<Duration> {
    let t = Instant::now();
    let res = client
        .post(format!("{base}/v1/notes"))
        .header("Idempotency-Key", slug)
        .json(&json!({"slug": slug, "content": content}))
        .send()
        .await?;
    let status = res.status();
    let body = res.text().await?;
    let took = t.elapsed();
    ensure!(status == 201, "create {slug}: {status} {body}");
    Ok(took)
}

/// The bytes below `dir` (files only), as `du --apparent-size` would count them.
fn bytes_below(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

fn git_dir(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(dir)
        .args(args)
        .output()
        .context("git")?;
    if !out.status.success() {
        bail!(
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

async fn run() -> Result<()> {
    let Some(corpus) = corpus() else {
        println!("skipped: ../shared/corpora/realvault.tar.gz not found");
        return Ok(());
    };
    let crowd = env_num("NOTEVAULT_BENCH_CROWD", 20_000);
    let n = env_num("NOTEVAULT_BENCH_CREATES", 200);
    let fill = env_num("NOTEVAULT_BENCH_FILL", 10_000);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-corpus/crowded-run");
    std::fs::create_dir_all(&root)?;
    let vault = root.join("vault");
    let state = root.join("state");
    let _ = std::fs::remove_dir_all(&state);
    copy(&corpus, &vault)?;
    std::fs::create_dir_all(vault.join("crowded"))?;
    for i in 0..crowd {
        std::fs::write(
            vault.join(format!("crowded/n{i:05}.md")),
            format!("# Note {i}\n\nmade by an editor before the start, {i}\n"),
        )?;
    }

    let bin = std::env::var("NOTEVAULT_BENCH_BIN").unwrap_or_else(|_| BIN.to_string());
    let daemon = start_bin(&bin, &vault, &state)?;
    wait_history(&state).await?;
    wait_idle(daemon.child.id(), Duration::from_secs(300)).await?;
    let client = reqwest::Client::new();
    let base = daemon.base.clone();

    let (mut fresh, mut crowded) = (Vec::new(), Vec::new());
    for i in 0..n {
        let content = format!("# Created {i}\n\nby the bench\n");
        fresh.push(create(&client, &base, &format!("fresh/c{i:05}"), &content).await?);
        crowded.push(create(&client, &base, &format!("crowded/c{i:05}"), &content).await?);
    }
    let (f50, f99) = stats(fresh);
    let (c50, c99) = stats(crowded);

    let folder = "tldr/pages/common";
    let before = std::fs::read_dir(vault.join(folder))?.count();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (client, base, next) = (client.clone(), base.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut took = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= fill {
                    return Ok::<_, anyhow::Error>(took);
                }
                let content = format!(
                    "# fill-{i}\n\n> A page written by the bench, {i}.\n\n- `fill-{i} --help`\n"
                );
                took.push(
                    create(&client, &base, &format!("{folder}/fill-{i:05}"), &content).await?,
                );
            }
        }));
    }
    let mut filled = Vec::new();
    for t in tasks {
        filled.extend(t.await??);
    }
    let rate = filled.len() as f64 / started.elapsed().as_secs_f64();
    let (l50, l99) = stats(filled);
    let settle = Instant::now();
    wait_idle(daemon.child.id(), Duration::from_secs(600)).await?;
    let settled = settle.elapsed();

    let history = state.join("history.git");
    let size = bytes_below(&history);
    let loose = bytes_below(&history.join("objects")) - bytes_below(&history.join("objects/pack"));
    let packs = std::fs::read_dir(history.join("objects/pack"))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .count();
    let fsck = Command::new("git")
        .arg("--git-dir")
        .arg(&history)
        .args(["fsck", "--full", "--no-progress"])
        .output()?;
    let commits: u64 = git_dir(&history, &["rev-list", "--count", "HEAD"])?
        .trim()
        .parse()?;
    let objects = git_dir(&history, &["rev-list", "--objects", "--all"])?
        .lines()
        .count();
    drop(daemon);

    let gc = root.join("gc.git");
    copy(&history, &gc)?;
    let t = Instant::now();
    git_dir(&gc, &["gc", "--aggressive", "--prune=now", "--quiet"])?;
    let gc_time = t.elapsed();
    let gc_size = bytes_below(&gc);

    println!(
        "crowded bench: {crowd} notes in crowded/ before the start; load {}",
        common::loadavg()
    );
    println!("| figure | value | target |");
    println!("|---|---|---|");
    println!(
        "| create p50 / p99, new folder | {} / {} | |",
        ms(f50),
        ms(f99)
    );
    println!(
        "| create p50 / p99, folder of {crowd} | {} / {} | |",
        ms(c50),
        ms(c99)
    );
    println!(
        "| crowded / new, p50 | {:.2}× | ≤ 1.5× |",
        c50.as_secs_f64() / f50.as_secs_f64()
    );
    println!(
        "| {fill} creates into {folder} ({before} entries before), 16 clients | {rate:.0}/s, p50 {} p99 {} | |",
        ms(l50),
        ms(l99)
    );
    println!(
        "| idle after the creates | {:.1} s | |",
        settled.as_secs_f64()
    );
    println!(
        "| history.git | {} ({} loose, {packs} packs), {commits} commits, {objects} objects | |",
        mib(size),
        mib(loose)
    );
    println!(
        "| the same after `git gc --aggressive` ({:.0} s) | {} | |",
        gc_time.as_secs_f64(),
        mib(gc_size)
    );
    println!(
        "| history.git / gc'd | {:.2}× | ≤ 2× |",
        size as f64 / gc_size as f64
    );
    println!(
        "| `git fsck --full` | {} | clean |",
        if fsck.status.success() && fsck.stdout.is_empty() {
            "clean".to_string()
        } else {
            format!(
                "{} {}",
                String::from_utf8_lossy(&fsck.stdout)
                    .lines()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join("; "),
                String::from_utf8_lossy(&fsck.stderr)
                    .lines()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }
    );
    if std::env::var_os("NOTEVAULT_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&root);
    }
    Ok(())
}
