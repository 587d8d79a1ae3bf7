//! The device sync plane over the 44k-note corpus: a whole snapshot (paged, time and
//! bytes) beside `git clone` of `history.git` on the same machine; ops read throughput;
//! a device catching up after 10,000 changes (editor saves the watcher records).
//!
//! `cargo bench --bench sync` (`NOTEVAULT_BENCH_ROUNDS`, default 3;
//! `NOTEVAULT_BENCH_CHANGES`, default 10,000).

#![allow(
    clippy::disallowed_methods,
    reason = "the bench plays the editor and the operator"
)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use serde_json::Value;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn get(client: &reqwest::Client, url: &str) -> Result<(Value, usize)> {
    let res = client.get(url).send().await?;
    let status = res.status();
    let bytes = res.bytes().await?;
    ensure!(status.is_success(), "{url}: {status}");
    Ok((serde_json::from_slice(&bytes)?, bytes.len()))
}

/// Read every page of the snapshot: (entries, bytes, pages, seq).
async fn snapshot(client: &reqwest::Client, base: &str) -> Result<(usize, usize, usize, i64)> {
    let (mut entries, mut bytes, mut pages) = (0, 0, 0);
    let mut token: Option<String> = None;
    loop {
        let url = match &token {
            Some(t) => format!("{base}/v1/sync/snapshot?page_size=500&page_token={t}"),
            None => format!("{base}/v1/sync/snapshot?page_size=500"),
        };
        let (page, n) = get(client, &url).await?;
        bytes += n;
        pages += 1;
        entries += page["entries"].as_array().map_or(0, Vec::len);
        match page["next_page_token"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => return Ok((entries, bytes, pages, page["seq"].as_i64().unwrap_or(0))),
        }
    }
}

/// Read every op after `after`: (ops, bytes, pages, last seq).
async fn ops(
    client: &reqwest::Client,
    base: &str,
    mut after: i64,
) -> Result<(usize, usize, usize, i64)> {
    let (mut count, mut bytes, mut pages) = (0, 0, 0);
    loop {
        let url = format!("{base}/v1/sync/ops?after_seq={after}&page_size=500");
        let (page, n) = get(client, &url).await?;
        bytes += n;
        pages += 1;
        count += page["ops"].as_array().map_or(0, Vec::len);
        after = page["next_after_seq"].as_i64().unwrap_or(after);
        if page["has_more"] != true {
            return Ok((count, bytes, pages, after));
        }
    }
}

fn du(path: &Path) -> u64 {
    walkdir::WalkDir::new(path)
        .into_iter()
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> Result<()> {
    let Some(corpus) = common::corpus() else {
        println!("sync: no corpus (../shared/corpora/realvault.tar.gz); skipped");
        return Ok(());
    };
    let rounds = env_usize("NOTEVAULT_BENCH_ROUNDS", 3);
    let changes = env_usize("NOTEVAULT_BENCH_CHANGES", 10_000);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-sync");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root)?;
    let (vault, state) = (root.join("vault"), root.join("state"));
    common::copy(&corpus, &vault)?;
    let daemon = common::start(&vault, &state)?;
    common::wait_history(&state).await?;
    let client = reqwest::Client::new();
    let base = daemon.base.clone();

    // The snapshot, whole, paged by 500; beside git clone of history.git.
    let mut snap_times = Vec::new();
    let mut clone_times = Vec::new();
    let mut snap = (0, 0, 0, 0);
    let mut clone_bytes = 0;
    for round in 0..rounds {
        let t = Instant::now();
        snap = snapshot(&client, &base).await?;
        snap_times.push(t.elapsed());
        let dest = root.join(format!("clone-{round}"));
        let t = Instant::now();
        let ok = std::process::Command::new("git")
            .args(["clone", "--quiet", "--no-local"])
            .arg(state.join("history.git"))
            .arg(&dest)
            .status()
            .context("git clone")?
            .success();
        clone_times.push(t.elapsed());
        ensure!(ok, "git clone failed");
        clone_bytes = du(&dest);
        let _ = std::fs::remove_dir_all(&dest);
    }
    println!(
        "snapshot: {} entries, {} pages of 500, {} of JSON; median {} over {rounds} rounds ({:.0} entries/s)",
        snap.0,
        snap.2,
        mib(snap.1),
        common::ms(median(snap_times.clone())),
        snap.0 as f64 / median(snap_times).as_secs_f64()
    );
    println!(
        "git clone --no-local of history.git: median {} ({} on disk, work tree and .git)",
        common::ms(median(clone_times)),
        mib(clone_bytes as usize)
    );

    // The whole op log from 0 (one op per note of the first commit, and more).
    let mut op_times = Vec::new();
    let mut all = (0, 0, 0, 0);
    for _ in 0..rounds {
        let t = Instant::now();
        all = ops(&client, &base, 0).await?;
        op_times.push(t.elapsed());
    }
    let t = median(op_times);
    println!(
        "ops from seq 0: {} ops, {} pages, {}; median {} ({:.0} ops/s)",
        all.0,
        all.2,
        mib(all.1),
        common::ms(t),
        all.0 as f64 / t.as_secs_f64()
    );

    // A device at the snapshot's seq; 10,000 editor saves; its catch-up.
    let device_seq = all.3;
    let notes: Vec<_> = walkdir::WalkDir::new(&vault)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_type().is_file()
                && e.path().extension().is_some_and(|x| x == "md")
                && !e.path().starts_with(vault.join(".notevault"))
        })
        .map(|e| e.path().to_path_buf())
        .take(changes)
        .collect();
    for (i, path) in notes.iter().enumerate() {
        let mut bytes = std::fs::read(path)?;
        bytes.extend_from_slice(format!("\nsync bench edit {i}\n").as_bytes());
        std::fs::write(path, bytes)?;
    }
    let target = device_seq + notes.len() as i64;
    let started = Instant::now();
    loop {
        let (page, _) = get(
            &client,
            &format!("{base}/v1/sync/ops?after_seq={device_seq}&page_size=1"),
        )
        .await?;
        if page["committed_seq"].as_i64().unwrap_or(0) >= target {
            break;
        }
        ensure!(
            started.elapsed() < Duration::from_secs(600),
            "the watcher did not record the edits"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "{} editor saves recorded by the watcher in {}",
        notes.len(),
        common::ms(started.elapsed())
    );
    let t = Instant::now();
    let caught = ops(&client, &base, device_seq).await?;
    let t = t.elapsed();
    println!(
        "catch-up after {} changes: {} ops, {} pages, {}, {} ({:.0} ops/s)",
        notes.len(),
        caught.0,
        caught.2,
        mib(caught.1),
        common::ms(t),
        caught.0 as f64 / t.as_secs_f64()
    );
    drop(daemon);
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}
