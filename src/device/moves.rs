//! Notes the user moved or renamed and edited before a push: a synced note gone from its
//! path, and a new file that holds most of its lines. Pushed as a move (the note keeps
//! its id, the daemon rewrites the links to it), then the edit on the moved note, so
//! neither the id nor the edit is lost. (A note moved without an edit is found by its
//! unchanged bytes in `push`.)
//!
//! The device keeps hashes, not bytes: the old text is the daemon's (`/raw` of the note
//! at the version the device synced). A pair must be unambiguous both ways; anything
//! else stays a delete and a create, which loses no bytes either.

use std::collections::{BTreeMap, HashSet};

use anyhow::Result;

use super::{server_of, Device};
use crate::vault::content_hash;

/// At most this many gone notes are read to pair them (a push with more goes as
/// deletes and creates).
const MAX_READ: usize = 50;

/// The share of distinct lines the old note and a new file must have in common, of the
/// larger of the two: a new file that merely holds an old one, or shares a template with
/// it and little else, is no move (it is pushed as a delete and a create).
const MIN_SHARED: f64 = 0.75;

/// Fewer distinct lines than this tell nothing about where a note went.
const MIN_LINES: usize = 3;

fn lines(text: &str) -> HashSet<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

impl Device {
    /// Edited moves: `new device path -> old device path`.
    pub(super) async fn edited_moves(
        &self,
        present: &[String],
    ) -> Result<BTreeMap<String, String>> {
        let here: HashSet<&str> = present.iter().map(String::as_str).collect();
        let mut new = Vec::new();
        let mut new_hashes = HashSet::new();
        for local in present {
            if !self.state.files.contains_key(local) && !server_of(local).1 {
                let bytes = std::fs::read(self.root.join(local))?;
                new_hashes.insert(content_hash(&bytes));
                new.push((local.clone(), String::from_utf8_lossy(&bytes).into_owned()));
            }
        }
        let gone: Vec<(&String, &super::Synced)> = self
            .state
            .files
            .iter()
            .filter(|(l, s)| {
                !s.private
                    && !s.attachment
                    && s.note_id.is_some()
                    && !s.local_hash.is_empty()
                    && !here.contains(l.as_str())
                    // Same bytes elsewhere: a plain move, found by `renames`.
                    && !new_hashes.contains(&s.local_hash)
            })
            .collect();
        // Unambiguous means among every gone note: with some unread, none is paired.
        if gone.is_empty() || new.is_empty() || gone.len() > MAX_READ {
            return Ok(BTreeMap::new());
        }
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (old, s) in gone {
            let id = s.note_id.as_deref().unwrap_or_default();
            let path = format!("/v1/notes/{id}/raw");
            let (200, v) = self.call(reqwest::Method::GET, &path, None, None).await? else {
                return Ok(BTreeMap::new());
            };
            // Only the version the device synced: another device's edit since is not this
            // device's old text, and a note left unread could be the better pair.
            if v["version_id"].as_str() != Some(s.base.as_str()) {
                return Ok(BTreeMap::new());
            }
            let before = lines(v["content"].as_str().unwrap_or_default());
            if before.len() < MIN_LINES {
                continue;
            }
            for (to, text) in &new {
                let after = lines(text);
                let larger = before.len().max(after.len()) as f64;
                let shared = before.intersection(&after).count() as f64 / larger;
                if shared >= MIN_SHARED {
                    pairs.push((to.clone(), old.clone()));
                }
            }
        }
        let count = |f: &dyn Fn(&(String, String)) -> &String, key: &String| {
            pairs.iter().filter(|p| f(p) == key).count()
        };
        Ok(pairs
            .iter()
            .filter(|p| count(&|q| &q.0, &p.0) == 1 && count(&|q| &q.1, &p.1) == 1)
            .cloned()
            .collect())
    }
}
