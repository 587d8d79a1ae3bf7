//! A scaling curve: the same figures on vaults of ~11k, ~44k and ~178k notes built from
//! the real corpus, and how each grows per note.
//!
//! - `11k`: a quarter of the corpus: every 4th note of each folder (in name order), so
//!   each folder and each source keeps its share; every other file (licences) is kept.
//!   Links to the notes left out stay in the kept notes as unresolved links.
//! - `44k`: the whole corpus.
//! - `178k`: four copies of it under `copy-1/` … `copy-4/` (links stay inside their copy).
//!
//! The vaults are hard links to the unpacked corpus (a plain copy where linking fails),
//! made under `target/bench-scale/` and removed at the end unless `NOTEVAULT_BENCH_KEEP=1`.
//! The daemon writes a note by a temporary file and a rename, which replaces a link
//! instead of writing through it, and the bench only creates new notes.
//!
//! For each size: first start on a fresh state dir (spawn → first 200 of
//! `GET /v1/notes?page_size=1`, spawn → every note searchable, the `vault scanned` log
//! line, VmHWM once history and index are complete and the index's segments merged),
//! warm start (second start, same state dir, spawn → first 200), `GET /v1/search` p50 at
//! 8 connections once any merge is done (the query mix of the search bench), single-client `POST /v1/notes` p50, VmRSS after the loads, then
//! `notevault reindex` (a whole process) as the cold index time. The page cache is not
//! dropped (the machine is shared): "cold" means a fresh index, not a cold disk.
//!
//! `cargo bench --bench scale`; `NOTEVAULT_BENCH_SIZES` (e.g. `11k,44k`),
//! `NOTEVAULT_BENCH_SECONDS` (search load, default 5), `NOTEVAULT_BENCH_CREATES`
//! (default 100), `NOTEVAULT_BENCH_KEEP=1` keeps the vaults and state dirs,
//! `NOTEVAULT_BENCH_BIN` measures another build of the daemon (another profile, say).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the editor and the operator: they write the vault and read the environment"
)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use common::{load, Conn, Daemon};
use hyper::StatusCode;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};

/// Below this much free space the bench refuses to build its vaults.
const MIN_FREE_BYTES: u64 = 8 << 30;
/// A ratio of per-note costs above this is called growth (the machine drifts 20–40 %).
const GROWTH: f64 = 1.25;
const START_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Quarter,
    Whole,
    Copies(usize),
}

const SIZES: &[(&str, Shape)] = &[
    ("11k", Shape::Quarter),
    ("44k", Shape::Whole),
    ("178k", Shape::Copies(4)),
];

fn main() -> ExitCode {
    common::bench_main("scale", run)
}

/// Everything measured on one vault.
struct Point {
    label: &'static str,
    notes: usize,
    bytes: u64,
    first_serving: Duration,
    first_searchable: Duration,
    first_scan: Option<(u64, u64)>,
    hwm_mib: f64,
    warm: Duration,
    warm_scan: Option<(u64, u64)>,
    search_p50: Duration,
    search_p99: Duration,
    search_rps: f64,
    create_p50: Duration,
    create_p99: Duration,
    rss_mib: f64,
    reindex: Duration,
    load_before: String,
    load_after: String,
}

impl Point {
    /// 25 MiB per 10k notes + 40 MiB + the notes' bytes (held for grep).
    fn budget_mib(&self) -> f64 {
        25.0 * self.notes as f64 / 10_000.0 + 40.0 + self.bytes as f64 / 1_048_576.0
    }
}

