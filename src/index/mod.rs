//! The search index (tantivy, in `<state dir>/index/`) and the searches over it, plus
//! grep and the tag and property rollups over the catalog.
//!
//! The index is derived state: it is rebuilt from the catalog when it is missing, corrupt
//! or of another [`SCHEMA_VERSION`], and brought up to date at every start by comparing
//! each indexed note's stamp (content hash and path) with the catalog. After that, every
//! change the write pipeline or `reconcile` records is sent here with its `committed_seq`
//! ([`SearchIndex::upsert`], [`SearchIndex::remove`]); one writer thread applies them in
//! batches and publishes them (commits, reloads the reader, advances `indexed_seq`, which
//! `GET /v1/search?min_seq=` waits on) at most every 50 ms, at once when a search waits.
//!
//! This file is [`SearchIndex`]'s face: opening, the state it shows, waiting for a seq,
//! shutdown. `schema.rs` is what the index holds (fields, schema version, a note's
//! document and stamp); `writer.rs` the writer thread (the overlay's parts, flush, start-up
//! sync, the index lock); `reader.rs` searching (overlay and disk merged by score).
//!
//! Invariants: private notes and notes above `MAX_CONTENT_BYTES` are never indexed; the
//! index never decides what exists (a hit whose note left the catalog is dropped); no
//! HTTP types here.

mod common;
pub mod coverage;
pub mod embed;
pub mod grep;
pub mod language;
pub mod provenance;
pub mod query;
mod reader;
pub mod rollup;
mod schema;
pub mod tokenizer;
pub mod verify;
mod writer;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tantivy::IndexReader;

pub use self::reader::{Hit, Hits};
use self::schema::Fields;
pub use self::schema::{searchable, stamp_of, LinkText, SCHEMA_VERSION};
pub use self::writer::{Links, NoLinks, Pace};
use self::writer::{Msg, Overlay, Worker};
pub use crate::vault::note::key_of;
use crate::vault::note::Note;

/// (committed_seq, notes, excluded files): when the vault-wide coverage changes.
pub(crate) type CoverageKey = (i64, usize, usize);
/// A grep's first pass: the notes that match, how many were searched, whether it timed out.
pub(crate) type GrepPass = (Vec<Arc<Note>>, usize, bool);

/// What `GET /v1/index-status` shows of the index.
#[derive(Debug, Clone, Default)]
pub struct IndexState {
    /// The newest change the index reflects.
    pub indexed_seq: i64,
    /// Notes sent to the writer and not yet searchable, with the seq of their change.
    pending: HashMap<String, i64>,
    /// Notes the start-up sync still has to index.
    pub sync_remaining: usize,
    /// Documents in the index.
    pub docs: u64,
    pub segments: usize,
    /// Why the index was rebuilt at this start, if it was.
    pub rebuilt: Option<String>,
    /// The start-up sync: notes (re)indexed and how long it took.
    pub synced_notes: Option<usize>,
    pub sync_ms: Option<u64>,
    pub commits: u64,
    pub last_commit_ms: Option<u64>,
    pub last_error: Option<String>,
    /// The writers are open (they close while idle: `writer.rs`).
    pub writers_open: bool,
    /// The segments are to be merged into one, or being merged (after a start-up sync).
    pub merging: bool,
}

impl IndexState {
    /// Notes whose current version is not searchable yet.
    pub fn not_yet_indexed(&self) -> usize {
        self.pending.len() + self.sync_remaining
    }
}

/// The search index of the vault: changes go to its writer thread (`writer.rs`),
/// searches read it (`reader.rs`).
pub struct SearchIndex {
    reader: IndexReader,
    fields: Fields,
    tx: Mutex<Option<mpsc::Sender<Msg>>>,
    /// Changes are sent only once the start-up sync is queued.
    live: AtomicBool,
    state: Mutex<IndexState>,
    seq_tx: tokio::sync::watch::Sender<i64>,
    /// The highest seq a search has waited for ([`SearchIndex::want`]).
    wanted: AtomicI64,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Read before `reader` by every search (see [`SearchIndex::flush`]).
    overlay: parking_lot::RwLock<Arc<Overlay>>,
    /// The vault-wide part of coverage, keyed by (committed_seq, notes, excluded files).
    pub(crate) coverage_cache: Mutex<Option<(CoverageKey, coverage::CoverageFacts)>>,
    /// The first pass of recent greps (matching notes, notes searched, timed out), by
    /// pattern, filter and vault state.
    pub(crate) grep_cache: Mutex<std::collections::VecDeque<(String, Arc<GrepPass>)>>,
    /// The note vectors of optional hybrid search (`embed`), fed by the same writer.
    pub vectors: Arc<embed::Vectors>,
    /// Where the text of links comes from (`writer/links.rs`).
    links: parking_lot::RwLock<Arc<dyn Links>>,
    /// Words' counts among the notes of one language (`common`).
    group_counts: common::GroupCounts,
}

