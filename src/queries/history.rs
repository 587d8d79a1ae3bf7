//! A note's history: its revisions (also of a deleted note) and a revision's bytes.

use crate::error::{Error, Reason, Result};
use crate::record::refresh::find;
use crate::state::State;

/// A note's revisions.
#[derive(Debug, Clone)]
pub struct NoteHistory {
    pub note_id: String,
    pub slug: String,
    /// `None` when the note is deleted.
    pub current_version_id: Option<String>,
    /// Oldest first.
    pub revisions: Vec<crate::storage::rows::RevisionRow>,
}

/// The history of the note `key` names, also of a deleted note (found by its id or
/// the path it last had): its id, slug, current version (`None` when deleted) and
/// revisions, oldest first.
pub fn history_of(state: &State, key: &str) -> Result<NoteHistory> {
    history_with(state, key, true)
}

/// [`State::history_of`] without loading the revisions of a note that exists (a
/// caller that pages them from the store itself).
pub fn history_with(state: &State, key: &str, load: bool) -> Result<NoteHistory> {
    let (note_id, slug, current) = match find(state, key) {
        Ok(note) => (
            note.note_id.clone(),
            note.slug().to_string(),
            Some(note.version_id.clone()),
        ),
        Err(e) if e.reason == crate::error::Reason::NOTE_NOT_FOUND => {
            let mut by_id = state.meta.revisions_of(key)?;
            if by_id.is_empty() {
                let rel = if crate::vault::path::is_note_name(key) {
                    key.to_string()
                } else {
                    format!("{key}.md")
                };
                if let Some(r) = state.meta.latest_revision_at(&rel)? {
                    by_id = state.meta.revisions_of(&r.note_id)?;
                }
            }
            let last = by_id.last().ok_or_else(|| Error::not_found(key))?;
            let slug = crate::vault::path::slug_of(&last.path).to_string();
            let note_id = last.note_id.clone();
            return Ok(NoteHistory {
                note_id,
                slug,
                current_version_id: None,
                revisions: by_id,
            });
        }
        Err(e) => return Err(e),
    };
    let revisions = if load {
        state.meta.revisions_of(&note_id)?
    } else {
        Vec::new()
    };
    Ok(NoteHistory {
        note_id,
        slug,
        current_version_id: current,
        revisions,
    })
}

/// The bytes of a revision (`None` for a delete). A revision whose bytes are not in
/// history is an error that says so, never an empty or a wrong content: left out of
/// history, or lost while history was behind, is `REVISION_CONTENT_MISSING`; not
/// written yet (history is catching up or retrying) is `HISTORY_BEHIND`.
pub fn revision_content(
    state: &State,
    revision: &crate::storage::rows::RevisionRow,
) -> Result<Option<Vec<u8>>> {
    use crate::history::Stored;
    if revision.content_hash.is_none() {
        return Ok(None);
    }
    let lookup = || match &revision.commit_id {
        Some(commit) => state.history.read_at(commit, &revision.path),
        None => state.history.content_at_seq(revision.seq, &revision.path),
    };
    let mut stored = lookup()?;
    if stored == Stored::NotRecorded && revision.seq > state.history.status().head_seq {
        // Recorded a moment ago: its commit may be on its way.
        state.history.flush(std::time::Duration::from_secs(2));
        stored = lookup()?;
    }
    let missing = |why: String| {
        Error::new(
            Reason::REVISION_CONTENT_MISSING,
            format!(
                "the bytes of revision {} are not in history: {why}",
                revision.version_id
            ),
        )
        .with_meta("revision_id", revision.version_id.clone())
    };
    match stored {
        Stored::Bytes(bytes) => Ok(Some(bytes)),
        Stored::LeftOut(why) | Stored::Lost(why) => Err(missing(why)),
        Stored::Absent => Err(missing(format!(
            "its commit does not hold {}",
            revision.path
        ))),
        Stored::NotRecorded if revision.seq > state.history.status().head_seq => {
            let status = state.history.status();
            Err(Error::new(
                Reason::HISTORY_BEHIND,
                format!(
                    "history has recorded changes up to {}, not yet revision {} (seq {}); {} commits are waiting to be retried",
                    status.head_seq, revision.version_id, revision.seq, status.backlog
                ),
            )
            .with_meta("revision_id", revision.version_id.clone())
            .with_retry_after(5))
        }
        Stored::NotRecorded => Err(missing(
            "the daemon stopped (or gave up a failing commit) before history recorded it".into(),
        )),
    }
}
