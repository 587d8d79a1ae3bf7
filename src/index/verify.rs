//! `notevault check`'s look at the index: read-only, while no daemon holds it.

use std::collections::HashMap;
use std::path::Path;

use tantivy::{Index, ReloadPolicy};

use super::schema::{schema, stamp_of, SCHEMA_VERSION, VERSION_FILE};
use super::searchable;
use crate::vault::note::Note;

/// How the index compares with the notes it should hold.
#[derive(Debug, Default)]
pub struct IndexCheck {
    /// Live documents.
    pub documents: usize,
    /// Paths of searchable notes with no document.
    pub missing: Vec<String>,
    /// Paths of notes whose document is of another content or path.
    pub stale: Vec<String>,
    /// Documents of no note given.
    pub extra: usize,
}

/// Whether a process holds the index lock (a daemon serves the vault). Opens the lock
/// file read-only and never creates it.
pub fn in_use(state_dir: &Path) -> bool {
    let Ok(file) = std::fs::File::open(state_dir.join("index.lock")) else {
        return false;
    };
    matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock))
}

/// Compare the index under `state_dir` with `notes` (the catalog's notes whose file is
/// as recorded); a document whose key is none of `known` is `extra`. An error says, in words, why the index cannot be read (absent, another schema
/// version, corrupt): a rebuild fixes each.
pub fn verify(
    state_dir: &Path,
    notes: &[Note],
    known: &std::collections::HashSet<u64>,
) -> Result<IndexCheck, String> {
    let dir = state_dir.join("index");
    if !dir.join("meta.json").is_file() {
        return Err("there is no index".into());
    }
    match std::fs::read_to_string(dir.join(VERSION_FILE)) {
        Ok(v) if v.trim() == SCHEMA_VERSION.to_string() => {}
        Ok(v) => {
            return Err(format!(
                "the index is of schema version {} (this build uses {SCHEMA_VERSION})",
                v.trim()
            ))
        }
        Err(_) => return Err("the index has no schema version".into()),
    }
    let index = Index::open_in_dir(&dir).map_err(|e| format!("the index is corrupt ({e})"))?;
    if index.schema() != schema().0 {
        return Err("the index has another schema".into());
    }
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()
        .map_err(|e: tantivy::TantivyError| format!("the index is corrupt ({e})"))?;
    let searcher = reader.searcher();
    let mut indexed: HashMap<u64, String> = HashMap::new();
    for segment in searcher.segment_readers() {
        let ff = segment.fast_fields();
        let keys = ff
            .u64("key")
            .map_err(|e| format!("the index is corrupt ({e})"))?;
        let Some(stamps) = ff
            .str("stamp")
            .map_err(|e| format!("the index is corrupt ({e})"))?
        else {
            continue;
        };
        for doc in segment.doc_ids_alive() {
            let (Some(key), Some(ord)) = (keys.first(doc), stamps.term_ords(doc).next()) else {
                continue;
            };
            let mut stamp = String::new();
            stamps
                .ord_to_str(ord, &mut stamp)
                .map_err(|e| format!("the index is corrupt ({e})"))?;
            indexed.insert(key, stamp);
        }
    }
    let mut out = IndexCheck {
        documents: indexed.len(),
        ..IndexCheck::default()
    };
    for note in notes.iter().filter(|n| searchable(n)) {
        match indexed.get(&note.key()) {
            None => out.missing.push(note.path.clone()),
            // The note's own part of the stamp (the hash of its link text after a line
            // break is the writer's to keep current).
            Some(stamp) if stamp.split('\n').next() != Some(&stamp_of(note)) => {
                out.stale.push(note.path.clone())
            }
            Some(_) => {}
        }
    }
    out.extra = indexed.keys().filter(|k| !known.contains(k)).count();
    Ok(out)
}
