//! The search index (tantivy, in `<state dir>/index/`) and the searches over it, plus
//! grep and the tag and property rollups over the catalog.
//!
//! The index is derived state: it is rebuilt from the catalog when it is missing, corrupt
//! or of another [`SCHEMA_VERSION`], and brought up to date at every start by comparing
//! each indexed note's stamp (content hash and path) with the catalog. After that, every
//! change the write pipeline or `reconcile` records is sent here with its `committed_seq`
//! ([`SearchIndex::upsert`], [`SearchIndex::remove`]); one writer thread applies them in
//! batches, commits, reloads the reader and advances `indexed_seq`, which
//! `GET /v1/search?min_seq=` waits on.
//!
//! Invariants: private notes and notes above `MAX_CONTENT_BYTES` are never indexed; the
//! index never decides what exists (a hit whose note left the catalog is dropped); no
//! HTTP types here.

pub mod coverage;
pub mod grep;
pub mod provenance;
pub mod query;
pub mod rollup;
pub mod tokenizer;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tantivy::collector::{Collector, Count, FilterCollector, TopDocs};
use tantivy::query::Query;
use tantivy::schema::{
    DateOptions, Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, INDEXED,
};
use tantivy::{DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::error::{Error, Result};
use crate::vault::catalog::{Note, Visibility};

/// Bump when the schema or the tokenizer changes: an index of another version is rebuilt.
pub const SCHEMA_VERSION: u32 = 2;
const VERSION_FILE: &str = "notevault-schema-version";

/// (committed_seq, notes, excluded files): when the vault-wide coverage changes.
pub(crate) type CoverageKey = (i64, usize, usize);
/// A grep's first pass: the notes that match, how many were searched, whether it timed out.
pub(crate) type GrepPass = (Vec<Arc<Note>>, usize, bool);
/// A filter over note keys.
type KeyFilter = Arc<dyn Fn(u64) -> bool + Send + Sync>;

/// The memory budget of the writers that take small batches (tantivy's minimum).
const SMALL_WRITER_BYTES: usize = 15_000_000;

/// A writer on an empty in-memory index, to hold the place of one being dropped.
fn placeholder_writer() -> tantivy::Result<IndexWriter<TantivyDocument>> {
    Index::create_in_ram(schema().0).writer_with_num_threads(1, SMALL_WRITER_BYTES)
}

/// Writes pause this long before the overlay goes to disk.
const FLUSH_IDLE: Duration = Duration::from_secs(1);
/// The overlay goes to disk once it holds this many notes...
const FLUSH_MAX: usize = 1_000;
/// ...or its oldest change is this old.
const FLUSH_AGE: Duration = Duration::from_secs(10);

/// Changes not yet on disk, searchable from memory: a small in-memory index holding the
/// current version of every note changed since the last commit on disk.
#[derive(Default)]
struct Overlay {
    /// Every note changed since then (also deleted ones): their documents on disk are
    /// stale and left out.
    keys: HashSet<u64>,
    searcher: Option<tantivy::Searcher>,
}

/// What the writer thread owns.
struct Worker {
    index: Index,
    main: IndexWriter<TantivyDocument>,
    main_reader: IndexReader,
    fields: Fields,
    ram_writer: IndexWriter<TantivyDocument>,
    ram_reader: IndexReader,
    /// Key → current version (`None`: deleted or not searchable) since the last commit
    /// on disk.
    changed: HashMap<u64, Option<Arc<Note>>>,
    first_change: Option<Instant>,
    /// `<state dir>/index.lock`, held while the index is open. Last, so that it is let go
    /// after the writers (fields drop in order) when the thread ends.
    _lock: std::fs::File,
}

impl Worker {
    /// Replace the start-up writer by a one-thread writer with the smallest budget.
    fn shrink(&mut self) -> tantivy::Result<()> {
        let small = loop {
            // The old writer holds the lock until it is dropped: swap through a wait.
            match self.index.writer_with_num_threads(1, SMALL_WRITER_BYTES) {
                Ok(w) => break w,
                Err(tantivy::TantivyError::LockFailure(..)) => {
                    // Dropping it stops its merges (they are considered again at the next
                    // commit) and releases the lock.
                    drop(std::mem::replace(&mut self.main, placeholder_writer()?));
                }
                Err(e) => return Err(e),
            }
        };
        self.main = small;
        Ok(())
    }

    /// Commit the overlay's notes to the index on disk and empty the overlay. On error the
    /// overlay is kept and retried: each note's operations (delete its key, add its
    /// document) replayed after a failed attempt supersede that attempt's, so no rollback
    /// is needed (tantivy's rollback gives up the writer's lock when it fails).
    fn flush_to_disk(&mut self) -> tantivy::Result<()> {
        if self.changed.is_empty() {
            return Ok(());
        }
        let mut write = || -> tantivy::Result<()> {
            for (key, note) in &self.changed {
                self.main
                    .delete_term(Term::from_field_u64(self.fields.key, *key));
                if let Some(note) = note {
                    self.main.add_document(document(&self.fields, note))?;
                }
            }
            self.main.commit()?;
            self.main_reader.reload()
        };
        write()?;
        self.changed.clear();
        self.first_change = None;
        self.ram_writer.delete_all_documents()?;
        self.ram_writer.commit()?;
        self.ram_reader.reload()
    }
}

/// The fields of a document.
#[derive(Clone, Copy)]
struct Fields {
    /// The note's key (a hash of its id): deletes by term, maps hits back to the
    /// catalog, and filters evaluated on the catalog.
    key: Field,
    /// `content_hash path`: tells at start whether the indexed note is current.
    stamp: Field,
    title: Field,
    headings: Field,
    tags: Field,
    path: Field,
    properties: Field,
    body: Field,
    created: Field,
    updated: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = |positions: bool| {
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(tokenizer::NAME)
                .set_index_option(if positions {
                    IndexRecordOption::WithFreqsAndPositions
                } else {
                    IndexRecordOption::WithFreqs
                }),
        )
    };
    let date = DateOptions::from(INDEXED).set_fast();
    let fields = Fields {
        key: b.add_u64_field("key", INDEXED | FAST),
        stamp: b.add_text_field("stamp", FAST),
        title: b.add_text_field("title", text(true)),
        headings: b.add_text_field("headings", text(true)),
        tags: b.add_text_field("tags", text(true)),
        path: b.add_text_field("path", text(true)),
        properties: b.add_text_field("properties", text(true)),
        body: b.add_text_field("body", text(true)),
        created: b.add_date_field("created_at", date.clone()),
        updated: b.add_date_field("updated_at", date),
    };
    (b.build(), fields)
}

