//! Shared by the benches: the corpus, the daemon, percentiles.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;

/// The query mix of the search benches (`search`, `scale`): words, phrases, prefixes and
/// fields over the corpus.
pub const SEARCH_QUERIES: &[&str] = &[
    "git",
    "docker",
    "tar",
    "ssh",
    "curl",
    "kubectl",
    "postgres",
    "vim",
    "rails",
    "react",
    "schema",
    "lookup",
    "publish",
    "vault",
    "pipeline",
    "module",
    "cmdlet",
    "parameter",
    "\"pull request\"",
    "\"regular expression\"",
    "\"file system\"",
    "\"hello world\"",
    "kube*",
    "postg*",
    "Get-ChildItem",
    "network interface",
    "compress archive",
    "list files",
    "environment variable",
    "title:docker",
    "tags:javascript",
    "python",
    "json",
    "http",
    "certificate",
    "password",
    "branch merge",
    "remote",
    "registry",
    "process",
    "memory",
    "timezone",
    "unicode",
    "markdown",
    "wikilink",
    "backlink",
];

/// The one daemon-spawning helper, the tests' own (`tests/it/common/daemon.rs`).
#[path = "../../tests/it/common/daemon.rs"]
pub mod daemon;

/// `bin serve` without this process's configuring environment, and its start (the hosted
/// bench builds its own command lines: `--database`, static tokens).
#[allow(unused_imports)] // only the hosted bench uses them
pub use daemon::{serve as serve_command, start as start_command};
pub use daemon::{Daemon, BIN};

pub fn start(vault: &Path, state: &Path) -> Result<Daemon> {
    start_bin(BIN, vault, state)
}

/// [`start`] with another daemon binary (to compare two builds on one machine).
pub fn start_bin(bin: &str, vault: &Path, state: &Path) -> Result<Daemon> {
    start_env(bin, vault, state, &[])
}

/// [`start_bin`] with more environment variables (`AUTH_REQUIRED=true`, say); no rate
/// limits unless `env` sets them.
pub fn start_env(bin: &str, vault: &Path, state: &Path, env: &[(&str, &str)]) -> Result<Daemon> {
    let mut command = daemon::command(bin, "127.0.0.1:0", vault, Some(state));
    command
        .env("RATE_LIMIT_READ_PER_MINUTE", "0")
        .env("RATE_LIMIT_WRITE_PER_MINUTE", "0")
        .envs(env.iter().copied());
    Ok(daemon::start(command)?)
}

pub fn corpus() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let unpacked = root.join("target/bench-corpus/realvault");
    if unpacked.is_dir() {
        return Some(unpacked);
    }
    let tarball = std::env::var_os("NOTEVAULT_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/corpora/realvault.tar.gz"));
    if !tarball.exists() {
        return None;
    }
    std::fs::create_dir_all(root.join("target/bench-corpus")).ok()?;
    let ok = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(root.join("target/bench-corpus"))
        .status()
        .ok()?
        .success();
    ok.then_some(unpacked)
}

/// A fresh copy of `from` at `to` (`cp -a`). Whatever was at `to` is removed first; if
/// anything is left there, this fails rather than let `cp` copy `from` into it (a copy
/// nested one level down, which a bench would then read as a vault without its notes).
pub fn copy(from: &Path, to: &Path) -> Result<()> {
    match std::fs::remove_dir_all(to) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => bail!("cannot remove {} before copying: {e}", to.display()),
    }
    if to.exists() {
        bail!("{} is still there after its removal", to.display());
    }
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status()?;
    if !status.success() {
        bail!("cp -a failed");
    }
    Ok(())
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn stats(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (percentile(&v, 0.5), percentile(&v, 0.99))
}

pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

pub fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let status = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("git {args:?} failed");
    }
    Ok(())
}

