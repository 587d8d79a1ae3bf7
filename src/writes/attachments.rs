//! Attachment writes: put an uploaded file in place, remove one. Each applies under the
//! write lock through the same door as a note write (`apply_now`: budget, idempotency
//! receipt) and is recorded by the one recorder as a durable batch, so its receipt
//! leaves only once its bytes are in `history.git`.

use crate::error::{Error, Reason, Result};
use crate::record::{record, Batch, FileEntry};
use crate::state::State;
use crate::vault::attachments::{hash_file, Attachment, Stamp};
use crate::vault::fsio;

use super::{AttachmentFacts, Op, Receipt, ReceiptStatus};

/// Apply an attachment operation as `actor`. The caller holds the write lock.
pub(crate) fn apply(state: &State, op: &Op, actor: &str) -> Result<Receipt> {
    match op {
        Op::PutAttachment {
            path,
            staged,
            sha256,
            size,
            content_type,
        } => put(state, path, staged, sha256, *size, content_type, actor),
        Op::DeleteAttachment { path, sha256 } => delete(state, path, sha256.as_deref(), actor),
        _ => Err(Error::internal("not an attachment operation")),
    }
}

fn receipt(a: &Attachment, seq: i64, created: bool, unchanged: bool) -> Receipt {
    Receipt {
        status: ReceiptStatus::Applied,
        slug: a.path.clone(),
        note_id: String::new(),
        version_id: String::new(),
        content_hash: format!("sha256:{}", a.sha256),
        committed_seq: seq,
        note: None,
        renamed: false,
        unchanged,
        links_updated: 0,
        links_failed: Vec::new(),
        flow_back_error: None,
        pending_id: None,
        created,
        attachment: Some(AttachmentFacts::from(a)),
        folder: None,
    }
}

fn put(
    state: &State,
    path: &str,
    staged: &str,
    sha256: &str,
    size: u64,
    content_type: &str,
    actor: &str,
) -> Result<Receipt> {
    let staged = state.paths.root.join(staged);
    let safe = match state.paths.resolve_new(path) {
        Ok(s) => s,
        Err(e) => {
            fsio::discard_temp(&staged);
            return Err(e);
        }
    };
    if safe.abs.exists() {
        fsio::discard_temp(&staged);
        // The same bytes at the same place: a retry whose first answer was lost.
        if hash_file(&safe.abs).is_ok_and(|(have, _, _)| have == sha256) {
            if let Some(a) = state.attachments.read().get(&safe.rel) {
                return Ok(receipt(a, state.committed_seq(), false, true));
            }
        }
        return Err(
            Error::new(Reason::NAME_COLLISION, format!("{path:?} already exists"))
                .with_meta("path", path),
        );
    }
    fsio::place_temp(&staged, &safe.abs)?;
    let meta = std::fs::metadata(&safe.abs)
        .map_err(|e| Error::internal(format!("cannot read {path:?} just written: {e}")))?;
    let attachment = Attachment {
        path: safe.rel.clone(),
        size,
        sha256: sha256.to_string(),
        content_type: content_type.to_string(),
        modified_at: meta
            .modified()
            .map(chrono::DateTime::<chrono::Utc>::from)
            .unwrap_or_default(),
        stamp: Stamp::of(&meta),
    };
    let recorded = record(
        state,
        Batch {
            actor,
            subject: format!("upload {}", safe.rel),
            entries: Vec::new(),
            files: vec![FileEntry {
                path: safe.rel.clone(),
                to: Some(attachment.clone()),
                kind: "create".into(),
            }],
            whole_vault: None,
            durable: true,
            marks: Vec::new(),
        },
    )?;
    let seq = recorded
        .file_seqs
        .first()
        .copied()
        .unwrap_or(state.committed_seq());
    let mut r = receipt(&attachment, seq, true, false);
    r.flow_back_error = recorded.history_problem;
    Ok(r)
}

fn delete(state: &State, path: &str, sha256: Option<&str>, actor: &str) -> Result<Receipt> {
    let safe = state.paths.resolve(path)?;
    let Some(known) = state.attachments.read().get(&safe.rel).cloned() else {
        return Err(Error::new(
            Reason::ATTACHMENT_NOT_FOUND,
            format!("no attachment {path:?}"),
        )
        .with_meta("path", path));
    };
    let want = sha256.unwrap_or(&known.sha256);
    fsio::remove_checked(&safe.abs, want)?;
    let recorded = record(
        state,
        Batch {
            actor,
            subject: format!("delete {}", safe.rel),
            entries: Vec::new(),
            files: vec![FileEntry {
                path: safe.rel.clone(),
                to: None,
                kind: "delete".into(),
            }],
            whole_vault: None,
            durable: true,
            marks: Vec::new(),
        },
    )?;
    let seq = recorded
        .file_seqs
        .first()
        .copied()
        .unwrap_or(state.committed_seq());
    let mut r = receipt(&known, seq, false, false);
    r.flow_back_error = recorded.history_problem;
    Ok(r)
}