pub use crate::vault::catalog::key_of;

fn stamp_of(note: &Note) -> String {
    format!("{} {}", note.content_hash, note.path)
}

/// Whether a note goes into the index (and grep): not private, content kept.
pub fn searchable(note: &Note) -> bool {
    note.visibility != Visibility::Private && note.content.is_some()
}

enum Msg {
    /// Bring the index in line with these notes (all of the catalog) as of `seq`.
    Sync {
        notes: Vec<Arc<Note>>,
        seq: i64,
    },
    Upsert {
        note: Arc<Note>,
        seq: i64,
    },
    Remove {
        note_id: String,
        seq: i64,
    },
}

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
}

impl IndexState {
    /// Notes whose current version is not searchable yet.
    pub fn not_yet_indexed(&self) -> usize {
        self.pending.len() + self.sync_remaining
    }
}

/// One ranked hit: a note key and its score.
#[derive(Debug, Clone)]
pub struct Hit {
    pub key: u64,
    pub score: f32,
}

/// A page of ranked hits.
#[derive(Debug, Clone)]
pub struct Hits {
    pub hits: Vec<Hit>,
    /// Documents that matched (all pages).
    pub matched: usize,
}

pub struct SearchIndex {
    reader: IndexReader,
    fields: Fields,
    tx: Mutex<Option<mpsc::Sender<Msg>>>,
    /// Changes are sent only once the start-up sync is queued.
    live: AtomicBool,
    state: Mutex<IndexState>,
    seq_tx: tokio::sync::watch::Sender<i64>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Read before `reader` by every search (see [`SearchIndex::flush`]).
    overlay: parking_lot::RwLock<Arc<Overlay>>,
    /// The vault-wide part of coverage, keyed by (committed_seq, notes, excluded files).
    pub(crate) coverage_cache: Mutex<Option<(CoverageKey, coverage::CoverageFacts)>>,
    /// The first pass of recent greps (matching notes, notes searched, timed out), by
    /// pattern, filter and vault state.
    pub(crate) grep_cache: Mutex<std::collections::VecDeque<(String, Arc<GrepPass>)>>,
}

