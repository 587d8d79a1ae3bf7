//! `notevault import FOLDER --vault NAME`: a folder vault into a hosted vault, with its
//! history. Every revision the folder's metadata store records is copied in seq order
//! (its note id, version id, actor and time kept; seqs made dense, as the hosted op log
//! counts them), each with its bytes from `history.git` (or, for a revision whose bytes
//! history lost, none: it reads back as lost, as it did in the folder); then the notes as
//! they are now, their bytes read from the folder. Attachments and private notes wait for
//! blob storage and are counted, not copied.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cli::ImportArgs;
use crate::history::History;
use crate::hosted::meta::PgMeta;
use crate::hosted::revisions::PgRevisions;
use crate::meta::Meta;
use crate::storage::metadata::Records;
use crate::storage::rows::{OpRow, RevisionRow};
use crate::storage::{Change, CommitRequest, Content, Revisions, Stored};

use super::hosted::{database, message};

/// Revisions copied per transaction.
const BATCH: usize = 500;

pub fn import(args: ImportArgs) -> anyhow::Result<()> {
    let folder = args.folder.canonicalize().map_err(|e| {
        anyhow::anyhow!("vault folder {} is not usable: {e}", args.folder.display())
    })?;
    let state_dir = args
        .state_dir
        .clone()
        .unwrap_or_else(|| folder.join(".notevault"));
    if !state_dir.join("meta.sqlite").is_file() {
        anyhow::bail!(
            "{} holds no notevault state: serve the folder once (`notevault serve {}`) so its history is recorded, or name its --state-dir",
            state_dir.display(),
            folder.display()
        );
    }
    let db = database(args.database)?;
    let vault = crate::hosted::block_on(async {
        crate::hosted::schema::check(&db).await?;
        crate::hosted::registry::find(&db, &args.vault).await
    })
    .map_err(message)?;
    let target = PgMeta::new(db.clone(), vault.id);
    if target.committed_seq().map_err(message)? != 0 || !target.all_notes()?.is_empty() {
        anyhow::bail!(
            "the hosted vault {} holds notes already: import into a new vault (`notevault vault create NAME`)",
            vault.name
        );
    }
    let bytes = PgRevisions::new(db, vault.id);
    let source = Meta::open(&state_dir.join("meta.sqlite")).map_err(message)?;
    let history = History::open(&state_dir.join("history.git")).map_err(message)?;

    let revisions = source.revisions_after(0).map_err(message)?;
    let mut seq = 0i64;
    let mut lost = 0usize;
    let mut paths: HashMap<String, String> = HashMap::new();
    for chunk in revisions.chunks(BATCH) {
        let mut changes = Vec::new();
        let mut rows = Vec::with_capacity(chunk.len());
        let mut ops = Vec::with_capacity(chunk.len());
        for rev in chunk {
            seq += 1;
            let mut content_hash = rev.content_hash.clone();
            if let Some(hash) = &rev.content_hash {
                let stored = match &rev.commit_id {
                    Some(commit) => history.read_at(commit, &rev.path),
                    None => history.content_at_seq(rev.seq, &rev.path),
                }
                .map_err(message)?;
                match stored {
                    Stored::Bytes(b) if crate::vault::content_hash(&b) == *hash => {
                        changes.push(Change {
                            path: rev.path.clone(),
                            content: Some(Content::Bytes(Arc::from(b))),
                        })
                    }
                    // Kept as in the folder: a revision whose bytes are gone reads as lost.
                    _ => lost += 1,
                }
            } else {
                content_hash = None;
            }
            let from_path = paths.get(&rev.note_id).cloned();
            let kind = match (&content_hash, &from_path) {
                (None, _) => "delete",
                (Some(_), Some(from)) if *from != rev.path => "move",
                _ => "upsert",
            };
            ops.push(OpRow {
                seq,
                kind: kind.to_string(),
                note_id: Some(rev.note_id.clone()),
                path: rev.path.clone(),
                from_path: from_path.filter(|f| *f != rev.path),
                version_id: Some(rev.version_id.clone()),
                prev_version_id: rev.prev_version_id.clone(),
                content_hash: content_hash.clone(),
                visibility: "standard".into(),
                actor: rev.actor.clone(),
                created_at: rev.created_at.clone(),
            });
            match &content_hash {
                Some(_) => paths.insert(rev.note_id.clone(), rev.path.clone()),
                None => paths.remove(&rev.note_id),
            };
            rows.push(RevisionRow {
                seq,
                content_hash,
                commit_id: None,
                ..rev.clone()
            });
        }
        put(&bytes, changes)?;
        target.record(&rows, &ops, &[], &[]).map_err(message)?;
    }

    // The notes as they are now, their bytes from the folder (a revision's bytes that
    // history lost are there still).
    let notes = source.all_notes().map_err(message)?;
    let mut changes = Vec::new();
    for note in &notes {
        if let Ok(b) = std::fs::read(folder.join(&note.path)) {
            if crate::vault::content_hash(&b) == note.content_hash {
                changes.push(Change {
                    path: note.path.clone(),
                    content: Some(Content::Bytes(Arc::from(b))),
                });
            }
        }
    }
    put(&bytes, changes)?;
    target.record(&[], &[], &notes, &[]).map_err(message)?;
    let files = source.all_attachments().map_err(message)?.len();
    println!(
        "imported {} notes and {} revisions into {} ({} revisions without bytes in history{})",
        notes.len(),
        seq,
        vault.name,
        lost,
        if files > 0 {
            format!(
                "; {files} attachments and private notes wait for blob storage and were not copied"
            )
        } else {
            String::new()
        }
    );
    Ok(())
}

fn put(bytes: &PgRevisions, changes: Vec<Change>) -> anyhow::Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let written = bytes.commit(CommitRequest {
        subject: "import".into(),
        actor: "import".into(),
        changes,
        trailers: Vec::new(),
        allow_empty: false,
        replace: false,
        at: None,
    });
    match written.recv() {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(message(e)),
        Err(_) => anyhow::bail!("the revision store stopped"),
    }
}