pub async fn wait_history(state: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(900);
    while Instant::now() < deadline {
        let ok = Command::new("git")
            .arg("--git-dir")
            .arg(state.join("history.git"))
            .args(["rev-parse", "-q", "--verify", "HEAD"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?
            .success();
        if ok {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("the history bootstrap did not finish")
}

/// Wait until the daemon `pid` is idle: at most 2 % of a core over half a second (its
/// start-up work, the index's merges and the catch-up rescan, done), at most `limit`.
pub async fn wait_idle(pid: u32, limit: Duration) -> Result<()> {
    let deadline = Instant::now() + limit;
    // 2 % of half a second, in clock ticks (at least one).
    let quiet = (clock_ticks_per_second()? / 100).max(1);
    let mut before = cpu_ticks(pid)?;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = cpu_ticks(pid)?;
        if now - before <= quiet {
            return Ok(());
        }
        before = now;
    }
    bail!("the daemon was still busy after {limit:?}")
}

/// `GET path` answered 200 with a JSON body.
pub async fn get_json(conn: &mut Conn, path: &str) -> Result<serde_json::Value> {
    let (status, body) = conn.get(path).await?;
    ensure!(
        status == StatusCode::OK,
        "GET {path}: {status}: {}",
        String::from_utf8_lossy(&body)
    );
    Ok(serde_json::from_slice(&body)?)
}

/// Wait until the daemon at `addr` has settled: the index reflects every recorded change
/// (its start-up sync done), a warm start's verify is over, and (with an embedding model)
/// every note's vectors are computed; the index status.
pub async fn wait_indexed(addr: SocketAddr, limit: Duration) -> Result<serde_json::Value> {
    let mut conn = Conn::open(addr).await?;
    let deadline = Instant::now() + limit;
    loop {
        let st = get_json(&mut conn, "/v1/index-status").await?;
        if st["indexed_seq"] == st["committed_seq"]
            && st["search_index"]["not_yet_indexed"] == 0
            && st["search_index"]["synced_notes"].is_number()
            && st["start_scan"]["verifying"] != true
            && st["embeddings"]["syncing"] != true
            && st["embeddings"]["pending"].as_u64().unwrap_or(0) == 0
        {
            return Ok(st);
        }
        if Instant::now() > deadline {
            bail!("the index never caught up: {st}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Wait until the segments a start-up sync left are merged into one
/// (`search_index.merging` false): searches cost more while they are not, and the merge
/// takes a core. The index status at that moment.
pub async fn wait_merged(addr: SocketAddr, limit: Duration) -> Result<serde_json::Value> {
    let mut conn = Conn::open(addr).await?;
    let deadline = Instant::now() + limit;
    loop {
        let st = get_json(&mut conn, "/v1/index-status").await?;
        if st["search_index"]["merging"] == false {
            return Ok(st);
        }
        if Instant::now() > deadline {
            bail!("the index segments were never merged: {st}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Wait until the daemon started at `since` has written the scan cache of `state` (after
/// the rescan that follows its start), so that the next start on `state` finds it.
pub async fn wait_scan_cache(state: &Path, since: Instant) -> Result<()> {
    let cache = state.join("scan.cache");
    let deadline = Instant::now() + Duration::from_secs(900);
    while Instant::now() < deadline {
        let fresh = std::fs::metadata(&cache)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < since.elapsed()));
        if fresh {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("no scan cache was written")
}

/// One HTTP/1.1 keep-alive connection (hyper, no pool).
pub struct Conn {
    sender: http1::SendRequest<Empty<Bytes>>,
    host: String,
    /// `Authorization: Bearer` value of every request, when set.
    bearer: Option<hyper::header::HeaderValue>,
}

impl Conn {
    /// [`Conn::open`], sending `Authorization: Bearer <token>` with every request.
    pub async fn open_with_token(addr: SocketAddr, token: &str) -> Result<Self> {
        let mut conn = Self::open(addr).await?;
        conn.bearer = Some(format!("Bearer {token}").parse()?);
        Ok(conn)
    }

    pub async fn open(addr: SocketAddr) -> Result<Self> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Self {
            sender,
            host: addr.to_string(),
            bearer: None,
        })
    }

    pub async fn get(&mut self, path: &str) -> Result<(StatusCode, Bytes)> {
        self.sender.ready().await?;
        let mut request = Request::get(path).header("host", &self.host);
        if let Some(bearer) = &self.bearer {
            request = request.header(hyper::header::AUTHORIZATION, bearer);
        }
        let request = request.body(Empty::<Bytes>::new())?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

pub struct LoadResult {
    pub requests: usize,
    pub errors: u64,
    pub rps: f64,
    pub p50: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub p999: Duration,
    pub max: Duration,
    pub mean_body: f64,
}

impl LoadResult {
    pub fn summary(&self) -> String {
        format!(
            "{} requests, {:.0} req/s, p50 {} p90 {} p99 {} p99.9 {} max {}, body mean {:.1} KB, {} non-200",
            self.requests,
            self.rps,
            us(self.p50),
            us(self.p90),
            us(self.p99),
            us(self.p999),
            us(self.max),
            self.mean_body / 1e3,
            self.errors
        )
    }
}

/// `connections` keep-alive connections, each sending the next path as soon as the last
/// answer is read, for `WARMUP` (discarded) then `duration`. Latency: from just before
/// the request is sent to the last byte of the body, per request.
pub async fn load(
    addr: SocketAddr,
    paths: Arc<Vec<String>>,
    connections: usize,
    warmup: Duration,
    duration: Duration,
) -> Result<LoadResult> {
    load_as(addr, None, paths, connections, warmup, duration).await
}

/// [`load`], each request with `Authorization: Bearer <token>` when given.
pub async fn load_as(
    addr: SocketAddr,
    token: Option<String>,
    paths: Arc<Vec<String>>,
    connections: usize,
    warmup: Duration,
    duration: Duration,
) -> Result<LoadResult> {
    ensure!(!paths.is_empty(), "no paths to load");
    let begin = Instant::now();
    let measure_from = begin + warmup;
    let end = measure_from + duration;
    let mut tasks = Vec::new();
    for c in 0..connections {
        let paths = paths.clone();
        let token = token.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = match &token {
                Some(token) => Conn::open_with_token(addr, token).await?,
                None => Conn::open(addr).await?,
            };
            let mut latencies = Vec::with_capacity(1 << 16);
            let mut errors = 0u64;
            let mut bytes = 0u64;
            let mut i = c * paths.len() / connections;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                let path = &paths[i % paths.len()];
                i += 1;
                let (status, body) = conn.get(path).await?;
                let took = t0.elapsed();
                if t0 >= measure_from {
                    if status == StatusCode::OK {
                        latencies.push(took);
                        bytes += body.len() as u64;
                    } else {
                        errors += 1;
                    }
                }
            }
            anyhow::Ok((latencies, errors, bytes))
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    let mut bytes = 0;
    for task in tasks {
        let (latencies, e, b) = task.await??;
        all.extend(latencies);
        errors += e;
        bytes += b;
    }
    all.sort_unstable();
    let requests = all.len();
    Ok(LoadResult {
        requests,
        errors,
        rps: (requests as u64 + errors) as f64 / duration.as_secs_f64(),
        p50: rank_percentile(&all, 50.0),
        p90: rank_percentile(&all, 90.0),
        p99: rank_percentile(&all, 99.0),
        p999: rank_percentile(&all, 99.9),
        max: all.last().copied().unwrap_or_default(),
        mean_body: bytes as f64 / requests.max(1) as f64,
    })
}

/// utime + stime of a process, in clock ticks (fields 14 and 15 of `/proc/<pid>/stat`):
/// every thread's CPU time, also of threads that ended.
pub fn cpu_ticks(pid: u32) -> Result<u64> {
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

/// Clock ticks per second (`CLK_TCK`), the unit of [`cpu_ticks`].
pub fn clock_ticks_per_second() -> Result<u64> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ensure!(hz > 0, "sysconf(_SC_CLK_TCK) failed");
    Ok(hz as u64)
}

/// Nearest-rank percentile of sorted samples.
pub fn rank_percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn us(d: Duration) -> String {
    format!("{:.0} us", d.as_secs_f64() * 1e6)
}

/// A bench's `main`: runs `run` under `cargo bench --bench NAME` and exits non-zero on its
/// error; under `cargo test --all-targets` (no `--bench`) it does nothing.
#[allow(dead_code)] // each bench binary compiles this module; some have their own main
pub fn bench_main(name: &str, run: impl FnOnce() -> Result<()>) -> std::process::ExitCode {
    if !std::env::args().any(|a| a == "--bench") {
        println!("{name} bench: run it with `cargo bench --bench {name}`; nothing to test here");
        return std::process::ExitCode::SUCCESS;
    }
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name} bench failed: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The load averages over 1, 5 and 15 minutes (`/proc/loadavg`), as printed beside a
/// figure.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// A positive number from the environment, or `default`.
pub fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

/// The `.md` files under `root`: how many, and their bytes.
pub fn markdown_files(root: &Path) -> (usize, u64) {
    let mut n = 0;
    let mut bytes = 0;
    for e in walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
    {
        if e.file_type().is_file() && e.file_name().to_string_lossy().ends_with(".md") {
            n += 1;
            bytes += e.metadata().map_or(0, |m| m.len());
        }
    }
    (n, bytes)
}

/// The socket address of a daemon's `http://` base URL.
pub fn addr_of(base: &str) -> Result<SocketAddr> {
    Ok(base.trim_start_matches("http://").parse()?)
}

/// A memory figure of `/proc/PID/status` (`VmRSS:`, `VmHWM:`), in MiB.
pub fn proc_status_mib(pid: u32, field: &str) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {field}"))?;
    Ok(kb / 1024.0)
}
