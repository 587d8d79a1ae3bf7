//! A stored note as a start puts it in the catalog: its stored version, and what is to be
//! recorded of the file found at its path (a walk's observation, or the scan cache's).

use super::*;

/// A stored note as the start rebuilds it: its catalog entry (the stored version), and
/// what reconcile is to record of it.
pub(super) struct Rebuilt {
    pub note: Arc<Note>,
    /// The file now holds another version.
    pub changed: Option<Box<Observed>>,
    /// The file is gone (its path).
    pub removed: Option<String>,
    /// The file could not be read again.
    pub excluded: Option<Excluded>,
    /// It was recalled from the scan cache and has now been read.
    pub reread: bool,
}

/// The catalog entry of a stored row, given what the scan found at its path (`unread`:
/// recalled from the scan cache, its bytes not read).
pub(super) fn rebuild(
    state: &State,
    row: crate::storage::rows::NoteRow,
    mut found_now: Option<Observed>,
    unread: bool,
) -> Rebuilt {
    let created = parse_time(&row.created_at);
    let observed_at = parse_time(&row.observed_at);
    let mut excluded = Vec::new();
    let mut reread_now = false;
    if found_now
        .as_ref()
        .is_some_and(|o| o.content_hash != row.content_hash && unread)
    {
        // Recalled from the cache with a hash the store does not hold: what is built
        // or recorded from this file is read now.
        reread_now = true;
        found_now = reread(state, &row.path, &mut excluded);
    }
    let (mut changed, mut removed) = (None, None);
    let obs = match found_now {
        Some(obs) if obs.content_hash == row.content_hash => obs,
        Some(obs) => {
            // Changed while stopped: the stored version goes in, reconcile records the
            // new one.
            let stale = Observed {
                content_hash: row.content_hash.clone(),
                stamp: None,
                ..obs.clone()
            };
            changed = Some(Box::new(obs));
            stale
        }
        None => {
            removed = Some(row.path.clone());
            Observed {
                rel: row.path.clone(),
                size: 0,
                mtime: std::time::SystemTime::UNIX_EPOCH,
                created: std::time::SystemTime::UNIX_EPOCH,
                content_hash: row.content_hash.clone(),
                facts: Default::default(),
                content: None,
                stamp: None,
            }
        }
    };
    Rebuilt {
        note: Arc::new(note_from(
            obs,
            row.note_id,
            row.version_id,
            created,
            observed_at,
        )),
        changed,
        removed,
        excluded: excluded.pop(),
        reread: reread_now,
    }
}

/// Read the file `rel` the start had recalled from the scan cache, or has no entry for; `None` (and the file
/// among those left out) when it cannot be read, as the scan does.
pub(super) fn reread(state: &State, rel: &str, excluded: &mut Vec<Excluded>) -> Option<Observed> {
    match crate::vault::observe::observe(&state.paths.root, rel) {
        Ok(obs) => Some(obs),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            excluded.push(Excluded {
                path: rel.to_string(),
                reason: format!("unreadable: {e}"),
            });
            None
        }
    }
}
