//! Reconcile: take changes found on disk (the startup scan now, the watcher later) into
//! the catalog, the metadata store and the history, as revisions with actor `filesystem`.
//!
//! A batch becomes one history commit; every changed note gets its own revision and
//! `committed_seq`. A file that disappears while a file with the same content appears in
//! the same batch is a rename: the note keeps its `note_id`.

use std::collections::HashMap;
use std::sync::mpsc;

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::history::{Change, CommitRequest, Content};
use crate::meta::{NoteRow, RevisionRow};
use crate::service::{timestamp, Service};
use crate::vault::catalog::{Note, Visibility};
use crate::vault::path::slug_of;
use crate::watch::scan::Observed;

/// What a reconcile did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Revisions recorded.
    pub revisions: usize,
    /// The history commit, when one was queued.
    pub commit: Option<mpsc::Receiver<Result<crate::history::Written>>>,
}

/// Notes that left the folder in the last few seconds, by content hash, so that a move
/// whose halves reach two batches (or a delete then create) keeps its note id.
#[derive(Default)]
pub struct RecentlyRemoved {
    notes: parking_lot::Mutex<Vec<(std::time::Instant, String, Note)>>,
}

/// How long a removed note can still be found again by its content.
const REMEMBER: std::time::Duration = std::time::Duration::from_secs(10);

impl RecentlyRemoved {
    fn put(&self, note: &Note, delete_version: &str) {
        let mut notes = self.notes.lock();
        notes.retain(|(at, _, _)| at.elapsed() < REMEMBER);
        let mut note = note.clone();
        note.version_id = delete_version.to_string();
        notes.push((std::time::Instant::now(), note.content_hash.clone(), note));
    }

    fn take(&self, content_hash: &str) -> Option<std::sync::Arc<Note>> {
        let mut notes = self.notes.lock();
        notes.retain(|(at, _, _)| at.elapsed() < REMEMBER);
        let i = notes.iter().position(|(_, h, _)| h == content_hash)?;
        Some(std::sync::Arc::new(notes.remove(i).2))
    }
}

/// Build the catalog entry of an observed file.
pub fn note_from(
    observed: Observed,
    note_id: String,
    version_id: String,
    created_at: DateTime<Utc>,
    observed_at: DateTime<Utc>,
) -> Note {
    let facts = observed.facts;
    let slug = slug_of(&observed.rel).to_string();
    let file_name = slug.rsplit('/').next().unwrap_or(&slug).to_string();
    let mut warnings = Vec::new();
    if let Some(why) = &facts.frontmatter_error {
        warnings.push(format!("{why}; the frontmatter was treated as absent"));
    }
    if let Some(why) = crate::vault::path::unstorable(&observed.rel) {
        warnings.push(format!(
            "history.git cannot keep this file ({why}); it is served, but its revisions' bytes are not versioned; rename it to keep its history"
        ));
    }
    if facts.lossy_utf8 {
        warnings
            .push("the file is not valid UTF-8; invalid bytes were replaced with U+FFFD".into());
    }
    Note {
        note_id,
        title: facts.title.unwrap_or(file_name),
        status: facts.status.unwrap_or_else(|| "active".into()),
        visibility: Visibility::Standard,
        tags: facts.tags,
        frontmatter: facts.frontmatter,
        aliases: facts.aliases,
        links: facts.links,
        warnings,
        version_id,
        content_hash: observed.content_hash,
        size: observed.size,
        created_at,
        updated_at: observed.mtime.into(),
        observed_at,
        content: observed.content,
        path: observed.rel,
        slug,
    }
}

/// What a history commit records of an observed file: the bytes the scan kept, else the
/// file itself (over 10 MiB; see [`Content::File`]).
pub fn recorded(root: &std::path::Path, obs: &Observed) -> Change {
    let content = match &obs.content {
        Some(bytes) => Content::Bytes(bytes.clone()),
        None => Content::File(root.join(&obs.rel)),
    };
    Change {
        path: obs.rel.clone(),
        content: Some(content),
    }
}

