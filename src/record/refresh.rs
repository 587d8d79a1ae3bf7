//! Reconcile on read: a read finds the note a key names, and reads bytes that agree with
//! the version it answers. A note file created since the scan is taken in on the spot; an
//! external edit the catalog has not seen yet is recorded first (a `filesystem`
//! revision, through [`reconcile`](super::reconcile::reconcile)).

use std::sync::Arc;

use super::reconcile::reconcile;
use crate::error::{Error, Result};
use crate::state::{State, WriteLock};
use crate::vault::content_hash;
use crate::vault::note::Note;
use crate::vault::observe::FileStamp;
use crate::vault::path::slug_of;

/// A note and the bytes of the version it names (shared with the catalog when it keeps
/// them).
pub type NoteBytes = (Arc<Note>, Arc<[u8]>);

/// Whether the caller already holds the write lock.
#[derive(Clone, Copy)]
pub enum Lock<'a> {
    Take,
    Held(&'a WriteLock<'a>),
}

/// Find a note by note id or slug. A key that would leave the vault is `UNSAFE_PATH`; a
/// note file created since the scan is taken in on the spot.
pub fn find(state: &State, key: &str) -> Result<Arc<Note>> {
    find_with(state, key, Lock::Take)
}

pub(crate) fn find_with(state: &State, key: &str, lock: Lock<'_>) -> Result<Arc<Note>> {
    if key.is_empty() {
        return Err(Error::invalid_field("note", "must be at least 1 character"));
    }
    if let Some(note) = state.catalog.read().find(key) {
        return Ok(note.clone());
    }
    let rel = if crate::vault::path::is_note_name(key) {
        key.to_string()
    } else {
        format!("{key}.md")
    };
    let safe = state.paths.resolve(&rel)?;
    if safe.abs.is_file() {
        refresh_with(state, &safe.rel, lock)?;
        if let Some(note) = state.catalog.read().get(slug_of(&rel)) {
            return Ok(note.clone());
        }
    }
    Err(Error::not_found(key))
}

/// Read a note's bytes, checking the path again and catching an external edit the
/// catalog has not seen yet (it is reconciled as a `filesystem` revision first).
pub fn read(state: &State, key: &str) -> Result<NoteBytes> {
    match read_agreeing(state, key, Lock::Take)? {
        Ok(read) => Ok(read),
        // Still changing after a few tries: the latest bytes.
        Err(note) => {
            let abs = state.paths.resolve(&note.path)?.abs;
            let bytes = crate::vault::observe::read_file(&abs).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Error::not_found(key),
                _ => Error::internal(format!("cannot read {}: {e}", note.path)).with_cause(e),
            })?;
            Ok((note, bytes))
        }
    }
}

/// Read the note `key` names so that the bytes are the version answered: an editor
/// writing in place can be caught mid-write, so a file whose hash is not the catalog's
/// is reconciled and read again, a few times. `Err(note)`: it kept changing (the latest
/// note).
///
/// A file whose stamp (size, times, inode: `FileStamp`) is the one taken when the
/// catalog's version was read holds that version: its kept bytes are answered without
/// reading or hashing the file. Any save changes the stamp (a new mtime and ctime, or a
/// new inode for an atomic rename), and is then hashed and reconciled as before.
pub(crate) fn read_agreeing(
    state: &State,
    key: &str,
    lock: Lock<'_>,
) -> Result<std::result::Result<NoteBytes, Arc<Note>>> {
    let mut note = find_with(state, key, lock)?;
    for _ in 0..5 {
        if let Some(kept) = kept_bytes(state, &note) {
            return Ok(Ok((note, kept)));
        }
        let safe = state.paths.resolve(&note.path)?;
        let bytes = match crate::vault::observe::read_file(&safe.abs) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                refresh_with(state, &note.path, lock)?;
                // Renamed while the daemon was stopped, and paired by the verify.
                let moved = state.catalog.read().get_by_id(&note.note_id).cloned();
                match moved {
                    Some(n) if n.path != note.path => {
                        note = n;
                        continue;
                    }
                    _ => return Err(Error::not_found(key)),
                }
            }
            Err(e) => {
                return Err(Error::internal(format!("cannot read {}: {e}", note.path)).with_cause(e))
            }
        };
        if content_hash(&bytes) == note.content_hash {
            return Ok(Ok((note, bytes)));
        }
        refresh_with(state, &note.path, lock)?;
        note = find_with(state, &note.note_id, lock)?;
    }
    Ok(Err(note))
}

