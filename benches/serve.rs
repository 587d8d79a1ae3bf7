//! `cargo bench --bench serve`: how fast `notevault serve` starts, records the vault as its
//! first history commit, and answers line-sliced reads, on the real corpus
//! (`../shared/corpora/realvault.tar.gz`). Each figure is printed beside its target or its
//! reference (the git CLI). What each figure means: `benches/README.md`.
//!
//! Environment:
//! - `NOTEVAULT_CORPUS`: the tarball (default `../shared/corpora/realvault.tar.gz`, relative
//!   to the crate); when it is absent the bench says so and exits 0.
//! - `NOTEVAULT_BENCH_SECONDS`: measured duration of each load run (default 10).
//! - `NOTEVAULT_BENCH_RUNS`: repetitions of each start and history measure (default 5).
//! - `NOTEVAULT_BENCH_NO_DROP_CACHES=1`: never drop the page cache before a cold start.
//! - `NOTEVAULT_BENCH_BASELINE_BIN`: another build's binary; the warm starts and the read
//!   load then run on it and on this build alternately (the same state dir), side by side.
//!
//! Every start is left to settle (every note searchable, a warm start's verify done and
//! its scan cache written) before the daemon is stopped, as a daemon that ran a while
//! leaves its state dir.

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the editor and the operator: they write the vault and read the environment"
)]

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use hyper::StatusCode;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// The daemon, built by cargo with the bench (release) profile.
mod common;

use common::{load, us, Conn};

const BIN: &str = env!("CARGO_BIN_EXE_notevault");
const DEFAULT_CORPUS: &str = "../shared/corpora/realvault.tar.gz";
/// How often the start measure retries a refused connection.
const START_POLL: Duration = Duration::from_millis(5);
/// How often the history measure asks git for `HEAD`.
const GIT_POLL: Duration = Duration::from_millis(10);
const START_TIMEOUT: Duration = Duration::from_secs(120);
const HISTORY_TIMEOUT: Duration = Duration::from_secs(600);
const CONNECTIONS: usize = 8;
const READ_LIMIT: usize = 200;
/// Slugs taken from each top-level folder of the corpus for the read load.
const SLUGS_PER_FOLDER: usize = 250;
const WARMUP: Duration = Duration::from_secs(1);
/// Quiet time after a `sync`, before a file-system-heavy measure. On a journal-less ext4
/// (this machine) inode allocation skips inodes freed in the last 5 s (300 s while their
/// inode table block is dirty), so creating 44k files right after deleting many is
/// several times slower; the bench deletes nothing while it measures, syncs and waits.
const SETTLE: Duration = Duration::from_secs(6);

const TARGET_COLD: Duration = Duration::from_secs(2);
const TARGET_WARM: Duration = Duration::from_millis(300);
const TARGET_P50: Duration = Duration::from_micros(500);
const TARGET_P99: Duration = Duration::from_millis(2);

/// Slug characters sent as they are; `/` stays raw (the routes accept it raw or as `%2F`).
const SLUG: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

fn main() -> ExitCode {
    common::bench_main("serve", run)
}

struct Settings {
    seconds: u64,
    runs: usize,
    drop_caches: bool,
}

impl Settings {
    fn from_env() -> Result<Self> {
        let num = |name: &str, default: u64| -> Result<u64> {
            match std::env::var(name) {
                Ok(v) => v
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .with_context(|| format!("{name}={v:?}: expected a positive integer")),
                Err(_) => Ok(default),
            }
        };
        Ok(Self {
            seconds: num("NOTEVAULT_BENCH_SECONDS", 10)?,
            runs: usize::try_from(num("NOTEVAULT_BENCH_RUNS", 5)?)?,
            drop_caches: std::env::var_os("NOTEVAULT_BENCH_NO_DROP_CACHES").is_none(),
        })
    }
}

