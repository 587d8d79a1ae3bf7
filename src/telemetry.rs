//! The process's metrics: one Prometheus recorder (the `metrics` facade, rendered by
//! `metrics-exporter-prometheus`), the names and label sets of every metric, and the
//! calls that move them. Imports nothing of the crate, so the core and the stores may
//! count without knowing a route.
//!
//! The recorder is global: installed once per process by the first application built
//! ([`install`]); before that (the CLI's commands) every call here is a no-op. Labels
//! are bounded and `&'static`: a route template (never a path), a status code, a reason
//! code, a pool's name; never a vault, a token or a note.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

const REQUESTS: &str = "notevault_http_requests_total";
const REQUEST_SECONDS: &str = "notevault_http_request_duration_seconds";
const WRITES: &str = "notevault_writes_total";
const REPLAYS: &str = "notevault_idempotent_replays_total";
const REVIEW_QUEUE: &str = "notevault_review_queue_depth";
const OPLOG_LAG: &str = "notevault_oplog_lag";
const VAULTS_OPEN: &str = "notevault_vaults_open";
const POOL_CONNECTIONS: &str = "notevault_db_pool_connections";
const POOL_WAITING: &str = "notevault_db_pool_waiting";
const POOL_WAIT_SECONDS: &str = "notevault_db_pool_wait_seconds";
const CACHE_HITS: &str = "notevault_vault_cache_hits_total";
const CACHE_MISSES: &str = "notevault_vault_cache_misses_total";
const CACHE_EVICTIONS: &str = "notevault_vault_cache_evictions_total";
const RESIDENT: &str = "notevault_process_resident_memory_bytes";
const BLOB_ERRORS: &str = "notevault_blob_store_errors_total";
const BLOBS_COLLECTED: &str = "notevault_blobs_collected_total";

/// Histogram buckets, in seconds: a request or a wait for a connection, 1 ms to 10 s.
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// How often histogram samples are folded into their buckets when nobody scrapes (a
/// histogram keeps its samples until then).
const UPKEEP: Duration = Duration::from_secs(5);

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Install the recorder, once per process (later calls do nothing). Another recorder
/// installed first (an embedding program's) is kept: `/metrics` then renders nothing.
pub fn install() {
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets(BUCKETS)
            .expect("the bucket list is not empty");
        let handle = match builder.install_recorder() {
            Ok(handle) => handle,
            Err(e) => {
                tracing::warn!(error = %e, "another metrics recorder is installed: /metrics stays empty");
                return None;
            }
        };
        describe();
        let upkept = handle.clone();
        let spawned = std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || loop {
                std::thread::sleep(UPKEEP);
                upkept.run_upkeep();
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no metrics upkeep thread: histograms are folded at each scrape only");
        }
        Some(handle)
    });
}

/// The metrics in the Prometheus text format (version 0.0.4).
pub fn render() -> String {
    match HANDLE.get() {
        Some(Some(handle)) => handle.render(),
        _ => String::new(),
    }
}

fn describe() {
    describe_counter!(
        REQUESTS,
        "HTTP requests answered, by route template and status."
    );
    describe_histogram!(
        REQUEST_SECONDS,
        metrics::Unit::Seconds,
        "Time to answer an HTTP request, by route template and status."
    );
    describe_counter!(
        WRITES,
        "Writes submitted (API, MCP, sync pushes) by outcome: applied, queued for review, or refused (with its reason code). Replays are not counted here."
    );
    describe_counter!(
        REPLAYS,
        "Writes answered with the stored receipt of an earlier request with the same Idempotency-Key."
    );
    describe_gauge!(
        REVIEW_QUEUE,
        "Writes waiting for a review decision in the vaults open on this instance, at the last scrape."
    );
    describe_gauge!(
        OPLOG_LAG,
        "The largest committed_seq - indexed_seq over the vaults open on this instance, at the last scrape."
    );
    describe_gauge!(VAULTS_OPEN, "Vaults open on this instance.");
    describe_gauge!(
        POOL_CONNECTIONS,
        "Database pool connections, by pool and state (in_use, idle), at the last scrape."
    );
    describe_gauge!(
        POOL_WAITING,
        "Callers waiting for a database connection, by pool, at the last scrape."
    );
    describe_histogram!(
        POOL_WAIT_SECONDS,
        metrics::Unit::Seconds,
        "Time to get a database connection from the pool (a new one made included), by pool."
    );
    describe_counter!(
        CACHE_HITS,
        "Hosted vaults found open in this instance's cache."
    );
    describe_counter!(
        CACHE_MISSES,
        "Hosted vaults built from the database into this instance's cache."
    );
    describe_counter!(
        CACHE_EVICTIONS,
        "Hosted vaults closed after vault_idle_seconds without a request."
    );
    describe_counter!(
        BLOB_ERRORS,
        "Blob store requests that failed, by kind: unreachable, credentials, no_bucket, missing (bytes a row names are not in the store)."
    );
    describe_counter!(
        BLOBS_COLLECTED,
        "Objects the blob collector removed, by kind: blob (no row names it), upload (what a cut-off upload left)."
    );
    describe_gauge!(
        RESIDENT,
        metrics::Unit::Bytes,
        "Resident memory of the process (/proc/self/statm), at the last scrape."
    );
}

