//! `cargo bench --bench mcp`: tool calls over `/mcp` at 8 connections on the real corpus
//! (`../shared/corpora/realvault.tar.gz`): p50, p99 and req/s of the `search` tool and of
//! `read_note` (200 lines), in both protocol eras, each beside its `GET /v1` twin for the
//! cost of the MCP layer. Target: search p50 <= 2 ms. Then the daemon's CPU per `search`
//! call (utime + stime of the daemon over a load, divided by the calls answered): `GET
//! /v1/search`, the stateless 2026-07-28 call and the 2025-11-25 session call, one load
//! after the other with the same queries, three runs; target: an MCP call <= 1.3x the
//! CPU of its `/v1` twin, in both eras.
//!
//! Environment: `NOTEVAULT_CORPUS` (the tarball; without it the bench says so and exits
//! 0), `NOTEVAULT_BENCH_SECONDS` (measured seconds per load, default 10),
//! `NOTEVAULT_BENCH_CPU_SECONDS` (seconds per CPU load, default 4), `NOTEVAULT_BENCH_BIN`
//! (the daemon binary to measure, default this build's: to compare two builds).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the editor and the operator: they write the vault and read the environment"
)]

mod common;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

const CONNECTIONS: usize = 8;
const WARMUP: Duration = Duration::from_secs(1);
const TARGET_P50: Duration = Duration::from_millis(2);
const SLUGS: usize = 2000;
/// Target of the CPU figure: an MCP `search` call costs at most this many times the CPU of
/// its `GET /v1/search` twin.
const TARGET_CPU_RATIO: f64 = 1.3;
const CPU_RUNS: usize = 3;

fn main() -> ExitCode {
    common::bench_main("mcp", run)
}

/// How a request reaches the daemon.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Era {
    /// `GET /v1/...`, for reference.
    Http,
    /// 2026-07-28: stateless POSTs with `_meta` and the standard headers, JSON answers.
    Stateless,
    /// 2025-11-25: one `initialize`d session per connection, SSE answers.
    Session,
}

struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    host: String,
    session: Option<String>,
}

impl Conn {
    async fn open(addr: SocketAddr, era: Era) -> Result<Self> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut conn = Self {
            sender,
            host: addr.to_string(),
            session: None,
        };
        if era == Era::Session {
            let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "notevault-bench", "version": "0"}}});
            let (status, headers, _) = conn.post(&init, None).await?;
            ensure!(status == StatusCode::OK, "initialize: {status}");
            let id = headers
                .get("mcp-session-id")
                .context("no Mcp-Session-Id")?
                .to_str()?
                .to_string();
            conn.session = Some(id);
            let (status, _, _) = conn
                .post(
                    &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                    None,
                )
                .await?;
            ensure!(status == StatusCode::ACCEPTED, "initialized: {status}");
        }
        Ok(conn)
    }

    async fn get(&mut self, path: &str) -> Result<(StatusCode, Bytes)> {
        self.sender.ready().await?;
        let request = Request::get(path)
            .header("host", &self.host)
            .body(Full::new(Bytes::new()))?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        Ok((status, response.into_body().collect().await?.to_bytes()))
    }

    async fn post(
        &mut self,
        body: &Value,
        method: Option<(&str, &str, &str)>,
    ) -> Result<(StatusCode, hyper::HeaderMap, Bytes)> {
        self.sender.ready().await?;
        let mut request = Request::post("/mcp")
            .header("host", &self.host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some((version, method, name)) = method {
            request = request
                .header("mcp-protocol-version", version)
                .header("mcp-method", method)
                .header("mcp-name", name);
        }
        if let Some(id) = &self.session {
            request = request
                .header("mcp-session-id", id)
                .header("mcp-protocol-version", "2025-11-25");
        }
        let request = request.body(Full::new(Bytes::from(serde_json::to_vec(body)?)))?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let headers = response.headers().clone();
        Ok((
            status,
            headers,
            response.into_body().collect().await?.to_bytes(),
        ))
    }

    /// One tool call; `Ok(true)` when it answered a result that is not an error.
    async fn call(&mut self, era: Era, tool: &str, arguments: &Value) -> Result<bool> {
        let mut params = json!({"name": tool, "arguments": arguments});
        let headers = if era == Era::Stateless {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "notevault-bench", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {}
            });
            Some(("2026-07-28", "tools/call", tool))
        } else {
            None
        };
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        let (status, _, bytes) = self.post(&body, headers).await?;
        if status != StatusCode::OK {
            return Ok(false);
        }
        // A result that is not an error ends with `"isError":false}}` (as JSON, or as the
        // last SSE event): checked without parsing, so the client spends its share of
        // the two cores as the `/v1` client does, on reading bytes.
        let last = bytes
            .split(|b| *b == b'\n')
            .rev()
            .find(|line| line.starts_with(b"data:") || line.starts_with(b"{"))
            .unwrap_or_default();
        Ok(last.trim_ascii_end().ends_with(br#""isError":false}}"#))
    }
}

