//! What the writer thread makes visible: segments merged after the start-up sync, a
//! commit published to searchers, and the in-memory overlay of changes not yet committed.

use std::time::Instant;

use super::*;

impl SearchIndex {
    /// [`MERGE_AFTER`] the start-up sync, merge the index's segments into one, in the
    /// background (tantivy's merge threads; a thread of ours waits and tells the writer).
    /// A first start leaves a large vault in several segments, and a search looks up and
    /// scores every term once per segment (the figure: benches/README.md, "one segment").
    /// Changes go on meanwhile (tantivy applies their deletes to the merged segment).
    pub(super) fn merge_segments(&self, w: &mut Worker) {
        self.start_merge(w);
        // Shown until the merge ends (`Msg::Merged`): searches are slower meanwhile.
        self.state.lock().merging = w.merging;
    }

    fn start_merge(&self, w: &mut Worker) {
        let Some(main) = w.main.as_mut() else {
            return;
        };
        let ids = match w.index.searchable_segment_ids() {
            Ok(ids) if ids.len() > 1 => ids,
            _ => return,
        };
        let Some(tx) = self.tx.lock().clone() else {
            return;
        };
        let merge = main.merge(&ids);
        w.merging = true;
        let segments = ids.len();
        let wait = move || {
            let started = Instant::now();
            match merge.wait() {
                Ok(_) => {
                    tracing::info!(
                        segments,
                        ms = started.elapsed().as_millis() as u64,
                        "index segments merged into one"
                    );
                    let _ = tx.send(Msg::Merged);
                }
                // Stopped (a shutdown) or failed: the segments stay as they were; the
                // writer hears of it all the same (it waits for the merge to close).
                Err(e) => {
                    tracing::debug!(error = %e, "index segments not merged");
                    let _ = tx.send(Msg::Merged);
                }
            }
        };
        if let Err(e) = std::thread::Builder::new()
            .name("index-merge".into())
            .spawn(wait)
        {
            tracing::warn!(error = %e, "cannot wait for the index merge");
        }
    }

    /// Make the held changes searchable: build the overlay's next part (when notes
    /// changed), publish the parts, [`SearchIndex::settle`], then merge parts. `started`:
    /// when the
    /// batch being published began (for the debug log).
    pub(super) fn publish(&self, w: &mut Worker, started: Option<Instant>) {
        self.publish_then(w, started, true)
    }

    /// [`SearchIndex::publish`]; without the merge when the overlay goes to disk next
    /// (`merge` false: the parts are dropped then).
    pub(super) fn publish_then(&self, w: &mut Worker, started: Option<Instant>, merge: bool) {
        let started = started.unwrap_or_else(Instant::now);
        let mut built = false;
        if w.parts.dirty() {
            w.last_publish = Some(Instant::now());
            if let Err(e) = w.parts.build(&w.changed) {
                // Held, and tried again when writes pause (`flush`).
                if !w.publish_failing {
                    tracing::error!(error = %e, "index update failed; the changes are tried again");
                }
                w.publish_failing = true;
                self.state.lock().last_error = Some(e.to_string());
                return;
            }
            w.publish_failing = false;
            self.publish_overlay(w);
            built = true;
        }
        tracing::debug!(
            us = started.elapsed().as_micros() as u64,
            changes = w.held.len(),
            "index batch"
        );
        self.settle(w);
        // Searches that waited have their change; the merge comes after.
        if built && merge {
            match w.parts.merge(&w.changed) {
                Ok(0) => {}
                Ok(_) => self.publish_overlay(w),
                Err(e) => tracing::warn!(error = %e, "the overlay's parts were not merged"),
            }
        }
    }

    /// The held changes are searchable (from the overlay or the disk index): they leave
    /// `pending`, and `indexed_seq` reaches the highest held seq. A start-up sync that
    /// landed is marked done in the same step: a search or status that sees its seq sees
    /// its notes counted as indexed and its documents, and none sees one without the
    /// other.
    pub(super) fn settle(&self, w: &mut Worker) {
        let mut held_seq = std::mem::replace(&mut w.held_seq, i64::MIN);
        let held = std::mem::take(&mut w.held);
        if held.is_empty() && held_seq == i64::MIN {
            return;
        }
        if w.sync_pending.is_some() {
            // The notes the start-up sync has not indexed are in no index a search reads:
            // `indexed_seq` waits for it.
            w.deferred_seq = w.deferred_seq.max(held_seq);
            held_seq = i64::MIN;
        }
        // Counted first: the documents are searchable already (the reader reloaded).
        self.refresh_counts();
        let landed = w.sync_landed.take();
        {
            let mut st = self.state.lock();
            for (id, seq) in &held {
                if st.pending.get(id).is_some_and(|s| s <= seq) {
                    st.pending.remove(id);
                }
            }
            st.indexed_seq = st.indexed_seq.max(held_seq);
            if let Some((n, ms)) = landed {
                st.sync_remaining = 0;
                st.synced_notes = Some(n);
                st.sync_ms = Some(ms);
                st.merging = w.merge_due();
                st.commits += 1;
                st.last_commit_ms = Some(ms);
            }
        }
        self.seq_tx.send_if_modified(|s| {
            let changed = held_seq > *s;
            *s = (*s).max(held_seq);
            changed
        });
        if let Some((n, ms)) = landed {
            tracing::info!(notes = n, ms, "search index up to date");
            crate::memory::release_free_memory();
        }
    }

    pub(super) fn publish_overlay(&self, w: &Worker) {
        let overlay = if w.changed.is_empty() {
            Overlay::default()
        } else {
            w.parts.overlay(&w.changed)
        };
        *self.overlay.write() = Arc::new(overlay);
    }
}