/// One HTTP request answered: `route` is its template (or a fixed name for a surface).
pub fn request(route: &'static str, status: u16, took: Duration) {
    let status = status_label(status);
    counter!(REQUESTS, "route" => route, "status" => status).increment(1);
    histogram!(REQUEST_SECONDS, "route" => route, "status" => status).record(took.as_secs_f64());
}

/// A status code as a label without an allocation per request.
fn status_label(code: u16) -> &'static str {
    static CODES: OnceLock<Vec<String>> = OnceLock::new();
    let codes = CODES.get_or_init(|| (0..600).map(|c| c.to_string()).collect());
    codes.get(usize::from(code)).map_or("other", String::as_str)
}

/// How a write submitted was answered.
#[derive(Debug, Clone, Copy)]
pub enum WriteOutcome {
    Applied,
    Queued,
    /// Refused, with its reason code.
    Refused(&'static str),
    /// Answered from the stored receipt (counted by [`replayed`] alone).
    Replayed,
}

pub fn write(outcome: WriteOutcome) {
    match outcome {
        WriteOutcome::Applied => counter!(WRITES, "outcome" => "applied").increment(1),
        WriteOutcome::Queued => counter!(WRITES, "outcome" => "queued").increment(1),
        WriteOutcome::Refused(reason) => {
            counter!(WRITES, "outcome" => "refused", "reason" => reason).increment(1);
        }
        WriteOutcome::Replayed => {}
    }
}

thread_local! {
    /// Set by [`replayed`] during a submission run by [`counting_replays`] (the write
    /// door is synchronous: the whole submission runs on one thread).
    static REPLAYED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A write answered from its stored receipt.
pub fn replayed() {
    counter!(REPLAYS).increment(1);
    REPLAYED.with(|r| r.set(true));
}

/// Run the synchronous submission `submit`: its answer, and whether it was a replay.
pub fn counting_replays<T>(submit: impl FnOnce() -> T) -> (T, bool) {
    REPLAYED.with(|r| r.set(false));
    let answer = submit();
    (answer, REPLAYED.with(|r| r.replace(false)))
}

pub fn set_review_queue(depth: usize) {
    gauge!(REVIEW_QUEUE).set(depth as f64);
}

/// The vaults open now and the largest `committed_seq - indexed_seq` among them.
pub fn set_vaults(open: usize, oplog_lag: i64) {
    gauge!(VAULTS_OPEN).set(open as f64);
    gauge!(OPLOG_LAG).set(oplog_lag.max(0) as f64);
}

/// A database pool's use now.
pub fn set_pool(pool: &'static str, in_use: usize, idle: usize, waiting: usize) {
    gauge!(POOL_CONNECTIONS, "pool" => pool, "state" => "in_use").set(in_use as f64);
    gauge!(POOL_CONNECTIONS, "pool" => pool, "state" => "idle").set(idle as f64);
    gauge!(POOL_WAITING, "pool" => pool).set(waiting as f64);
}

/// A wait for a connection of `pool`, given or not.
pub fn pool_wait(pool: &'static str, took: Duration) {
    histogram!(POOL_WAIT_SECONDS, "pool" => pool).record(took.as_secs_f64());
}

/// A hosted vault asked for: found open (`true`) or built from the database.
pub fn vault_cache(hit: bool) {
    if hit {
        counter!(CACHE_HITS).increment(1);
    } else {
        counter!(CACHE_MISSES).increment(1);
    }
}

/// A hosted vault closed for being idle.
pub fn vault_evicted() {
    counter!(CACHE_EVICTIONS).increment(1);
}

/// A blob store request failed (`kind`: see [`BLOB_ERRORS`]'s description).
pub fn blob_error(kind: &'static str) {
    counter!(BLOB_ERRORS, "kind" => kind).increment(1);
}

/// The blob collector removed `count` objects of `kind` (`blob`, `upload`).
pub fn blobs_collected(kind: &'static str, count: usize) {
    if count > 0 {
        counter!(BLOBS_COLLECTED, "kind" => kind).increment(count as u64);
    }
}

/// Read the process's resident size now (Linux; elsewhere nothing is set).
pub fn sample_memory() {
    if let Some(bytes) = resident_bytes() {
        gauge!(RESIDENT).set(bytes as f64);
    }
}

fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok().map(|page| pages * page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_label_is_its_number() {
        assert_eq!(status_label(200), "200");
        assert_eq!(status_label(503), "503");
        assert_eq!(status_label(999), "other");
    }

    #[test]
    fn a_replay_is_told_from_a_write_on_its_thread() {
        let ((), replay) = counting_replays(replayed);
        assert!(replay);
        let ((), replay) = counting_replays(|| {});
        assert!(!replay);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_resident_size_is_read() {
        assert!(resident_bytes().is_some_and(|b| b > 0));
    }
}
