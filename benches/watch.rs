//! `cargo bench --bench watch`: the live folder on the real corpus (44,432 notes in 630
//! folders): how long the watch takes to set up, how soon an external edit (in place, or a
//! temp file renamed over the note) is visible, whether a burst of 1,000 new notes and
//! 10,000 edits is taken in without a missed change, and what watching costs while
//! nothing happens. Each figure is printed beside its target. What each figure means:
//! `benches/README.md`.
//!
//! "Visible" means the listing (`GET /v1/notes?prefix=<slug>&page_size=1`) shows the
//! note with `content_hash` equal to the BLAKE3 of the new bytes. The issue asks for
//! "searchable"; full-text search does not exist yet, so this is the closest observable.
//!
//! The bench works on a copy of the unpacked corpus under
//! `target/bench-corpus/watch-run/scratch/` (deleted at the end) and keeps the daemon's
//! log in `target/bench-corpus/watch-run/logs/daemon.log` (timed from spawn).
//!
//! Environment:
//! - `NOTEVAULT_CORPUS`: the tarball (default `../shared/corpora/realvault.tar.gz`, relative
//!   to the crate); when it is absent the bench says so and exits 0.
//! - `NOTEVAULT_BENCH_IDLE_SECONDS`: length of each idle CPU measure (default 60).
//! - `NOTEVAULT_BENCH_EDITS`: external edits of each kind (default 200).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the editor and the operator: they write the vault and read the environment"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use hyper::body::Bytes;
use hyper::StatusCode;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde_json::Value;

mod common;

use common::Conn;

/// The daemon, built by cargo with the bench (release) profile.
const BIN: &str = env!("CARGO_BIN_EXE_notevault");
const DEFAULT_CORPUS: &str = "../shared/corpora/realvault.tar.gz";

/// How often the start measure retries a refused connection.
const START_POLL: Duration = Duration::from_millis(5);
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// From the first answered request to the daemon's `watching the vault` log line.
const WATCH_LOG_TIMEOUT: Duration = Duration::from_secs(120);
const HISTORY_TIMEOUT: Duration = Duration::from_secs(600);
/// Pause after the history bootstrap resolves `HEAD`, before anything is measured.
const AFTER_BOOTSTRAP: Duration = Duration::from_secs(2);
/// Every HTTP request (connect included) must answer within this.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often an edit's note is polled.
const VISIBLE_POLL: Duration = Duration::from_millis(1);
/// An edit not visible after this counts as not visible (and the bench goes on).
const VISIBLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Quiet time between two measured edits, so each is an edit on its own rather than one
/// queued behind the previous edit's history commit.
const EDIT_GAP: Duration = Duration::from_millis(50);
const BURST_NOTES: usize = 1_000;
const BURST_EDITS: usize = 10_000;
/// The burst is written in this many chunks, each in a new folder of its own.
const BURST_CHUNKS: usize = 10;
const BURST_FOLDER: &str = "burst";
/// How often the burst phase compares the `burst/` listing with what was written.
const BURST_POLL: Duration = Duration::from_millis(5);
/// After this (from the last burst write returning), what still differs is missed.
const CONVERGE_CAP: Duration = Duration::from_secs(30);
/// The history writer must have caught up within this before an idle measure.
const QUIET_TIMEOUT: Duration = Duration::from_secs(300);
/// Quiet time before the second idle measure (after the burst has converged).
const BEFORE_IDLE: Duration = Duration::from_secs(5);
/// Quiet time after `sync` before the daemon starts: on this machine's journal-less ext4,
/// inode allocation skips recently freed inodes, so file creations right after deleting
/// a previous run's copy are slower (see `benches/serve.rs`).
const SETTLE: Duration = Duration::from_secs(6);

const TARGET_P50: Duration = Duration::from_millis(50);
const TARGET_P99: Duration = Duration::from_millis(250);
const TARGET_IDLE_PERCENT: f64 = 1.0;

/// Folders the daemon never serves (its `IGNORED_DIRS`). Other dot-folders are served:
/// the corpus has 57 notes under `.github/` folders.
const RESERVED_DIRS: &[&str] = &[".git", ".obsidian", ".trash", ".notevault"];

