//! `cargo bench --bench fleet`: the fleet run of issue 44 at its full size, the test's
//! driver (`tests/it/common/fleet.rs`) at 1,000 vaults: PostgreSQL (a cluster of its
//! own, durable), `s3s-fs` and three `notevault serve --database` instances on loopback;
//! a mixed Zipf load of agents and people (reads, searches, lists, sync pulls, creates
//! and replays on another instance, reviews, pushes, attachment uploads) for
//! `NOTEVAULT_FLEET_SECONDS` (default 120); during it `kill -9` of an instance and its
//! restart, a PostgreSQL restart, the store stopped for `NOTEVAULT_FLEET_STORE_DOWN`
//! seconds (default 30) and a drain. Prints per-route p50/p95/p99, errors by status, the
//! checks and the targets with their verdicts (0 5xx outside the fault windows; p99 of reads
//! ≤ 50 ms, of writes ≤ 100 ms), and exits non-zero when a check fails.
//! `NOTEVAULT_FLEET_VAULTS` (default 1000), `NOTEVAULT_FLEET_CLIENTS` (default 16);
//! `NOTEVAULT_FLEET_RATE` (operations a second in all; default none: each client sends
//! as soon as its last operation is answered).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the operator: they read the environment"
)]

mod common;

/// The tests' harness, by path: one way to start PostgreSQL, the store and an instance
/// (the daemon's through `common`, which includes it already).
use common::daemon;
#[allow(dead_code)]
#[path = "../tests/it/common/fleet.rs"]
mod fleet;
#[allow(dead_code)]
#[path = "../tests/it/common/postgres.rs"]
mod postgres;
#[allow(dead_code)]
#[path = "../tests/it/common/s3.rs"]
mod s3;

use std::time::Duration;

use anyhow::{bail, Result};
use common::{env_num, loadavg};

fn main() -> std::process::ExitCode {
    common::bench_main("fleet", run)
}

fn run() -> Result<()> {
    let seconds = env_num("NOTEVAULT_FLEET_SECONDS", 120);
    let settings = fleet::Settings {
        vaults: env_num("NOTEVAULT_FLEET_VAULTS", 1000) as usize,
        review_every: 5,
        clients: env_num("NOTEVAULT_FLEET_CLIENTS", 16) as usize,
        rate: Some(env_num("NOTEVAULT_FLEET_RATE", 0) as f64).filter(|r| *r > 0.0),
        // The time bounds the bench; the count only keeps a fast machine finite.
        max_ops: u64::MAX / 2,
        max_load: Duration::from_secs(seconds),
        store_down: Duration::from_secs(env_num("NOTEVAULT_FLEET_STORE_DOWN", 30)),
        drain_seconds: 5,
        zipf_s: 1.1,
        seed: 44,
        search_sample: 20,
        give_up: Duration::from_secs(180),
        verbose: true,
    };
    eprintln!("fleet bench: {settings:?}; load average {}", loadavg());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async { Some(fleet::Fleet::start(settings).await?.run().await) });
    let Some(report) = report else {
        println!("fleet bench: skipped (PostgreSQL or s3s-fs missing)");
        return Ok(());
    };
    println!("{}", report.render());
    eprintln!("load average after: {}", loadavg());
    // The checks decide the exit; the targets are figures with their verdicts.
    let missed: Vec<&str> = report
        .checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.name.as_str())
        .collect();
    if !missed.is_empty() {
        bail!("missed: {}", missed.join("; "));
    }
    Ok(())
}