/// What one load asks for, request after request.
#[derive(Clone)]
enum Work {
    Read(Arc<Vec<String>>),
    Search(Arc<Vec<String>>),
}

/// Queries of the search load (words, phrases, prefixes, fields), as `benches/search.rs`.
const QUERIES: &[&str] = &[
    "git",
    "docker",
    "ssh",
    "kubectl",
    "postgres",
    "schema",
    "pipeline",
    "module",
    "cmdlet",
    "parameter",
    "\"pull request\"",
    "\"regular expression\"",
    "kube*",
    "Get-ChildItem",
    "network interface",
    "environment variable",
    "title:docker",
    "tags:javascript",
    "python",
    "compress archive",
];

struct LoadResult {
    ok: usize,
    errors: u64,
    rps: f64,
    p50: Duration,
    p99: Duration,
}

async fn load(addr: SocketAddr, era: Era, work: Work, duration: Duration) -> Result<LoadResult> {
    let begin = Instant::now();
    let measure_from = begin + WARMUP;
    let end = measure_from + duration;
    let mut tasks = Vec::new();
    for c in 0..CONNECTIONS {
        let work = work.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr, era).await?;
            let mut latencies = Vec::with_capacity(1 << 16);
            let mut errors = 0u64;
            let mut i = c * 997;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                i += 1;
                let ok = match (&work, era) {
                    (Work::Read(slugs), Era::Http) => {
                        let slug = &slugs[i % slugs.len()];
                        let path = format!(
                            "/v1/notes/{}?limit=200",
                            percent_encoding::utf8_percent_encode(
                                slug,
                                percent_encoding::NON_ALPHANUMERIC
                            )
                        );
                        conn.get(&path).await?.0 == StatusCode::OK
                    }
                    (Work::Read(slugs), _) => {
                        let args = json!({"note": slugs[i % slugs.len()], "limit": 200});
                        conn.call(era, "read_note", &args).await?
                    }
                    (Work::Search(queries), Era::Http) => {
                        let q = &queries[i % queries.len()];
                        let path = format!(
                            "/v1/search?q={}",
                            percent_encoding::utf8_percent_encode(
                                q,
                                percent_encoding::NON_ALPHANUMERIC
                            )
                        );
                        conn.get(&path).await?.0 == StatusCode::OK
                    }
                    (Work::Search(queries), _) => {
                        let args = json!({"q": queries[i % queries.len()]});
                        conn.call(era, "search", &args).await?
                    }
                };
                let took = t0.elapsed();
                if t0 >= measure_from {
                    if ok {
                        latencies.push(took);
                    } else {
                        errors += 1;
                    }
                }
            }
            anyhow::Ok((latencies, errors))
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let (latencies, e) = task.await??;
        all.extend(latencies);
        errors += e;
    }
    let ok = all.len();
    let (p50, p99) = common::stats(all);
    Ok(LoadResult {
        ok,
        errors,
        rps: (ok as u64 + errors) as f64 / duration.as_secs_f64(),
        p50,
        p99,
    })
}

