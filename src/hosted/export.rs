//! A hosted vault's export archive: the layout of a local export (`crate::export`), its
//! notes read from the `notes` rows and their bytes, its history (with `--history`)
//! replayed from the revision rows into a bare repository in a temporary folder, one
//! commit per revision with its actor and time, then bundled like a local vault's.
//!
//! The folder a round trip (folder → `import` → `export`) gives back holds the notes'
//! bytes exactly. Attachments come from the blob store (without one configured, the
//! archive names them as left out).

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Arc;

use crate::export::{Archive, Manifest, Options};
use crate::history::History;
use crate::storage::metadata::Records;
use crate::storage::rows::RevisionRow;
use crate::storage::{Change, CommitRequest, Content};
use crate::vault::packed::Packed;

use crate::error::{Reason, Result};
use crate::storage::blobs::BlobStore;

use super::block_on;
use super::meta::PgMeta;
use super::revisions::PgRevisions;
use super::Database;

/// Note bytes read from the database per query.
const BATCH: usize = 256;

/// Write the archive of the hosted vault `vault` to `out`; nothing of the vault changes.
pub fn write(
    db: &Database,
    vault: uuid::Uuid,
    options: &Options,
    blobs: Option<&dyn BlobStore>,
    out: impl Write,
) -> io::Result<Manifest> {
    let meta = PgMeta::new(db.clone(), vault);
    let bytes = PgRevisions::new(db.clone(), vault, Default::default());
    let mut archive = Archive::new(out);
    let mut notes = meta.all_notes().map_err(io::Error::other)?;
    notes.sort_by(|a, b| a.path.cmp(&b.path));
    let mtime = |at: &str| crate::clock::parse_or_now(at).timestamp().max(0) as u64;
    for chunk in notes.chunks(BATCH) {
        let hashes: Vec<String> = chunk.iter().map(|n| n.content_hash.clone()).collect();
        let found: HashMap<String, Vec<u8>> = bytes
            .bytes_of(&hashes)
            .map_err(io::Error::other)?
            .into_iter()
            .collect();
        for note in chunk {
            match found.get(&note.content_hash) {
                Some(b) => archive.add(&note.path, true, b, mtime(&note.observed_at))?,
                None => archive.skip(
                    note.path.clone(),
                    "its bytes are missing from the database".into(),
                ),
            }
        }
    }
    let vault_id = vault.to_string();
    for file in meta.all_attachments().map_err(io::Error::other)? {
        let Some(store) = blobs else {
            archive.skip(
                file.path,
                "a hosted vault's attachments live in blob storage, which is not configured".into(),
            );
            continue;
        };
        match block_on(read_blob(store, &vault_id, &file.sha256)) {
            Ok(b) => archive.add(&file.path, false, &b, mtime(&file.modified_at))?,
            Err(e) if e.reason == Reason::ATTACHMENT_NOT_FOUND => archive.skip(
                file.path,
                "its bytes are missing from the blob store".into(),
            ),
            // The store did not answer: no archive rather than one passed off as whole
            // (the error kept whole, for its reason and `Retry-After`).
            Err(e) => return Err(io::Error::other(e)),
        }
    }
    if options.history {
        let dir = tempfile::tempdir()?;
        let git_dir = dir.path().join("history.git");
        replay(&meta, &bytes, &git_dir)?;
        archive.history(&git_dir)?;
    }
    archive.finish()
}

/// Every revision of the vault, in seq order, as one commit each in a new bare
/// repository at `git_dir`: a move removes the note's old path; a delete removes it.
fn replay(meta: &PgMeta, bytes: &PgRevisions, git_dir: &std::path::Path) -> io::Result<()> {
    let history = History::open(git_dir).map_err(io::Error::other)?;
    let revisions = meta.revisions_after(0).map_err(io::Error::other)?;
    let mut paths: HashMap<String, String> = HashMap::new();
    let result = (|| {
        for chunk in revisions.chunks(BATCH) {
            let mut hashes: Vec<String> = chunk
                .iter()
                .filter_map(|r| r.content_hash.clone())
                .collect();
            hashes.dedup();
            let found: HashMap<String, Arc<[u8]>> = bytes
                .bytes_of(&hashes)
                .map_err(io::Error::other)?
                .into_iter()
                .map(|(h, b)| (h, Arc::from(b)))
                .collect();
            for rev in chunk {
                let request = commit_of(rev, &mut paths, &found);
                match history.commit(request).recv() {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Err(io::Error::other(e)),
                    Err(_) => return Err(io::Error::other("the history writer stopped")),
                }
            }
        }
        Ok(())
    })();
    history.stop();
    result
}