fn run() -> Result<()> {
    let settings = Settings::from_env()?;
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (shown, tarball) = match std::env::var_os("NOTEVAULT_CORPUS") {
        Some(p) => (p.to_string_lossy().into_owned(), PathBuf::from(p)),
        None => (DEFAULT_CORPUS.to_string(), manifest.join(DEFAULT_CORPUS)),
    };
    if !tarball.is_file() {
        println!("skipped: {shown} not found");
        return Ok(());
    }
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => manifest.join(dir),
        None => manifest.join("target"),
    };
    let corpus = unpack(&tarball, &target.join("bench-corpus"))?;
    let work = target.join("bench-corpus").join("run");
    // A run removes its copies when it ends; these are the leftovers of an interrupted one.
    remove_copies(&work)?;
    let logs = work.join("logs");
    if logs.exists() {
        std::fs::remove_dir_all(&logs)?;
    }
    std::fs::create_dir_all(&logs)?;
    let vault = work.join("vault");
    copy_tree(&corpus, &vault)?;
    // One copy per git run: nothing is deleted between measures.
    let git_copies: Vec<PathBuf> = (1..=settings.runs)
        .map(|i| work.join(format!("git-copy-{i}")))
        .collect();
    for copy in &git_copies {
        copy_tree(&corpus, copy)?;
    }
    let census = Census::of(&vault)?;
    settle(SETTLE * 2)?;

    println!("notevault serve bench");
    println!(
        "  date      {}",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
    );
    println!(
        "  machine   {} cores, {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        first_line(&sh_out("uname -sr")?)
    );
    println!("  binary    {BIN}");
    println!("  git       {}", first_line(&sh_out("git --version")?));
    println!(
        "  corpus    {} -> {} ({} .md files, {} other file(s): {}; {:.1} MB of content)",
        shown,
        corpus.display(),
        census.md,
        census.other.len(),
        census.other.join(", "),
        census.bytes as f64 / 1e6
    );
    println!(
        "  work dir  {}  (daemon logs in logs/, timed from spawn)",
        work.display()
    );
    println!(
        "  load avg  {} (other users of the machine add noise)",
        loadavg()
    );
    println!(
        "  runs      {} per start/history figure (median shown), load {} s + {} s warm-up",
        settings.runs,
        settings.seconds,
        WARMUP.as_secs()
    );
    println!();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut table = Table::default();

    // 2. History bootstrap, beside the git CLI on a copy of the same folder (interleaved).
    println!("[history] notevault bootstrap vs `git init && git add -A && git commit`");
    let mut nv_hist = Vec::new();
    let mut git_hist = Vec::new();
    let mut scanned_at = Vec::new();
    let mut fsck_clean = 0;
    let mut git_files = 0;
    let mut kept_state = None;
    let mut peaks: Vec<u64> = Vec::new();
    let mut searchable = Vec::new();
    // With a baseline build, each first start of this build is followed by one of the
    // baseline's (its peak memory and its time to every note searchable, side by side).
    let baseline_bin = std::env::var("NOTEVAULT_BENCH_BASELINE_BIN").ok();
    let mut base_peaks: Vec<u64> = Vec::new();
    let mut base_searchable = Vec::new();
    for (i, git_copy) in (1..=settings.runs).zip(&git_copies) {
        // Alternate which goes first, so neither always runs on the other's dirty pages.
        for nv_first in [i % 2 == 1, i % 2 == 0] {
            settle(SETTLE)?;
            if nv_first {
                let state = work.join(format!("state-history-{i}"));
                let log = work.join(format!("logs/history-{i}.log"));
                let load = loadavg();
                let h = history_run(BIN, &vault, &state, &log, census.md)?;
                let fsck = git_fsck(&state.join("history.git"))?;
                println!(
                    "  run {i}: notevault {} (vault scanned at {}, {} files in HEAD, fsck {}, load avg {load})",
                    ms(h.complete),
                    h.scanned.map_or_else(|| "?".into(), ms),
                    h.files,
                    if fsck.is_empty() {
                        "clean"
                    } else {
                        "NOT CLEAN"
                    }
                );
                // The first commit holds the notes and the attachments.
                ensure!(
                    h.files == census.md + census.other.len(),
                    "history HEAD lists {} files, the vault has {} .md files and {} other",
                    h.files,
                    census.md,
                    census.other.len()
                );
                if fsck.is_empty() {
                    fsck_clean += 1;
                } else {
                    println!("    git fsck: {fsck}");
                }
                nv_hist.push(h.complete);
                if let Some(kib) = h.peak_kib {
                    println!(
                        "    peak memory of the first start (VmHWM): {} MiB",
                        kib / 1024
                    );
                    peaks.push(kib);
                }
                if let Some(s) = h.scanned {
                    scanned_at.push(s);
                }
                searchable.extend(h.searchable);
                if kept_state.is_none() {
                    kept_state = Some(state);
                }
                if let Some(base) = &baseline_bin {
                    settle(SETTLE)?;
                    let state = work.join(format!("state-history-base-{i}"));
                    let log = work.join(format!("logs/history-base-{i}.log"));
                    let b = history_run(base, &vault, &state, &log, census.md)?;
                    println!(
                        "  run {i}: baseline  {} (every note searchable at {}, VmHWM {} MiB, load avg {})",
                        ms(b.complete),
                        b.searchable.map_or_else(|| "?".into(), ms),
                        b.peak_kib.unwrap_or(0) / 1024,
                        loadavg()
                    );
                    base_peaks.extend(b.peak_kib);
                    base_searchable.extend(b.searchable);
                    let _ = std::fs::remove_dir_all(&state);
                }
            } else {
                let load = loadavg();
                let (took, files) = git_baseline(git_copy)?;
                git_files = files;
                println!(
                    "  run {i}: git CLI   {} ({files} files committed, load avg {load})",
                    ms(took)
                );
                git_hist.push(took);
            }
        }
    }
    let nv_med = median(&nv_hist);
    let git_med = median(&git_hist);
    let ratio = nv_med.as_secs_f64() / git_med.as_secs_f64();
    table.row(
        "history bootstrap, notevault (spawn -> HEAD complete)",
        spread(&nv_hist),
        format!("<= 0.50x git ({:.2}x)", ratio),
        ratio <= 0.5,
    );
    if !peaks.is_empty() {
        peaks.sort_unstable();
        let mid = peaks[peaks.len() / 2] / 1024;
        table.row(
            "peak memory of a first start (VmHWM: scan, history, index)",
            format!(
                "{mid} MiB [{}-{}]",
                peaks[0] / 1024,
                peaks[peaks.len() - 1] / 1024
            ),
            "<= 250 MiB",
            mid <= 250,
        );
    }
    if !base_peaks.is_empty() {
        base_peaks.sort_unstable();
        table.info(
            "  the same, baseline build (alternating)",
            format!(
                "{} MiB [{}-{}]",
                base_peaks[base_peaks.len() / 2] / 1024,
                base_peaks[0] / 1024,
                base_peaks[base_peaks.len() - 1] / 1024
            ),
        );
    }
    table.info(
        "  of which: spawn -> \"vault scanned\" log line",
        spread(&scanned_at),
    );
    table.info(
        "spawn -> every note searchable (first start)",
        spread(&searchable),
    );
    if !base_searchable.is_empty() {
        table.info(
            "  the same, baseline build (alternating)",
            spread(&base_searchable),
        );
    }
    table.info(
        "history reference: git init && add -A && commit",
        spread(&git_hist),
    );
    table.info(
        "git fsck of history.git",
        format!("{fsck_clean}/{} clean", settings.runs),
    );
    println!(
        "  files: notevault commits {} ({} .md files and {}), git commits {git_files}",
        census.md + census.other.len(),
        census.md,
        census.other.join(", ")
    );
    println!();
    let state = kept_state.context("no history run")?;

    // 1. Start to first served request.
    println!("[start] spawn -> first `GET /v1/notes?page_size=1` answering 200");
    let mut cold = Vec::new();
    let mut cold_dropped = settings.drop_caches;
    for i in 1..=settings.runs {
        let dropped = settings.drop_caches && drop_page_cache();
        cold_dropped &= dropped;
        let fresh = work.join(format!("state-cold-{i}"));
        let (t, scanned) = start_run(
            &rt,
            &vault,
            &fresh,
            &work.join(format!("logs/cold-{i}.log")),
        )?;
        println!(
            "  cold  {i}: {} (page cache {}, vault scanned at {})",
            ms(t),
            if dropped { "dropped" } else { "warm" },
            scanned.map_or_else(|| "?".into(), ms)
        );
        cold.push(t);
    }
    let mut fresh_warm = Vec::new();
    for i in 1..=settings.runs {
        let fresh = work.join(format!("state-fresh-{i}"));
        let (t, scanned) = start_run(
            &rt,
            &vault,
            &fresh,
            &work.join(format!("logs/fresh-{i}.log")),
        )?;
        println!(
            "  fresh {i}: {} (page cache warm, vault scanned at {})",
            ms(t),
            scanned.map_or_else(|| "?".into(), ms)
        );
        fresh_warm.push(t);
    }
    // Warm starts on the same state dir; with a baseline build, the two alternate, the
    // baseline on its own copy of the state dir (another index schema would otherwise
    // rebuild the index at every switch).
    let baseline = std::env::var("NOTEVAULT_BENCH_BASELINE_BIN").ok();
    let base_state = work.join("state-baseline");
    if baseline.is_some() {
        let _ = std::fs::remove_dir_all(&base_state);
        let copied = Command::new("cp")
            .arg("-a")
            .arg(&state)
            .arg(&base_state)
            .status()?;
        ensure!(copied.success(), "cp -a of the state dir failed");
    }
    let mut warm = Vec::new();
    let mut warm_settled = Vec::new();
    let mut base_warm = Vec::new();
    let mut base_settled = Vec::new();
    for i in 1..=settings.runs {
        for bin in baseline.iter().map(String::as_str).chain([BIN]) {
            let this = bin == BIN;
            let name = if this { "warm " } else { "base " };
            let r = start_run_bin(
                &rt,
                bin,
                &vault,
                if this { &state } else { &base_state },
                &work.join(format!("logs/{}-{i}.log", name.trim())),
            )?;
            println!(
                "  {name} {i}: {} (second start on {}, vault scanned at {}, settled at {}, {} notes from the scan cache)",
                ms(r.serving),
                state.file_name().unwrap_or_default().to_string_lossy(),
                r.scanned.map_or_else(|| "?".into(), ms),
                ms(r.settled),
                r.recalled.map_or_else(|| "no".into(), |n| n.to_string()),
            );
            if this {
                warm.push(r.serving);
                warm_settled.push(r.settled);
            } else {
                base_warm.push(r.serving);
                base_settled.push(r.settled);
            }
        }
    }
    let cold_label = if cold_dropped {
        "start, cold (fresh state dir, page cache dropped)"
    } else {
        "start, cold (fresh state dir, warm page cache)"
    };
    table.row(
        cold_label,
        spread(&cold),
        "<= 2000 ms",
        median(&cold) <= TARGET_COLD,
    );
    if cold_dropped {
        table.info(
            "start, fresh state dir, warm page cache",
            spread(&fresh_warm),
        );
    }
    table.row(
        "start, warm (second start, same state dir)",
        spread(&warm),
        "<= 300 ms",
        median(&warm) <= TARGET_WARM,
    );
    table.info(
        "  warm start to settled (verify done, every note searchable)",
        spread(&warm_settled),
    );
    if !base_warm.is_empty() {
        table.info(
            "  warm start, baseline build (alternating)",
            spread(&base_warm),
        );
        table.info(
            "  warm start to settled, baseline build",
            spread(&base_settled),
        );
        table.info(
            "  warm start, this build / baseline (medians)",
            format!(
                "{:.2}x",
                median(&warm).as_secs_f64() / median(&base_warm).as_secs_f64()
            ),
        );
    }
    println!();

    // 3. Line-sliced reads under load.
    println!(
        "[read] GET /v1/notes/{{note}}?limit={READ_LIMIT}, {CONNECTIONS} keep-alive connections"
    );
    let mut daemon = Daemon::spawn(&vault, &state, &work.join("logs/load.log"))?;
    rt.block_on(first_ok(&mut daemon, START_TIMEOUT))?;
    // The steady state: loads start once the start has settled.
    rt.block_on(settled(&mut daemon))?;
    let addr = daemon.addr;
    let slugs = rt.block_on(collect_slugs(addr))?;
    let mut folders: Vec<(String, Vec<String>)> = Vec::new();
    for (folder, all) in &slugs {
        let paths: Vec<String> = spaced(all, SLUGS_PER_FOLDER)
            .into_iter()
            .map(|s| {
                format!(
                    "/v1/notes/{}?limit={READ_LIMIT}",
                    utf8_percent_encode(s, SLUG)
                )
            })
            .collect();
        let sizes = rt.block_on(check_paths(addr, &paths))?;
        println!(
            "  {folder}: {} of {} notes, response body mean {:.1} KB",
            paths.len(),
            all.len(),
            sizes as f64 / paths.len() as f64 / 1e3
        );
        folders.push((folder.clone(), paths));
    }
    let mix = interleave(&folders);
    let duration = Duration::from_secs(settings.seconds);
    let mixed = rt.block_on(load(
        addr,
        Arc::new(mix.clone()),
        CONNECTIONS,
        WARMUP,
        duration,
    ))?;
    println!("  mix of all folders:   {}", mixed.summary());
    let big: Vec<String> = folders
        .iter()
        .find(|(f, _)| f == "PowerShell-Docs")
        .map(|(_, p)| p.clone())
        .unwrap_or_default();
    let big_load = if big.is_empty() {
        None
    } else {
        let r = rt.block_on(load(
            addr,
            Arc::new(big.clone()),
            CONNECTIONS,
            WARMUP,
            duration,
        ))?;
        println!("  PowerShell-Docs only: {}", r.summary());
        Some(r)
    };
    table.row(
        "read p50, mix (Rust hyper client)",
        us(mixed.p50),
        "<= 500 us",
        mixed.p50 <= TARGET_P50,
    );
    table.row(
        "read p99, mix (Rust hyper client)",
        us(mixed.p99),
        "<= 2000 us",
        mixed.p99 <= TARGET_P99,
    );
    table.info("read throughput, mix", format!("{:.0} req/s", mixed.rps));
    if let Some(r) = &big_load {
        table.row(
            "read p50, PowerShell-Docs only",
            us(r.p50),
            "<= 500 us",
            r.p50 <= TARGET_P50,
        );
        table.row(
            "read p99, PowerShell-Docs only",
            us(r.p99),
            "<= 2000 us",
            r.p99 <= TARGET_P99,
        );
        table.info(
            "read throughput, PowerShell-Docs only",
            format!("{:.0} req/s", r.rps),
        );
    }
    match wrk_cross_check(addr, &mix, settings.seconds, &work.join("wrk.lua"))? {
        Some(w) => {
            println!("  wrk cross-check (mix): {w}");
            table.info("cross-check: wrk -t2 -c8, mix", w);
        }
        None => println!("  wrk not found on PATH: no cross-check"),
    }
    daemon.stop()?;
    if let Some(baseline) = std::env::var_os("NOTEVAULT_BENCH_BASELINE_BIN") {
        let baseline = baseline.to_string_lossy().into_owned();
        println!("[read, A/B] the mix on {baseline} (baseline) and on this build, alternately");
        let mut p50 = [Vec::new(), Vec::new()];
        for round in 1..=2 {
            for (which, bin) in [(0, baseline.as_str()), (1, BIN)] {
                let log = work.join(format!("logs/ab-{round}-{which}.log"));
                let own = if which == 0 { &base_state } else { &state };
                let mut d = Daemon::spawn_bin(bin, &vault, own, &log)?;
                rt.block_on(first_ok(&mut d, START_TIMEOUT))?;
                rt.block_on(settled(&mut d))?;
                let r = rt.block_on(load(
                    d.addr,
                    Arc::new(mix.clone()),
                    CONNECTIONS,
                    WARMUP,
                    duration,
                ))?;
                d.stop()?;
                println!(
                    "  round {round} {}: {} (load avg {})",
                    ["baseline  ", "this build"][which],
                    r.summary(),
                    loadavg()
                );
                p50[which].push(r.p50);
            }
        }
        let show = |v: &[Duration]| v.iter().map(|d| us(*d)).collect::<Vec<_>>().join(", ");
        table.info("read p50, mix, A/B: baseline build", show(&p50[0]));
        table.info("read p50, mix, A/B: this build", show(&p50[1]));
    }
    println!();
    table.print();
    remove_copies(&work)?;
    Ok(())
}

