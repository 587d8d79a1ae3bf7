//! The index on disk: the overlay's flush, the start-up sync's diff, and what happens
//! when a commit fails (a full disk, say): the changes stay (in the overlay, or as a pending start-up sync)
//! and are tried again after a back-off that doubles up to [`RETRY_MAX`], so that a
//! failing disk is not written to every second; `indexed_seq` does not pass a start-up
//! sync that has not landed, since its notes are in no index a search reads.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tantivy::{IndexWriter, Term};

use super::super::schema::{indexed_stamp, LinkText, NoteDoc, Said};
use super::super::{searchable, SearchIndex};
use super::{small_writer, Worker};
use crate::vault::note::Note;

/// The first pause after a failed commit of the index on disk.
const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest pause: how long the index may lag once space is back.
const RETRY_MAX: Duration = Duration::from_secs(60);

/// When the next commit on disk may be tried. A new change does not cut the pause short:
/// each try writes whole segments, which is what eats space just freed, and the overlay
/// keeps new changes searchable meanwhile.
#[derive(Debug, Default)]
pub(super) struct Backoff {
    /// The pause after the next failure (`ZERO`: none failed since the last success).
    next: Duration,
    /// Not before then.
    at: Option<Instant>,
}

impl Backoff {
    /// A try failed: the pause before the next one.
    pub(super) fn failed(&mut self) -> Duration {
        let pause = self.next.max(RETRY_FIRST);
        self.next = (pause * 2).min(RETRY_MAX);
        self.at = Some(Instant::now() + pause);
        pause
    }

    /// A try succeeded: whether it ended a run of failures.
    pub(super) fn succeeded(&mut self) -> bool {
        let was = self.failing();
        *self = Self::default();
        was
    }

    pub(super) fn failing(&self) -> bool {
        self.at.is_some()
    }

    /// How long until a try is due (`None`: nothing failed).
    pub(super) fn wait(&self) -> Option<Duration> {
        self.at.map(|t| t.saturating_duration_since(Instant::now()))
    }

    pub(super) fn due(&self) -> bool {
        self.wait().is_none_or(|d| d.is_zero())
    }
}

/// A start-up sync whose commit failed: tried again with the overlay's next flush.
pub(super) struct PendingSync {
    pub(super) notes: Vec<Arc<Note>>,
    pub(super) seq: i64,
    /// Notes changed since it was queued: their newer version is the overlay's, so the
    /// sync leaves them alone.
    pub(super) touched: HashSet<u64>,
}

impl Worker {
    /// A change to the note `key`: the next part indexes it, the overlay's change times
    /// move, and a pending start-up sync leaves it alone from now on.
    pub(super) fn touch(&mut self, key: u64) {
        self.parts.changed(key);
        let now = Instant::now();
        self.first_change.get_or_insert(now);
        self.last_change = Some(now);
        if let Some(p) = &mut self.sync_pending {
            p.touched.insert(key);
        }
    }

    /// Give up the writer after a failed commit: dropping it discards what it had not
    /// committed (replayed at the next try) and lets go of tantivy's lock.
    pub(super) fn discard_main(&mut self) {
        drop(self.main.take());
    }

    /// Commit the overlay's notes (after what `first` writes: a pending start-up sync) to
    /// the index on disk and empty the overlay. On error the overlay is kept and the
    /// writer given up; the next try replays every change with a new writer. Returns what
    /// `first` returned (the notes it indexed).
    pub(super) fn flush_to_disk(&mut self, first: Option<&FirstWrite>) -> tantivy::Result<usize> {
        if self.changed.is_empty() && first.is_none() {
            return Ok(0);
        }
        if self.main.is_none() {
            self.main = Some(small_writer(&self.index)?);
        }
        let (fields, changed, reader) = (self.fields, &self.changed, &self.main_reader);
        let links = self.links.clone();
        let Some(main) = self.main.as_mut() else {
            return Ok(0);
        };
        let mut write = || -> tantivy::Result<usize> {
            let count = match first {
                Some(first) => first(main)?,
                None => 0,
            };
            for (key, note) in changed {
                main.delete_term(Term::from_field_u64(fields.key, *key));
                if let Some(note) = note {
                    main.add_document(NoteDoc::new(fields, note.clone(), links.clone()))?;
                }
            }
            main.commit()?;
            reader.reload()?;
            Ok(count)
        };
        let count = match write() {
            Ok(count) => count,
            Err(e) => {
                self.discard_main();
                return Err(e);
            }
        };
        self.changed.clear();
        self.first_change = None;
        self.parts.clear();
        Ok(count)
    }
}

