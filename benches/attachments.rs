//! `cargo bench --bench attachments`: attachments against the file system. A release
//! daemon serves a vault under `target/bench-attachments/` (the same disk as the
//! reference copies):
//!
//! - upload of a 20 MiB PDF (`POST /v1/attachments`, multipart; the answer leaves once the
//!   file is in place and fsynced, and, before issue 48, in `history.git`: a large upload's
//!   history commit now follows the answer) beside `cp` of the same file into the vault,
//!   and `cp` followed by `sync` of the copy (what the daemon's durability costs a shell
//!   user), interleaved over rounds; also the time until the upload's history commit
//!   landed (untimed for the others: each round waits for it before going on);
//! - download of it (`GET /v1/attachments/{name}`, the whole body read) beside `cp` of it
//!   out of the vault, interleaved;
//! - listing 10,000 attachments: the first page of `GET /v1/attachments` and a filtered
//!   list, p50 and p99 at one connection.
//!
//! Throughput is MB/s of the 20 MiB (median of the rounds); the ratio is daemon / `cp`.
//! Target: upload and download ≥ 0.5× `cp`, upload ≥ 0.8× `cp` + `sync`. Environment:
//! `NOTEVAULT_BENCH_ROUNDS` (default 7); `NOTEVAULT_BENCH_DAEMON`, another daemon binary
//! to measure (an older build, to compare two on one machine).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the editor and the operator: they write the vault and read the environment"
)]

mod common;

use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

const SIZE: usize = 20 * 1024 * 1024;
const LISTED: usize = 10_000;

fn main() -> ExitCode {
    common::bench_main("attachments", run)
}

