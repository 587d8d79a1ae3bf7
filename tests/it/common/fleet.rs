//! The fleet run of issue 44: PostgreSQL, the S3 store (`s3s-fs`) and three `notevault
//! serve --database` processes on loopback, a mixed load of agents and people over many
//! vaults (Zipf-distributed: reads, searches, lists, creates and their replays, reviews,
//! sync pulls and pushes, attachment uploads), faults sequenced during it (`kill -9` of an
//! instance, a PostgreSQL restart, the store stopped, a drain), then the checks: every
//! acknowledged write in the database, the op log and the store; every replay its
//! receipt; no vault seeing another's data; search on every instance agreeing with the
//! database. Shared by the short test (`tests/it/fleet.rs`) and the bench
//! (`benches/fleet.rs`, which includes this file by path): one driver, two sizes.
//!
//! The load is bounded by a number of operations and by a time, whichever comes first;
//! the faults are placed by that progress, so a slow machine sees every fault under load.

#![allow(
    clippy::disallowed_methods,
    reason = "the fleet plays the operator: it writes a config file and signals processes"
)]

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use super::daemon::{self, Daemon};
use super::{postgres, s3};

#[path = "fleet_checks.rs"]
mod checks;
#[path = "fleet_load.rs"]
mod load;

pub use checks::Report;

/// The size of a run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub vaults: usize,
    /// Vaults whose index modulo this is `review_every - 1` have the `review` policy.
    pub review_every: usize,
    /// Client tasks sending at once.
    pub clients: usize,
    /// Operations a second offered in all, spread evenly over the clients, each on its
    /// own schedule, one operation at a time: an answer slower than a client's interval
    /// makes it skip the slots it missed, so a slow spell yields fewer samples (the
    /// report's count of late starts says how much the p99 undercounts it);
    /// `None`: each client sends its next once its last is answered (a closed load: the
    /// machine's saturation, where latency is mostly queueing).
    pub rate: Option<f64>,
    /// The load ends at this many operations, or at `max_load`, whichever comes first
    /// (and not before every fault is over).
    pub max_ops: u64,
    pub max_load: Duration,
    /// How long the blob store stays stopped.
    pub store_down: Duration,
    /// The instances' `drain_seconds`.
    pub drain_seconds: u64,
    /// Zipf exponent of the vaults' activity.
    pub zipf_s: f64,
    pub seed: u64,
    /// Vaults whose search is compared with the database on every instance (the hottest).
    pub search_sample: usize,
    /// How long one operation is retried (another instance, the same key) before it is
    /// given up.
    pub give_up: Duration,
    /// Print progress lines (the bench).
    pub verbose: bool,
}

/// The static token of vault `i`.
fn token(i: usize) -> String {
    format!("fleet-token-{i:05}-0123456789abcdef")
}

/// A half-open span of the run in which a fault was under way (start, end).
type Window = (Instant, Instant);

/// What every client and the fault sequencer share.
pub(crate) struct Shared {
    pub settings: Settings,
    pub client: reqwest::Client,
    /// The base URL of each instance a client may pick (`None`: down or drained away).
    pub slots: RwLock<Vec<Option<String>>>,
    pub next_slot: AtomicUsize,
    pub vault_ids: Vec<String>,
    pub tokens: Vec<String>,
    pub review: Vec<bool>,
    pub zipf: Zipf,
    pub rec: Mutex<load::Record>,
    pub ops: AtomicU64,
    pub faults_done: AtomicBool,
    pub started: Instant,
}

impl Shared {
    /// How far the load is: the larger of its share of operations and of time.
    fn progress(&self) -> f64 {
        let by_ops = self.ops.load(Ordering::Relaxed) as f64 / self.settings.max_ops as f64;
        let by_time = self.started.elapsed().as_secs_f64() / self.settings.max_load.as_secs_f64();
        by_ops.max(by_time)
    }

