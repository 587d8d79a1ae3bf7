//! A pushed op whose base moved only by a rename or a move elsewhere is sent again on
//! the note's current version instead of becoming a conflict: a rename or move never
//! changes bytes, so nothing of either side is lost by applying the other on top.
//!
//! - An edit (`upsert`) whose note the daemon has at the bytes the device last synced
//!   (another device renamed or moved it, no one edited it) goes again on the daemon's
//!   version: the edit lands on the note, id kept, at its new path, and the pull that
//!   ends the push moves the device's file there.
//! - A move or rename whose note another device edited goes again on the daemon's
//!   version: it carries no bytes, and the pull brings the other device's edit to the
//!   new path.
//!
//! Anything else is a real concurrent edit: `VERSION_MOVED` as before (a conflicted copy
//! of an edit; a refused move).

use anyhow::Result;
use serde_json::Value;

use super::Device;

/// A `VERSION_MOVED` answer to look at again: the op's device path, the path its synced
/// state is kept at, the note, and whether it was a move.
#[derive(Debug, Clone)]
pub(super) struct Moved {
    pub local: String,
    pub synced_at: String,
    pub note_id: String,
    pub moving: bool,
}

impl Device {
    /// The note's current version and `content_hash` on the daemon (`None`: gone).
    async fn current(&self, note_id: &str) -> Result<Option<(String, String)>> {
        let path = format!("/v1/notes/{note_id}?limit=1");
        Ok(
            match self.call(reqwest::Method::GET, &path, None, None).await? {
                (200, v) => Some((
                    v["version_id"].as_str().unwrap_or_default().to_string(),
                    v["content_hash"].as_str().unwrap_or_default().to_string(),
                )),
                _ => None,
            },
        )
    }

    /// Whether `m` goes again on the daemon's version (its base in the state moved
    /// there); `false`: a real concurrent edit.
    pub(super) async fn rebase(&mut self, m: &Moved) -> Result<bool> {
        let Some(synced) = self.state.files.get(&m.synced_at).cloned() else {
            return Ok(false);
        };
        let Some((version, hash)) = self.current(&m.note_id).await? else {
            return Ok(false);
        };
        // An edit goes again only over bytes the device knows; a move only of a file the
        // device has not edited (else its edit would follow over the other device's).
        let unedited = self.local_hash(&m.local).as_ref() == Some(&synced.local_hash);
        if version.is_empty()
            || version == synced.base
            || (!m.moving && hash != synced.local_hash)
            || (m.moving && !unedited)
        {
            return Ok(false);
        }
        if let Some(s) = self.state.files.get_mut(&m.synced_at) {
            s.base = version;
        }
        self.save()?;
        Ok(true)
    }
}

/// The note an op names, from the op itself.
pub(super) fn note_of(op: &Value) -> Option<String> {
    op["note_id"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}