fn main() -> ExitCode {
    common::bench_main("watch", run)
}

struct Settings {
    idle_seconds: u64,
    edits: usize,
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
            idle_seconds: num("NOTEVAULT_BENCH_IDLE_SECONDS", 60)?,
            edits: usize::try_from(num("NOTEVAULT_BENCH_EDITS", 200)?)?,
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
    let work = target.join("bench-corpus").join("watch-run");
    std::fs::create_dir_all(&work)?;
    let _lock = lock(&work.join(".lock"))?;
    // A run removes its scratch copy when it ends; anything else here but the logs is the
    // leftover of an interrupted run (or of an earlier layout of this bench).
    for entry in std::fs::read_dir(&work)? {
        let entry = entry?;
        let name = entry.file_name();
        if name != "logs" && name != ".lock" {
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            }
            .with_context(|| format!("remove {}", path.display()))?;
        }
    }
    let logs = work.join("logs");
    std::fs::create_dir_all(&logs)?;
    let scratch = Scratch(work.join("scratch"));
    std::fs::create_dir_all(&scratch.0)?;
    let vault = scratch.0.join("vault");
    let state = scratch.0.join("state");
    copy_tree(&corpus, &vault)?;
    let mut expected = on_disk(&vault, "")?;
    let folders = folder_count(&vault)?;
    settle(SETTLE)?;

    println!("notevault watch bench");
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
    println!(
        "  corpus    {shown} -> copy in {} ({} notes in {folders} folders)",
        vault.display(),
        expected.len()
    );
    println!("  log       {}", logs.join("daemon.log").display());
    println!(
        "  load avg  {} (other users of the machine add noise)",
        loadavg()
    );
    println!(
        "  settings  {} edits of each kind, {} ms apart; burst {BURST_NOTES} new + {BURST_EDITS} edits; idle {} s",
        settings.edits,
        EDIT_GAP.as_millis(),
        settings.idle_seconds
    );
    println!();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut table = Table::default();

    // 1. Start, watch set-up, history bootstrap.
    println!("[start] spawn, first answer, watch set-up, history bootstrap");
    let mut daemon = Daemon::spawn(&vault, &state, &logs.join("daemon.log"))?;
    let first = rt.block_on(first_ok(&mut daemon, START_TIMEOUT))?;
    let watch_line = daemon.wait_for_line("watching the vault", WATCH_LOG_TIMEOUT)?;
    let setup_ms = field(&watch_line, "setup_ms").context("no setup_ms in the watch log line")?;
    let scanned_line = daemon.wait_for_line("vault scanned", WATCH_LOG_TIMEOUT)?;
    wait_history(&mut daemon, &state)?;
    let bootstrapped = daemon.started.elapsed();
    std::thread::sleep(AFTER_BOOTSTRAP);
    let addr = daemon.addr;
    let mut client = Client::new(addr);
    rt.block_on(wait_quiet(&mut client, &mut daemon))?;
    println!(
        "  first answer at {}, {}, history HEAD at {}",
        ms(first),
        strip_ansi(&scanned_line)
            .split("vault scanned")
            .nth(1)
            .unwrap_or_default()
            .trim(),
        ms(bootstrapped)
    );
    println!("  watch set-up: setup_ms={setup_ms} ({folders} folders, the root included)");
    let setup: u64 = setup_ms.parse().context("setup_ms is not a number")?;
    table.info(
        &format!("watch set-up, {folders} folders (daemon log `setup_ms`)"),
        format!("{setup} ms"),
        "no target set",
    );
    let listed = rt.block_on(client.listing(""))?;
    let baseline = diff(&expected, &listed);
    println!(
        "  baseline: {} notes listed, {} on disk, {} difference(s)",
        listed.len(),
        expected.len(),
        baseline.len()
    );
    print_diff(&baseline);
    ensure!(
        baseline.is_empty(),
        "the listing does not equal the folder before anything was changed"
    );
    println!();

    // 4a. CPU while idle, before any edit.
    println!(
        "[idle] daemon CPU over {} s, nothing happening",
        settings.idle_seconds
    );
    let idle_start = idle_cpu(&mut daemon, settings.idle_seconds)?;
    println!("  {idle_start:.3}% of one core");
    table.row(
        &format!(
            "CPU while idle, {} notes watched ({} s, after start-up)",
            expected.len(),
            settings.idle_seconds
        ),
        format!("{idle_start:.3}% of one core"),
        "< 1% of one core",
        idle_start < TARGET_IDLE_PERCENT,
    );
    println!();

    // 2. External edit to visible.
    println!(
        "[edits] external edit -> `GET /v1/notes?prefix=<slug>&page_size=1` shows the new content_hash, polled every {} ms",
        VISIBLE_POLL.as_millis()
    );
    let targets = pick_spread(&expected, 2 * settings.edits);
    let mut in_place = Vec::new();
    let mut renamed = Vec::new();
    let mut not_visible: [Vec<String>; 2] = Default::default();
    let mut edit_folders = [BTreeSet::new(), BTreeSet::new()];
    for (i, rel) in targets.iter().enumerate() {
        let kind = i % 2;
        let path = vault.join(rel);
        let mut bytes = std::fs::read(&path).with_context(|| format!("read {rel}"))?;
        if !bytes.ends_with(b"\n") {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(format!("\nEdited by the watch bench, edit {i}.\n").as_bytes());
        let want = content_hash(&bytes);
        let slug = rel.strip_suffix(".md").unwrap_or(rel);
        if kind == 0 {
            std::fs::write(&path, &bytes).with_context(|| format!("write {rel}"))?;
        } else {
            atomic_write(&path, &bytes)?;
        }
        let written = Instant::now();
        expected.insert(rel.clone(), want.clone());
        edit_folders[kind].insert(parent(rel).to_string());
        match rt.block_on(wait_visible(&mut client, &mut daemon, slug, &want, written))? {
            Some(took) => {
                if kind == 0 {
                    in_place.push(took);
                } else {
                    renamed.push(took);
                }
            }
            None => {
                println!("  NOT VISIBLE within {VISIBLE_TIMEOUT:?}: {rel}");
                not_visible[kind].push(rel.clone());
            }
        }
        if (i + 1) % 100 == 0 {
            println!("  {} of {} edits done", i + 1, targets.len());
        }
        std::thread::sleep(EDIT_GAP);
    }
    in_place.sort_unstable();
    renamed.sort_unstable();
    for (label, samples, folders, missing) in [
        (
            "in-place write",
            &in_place,
            &edit_folders[0],
            &not_visible[0],
        ),
        ("atomic rename", &renamed, &edit_folders[1], &not_visible[1]),
    ] {
        println!(
            "  {label}: {} visible in {} folders, p50 {} p90 {} p99 {} max {}",
            samples.len(),
            folders.len(),
            ms(percentile(samples, 50.0)),
            ms(percentile(samples, 90.0)),
            ms(percentile(samples, 99.0)),
            ms(samples.last().copied().unwrap_or_default())
        );
        let p50 = percentile(samples, 50.0);
        let p99 = percentile(samples, 99.0);
        table.row(
            &format!(
                "{label} -> visible in listing (new content_hash), p50 / p99, {} edits",
                samples.len() + missing.len()
            ),
            format!("{} / {}", ms(p50), ms(p99)),
            "p50 <= 50 ms, p99 <= 250 ms",
            p50 <= TARGET_P50 && p99 <= TARGET_P99 && missing.is_empty(),
        );
    }
    table.row(
        &format!("edits not visible within {} s", VISIBLE_TIMEOUT.as_secs()),
        (not_visible[0].len() + not_visible[1].len()).to_string(),
        "0",
        not_visible.iter().all(Vec::is_empty),
    );
    println!();

    // 3. A burst, in 10 chunks: a new folder `burst/0k/` with 100 new notes, then 1,000
    // edits of existing notes (every one a different note, spread over the corpus folders;
    // every other one by rename). Each change happens once: one the watcher drops is not
    // made good by a later event on the same file.
    println!(
        "[burst] {BURST_CHUNKS} x (a new folder {BURST_FOLDER}/0k/ with {} new notes, then {} edits of different existing notes, every other one by rename), as fast as possible",
        BURST_NOTES / BURST_CHUNKS,
        BURST_EDITS / BURST_CHUNKS
    );
    let edited: Vec<String> = pick_spread(&expected, BURST_EDITS);
    ensure!(
        edited.len() == BURST_EDITS,
        "the corpus has fewer than {BURST_EDITS} notes"
    );
    // Prepared before the clock starts: the timed part only writes.
    let mut chunks: Vec<(String, Vec<BurstWrite>)> = Vec::new();
    for k in 0..BURST_CHUNKS {
        let folder = format!("{BURST_FOLDER}/{k:02}");
        let mut writes = Vec::new();
        for i in 0..BURST_NOTES / BURST_CHUNKS {
            let n = k * (BURST_NOTES / BURST_CHUNKS) + i;
            let text = format!("# Burst note {n}\n\nCreated by the watch bench burst.\n");
            writes.push(BurstWrite {
                rel: format!("{folder}/note-{n:04}.md"),
                bytes: text.into_bytes(),
                rename: false,
            });
        }
        let per = BURST_EDITS / BURST_CHUNKS;
        for (j, rel) in edited[k * per..(k + 1) * per].iter().enumerate() {
            let mut bytes =
                std::fs::read(vault.join(rel)).with_context(|| format!("read {rel}"))?;
            if !bytes.ends_with(b"\n") {
                bytes.push(b'\n');
            }
            bytes.extend_from_slice(
                format!("\nEdited by the watch bench burst, edit {}.\n", k * per + j).as_bytes(),
            );
            writes.push(BurstWrite {
                rel: rel.clone(),
                bytes,
                rename: j % 2 == 1,
            });
        }
        chunks.push((folder, writes));
    }
    std::fs::create_dir(vault.join(BURST_FOLDER))?;
    let began = Instant::now();
    for (folder, writes) in &chunks {
        std::fs::create_dir(vault.join(folder))?;
        for w in writes {
            let path = vault.join(&w.rel);
            if w.rename {
                atomic_write(&path, &w.bytes)?;
            } else {
                std::fs::write(&path, &w.bytes).with_context(|| format!("write {}", w.rel))?;
            }
        }
    }
    let written = Instant::now();
    let write_took = written - began;
    for (_, writes) in &chunks {
        for w in writes {
            expected.insert(w.rel.clone(), content_hash(&w.bytes));
        }
    }
    drop(chunks);
    println!(
        "  {} file writes ({BURST_NOTES} creations in {BURST_CHUNKS} new folders, {BURST_EDITS} edits of existing notes) in {}",
        BURST_NOTES + BURST_EDITS,
        ms(write_took)
    );
    let burst_prefix = format!("{BURST_FOLDER}/");
    let expected_burst: BTreeMap<String, String> = expected
        .range(burst_prefix.clone()..)
        .take_while(|(p, _)| p.starts_with(&burst_prefix))
        .map(|(p, h)| (p.clone(), h.clone()))
        .collect();
    let deadline = written + CONVERGE_CAP;
    // The new notes first (the `burst/` listing: 2 pages, polled every 5 ms), then the
    // whole listing, which covers the edits.
    let mut burst_converged = None;
    let mut last_burst_diff = Vec::new();
    while Instant::now() < deadline {
        daemon.ensure_running()?;
        let listed = rt.block_on(client.listing(&burst_prefix))?;
        last_burst_diff = diff(&expected_burst, &listed);
        if last_burst_diff.is_empty() {
            burst_converged = Some(written.elapsed());
            break;
        }
        std::thread::sleep(BURST_POLL);
    }
    let mut full_converged = None;
    let mut full_pass = Duration::ZERO;
    let mut passes = 0;
    let last_full_diff = loop {
        daemon.ensure_running()?;
        let pass_began = Instant::now();
        let listed = rt.block_on(client.listing(""))?;
        full_pass = full_pass.max(pass_began.elapsed());
        passes += 1;
        let differs = diff(&expected, &listed);
        if differs.is_empty() {
            full_converged = Some(written.elapsed());
            break differs;
        }
        if Instant::now() >= deadline {
            break differs;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    match burst_converged {
        Some(t) => println!(
            "  {burst_prefix} listing equals what was written after {}",
            ms(t)
        ),
        None => {
            println!(
                "  {burst_prefix} listing still differs after {} s:",
                CONVERGE_CAP.as_secs()
            );
            print_diff(&last_burst_diff);
        }
    }
    match full_converged {
        Some(t) => println!(
            "  full listing ({} notes) equals the folder after {} ({passes} pass(es), the slowest {})",
            expected.len(),
            ms(t),
            ms(full_pass)
        ),
        None => {
            println!(
                "  full listing still differs after {} s: {} difference(s)",
                CONVERGE_CAP.as_secs(),
                last_full_diff.len()
            );
            print_diff(&last_full_diff);
        }
    }
    // What the bench believes it wrote must be what the folder holds.
    let walked = on_disk(&vault, "")?;
    let self_check = diff(&walked, &expected);
    ensure!(
        self_check.is_empty(),
        "the bench's own record differs from the folder: {self_check:?}"
    );
    let status = rt.block_on(client.json("/v1/index-status"))?;
    println!(
        "  watcher: {} batches, {} rescans, last error {}; history: {} commits, {} pending",
        status["watcher"]["batches"],
        status["watcher"]["rescans"],
        status["watcher"]["last_error"],
        status["history"]["commits"],
        status["history"]["pending"]
    );
    table.info(
        &format!(
            "burst: {BURST_NOTES} new notes ({BURST_CHUNKS} new folders) + {BURST_EDITS} edits written in"
        ),
        ms(write_took),
        "",
    );
    table.info(
        &format!("burst: the {BURST_NOTES} new notes all listed ({burst_prefix} listing) after"),
        burst_converged.map_or_else(|| format!("> {} s", CONVERGE_CAP.as_secs()), ms),
        "",
    );
    table.row(
        &format!(
            "burst: full listing ({} notes) equals the folder after",
            expected.len()
        ),
        full_converged.map_or_else(|| format!("> {} s", CONVERGE_CAP.as_secs()), ms),
        format!("<= {} s (cap)", CONVERGE_CAP.as_secs()),
        full_converged.is_some(),
    );
    table.row(
        &format!("burst: missed changes after {} s", CONVERGE_CAP.as_secs()),
        last_full_diff.len().to_string(),
        "0",
        last_full_diff.is_empty(),
    );
    println!();

    // 4b. CPU while idle, after the burst.
    println!(
        "[idle] daemon CPU over {} s after the burst (history caught up, {} s quiet)",
        settings.idle_seconds,
        BEFORE_IDLE.as_secs()
    );
    rt.block_on(wait_quiet(&mut client, &mut daemon))?;
    std::thread::sleep(BEFORE_IDLE);
    let idle_after = idle_cpu(&mut daemon, settings.idle_seconds)?;
    println!("  {idle_after:.3}% of one core");
    table.row(
        &format!(
            "CPU while idle, {} notes watched ({} s, after the burst)",
            expected.len(),
            settings.idle_seconds
        ),
        format!("{idle_after:.3}% of one core"),
        "< 1% of one core",
        idle_after < TARGET_IDLE_PERCENT,
    );
    println!();

    drop(client);
    daemon.stop()?;
    drop(rt);
    let cleaned = Instant::now();
    drop(scratch);
    println!("removed the scratch copy in {}", ms(cleaned.elapsed()));
    println!();
    println!(
        "watch, {} UTC, {} cores (\"visible\" = the listing shows the new content_hash; full-text search does not exist yet)",
        chrono::Utc::now().format("%Y-%m-%d %H:%M"),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    table.print();
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Measures

/// Poll the note's listing entry until it shows `want`; the time since `written`, or
/// `None` after `VISIBLE_TIMEOUT`.
async fn wait_visible(
    client: &mut Client,
    daemon: &mut Daemon,
    slug: &str,
    want: &str,
    written: Instant,
) -> Result<Option<Duration>> {
    let path = format!(
        "/v1/notes?prefix={}&page_size=1",
        utf8_percent_encode(slug, NON_ALPHANUMERIC)
    );
    loop {
        let page = client.json(&path).await?;
        let seen = Instant::now();
        let first = &page["notes"][0];
        if first["slug"].as_str() == Some(slug) && first["content_hash"].as_str() == Some(want) {
            return Ok(Some(seen - written));
        }
        if written.elapsed() > VISIBLE_TIMEOUT {
            return Ok(None);
        }
        daemon.ensure_running()?;
        tokio::time::sleep(VISIBLE_POLL).await;
    }
}

/// Wait until the history writer has nothing pending (`GET /v1/index-status`).
async fn wait_quiet(client: &mut Client, daemon: &mut Daemon) -> Result<()> {
    let began = Instant::now();
    loop {
        let status = client.json("/v1/index-status").await?;
        let history = &status["history"];
        if history["pending"].as_u64() == Some(0) && history["backlog"].as_u64() == Some(0) {
            return Ok(());
        }
        daemon.ensure_running()?;
        ensure!(
            began.elapsed() < QUIET_TIMEOUT,
            "the history writer still has work pending after {QUIET_TIMEOUT:?}: {history}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The daemon's CPU time (user + system) over `seconds` of doing nothing, in % of one core.
fn idle_cpu(daemon: &mut Daemon, seconds: u64) -> Result<f64> {
    let pid = daemon.child.id();
    let before = cpu_ticks(pid)?;
    let began = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    let after = cpu_ticks(pid)?;
    let wall = began.elapsed();
    daemon.ensure_running()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ensure!(hz > 0, "sysconf(_SC_CLK_TCK) failed");
    let cpu = after.saturating_sub(before) as f64 / hz as f64;
    println!(
        "  utime+stime {before} -> {after} ticks ({hz}/s) over {:.1} s",
        wall.as_secs_f64()
    );
    Ok(cpu / wall.as_secs_f64() * 100.0)
}

/// utime + stime of a process, in clock ticks (fields 14 and 15 of `/proc/<pid>/stat`).
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("unexpected /proc/<pid>/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3: fields 14 and 15 are at indices 11 and 12.
    let utime: u64 = fields.get(11).context("no utime")?.parse()?;
    let stime: u64 = fields.get(12).context("no stime")?.parse()?;
    Ok(utime + stime)
}

/// One file write of the burst.
struct BurstWrite {
    /// Vault-relative path.
    rel: String,
    bytes: Vec<u8>,
    /// By a temp file renamed over the note, rather than in place.
    rename: bool,
}

/// Write `bytes` to `.name.tmp` beside `path`, then rename it over `path`.
fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .context("a note path without a file name")?;
    let temp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&temp, bytes).with_context(|| format!("write {}", temp.display()))?;
    std::fs::rename(&temp, path).with_context(|| format!("rename over {}", path.display()))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The folder and the listing

fn content_hash(bytes: &[u8]) -> String {
    format!("blake3:{}", blake3::hash(bytes).to_hex())
}

/// Every note file under `root/under` (vault-relative path -> content hash), as the daemon
/// serves them: `.md` files outside its reserved folders and editor temp names.
fn on_disk(root: &Path, under: &str) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let walker = walkdir::WalkDir::new(root.join(under))
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| {
            e.depth() == 0
                || !(e.file_type().is_dir()
                    && RESERVED_DIRS.contains(&e.file_name().to_string_lossy().as_ref()))
        });
    for entry in walker {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy();
        if !entry.file_type().is_file() || !name.ends_with(".md") || is_temp_name(&name) {
            continue;
        }
        let rel = entry
            .path()
            .strip_prefix(root)?
            .to_str()
            .context("a non-UTF-8 path")?
            .to_string();
        let bytes = std::fs::read(entry.path())?;
        out.insert(rel, content_hash(&bytes));
    }
    Ok(out)
}

/// The daemon's editor temp names (`vault::path::is_temp_name`).
fn is_temp_name(name: &str) -> bool {
    name.ends_with('~')
        || name.starts_with(".#")
        || name == "4913"
        || (name.starts_with('.') && (name.ends_with(".swp") || name.ends_with(".swx")))
        || name.starts_with(".notevault-tmp")
}

fn folder_count(root: &Path) -> Result<usize> {
    let mut n = 0;
    for entry in walkdir::WalkDir::new(root) {
        if entry?.file_type().is_dir() {
            n += 1;
        }
    }
    Ok(n)
}

fn parent(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// `n` notes spread over the folders: folders in a fixed pseudo-random order (by the
/// hash of their name), one note from each in turn, each folder's notes in the same kind
/// of order, so consecutive picks are in different folders.
fn pick_spread(notes: &BTreeMap<String, String>, n: usize) -> Vec<String> {
    let key = |s: &str| blake3::hash(s.as_bytes());
    let mut by_folder: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rel in notes.keys() {
        by_folder
            .entry(parent(rel).to_string())
            .or_default()
            .push(rel.clone());
    }
    let mut folders: Vec<Vec<String>> = by_folder.into_values().collect();
    for f in &mut folders {
        f.sort_by_key(|rel| *key(rel).as_bytes());
    }
    folders.sort_by_key(|f| *key(parent(&f[0])).as_bytes());
    let longest = folders.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| folders.iter().filter_map(move |f| f.get(i).cloned()))
        .take(n)
        .collect()
}

/// What differs between what should be listed and what is: one line per path.
fn diff(expected: &BTreeMap<String, String>, listed: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (path, hash) in expected {
        match listed.get(path) {
            None => out.push(format!("not listed: {path}")),
            Some(h) if h != hash => out.push(format!("stale: {path} (listed {h}, file {hash})")),
            Some(_) => {}
        }
    }
    for path in listed.keys() {
        if !expected.contains_key(path) {
            out.push(format!("listed but not a note file: {path}"));
        }
    }
    out
}

fn print_diff(lines: &[String]) {
    for line in lines.iter().take(20) {
        println!("    {line}");
    }
    if lines.len() > 20 {
        println!("    ... and {} more", lines.len() - 20);
    }
}

// ---------------------------------------------------------------------------------------
// Corpus and scratch copy

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

/// The scratch copy (vault and state dir), removed when dropped: at the end, on an error
/// and on a panic.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("could not remove {}: {e}", self.0.display());
            }
        }
    }
}