impl SearchIndex {
    /// Open the index under `state_dir`, creating or rebuilding it when it is missing,
    /// corrupt or of another schema version. Another process holding the index is an
    /// error. Nothing is indexed until [`SearchIndex::start`].
    pub fn open(state_dir: &Path) -> anyhow::Result<Arc<Self>> {
        Self::open_with_model(state_dir, None)
    }

    /// [`SearchIndex::open`], with the note vectors of the embedding model in
    /// `embed_model` (a model that cannot be loaded leaves search lexical and says why).
    pub fn open_with_model(
        state_dir: &Path,
        embed_model: Option<&Path>,
    ) -> anyhow::Result<Arc<Self>> {
        let dir = state_dir.join("index");
        // Held as long as this index lives: tantivy's own writer lock is let go for a
        // moment when the start-up writer is replaced by a small one.
        let lock = writer::lock_index(state_dir, true)?;
        let (schema, fields) = schema::schema();
        let (index, rebuilt) = schema::open_or_rebuild(&dir, &schema)?;
        tokenizer::register(&index);
        let worker = Worker::new(index, &schema, fields, lock)?;
        let reader = worker.main_reader.clone();
        let (tx, rx) = mpsc::channel();
        let (seq_tx, _) = tokio::sync::watch::channel(0);
        let idx = Arc::new(Self {
            reader,
            fields,
            overlay: Default::default(),
            tx: Mutex::new(Some(tx)),
            live: AtomicBool::new(false),
            state: Mutex::new(IndexState {
                rebuilt,
                writers_open: true,
                ..IndexState::default()
            }),
            seq_tx,
            wanted: AtomicI64::new(i64::MIN),
            worker: Mutex::new(None),
            coverage_cache: Mutex::new(None),
            grep_cache: Mutex::new(Default::default()),
            group_counts: Default::default(),
            vectors: Arc::new(embed::Vectors::open(state_dir, embed_model)),
            links: parking_lot::RwLock::new(Arc::new(NoLinks)),
        });
        idx.refresh_counts();
        idx.spawn_writer(worker, rx)?;
        Ok(idx)
    }

    /// Remove the index under `state_dir` so that the next open rebuilds it; refused
    /// while a running daemon holds it.
    #[allow(
        clippy::disallowed_methods,
        reason = "the search index, derived data in the state directory"
    )]
    pub fn drop_index(state_dir: &Path) -> anyhow::Result<()> {
        if !state_dir.is_dir() {
            return Ok(());
        }
        let _lock = writer::lock_index(state_dir, false)?;
        let dir = state_dir.join("index");
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        Ok(())
    }

    pub fn state(&self) -> IndexState {
        self.state.lock().clone()
    }

    /// [`IndexState::not_yet_indexed`], without a copy of the state (every search asks).
    pub fn not_yet_indexed(&self) -> usize {
        self.state.lock().not_yet_indexed()
    }

    pub fn indexed_seq(&self) -> i64 {
        *self.seq_tx.borrow()
    }

    /// A search waits for `seq`: the writer publishes changes at once (not at its
    /// usual pace) until the index reflects it.
    fn want(&self, seq: i64) {
        if self.indexed_seq() >= seq {
            return;
        }
        self.wanted.fetch_max(seq, Ordering::SeqCst);
        self.send(Msg::Publish);
    }

    /// Wait until the index reflects `seq`, at most `timeout`; `true` when it does.
    pub async fn wait_for(&self, seq: i64, timeout: Duration) -> bool {
        self.want(seq);
        let mut rx = self.seq_tx.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|s| *s >= seq))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Blocking form of [`SearchIndex::wait_for`], for the CLI; also `false` at once when
    /// a commit failed (the CLI says why rather than wait out the retries).
    pub fn wait_for_blocking(&self, seq: i64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        self.want(seq);
        while Instant::now() < deadline {
            {
                let reached = self.indexed_seq() >= seq;
                let st = self.state.lock();
                if reached && st.sync_remaining == 0 {
                    return true;
                }
                if st.last_error.is_some() {
                    return false;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// Whether no start-up sync (queued by [`SearchIndex::start`]) is under way: none was
    /// queued, it is applied, it failed, or the writer thread has ended.
    pub fn start_sync_settled(&self) -> bool {
        {
            let st = self.state.lock();
            if st.sync_remaining == 0 || st.last_error.is_some() {
                return true;
            }
        }
        self.worker
            .lock()
            .as_ref()
            .is_none_or(std::thread::JoinHandle::is_finished)
    }

    /// Stop the writer thread after it has applied what was sent.
    pub fn shutdown(&self) {
        self.tx.lock().take();
        if let Some(handle) = self.worker.lock().take() {
            let _ = handle.join();
        }
        // The writer saved the vectors on its way out; the start-up vector sync, if it
        // is still embedding on its own thread, must not write after this.
        self.vectors.close();
    }
}

impl Drop for SearchIndex {
    fn drop(&mut self) {
        self.tx.lock().take();
        // Wait for the writer to let go of the index lock (unless this is the writer
        // thread itself dropping the last handle).
        if let Some(handle) = self.worker.lock().take() {
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_distinct() {
        assert_eq!(key_of("a"), key_of("a"));
        assert_ne!(key_of("a"), key_of("b"));
    }
}
