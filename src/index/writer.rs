//! The writer thread. Changes arrive with their `committed_seq` ([`SearchIndex::upsert`],
//! [`SearchIndex::remove`]) and are published (made searchable) at most every
//! [`PUBLISH_EVERY`], at once when a search waits for one, as a new part of the
//! in-memory overlay (`overlay.rs`), which searches read beside the disk index; the
//! overlay goes to disk when writes pause, or it grows large or old
//! ([`SearchIndex::flush`]), and at shutdown, as the index's [`Pace`] says. At start, the
//! sync (re)indexes only the notes whose stamp differs from the catalog's, with a large
//! writer that a small one then replaces. A commit on disk that fails is tried again
//! after a back-off (`retry.rs`). The thread owns `<state dir>/index.lock`.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tantivy::indexer::IndexWriterOptions;
use tantivy::schema::Schema;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy};

use super::schema::{Fields, NoteDoc};
use super::{key_of, searchable, SearchIndex};
use crate::vault::note::Note;

mod links;
mod overlay;
mod park;
mod publish;
mod retry;

pub use self::links::{Links, NoLinks};
pub(super) use self::overlay::Overlay;
use self::overlay::Parts;
pub use self::park::Pace;
use self::retry::{Backoff, PendingSync};

/// The memory budget of the writers that take small batches (tantivy's minimum).
const SMALL_WRITER_BYTES: usize = 15_000_000;

/// The memory budget of each thread of the start-up writer. Above this a thread writes
/// its segment out. On the 44k-note corpus 32 MB built the index as fast as 64 MB did,
/// with 30-40 MiB less at the first start's peak; 16 MB took ~1.4x as long.
const START_WRITER_BYTES_PER_THREAD: usize = 32_000_000;

/// A start-up sync of fewer notes than this is written by the small writer: a large one
/// costs more to start (its threads, its per-thread term tables) than it saves there.
const LARGE_START: usize = 2_000;

/// A writer of one indexing thread with the smallest budget and one merge thread (not
/// tantivy's four): what changes arriving a few at a time need. An instance serving many
/// vaults keeps two such writers per open vault.
fn small_writer(index: &Index) -> tantivy::Result<IndexWriter<NoteDoc>> {
    index.writer_with_options(
        IndexWriterOptions::builder()
            .num_worker_threads(1)
            .memory_budget_per_thread(SMALL_WRITER_BYTES)
            .num_merge_threads(1)
            .build(),
    )
}

/// The start-up writer: every core (at most four), a large memory budget.
fn large_writer(index: &Index) -> tantivy::Result<IndexWriter<NoteDoc>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    index.writer_with_num_threads(threads, START_WRITER_BYTES_PER_THREAD * threads)
}

/// Changes that follow one another closely are made searchable together, at most this
/// often: each publish builds a segment of the overlay whatever its size, and a segment's
/// fixed cost (a term dictionary builder per field, arenas) is most of the cost of a
/// small one. A change after a quiet moment, a batch that changes no note, and a change
/// that a search waits for (`min_seq`, [`SearchIndex::want`]) are published at once; a
/// search without `min_seq` may miss the last 50 ms of changes.
const PUBLISH_EVERY: Duration = Duration::from_millis(50);

/// Whether a batch just applied is published at once: the overlay has nothing
/// uncommitted (`dirty` false: the batch changed no note, say an attachment's seq), or
/// it last committed [`PUBLISH_EVERY`] ago or more (`since`; `None`: never), or `urgent`
/// (a search waits for a change, or it is the start-up sync). Else it is held until the
/// pace allows.
fn publish_now(dirty: bool, since: Option<Duration>, urgent: bool) -> bool {
    urgent || !dirty || since.is_none_or(|d| d >= PUBLISH_EVERY)
}

/// The index's segments are merged this long after the start-up sync
/// ([`SearchIndex::merge_segments`]): after the first start's busiest seconds, and not at
/// all in a one-shot rebuild (`notevault reindex`), which ends first; a merge took ~1 s
/// more there.
const MERGE_AFTER: Duration = Duration::from_secs(3);

/// Writes paused this long: the blocks kept for the next part go back (the disk may
/// wait longer: [`Pace::idle`]).
const PAUSE: Duration = Duration::from_secs(1);
/// The overlay goes to disk once it holds this many notes, whatever the [`Pace`].
const FLUSH_MAX: usize = 1_000;

