//! `notevault import FOLDER --vault NAME`: a folder vault into a hosted vault, with its
//! history. Every revision the folder's metadata store records is copied in seq order
//! (its note id, version id, actor and time kept; seqs made dense, as the hosted op log
//! counts them), each with its bytes from `history.git` (or, for a revision whose bytes
//! history lost, none: it reads back as lost, as it did in the folder); then the notes as
//! they are now, their bytes read from the folder; then the attachments and private
//! notes' ciphertext files as they are now, their bytes streamed from the folder to the
//! blob store.
//!
//! Resumable: the vault keeps which folder is coming in (`import.source`: the folder's
//! vault id and how many revisions its history held) until the end, and every step is a
//! transaction or idempotent, so running the command again with the same folder after it
//! was cut off carries on after the last batch recorded.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cli::ImportArgs;
use crate::history::History;
use crate::hosted::block_on;
use crate::hosted::meta::PgMeta;
use crate::hosted::revisions::PgRevisions;
use crate::meta::Meta;
use crate::record::FileEntry;
use crate::storage::blobs::{BlobStore, MULTIPART_ABOVE as MULTIPART};
use crate::storage::metadata::{Records, Settings};
use crate::storage::rows::{AttachmentRow, OpRow, RevisionRow};
use crate::storage::upload::{HashedUpload, Uploaded};
use crate::storage::{Change, CommitRequest, Content, Revisions, Stored};
use crate::vault::packed::Packed;

use super::hosted::{database, message};

/// Revisions (or attachments) copied per transaction.
const BATCH: usize = 500;
/// The setting that says an import is under way, and from which folder.
const SOURCE: &str = "import.source";

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
    let blobs = super::hosted::blobs(args.database.config.clone())?;
    let db = database(args.database)?;
    let vault = block_on(async {
        crate::hosted::schema::check(&db).await?;
        crate::hosted::registry::find(&db, &args.vault).await
    })
    .map_err(message)?;
    // The bytes `put` commits are written by the `record` that names them.
    let staged = Arc::new(crate::hosted::revisions::Staged::default());
    let target = PgMeta::sharing(db.clone(), vault.id, staged.clone());
    let source = Meta::open(&state_dir.join("meta.sqlite")).map_err(message)?;
    let revisions = source.revisions_after(0).map_err(message)?;
    // The folder, and how far its history went: a run cut off carries on only from the
    // same folder with the same history (batch by batch, as the first run cut it).
    let from = format!(
        "{} {}",
        source
            .setting("vault_id")
            .map_err(message)?
            .unwrap_or_else(|| folder.display().to_string()),
        revisions.len()
    );
    let files = source.all_attachments().map_err(message)?;
    if !files.is_empty() && blobs.is_none() && !args.skip_attachments {
        anyhow::bail!(
            "the folder holds {} attachments or private notes, and a hosted vault keeps their bytes in a blob store: name one (NOTEVAULT_BLOB_STORE=s3://BUCKET/PREFIX, or `blob_store` in the config file), or import without them (--skip-attachments)",
            files.len()
        );
    }
    let done = target.committed_seq().map_err(message)?;
    match target.setting(SOURCE).map_err(message)?.filter(|s| !s.is_empty()) {
        Some(under_way) if under_way == from => {
            if done > 0 {
                println!("resuming the import into {} after seq {done}", vault.name);
            }
        }
        Some(_) => anyhow::bail!(
            "an import into {} was cut off, of another folder or of this one before its history changed: run it again with that folder as it was, or delete the vault (`notevault vault delete {}`) and start over",
            vault.name,
            vault.name
        ),
        None if done != 0 || !target.all_notes()?.is_empty() => anyhow::bail!(
            "the hosted vault {} holds notes already: import into a new vault (`notevault vault create NAME`)",
            vault.name
        ),
        None => target.set_setting(SOURCE, &from).map_err(message)?,
    }
    let bytes = PgRevisions::new(db, vault.id, staged);
    let history = History::open(&state_dir.join("history.git")).map_err(message)?;

    let mut seq = 0i64;
    let mut lost = 0usize;
    let mut paths: HashMap<String, String> = HashMap::new();
    for chunk in revisions.chunks(BATCH) {
        // Copied before a cut: only where each note was is needed again.
        if seq + chunk.len() as i64 <= done {
            for rev in chunk {
                match &rev.content_hash {
                    Some(_) => paths.insert(rev.note_id.clone(), rev.path.clone()),
                    None => paths.remove(&rev.note_id),
                };
            }
            seq += chunk.len() as i64;
            continue;
        }
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
                            content: Some(Content::Bytes(Packed::plain(Arc::from(b)))),
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
                    content: Some(Content::Bytes(Packed::plain(Arc::from(b)))),
                });
            }
        }
    }
    put(&bytes, changes)?;
    target.record(&[], &[], &notes, &[]).map_err(message)?;
    let copied = match (&blobs, args.skip_attachments) {
        (Some(blobs), false) => {
            copy_attachments(&target, &**blobs, &folder, &files, &vault.id.to_string())?
        }
        _ => 0,
    };
    target.set_setting(SOURCE, "").map_err(message)?;
    let mut left = Vec::new();
    if files.len() > copied {
        left.push(format!(
            "{} attachments and private notes not copied",
            files.len() - copied
        ));
    }
    println!(
        "imported {} notes, {} revisions and {copied} attachments and private notes into {} ({} revisions copied in this run had no bytes in history{})",
        notes.len(),
        seq,
        vault.name,
        lost,
        left.iter().map(|l| format!("; {l}")).collect::<String>()
    );
    Ok(())
}

