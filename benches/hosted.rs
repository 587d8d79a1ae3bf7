//! `cargo bench --bench hosted`: hosted mode (issue 43) beside its floor, in one run, on a
//! PostgreSQL 15 cluster of its own (durable settings, `benches/hosted/pg.rs`):
//!
//! 1. `create`: `POST /v1/notes` p50/p99, one client, ~1 KB notes, beside `pgbench -c1`
//!    running one transaction of the same shape (a counter row bumped, a ~1 KB row
//!    inserted); target: create p50 ≤ 2× the transaction's p50.
//! 2. `writes`: applied creates/s at 16 clients, 1 instance and 2 instances on one vault,
//!    beside `pgbench -c16` of the same script; target ≥ 50 % of its TPS.
//! 3. `read`: `GET /v1/notes/{note}?limit=200` at 8 connections, hosted beside local mode
//!    on the same notes (the corpus, or 2,000 generated notes without it).
//! 4. `fresh`: a create on instance A → found by a search on instance B (polled, and with
//!    `min_seq`); target p50 ≤ 100 ms.
//! 5. `import`: `notevault import` of the 44k corpus (its history: the one commit of its
//!    first start): wall time, database size, the `contents` table's share.
//! 6. `vaults`: 1,000 vaults of 100 small generated notes served by one instance: RSS
//!    after start, after one request to each, per idle vault; target ≤ 1 MiB each.
//! 7. `fault`: 8 writers while PostgreSQL is stopped (`pg_ctl stop -m immediate`) and
//!    started, and while an instance is killed (SIGKILL) and restarted: acknowledged
//!    writes lost (must be 0), retries answered with their receipt.
//! 8. `blobs`: a 20 MiB attachment up and down through an instance beside the same
//!    transfer straight to the blob store (`s3s-fs`), same client crate; target ≥ 0.7×.
//!
//! Each pair runs interleaved over `NOTEVAULT_BENCH_ROUNDS` (default 3) rounds.
//! `NOTEVAULT_BENCH_PARTS` (e.g. `create,writes`; default all), `NOTEVAULT_BENCH_SECONDS`
//! (loads, default 10), `NOTEVAULT_BENCH_CREATES` (per round, default 300),
//! `NOTEVAULT_BENCH_FRESH` (writes, default 200), `NOTEVAULT_BENCH_VAULTS` (default
//! 1000), `NOTEVAULT_BENCH_FAULT_SECONDS` (default 30), `NOTEVAULT_BENCH_BIN` (another daemon binary), `NOTEVAULT_PG_BIN`,
//! `NOTEVAULT_BENCH_KEEP=1` (keep `target/bench-hosted/`). See `benches/README.md`.

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the operator: they write folders and read the environment"
)]

#[path = "hosted/blobs.rs"]
mod blobs;
mod common;
#[path = "hosted/fault.rs"]
mod fault;
#[path = "hosted/pg.rs"]
mod pg;
#[path = "hosted/vaults.rs"]
mod vaults;
#[path = "hosted/writes.rs"]
mod writes;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::{bail, Result};
use common::{serve_command, start_command, Daemon, BIN};

/// The static token of the bench's vaults (one per vault in part 6).
pub const TOKEN: &str = "hosted-bench-token-0123456789abcdef";

/// One figure beside its target.
pub struct Row {
    pub figure: String,
    pub measured: String,
    pub target: String,
    pub verdict: &'static str,
}

pub fn row(
    rows: &mut Vec<Row>,
    figure: &str,
    measured: String,
    target: &str,
    verdict: &'static str,
) {
    eprintln!("  {figure}: {measured} ({target}) {verdict}");
    rows.push(Row {
        figure: figure.into(),
        measured,
        target: target.into(),
        verdict,
    });
}

pub fn verdict(met: bool) -> &'static str {
    if met {
        "MET"
    } else {
        "MISSED"
    }
}

/// What every part shares: the cluster, the bench's folder, the binary, the knobs.
pub struct Bench {
    pub pg: pg::Pg,
    pub root: PathBuf,
    pub bin: String,
    pub seconds: u64,
    pub rounds: usize,
}

impl Bench {
    /// A new database `name` on the cluster, migrated by `notevault db migrate`.
    pub fn database(&self, name: &str) -> Result<String> {
        self.pg
            .psql("postgres", &format!("CREATE DATABASE {name}"))?;
        let url = self.pg.url(name);
        self.cli(&url, &["db", "migrate"])?;
        Ok(url)
    }