/// Take `observed` files and `removed` paths into every store, as one batch.
/// `history` is more for the commit to carry (the first bootstrap records the whole
/// vault). Changed files go to history with the bytes that were observed, never re-read
/// later: a write that lands before the commit is written must not leak into it.
pub fn reconcile(
    svc: &Service,
    observed: Vec<Observed>,
    removed: Vec<String>,
    actor: &str,
    subject: &str,
    history: Vec<Change>,
) -> Result<Outcome> {
    let now = Utc::now();
    let now_s = timestamp(now);
    let mut catalog = svc.catalog.write();

    // Removals first, remembered by content hash so a rename keeps its note id.
    let mut gone: HashMap<String, Vec<std::sync::Arc<Note>>> = HashMap::new();
    for rel in &removed {
        if let Some(note) = catalog.remove(slug_of(rel)) {
            gone.entry(note.content_hash.clone())
                .or_default()
                .push(note);
        }
    }

    let mut revisions = Vec::new();
    let mut rows = Vec::new();
    let mut changes = Vec::new();
    let mut seq = svc.committed_seq();
    let mut to_index = Vec::new();
    let full_history = !history.is_empty();
    changes.extend(history);
    for obs in observed {
        let slug = slug_of(&obs.rel);
        let previous = catalog.get(slug).cloned();
        let (note_id, prev_version, created_at, kind) = match &previous {
            Some(prev) if prev.content_hash == obs.content_hash => continue,
            Some(prev) => (
                prev.note_id.clone(),
                Some(prev.version_id.clone()),
                prev.created_at,
                "update",
            ),
            None => match gone
                .get_mut(&obs.content_hash)
                .and_then(Vec::pop)
                .or_else(|| svc.recently_removed.take(&obs.content_hash))
            {
                Some(moved) => (
                    moved.note_id.clone(),
                    Some(moved.version_id.clone()),
                    moved.created_at,
                    "move",
                ),
                None => (
                    uuid::Uuid::now_v7().to_string(),
                    None,
                    DateTime::<Utc>::from(obs.created),
                    "create",
                ),
            },
        };
        seq += 1;
        let version_id = uuid::Uuid::now_v7().to_string();
        let recorded = (!full_history).then(|| recorded(&svc.paths.root, &obs));
        let note = note_from(obs, note_id, version_id, created_at, now);
        revisions.push(RevisionRow {
            seq,
            version_id: note.version_id.clone(),
            note_id: note.note_id.clone(),
            path: note.path.clone(),
            prev_version_id: prev_version,
            content_hash: Some(note.content_hash.clone()),
            actor: actor.to_string(),
            kind: kind.to_string(),
            created_at: now_s.clone(),
            commit_id: None,
        });
        rows.push(NoteRow {
            note_id: note.note_id.clone(),
            path: note.path.clone(),
            version_id: note.version_id.clone(),
            content_hash: note.content_hash.clone(),
            created_at: timestamp(note.created_at),
            observed_at: now_s.clone(),
        });
        changes.extend(recorded);
        let slug = note.slug.clone();
        catalog.insert(note);
        if let Some(note) = catalog.get(&slug) {
            to_index.push((note.clone(), seq));
        }
    }
    // What was removed and not re-found elsewhere is a delete.
    let mut deleted_ids = Vec::new();
    let mut removed_from_index = Vec::new();
    for note in gone.into_values().flatten() {
        if catalog.get_by_id(&note.note_id).is_some() {
            continue;
        }
        seq += 1;
        let version_id = uuid::Uuid::now_v7().to_string();
        // Kept a moment: the other half of a move may reach the next batch.
        svc.recently_removed.put(&note, &version_id);
        revisions.push(RevisionRow {
            seq,
            version_id,
            note_id: note.note_id.clone(),
            path: note.path.clone(),
            prev_version_id: Some(note.version_id.clone()),
            content_hash: None,
            actor: actor.to_string(),
            kind: "delete".into(),
            created_at: now_s.clone(),
            commit_id: None,
        });
        deleted_ids.push(note.note_id.clone());
        removed_from_index.push((note.note_id.clone(), seq));
    }
    // A moved note's old path leaves the tree too (a whole tree has none to leave).
    if !full_history {
        for rel in &removed {
            changes.push(Change {
                path: rel.clone(),
                content: None,
            });
        }
    }
    if revisions.is_empty() && !full_history {
        return Ok(Outcome::default());
    }
    svc.meta.record(&revisions, &rows, &deleted_ids)?;
    svc.set_committed_seq(seq);
    drop(catalog);
    for (note, seq) in to_index {
        svc.index.upsert(note, seq);
    }
    for (note_id, seq) in removed_from_index {
        svc.index.remove(&note_id, seq);
    }

    let mut trailers = Vec::new();
    if let (Some(first), Some(last)) = (revisions.first(), revisions.last()) {
        let range = if first.seq == last.seq {
            first.seq.to_string()
        } else {
            format!("{}-{}", first.seq, last.seq)
        };
        trailers.push(("Notevault-Seq".to_string(), range));
        if revisions.len() == 1 {
            trailers.push(("Notevault-Version".to_string(), first.version_id.clone()));
        }
    }
    if full_history {
        // The whole vault as it is now: every change up to `seq` is accounted for, in this
        // commit or an earlier one, or known to be missing.
        trailers.push(("Notevault-Through".to_string(), seq.to_string()));
    }
    let commit = svc.history.commit(CommitRequest {
        subject: subject.to_string(),
        actor: actor.to_string(),
        changes,
        trailers,
        // Every recorded revision has a commit that carries it, also when the tree did
        // not change (the bytes were already in history): a read of it must find them.
        allow_empty: !revisions.is_empty() || full_history,
        replace: full_history,
    });
    Ok(Outcome {
        revisions: revisions.len(),
        commit: Some(commit),
    })
}