/// What a commit on disk writes before the overlay's notes: a pending start-up sync.
type FirstWrite<'a> = dyn Fn(&IndexWriter<NoteDoc>) -> tantivy::Result<usize> + 'a;

impl SearchIndex {
    /// Write the overlay (and a pending start-up sync) to the index on disk and empty
    /// it, unless a failed try's back-off is not over.
    pub(super) fn flush(&self, w: &mut Worker) {
        // What is held is published first: once on disk, it moves `indexed_seq` too.
        if w.unpublished() {
            self.publish_then(w, None, false);
        }
        if !w.retry.due() {
            return;
        }
        let started = Instant::now();
        let pending = w.sync_pending.take();
        let resync = |writer: &IndexWriter<NoteDoc>| {
            let p = pending.as_ref().expect("only asked with a pending sync");
            self.sync(writer, &p.notes, &p.touched, self.links())
        };
        let first: Option<&FirstWrite> = pending.is_some().then_some(&resync);
        match w.flush_to_disk(first) {
            Ok(synced) => {
                if w.retry.succeeded() {
                    tracing::info!("index commit succeeded again; the back-off is over");
                }
                // The disk index is current before the overlay empties: a search that
                // took the old overlay excludes its keys from the disk index, one that
                // takes the empty overlay finds them on disk.
                self.publish_overlay(w);
                // Writes paused (or the overlay was full): the blocks kept for the
                // next part go back.
                crate::memory::release_here();
                // What a failed publish held (notes no part was built for) is
                // searchable on disk now.
                w.publish_failing = false;
                let ms = started.elapsed().as_millis() as u64;
                if let Some(p) = pending {
                    w.merge_later();
                    w.hold(None, p.seq.max(w.deferred_seq));
                    w.deferred_seq = i64::MIN;
                    w.sync_landed = Some((synced, ms));
                } else {
                    let mut st = self.state.lock();
                    st.commits += 1;
                    st.last_commit_ms = Some(ms);
                }
                self.settle(w);
                // A flush opens the writer on disk when it was closed.
                self.state.lock().writers_open = !w.parked();
                self.refresh_counts();
                self.vectors.persist(false);
            }
            Err(e) => {
                w.sync_pending = pending;
                self.commit_failed(w, &e, "index commit failed");
            }
        }
    }

    /// A commit on disk failed: the changes stay, and are tried again after a back-off.
    pub(super) fn commit_failed(&self, w: &mut Worker, e: &tantivy::TantivyError, what: &str) {
        let pause = w.retry.failed();
        tracing::error!(
            error = %e,
            retry_in_s = pause.as_secs(),
            "{what}; the changes are kept and tried again after a back-off"
        );
        self.state.lock().last_error = Some(e.to_string());
    }

    /// Index what differs between the index and `notes`, leaving the keys in `skip`
    /// alone; the number of notes (re)indexed.
    pub(super) fn sync(
        &self,
        writer: &IndexWriter<NoteDoc>,
        notes: &[Arc<Note>],
        skip: &HashSet<u64>,
        text: Arc<dyn LinkText>,
    ) -> tantivy::Result<usize> {
        let indexed = self.indexed_stamps()?;
        let mut keep: HashSet<u64> = HashSet::with_capacity(notes.len());
        let mut count = 0;
        let progress = crate::progress::Progress::start("indexing", "notes", notes.len() as u64);
        for note in notes {
            progress.inc(1);
            if !searchable(note) {
                continue;
            }
            let key = note.key();
            keep.insert(key);
            if skip.contains(&key) {
                continue;
            }
            // Read once: for the stamp, then for the document.
            let said = text.of(note);
            match indexed.get(&key) {
                Some(stamp) if *stamp == indexed_stamp(note, &said) => continue,
                Some(_) => {
                    writer.delete_term(Term::from_field_u64(self.fields.key, key));
                }
                None => {}
            }
            writer.add_document(NoteDoc::new(
                self.fields,
                note.clone(),
                Arc::new(Said(said)),
            ))?;
            count += 1;
        }
        for key in indexed.keys() {
            if !keep.contains(key) && !skip.contains(key) {
                writer.delete_term(Term::from_field_u64(self.fields.key, *key));
            }
        }
        progress.finish();
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_commits_pause_doubling_to_the_cap_and_a_success_resets() {
        let mut b = Backoff::default();
        assert!(b.due() && !b.failing());
        let pauses: Vec<u64> = (0..9).map(|_| b.failed().as_secs()).collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert!(!b.due());
        assert!(b.succeeded(), "the success ends a run of failures");
        assert!(b.due() && !b.succeeded());
        assert_eq!(b.failed(), RETRY_FIRST);
    }
}
