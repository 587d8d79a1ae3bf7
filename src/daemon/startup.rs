//! The start-up scan: what changed in the folder while the daemon was stopped, settled
//! against the metadata store (by path, then by content for renames) and recorded; the
//! scan cache and the rebuild of what it cannot vouch for.

use super::rebuild::{rebuild, reread, Rebuilt};
use super::*;

/// The start-up scan; what it read, when the scan cache is to be written from it (no
/// rescan follows).
pub(super) fn startup_scan(state: &State) -> anyhow::Result<Option<Vec<Observed>>> {
    // The watcher is already running: it waits for this lock before reconciling.
    let write = state.lock();
    let started = std::time::Instant::now();
    let history_status = state.history.status();
    let first_history = history_status.head.is_none();
    // History is behind the revisions (it was stalled, or the daemon stopped before a
    // commit was written): record the whole vault as it is now, and find out which of
    // the revisions in between that commit holds.
    // A HEAD moved back by a repair (`history::repair`) counts as behind even when no
    // commit was left.
    let behind = (!first_history || history_status.repaired_at_start)
        && history_status.head_seq < state.committed_seq();
    // A file whose stamp is the one the last full scan saw is taken from the scan cache
    // unread, unless the whole vault is to be recorded (its bytes go into history now)
    // or indexed (a new or rebuilt index: `notevault reindex`).
    let use_cache = !(first_history || behind) && state.index.state().rebuilt.is_none();
    // After a clean stop, the start trusts the cache and the verify walks the vault.
    let clean = super::trusted::take_clean_stop(state);
    if use_cache
        && clean
        && state.meta.intents()?.is_empty()
        && super::trusted::start(state, &write, started)?
    {
        return Ok(None);
    }
    // Side by side: the walk that lists the notes (with a stat of each when the cache is
    // to be used) and the attachments, the load of the scan cache and of the stored notes.
    let want = Want {
        notes: true,
        note_stats: use_cache,
        attachments: true,
    };
    let (mut walked, (cache, stored)) = rayon::join(
        || walk(&state.paths, want),
        || {
            rayon::join(
                || {
                    use_cache
                        .then(|| ScanCache::load(state.state_dir()))
                        .flatten()
                },
                || state.meta.all_notes(),
            )
        },
    );
    let stored = stored?;
    // Temp files of interrupted writes, before anything is read: a note swapped out by a
    // write that a crash cut short goes back to its path, or beside it (`fsio::Leftover`),
    // and then the walk is taken again, so it lists the files as they are now.
    let leftovers = resolve_leftovers(state, &walked.leftovers);
    if leftovers.moved > 0 {
        walked = walk(&state.paths, want);
    }
    let listed_at = started.elapsed();
    let listed = std::mem::take(&mut walked.attachments);
    let mut file_excluded = std::mem::take(&mut walked.attachments_excluded);
    let found = scan::scan_with(&state.paths, walked, cache);
    let scanned = started.elapsed();
    let mut recalled = found.recalled;
    let found_count = found.observed.len();
    // Without a watcher no rescan follows the start: the cache is written from this scan.
    let cache_from_scan: Option<Vec<Observed>> =
        (!state.config.watch && recalled.is_empty()).then(|| found.observed.clone());
    let gap = if behind {
        tracing::warn!(
            history_seq = history_status.head_seq,
            committed_seq = state.committed_seq(),
            "history is behind the recorded revisions; recording the vault as found"
        );
        state.meta.revisions_after(history_status.head_seq)?
    } else {
        Vec::new()
    };
    // Attachments: the stored facts go into the catalog, and each file on disk is
    // observed in parallel, re-hashed only when its size, mtime or inode changed.
    let stored_files: HashMap<String, crate::vault::attachments::Attachment> = state
        .meta
        .all_attachments()?
        .into_iter()
        .map(|row| (row.path.clone(), record::attachment_of(row)))
        .collect();
    let (found_files, bad) =
        crate::vault::attachments::observe_all(&state.paths.root, &listed, &stored_files);
    file_excluded.extend(bad);
    let gone_files: Vec<String> = {
        let on_disk: std::collections::HashSet<&str> = listed.iter().map(String::as_str).collect();
        stored_files
            .keys()
            .filter(|p| !on_disk.contains(p.as_str()))
            .cloned()
            .collect()
    };
    {
        let mut attachments = state.attachments.write();
        for a in stored_files.into_values() {
            attachments.insert(a);
        }
        attachments.excluded = file_excluded;
    }
    let mut history: Vec<Change> = if first_history || behind {
        found
            .observed
            .iter()
            .map(|o| record::history_change(state, o, None))
            .collect()
    } else {
        Vec::new()
    };
    if first_history || behind {
        history.extend(
            found_files
                .iter()
                .map(|a| record::file_change(state, &a.path, true)),
        );
    }
    let files = record::files::changes(state, found_files, &gone_files);
    // Rebuild the catalog as stored; what differs goes through reconcile. Each stored
    // row meets its file's observation in one merge of the two lists in path order, and
    // the notes are built in parallel.
    let mut stored = stored;
    let mut observed = found.observed;
    rayon::join(
        || stored.par_sort_unstable_by(|a, b| a.path.cmp(&b.path)),
        || observed.par_sort_unstable_by(|a, b| a.rel.cmp(&b.rel)),
    );
    let (pairs, unknown) = pair_by_path(stored, observed);
    let rebuilt: Vec<Rebuilt> = pairs
        .into_par_iter()
        .map(|(row, found_now)| {
            let unread = found_now
                .as_ref()
                .is_some_and(|o| recalled.contains(&o.rel));
            rebuild(state, row, found_now, unread)
        })
        .collect();
    let mut removed = Vec::new();
    let mut changed = Vec::new();
    let mut excluded = found.excluded;
    let mut notes = Vec::with_capacity(rebuilt.len());
    for r in rebuilt {
        if r.reread {
            recalled.remove(&r.note.path);
        }
        notes.push(r.note);
        changed.extend(r.changed.map(|b| *b));
        removed.extend(r.removed);
        excluded.extend(r.excluded);
    }
    // Files the store has never seen (one recalled from the cache is read now).
    for obs in unknown {
        let obs = if recalled.remove(&obs.rel) {
            reread(state, &obs.rel, &mut excluded)
        } else {
            Some(obs)
        };
        changed.extend(obs);
    }
    {
        let mut catalog = state.catalog.write();
        catalog.insert_all(notes);
        catalog.excluded = excluded;
    }
    let cataloged = started.elapsed();
    // Writes under way when the daemon stopped: what landed is recorded as those
    // writes, before the rest is taken as an editor's changes.
    crate::writes::recover::resolve_intents(
        state,
        &write,
        &mut changed,
        &mut removed,
        &leftovers.unresolved,
    )?;
    let subject = if first_history {
        "Record the vault as found"
    } else if behind {
        "Record the vault as found (history was behind)"
    } else {
        "Record changes made while notevault was stopped"
    };
    let whole_vault = (first_history || behind).then_some(history);
    let outcome = record::reconcile::reconcile_with_files(
        state,
        &write,
        changed,
        removed,
        files,
        "filesystem",
        subject,
        whole_vault,
    )?;
    if behind {
        settle_gap(state, gap, outcome.commit);
    }
    // The index catches up with the catalog in the background; every later change
    // follows it in order. When notes were recalled unread, the verify starts it once
    // their bytes are in (until then, searches answer from the index as it was stored).
    state
        .unread
        .begin(found_count - recalled.len(), recalled.len(), true);
    if first_history || behind {
        // Recording the whole vault built rows for every note; hand that memory back
        // before the index build takes its share.
        release_free_memory();
    }
    if recalled.is_empty() {
        state.start_index(state.committed_seq());
    }
    tracing::info!(
        notes = state.catalog.read().len(),
        recalled = recalled.len(),
        revisions = outcome.revisions,
        listed_ms = listed_at.as_millis() as u64,
        scan_ms = scanned.as_millis() as u64,
        catalog_ms = cataloged.as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "vault scanned"
    );
    Ok(cache_from_scan)
}