/// What the writer thread owns.
pub(super) struct Worker {
    index: Index,
    /// `None`: closed while idle ([`Pace::park`]), or given up after a failed commit
    /// (tantivy's writer is dead once one of its indexing threads failed); a new one is
    /// opened when next needed.
    main: Option<IndexWriter<NoteDoc>>,
    /// A merge of `main`'s segments runs ([`SearchIndex::merge_segments`]): `main` stays
    /// open until it is done.
    merging: bool,
    /// The start-up sync, while its commit has not landed.
    sync_pending: Option<PendingSync>,
    /// The start-up sync landed (notes indexed, milliseconds it took): marked done by
    /// the [`SearchIndex::settle`] that makes its seq searchable, never before or after.
    sync_landed: Option<(usize, u64)>,
    /// The highest seq published while a start-up sync is pending, which `indexed_seq`
    /// reaches once it lands.
    deferred_seq: i64,
    /// When the next commit on disk may be tried after a failed one.
    retry: Backoff,
    pub(super) main_reader: IndexReader,
    fields: Fields,
    /// The overlay's parts, built in this thread (`overlay.rs`).
    parts: Parts,
    /// Key → current version (`None`: deleted or not searchable) since the last commit
    /// on disk.
    changed: HashMap<u64, Option<Arc<Note>>>,
    first_change: Option<Instant>,
    last_change: Option<Instant>,
    /// Nothing came for [`PAUSE`] since the last change: the kept blocks went back.
    paused: bool,
    /// When the overlay goes to disk, and whether at the end.
    pace: Pace,
    /// Changes applied (to the overlay's writer) but not yet published: the notes with
    /// their seqs, and the highest seq applied (`i64::MIN`: none), which `indexed_seq`
    /// reaches when they are.
    held: Vec<(String, i64)>,
    held_seq: i64,
    /// When to merge the index's segments ([`MERGE_AFTER`] after the start-up sync).
    merge_at: Option<Instant>,
    /// When the overlay last built a part, or last tried to.
    last_publish: Option<Instant>,
    /// The last try failed (logged once; tried again after a [`PAUSE`], then with the
    /// overlay's flush).
    publish_failing: bool,
    /// The vault's links (`links.rs`), and what each note's say of the notes they
    /// point at, by key: sorted (target key, hash of its link text).
    links: Arc<dyn Links>,
    outgoing: HashMap<u64, Vec<(u64, u64)>>,
    /// `<state dir>/index.lock`, held while the index is open. Last, so that it is let go
    /// after the writers (fields drop in order) when the thread ends.
    _lock: std::fs::File,
}

impl Worker {
    /// The writers of `index` (a large one for the start-up sync, which [`Worker::shrink`]
    /// replaces), its reader, and the overlay's in-memory index; `lock` is held until
    /// the worker is dropped.
    pub(super) fn new(
        index: Index,
        schema: &Schema,
        fields: Fields,
        lock: std::fs::File,
    ) -> anyhow::Result<Self> {
        let writer = small_writer(&index)
            .map_err(|e| anyhow::anyhow!("cannot open the search index: {e}"))?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(Worker {
            index,
            main: Some(writer),
            merging: false,
            sync_pending: None,
            sync_landed: None,
            deferred_seq: i64::MIN,
            retry: Backoff::default(),
            main_reader: reader,
            fields,
            parts: Parts::new(schema.clone(), fields),
            changed: HashMap::new(),
            first_change: None,
            last_change: None,
            paused: false,
            pace: Pace::FOLDER,
            held: Vec::new(),
            held_seq: i64::MIN,
            last_publish: None,
            merge_at: None,
            publish_failing: false,
            links: Arc::new(NoLinks),
            outgoing: HashMap::new(),
            _lock: lock,
        })
    }

    /// Whether changes were applied that searches do not see yet.
    fn unpublished(&self) -> bool {
        self.parts.dirty() || self.held_seq != i64::MIN
    }

    /// A change applied at `seq` (of the note `id`, when it is one), to be published.
    fn hold(&mut self, id: Option<String>, seq: i64) {
        self.held_seq = self.held_seq.max(seq);
        if let Some(id) = id {
            self.held.push((id, seq));
        }
    }

