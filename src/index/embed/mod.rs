//! Optional hybrid retrieval: note vectors from a local embedding model
//! (`NOTEVAULT_EMBED_MODEL`, config `embed_model`: a model2vec static model or a BERT
//! sentence-transformers folder), kept in the state directory and searched by cosine
//! similarity beside BM25; the two ranked lists are fused by score (`fuse.rs`).
//!
//! The index writer thread (`writer.rs`) is the one pipeline that feeds it: once the
//! lexical start-up sync is published, the vector sync embeds the notes whose vectors are
//! missing or stale (by stamp: content hash and path) and drops the rest, on its own
//! thread and pool while changes go on; each recorded change is handed to the vault's
//! `embed` thread (`changes.rs`), which embeds or drops its note while the lexical index
//! goes on; vectors go to disk after the sync, at an index flush at most every 30 s, and
//! at shutdown (`store.rs`: one file per model fingerprint, written atomically), never
//! after the index is shut down.
//!
//! A note is cut into chunks at its headings (the title before each chunk); its score for
//! a query is that of its best chunk.
//!
//! Invariants: off unless a model folder is configured, and nothing is ever downloaded;
//! only notes the lexical index takes ([`super::searchable`]: never private notes, never
//! notes above the size searched) are embedded; a vector whose stamp is not the catalog's
//! current version of its note is never a hit; a model that cannot be loaded leaves
//! lexical search as it is and says why (index-status, coverage); no note text is logged.

pub mod arena;
mod changes;
pub mod folder;
pub mod fuse;
pub mod model;
pub mod store;
#[cfg(feature = "transformer")]
pub mod transformer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use rayon::prelude::*;

use self::arena::Entry;
use self::model::Model;
use self::store::Store;
use super::schema::stamp_of;
use super::searchable;
use crate::vault::note::Note;

/// Nearest notes the vector retriever hands to the fusion.
pub const VECTOR_DEPTH: usize = 100;
/// A note whose best chunk is no more similar than this to the query is no hit.
pub const MIN_SIMILARITY: f32 = 0.0;
/// Chunks embedded per note at most by a static model (the rest of a long note joins the
/// last one, cut to the model's length).
pub const MAX_CHUNKS: usize = 64;

/// What `GET /v1/index-status` shows of the vectors.
#[derive(Debug, Clone, Default)]
pub struct VectorStatus {
    /// `off` (no model configured), `ready`, or `failed` (the model could not be loaded:
    /// `error` says why; lexical search goes on).
    pub state: &'static str,
    /// The model folder as configured.
    pub model: Option<String>,
    /// [`Model::kind`] of the loaded model.
    pub kind: Option<&'static str>,
    pub fingerprint: Option<String>,
    pub dimensions: Option<usize>,
    pub error: Option<String>,
    /// Why the stored vectors were not reused at this start (none yet, another model,
    /// damaged); `None` when they were.
    pub rebuilt: Option<String>,
    /// Notes whose vectors were read from the state directory at this start...
    pub loaded: usize,
    /// ... of which still current at the start-up sync (not computed again).
    pub reused: usize,
    /// Notes embedded since this start.
    pub computed: usize,
    /// Notes with vectors now.
    pub notes: usize,
    /// The start-up sync has not embedded every note yet.
    pub syncing: bool,
    /// Changes recorded and not yet embedded.
    pub pending: usize,
    pub last_error: Option<String>,
}

/// Why the vector retriever did not run, or what it found.
#[derive(Debug, Clone)]
pub struct Nearest {
    /// Note keys and their best chunk's cosine similarity, best first.
    pub hits: Vec<(u64, f32)>,
    /// Notes (among those allowed) whose current version has vectors.
    pub covered: usize,
    /// Whether the model knows any word of the query (else nothing is near it).
    pub query_known: bool,
}