fn run() -> Result<()> {
    let Some(corpus) = common::corpus() else {
        println!("scale bench skipped: ../shared/corpora/realvault.tar.gz is absent");
        return Ok(());
    };
    let wanted = std::env::var("NOTEVAULT_BENCH_SIZES").unwrap_or_default();
    let wanted: Vec<&str> = wanted
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    for w in &wanted {
        ensure!(
            SIZES.iter().any(|(l, _)| l == w),
            "NOTEVAULT_BENCH_SIZES: unknown size {w:?} (known: 11k, 44k, 178k)"
        );
    }
    let sizes: Vec<_> = SIZES
        .iter()
        .filter(|(l, _)| wanted.is_empty() || wanted.contains(l))
        .collect();
    let seconds = common::env_num("NOTEVAULT_BENCH_SECONDS", 5);
    let creates = common::env_num("NOTEVAULT_BENCH_CREATES", 100) as usize;
    let bin = std::env::var("NOTEVAULT_BENCH_BIN").unwrap_or_else(|_| common::BIN.to_string());
    let keep = std::env::var("NOTEVAULT_BENCH_KEEP").is_ok_and(|v| v == "1");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = root.join("target/bench-scale");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let free = free_bytes(&work)?;
    ensure!(
        free >= MIN_FREE_BYTES,
        "only {:.1} GB free under {}: the bench needs 8 GB",
        free as f64 / 1e9,
        work.display()
    );
    println!(
        "scale bench: sizes {}, {} cores, {seconds} s search loads, {creates} creates, {:.1} GB free, load average {}",
        sizes.iter().map(|(l, _)| *l).collect::<Vec<_>>().join(", "),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        free as f64 / 1e9,
        common::loadavg()
    );
    println!("daemon: {bin}");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut points = Vec::new();
    let result = (|| -> Result<()> {
        for (label, shape) in &sizes {
            let dir = work.join(label);
            let vault = dir.join("vault");
            let state = dir.join("state");
            let t0 = Instant::now();
            let linked = build_vault(&corpus, &vault, *shape)?;
            let (notes, bytes) = common::markdown_files(&vault);
            println!(
                "\n[{label}] {notes} notes, {:.1} MB of markdown, built in {} ms ({linked})",
                bytes as f64 / 1e6,
                t0.elapsed().as_millis()
            );
            points.push(measure(
                &rt, &bin, label, &vault, &state, notes, bytes, creates, seconds,
            )?);
            if !keep {
                std::fs::remove_dir_all(&dir)?;
            }
        }
        Ok(())
    })();
    if !keep {
        let _ = std::fs::remove_dir_all(&work);
    } else {
        println!("kept the vaults and state dirs under {}", work.display());
    }
    result?;
    print_table(&points);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn measure(
    rt: &tokio::runtime::Runtime,
    bin: &str,
    label: &'static str,
    vault: &Path,
    state: &Path,
    notes: usize,
    bytes: u64,
    creates: usize,
    seconds: u64,
) -> Result<Point> {
    let load_before = common::loadavg();

    // First start: fresh state dir.
    let t0 = Instant::now();
    let daemon = common::start_bin(bin, vault, state)?;
    let addr = common::addr_of(&daemon.base)?;
    rt.block_on(first_ok(&daemon, addr))?;
    let first_serving = t0.elapsed();
    let st = rt.block_on(common::wait_indexed(addr, START_TIMEOUT))?;
    let first_searchable = t0.elapsed();
    rt.block_on(common::wait_history(state))?;
    rt.block_on(common::wait_scan_cache(state, t0))?;
    // Stopped before its merge ends, the next start would merge again under the loads.
    let merged = rt.block_on(common::wait_merged(addr, START_TIMEOUT))?;
    let first_merged = t0.elapsed();
    let hwm_mib = common::proc_status_mib(daemon.child.id(), "VmHWM:")?;
    let first_scan = scanned(&daemon);
    println!(
        "  first start: serving {} ms, every note searchable {} ms (index of {} notes in {} ms), {}, merged into {} segment(s) {} ms, VmHWM {hwm_mib:.0} MiB",
        first_serving.as_millis(),
        first_searchable.as_millis(),
        st["search_index"]["synced_notes"],
        st["search_index"]["sync_ms"],
        scan_text(first_scan),
        merged["search_index"]["segments"],
        first_merged.as_millis(),
    );
    stop(daemon)?;

    // Warm start: the same state dir; the loads run on this daemon.
    let t0 = Instant::now();
    let daemon = common::start_bin(bin, vault, state)?;
    let addr = common::addr_of(&daemon.base)?;
    rt.block_on(first_ok(&daemon, addr))?;
    let warm = t0.elapsed();
    rt.block_on(common::wait_indexed(addr, START_TIMEOUT))?;
    // The verify that follows a warm start starts the index: then every note is current.
    let warm_settled = t0.elapsed();
    let st = rt.block_on(common::wait_merged(addr, START_TIMEOUT))?;
    let warm_scan = scanned(&daemon);
    println!(
        "  warm start: serving {} ms, verified and indexed {} ms, {}, {} index segments",
        warm.as_millis(),
        warm_settled.as_millis(),
        scan_text(warm_scan),
        st["search_index"]["segments"]
    );

    let paths: Vec<String> = common::SEARCH_QUERIES
        .iter()
        .map(|q| format!("/v1/search?q={}", utf8_percent_encode(q, NON_ALPHANUMERIC)))
        .collect();
    rt.block_on(check_queries(addr, &paths))?;
    let r = rt.block_on(load(
        addr,
        Arc::new(paths),
        8,
        Duration::from_secs(1),
        Duration::from_secs(seconds),
    ))?;
    println!("  search at 8 connections: {}", r.summary());
    ensure!(r.errors == 0, "{} searches failed", r.errors);

    let samples = rt.block_on(create_latencies(&daemon.base, label, creates))?;
    let (create_p50, create_p99) = common::stats(samples);
    println!(
        "  {creates} creates, one client: p50 {} p99 {}",
        common::ms(create_p50),
        common::ms(create_p99)
    );
    let rss_mib = common::proc_status_mib(daemon.child.id(), "VmRSS:")?;
    println!("  VmRSS after the loads {rss_mib:.0} MiB");
    stop(daemon)?;

    // Cold index build: a whole `notevault reindex` process.
    let t0 = Instant::now();
    let out = Command::new(bin)
        .args([
            "reindex",
            vault.to_str().context("vault path")?,
            "--state-dir",
            state.to_str().context("state path")?,
        ])
        .env("NOTEVAULT_LOG", "warn")
        .output()?;
    let reindex = t0.elapsed();
    ensure!(
        out.status.success(),
        "reindex failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "  reindex: {} ms ({})",
        reindex.as_millis(),
        String::from_utf8_lossy(&out.stdout).trim()
    );
    let load_after = common::loadavg();
    println!("  load average {load_before} -> {load_after}");
    Ok(Point {
        label,
        notes,
        bytes,
        first_serving,
        first_searchable,
        first_scan,
        hwm_mib,
        warm,
        warm_scan,
        search_p50: r.p50,
        search_p99: r.p99,
        search_rps: r.rps,
        create_p50,
        create_p99,
        rss_mib,
        reindex,
        load_before,
        load_after,
    })
}

// ---------------------------------------------------------------------------------------
// Vaults

/// Make `vault` in `shape` from `corpus`; says whether the files are hard links.
fn build_vault(corpus: &Path, vault: &Path, shape: Shape) -> Result<String> {
    let _ = std::fs::remove_dir_all(vault);
    std::fs::create_dir_all(vault)?;
    let mut tally = Tally::default();
    match shape {
        Shape::Quarter => link_tree(corpus, vault, true, &mut tally)?,
        Shape::Whole => link_tree(corpus, vault, false, &mut tally)?,
        Shape::Copies(n) => {
            for k in 1..=n {
                link_tree(corpus, &vault.join(format!("copy-{k}")), false, &mut tally)?;
            }
        }
    }
    Ok(format!(
        "{} hard links, {} copies",
        tally.linked, tally.copied
    ))
}

#[derive(Default)]
struct Tally {
    linked: usize,
    copied: usize,
}

/// Recreate the tree under `from` at `to` with hard links (copies where linking fails);
/// with `quarter`, only every 4th note of each folder, in name order.
fn link_tree(from: &Path, to: &Path, quarter: bool, tally: &mut Tally) -> Result<()> {
    std::fs::create_dir_all(to)?;
    let mut entries: Vec<_> = std::fs::read_dir(from)?.collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    let mut nth_note = 0usize;
    for e in entries {
        let src = e.path();
        let dst = to.join(e.file_name());
        let kind = e.file_type()?;
        if kind.is_dir() {
            link_tree(&src, &dst, quarter, tally)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if kind.is_file() {
            if quarter && e.file_name().to_string_lossy().ends_with(".md") {
                nth_note += 1;
                if nth_note % 4 != 1 {
                    continue;
                }
            }
            if std::fs::hard_link(&src, &dst).is_ok() {
                tally.linked += 1;
            } else {
                std::fs::copy(&src, &dst)
                    .with_context(|| format!("copy {} -> {}", src.display(), dst.display()))?;
                tally.copied += 1;
            }
        }
    }
    Ok(())
}

fn free_bytes(dir: &Path) -> Result<u64> {
    let c = std::ffi::CString::new(dir.to_str().context("path")?)?;
    // SAFETY: `c` is a valid NUL-terminated path; `s` is written by statvfs.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut s) };
    ensure!(rc == 0, "statvfs {}", dir.display());
    Ok(s.f_bavail as u64 * s.f_frsize as u64)
}

// ---------------------------------------------------------------------------------------
// The daemon

/// Poll `GET /v1/notes?page_size=1` until it answers 200 (a refused connection or a
/// not-yet-ready answer is retried every 5 ms).
async fn first_ok(daemon: &Daemon, addr: SocketAddr) -> Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        ensure!(Instant::now() < deadline, "no 200 within {START_TIMEOUT:?}");
        let attempt = async {
            let mut conn = Conn::open(addr).await?;
            conn.get("/v1/notes?page_size=1").await
        };
        match attempt.await {
            Ok((StatusCode::OK, _)) => return Ok(()),
            Ok((status, body)) if status.is_client_error() => bail!(
                "first request answered {status}: {}",
                String::from_utf8_lossy(&body)
            ),
            _ => {
                if let Some(log) = daemon.log.lock().ok().and_then(|l| l.last().cloned()) {
                    ensure!(!log.contains("panicked"), "the daemon panicked: {log}");
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

/// Stop the daemon by SIGINT and wait for it (killed after 60 s).
fn stop(mut daemon: Daemon) -> Result<()> {
    let _ = Command::new("kill")
        .arg("-INT")
        .arg(daemon.child.id().to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(60);
    while daemon.child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            println!("  the daemon did not stop on SIGINT within 60 s; killing it");
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// `(scan_ms, total_ms)` of the daemon's `vault scanned` line.
fn scanned(daemon: &Daemon) -> Option<(u64, u64)> {
    let log = daemon.log.lock().ok()?;
    let line = log.iter().find(|l| l.contains("vault scanned"))?;
    let field = |name: &str| -> Option<u64> {
        let rest = line.split(&format!("{name}=")).nth(1)?;
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    Some((field("scan_ms")?, field("total_ms")?))
}

fn scan_text(s: Option<(u64, u64)>) -> String {
    match s {
        Some((scan, total)) => format!("`vault scanned` scan_ms={scan} total_ms={total}"),
        None => "no `vault scanned` line".into(),
    }
}

/// Every query answers 200 and the mix finds something.
async fn check_queries(addr: SocketAddr, paths: &[String]) -> Result<()> {
    let mut conn = Conn::open(addr).await?;
    let mut hits = 0;
    for p in paths {
        hits += common::get_json(&mut conn, p).await?["results"]
            .as_array()
            .map_or(0, Vec::len);
    }
    ensure!(hits > 0, "no query of the mix found anything");
    Ok(())
}

/// `n` creates one after another (`POST /v1/notes`, the request of the writes bench).
async fn create_latencies(base: &str, label: &str, n: usize) -> Result<Vec<Duration>> {
    let client = reqwest::Client::new();
    let tag = std::process::id();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let body = serde_json::json!({
            "slug": format!("bench-scale/c{i}"),
            "content": format!("# Bench note {i}\n\nfirst version\n"),
            "agent_id": "bench",
        });
        let t0 = Instant::now();
        let res = client
            .post(format!("{base}/v1/notes"))
            .header("Idempotency-Key", format!("scale-{tag}-{label}-{i}"))
            .json(&body)
            .send()
            .await?;
        let status = res.status();
        let text = res.text().await?;
        out.push(t0.elapsed());
        ensure!(status.as_u16() == 201, "create {i}: {status} {text}");
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// The table

enum Kind {
    /// A cost that should grow in proportion to the notes: compared per note.
    PerNote,
    /// A latency: compared as is.
    Latency,
}

fn print_table(points: &[Point]) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let opt = |v: Option<u64>| v.map_or(f64::NAN, |v| v as f64);
    type Figure<'a> = (&'a str, Kind, Box<dyn Fn(&Point) -> f64 + 'a>, &'a str);
    let figures: Vec<Figure> = vec![
        (
            "cold index, `notevault reindex` (whole process)",
            Kind::PerNote,
            Box::new(move |p: &Point| ms(p.reindex)),
            "ms",
        ),
        (
            "first start: spawn -> serving (fresh state dir)",
            Kind::PerNote,
            Box::new(move |p: &Point| ms(p.first_serving)),
            "ms",
        ),
        (
            "first start: spawn -> every note searchable",
            Kind::PerNote,
            Box::new(move |p: &Point| ms(p.first_searchable)),
            "ms",
        ),
        (
            "  first start `vault scanned` scan_ms",
            Kind::PerNote,
            Box::new(move |p: &Point| opt(p.first_scan.map(|s| s.0))),
            "ms",
        ),
        (
            "  first start `vault scanned` total_ms",
            Kind::PerNote,
            Box::new(move |p: &Point| opt(p.first_scan.map(|s| s.1))),
            "ms",
        ),
        (
            "warm start: spawn -> serving (second start)",
            Kind::PerNote,
            Box::new(move |p: &Point| ms(p.warm)),
            "ms",
        ),
        (
            "  warm start `vault scanned` scan_ms",
            Kind::PerNote,
            Box::new(move |p: &Point| opt(p.warm_scan.map(|s| s.0))),
            "ms",
        ),
        (
            "  warm start `vault scanned` total_ms",
            Kind::PerNote,
            Box::new(move |p: &Point| opt(p.warm_scan.map(|s| s.1))),
            "ms",
        ),
        (
            "search p50, 8 connections",
            Kind::Latency,
            Box::new(move |p: &Point| ms(p.search_p50)),
            "ms",
        ),
        (
            "search p99, 8 connections",
            Kind::Latency,
            Box::new(move |p: &Point| ms(p.search_p99)),
            "ms",
        ),
        (
            "search throughput, 8 connections (req/s)",
            Kind::Latency,
            Box::new(move |p: &Point| 1000.0 / p.search_rps.max(1e-9)),
            "ms/req",
        ),
        (
            "create p50, one client (`POST /v1/notes`)",
            Kind::Latency,
            Box::new(move |p: &Point| ms(p.create_p50)),
            "ms",
        ),
        (
            "create p99, one client",
            Kind::Latency,
            Box::new(move |p: &Point| ms(p.create_p99)),
            "ms",
        ),
        (
            "VmHWM of the first start (scan, index, history)",
            Kind::PerNote,
            Box::new(move |p: &Point| p.hwm_mib),
            "MiB",
        ),
        (
            "VmRSS after the loads",
            Kind::PerNote,
            Box::new(move |p: &Point| p.rss_mib),
            "MiB",
        ),
    ];

    let mut header = String::from("| figure |");
    let mut rule = String::from("|---|");
    for p in points {
        header.push_str(&format!(" {} ({} notes) |", p.label, p.notes));
        rule.push_str("---|");
    }
    for w in points.windows(2) {
        header.push_str(&format!(" {} / {} |", w[1].label, w[0].label));
        rule.push_str("---|");
    }
    header.push_str(" verdict |");
    rule.push_str("---|");
    println!("\n{header}\n{rule}");
    for (name, kind, f, unit) in &figures {
        let mut row = format!("| {name} |");
        for p in points {
            let v = f(p);
            let cell = match kind {
                _ if v.is_nan() => "-".to_string(),
                Kind::PerNote if *unit == "MiB" => {
                    format!("{v:.0} MiB ({:.2} KiB/note)", v * 1024.0 / p.notes as f64)
                }
                Kind::PerNote => {
                    format!("{v:.0} ms ({:.1} us/note)", v * 1000.0 / p.notes as f64)
                }
                Kind::Latency if *unit == "ms/req" => format!("{:.0} req/s", 1000.0 / v),
                Kind::Latency => format!("{v:.2} ms"),
            };
            row.push_str(&format!(" {cell} |"));
        }
        let mut worst: f64 = 0.0;
        for w in points.windows(2) {
            let (a, b) = (f(&w[0]), f(&w[1]));
            let ratio = match kind {
                Kind::PerNote => (b / w[1].notes as f64) / (a / w[0].notes as f64),
                Kind::Latency => b / a,
            };
            if ratio.is_finite() {
                worst = worst.max(ratio);
                let what = match kind {
                    Kind::PerNote => "per note",
                    Kind::Latency if *unit == "ms/req" => "time per request",
                    Kind::Latency => "as is",
                };
                row.push_str(&format!(" {ratio:.2}x {what} |"));
            } else {
                row.push_str(" - |");
            }
        }
        let verdict = if points.len() < 2 || worst == 0.0 {
            "-"
        } else if worst <= GROWTH {
            "flat"
        } else {
            "GROWS"
        };
        row.push_str(&format!(" {verdict} |"));
        println!("{row}");
    }
    println!(
        "\n(ratios: the larger size over the smaller; per note for costs that scale with the vault; \"flat\" <= {GROWTH:.2}x, the machine's drift)"
    );
    println!("\n| memory | size | measured | budget: 25 MiB/10k notes + 40 MiB + the notes' bytes | |\n|---|---|---|---|---|");
    for p in points {
        let budget = p.budget_mib();
        for (what, v) in [
            ("VmRSS after the loads", p.rss_mib),
            ("VmHWM of the first start", p.hwm_mib),
        ] {
            println!(
                "| {what} | {} | {v:.0} MiB | {budget:.0} MiB ({:.0} MiB of notes) | {} |",
                p.label,
                p.bytes as f64 / 1_048_576.0,
                if v <= budget { "met" } else { "MISSED" }
            );
        }
    }
    println!("\n| size | load average before | after |\n|---|---|---|");
    for p in points {
        println!("| {} | {} | {} |", p.label, p.load_before, p.load_after);
    }
}