fn rounds() -> usize {
    std::env::var("NOTEVAULT_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(7)
}

/// 20 MiB that sniff as a PDF and do not compress (xorshift bytes after the header).
fn pdf_bytes() -> Vec<u8> {
    let mut out = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while out.len() < SIZE {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(SIZE);
    out
}

fn mbps(d: Duration) -> f64 {
    SIZE as f64 / 1e6 / d.as_secs_f64()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn timed_cmd(args: &[&str]) -> Result<Duration> {
    let started = Instant::now();
    let status = Command::new(args[0]).args(&args[1..]).status()?;
    ensure!(status.success(), "{args:?} failed");
    Ok(started.elapsed())
}

/// What `history.git`'s HEAD names now (empty before the first commit).
fn history_head(state: &Path) -> String {
    let git = state.join("history.git");
    let head = std::fs::read_to_string(git.join("HEAD")).unwrap_or_default();
    match head.trim().strip_prefix("ref: ") {
        Some(r) => std::fs::read_to_string(git.join(r)).unwrap_or_default(),
        None => head,
    }
}

/// Wait until a history commit newer than `before` records `path` (polled: the ref file,
/// then `git log` when it moved).
fn wait_for_commit(state: &Path, before: &str, path: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = before.to_string();
    while Instant::now() < deadline {
        let now = history_head(state);
        if now != seen {
            seen = now;
            let log = Command::new("git")
                .arg("--git-dir")
                .arg(state.join("history.git"))
                .args(["log", "-5", "--format=%B"])
                .output()?;
            if String::from_utf8_lossy(&log.stdout)
                .contains(&format!("Notevault-Attachment: {path}"))
            {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    anyhow::bail!("{path} did not reach history within 120 s")
}

fn multipart(name: &str, bytes: &[u8]) -> (String, Vec<u8>) {
    let boundary = "notevault-bench-boundary-7d1f";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"folder\"\r\n\r\nuploads\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: application/pdf\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

fn run() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-attachments");
    let _ = std::fs::remove_dir_all(&root);
    let vault = root.join("vault");
    let state = root.join("state");
    std::fs::create_dir_all(vault.join("uploads"))?;
    std::fs::write(vault.join("index.md"), "# Attachments bench\n")?;
    // 10,000 small images in 100 folders, for the listing.
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";
    for i in 0..LISTED {
        let dir = vault.join(format!("media/set-{:03}", i % 100));
        std::fs::create_dir_all(&dir)?;
        let mut bytes = png.to_vec();
        bytes.extend_from_slice(format!("image {i}").as_bytes());
        std::fs::write(dir.join(format!("image-{i:05}.png")), bytes)?;
    }
    let source = root.join("source.pdf");
    std::fs::write(&source, pdf_bytes())?;
    let bytes = std::fs::read(&source)?;

    let daemon = match std::env::var("NOTEVAULT_BENCH_DAEMON") {
        Ok(bin) => common::start_bin(&bin, &vault, &state)?,
        Err(_) => common::start(&vault, &state)?,
    };
    let base = daemon.base.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let client = reqwest::Client::new();
    let rounds = rounds();

    // Wait for the start-up scan to have every attachment listed.
    rt.block_on(async {
        for _ in 0..600 {
            let answer: serde_json::Value = client
                .get(format!("{base}/v1/attachments?page_size=1"))
                .send()
                .await?
                .json()
                .await?;
            if answer["coverage"]["attachments_total"].as_u64() >= Some(LISTED as u64) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("the attachments were not all listed within 60 s")
    })?;

    let (mut up, mut cp_in, mut cp_sync, mut down, mut cp_out) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut landed = Vec::new();
    for round in 0..rounds {
        let name = format!("report-{round}.pdf");
        let (content_type, body) = multipart(&name, &bytes);
        // Sent as shared bytes: the timed request copies nothing before it is sent.
        let body = bytes::Bytes::from(body);
        let upload = || -> Result<(Duration, Duration)> {
            let before = history_head(&state);
            let answered = rt.block_on(async {
                let started = Instant::now();
                let res = client
                    .post(format!("{base}/v1/attachments"))
                    .header("content-type", &content_type)
                    .header("idempotency-key", format!("bench-upload-{round}"))
                    .body(body.clone())
                    .send()
                    .await?;
                let status = res.status();
                let text = res.text().await?;
                ensure!(status.as_u16() == 201, "upload: {status} {text}");
                Ok((started, started.elapsed()))
            })?;
            let (started, answered) = answered;
            wait_for_commit(&state, &before, &format!("uploads/{name}"))?;
            Ok((answered, started.elapsed()))
        };
        let copy_in = |sync: bool| -> Result<Duration> {
            let to = vault.join(format!("uploads/cp-{round}-{sync}.pdf"));
            let to = to.to_str().context("path")?;
            let started = Instant::now();
            timed_cmd(&["cp", source.to_str().context("path")?, to])?;
            if sync {
                timed_cmd(&["sync", to])?;
            }
            Ok(started.elapsed())
        };
        // The order alternates each round: the machine's speed drifts.
        if round % 2 == 0 {
            let (answered, in_history) = upload()?;
            up.push(answered);
            landed.push(in_history);
            cp_in.push(copy_in(false)?);
            cp_sync.push(copy_in(true)?);
        } else {
            cp_sync.push(copy_in(true)?);
            cp_in.push(copy_in(false)?);
            let (answered, in_history) = upload()?;
            up.push(answered);
            landed.push(in_history);
        }
        let download = || -> Result<Duration> {
            rt.block_on(async {
                let started = Instant::now();
                let res = client
                    .get(format!("{base}/v1/attachments/uploads%2F{name}"))
                    .send()
                    .await?;
                ensure!(res.status() == 200, "download: {}", res.status());
                let got = res.bytes().await?;
                ensure!(got.len() == SIZE, "download: {} bytes", got.len());
                Ok(started.elapsed())
            })
        };
        let copy_out = || -> Result<Duration> {
            let from = vault.join(format!("uploads/{name}"));
            let to = root.join(format!("out-{round}.pdf"));
            timed_cmd(&[
                "cp",
                from.to_str().context("path")?,
                to.to_str().context("path")?,
            ])
        };
        if round % 2 == 0 {
            down.push(download()?);
            cp_out.push(copy_out()?);
        } else {
            cp_out.push(copy_out()?);
            down.push(download()?);
        }
    }

    let list = |path: &str| -> Result<(Duration, Duration)> {
        rt.block_on(async {
            let mut times = Vec::new();
            for _ in 0..200 {
                let started = Instant::now();
                let res = client.get(format!("{base}{path}")).send().await?;
                ensure!(res.status() == 200, "{path}: {}", res.status());
                res.bytes().await?;
                times.push(started.elapsed());
            }
            Ok(common::stats(times))
        })
    };
    let first_page = list("/v1/attachments")?;
    let filtered = list("/v1/attachments?filter=folder%3D%22media%2Fset-042%22&page_size=500")?;
    drop(daemon);

    let row = |what: &str, measured: String, reference: &str| {
        println!("| {what:<58} | {measured:<22} | {reference:<28} |");
    };
    println!("\n## attachments ({rounds} rounds, 20 MiB, order alternating)\n");
    println!(
        "| {:<58} | {:<22} | {:<28} |",
        "figure", "measured (median)", "target / reference"
    );
    println!("|{:-<60}|{:-<24}|{:-<30}|", "", "", "");
    let (up_m, cp_m, cps_m, down_m, out_m) = (
        median(up),
        median(cp_in),
        median(cp_sync),
        median(down),
        median(cp_out),
    );
    row(
        "upload, POST /v1/attachments (durable in the folder)",
        format!("{:.0} MB/s ({})", mbps(up_m), common::ms(up_m)),
        "",
    );
    row(
        "reference: cp into the vault",
        format!("{:.0} MB/s ({})", mbps(cp_m), common::ms(cp_m)),
        "",
    );
    row(
        "reference: cp into the vault, then sync of the copy",
        format!("{:.0} MB/s ({})", mbps(cps_m), common::ms(cps_m)),
        "",
    );
    row(
        "upload / cp",
        format!("{:.2}x", mbps(up_m) / mbps(cp_m)),
        ">= 0.50x",
    );
    row(
        "upload / (cp + sync)",
        format!("{:.2}x", mbps(up_m) / mbps(cps_m)),
        ">= 0.80x",
    );
    let landed_m = median(landed);
    row(
        "upload until its history commit landed",
        format!("{:.0} MB/s ({})", mbps(landed_m), common::ms(landed_m)),
        "",
    );
    row(
        "download, GET /v1/attachments/{name}",
        format!("{:.0} MB/s ({})", mbps(down_m), common::ms(down_m)),
        "",
    );
    row(
        "reference: cp out of the vault",
        format!("{:.0} MB/s ({})", mbps(out_m), common::ms(out_m)),
        "",
    );
    row(
        "download / cp",
        format!("{:.2}x", mbps(down_m) / mbps(out_m)),
        ">= 0.50x",
    );
    row(
        "list 10,000 attachments, first page: p50 / p99",
        format!(
            "{} / {}",
            common::ms(first_page.0),
            common::ms(first_page.1)
        ),
        "",
    );
    row(
        "list, filter folder (100 of 10,000): p50 / p99",
        format!("{} / {}", common::ms(filtered.0), common::ms(filtered.1)),
        "",
    );
    Ok(())
}