/// The note vectors: the model, the store, and their status.
pub struct Vectors {
    /// `<state dir>/vectors`.
    dir: PathBuf,
    model: Option<Arc<Model>>,
    /// This vault's recent queries' vectors.
    queries: model::Queries,
    store: RwLock<Store>,
    status: Mutex<VectorStatus>,
    dirty: AtomicBool,
    /// While the start-up sync runs: the notes a change embedded or dropped since it
    /// began (newer than the sync's notes; the sync leaves them alone).
    touched: Mutex<Option<std::collections::HashSet<u64>>>,
    /// Held while the file is written (the writer's flush, the start-up sync and the
    /// shutdown may save at once; they share one temp file); when it was last written.
    saved: Mutex<Option<std::time::Instant>>,
    /// The index was shut down (a purge follows): nothing more is written, and a
    /// start-up sync still embedding stops.
    closed: AtomicBool,
    /// Changes the index writer handed over, to embed (`changes.rs`).
    changes: Mutex<changes::Changes>,
    /// Every change through this seq is embedded.
    embedded: tokio::sync::watch::Sender<i64>,
}

/// The vectors file is rewritten whole (tens of MB on a large vault): after a change, at
/// most this often, and at shutdown.
const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

impl Vectors {
    /// Load the model in `model_dir` (when configured) and its stored vectors. A model
    /// that cannot be used is a `failed` status, never an error: search stays lexical.
    pub fn open(state_dir: &Path, model_dir: Option<&Path>) -> Vectors {
        let dir = state_dir.join("vectors");
        let mut status = VectorStatus {
            state: "off",
            ..VectorStatus::default()
        };
        let Some(model_dir) = model_dir else {
            return Vectors {
                dir,
                model: None,
                queries: model::Queries::default(),
                store: RwLock::new(Store::default()),
                status: Mutex::new(status),
                dirty: AtomicBool::new(false),
                touched: Mutex::new(None),
                saved: Mutex::new(None),
                closed: AtomicBool::new(false),
                changes: Mutex::default(),
                embedded: tokio::sync::watch::Sender::new(i64::MAX),
            };
        };
        status.model = Some(model_dir.display().to_string());
        let (model, store) = match model::shared(model_dir) {
            Ok(model) => {
                status.state = "ready";
                status.kind = Some(model.kind());
                status.fingerprint = Some(model.fingerprint.clone());
                status.dimensions = Some(model.dim());
                let store = match Store::load(&dir, &model.fingerprint, model.dim()) {
                    Ok(store) => {
                        status.loaded = store.notes.len();
                        store
                    }
                    Err(why) => {
                        status.rebuilt = Some(why);
                        Store::empty(model.fingerprint.clone(), model.dim())
                    }
                };
                tracing::info!(
                    model = %model.dir.display(),
                    kind = model.kind(),
                    dimensions = model.dim(),
                    stored = status.loaded,
                    "embedding model loaded"
                );
                (Some(model), store)
            }
            Err(e) => {
                let why = format!("{e:#}");
                tracing::warn!(error = %why, "the embedding model cannot be used; search stays lexical");
                status.state = "failed";
                status.error = Some(why);
                (None, Store::default())
            }
        };
        status.notes = store.notes.len();
        Vectors {
            dir,
            model,
            queries: model::Queries::default(),
            store: RwLock::new(store),
            status: Mutex::new(status),
            dirty: AtomicBool::new(false),
            touched: Mutex::new(None),
            saved: Mutex::new(None),
            closed: AtomicBool::new(false),
            changes: Mutex::default(),
            embedded: tokio::sync::watch::Sender::new(i64::MAX),
        }
    }

    /// Whether notes are embedded (a model is configured and loaded).
    pub fn ready(&self) -> bool {
        self.model.is_some()
    }

    pub fn status(&self) -> VectorStatus {
        let pending = self.pending();
        VectorStatus {
            pending,
            ..self.status.lock().clone()
        }
    }

    /// Why the vector retriever cannot run, when it cannot.
    pub fn unavailable(&self) -> Option<String> {
        let st = self.status.lock();
        match st.state {
            "ready" => None,
            "failed" => Some(format!(
                "the embedding model cannot be used: {}",
                st.error.as_deref().unwrap_or("unknown error")
            )),
            _ => Some(
                "no embedding model is configured (set NOTEVAULT_EMBED_MODEL or `embed_model` to a local model2vec or BERT sentence-transformers model folder)"
                    .to_string(),
            ),
        }
    }

    /// The start-up sync is under way (called before the writer gets it).
    pub(super) fn begin_sync(&self) {
        if self.ready() {
            self.status.lock().syncing = true;
            *self.touched.lock() = Some(std::collections::HashSet::new());
        }
    }