/// The note `key` names and its kept bytes, when the catalog holds the note, keeps its
/// bytes and the file's stamp is still the one they were read under: one `stat`, no
/// read, no hash, no lock but the catalog's read lock, and an unpack of at most
/// [`KEPT_ON_WORKER`] bytes, so it is cheap enough to answer on an async worker. `None`:
/// take the full path ([`read`]), which finds notes the catalog has not seen, reads,
/// hashes and reconciles.
pub fn read_kept(state: &State, key: &str) -> Option<NoteBytes> {
    let note = state.catalog.read().find(key)?.clone();
    if note.size > KEPT_ON_WORKER {
        return None;
    }
    let kept = kept_bytes(state, &note)?;
    Some((note, kept))
}

/// The largest note [`read_kept`] unpacks on an async worker (LZ4 unpacks a few GB/s: a
/// note this size takes well under a millisecond).
const KEPT_ON_WORKER: u64 = 1 << 20;

/// `note`'s kept bytes if its file's stamp is still theirs. The stat goes through
/// [`Paths::stamp_path`](crate::vault::path::VaultPaths::stamp_path): the bytes answered are
/// the ones the catalog read through a checked path, never the file's.
fn kept_bytes(state: &State, note: &Note) -> Option<Arc<[u8]>> {
    // A shared vault has no folder beside it: its catalog holds every note's bytes.
    if state.shared.is_some() {
        return note.content.as_ref().map(|b| b.to_arc());
    }
    let (stamp, kept) = (note.stamp?, note.content.as_ref()?);
    let now = FileStamp::at(&state.paths.stamp_path(&note.path)).ok()?;
    (now == stamp).then(|| kept.to_arc())
}

/// The bytes of `note` as its store holds them now, for a writer that checks them against
/// the note's hash itself: its kept bytes while they are current (a shared vault's
/// catalog holds every note's), else its file read.
pub(crate) fn stored_bytes(state: &State, note: &Note) -> Option<Arc<[u8]>> {
    kept_bytes(state, note).or_else(|| match state.shared {
        Some(_) => None,
        None => std::fs::read(state.paths.root.join(&note.path))
            .ok()
            .map(Arc::from),
    })
}

/// After a start that walked nothing, a file the catalog does not know, or a note whose
/// file is gone, may be one side of a rename made while stopped: recorded alone, the
/// note would lose its id. Such a read waits for the verify, which pairs renames by
/// content (the caller must not hold the write lock).
fn await_the_walk(state: &State, rel: &str) {
    if !state.unread.unwalked() {
        return;
    }
    let known = state.catalog.read().get(slug_of(rel)).is_some();
    let present = state.paths.root.join(rel).is_file();
    if known != present {
        state.unread.wait_walk();
    }
}

/// Reconcile one path with the disk (`filesystem` actor).
pub fn refresh(state: &State, rel: &str) -> Result<()> {
    refresh_with(state, rel, Lock::Take)
}

/// [`refresh`] under the write lock (taken, or held by the caller). An emptied note still
/// changing (an in-place save half done) is not recorded (`vault::settle`).
pub(crate) fn refresh_with(state: &State, rel: &str, lock: Lock<'_>) -> Result<()> {
    if matches!(lock, Lock::Take) {
        await_the_walk(state, rel);
    }
    let taken;
    let write = match lock {
        Lock::Held(write) => write,
        Lock::Take => {
            taken = state.lock();
            &taken
        }
    };
    // A stopping daemon records nothing more (a read answers from what is recorded); a
    // shared vault has no folder whose files could say anything.
    if state.closed() || state.shared.is_some() {
        return Ok(());
    }
    let (observed, removed) =
        match crate::vault::settle::observe(&state.paths.root, &state.catalog, rel) {
            Ok(Some(o)) => (vec![o], vec![]),
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (vec![], vec![rel.to_string()]),
            Err(e) => return Err(Error::internal(format!("cannot read {rel}: {e}")).with_cause(e)),
        };
    reconcile(
        state,
        write,
        observed,
        removed,
        "filesystem",
        "Record an external edit",
        None,
    )?;
    Ok(())
}