    /// After a start-up sync: merge the index's segments [`MERGE_AFTER`], when there are
    /// several (`SearchIndex::merge_segments`).
    fn merge_later(&mut self) {
        let several = self
            .index
            .searchable_segment_ids()
            .map_or(true, |ids| ids.len() > 1);
        self.merge_at = several.then(|| Instant::now() + MERGE_AFTER);
    }

    /// Whether a merge is due or under way (`search_index.merging`).
    fn merge_due(&self) -> bool {
        self.merge_at.is_some() || self.merging
    }

    /// Replace the start-up writer by a small one ([`small_writer`]).
    fn shrink(&mut self) -> tantivy::Result<()> {
        self.replace_main(small_writer)
    }

    /// Replace the writer by the one `make` opens on the index. The old one holds the
    /// lock until it is dropped; dropping it stops its merges (they are considered again
    /// at the next commit).
    fn replace_main(
        &mut self,
        make: fn(&Index) -> tantivy::Result<IndexWriter<NoteDoc>>,
    ) -> tantivy::Result<()> {
        drop(self.main.take());
        self.main = Some(make(&self.index)?);
        Ok(())
    }
}

/// What the writer thread is sent.
pub(super) enum Msg {
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
    /// Changes up to `seq` touched no note (an attachment's): the index reflects them
    /// once what was sent before is applied.
    Advance {
        seq: i64,
    },
    /// A search waits for a change ([`SearchIndex::want`]): publish what is held now.
    Publish,
    /// When the overlay goes to disk from now on ([`SearchIndex::set_pace`]).
    Pace(Pace),
    /// The segments of the index on disk were merged ([`SearchIndex::merge_segments`]):
    /// searches read the merged one from now on.
    Merged,
}