    /// The start-up sync could not run (`why`): the vectors stay as loaded.
    pub(super) fn abandon_sync(&self, why: &str) {
        self.end_sync();
        self.status.lock().last_error =
            Some(format!("the note vectors' sync could not start: {why}"));
    }

    /// No start-up sync under way any more: nothing to track, not syncing.
    fn end_sync(&self) {
        self.touched.lock().take();
        self.status.lock().syncing = false;
    }

    /// A change embedded or dropped `key`: a running start-up sync must not undo it.
    fn touch(&self, key: u64) {
        if let Some(touched) = self.touched.lock().as_mut() {
            touched.insert(key);
        }
    }

    /// Bring the vectors in line with `notes` (the whole catalog at the start): embed
    /// what is missing or stale, drop what is not a searchable note any more. It runs
    /// beside the writer (`embed-sync` thread), so changes go on being indexed and
    /// embedded meanwhile: a note a change embedded or dropped since [`Vectors::begin_sync`]
    /// is newer than these notes, and left as the change made it.
    pub(super) fn sync(&self, notes: &[Arc<Note>]) {
        // However it ends (a panic too): no longer syncing, no more changes to track.
        struct Done<'a>(&'a Vectors);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.end_sync();
            }
        }
        let _done = Done(self);
        let Some(model) = &self.model else {
            return;
        };
        let wanted: Vec<(&Arc<Note>, String)> = notes
            .iter()
            .filter(|n| searchable(n))
            .map(|n| (n, stamp_of(n)))
            .collect();
        let keep: std::collections::HashSet<u64> = wanted.iter().map(|(n, _)| n.key()).collect();
        let (stale, unwanted): (Vec<&(&Arc<Note>, String)>, Vec<u64>) = {
            let store = self.store.read();
            let stale = wanted
                .iter()
                .filter(|(n, stamp)| store.notes.get(&n.key()).is_none_or(|e| e.stamp != *stamp))
                .collect();
            let unwanted = store
                .notes
                .keys()
                .filter(|k| !keep.contains(k))
                .copied()
                .collect();
            (stale, unwanted)
        };
        let progress = crate::progress::Progress::start("embedding", "notes", stale.len() as u64);
        let computed: Vec<(u64, Option<Entry>)> = stale
            .par_iter()
            .map(|(note, stamp)| {
                progress.inc(1);
                if self.closed.load(Ordering::Relaxed) {
                    return (note.key(), None);
                }
                let entry = embed_note(model, note)
                    .map(|vectors| Entry::quantize(stamp.clone(), &vectors, model.dim()));
                (note.key(), entry)
            })
            .collect();
        progress.finish();
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let (mut n, mut removed, mut failed) = (0, 0, 0);
        let changed = {
            let mut store = self.store.write();
            // Taken under the store's lock: a change after this waits for it, and is
            // then newer than what is put in here.
            let touched = self.touched.lock().take().unwrap_or_default();
            for key in unwanted {
                if !touched.contains(&key) && store.notes.remove(&key).is_some() {
                    removed += 1;
                }
            }
            for (key, entry) in computed {
                if touched.contains(&key) {
                    continue;
                }
                match entry {
                    Some(entry) => {
                        store.notes.insert(key, entry);
                        n += 1;
                    }
                    None => {
                        store.notes.remove(&key);
                        failed += 1;
                    }
                }
            }
            store.notes.shrink();
            let mut st = self.status.lock();
            st.reused = wanted.len() - stale.len();
            st.computed += n;
            st.notes = store.notes.len();
            st.syncing = false;
            if failed > 0 {
                st.last_error = Some(format!(
                    "{failed} note(s) could not be embedded (the tokenizer failed on their text); they are searched by words only"
                ));
            }
            n + removed + failed > 0 || st.rebuilt.is_some()
        };
        if changed {
            self.dirty.store(true, Ordering::SeqCst);
        }
        self.persist(true);
        tracing::info!(
            embedded = n,
            reused = wanted.len() - stale.len(),
            failed,
            "note vectors up to date"
        );
    }

    /// A note changed: embed its current version (or drop its vectors when it is not
    /// searchable any more). On the `embed` thread ([`Vectors::changed`]).
    fn upsert(&self, note: &Note) {
        let Some(model) = &self.model else {
            return;
        };
        if !searchable(note) {
            self.remove(note.key());
            return;
        }
        self.touch(note.key());
        let stamp = stamp_of(note);
        if self
            .store
            .read()
            .notes
            .get(&note.key())
            .is_some_and(|e| e.stamp == stamp)
        {
            return;
        }
        let vectors = embed_note(model, note);
        let mut store = self.store.write();
        let mut st = self.status.lock();
        match vectors {
            Some(vectors) => {
                let entry = Entry::quantize(stamp, &vectors, model.dim());
                store.notes.insert(note.key(), entry);
                st.computed += 1;
            }
            None => {
                store.notes.remove(&note.key());
                st.last_error = Some(
                    "a note could not be embedded (the tokenizer failed on its text); it is searched by words only"
                        .to_string(),
                );
            }
        }
        st.notes = store.notes.len();
        self.dirty.store(true, Ordering::SeqCst);
    }

    /// A note left the vault (or the searchable notes).
    fn remove(&self, key: u64) {
        if self.model.is_none() {
            return;
        }
        self.touch(key);
        let mut store = self.store.write();
        if store.notes.remove(&key).is_some() {
            self.status.lock().notes = store.notes.len();
            self.dirty.store(true, Ordering::SeqCst);
        }
    }

    /// No more writes to the state directory (the index was shut down; a purge may
    /// remove it next): waits for a save under way, and a start-up sync still embedding
    /// stops without saving.
    pub(super) fn close(&self) {
        let _saving = self.saved.lock();
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Write the vectors to the state directory if they changed since the last write:
    /// `now` at the end of the start-up sync and at shutdown, else (an index flush) only
    /// if the last write is [`SAVE_EVERY`] old. Vectors lost to a crash are derived
    /// state: the next start finds their stamps stale and computes them again.
    pub(super) fn persist(&self, now: bool) {
        if self.model.is_none() {
            return;
        }
        let mut saved = self.saved.lock();
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        if !now && saved.is_some_and(|at| at.elapsed() < SAVE_EVERY) {
            return;
        }
        if !self.dirty.swap(false, Ordering::SeqCst) {
            return;
        }
        // Encoded under the store's lock, written without it: changes and searches do
        // not wait for the disk (`saved` keeps saves one at a time).
        let encoded = self.store.read().encode();
        let result = encoded.and_then(|e| e.write(&self.dir));
        *saved = Some(std::time::Instant::now());
        if let Err(e) = result {
            self.dirty.store(true, Ordering::SeqCst);
            tracing::error!(error = %e, "could not write the note vectors; they are written again at the next flush");
            self.status.lock().last_error = Some(format!("writing the note vectors: {e}"));
        }
    }

    /// The notes nearest to `query`, at most `depth`, best first, among those `allowed`
    /// (by key: the filter) and whose stored vectors `current` says are of the catalog's
    /// version (by key and stamp; asked of the best notes in order until `depth` are
    /// found: a stale vector is rare outside the start-up sync and changes the `embed` thread
    /// has not reached). `covered` counts every note with vectors, filter or
    /// not, as `coverage.searched` counts the vault, less the stale ones found. `Err`
    /// says why the retriever did not run.
    pub fn nearest(
        &self,
        query: &str,
        allowed: impl Fn(u64) -> bool + Sync,
        current: impl Fn(u64, &str) -> bool,
        depth: usize,
    ) -> Result<Nearest, String> {
        let Some(model) = &self.model else {
            return Err(self.unavailable().unwrap_or_default());
        };
        let q = self
            .queries
            .get_or(query, || quietly(|| model.embed(query)))
            .ok_or_else(|| "the embedding model failed on the query's text".to_string())?
            .map(|mut v| {
                model::normalize(&mut v);
                v
            });
        let store = self.store.read();
        let (mut scored, mut covered) = store.notes.best(q.as_deref(), allowed, MIN_SIMILARITY);
        let order = |a: &(u64, f32), b: &(u64, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        // The best few in order, then checked: room for some stale ones. When more were
        // stale (a start-up sync under way after a folder was renamed), the rest is
        // ordered too and the check goes on.
        let mut sorted = (depth + 64).min(scored.len());
        if scored.len() > sorted {
            scored.select_nth_unstable_by(sorted, order);
        }
        scored[..sorted].sort_unstable_by(order);
        let mut hits = Vec::with_capacity(depth.min(scored.len()));
        let mut next = 0;
        while hits.len() < depth {
            if next == sorted {
                if sorted == scored.len() {
                    break;
                }
                scored[sorted..].sort_unstable_by(order);
                sorted = scored.len();
            }
            let (key, sim) = scored[next];
            next += 1;
            let stamp = store.notes.get(&key).map(|s| s.stamp.as_str());
            if stamp.is_some_and(|stamp| current(key, stamp)) {
                hits.push((key, sim));
            } else {
                covered -= 1;
            }
        }
        Ok(Nearest {
            hits,
            covered,
            query_known: q.is_some(),
        })
    }
}

thread_local! {
    /// This thread is running the tokenizer or the model on a note's or a query's text.
    static EMBEDDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f` (the tokenizer and the model, third-party code, on any text) and catch a panic
/// without its message reaching the log: a panic's message may quote the text (a str
/// slice out of bounds does). The process's panic hook is wrapped once to stay quiet on
/// a thread inside this call.
fn quietly<T>(f: impl FnOnce() -> T) -> Option<T> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if EMBEDDING.with(std::cell::Cell::get) {
                tracing::error!(
                    "the embedding model or its tokenizer panicked on a text (not logged)"
                );
            } else {
                previous(info);
            }
        }));
    });
    // Restored, not cleared: a transformer's matrix products run on this thread's rayon
    // pool, whose worker may take another note's embedding while it waits inside one.
    let outer = EMBEDDING.with(|e| e.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok();
    EMBEDDING.with(|e| e.set(outer));
    result
}

/// A note's vectors: one unit-length vector per chunk with a known token (`chunks × dim`).
/// `None` when the tokenizer panicked on the note's text (third-party code on any text
/// a vault holds): the note has no vectors, and the embedding thread goes on.
fn embed_note(model: &Model, note: &Note) -> Option<Vec<f32>> {
    let embed = || {
        let mut out = Vec::new();
        for chunk in chunks(note, model.max_chunks()) {
            if let Some(mut v) = model.embed(&chunk) {
                if model::normalize(&mut v) > 1e-12 {
                    out.extend_from_slice(&v);
                }
            }
        }
        out
    };
    quietly(embed)
}

/// A note cut at its headings (outside fenced code): each chunk is the title, then the
/// heading and the text under it; the text before the first heading is the first chunk.
/// Empty sections are left out; past `max` chunks the rest joins the last chunk.
pub fn chunks(note: &Note, max: usize) -> Vec<String> {
    let Some(bytes) = note.searched_bytes() else {
        return Vec::new();
    };
    let bytes = bytes.bytes();
    let (text, _) = crate::vault::markdown::decode(&bytes);
    let start = crate::vault::markdown::frontmatter_span(&text).map_or(0, |(_, b)| b);
    chunk_text(&note.title, &text[start..], max)
}

/// [`chunks`] of a body.
pub fn chunk_text(title: &str, body: &str, max: usize) -> Vec<String> {
    let mut sections: Vec<String> = vec![String::new()];
    let mut fence: Option<&str> = None;
    for line in body.lines() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            _ => {}
        }
        let heading = fence.is_none() && marker.is_none() && is_heading(trimmed);
        if heading && sections.len() < max {
            sections.push(String::new());
        }
        let last = sections.last_mut().expect("one section at least");
        last.push_str(line);
        last.push('\n');
    }
    sections
        .into_iter()
        .filter(|s| s.chars().any(char::is_alphanumeric))
        .map(|s| format!("{title}\n{s}"))
        .collect()
}

/// An ATX heading: 1 to 6 `#` then a space (or nothing).
fn is_heading(line: &str) -> bool {
    let hashes = line.bytes().take_while(|b| *b == b'#').count();
    (1..=6).contains(&hashes)
        && line[hashes..]
            .chars()
            .next()
            .is_none_or(|c| c == ' ' || c == '\t')
}

#[cfg(test)]
mod tests;
