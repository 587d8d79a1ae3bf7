//! Reconcile: take changes found on disk (the startup scan now, the watcher later) into
//! the catalog, the metadata store and the history, as revisions with actor `filesystem`.
//!
//! A batch becomes one history commit; every changed note gets its own revision and
//! `committed_seq`. A file that disappears while a file with the same content appears in
//! the same batch is a rename: the note keeps its `note_id`.

use std::collections::{HashMap, HashSet};
use std::sync::{mpsc, Arc};

use chrono::{DateTime, Utc};

use super::{record, Batch, Entry};
use crate::error::Result;
use crate::history::Change;
use crate::state::{State, WriteLock};
use crate::vault::note::Note;
use crate::vault::observe::Observed;
use crate::vault::path::slug_of;

/// What a reconcile did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Revisions recorded.
    pub revisions: usize,
    /// The history commit, when one was queued.
    pub commit: Option<mpsc::Receiver<Result<crate::history::Written>>>,
}

/// Take `observed` files and `removed` paths into every store, as one batch recorded by
/// [`record`] with `actor`. `whole_vault`, when given, is what the commit carries instead
/// (the first start records the whole vault). Changed files go to history with the bytes
/// that were observed, never re-read later: a write that lands before the commit is
/// written must not leak into it. Under the write lock (`write`).
pub fn reconcile(
    state: &State,
    write: &WriteLock<'_>,
    observed: Vec<Observed>,
    removed: Vec<String>,
    actor: &str,
    subject: &str,
    whole_vault: Option<Vec<Change>>,
) -> Result<Outcome> {
    reconcile_with_files(
        state,
        write,
        observed,
        removed,
        Vec::new(),
        actor,
        subject,
        whole_vault,
    )
}

/// [`reconcile`], with attachment changes recorded in the same batch (the start-up scan:
/// one commit of the whole vault holds notes and attachments).
#[allow(
    clippy::too_many_arguments,
    reason = "the write lock is one more argument: the proof it is held"
)]
pub fn reconcile_with_files(
    state: &State,
    write: &WriteLock<'_>,
    observed: Vec<Observed>,
    removed: Vec<String>,
    files: Vec<crate::record::FileEntry>,
    actor: &str,
    subject: &str,
    whole_vault: Option<Vec<Change>>,
) -> Result<Outcome> {
    // Sized once: grown by doubling, a first start's list of the whole vault held a
    // third more than it needed, twice over while it was copied.
    let mut entries = Vec::with_capacity(observed.len() + removed.len());
    let mut deletes = Vec::new();
    {
        let catalog = state.catalog.read();
        // What left, by content hash, so a rename keeps its note id.
        let removed: HashSet<&str> = removed.iter().map(|rel| slug_of(rel)).collect();
        let mut gone: HashMap<String, Vec<Arc<Note>>> = HashMap::new();
        for slug in &removed {
            if let Some(note) = catalog.get(slug) {
                gone.entry(note.content_hash.clone())
                    .or_default()
                    .push(note.clone());
            }
        }
        let mut found_again = HashSet::new();
        for obs in observed {
            let slug = slug_of(&obs.rel);
            let previous = catalog.get(slug).filter(|_| !removed.contains(slug));
            let (from, created_at, kind) = match previous {
                Some(prev) if prev.content_hash == obs.content_hash => continue,
                Some(prev) => (Some(prev.clone()), prev.created_at, "update"),
                None => match gone
                    .get_mut(&obs.content_hash)
                    .and_then(Vec::pop)
                    .or_else(|| state.recently_removed.take(&obs.content_hash, &obs.rel))
                {
                    Some(moved) => {
                        found_again.insert(moved.note_id.clone());
                        let created = moved.created_at;
                        // Back at its own path (deleted, then created): an update.
                        let kind = if moved.path == obs.rel {
                            "update"
                        } else {
                            "move"
                        };
                        (Some(moved), created, kind)
                    }
                    None => (None, DateTime::<Utc>::from(obs.created), "create"),
                },
            };
            entries.push(Entry {
                note_id: from
                    .as_ref()
                    .map_or_else(|| uuid::Uuid::now_v7().to_string(), |n| n.note_id.clone()),
                version_id: uuid::Uuid::now_v7().to_string(),
                from,
                to: Some(obs),
                bytes: None,
                kind: kind.to_string(),
                created_at,
            });
        }
        // What left and was not found elsewhere is a delete.
        for note in gone.into_values().flatten() {
            if found_again.contains(&note.note_id) {
                continue;
            }
            let version_id = uuid::Uuid::now_v7().to_string();
            deletes.push((note.clone(), version_id.clone()));
            entries.push(Entry {
                note_id: note.note_id.clone(),
                version_id,
                created_at: note.created_at,
                from: Some(note),
                to: None,
                bytes: None,
                kind: "delete".to_string(),
            });
        }
    }
    let recorded = record(
        state,
        write,
        Batch {
            actor,
            subject: subject.to_string(),
            entries,
            files,
            whole_vault,
            durable: false,
            marks: Vec::new(),
        },
    )?;
    // Kept a moment: the other half of a move may reach the next batch.
    for (note, version_id) in deletes {
        state.recently_removed.put(&note, &version_id);
    }
    Ok(Outcome {
        revisions: recorded.entries.len(),
        commit: recorded.commit,
    })
}