/// After history was found behind at start: the revisions recorded while it was
/// behind that are the current version of their note are held by the commit of the
/// vault as found (their commit id is stored); the others' bytes are gone, and are
/// counted in the history status. Runs when that commit is written.
fn settle_gap(
    state: &State,
    gap: Vec<crate::storage::rows::RevisionRow>,
    commit: Option<std::sync::mpsc::Receiver<crate::error::Result<crate::history::Written>>>,
) {
    let current: Vec<i64> = {
        let catalog = state.catalog.read();
        gap.iter()
            .filter(|r| {
                catalog
                    .get_by_id(&r.note_id)
                    .is_some_and(|n| n.version_id == r.version_id && n.path == r.path)
            })
            .map(|r| r.seq)
            .collect()
    };
    let lost = gap
        .iter()
        .filter(|r| r.content_hash.is_some() && !current.contains(&r.seq))
        .count() as u64;
    let commit_id = commit
        .and_then(|rx| rx.recv().ok())
        .and_then(|r| r.ok())
        .and_then(|w| w.id);
    match commit_id {
        Some(id) => {
            if let Err(e) = state.meta.set_commit_ids(&current, &id) {
                tracing::warn!(error = %e.message, "cannot link revisions to the commit of the vault as found");
            }
            if lost > 0 {
                tracing::warn!(
                    revisions = lost,
                    "revisions recorded while history was behind have no bytes in history"
                );
                state.history.note_lost_revisions(lost);
            }
        }
        None => tracing::warn!("the commit of the vault as found failed; it is retried"),
    }
}

/// Pair each stored row with the observation of its path (both sorted by path); the
/// observations no row names come back apart.
fn pair_by_path(
    rows: Vec<crate::storage::rows::NoteRow>,
    observed: Vec<Observed>,
) -> (
    Vec<(crate::storage::rows::NoteRow, Option<Observed>)>,
    Vec<Observed>,
) {
    let mut pairs = Vec::with_capacity(rows.len());
    let mut unknown = Vec::new();
    let mut observed = observed.into_iter().peekable();
    for row in rows {
        while observed
            .peek()
            .is_some_and(|o| o.rel.as_str() < row.path.as_str())
        {
            unknown.extend(observed.next());
        }
        let found = observed.next_if(|o| o.rel == row.path);
        pairs.push((row, found));
    }
    unknown.extend(observed);
    (pairs, unknown)
}
