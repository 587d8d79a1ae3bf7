//! Progress of long work at start (the scan, the index build, the history bootstrap, and
//! so `reindex` and `check --repair`): a bar on stderr when it is a terminal, plain log
//! lines (`tracing`, at most one every 5 s) otherwise. Work under [`THRESHOLD`] items
//! shows nothing: a small vault starts in moments. Imports nothing of the crate.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Fewer items than this show no progress.
pub const THRESHOLD: u64 = 5_000;

const LOG_EVERY: Duration = Duration::from_secs(5);

/// One piece of work being counted; `inc` from any thread.
pub struct Progress {
    task: &'static str,
    total: u64,
    done: AtomicU64,
    started: Instant,
    bar: Option<indicatif::ProgressBar>,
    /// When the last log line was written; `None` when not logging.
    logged: Option<Mutex<Instant>>,
}

impl Progress {
    /// Start counting `total` items of `task` (`scanning`, `indexing`, `history`), each a
    /// `unit` (`notes`, `files`).
    pub fn start(task: &'static str, unit: &'static str, total: u64) -> Self {
        let shown = total >= THRESHOLD;
        let bar = (shown && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new(total);
            let template = format!("{task:<9} {{bar:40}} {{pos}}/{{len}} {unit} ({{eta}} left)");
            bar.set_style(
                indicatif::ProgressStyle::with_template(&template)
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        let logged = (shown && bar.is_none()).then(|| {
            tracing::info!(task, total, unit, "started");
            Mutex::new(Instant::now())
        });
        Self {
            task,
            total,
            done: AtomicU64::new(0),
            started: Instant::now(),
            bar,
            logged,
        }
    }

    /// `n` more items done.
    pub fn inc(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
        if let Some(logged) = &self.logged {
            let mut last = logged.lock();
            if last.elapsed() >= LOG_EVERY {
                *last = Instant::now();
                tracing::info!(task = self.task, done, total = self.total, "progress");
            }
        }
    }

    /// The work is over: clear the bar, or log how long it took.
    pub fn finish(self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if self.logged.is_some() {
            tracing::info!(
                task = self.task,
                done = self.done.load(Ordering::Relaxed),
                ms = self.started.elapsed().as_millis() as u64,
                "finished"
            );
        }
    }
}