/// The daemon's CPU per `search` call over `duration` of `era`'s load at
/// [`CONNECTIONS`] connections (opened, and sessions initialized, before the count
/// starts): (microseconds per call, calls).
async fn cpu_per_call(
    addr: SocketAddr,
    pid: u32,
    era: Era,
    queries: Arc<Vec<String>>,
    duration: Duration,
) -> Result<(f64, u64)> {
    let mut conns = Vec::new();
    for _ in 0..CONNECTIONS {
        conns.push(Conn::open(addr, era).await?);
    }
    let before = common::cpu_ticks(pid)?;
    let end = Instant::now() + duration;
    let mut tasks = Vec::new();
    for (c, mut conn) in conns.into_iter().enumerate() {
        let queries = queries.clone();
        tasks.push(tokio::spawn(async move {
            let (mut calls, mut errors) = (0u64, 0u64);
            let mut i = c * 997;
            while Instant::now() < end {
                i += 1;
                let q = &queries[i % queries.len()];
                let ok = if era == Era::Http {
                    let path = format!(
                        "/v1/search?q={}",
                        percent_encoding::utf8_percent_encode(
                            q,
                            percent_encoding::NON_ALPHANUMERIC
                        )
                    );
                    conn.get(&path).await?.0 == StatusCode::OK
                } else {
                    conn.call(era, "search", &json!({"q": q})).await?
                };
                if ok {
                    calls += 1;
                } else {
                    errors += 1;
                }
            }
            anyhow::Ok((calls, errors))
        }));
    }
    let (mut calls, mut errors) = (0, 0);
    for task in tasks {
        let (c, e) = task.await??;
        calls += c;
        errors += e;
    }
    let ticks = common::cpu_ticks(pid)? - before;
    ensure!(errors == 0, "{errors} search calls failed");
    ensure!(calls > 0, "no search call was answered");
    let hz = common::clock_ticks_per_second()?;
    Ok((ticks as f64 * 1e6 / hz as f64 / calls as f64, calls))
}

/// The CPU figure: [`CPU_RUNS`] runs, each `GET /v1/search`, then the stateless call,
/// then the session call, printed as a table beside the target.
async fn cpu_figure(
    addr: SocketAddr,
    pid: u32,
    queries: Arc<Vec<String>>,
    duration: Duration,
) -> Result<()> {
    println!();
    println!(
        "daemon CPU per search call (utime+stime / calls, {CONNECTIONS} connections, {} s per load, /v1 then stateless then session in each run)",
        duration.as_secs()
    );
    println!();
    println!(
        "| run | GET /v1/search | MCP 2026-07-28 stateless | ratio | MCP 2025-11-25 session | ratio | target <= {TARGET_CPU_RATIO}x |"
    );
    println!("|---|---|---|---|---|---|---|");
    let load_before = common::loadavg();
    let mut sums = [0.0f64; 3];
    for run in 1..=CPU_RUNS {
        let mut us = [0.0f64; 3];
        for (k, era) in [Era::Http, Era::Stateless, Era::Session]
            .into_iter()
            .enumerate()
        {
            us[k] = cpu_per_call(addr, pid, era, queries.clone(), duration)
                .await?
                .0;
            sums[k] += us[k];
        }
        let (stateless, session) = (us[1] / us[0], us[2] / us[0]);
        println!(
            "| {run} | {:.0} us | {:.0} us | {stateless:.2}x | {:.0} us | {session:.2}x | {} |",
            us[0],
            us[1],
            us[2],
            verdict(stateless.max(session))
        );
    }
    let n = CPU_RUNS as f64;
    let (stateless, session) = (sums[1] / sums[0], sums[2] / sums[0]);
    println!(
        "| mean | {:.0} us | {:.0} us | {stateless:.2}x | {:.0} us | {session:.2}x | stateless {}, session {} |",
        sums[0] / n,
        sums[1] / n,
        sums[2] / n,
        verdict(stateless),
        verdict(session)
    );
    println!();
    println!("load average {load_before} -> {}", common::loadavg());
    Ok(())
}

fn verdict(ratio: f64) -> &'static str {
    if ratio <= TARGET_CPU_RATIO {
        "met"
    } else {
        "MISSED"
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Read,
    Search,
}