/// Remove the vault copies and state dirs of a run (after the measures: see `SETTLE`);
/// the daemon logs stay.
fn remove_copies(work: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(work) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry?;
        if entry.file_name() != "logs" && entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())
                .with_context(|| format!("remove {}", entry.path().display()))?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Corpus and folders

/// Unpack the tarball into `dir` once; a marker file says a previous unpack finished.
fn unpack(tarball: &Path, dir: &Path) -> Result<PathBuf> {
    let corpus = dir.join("realvault");
    let marker = dir.join(".realvault-unpacked");
    if marker.is_file() && corpus.is_dir() {
        return Ok(corpus);
    }
    if corpus.exists() {
        std::fs::remove_dir_all(&corpus)?;
    }
    std::fs::create_dir_all(dir)?;
    println!("unpacking {} into {} ...", tarball.display(), dir.display());
    let status = Command::new("tar")
        .arg("xzf")
        .arg(tarball)
        .arg("-C")
        .arg(dir)
        .status()
        .context("run tar")?;
    ensure!(
        status.success(),
        "tar xzf {} failed: {status}",
        tarball.display()
    );
    ensure!(corpus.is_dir(), "the tarball did not unpack to realvault/");
    std::fs::write(&marker, tarball.display().to_string())?;
    Ok(corpus)
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status()?;
    ensure!(
        status.success(),
        "cp -a {} {} failed",
        from.display(),
        to.display()
    );
    Ok(())
}

