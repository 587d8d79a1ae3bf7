//! Notes that left the folder a moment ago, remembered by content hash and path, so that
//! a move whose halves reach two batches (or a delete then create) keeps its note id.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::vault::note::Note;

/// Notes that left the folder in the last few seconds, by content hash, so that a move
/// whose halves reach two batches (or a delete then create) keeps its note id.
#[derive(Default)]
pub struct RecentlyRemoved {
    notes: Mutex<Vec<(Instant, String, Note)>>,
}

/// How long a removed note can still be found again by its content.
const REMEMBER: Duration = Duration::from_secs(10);

impl RecentlyRemoved {
    pub fn put(&self, note: &Note, delete_version: &str) {
        let mut notes = self.notes.lock();
        notes.retain(|(at, _, _)| at.elapsed() < REMEMBER);
        let mut note = note.clone();
        note.version_id = delete_version.to_string();
        notes.push((Instant::now(), note.content_hash.clone(), note));
    }

    /// The note that left with `content_hash` (the other half of a move), else the one
    /// that left `path` (an editor's delete, then create, of the note with new bytes).
    pub fn take(&self, content_hash: &str, path: &str) -> Option<Arc<Note>> {
        let mut notes = self.notes.lock();
        notes.retain(|(at, _, _)| at.elapsed() < REMEMBER);
        let i = notes
            .iter()
            .position(|(_, h, _)| h == content_hash)
            .or_else(|| notes.iter().position(|(_, _, n)| n.path == path))?;
        Some(Arc::new(notes.remove(i).2))
    }
}