/// Wait until the search index has every change (the start-up indexing of the corpus).
async fn wait_indexed(addr: SocketAddr) -> Result<()> {
    let mut conn = Conn::open(addr, Era::Http).await?;
    let deadline = Instant::now() + Duration::from_secs(900);
    while Instant::now() < deadline {
        let (status, body) = conn.get("/v1/index-status").await?;
        ensure!(status == StatusCode::OK, "index-status: {status}");
        let st: Value = serde_json::from_slice(&body)?;
        if st["indexed_seq"] == st["committed_seq"] {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("the search index did not catch up")
}

/// Every `step`-th slug of the vault, up to `SLUGS`.
async fn slugs(addr: SocketAddr) -> Result<Vec<String>> {
    let mut conn = Conn::open(addr, Era::Http).await?;
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut path = "/v1/notes?page_size=500".to_string();
        if let Some(t) = &token {
            path.push_str("&page_token=");
            path.push_str(t);
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

fn run() -> Result<()> {
    let seconds: u64 = std::env::var("NOTEVAULT_BENCH_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(10);
    let Some(corpus) = common::corpus() else {
        println!("skipped: the corpus tarball was not found (NOTEVAULT_CORPUS)");
        return Ok(());
    };
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
    };
    let work = target.join("bench-corpus/mcp-run");
    std::fs::create_dir_all(&work)?;
    let vault = work.join("vault");
    let state = work.join("state");
    common::copy(&corpus, &vault)?;
    let _ = std::fs::remove_dir_all(&state);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let bin = std::env::var("NOTEVAULT_BENCH_BIN").unwrap_or_else(|_| common::BIN.to_string());
    let daemon = common::start_bin(&bin, &vault, &state)?;
    let addr: SocketAddr = daemon
        .base
        .trim_start_matches("http://")
        .parse()
        .context("daemon address")?;
    let pid = daemon.child.id();
    let result = rt.block_on(async {
        common::wait_history(&state).await?;
        let slugs = Arc::new(slugs(addr).await?);
        let queries = Arc::new(QUERIES.iter().map(|q| q.to_string()).collect::<Vec<_>>());
        wait_indexed(addr).await?;
        println!("notevault MCP bench");
        println!(
            "  date      {}",
            chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
        );
        println!(
            "  machine   {} cores; client and daemon share them",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        println!("  daemon    {bin}");
        println!(
            "  corpus    {} ({} slugs sampled for reads)",
            corpus.display(),
            slugs.len()
        );
        println!(
            "  load      {CONNECTIONS} connections, {} s warm-up + {seconds} s each",
            WARMUP.as_secs()
        );
        println!();
        println!(
            "| load | p50 | p99 | req/s | errors | target p50 <= {} ms |",
            TARGET_P50.as_millis()
        );
        println!("|---|---|---|---|---|---|");
        let duration = Duration::from_secs(seconds);
        for (label, era, work) in [
            (
                "search (10 results), MCP 2026-07-28 stateless",
                Era::Stateless,
                Work::Search(queries.clone()),
            ),
            (
                "search (10 results), MCP 2025-11-25 session",
                Era::Session,
                Work::Search(queries.clone()),
            ),
            (
                "GET /v1/search?q= (reference)",
                Era::Http,
                Work::Search(queries.clone()),
            ),
            (
                "read_note (200 lines), MCP 2026-07-28 stateless",
                Era::Stateless,
                Work::Read(slugs.clone()),
            ),
            (
                "read_note (200 lines), MCP 2025-11-25 session",
                Era::Session,
                Work::Read(slugs.clone()),
            ),
            (
                "GET /v1/notes/{note}?limit=200 (reference)",
                Era::Http,
                Work::Read(slugs.clone()),
            ),
        ] {
            let work_kind = match work {
                Work::Read(_) => Kind::Read,
                Work::Search(_) => Kind::Search,
            };
            let r = load(addr, era, work, duration).await?;
            let verdict = if r.errors > 0 {
                "ERRORS"
            } else if era == Era::Http || matches!(work_kind, Kind::Read) {
                "-"
            } else if r.p50 <= TARGET_P50 {
                "met"
            } else {
                "MISSED"
            };
            println!(
                "| {label} | {} | {} | {:.0} | {} of {} | {verdict} |",
                common::ms(r.p50),
                common::ms(r.p99),
                r.rps,
                r.errors,
                r.ok as u64 + r.errors
            );
        }
        let cpu_seconds = common::env_num("NOTEVAULT_BENCH_CPU_SECONDS", 4);
        cpu_figure(addr, pid, queries, Duration::from_secs(cpu_seconds)).await?;
        anyhow::Ok(())
    });
    drop(daemon);
    let _ = std::fs::remove_dir_all(&work);
    result
}