/// The folder's attachments (and private notes' ciphertext files) as they are now, each
/// streamed from the folder into the
/// blob store and then recorded (a row, a change and an op, after the notes' seqs), a
/// batch per transaction. One already recorded at its path (by a run cut off) is
/// skipped. The folder is the truth: a file changed since the daemon last saw it goes in
/// as it is now; one gone is skipped. How many are in the vault now.
fn copy_attachments(
    target: &PgMeta,
    blobs: &dyn BlobStore,
    folder: &std::path::Path,
    files: &[AttachmentRow],
    vault: &str,
) -> anyhow::Result<usize> {
    let there: HashMap<String, String> = target
        .all_attachments()
        .map_err(message)?
        .into_iter()
        .map(|a| (a.path, a.sha256))
        .collect();
    let mut in_vault = 0;
    let mut batch: Vec<FileEntry> = Vec::new();
    for row in files {
        if there.contains_key(&row.path) {
            in_vault += 1;
            continue;
        }
        let Some((sha256, size)) = upload(blobs, vault, &folder.join(&row.path))? else {
            continue;
        };
        let mut attachment = crate::record::attachment_of(row.clone());
        attachment.sha256 = sha256;
        attachment.size = size;
        attachment.stamp.size = size;
        attachment.stamp.inode = 0;
        batch.push(FileEntry {
            path: row.path.clone(),
            to: Some(attachment),
            kind: "create".into(),
        });
        in_vault += 1;
        if batch.len() == BATCH {
            record_files(target, std::mem::take(&mut batch))?;
        }
    }
    record_files(target, batch)?;
    Ok(in_vault)
}

/// Stream `file` into the blob store, hashing as it goes: its sha256 and size, `None`
/// when it is gone from the folder.
fn upload(
    blobs: &dyn BlobStore,
    vault: &str,
    file: &std::path::Path,
) -> anyhow::Result<Option<(String, u64)>> {
    use std::io::Read;
    let mut f = match std::fs::File::open(file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => anyhow::bail!("cannot read {}: {e}", file.display()),
    };
    // Chunks of the store's part size, or the file's size when smaller.
    let part = f
        .metadata()
        .map_or(0, |m| m.len())
        .clamp(1, MULTIPART as u64) as usize;
    let mut upload = HashedUpload::new(blobs.begin(vault, None));
    loop {
        let mut chunk = vec![0u8; part];
        let n = f
            .read(&mut chunk)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
        if n == 0 {
            break;
        }
        chunk.truncate(n);
        block_on(upload.write(chunk.into())).map_err(message)?;
    }
    let Uploaded { sha256, size } = block_on(upload.finish()).map_err(message)?;
    Ok(Some((sha256, size)))
}

/// Record `files` (created) in one transaction, at the seqs after the vault's last.
fn record_files(target: &PgMeta, files: Vec<FileEntry>) -> anyhow::Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    let next = target.committed_seq().map_err(message)? + 1;
    let now = crate::clock::timestamp(chrono::Utc::now());
    let (mut changes, mut ops, mut rows) = (Vec::new(), Vec::new(), Vec::new());
    for (f, seq) in files.iter().zip(next..) {
        let (change, op) = crate::record::file_rows(f, seq, "import", &now, None);
        changes.push(change);
        ops.push(op);
        rows.extend(f.to.as_ref().map(crate::record::attachment_row));
    }
    target
        .record_attachments(&changes, &ops, &rows, &[])
        .map_err(message)
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
