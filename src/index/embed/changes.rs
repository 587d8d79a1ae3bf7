//! Changes waiting to be embedded. The index writer hands each recorded change here and
//! goes on: a transformer takes tens of milliseconds a chunk, and the lexical index must
//! not wait for it. One `embed` thread a vault, started when changes arrive and ended when
//! none are left, embeds them in the order they were recorded, the newest version of a
//! note once.
//!
//! Until a change is embedded, the note's old vectors are no hit (their stamp is not the
//! catalog's: [`Vectors::nearest`]'s `current`) and the note is found by its words. A
//! search that waits for its own write (`min_seq`) in hybrid mode waits for
//! [`Vectors::wait_embedded`] too: for every change queued before it, its own and
//! others' (a bulk change ahead of it can make such a search wait out its bound). At
//! shutdown the queue is not waited for: what it held is embedded by the next start's
//! sync.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::Vectors;
use crate::vault::note::Note;

/// The queue (in [`Vectors`]).
#[derive(Default)]
pub(super) struct Changes {
    /// Notes by key in the order of their change's seq; a note already queued keeps its
    /// place and takes the newer version.
    order: VecDeque<(u64, i64)>,
    /// The newest version of each queued note (`None`: it left the searchable notes).
    newest: HashMap<u64, Option<Arc<Note>>>,
    /// The seq of the change being embedded now.
    in_flight: Option<i64>,
    /// An `embed` thread drains the queue.
    running: bool,
}

impl Changes {
    /// Every change through this seq is embedded.
    fn done(&self) -> i64 {
        let first = self.order.front().map(|(_, seq)| *seq);
        self.in_flight
            .into_iter()
            .chain(first)
            .min()
            .map_or(i64::MAX, |seq| seq - 1)
    }
}

impl Vectors {
    /// The note `key` changed at `seq` (`note`: its version now; `None`: removed): embed
    /// it, or drop its vectors, on the vault's `embed` thread.
    pub(in crate::index) fn changed(self: &Arc<Self>, key: u64, note: Option<Arc<Note>>, seq: i64) {
        if self.model.is_none() {
            return;
        }
        // Newer than what a start-up sync under way looked at: it leaves the note alone.
        self.touch(key);
        let start = {
            let mut q = self.changes.lock();
            if q.newest.insert(key, note).is_none() {
                q.order.push_back((key, seq));
            }
            self.embedded.send_replace(q.done());
            !std::mem::replace(&mut q.running, true)
        };
        if !start {
            return;
        }
        let this = self.clone();
        let spawned = std::thread::Builder::new()
            .name("embed".into())
            .spawn(move || this.drain());
        if let Err(e) = spawned {
            // Embedded here then, as before there was a queue.
            tracing::warn!(error = %e, "cannot start an embedding thread; embedding on the index writer");
            self.clone().drain();
        }
    }

    /// Changes queued and not yet embedded.
    pub fn pending(&self) -> usize {
        let q = self.changes.lock();
        q.order.len() + usize::from(q.in_flight.is_some())
    }

    /// The seq of the change being embedded now.
    #[cfg(test)]
    pub(super) fn in_flight(&self) -> Option<i64> {
        self.changes.lock().in_flight
    }

    /// Wait (up to `timeout`) until every change through `seq` that the index writer has
    /// handed over is embedded; `false` if it was not in time.
    pub async fn wait_embedded(&self, seq: i64, timeout: Duration) -> bool {
        let mut rx = self.embedded.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|done| *done >= seq))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Embed the queue until it is empty (or the index is shut down).
    fn drain(self: Arc<Self>) {
        // A panic, or the index shut down: not running any more, and the queue dropped
        // (no waiter waits on it; a dropped change's old vectors are no hit, and the next
        // start's sync embeds it).
        struct Stop<'a>(&'a Vectors);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                let mut q = self.0.changes.lock();
                if !q.order.is_empty() && !self.0.closed.load(Ordering::SeqCst) {
                    tracing::error!(
                        dropped = q.order.len(),
                        "the embedding thread stopped; changes queued are searched by their words until the next start"
                    );
                }
                q.running = false;
                q.in_flight = None;
                q.order.clear();
                q.newest.clear();
                self.0.embedded.send_replace(q.done());
            }
        }
        let stop = Stop(&self);
        loop {
            let (key, note) = {
                let mut q = self.changes.lock();
                q.in_flight = None;
                let Some((key, seq)) = q.order.pop_front() else {
                    // Under the lock: a change queued after this starts a new thread.
                    q.running = false;
                    self.embedded.send_replace(q.done());
                    std::mem::forget(stop);
                    return;
                };
                // Every queued key has its version; a miss would only skip it.
                let Some(note) = q.newest.remove(&key) else {
                    continue;
                };
                q.in_flight = Some(seq);
                self.embedded.send_replace(q.done());
                (key, note)
            };
            if self.closed.load(Ordering::SeqCst) {
                return;
            }
            match note {
                Some(note) => self.upsert(&note),
                None => self.remove(key),
            }
        }
    }
}