    pub fn done(&self) -> bool {
        self.progress() >= 1.0 && self.faults_done.load(Ordering::Relaxed)
    }

    fn set_slot(&self, i: usize, base: Option<String>) {
        self.slots.write().unwrap()[i] = base;
    }
}

/// One instance process and its cache folder.
struct Node {
    daemon: Daemon,
    metrics: Option<String>,
    _cache: tempfile::TempDir,
}

/// Everything a run starts, stopped when dropped.
pub struct Fleet {
    pub cluster: Arc<postgres::Cluster>,
    pub db_url: String,
    pub s3: Arc<Mutex<s3::S3Server>>,
    dir: tempfile::TempDir,
    nodes: Vec<Option<Node>>,
    shared: Arc<Shared>,
    /// What happened when, for the report.
    events: Vec<String>,
    windows: Vec<Window>,
    drain_ok: Vec<String>,
    /// Holds the thread that started PostgreSQL (dropped: the thread ends, and the server
    /// with it).
    keep_postgres: Option<std::sync::mpsc::Sender<()>>,
    pub setup_took: Duration,
}

/// `notevault ARGS --database URL`, which must succeed: its stdout.
fn cli(url: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(daemon::BIN)
        .args(args)
        .args(["--database", url])
        .env_remove("NOTEVAULT_CONFIG")
        .env_remove("NOTEVAULT_DATABASE_URL")
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `f` run on a thread of its own, which lives until the returned sender is dropped.
async fn on_kept_thread<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> (T, std::sync::mpsc::Sender<()>) {
    let (done, result) = tokio::sync::oneshot::channel();
    let (keep, kept) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let _ = done.send(f());
        let _ = kept.recv();
    });
    (result.await.unwrap(), keep)
}

impl Fleet {
    /// PostgreSQL, the store, the vaults (made with the CLI, `vault create`) and three
    /// instances. `None`: PostgreSQL or s3s-fs is missing and the developer opted out.
    pub async fn start(settings: Settings) -> Option<Fleet> {
        let begin = Instant::now();
        // Not a blocking-pool thread: those end after 10 s idle, and the server gets
        // SIGQUIT when the thread that started it ends (PR_SET_PDEATHSIG).
        let (cluster, keep_postgres) = on_kept_thread(postgres::Cluster::start).await;
        let cluster = Arc::new(cluster?);
        let s3 = tokio::task::spawn_blocking(s3::S3Server::start)
            .await
            .unwrap()?;
        let admin = cluster.admin_url();
        postgres::query(&admin, "CREATE DATABASE fleet");
        let db_url = format!("postgres://postgres@127.0.0.1:{}/fleet", cluster.port);
        cli(&db_url, &["db", "migrate"]).unwrap();
        let vault_ids = create_vaults(&db_url, settings.vaults).await;
        let dir = tempfile::tempdir().unwrap();
        let mut toml = String::new();
        for (i, id) in vault_ids.iter().enumerate() {
            toml.push_str(&format!(
                "[[static_tokens]]\ntoken = \"{}\"\nvault_id = \"{id}\"\npermissions = [\"notes.write\", \"notes.review\"]\n\n",
                token(i)
            ));
        }
        // A file, not NOTEVAULT_STATIC_TOKENS: 1,000 tokens pass the 128 KiB limit of
        // one environment string.
        std::fs::write(dir.path().join("fleet.toml"), toml).unwrap();
        let review: Vec<bool> = (0..settings.vaults)
            .map(|i| i % settings.review_every == settings.review_every - 1)
            .collect();
        let shared = Arc::new(Shared {
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .pool_idle_timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
            slots: RwLock::new(vec![None; 3]),
            next_slot: AtomicUsize::new(0),
            tokens: (0..settings.vaults).map(token).collect(),
            zipf: Zipf::new(settings.vaults, settings.zipf_s),
            rec: Mutex::new(load::Record::new(settings.vaults)),
            ops: AtomicU64::new(0),
            faults_done: AtomicBool::new(false),
            started: Instant::now(),
            vault_ids,
            review,
            settings,
        });
        let mut fleet = Fleet {
            cluster,
            db_url,
            s3: Arc::new(Mutex::new(s3)),
            dir,
            nodes: vec![None, None, None],
            shared,
            events: Vec::new(),
            windows: Vec::new(),
            drain_ok: Vec::new(),
            keep_postgres: Some(keep_postgres),
            setup_took: Duration::ZERO,
        };
        for i in 0..3 {
            fleet.boot(i).await;
        }
        for i in 0..fleet.shared.vault_ids.len() {
            if fleet.shared.review[i] {
                load::set_review_policy(&fleet.shared, i).await;
            }
        }
        fleet.setup_took = begin.elapsed();
        fleet.say(&format!(
            "fleet: {} vaults, 3 instances up in {:.1} s",
            fleet.shared.vault_ids.len(),
            fleet.setup_took.as_secs_f64()
        ));
        Some(fleet)
    }