/// An exclusive lock on `path`, held while the returned file is open: two runs of this
/// bench would remove each other's copies.
fn lock(path: &Path) -> Result<File> {
    let file = File::create(path)?;
    // SAFETY: a valid open descriptor; flock has no other preconditions.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    ensure!(
        rc == 0,
        "another watch bench holds {} ({})",
        path.display(),
        std::io::Error::last_os_error()
    );
    Ok(file)
}

/// `sync`, then wait `quiet`: see `SETTLE`.
fn settle(quiet: Duration) -> Result<()> {
    let status = Command::new("sync").status()?;
    ensure!(status.success(), "sync failed: {status}");
    std::thread::sleep(quiet);
    Ok(())
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
    /// `log_file` (time since spawn) and kept for look-ups. The daemon gets SIGKILL if
    /// this process dies without running its destructors.
    fn spawn(vault: &Path, state: &Path, log_file: &Path) -> Result<Self> {
        let addr = free_port()?;
        let mut file = File::create(log_file)?;
        let started = Instant::now();
        let mut command = Command::new(BIN);
        command
            .arg("serve")
            .arg(vault)
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--state-dir")
            .arg(state)
            .env("RATE_LIMIT_READ_PER_MINUTE", "0")
            .env("RATE_LIMIT_WRITE_PER_MINUTE", "0")
            .env("NO_COLOR", "1")
            .env_remove("NOTEVAULT_LOG")
            .env_remove("NOTEVAULT_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn().with_context(|| format!("spawn {BIN}"))?;
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

    /// The first log line containing `needle`, waiting up to `timeout` for it.
    fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> Result<String> {
        let began = Instant::now();
        loop {
            let found = self
                .log
                .lock()
                .ok()
                .and_then(|l| l.iter().find(|(_, s)| s.contains(needle)).cloned());
            if let Some((_, line)) = found {
                return Ok(line);
            }
            self.ensure_running()?;
            ensure!(
                began.elapsed() < timeout,
                "the daemon logged no `{needle}` line within {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn ensure_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let log: Vec<String> = self
                .log
                .lock()
                .map(|l| l.iter().map(|(_, s)| s.clone()).collect())
                .unwrap_or_default();
            let tail = log.len().saturating_sub(40);
            bail!("the daemon exited ({status}):\n{}", log[tail..].join("\n"));
        }
        Ok(())
    }

    /// Ctrl-C (SIGINT) and wait; kill when it does not stop within 30 s.
    fn stop(mut self) -> Result<()> {
        // SAFETY: kill has no memory-safety preconditions; the pid is our own child,
        // not yet waited for.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGINT);
        }
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

/// Poll `GET /v1/notes?page_size=1` until it answers 200; time since spawn.
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

/// Poll `git --git-dir <state>/history.git rev-parse HEAD` until the history bootstrap
/// has committed.
fn wait_history(daemon: &mut Daemon, state: &Path) -> Result<()> {
    let git_dir = state.join("history.git");
    let began = Instant::now();
    loop {
        let ok = git_dir.join("HEAD").is_file()
            && Command::new("git")
                .arg("--git-dir")
                .arg(&git_dir)
                .args(["rev-parse", "--verify", "-q", "HEAD"])
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
        if ok {
            return Ok(());
        }
        daemon.ensure_running()?;
        ensure!(
            began.elapsed() < HISTORY_TIMEOUT,
            "the history bootstrap did not commit within {HISTORY_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `key=value` in a log line (colours, if any, left out).
fn field(line: &str, key: &str) -> Option<String> {
    strip_ansi(line)
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .map(|v| v.trim_matches('"').to_string())
}

/// `line` without ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// HTTP client

/// A connection that is (re)opened on demand; every request has a timeout and must
/// answer 200 with JSON.
struct Client {
    addr: SocketAddr,
    conn: Option<Conn>,
}

impl Client {
    fn new(addr: SocketAddr) -> Self {
        Self { addr, conn: None }
    }

    async fn json(&mut self, path: &str) -> Result<Value> {
        // A kept-alive connection the daemon has closed in the meantime fails once: retry
        // on a fresh one.
        let reused = self.conn.is_some();
        let (status, body) = match self.get(path).await {
            Err(_) if reused => self.get(path).await?,
            answer => answer?,
        };
        ensure!(
            status == StatusCode::OK,
            "GET {path}: {status}: {}",
            String::from_utf8_lossy(&body)
        );
        serde_json::from_slice(&body).with_context(|| format!("GET {path}: not JSON"))
    }

    /// One GET within `REQUEST_TIMEOUT`; the connection is dropped on any failure.
    async fn get(&mut self, path: &str) -> Result<(StatusCode, Bytes)> {
        let attempt = async {
            let conn = match &mut self.conn {
                Some(c) => c,
                None => self.conn.insert(Conn::open(self.addr).await?),
            };
            conn.get(path).await
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, attempt).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => {
                self.conn = None;
                Err(e.context(format!("GET {path}")))
            }
            Err(_) => {
                self.conn = None;
                bail!("GET {path}: no answer within {REQUEST_TIMEOUT:?}");
            }
        }
    }

    /// Every listed note under `prefix` (path -> content hash), paged 500 at a time.
    async fn listing(&mut self, prefix: &str) -> Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        let mut token: Option<String> = None;
        loop {
            let mut path = format!(
                "/v1/notes?page_size=500&prefix={}",
                utf8_percent_encode(prefix, NON_ALPHANUMERIC)
            );
            if let Some(t) = &token {
                path.push_str("&page_token=");
                path.push_str(&utf8_percent_encode(t, NON_ALPHANUMERIC).to_string());
            }
            let page = self.json(&path).await?;
            for note in page["notes"].as_array().context("no `notes` array")? {
                let rel = note["path"].as_str().context("a note without a path")?;
                let hash = note["content_hash"].as_str().unwrap_or_default();
                out.insert(rel.to_string(), hash.to_string());
            }
            match page["next_page_token"].as_str() {
                Some(t) => token = Some(t.to_string()),
                None => return Ok(out),
            }
        }
    }
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

    fn info(&mut self, what: &str, measured: String, target: &str) {
        self.rows
            .push([what.into(), measured, target.into(), String::new()]);
    }

    fn print(&self) {
        let header = [
            "figure".to_string(),
            "measured".to_string(),
            "target".to_string(),
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

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// The 1-minute load average.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn sh_out(script: &str) -> Result<String> {
    let out = Command::new("sh").arg("-c").arg(script).output()?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default().trim()
}