/// The commit that records `rev`, the note's path before it in `paths`.
fn commit_of(
    rev: &RevisionRow,
    paths: &mut HashMap<String, String>,
    found: &HashMap<String, Arc<[u8]>>,
) -> CommitRequest {
    let mut changes = Vec::new();
    if let Some(before) = paths.get(&rev.note_id).filter(|p| **p != rev.path) {
        changes.push(Change {
            path: before.clone(),
            content: None,
        });
    }
    let content = match &rev.content_hash {
        // A revision whose bytes are gone (lost before an import) keeps the old bytes.
        Some(hash) => found
            .get(hash)
            .map(|b| Content::Bytes(Packed::plain(b.clone()))),
        None => None,
    };
    match (&rev.content_hash, content) {
        (Some(_), Some(content)) => {
            paths.insert(rev.note_id.clone(), rev.path.clone());
            changes.push(Change {
                path: rev.path.clone(),
                content: Some(content),
            });
        }
        (Some(_), None) => {
            paths.insert(rev.note_id.clone(), rev.path.clone());
        }
        (None, _) => {
            paths.remove(&rev.note_id);
            changes.push(Change {
                path: rev.path.clone(),
                content: None,
            });
        }
    }
    CommitRequest {
        subject: format!("{} {}", rev.kind, rev.path),
        actor: rev.actor.clone(),
        changes,
        trailers: vec![
            ("Notevault-Seq".into(), rev.seq.to_string()),
            ("Notevault-Version".into(), rev.version_id.clone()),
            ("Notevault-Note".into(), rev.note_id.clone()),
        ],
        allow_empty: true,
        replace: false,
        at: Some(crate::clock::parse_or_now(&rev.created_at)),
    }
}

/// The bytes of the blob `sha256` of `vault`, whole (an attachment is at most the
/// upload cap).
async fn read_blob(store: &dyn BlobStore, vault: &str, sha256: &str) -> Result<Vec<u8>> {
    use futures::TryStreamExt;
    let mut stream = store.get(vault, sha256, None).await?;
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.try_next().await.map_err(|e| {
        crate::error::Error::new(Reason::BLOB_STORE_UNAVAILABLE, e.to_string())
            .with_retry_after(crate::storage::blobs::RETRY_AFTER_SECONDS)
    })? {
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(seq: i64, note: &str, path: &str, hash: Option<&str>) -> RevisionRow {
        RevisionRow {
            seq,
            version_id: format!("v{seq}"),
            note_id: note.into(),
            path: path.into(),
            prev_version_id: None,
            content_hash: hash.map(String::from),
            actor: "agent".into(),
            kind: "update".into(),
            created_at: "2026-01-02T03:04:05Z".into(),
            commit_id: None,
        }
    }

    #[test]
    fn a_move_removes_the_old_path_and_a_delete_the_note() {
        let found = HashMap::from([("h1".to_string(), Arc::from(&b"one"[..]))]);
        let mut paths = HashMap::new();
        let create = commit_of(&rev(1, "n", "a.md", Some("h1")), &mut paths, &found);
        assert_eq!(create.changes.len(), 1);
        assert_eq!(create.at.unwrap().to_rfc3339(), "2026-01-02T03:04:05+00:00");
        let moved = commit_of(&rev(2, "n", "b.md", Some("h1")), &mut paths, &found);
        let touched: Vec<(&str, bool)> = moved
            .changes
            .iter()
            .map(|c| (c.path.as_str(), c.content.is_some()))
            .collect();
        assert_eq!(touched, [("a.md", false), ("b.md", true)]);
        let deleted = commit_of(&rev(3, "n", "b.md", None), &mut paths, &found);
        assert_eq!(deleted.changes.len(), 1);
        assert!(deleted.changes[0].content.is_none() && paths.is_empty());
    }
}