/// What the folder holds: notevault serves the `.md` files, git commits every file.
struct Census {
    md: usize,
    other: Vec<String>,
    bytes: u64,
}

impl Census {
    fn of(root: &Path) -> Result<Self> {
        let mut census = Self {
            md: 0,
            other: Vec::new(),
            bytes: 0,
        };
        for entry in walkdir::WalkDir::new(root) {
            let entry = entry?;
            if !entry.file_type().is_file() {
                continue;
            }
            census.bytes += entry.metadata()?.len();
            if entry.file_name().to_string_lossy().ends_with(".md") {
                census.md += 1;
            } else {
                let rel = entry.path().strip_prefix(root)?;
                census.other.push(rel.to_string_lossy().into_owned());
            }
        }
        Ok(census)
    }
}

// ---------------------------------------------------------------------------------------
// The daemon

struct Daemon {
    child: Child,
    addr: SocketAddr,
    started: Instant,
    log: Arc<Mutex<Vec<(Duration, String)>>>,
    reader: Option<JoinHandle<()>>,
}

impl Daemon {
    /// Spawn `notevault serve` on a free loopback port, its stderr timestamped into
    /// `log_file` (time since spawn) and kept for phase look-ups.
    fn spawn(vault: &Path, state: &Path, log_file: &Path) -> Result<Self> {
        Self::spawn_bin(BIN, vault, state, log_file)
    }