impl SearchIndex {
    /// Open the index under `state_dir`, creating or rebuilding it when it is missing,
    /// corrupt or of another schema version. Another process holding the index is an
    /// error. Nothing is indexed until [`SearchIndex::start`].
    pub fn open(state_dir: &Path) -> anyhow::Result<Arc<Self>> {
        let dir = state_dir.join("index");
        // Held as long as this index lives: tantivy's own writer lock is let go for a
        // moment when the start-up writer is replaced by a small one.
        let lock = lock_index(state_dir, true)?;
        let (schema, fields) = schema();
        let (index, rebuilt) = open_or_rebuild(&dir, &schema)?;
        index
            .tokenizers()
            .register(tokenizer::NAME, tokenizer::analyzer());
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
        let writer: IndexWriter<TantivyDocument> = index
            .writer_with_num_threads(threads, 64_000_000 * threads)
            .map_err(|e| anyhow::anyhow!("cannot open the search index: {e}"))?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let ram = Index::create_in_ram(schema.clone());
        ram.tokenizers()
            .register(tokenizer::NAME, tokenizer::analyzer());
        let worker = Worker {
            index: index.clone(),
            main: writer,
            main_reader: reader.clone(),
            fields,
            ram_writer: ram.writer_with_num_threads(1, SMALL_WRITER_BYTES)?,
            ram_reader: ram
                .reader_builder()
                .reload_policy(ReloadPolicy::Manual)
                .try_into()?,
            changed: HashMap::new(),
            first_change: None,
            _lock: lock,
        };
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
                ..IndexState::default()
            }),
            seq_tx,
            worker: Mutex::new(None),
            coverage_cache: Mutex::new(None),
            grep_cache: Mutex::new(Default::default()),
        });
        idx.refresh_counts();
        // The writer thread holds the index weakly: dropping the service drops the
        // sender, the thread ends, and its writer releases the index lock.
        let weak = Arc::downgrade(&idx);
        let handle = std::thread::Builder::new()
            .name("index-writer".into())
            .spawn(move || Self::run(weak, worker, rx))?;
        *idx.worker.lock() = Some(handle);
        Ok(idx)
    }

    /// Remove the index under `state_dir` so that the next open rebuilds it; refused
    /// while a running daemon holds it.
    pub fn drop_index(state_dir: &Path) -> anyhow::Result<()> {
        if !state_dir.is_dir() {
            return Ok(());
        }
        let _lock = lock_index(state_dir, false)?;
        let dir = state_dir.join("index");
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        Ok(())
    }

    /// Queue the start-up sync with every note of the catalog as of `seq`; changes sent
    /// from now on are applied after it. Call with the write lock held.
    pub fn start(&self, notes: Vec<Arc<Note>>, seq: i64) {
        {
            let mut st = self.state.lock();
            st.sync_remaining = notes.len();
        }
        self.send(Msg::Sync { notes, seq });
        self.live.store(true, Ordering::SeqCst);
    }

    /// A note changed at `seq` (create, edit, move): index its current version.
    pub fn upsert(&self, note: Arc<Note>, seq: i64) {
        if !self.live.load(Ordering::SeqCst) {
            return;
        }
        self.state.lock().pending.insert(note.note_id.clone(), seq);
        self.send(Msg::Upsert { note, seq });
    }

    /// A note left the vault at `seq`.
    pub fn remove(&self, note_id: &str, seq: i64) {
        if !self.live.load(Ordering::SeqCst) {
            return;
        }
        self.state.lock().pending.insert(note_id.to_string(), seq);
        self.send(Msg::Remove {
            note_id: note_id.to_string(),
            seq,
        });
    }

    fn send(&self, msg: Msg) {
        if let Some(tx) = self.tx.lock().as_ref() {
            if tx.send(msg).is_err() {
                self.state.lock().last_error = Some("the index writer stopped".into());
            }
        }
    }

    pub fn state(&self) -> IndexState {
        self.state.lock().clone()
    }

    pub fn indexed_seq(&self) -> i64 {
        *self.seq_tx.borrow()
    }

    /// Wait until the index reflects `seq`, at most `timeout`; `true` when it does.
    pub async fn wait_for(&self, seq: i64, timeout: Duration) -> bool {
        let mut rx = self.seq_tx.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|s| *s >= seq))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Blocking form of [`SearchIndex::wait_for`], for the CLI.
    pub fn wait_for_blocking(&self, seq: i64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.indexed_seq() >= seq && self.state.lock().sync_remaining == 0 {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// Stop the writer thread after it has applied what was sent.
    pub fn shutdown(&self) {
        self.tx.lock().take();
        if let Some(handle) = self.worker.lock().take() {
            let _ = handle.join();
        }
    }

    fn refresh_counts(&self) {
        let searcher = self.reader.searcher();
        let mut st = self.state.lock();
        st.docs = searcher.num_docs();
        st.segments = searcher.segment_readers().len();
    }

    /// The writer thread: apply batches to the in-memory overlay at once, and to the
    /// index on disk when writes pause (or the overlay grows large or old).
    fn run(weak: std::sync::Weak<Self>, mut w: Worker, rx: mpsc::Receiver<Msg>) {
        loop {
            let next = if w.changed.is_empty() {
                rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
            } else {
                rx.recv_timeout(FLUSH_IDLE)
            };
            match next {
                Ok(first) => {
                    let Some(this) = weak.upgrade() else {
                        break;
                    };
                    this.apply(&mut w, first, &rx);
                    if w.changed.len() >= FLUSH_MAX
                        || w.first_change.is_some_and(|t| t.elapsed() >= FLUSH_AGE)
                    {
                        this.flush(&mut w);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => match weak.upgrade() {
                    Some(this) => this.flush(&mut w),
                    None => break,
                },
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        // Shutting down: what is only in memory goes to disk.
        if let Err(e) = w.flush_to_disk() {
            tracing::error!(error = %e, "could not write the last index changes; the next start indexes them");
        }
        let _ = w.main.wait_merging_threads();
    }

    /// Apply `first` and whatever else is queued, and make it searchable.
    fn apply(&self, w: &mut Worker, first: Msg, rx: &mpsc::Receiver<Msg>) {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
            if batch.len() >= 10_000 {
                break;
            }
        }
        let started = Instant::now();
        let mut max_seq = i64::MIN;
        let mut synced = None;
        let mut applied: Vec<(String, i64)> = Vec::new();
        let mut result: tantivy::Result<()> = Ok(());
        let mut overlay_changed = false;
        for msg in batch {
            let r = match msg {
                Msg::Sync { notes, seq } => {
                    max_seq = max_seq.max(seq);
                    // The start-up sync goes straight to disk, with every core and a large
                    // memory budget; later changes come a few at a time, and a writer's
                    // memory grows with its budget, so a small writer takes over.
                    self.sync(&w.main, &notes)
                        .and_then(|n| {
                            synced = Some(n);
                            w.main.commit().map(|_| ())
                        })
                        .and_then(|_| self.reader.reload())
                        .and_then(|_| w.shrink())
                }
                Msg::Upsert { note, seq } => {
                    max_seq = max_seq.max(seq);
                    applied.push((note.note_id.clone(), seq));
                    overlay_changed = true;
                    let key = note.key();
                    w.ram_writer
                        .delete_term(Term::from_field_u64(self.fields.key, key));
                    let r = if searchable(&note) {
                        w.ram_writer
                            .add_document(document(&self.fields, &note))
                            .map(|_| ())
                    } else {
                        Ok(())
                    };
                    w.first_change.get_or_insert_with(Instant::now);
                    w.changed.insert(key, searchable(&note).then_some(note));
                    r
                }
                Msg::Remove { note_id, seq } => {
                    max_seq = max_seq.max(seq);
                    let key = key_of(&note_id);
                    overlay_changed = true;
                    w.ram_writer
                        .delete_term(Term::from_field_u64(self.fields.key, key));
                    w.first_change.get_or_insert_with(Instant::now);
                    w.changed.insert(key, None);
                    applied.push((note_id, seq));
                    Ok(())
                }
            };
            if let Err(e) = r {
                result = Err(e);
            }
        }
        if overlay_changed {
            result = result
                .and_then(|_| w.ram_writer.commit().map(|_| ()))
                .and_then(|_| w.ram_reader.reload());
            if result.is_ok() {
                self.publish_overlay(w);
            }
        }
        let elapsed = started.elapsed().as_millis() as u64;
        tracing::debug!(us = started.elapsed().as_micros() as u64, "index batch");
        {
            let mut st = self.state.lock();
            match &result {
                Ok(()) => {
                    for (id, seq) in &applied {
                        if st.pending.get(id).is_some_and(|s| s <= seq) {
                            st.pending.remove(id);
                        }
                    }
                    if let Some(n) = synced {
                        st.sync_remaining = 0;
                        st.synced_notes = Some(n);
                        st.sync_ms = Some(elapsed);
                        st.commits += 1;
                        st.last_commit_ms = Some(elapsed);
                    }
                    st.indexed_seq = st.indexed_seq.max(max_seq);
                }
                Err(e) => {
                    tracing::error!(error = %e, "index update failed");
                    st.last_error = Some(e.to_string());
                }
            }
        }
        if result.is_ok() {
            if let Some(n) = synced {
                tracing::info!(notes = n, ms = elapsed, "search index up to date");
                crate::memory::release_free_memory();
            }
            self.refresh_counts();
            self.seq_tx.send_if_modified(|s| {
                let changed = max_seq > *s;
                *s = (*s).max(max_seq);
                changed
            });
        }
    }

    /// Write the overlay to the index on disk and empty it.
    fn flush(&self, w: &mut Worker) {
        let started = Instant::now();
        match w.flush_to_disk() {
            Ok(()) => {
                // The disk index is current before the overlay empties: a search that
                // took the old overlay excludes its keys from the disk index, one that
                // takes the empty overlay finds them on disk.
                self.publish_overlay(w);
                let ms = started.elapsed().as_millis() as u64;
                let mut st = self.state.lock();
                st.commits += 1;
                st.last_commit_ms = Some(ms);
                drop(st);
                self.refresh_counts();
            }
            Err(e) => {
                tracing::error!(error = %e, "index commit failed; the changes stay in memory and are retried");
                self.state.lock().last_error = Some(e.to_string());
            }
        }
    }

    fn publish_overlay(&self, w: &Worker) {
        let overlay = if w.changed.is_empty() {
            Overlay::default()
        } else {
            Overlay {
                keys: w.changed.keys().copied().collect(),
                searcher: Some(w.ram_reader.searcher()),
            }
        };
        *self.overlay.write() = Arc::new(overlay);
    }

    /// Index what differs between the index and `notes`; the number of notes (re)indexed.
    fn sync(
        &self,
        writer: &IndexWriter<TantivyDocument>,
        notes: &[Arc<Note>],
    ) -> tantivy::Result<usize> {
        let indexed = self.indexed_stamps()?;
        let mut keep: HashSet<u64> = HashSet::with_capacity(notes.len());
        let mut count = 0;
        for note in notes {
            if !searchable(note) {
                continue;
            }
            let key = note.key();
            keep.insert(key);
            match indexed.get(&key) {
                Some(stamp) if *stamp == stamp_of(note) => continue,
                Some(_) => {
                    writer.delete_term(Term::from_field_u64(self.fields.key, key));
                }
                None => {}
            }
            writer.add_document(document(&self.fields, note))?;
            count += 1;
        }
        for key in indexed.keys() {
            if !keep.contains(key) {
                writer.delete_term(Term::from_field_u64(self.fields.key, *key));
            }
        }
        Ok(count)
    }

    /// Key → stamp of every live document.
    fn indexed_stamps(&self) -> tantivy::Result<HashMap<u64, String>> {
        let searcher = self.reader.searcher();
        let mut out = HashMap::with_capacity(searcher.num_docs() as usize);
        for segment in searcher.segment_readers() {
            let ff = segment.fast_fields();
            let keys = ff.u64("key")?;
            let Some(stamps) = ff.str("stamp")? else {
                continue;
            };
            let mut stamp = String::new();
            for doc in segment.doc_ids_alive() {
                let (Some(key), Some(s)) = (keys.first(doc), stamps.term_ords(doc).next()) else {
                    continue;
                };
                stamp.clear();
                stamps.ord_to_str(s, &mut stamp)?;
                out.insert(key, stamp.clone());
            }
        }
        Ok(out)
    }

    /// Search: the hits of `query` ranked by score, `offset..offset + limit`, among the
    /// notes whose key is in `allowed` when given.
    pub fn search(
        &self,
        parsed: &query::Parsed,
        allowed: Option<Arc<HashSet<u64>>>,
        offset: usize,
        limit: usize,
    ) -> Result<Hits> {
        // The overlay first, then the disk index (see `flush`).
        let overlay = self.overlay.read().clone();
        let searcher = self.reader.searcher();
        let f = &self.fields;
        let fields: Vec<(&str, Field, f32)> = query::FIELDS
            .iter()
            .map(|(name, boost)| {
                let field = match *name {
                    "title" => f.title,
                    "headings" => f.headings,
                    "tags" => f.tags,
                    "path" => f.path,
                    "properties" => f.properties,
                    _ => f.body,
                };
                (*name, field, *boost)
            })
            .collect();
        let q = query::to_tantivy(parsed, &fields);
        let internal = |e: tantivy::TantivyError| Error::internal(format!("search failed: {e}"));
        let want = (offset + limit).max(1);
        // On disk: every note but those the overlay holds newer (or no) versions of.
        let stale = (!overlay.keys.is_empty()).then(|| overlay.keys.clone());
        let keep_disk: Option<KeyFilter> = match (&allowed, stale) {
            (None, None) => None,
            (allowed, stale) => {
                let allowed = allowed.clone();
                Some(Arc::new(move |k: u64| {
                    stale.as_ref().is_none_or(|s| !s.contains(&k))
                        && allowed.as_ref().is_none_or(|a| a.contains(&k))
                }))
            }
        };
        let scoring = tantivy::query::EnableScoring::enabled_from_searcher(&searcher);
        let (mut hits, mut matched) =
            collect(&searcher, q.as_ref(), scoring, keep_disk, want).map_err(internal)?;
        // In memory: scored with the disk index's statistics, so scores compare.
        if let Some(ram) = &overlay.searcher {
            let keep_ram: Option<KeyFilter> = allowed
                .clone()
                .map(|a| Arc::new(move |k: u64| a.contains(&k)) as KeyFilter);
            let scoring =
                tantivy::query::EnableScoring::enabled_from_statistics_provider(&searcher, ram);
            let (more, n) = collect(ram, q.as_ref(), scoring, keep_ram, want).map_err(internal)?;
            hits.extend(more);
            matched += n;
            hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.key.cmp(&b.key)));
        }
        let hits = hits.into_iter().skip(offset).take(limit).collect();
        Ok(Hits { hits, matched })
    }

    /// The key and score of every note matching `parsed` (for orders other than relevance).
    pub fn matching(&self, parsed: &query::Parsed) -> Result<Vec<(u64, f32)>> {
        let all = self.search(parsed, None, 0, 0)?;
        if all.matched == 0 {
            return Ok(Vec::new());
        }
        let page = self.search(parsed, None, 0, all.matched)?;
        Ok(page.hits.into_iter().map(|h| (h.key, h.score)).collect())
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

/// The best `want` hits of `query` in `searcher` (by key) and how many matched, among the
/// notes `keep` allows (all when `None`). One weight serves the ranking and the count.
fn collect(
    searcher: &tantivy::Searcher,
    query: &dyn Query,
    scoring: tantivy::query::EnableScoring<'_>,
    keep: Option<KeyFilter>,
    want: usize,
) -> tantivy::Result<(Vec<Hit>, usize)> {
    let weight = query.weight(scoring)?;
    let segments = searcher.segment_readers().iter().enumerate();
    let mut tops = Vec::new();
    let mut matched = 0usize;
    let docs: Vec<(f32, DocAddress)> = match keep {
        Some(keep) => {
            let k2 = keep.clone();
            let top = FilterCollector::new(
                "key".to_string(),
                move |k: u64| keep(k),
                TopDocs::with_limit(want).order_by_score(),
            );
            let count = FilterCollector::new("key".to_string(), move |k: u64| k2(k), Count);
            for (ord, segment) in segments {
                tops.push(top.collect_segment(weight.as_ref(), ord as u32, segment)?);
                matched += count.collect_segment(weight.as_ref(), ord as u32, segment)?;
            }
            top.merge_fruits(tops)?
        }
        None => {
            let top = TopDocs::with_limit(want).order_by_score();
            for (ord, segment) in segments {
                tops.push(top.collect_segment(weight.as_ref(), ord as u32, segment)?);
                matched += weight.count(segment)? as usize;
            }
            top.merge_fruits(tops)?
        }
    };
    let mut hits = Vec::with_capacity(docs.len());
    for (score, addr) in docs {
        let keys = searcher
            .segment_reader(addr.segment_ord)
            .fast_fields()
            .u64("key")?;
        if let Some(key) = keys.first(addr.doc_id) {
            hits.push(Hit { key, score });
        }
    }
    Ok((hits, matched))
}

fn document(f: &Fields, note: &Note) -> TantivyDocument {
    let mut doc = TantivyDocument::default();
    doc.add_u64(f.key, note.key());
    doc.add_text(f.stamp, stamp_of(note));
    doc.add_text(f.title, &note.title);
    doc.add_text(f.path, &note.slug);
    for tag in &note.tags {
        doc.add_text(f.tags, tag);
    }
    doc.add_date(
        f.created,
        tantivy::DateTime::from_timestamp_millis(note.created_at.timestamp_millis()),
    );
    doc.add_date(
        f.updated,
        tantivy::DateTime::from_timestamp_millis(note.updated_at.timestamp_millis()),
    );
    if let Some(map) = &note.frontmatter {
        let mut props = String::new();
        for (k, v) in map {
            let key = crate::vault::markdown::scalar_string(k).unwrap_or_default();
            if matches!(key.as_str(), "title" | "tags" | "tag") {
                continue;
            }
            props.push_str(&key);
            props.push(' ');
            flatten_yaml(v, &mut props);
            props.push('\n');
        }
        if !props.is_empty() {
            doc.add_text(f.properties, props);
        }
    }
    if let Some(bytes) = &note.content {
        let (text, _) = crate::vault::markdown::decode(bytes);
        let body_start = crate::vault::markdown::frontmatter_span(&text).map_or(0, |(_, b)| b);
        let body = &text[body_start..];
        let headings = provenance::headings(body);
        if !headings.is_empty() {
            doc.add_text(f.headings, headings.join("\n"));
        }
        doc.add_text(f.body, body);
    }
    doc
}

fn flatten_yaml(v: &serde_norway::Value, out: &mut String) {
    match v {
        serde_norway::Value::Sequence(items) => {
            for item in items {
                flatten_yaml(item, out);
                out.push(' ');
            }
        }
        serde_norway::Value::Mapping(map) => {
            for (k, v) in map {
                flatten_yaml(k, out);
                out.push(' ');
                flatten_yaml(v, out);
                out.push(' ');
            }
        }
        serde_norway::Value::Tagged(t) => flatten_yaml(&t.value, out),
        other => {
            if let Some(s) = crate::vault::markdown::scalar_string(other) {
                out.push_str(&s);
            }
        }
    }
}

/// Lock `<state dir>/index.lock` for this process. A service of this process that is
/// shutting down may still hold it for a moment (its last handle is dropped by a worker),
/// so `wait` tries for a few seconds before giving up.
fn lock_index(state_dir: &Path, wait: bool) -> anyhow::Result<std::fs::File> {
    let path = state_dir.join("index.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    let deadline = Instant::now()
        + if wait {
            Duration::from_secs(5)
        } else {
            Duration::ZERO
        };
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
                "the search index in {} is in use: another notevault process serves this vault; stop it first",
                state_dir.display()
            ),
            Err(std::fs::TryLockError::Error(e)) => {
                anyhow::bail!("cannot lock {}: {e}", path.display())
            }
        }
    }
}

/// Open the index in `dir`, or create it; an index that does not open, or of another
/// schema version, is removed and created again. The second value says why it was
/// (re)built.
fn open_or_rebuild(dir: &Path, schema: &Schema) -> anyhow::Result<(Index, Option<String>)> {
    let version_file = dir.join(VERSION_FILE);
    let why = if !dir.join("meta.json").exists() {
        Some("no index yet".to_string())
    } else {
        match std::fs::read_to_string(&version_file) {
            Ok(v) if v.trim() == SCHEMA_VERSION.to_string() => {
                match Index::open_in_dir(dir) {
                    Ok(index) if index.schema() == *schema => {
                        // Reading the segment list proves the files are there.
                        match index.searchable_segment_metas() {
                            Ok(_) => return Ok((index, None)),
                            Err(e) => Some(format!("the index is corrupt ({e})")),
                        }
                    }
                    Ok(_) => Some("the index has another schema".to_string()),
                    Err(e) => Some(format!("the index is corrupt ({e})")),
                }
            }
            Ok(v) => Some(format!(
                "the index is of schema version {} (this build uses {SCHEMA_VERSION})",
                v.trim()
            )),
            Err(_) => Some("the index has no schema version".to_string()),
        }
    };
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    let index = Index::create_in_dir(dir, schema.clone())?;
    std::fs::write(&version_file, SCHEMA_VERSION.to_string())?;
    if let Some(why) = &why {
        tracing::info!(reason = %why, "building the search index");
    }
    Ok((index, why))
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