    /// `notevault ARGS --database URL`, which must succeed: its stdout, trimmed.
    pub fn cli(&self, url: &str, args: &[&str]) -> Result<String> {
        let out = Command::new(&self.bin)
            .args(args)
            .args(["--database", url])
            .env_remove("NOTEVAULT_CONFIG")
            .env_remove("NOTEVAULT_DATABASE_URL")
            .output()?;
        if !out.status.success() {
            bail!(
                "notevault {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// A `serve --database` instance with its cache at `cache` (emptied first) and these
    /// static tokens (JSON), rate limits off.
    pub fn instance(
        &self,
        url: &str,
        tokens: &str,
        cache: &Path,
        env: &[(&str, &str)],
    ) -> Result<Daemon> {
        self.instance_in(url, tokens, cache, env, true)
    }

    /// [`Self::instance`]; `empty`: the cache emptied first, else kept (a restart).
    pub fn instance_in(
        &self,
        url: &str,
        tokens: &str,
        cache: &Path,
        env: &[(&str, &str)],
        empty: bool,
    ) -> Result<Daemon> {
        if empty {
            let _ = std::fs::remove_dir_all(cache);
        }
        std::fs::create_dir_all(cache)?;
        let mut command = serve_command(&self.bin);
        command
            .args(["--listen", "127.0.0.1:0", "--database", url])
            .arg("--state-dir")
            .arg(cache)
            .env_remove("NOTEVAULT_DATABASE_URL")
            .env("NOTEVAULT_STATIC_TOKENS", tokens)
            .env("RATE_LIMIT_READ_PER_MINUTE", "0")
            .env("RATE_LIMIT_WRITE_PER_MINUTE", "0")
            .envs(env.iter().copied());
        Ok(start_command(command)?)
    }
}

/// Static tokens (JSON) of `vaults`: `TOKEN` for the first with write permission, then
/// `TOKEN-<i>` for each one, read only.
pub fn tokens(vaults: &[String]) -> String {
    let mut list = Vec::new();
    for (i, id) in vaults.iter().enumerate() {
        if i == 0 {
            list.push(serde_json::json!({"token": TOKEN, "vault_id": id, "permissions": ["notes.write", "notes.review"]}));
        } else {
            list.push(serde_json::json!({"token": format!("{TOKEN}-{i}"), "vault_id": id}));
        }
    }
    serde_json::Value::Array(list).to_string()
}

fn main() -> ExitCode {
    common::bench_main("hosted", || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
            .block_on(run())
    })
}

async fn run() -> Result<()> {
    let parts: Vec<String> = std::env::var("NOTEVAULT_BENCH_PARTS")
        .unwrap_or_else(|_| "create,writes,fresh,import,read,vaults,fault,blobs".into())
        .split(',')
        .map(|p| p.trim().to_string())
        .collect();
    let want = |p: &str| parts.iter().any(|x| x == p);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-hosted");
    std::fs::create_dir_all(&root)?;
    let Some(pg) = pg::Pg::start(&root.join("pg"))? else {
        println!("hosted bench skipped: no PostgreSQL binaries (NOTEVAULT_PG_BIN)");
        return Ok(());
    };
    let bench = Bench {
        pg,
        root: root.clone(),
        bin: std::env::var("NOTEVAULT_BENCH_BIN").unwrap_or_else(|_| BIN.to_string()),
        seconds: common::env_num("NOTEVAULT_BENCH_SECONDS", 10),
        rounds: common::env_num("NOTEVAULT_BENCH_ROUNDS", 3) as usize,
    };
    bench
        .pg
        .psql("postgres", "CREATE EXTENSION pg_stat_statements")?;
    let version = bench.pg.psql("postgres", "SHOW server_version")?;
    let settings = bench.pg.psql(
        "postgres",
        "SELECT string_agg(name || '=' || current_setting(name), ' ') FROM pg_settings WHERE name IN \
         ('fsync','synchronous_commit','full_page_writes','shared_buffers','wal_level')",
    )?;
    eprintln!(
        "hosted bench: PostgreSQL {version} ({settings}), parts {parts:?}, {} s loads, {} rounds, load average {}",
        bench.seconds,
        bench.rounds,
        common::loadavg()
    );
    let mut rows = Vec::new();
    if want("create") || want("writes") || want("fresh") {
        writes::run(&bench, &want, &mut rows).await?;
    }
    if want("import") || want("read") {
        vaults::corpus(&bench, &want, &mut rows).await?;
    }
    if want("vaults") {
        vaults::many(&bench, &mut rows).await?;
    }
    if want("fault") {
        fault::run(&bench, &mut rows).await?;
    }
    if want("blobs") {
        blobs::run(&bench, &mut rows).await?;
    }
    println!(
        "\n## hosted ({version}: {settings}; {} rounds, {} s loads; load average at the end {})\n",
        bench.rounds,
        bench.seconds,
        common::loadavg()
    );
    println!("| figure | measured | target / reference | verdict |");
    println!("|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} |",
            r.figure, r.measured, r.target, r.verdict
        );
    }
    drop(bench);
    if std::env::var_os("NOTEVAULT_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&root);
    }
    Ok(())
}

/// Median of `v` (0 when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Milliseconds of `d`, two decimals.
pub fn ms(d: Duration) -> String {
    common::ms(d)
}