    fn spawn_bin(bin: &str, vault: &Path, state: &Path, log_file: &Path) -> Result<Self> {
        let addr = free_port()?;
        let mut file = File::create(log_file)?;
        let started = Instant::now();
        let mut child = Command::new(bin)
            .arg("serve")
            .arg(vault)
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--state-dir")
            .arg(state)
            .env("RATE_LIMIT_READ_PER_MINUTE", "0")
            .env("NOTEVAULT_LOG", "notevault=debug")
            .env("NO_COLOR", "1")
            .env_remove("NOTEVAULT_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("spawn {bin}"))?;
        let stderr = child.stderr.take().context("daemon stderr")?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let at = started.elapsed();
                let _ = writeln!(file, "{:>10.3} ms  {line}", at.as_secs_f64() * 1e3);
                if let Ok(mut lines) = sink.lock() {
                    lines.push((at, line));
                }
            }
        });
        Ok(Self {
            child,
            addr,
            started,
            log,
            reader: Some(reader),
        })
    }

    /// When (since spawn) the daemon logged a line containing `needle`.
    fn logged(&self, needle: &str) -> Option<Duration> {
        let lines = self.log.lock().ok()?;
        lines
            .iter()
            .find(|(_, line)| line.contains(needle))
            .map(|(at, _)| *at)
    }

    fn ensure_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let log: Vec<String> = self
                .log
                .lock()
                .map(|l| l.iter().map(|(_, s)| s.clone()).collect())
                .unwrap_or_default();
            bail!("the daemon exited ({status}):\n{}", log.join("\n"));
        }
        Ok(())
    }

    /// Ctrl-C (SIGINT) and wait; kill when it does not stop within 30 s.
    fn stop(mut self) -> Result<()> {
        let _ = Command::new("kill")
            .arg("-INT")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                eprintln!("the daemon did not stop on SIGINT within 30 s; killing it");
                self.child.kill()?;
                self.child.wait()?;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn free_port() -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

/// Spawn on `state`, measure spawn -> first 200, stop. Also returns when the daemon logged
/// "vault scanned".
fn start_run(
    rt: &tokio::runtime::Runtime,
    vault: &Path,
    state: &Path,
    log: &Path,
) -> Result<(Duration, Option<Duration>)> {
    start_run_bin(rt, BIN, vault, state, log).map(|r| (r.serving, r.scanned))
}

/// What one start took.
struct StartRun {
    /// Spawn → first `GET /v1/notes` answered.
    serving: Duration,
    /// Spawn → the `vault scanned` line.
    scanned: Option<Duration>,
    /// Spawn → every note searchable and the start's verify done (the index at the
    /// committed seq, `start_scan.verifying` false).
    settled: Duration,
    /// Notes the start took from the scan cache (`None`: a build without one).
    recalled: Option<u64>,
}

/// Start `bin`, time it to serving, then wait until it has settled (the index current,
/// the verify of a warm start done, its scan cache written) before stopping it, so the
/// next start finds the state a running daemon leaves.
fn start_run_bin(
    rt: &tokio::runtime::Runtime,
    bin: &str,
    vault: &Path,
    state: &Path,
    log: &Path,
) -> Result<StartRun> {
    let mut daemon = Daemon::spawn_bin(bin, vault, state, log)?;
    let serving = rt.block_on(first_ok(&mut daemon, START_TIMEOUT))?;
    let scanned = daemon.logged("vault scanned");
    let (settled, recalled) = rt.block_on(settled(&mut daemon))?;
    // A build with a scan cache writes it once its rescan is done.
    if recalled.is_some() {
        rt.block_on(common::wait_scan_cache(state, daemon.started))?;
    }
    daemon.stop()?;
    Ok(StartRun {
        serving,
        scanned,
        settled,
        recalled,
    })
}

/// Wait until the daemon has settled: the index at the committed seq and a warm start's
/// verify done. The time since spawn, and how many notes the start took from the scan
/// cache (`None`: a build without one).
async fn settled(daemon: &mut Daemon) -> Result<(Duration, Option<u64>)> {
    daemon.ensure_running()?;
    let limit = START_TIMEOUT.saturating_sub(daemon.started.elapsed());
    let st = common::wait_indexed(daemon.addr, limit).await?;
    Ok((
        daemon.started.elapsed(),
        st["start_scan"]["notes_recalled"].as_u64(),
    ))
}

/// Poll `GET /v1/notes?page_size=1` until it answers 200; time since spawn. A refused
/// connection is retried every 5 ms; an accepted one waits for its answer (the daemon
/// binds its port before it scans, so early connections wait in the backlog).
async fn first_ok(daemon: &mut Daemon, timeout: Duration) -> Result<Duration> {
    loop {
        daemon.ensure_running()?;
        let elapsed = daemon.started.elapsed();
        ensure!(elapsed < timeout, "no 200 within {timeout:?}");
        let attempt = async {
            let mut conn = Conn::open(daemon.addr).await?;
            conn.get("/v1/notes?page_size=1").await
        };
        match tokio::time::timeout(timeout - elapsed, attempt).await {
            Ok(Ok((StatusCode::OK, _))) => return Ok(daemon.started.elapsed()),
            Ok(Ok((status, body))) => {
                bail!(
                    "first request answered {status}: {}",
                    String::from_utf8_lossy(&body)
                )
            }
            Ok(Err(_)) => tokio::time::sleep(START_POLL).await,
            Err(_) => bail!("no 200 within {timeout:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// History

struct HistoryRun {
    complete: Duration,
    scanned: Option<Duration>,
    /// Spawn → "search index up to date".
    searchable: Option<Duration>,
    files: usize,
    /// VmHWM once the history, the index and the catch-up rescan are all complete.
    peak_kib: Option<u64>,
}

/// Spawn on a fresh state dir and poll `git rev-parse HEAD` every 10 ms until it resolves
/// and the commit is complete (`git log` has a commit, `ls-tree -r` lists every note).
fn history_run(
    bin: &str,
    vault: &Path,
    state: &Path,
    log: &Path,
    notes: usize,
) -> Result<HistoryRun> {
    let git_dir = state.join("history.git");
    let mut daemon = Daemon::spawn_bin(bin, vault, state, log)?;
    let (complete, files) = loop {
        daemon.ensure_running()?;
        ensure!(
            daemon.started.elapsed() < HISTORY_TIMEOUT,
            "no complete history within {HISTORY_TIMEOUT:?}"
        );
        if git_dir.join("HEAD").is_file()
            && git_ok(&git_dir, &["rev-parse", "--verify", "-q", "HEAD"])
        {
            let at = daemon.started.elapsed();
            let commits = git_lines(&git_dir, &["log", "--oneline"])?;
            let files = git_lines(&git_dir, &["ls-tree", "-r", "--name-only", "HEAD"])?;
            if commits >= 1 && files >= notes {
                break (at, files);
            }
        }
        std::thread::sleep(GIT_POLL);
    };
    // Peak memory of the whole first start: scan, history bootstrap, index build and the
    // catch-up rescan after it (which ends with the scan cache written).
    while daemon.logged("search index up to date").is_none()
        || daemon.logged("scan cache written").is_none()
    {
        daemon.ensure_running()?;
        ensure!(
            daemon.started.elapsed() < HISTORY_TIMEOUT,
            "the first start (index build, catch-up rescan) did not end within {HISTORY_TIMEOUT:?}"
        );
        std::thread::sleep(GIT_POLL);
    }
    // Logged after the first commit was queued: it may come after HEAD is complete.
    let scanned = daemon.logged("vault scanned");
    let searchable = daemon.logged("search index up to date");
    let peak_kib = std::fs::read_to_string(format!("/proc/{}/status", daemon.child.id()))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        });
    daemon.stop()?;
    Ok(HistoryRun {
        complete,
        scanned,
        searchable,
        files,
        peak_kib,
    })
}

/// A git command with the user's and system's configuration left out, and no automatic
/// `gc` (a commit of 44k loose objects would start a repack in the background).
fn git(git_dir: Option<&Path>) -> Command {
    let mut cmd = Command::new("git");
    if let Some(dir) = git_dir {
        cmd.arg("--git-dir").arg(dir);
    }
    cmd.env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_COUNT", "2")
        .env("GIT_CONFIG_KEY_0", "gc.auto")
        .env("GIT_CONFIG_VALUE_0", "0")
        .env("GIT_CONFIG_KEY_1", "maintenance.auto")
        .env("GIT_CONFIG_VALUE_1", "false")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@localhost")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@localhost")
        .stdin(Stdio::null());
    cmd
}

fn git_ok(git_dir: &Path, args: &[&str]) -> bool {
    git(Some(git_dir))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn git_lines(git_dir: &Path, args: &[&str]) -> Result<usize> {
    let out = git(Some(git_dir))
        .args(args)
        .stderr(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Ok(0);
    }
    Ok(out
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count())
}

/// `git fsck --full`; an empty string when clean.
fn git_fsck(git_dir: &Path) -> Result<String> {
    let out = git(Some(git_dir))
        .args(["fsck", "--full", "--no-progress"])
        .output()?;
    let mut text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() {
        text.push_str(&format!(
            "\nexit {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(text)
}

/// The reference: the git CLI records the same folder; returns the time and the number
/// of files committed.
fn git_baseline(dir: &Path) -> Result<(Duration, usize)> {
    let dot_git = dir.join(".git");
    ensure!(!dot_git.exists(), "{} is not a fresh copy", dir.display());
    let started = Instant::now();
    let status = git(None)
        .current_dir(dir)
        .args(["init", "-q"])
        .status()
        .and_then(|s| {
            if !s.success() {
                return Ok(s);
            }
            let s = git(None).current_dir(dir).args(["add", "-A"]).status()?;
            if !s.success() {
                return Ok(s);
            }
            git(None)
                .current_dir(dir)
                .args(["commit", "-q", "-m", "x"])
                .status()
        })?;
    let took = started.elapsed();
    ensure!(status.success(), "git init/add/commit failed: {status}");
    let files = git_lines(&dot_git, &["ls-tree", "-r", "--name-only", "HEAD"])?;
    Ok((took, files))
}

/// `sync`, then wait `quiet`: see `SETTLE`.
fn settle(quiet: Duration) -> Result<()> {
    sh("sync")?;
    std::thread::sleep(quiet);
    Ok(())
}

/// The 1-minute load average.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// Drop the page cache (needs root and a writable /proc/sys); false when not possible.
fn drop_page_cache() -> bool {
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok()
}

// ---------------------------------------------------------------------------------------
// HTTP client

/// Every slug of the vault, by top-level folder, paged through `GET /v1/notes`.
async fn collect_slugs(addr: SocketAddr) -> Result<BTreeMap<String, Vec<String>>> {
    let mut conn = Conn::open(addr).await?;
    let mut by_folder: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut token: Option<String> = None;
    loop {
        let mut path = "/v1/notes?page_size=500".to_string();
        if let Some(t) = &token {
            path.push_str("&page_token=");
            path.push_str(&utf8_percent_encode(t, NON_ALPHANUMERIC).to_string());
        }
        let (status, body) = conn.get(&path).await?;
        ensure!(
            status == StatusCode::OK,
            "GET {path}: {status}: {}",
            String::from_utf8_lossy(&body)
        );
        let page: serde_json::Value = serde_json::from_slice(&body)?;
        for note in page["notes"].as_array().context("no `notes` array")? {
            let slug = note["slug"].as_str().context("a note without a slug")?;
            let folder = slug.split('/').next().unwrap_or_default().to_string();
            by_folder.entry(folder).or_default().push(slug.to_string());
        }
        match page["next_page_token"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
    }
    Ok(by_folder)
}

/// GET every path once (all must answer 200); the total of the response bodies.
async fn check_paths(addr: SocketAddr, paths: &[String]) -> Result<u64> {
    let mut conn = Conn::open(addr).await?;
    let mut bytes = 0;
    for path in paths {
        let (status, body) = conn.get(path).await?;
        ensure!(
            status == StatusCode::OK,
            "GET {path}: {status}: {}",
            String::from_utf8_lossy(&body)
        );
        bytes += body.len() as u64;
    }
    Ok(bytes)
}

/// Up to `n` evenly spaced items of `all`.
fn spaced(all: &[String], n: usize) -> Vec<&String> {
    let k = n.min(all.len());
    (0..k).map(|i| &all[i * all.len() / k]).collect()
}

/// Round-robin over the folders, so any stretch of the list mixes them.
fn interleave(folders: &[(String, Vec<String>)]) -> Vec<String> {
    let longest = folders.iter().map(|(_, p)| p.len()).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| folders.iter().filter_map(move |(_, p)| p.get(i).cloned()))
        .collect()
}

/// `wrk -t2 -c8 --latency` over the same paths, when wrk is installed: its p50, p99, req/s.
fn wrk_cross_check(
    addr: SocketAddr,
    paths: &[String],
    seconds: u64,
    script: &Path,
) -> Result<Option<String>> {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("wrk").is_file()));
    if !on_path {
        return Ok(None);
    }
    let mut lua = String::from("local paths = {\n");
    for p in paths {
        // Percent-encoded paths: no quote or backslash to escape.
        lua.push_str(&format!("  \"{p}\",\n"));
    }
    lua.push_str(
        "}\nlocal i = 0\nrequest = function()\n  i = i + 1\n  return wrk.format(\"GET\", paths[(i % #paths) + 1])\nend\n",
    );
    std::fs::write(script, lua)?;
    let out = Command::new("wrk")
        .args([
            "-t2",
            &format!("-c{CONNECTIONS}"),
            &format!("-d{seconds}s"),
            "--latency",
            "-s",
        ])
        .arg(script)
        .arg(format!("http://{addr}"))
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    ensure!(out.status.success(), "wrk failed: {text}");
    let field = |prefix: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(prefix))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| "?".into())
    };
    let mut summary = format!(
        "p50 {} p99 {}, {} req/s",
        field("50%"),
        field("99%"),
        field("Requests/sec:")
    );
    if text.contains("Non-2xx") {
        summary.push_str(&format!(", non-2xx {}", field("Non-2xx or 3xx responses:")));
    }
    Ok(Some(summary))
}

// ---------------------------------------------------------------------------------------
// Output

#[derive(Default)]
struct Table {
    rows: Vec<[String; 4]>,
}

impl Table {
    fn row(&mut self, what: &str, measured: String, target: impl Into<String>, met: bool) {
        let verdict = if met { "met" } else { "MISSED" };
        self.rows
            .push([what.into(), measured, target.into(), verdict.into()]);
    }

    fn info(&mut self, what: &str, measured: String) {
        self.rows
            .push([what.into(), measured, String::new(), String::new()]);
    }

    fn print(&self) {
        let header = [
            "figure".to_string(),
            "measured (median [min-max])".to_string(),
            "target / reference".to_string(),
            String::new(),
        ];
        let mut widths = [0; 4];
        for row in std::iter::once(&header).chain(&self.rows) {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |row: &[String; 4]| {
            let cells: Vec<String> = row
                .iter()
                .zip(widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            println!("| {} |", cells.join(" | "));
        };
        line(&header);
        println!(
            "|{}|",
            widths
                .iter()
                .map(|w| "-".repeat(w + 2))
                .collect::<Vec<_>>()
                .join("|")
        );
        for row in &self.rows {
            line(row);
        }
    }
}

fn median(samples: &[Duration]) -> Duration {
    let mut s = samples.to_vec();
    s.sort_unstable();
    s.get(s.len() / 2).copied().unwrap_or_default()
}

/// `median [min-max]` in ms.
fn spread(samples: &[Duration]) -> String {
    let min = samples.iter().min().copied().unwrap_or_default();
    let max = samples.iter().max().copied().unwrap_or_default();
    format!(
        "{} [{:.0}-{:.0}]",
        ms(median(samples)),
        min.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    )
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

fn sh(script: &str) -> Result<()> {
    let status = Command::new("sh").arg("-c").arg(script).status()?;
    ensure!(status.success(), "`{script}` failed: {status}");
    Ok(())
}

fn sh_out(script: &str) -> Result<String> {
    let out = Command::new("sh").arg("-c").arg(script).output()?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default().trim()
}