impl SearchIndex {
    /// Queue the start-up sync with every note of the catalog as of `seq`; changes sent
    /// from now on are applied after it. Call with the write lock held.
    pub fn start(&self, notes: Vec<Arc<Note>>, seq: i64) {
        {
            let mut st = self.state.lock();
            st.sync_remaining = notes.len();
        }
        self.vectors.begin_sync();
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

    /// Changes up to `seq` touched no note (attachments): `indexed_seq` reaches `seq`
    /// once the changes sent before are applied.
    pub fn advance(&self, seq: i64) {
        if !self.live.load(Ordering::SeqCst) {
            return;
        }
        self.send(Msg::Advance { seq });
    }

    pub(super) fn send(&self, msg: Msg) {
        if let Some(tx) = self.tx.lock().as_ref() {
            if tx.send(msg).is_err() {
                self.state.lock().last_error = Some("the index writer stopped".into());
            }
        }
    }

    /// Start the writer thread. It holds the index weakly: dropping the service drops the
    /// sender, the thread ends, and its writer releases the index lock.
    pub(super) fn spawn_writer(
        self: &Arc<Self>,
        worker: Worker,
        rx: mpsc::Receiver<Msg>,
    ) -> std::io::Result<()> {
        let weak = Arc::downgrade(self);
        let vectors = self.vectors.clone();
        let handle = std::thread::Builder::new()
            .name("index-writer".into())
            .spawn(move || Self::run(weak, worker, rx, vectors))?;
        *self.worker.lock() = Some(handle);
        Ok(())
    }

    /// The writer thread: apply batches to the in-memory overlay at once, and to the
    /// index on disk when writes pause (or the overlay grows large or old).
    fn run(
        weak: std::sync::Weak<Self>,
        mut w: Worker,
        rx: mpsc::Receiver<Msg>,
        vectors: Arc<super::embed::Vectors>,
    ) {
        // Each batch builds a segment in memory: its large buffers are reused, not faulted
        // in again (hosted mode; handed back after each commit to disk, when the writer
        // parks and when it ends).
        let _keeping = crate::memory::keep_here();
        loop {
            if w.merge_at.is_some_and(|t| Instant::now() >= t) {
                w.merge_at = None;
                match weak.upgrade() {
                    Some(this) => this.merge_segments(&mut w),
                    None => break,
                }
            }
            let wait = if w.unpublished() && !w.publish_failing {
                let since = w.last_publish.map_or(PUBLISH_EVERY, |t| t.elapsed());
                Some(PUBLISH_EVERY.saturating_sub(since))
            } else if w.changed.is_empty() && w.sync_pending.is_none() {
                None
            } else {
                // A pause: within a second the kept blocks go back and a part that failed
                // is tried again; the disk waits for the pace's idle time.
                let idle = w.retry.wait().unwrap_or(w.pace.idle);
                Some(if w.paused { idle } else { idle.min(PAUSE) })
            };
            // The merge's time comes first: it is what wakes the thread then.
            let until_merge = w
                .merge_at
                .map(|t| t.saturating_duration_since(Instant::now()));
            let next = match (wait, until_merge) {
                (_, Some(m)) if wait.is_none_or(|d| m < d) => match rx.recv_timeout(m) {
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    other => other,
                },
                (Some(w), _) => rx.recv_timeout(w),
                (None, _) if w.parked() => {
                    // Whatever the last batch left kept waits no longer than this.
                    crate::memory::release_here();
                    rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
                }
                // Nothing to write: the writers close after a while of that.
                (None, _) => match rx.recv_timeout(w.pace.park) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        w.park();
                        match weak.upgrade() {
                            Some(this) => this.state.lock().writers_open = !w.parked(),
                            None => break,
                        }
                        continue;
                    }
                    other => other,
                },
            };
            match next {
                Ok(first) => {
                    let Some(this) = weak.upgrade() else {
                        break;
                    };
                    w.paused = false;
                    this.apply(&mut w, first, &rx);
                    if w.changed.len() >= FLUSH_MAX
                        || w.first_change.is_some_and(|t| t.elapsed() >= w.pace.age)
                        || (w.retry.failing() && w.retry.due())
                    {
                        this.flush(&mut w);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => match weak.upgrade() {
                    Some(this) if w.unpublished() && !w.publish_failing => {
                        this.publish(&mut w, None)
                    }
                    Some(this) if !w.flush_due() => {
                        if w.publish_failing {
                            this.publish(&mut w, None);
                        }
                        crate::memory::release_here();
                        w.paused = true;
                    }
                    // Writes paused (or publishing fails): to disk.
                    Some(this) => this.flush(&mut w),
                    None => break,
                },
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // Shut down: what is held is published before it goes to disk below.
                    if let Some(this) = weak.upgrade() {
                        if w.unpublished() {
                            this.publish(&mut w, None);
                        }
                    }
                    break;
                }
            }
        }
        // Shutting down: what is only in memory goes to disk (a pending start-up sync is
        // the next start's), unless the next start's sync is to catch up on it.
        if !w.pace.at_end {
            tracing::debug!(
                notes = w.changed.len(),
                "index changes left to the next start"
            );
        } else if let Err(e) = w.flush_to_disk(None) {
            tracing::error!(error = %e, "could not write the last index changes; the next start indexes them");
        }
        // The vectors too (the service may be gone: they are held apart).
        vectors.persist(true);
        if let Some(main) = w.main.take() {
            let _ = main.wait_merging_threads();
        }
    }