    fn say(&self, line: &str) {
        if self.shared.settings.verbose {
            eprintln!("{line}");
        }
    }

    /// The environment of an instance: the store, the drain, no rate limits (they are
    /// abuse protection; one token per vault at Zipf's head would trip them).
    fn env(&self) -> Vec<(String, String)> {
        let s3 = self.s3.lock().unwrap();
        vec![
            (
                "NOTEVAULT_BLOB_STORE".into(),
                format!("s3://{}/fleet", s3::BUCKET),
            ),
            ("AWS_ACCESS_KEY_ID".into(), s3::ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY".into(), s3::SECRET_KEY.into()),
            ("AWS_REGION".into(), "us-east-1".into()),
            ("AWS_ENDPOINT_URL".into(), s3.endpoint()),
            ("AWS_ALLOW_HTTP".into(), "true".into()),
            (
                "NOTEVAULT_DRAIN_SECONDS".into(),
                self.shared.settings.drain_seconds.to_string(),
            ),
            ("RATE_LIMIT_READ_PER_MINUTE".into(), "0".into()),
            ("RATE_LIMIT_WRITE_PER_MINUTE".into(), "0".into()),
            ("NOTEVAULT_LOG".into(), "notevault=warn".into()),
        ]
    }

    /// Start instance `i` (a new process, an empty cache, a new port) and wait until it
    /// is ready; then clients may pick it.
    async fn boot(&mut self, i: usize) {
        let cache = tempfile::tempdir().unwrap();
        // As a supervisor restarts a service that exits at start (PostgreSQL may be down
        // at that moment: `serve` refuses to start without its database), until a bound.
        let deadline = std::time::Instant::now() + self.shared.settings.give_up;
        let daemon = loop {
            let mut command = daemon::serve(daemon::BIN);
            command
                .args(["--database", &self.db_url])
                .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
                .arg("--config")
                .arg(self.dir.path().join("fleet.toml"))
                .arg("--state-dir")
                .arg(cache.path())
                .env_remove("NOTEVAULT_DATABASE_URL")
                .envs(self.env());
            match tokio::task::spawn_blocking(move || daemon::start(command))
                .await
                .unwrap()
            {
                Ok(daemon) => break daemon,
                Err(e) if std::time::Instant::now() < deadline => {
                    eprintln!("fleet: instance {i} did not start ({e}); starting it again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => panic!("a fleet instance serves: {e}"),
            }
        };
        let metrics = daemon
            .log
            .lock()
            .unwrap()
            .iter()
            .find_map(|l| l.split("metrics at ").nth(1).map(|u| u.trim().to_string()));
        let base = daemon.base.clone();
        self.nodes[i] = Some(Node {
            daemon,
            metrics,
            _cache: cache,
        });
        assert!(
            self.ready(&base, Duration::from_secs(60)).await,
            "instance {i} never ready"
        );
        self.shared.set_slot(i, Some(base));
    }

    /// Poll `GET /readyz` of `base` until 200 or `limit`.
    async fn ready(&self, base: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let url = format!("{base}/readyz");
        while Instant::now() < deadline {
            let ok = self
                .shared
                .client
                .get(&url)
                .timeout(Duration::from_secs(5))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200);
            if ok {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// Every instance up is ready: the end of a fault window.
    async fn all_ready(&self) -> bool {
        let bases: Vec<String> = self
            .shared
            .slots
            .read()
            .unwrap()
            .iter()
            .flatten()
            .cloned()
            .collect();
        for base in bases {
            if !self.ready(&base, Duration::from_secs(90)).await {
                return false;
            }
        }
        true
    }

    /// Wait until the load has gone `share` of its way.
    async fn at(&self, share: f64) {
        while self.shared.progress() < share {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Close a fault window: recovered (every instance ready), then a short grace for
    /// requests sent just before.
    async fn close(&mut self, what: &str, opened: Instant) {
        let recovered = self.all_ready().await;
        let end = Instant::now() + Duration::from_secs(2);
        self.windows.push((opened, end));
        let line = format!(
            "{what}: at {:.1} s, every instance ready again after {:.1} s{}",
            (opened - self.shared.started).as_secs_f64(),
            opened.elapsed().as_secs_f64(),
            if recovered { "" } else { " (NOT READY)" }
        );
        self.say(&format!("fleet: {line}"));
        self.events.push(line);
    }

    /// The faults, in order, each at its share of the load.
    async fn faults(&mut self) {
        // 1. kill -9 of instance 0, then a new process in its place.
        self.at(0.15).await;
        let opened = Instant::now();
        let mut node = self.nodes[0].take().unwrap();
        // SAFETY: a signal to our own child, not yet reaped.
        unsafe { libc::kill(node.daemon.child.id() as libc::pid_t, libc::SIGKILL) };
        let node = tokio::task::spawn_blocking(move || {
            let _ = node.daemon.child.wait();
            node
        })
        .await
        .unwrap();
        self.shared.set_slot(0, None);
        drop(node);
        self.boot(0).await;
        self.close("kill -9 of instance 0 and a restart", opened)
            .await;

        // 2. PostgreSQL stopped (immediate: connections cut) and started again.
        self.at(0.35).await;
        let opened = Instant::now();
        let cluster = self.cluster.clone();
        let (started, keep) = (
            tokio::sync::oneshot::channel(),
            std::sync::mpsc::channel::<()>(),
        );
        // The server gets SIGQUIT when the thread that started it ends (the harness's
        // PR_SET_PDEATHSIG): a thread of its own, kept until the fleet ends.
        std::thread::spawn(move || {
            cluster.stop_immediate();
            cluster.restart();
            let _ = started.0.send(());
            let _ = keep.1.recv();
        });
        started.1.await.unwrap();
        self.keep_postgres = Some(keep.0);
        self.close("PostgreSQL restarted", opened).await;

        // 3. The blob store stopped for a while.
        self.at(0.55).await;
        let opened = Instant::now();
        let s3 = self.s3.clone();
        tokio::task::spawn_blocking(move || s3.lock().unwrap().stop())
            .await
            .unwrap();
        tokio::time::sleep(self.shared.settings.store_down).await;
        let s3 = self.s3.clone();
        tokio::task::spawn_blocking(move || s3.lock().unwrap().resume())
            .await
            .unwrap();
        let down = self.shared.settings.store_down.as_secs();
        self.close(&format!("blob store stopped for {down} s"), opened)
            .await;

        // 4. A drain of instance 1: SIGTERM; a balancer takes it out once /readyz says
        //    so; it must exit 0 within its drain; then a new process in its place.
        self.at(0.75).await;
        let opened = Instant::now();
        let node = self.nodes[1].take().unwrap();
        let base = node.daemon.base.clone();
        // SAFETY: a signal to our own child, not yet reaped.
        unsafe { libc::kill(node.daemon.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let status = self
                .shared
                .client
                .get(format!("{base}/readyz"))
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .map(|r| r.status().as_u16());
            if status.map_or(true, |s| s == 503) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.shared.set_slot(1, None);
        let drain = self.shared.settings.drain_seconds;
        let limit = Duration::from_secs(drain + 15);
        let (exit, took) = tokio::task::spawn_blocking(move || {
            let mut node = node;
            let deadline = Instant::now() + limit;
            loop {
                if let Some(status) = node.daemon.child.try_wait().unwrap() {
                    return (Some(status), opened.elapsed());
                }
                if Instant::now() > deadline {
                    return (None, opened.elapsed());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
        .await
        .unwrap();
        self.drain_ok.push(match exit {
            Some(s) if s.success() => format!("exit 0 after {:.1} s", took.as_secs_f64()),
            Some(s) => format!("FAILED: {s} after {:.1} s", took.as_secs_f64()),
            None => format!("FAILED: still running after {:.1} s", took.as_secs_f64()),
        });
        self.boot(1).await;
        self.close(&format!("drain of instance 1 ({drain} s)"), opened)
            .await;
        self.shared.faults_done.store(true, Ordering::Relaxed);
    }

    /// The load and the faults, then the checks: the report.
    pub async fn run(mut self) -> Report {
        let shared = self.shared.clone();
        let clients: Vec<_> = (0..shared.settings.clients)
            .map(|c| tokio::spawn(load::client(shared.clone(), c)))
            .collect();
        let progress = {
            let shared = shared.clone();
            tokio::spawn(async move {
                while !shared.done() && shared.settings.verbose {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    eprintln!(
                        "fleet: {:.0} s, {} operations",
                        shared.started.elapsed().as_secs_f64(),
                        shared.ops.load(Ordering::Relaxed)
                    );
                }
            })
        };
        self.faults().await;
        for c in clients {
            c.await.unwrap();
        }
        progress.abort();
        let load_took = shared.started.elapsed();
        self.say("fleet: load over; checking");
        let ready = self.all_ready().await;
        let bases: Vec<(String, Option<String>)> = self
            .nodes
            .iter()
            .flatten()
            .map(|n| (n.daemon.base.clone(), n.metrics.clone()))
            .collect();
        let objects = self.s3.lock().unwrap().objects();
        checks::report(checks::Inputs {
            shared: &shared,
            db_url: &self.db_url,
            objects,
            bases,
            windows: &self.windows,
            events: &self.events,
            drains: &self.drain_ok,
            ready,
            load_took,
        })
        .await
    }
}

/// `vault create` for `n` vaults, four CLI processes at a time: their ids in order.
async fn create_vaults(url: &str, n: usize) -> Vec<String> {
    let ids: Arc<Mutex<BTreeMap<usize, String>>> = Arc::default();
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (ids, next, url) = (ids.clone(), next.clone(), url.to_string());
            tokio::task::spawn_blocking(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let id = cli(&url, &["vault", "create", &format!("fleet-{i:05}")]).unwrap();
                ids.lock().unwrap().insert(i, id.trim().to_string());
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    let ids = ids.lock().unwrap();
    ids.values().cloned().collect()
}

/// splitmix64: a small seeded generator (no dependency for a load's dice).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Zipf over `0..n`: index `k` drawn with weight `1 / (k + 1)^s` (by its cumulative
/// weights and a binary search).
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Self {
        let mut total = 0.0;
        let cdf = (1..=n)
            .map(|k| {
                total += 1.0 / (k as f64).powf(s);
                total
            })
            .collect();
        Self { cdf }
    }

    pub fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit() * self.cdf.last().copied().unwrap_or(0.0);
        self.cdf.partition_point(|c| *c < u).min(self.cdf.len() - 1)
    }
}
