//! A warm start after a clean stop: the catalog is built from the stored notes and the
//! scan cache, without walking the folder, and serving begins. The verify that follows
//! every such start (the full rescan) walks, stats and reads every file and records what
//! changed while the daemon was stopped. Meanwhile a read checks its file's stamp
//! (`record::refresh`); a read of a file the catalog does not know or of a note whose
//! file is gone, and every write, wait for the verify (a rename made while stopped keeps
//! its id); lists and search show the changes made while stopped once the verify is done
//! (`start_scan.verifying` in `GET /v1/index-status`).
//!
//! Trusted only when nothing can be half done: the last daemon stopped cleanly (no write
//! under way, so no temp file of ours in the folder) at the seq the store holds now, no
//! write intent is left, history and index are current, and the cache loads.

use std::time::Instant;

use super::rebuild::{rebuild, reread, Rebuilt};
use super::*;
use crate::state::WriteLock;
use crate::storage::rows::NoteRow;
use crate::vault::scan_cache::Entry;

/// The setting a clean stop leaves: the committed seq it stopped at.
const CLEAN_STOP: &str = "stopped_cleanly";

/// Left by a stop once nothing records into the state any more.
pub(super) fn mark_clean_stop(state: &State) {
    let seq = state.committed_seq().to_string();
    if let Err(e) = state.meta.set_setting(CLEAN_STOP, &seq) {
        tracing::warn!(error = %e.message, "cannot note the clean stop; the next start walks the vault");
    }
}

/// Whether the last daemon stopped cleanly at the seq stored now. The mark is taken: a
/// crash of this daemon leaves none (a mark that cannot be cleared is not trusted).
pub(super) fn take_clean_stop(state: &State) -> bool {
    let Ok(Some(mark)) = state.meta.setting(CLEAN_STOP) else {
        return false;
    };
    if mark.is_empty() || state.meta.set_setting(CLEAN_STOP, "").is_err() {
        return false;
    }
    mark == state.committed_seq().to_string()
}

/// The start from the stored notes and the scan cache; `false` (nothing done) when the
/// cache is missing, damaged, from another build or empty: the start walks the vault
/// then. Files left out of every answer are listed by the verify; a temp file of a write
/// a crash cut short, which an earlier walked start could not clear, waits for the next
/// start that walks (after a crash) or `notevault check --repair`.
pub(super) fn start(
    state: &State,
    write: &WriteLock<'_>,
    started: Instant,
) -> anyhow::Result<bool> {
    let (chunks, stored) = rayon::join(
        || ScanCache::load_chunks(state.state_dir()),
        || {
            state.meta.all_notes().map(|mut rows| {
                if !rows.is_sorted_by(|a, b| a.path <= b.path) {
                    rows.par_sort_unstable_by(|a, b| a.path.cmp(&b.path));
                }
                rows
            })
        },
    );
    let Some(chunks) = chunks.filter(|c| !c.is_empty()) else {
        return Ok(false);
    };
    let segments = segments(stored?, &chunks);
    let loaded = started.elapsed();
    // Attachments as stored: the verify observes their files.
    {
        let rows = state.meta.all_attachments()?;
        let mut attachments = state.attachments.write();
        for row in rows {
            attachments.insert(record::attachment_of(row));
        }
    }
    // Each segment of rows meets its chunk of the cache (both by path), side by side. A
    // note the cache vouches for is recalled unread; one it does not (written since the
    // cache was) is read now.
    let rebuilt: Vec<Vec<(Rebuilt, bool)>> = segments
        .into_par_iter()
        .zip(chunks)
        .map(|(rows, entries)| {
            let mut entries = entries.into_iter().peekable();
            rows.into_iter()
                .map(|row| {
                    while entries
                        .next_if(|(p, _)| p.as_str() < row.path.as_str())
                        .is_some()
                    {}
                    let entry = entries.next_if(|(p, _)| *p == row.path).map(|(_, e)| e);
                    take(state, row, entry)
                })
                .collect()
        })
        .collect();
    let rebuilt_at = started.elapsed();
    let (mut notes, mut changed, mut removed, mut excluded) = (
        Vec::with_capacity(rebuilt.iter().map(Vec::len).sum()),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    let mut recalled = 0;
    for (r, unread) in rebuilt.into_iter().flatten() {
        recalled += usize::from(unread);
        notes.push(r.note);
        changed.extend(r.changed.map(|b| *b));
        removed.extend(r.removed);
        excluded.extend(r.excluded);
    }
    let total = notes.len();
    {
        let mut catalog = state.catalog.write();
        catalog.insert_all(notes);
        catalog.excluded = excluded;
    }
    let cataloged = started.elapsed();
    // Notes read now that changed since they were recorded (the cache had an older
    // version, and so had the store).
    let outcome = record::reconcile::reconcile_with_files(
        state,
        write,
        changed,
        removed,
        Vec::new(),
        "filesystem",
        "Record changes made while notevault was stopped",
        None,
    )?;
    // The verify always follows (it also finds the files created or removed while
    // stopped); it starts the search index.
    state.unread.begin(total - recalled, recalled, false);
    tracing::info!(
        notes = total,
        recalled,
        revisions = outcome.revisions,
        // No walk: `scan_ms` is the load of the cache and the stored notes.
        walked = false,
        scan_ms = loaded.as_millis() as u64,
        rebuilt_ms = rebuilt_at.as_millis() as u64,
        catalog_ms = cataloged.as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "vault scanned"
    );
    Ok(true)
}

/// The stored rows (by path) cut where each chunk of the cache after the first begins:
/// a segment for each chunk.
fn segments(mut rows: Vec<NoteRow>, chunks: &[Vec<(String, Entry)>]) -> Vec<Vec<NoteRow>> {
    let cuts: Vec<usize> = chunks[1..]
        .iter()
        .map(|c| rows.partition_point(|r| r.path < c[0].0))
        .collect();
    // From the last cut back: each split moves only its own segment.
    let mut segments: Vec<Vec<NoteRow>> = cuts.iter().rev().map(|&at| rows.split_off(at)).collect();
    segments.push(rows);
    segments.reverse();
    segments
}

/// The catalog entry of a stored row, from the cache `entry` of its path when there is
/// one (recalled: the bool), else from the file read now.
fn take(state: &State, row: NoteRow, entry: Option<Entry>) -> (Rebuilt, bool) {
    let mut excluded = Vec::new();
    let recalled = entry.and_then(|e| e.into_observed(row.path.clone()));
    let unread = recalled.is_some();
    let found = match recalled {
        Some(obs) => Some(obs),
        None => reread(state, &row.path, &mut excluded),
    };
    let mut r = rebuild(state, row, found, unread);
    r.excluded = r.excluded.or(excluded.pop());
    let recalled = unread && !r.reread;
    (r, recalled)
}