    /// Apply `first` and whatever else is queued; publish it (make it searchable) now
    /// when [`publish_now`] says so, else hold it for the writer thread's next timeout.
    fn apply(&self, w: &mut Worker, first: Msg, rx: &mpsc::Receiver<Msg>) {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
            if batch.len() >= 10_000 {
                break;
            }
        }
        let started = Instant::now();
        let mut synced = None;
        let mut result: tantivy::Result<()> = Ok(());
        let mut asked = false;
        for msg in batch {
            // A change that failed is neither held nor published: it stays pending, and
            // `indexed_seq` only passes it with a later change (as it always did).
            let r = match msg {
                Msg::Sync { notes, seq } => {
                    // A large start-up sync goes straight to disk, with every core and a
                    // large memory budget; later changes come a few at a time, and a
                    // writer's memory grows with its budget, so a small writer takes over.
                    let mut differing = notes.len();
                    let large = notes.len() >= LARGE_START;
                    let grown = if large {
                        w.replace_main(large_writer)
                    } else {
                        Ok(())
                    };
                    let text = self.gather_links(w);
                    let r = grown.and_then(|()| w.open_main()).and_then(|main| {
                        let n = self.sync(main, &notes, &HashSet::new(), text)?;
                        differing = n;
                        main.commit()?;
                        self.reader.reload()?;
                        Ok(n)
                    });
                    // The vectors catch up beside the writer: the lexical index is
                    // published with this batch, and changes go on meanwhile
                    // (`Vectors::sync` never replaces an entry a change wrote since it
                    // looked).
                    spawn_vector_sync(&self.vectors, notes.clone());
                    match r {
                        Ok(n) => {
                            synced = Some(n);
                            w.merge_later();
                            w.hold(None, seq);
                            // A swap that failed half way may leave the placeholder in
                            // place: a real writer is opened before the next commit.
                            if large {
                                w.shrink().inspect_err(|_| w.discard_main())
                            } else {
                                Ok(())
                            }
                        }
                        Err(e) => {
                            // Kept, and tried again with the overlay's next flush; its
                            // notes are not searchable until then.
                            w.discard_main();
                            w.sync_pending = Some(PendingSync {
                                notes,
                                seq,
                                touched: HashSet::new(),
                            });
                            self.state.lock().sync_remaining = differing;
                            self.commit_failed(w, &e, "search index start-up sync failed");
                            Ok(())
                        }
                    }
                }
                Msg::Upsert { note, seq } => {
                    let key = note.key();
                    w.touch(key);
                    // Embedded beside the writer: `indexed_seq` does not wait for a model.
                    self.vectors.changed(key, Some(note.clone()), seq);
                    let id = note.note_id.clone();
                    self.relink(w, key, Some(&note));
                    w.changed.insert(key, searchable(&note).then_some(note));
                    w.hold(Some(id), seq);
                    Ok(())
                }
                Msg::Advance { seq } => {
                    w.hold(None, seq);
                    Ok(())
                }
                Msg::Remove { note_id, seq } => {
                    let key = key_of(&note_id);
                    w.touch(key);
                    self.vectors.changed(key, None, seq);
                    self.relink(w, key, None);
                    w.changed.insert(key, None);
                    w.hold(Some(note_id), seq);
                    Ok(())
                }
                Msg::Publish => {
                    asked = true;
                    Ok(())
                }
                Msg::Pace(pace) => {
                    w.pace = pace;
                    Ok(())
                }
                Msg::Merged => {
                    w.merging = false;
                    let r = self.reader.reload();
                    self.refresh_counts();
                    // A later sync may have asked for another merge meanwhile.
                    self.state.lock().merging = w.merge_due();
                    r
                }
            };
            if let Err(e) = r {
                result = Err(e);
            }
        }
        if let Err(e) = result {
            tracing::error!(error = %e, "index update failed");
            self.state.lock().last_error = Some(e.to_string());
        }
        self.state.lock().writers_open = !w.parked();
        let waited_for = self.wanted.load(Ordering::SeqCst) > self.indexed_seq();
        if let Some(n) = synced {
            w.sync_landed = Some((n, started.elapsed().as_millis() as u64));
        }
        if publish_now(
            w.parts.dirty(),
            w.last_publish.map(|t| t.elapsed()),
            asked || waited_for || synced.is_some(),
        ) {
            self.publish(w, Some(started));
        }
    }
}

/// Lock `<state dir>/index.lock` for this process. A service of this process that is
/// shutting down may still hold it for a moment (its last handle is dropped by a worker),
/// so `wait` tries for a few seconds before giving up.
pub(super) fn lock_index(state_dir: &Path, wait: bool) -> anyhow::Result<std::fs::File> {
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

/// Run the start-up vector sync on its own thread, with its own pool of all cores but one
/// (nothing to do without a model): rayon's global pool serves grep, history commits and
/// the verify, which must not wait behind a minute of embedding.
fn spawn_vector_sync(vectors: &Arc<super::embed::Vectors>, notes: Vec<Arc<Note>>) {
    if !vectors.ready() {
        return;
    }
    let threads =
        std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("embed-{i}"))
        .build();
    let run = {
        let vectors = vectors.clone();
        move || match pool {
            Ok(pool) => pool.install(|| vectors.sync(&notes)),
            Err(_) => vectors.sync(&notes),
        }
    };
    if let Err(e) = std::thread::Builder::new()
        .name("embed-sync".into())
        .spawn(run)
    {
        // The closure (and its notes) is gone: nothing syncs; say so.
        tracing::error!(error = %e, "cannot start the note vectors' sync");
        vectors.abandon_sync(&e.to_string());
    }
}

#[cfg(test)]
pub(super) mod tests;
