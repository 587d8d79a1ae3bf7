//! The short fleet run of issue 44 (the bench `fleet` is the long one, same driver,
//! `common/fleet.rs`): PostgreSQL, `s3s-fs` and three instances on loopback, a mixed
//! Zipf load over 50 vaults, and during it `kill -9` of an instance, a PostgreSQL
//! restart, the store stopped for 5 s and a drain. Every check must hold: acknowledged
//! writes all in the database, the op log and the store; replays answered with their
//! receipt; no answer naming another vault; search on every instance equal to the
//! database; no 5xx but 503 with `Retry-After` and the envelope.
//!
//! Sized for a loaded 2-core CI machine: at most 1,500 operations or 30 s of load,
//! whichever comes first, and every wait a poll with a deadline.

use std::time::{Duration, Instant};

use crate::common::fleet::{Fleet, Settings};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_under_faults_loses_no_acknowledged_write_and_leaks_nothing() {
    let begin = Instant::now();
    let settings = Settings {
        vaults: 50,
        review_every: 5,
        clients: 6,
        rate: None,
        max_ops: 1_500,
        max_load: Duration::from_secs(30),
        store_down: Duration::from_secs(5),
        drain_seconds: 1,
        zipf_s: 1.1,
        seed: 44,
        search_sample: 8,
        give_up: Duration::from_secs(60),
        verbose: false,
    };
    let Some(fleet) = Fleet::start(settings).await else {
        return;
    };
    let report = fleet.run().await;
    let table = report.render();
    eprintln!(
        "{table}\nfleet test: {:.1} s in all",
        begin.elapsed().as_secs_f64()
    );
    let failed: Vec<String> = report
        .failed()
        .iter()
        .map(|c| format!("{}: {} (want {})", c.name, c.measured, c.target))
        .collect();
    assert!(failed.is_empty(), "{}\n{table}", failed.join("\n"));
}
