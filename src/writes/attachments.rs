//! Attachment writes: put an uploaded file in place, move one to `.trash/`. Each applies
//! under the write lock through the same door as a note write (`apply_now`: budget,
//! idempotency receipt) and is recorded by the one recorder. Its receipt leaves once the
//! file is durable in the folder (temp file, fsync, rename, fsync of the folder: DESIGN's
//! invariant 3) and its rows are written; it waits for `history.git` too (a durable batch),
//! except for a large upload ([`HISTORY_ON_PATH_BELOW`]), whose history commit follows on
//! the history thread.

use crate::error::{Error, Reason, Result};
use crate::record::{record, record_settling, Batch, FileEntry};
use crate::state::{State, WriteLock};
use crate::vault::attachments::{Attachment, Stamp};
use crate::vault::fsio;
use crate::vault::observe::{hash_file, sha256_hex};

use super::{settlement, AttachmentFacts, Keep, Op, Receipt, ReceiptStatus, Subject};

/// Uploads of this many bytes or more are recorded without waiting for history: writing
/// their history object costs a second copy of the file and a second fsync, as much as
/// the upload itself. The receipt still waits for the file to be durable in the folder,
/// the truth (the queued commit reads it from there; a crash before it lands finds history
/// behind at the next start, which records the folder as found). Smaller ones wait for
/// history too: a few milliseconds.
pub const HISTORY_ON_PATH_BELOW: u64 = 4 * 1024 * 1024;

/// Attachment bytes (and private notes' ciphertext) live in the vault folder; a hosted
/// vault has none, and keeps them in the blob store (`storage::blobs`): without one,
/// `BLOB_STORE_UNAVAILABLE`.
pub fn blob_store(state: &State) -> Result<()> {
    match &state.shared {
        None => Ok(()),
        Some(shared) if shared.blobs.is_some() => Ok(()),
        Some(_) => Err(unconfigured()),
    }
}

fn unconfigured() -> Error {
    Error::new(
        Reason::BLOB_STORE_UNAVAILABLE,
        "attachments and private notes of a hosted vault are kept in blob storage, which is not configured",
    )
}

/// Whether this vault's attachments are rows over a blob store (hosted), not files.
fn in_blobs(state: &State) -> bool {
    state.shared.is_some()
}

/// Apply an attachment operation as `actor`. Under the write lock (`write`). With
/// `keep`, a change recorded keeps its receipt, budget count and audit event in the
/// transaction that records it: the answer's `bool` says it did (a move's receipt counts
/// the links rewritten after, and is kept after).
pub(crate) fn apply(
    state: &State,
    write: &WriteLock<'_>,
    op: &Op,
    actor: &str,
    keep: Option<&Keep<'_>>,
) -> Result<(Receipt, bool)> {
    blob_store(state)?;
    let by = By { actor, keep };
    let settled = |r: Receipt| {
        let kept = keep.is_some() && !r.unchanged;
        (r, kept)
    };
    match op {
        Op::PutAttachment {
            path,
            staged,
            sha256,
            size,
            content_type,
        } if in_blobs(state) => {
            put_blob(state, write, path, sha256, *size, content_type, by).map(settled)
        }
        Op::PutAttachment {
            path,
            staged,
            sha256,
            size,
            content_type,
        } => put(state, write, path, staged, sha256, *size, content_type, by).map(settled),
        Op::PutPrivate {
            path,
            ciphertext,
            base,
        } if in_blobs(state) => {
            put_private_blob(state, write, path, ciphertext, base.as_deref(), by).map(settled)
        }
        Op::PutPrivate {
            path,
            ciphertext,
            base,
        } => put_private(state, write, path, ciphertext, base.as_deref(), by).map(settled),
        Op::DeleteAttachment { path, sha256 } => {
            delete(state, write, path, sha256.as_deref(), by).map(settled)
        }
        Op::MoveAttachment { path, to, sha256 } => {
            move_(state, write, path, to, sha256.as_deref(), actor).map(|r| (r, false))
        }
        _ => Err(Error::internal("not an attachment operation")),
    }
}

/// What a queued attachment change shows a reviewer, and the path it is about (`None`
/// for another operation). Checks it could apply now, as a queued note write does.
pub(crate) fn preview(state: &State, op: &Op) -> Result<Option<(String, String)>> {
    Ok(match op {
        Op::DeleteAttachment { path, sha256 } => {
            let known = existing(state, path, sha256.as_deref())?;
            Some((
                format!(
                    "delete attachment {} ({} bytes, sha256 {})\n",
                    known.path, known.size, known.sha256
                ),
                known.path.clone(),
            ))
        }
        Op::MoveAttachment { path, to, sha256 } => {
            let known = existing(state, path, sha256.as_deref())?;
            let dest = destination(state, &known, to)?;
            let linking = linking_to(state, &known);
            Some((
                format!(
                    "move attachment {} -> {}\n  links rewritten in: {}\n",
                    known.path,
                    dest.rel,
                    if linking.is_empty() {
                        "none".to_string()
                    } else {
                        linking.join(", ")
                    }
                ),
                known.path.clone(),
            ))
        }
        _ => None,
    })
}

/// The attachment at `path`, if it still has the bytes `sha256` names.
fn existing(state: &State, path: &str, sha256: Option<&str>) -> Result<std::sync::Arc<Attachment>> {
    let safe = state.paths.resolve(path)?;
    let known = state
        .attachments
        .read()
        .get(&safe.rel)
        .cloned()
        .ok_or_else(|| {
            Error::new(
                Reason::ATTACHMENT_NOT_FOUND,
                format!("no attachment {path:?}"),
            )
            .with_meta("path", path)
        })?;
    if sha256.is_some_and(|want| want != known.sha256) {
        return Err(Error::new(
            Reason::VERSION_MOVED,
            format!("{path:?} no longer has the bytes that sha256 names"),
        )
        .with_meta("sha256", known.sha256.clone()));
    }
    Ok(known)
}

/// Where an attachment may move: a name the API may create, not a note's (`.md`), one
/// level deep at most in a folder that does not exist yet, nothing there.
fn destination(
    state: &State,
    known: &Attachment,
    to: &str,
) -> Result<crate::vault::path::SafePath> {
    let dest = state.paths.resolve_new(to)?;
    if !crate::vault::path::is_attachment_name(crate::vault::path::file_name_of(&dest.rel)) {
        return Err(Error::invalid_field(
            "name",
            format!(
                "{to:?} is not an attachment's name (a note's `.md`, or a name the vault ignores)"
            ),
        ));
    }
    super::plan::folder_creatable(state, &dest.rel)?;
    // A hosted vault has no folder: its attachments' catalog is what is there.
    let taken = if in_blobs(state) {
        state.attachments.read().get(&dest.rel).is_some()
    } else {
        std::fs::symlink_metadata(&dest.abs).is_ok()
    };
    if dest.rel != known.path && taken {
        return Err(Error::new(
            Reason::NAME_COLLISION,
            format!("{:?} already exists", dest.rel),
        )
        .with_meta("path", dest.rel.clone()));
    }
    Ok(dest)
}

/// The slugs of the notes whose links or embeds resolve to `a`.
fn linking_to(state: &State, a: &Attachment) -> Vec<String> {
    let catalog = state.catalog.read();
    let attachments = state.attachments.read();
    catalog
        .iter()
        .filter(|note| {
            let folder = crate::vault::path::folder_of(note.slug());
            note.links.iter().any(|l| {
                crate::vault::attachments::links_attachment(l)
                    && attachments
                        .resolve(folder, l)
                        .is_some_and(|r| r.path == a.path)
            })
        })
        .map(|n| n.slug().to_string())
        .collect()
}

/// Move an attachment: its stamp checked before and after the rename (an editor's change
/// meanwhile is `VERSION_MOVED` and the rename is undone), one durable batch (it leaves
/// one path and arrives at the other), then the links to it rewritten in each note that
/// had one, each its own revision.
fn move_(
    state: &State,
    write: &WriteLock<'_>,
    path: &str,
    to: &str,
    sha256: Option<&str>,
    actor: &str,
) -> Result<Receipt> {
    let known = existing(state, path, sha256)?;
    let dest = destination(state, &known, to)?;
    if dest.rel == known.path {
        return Ok(receipt(&known, state.committed_seq(), false, true));
    }
    let linking = linking_to(state, &known);
    // A hosted attachment's bytes are named by their sha256: a move changes rows only.
    if !in_blobs(state) {
        settle_history(state, &known);
        let from_abs = state.paths.root.join(&known.path);
        fsio::move_unchanged(&from_abs, &dest.abs, &|p: &std::path::Path| {
            std::fs::metadata(p).ok().map(|m| Stamp::of(&m)) == Some(known.stamp)
        })?;
    }
    let moved = Attachment {
        path: dest.rel.clone(),
        ..(*known).clone()
    };
    let recorded = record(
        state,
        write,
        Batch {
            actor,
            subject: format!("move {} -> {}", known.path, dest.rel),
            entries: Vec::new(),
            files: vec![
                FileEntry {
                    path: dest.rel.clone(),
                    to: Some(moved.clone()),
                    kind: "create".into(),
                },
                FileEntry {
                    path: known.path.clone(),
                    to: None,
                    kind: "delete".into(),
                },
            ],
            whole_vault: None,
            durable: true,
            marks: vec![(
                "Notevault-Attachment-Move".to_string(),
                format!("{} -> {}", known.path, dest.rel),
            )],
        },
    )?;
    let (updated, failed) = super::links::rewrite_attachment_links(
        state,
        write,
        &known.path,
        &dest.rel,
        actor,
        &linking,
    );
    let mut r = receipt(&moved, state.committed_seq(), false, false);
    r.flow_back_error = recorded.history_problem;
    r.links_updated = updated;
    r.links_failed = failed;
    r.renamed = true;
    Ok(r)
}

/// A large upload's history commit reads the file late, at its path: before the file
/// leaves that path, let it read the bytes it records (as a note write does for a note
/// whose bytes are not kept).
fn settle_history(state: &State, a: &Attachment) {
    if a.size >= HISTORY_ON_PATH_BELOW {
        state.history.flush(std::time::Duration::from_secs(30));
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
        renamed: false,
        unchanged,
        links_updated: 0,
        links_failed: Vec::new(),
        flow_back_error: None,
        pending_id: None,
        created,
        subject: Subject::Attachment(AttachmentFacts::from(a)),
    }
}

#[allow(
    clippy::too_many_arguments,
    reason = "the write lock is one more argument: the proof it is held"
)]
fn put(
    state: &State,
    write: &WriteLock<'_>,
    path: &str,
    staged: &str,
    sha256: &str,
    size: u64,
    content_type: &str,
    by: By<'_>,
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
    let meta = std::fs::metadata(&safe.abs).map_err(|e| {
        Error::internal(format!("cannot read {path:?} just written: {e}")).with_cause(e)
    })?;
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
    let durable = size < HISTORY_ON_PATH_BELOW;
    record_upload(state, write, by, &safe.rel, attachment, durable)
}

/// Write a private note's ciphertext file (see [`Op::PutPrivate`]): atomically, checked
/// against the base the device read (the swapped-out bytes are checked too), one durable
/// batch. The bytes are a device's envelope; the daemon never decrypts them.
fn put_private(
    state: &State,
    write: &WriteLock<'_>,
    path: &str,
    ciphertext: &str,
    base: Option<&str>,
    by: By<'_>,
) -> Result<Receipt> {
    let bytes = private_envelope(path, ciphertext)?;
    let (safe, expect) = match base {
        None => {
            let safe = state.paths.resolve_new(path)?;
            super::plan::folder_creatable(state, &safe.rel)?;
            if hash_file(&safe.abs).is_ok_and(|(have, _, _)| have == sha256_hex(&bytes)) {
                if let Some(a) = state.attachments.read().get(&safe.rel) {
                    return Ok(receipt(a, state.committed_seq(), false, true));
                }
            }
            (safe, fsio::Expect::Absent)
        }
        Some(want) => {
            let safe = state.paths.resolve(path)?;
            let want = want.strip_prefix("sha256:").unwrap_or(want);
            let current = std::fs::read(&safe.abs).map_err(|_| Error::not_found(path))?;
            if sha256_hex(&current) != want {
                return Err(Error::new(
                    Reason::VERSION_MOVED,
                    format!("{path:?} changed since the base the device read"),
                )
                .with_meta("path", path));
            }
            (
                safe,
                fsio::Expect::Hash(crate::vault::content_hash(&current)),
            )
        }
    };
    fsio::atomic_write(&safe.abs, &bytes, &expect)?;
    let attachment = crate::vault::attachments::observe(&state.paths.root, &safe.rel, None)
        .map_err(|e| {
            Error::internal(format!("cannot read {path:?} just written: {e}")).with_cause(e)
        })?;
    let kind = if base.is_none() { "create" } else { "update" };
    let subject = format!("private note {}", safe.rel);
    record_file(
        state,
        write,
        by,
        subject,
        (&safe.rel, kind, true),
        Some(attachment.clone()),
        &attachment,
    )
}

/// A private note's ciphertext as a device sent it (standard base64): an envelope, at a
/// path of a private note. Never a plaintext.
pub fn private_envelope(path: &str, ciphertext: &str) -> Result<Vec<u8>> {
    use base64::Engine;
    if !crate::vault::is_private_note(path) {
        return Err(Error::invalid_field(
            "path",
            format!(
                "a private note's file ends in {}",
                crate::vault::PRIVATE_SUFFIX
            ),
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(ciphertext)
        .map_err(|_| Error::invalid_field("content_base64", "is not valid standard base64"))?;
    if !bytes.starts_with(crate::vault::PRIVATE_MAGIC) {
        return Err(Error::invalid_field(
            "content_base64",
            "is not a private-note envelope (it must start with `notevault-private v1`)",
        ));
    }
    Ok(bytes)
}

/// A hosted vault's private note, recorded: its ciphertext is in the blob store already
/// (the push route put it there, named by its sha256), so, like an upload, it is a row.
/// `base` (`sha256:<hex>`) is the ciphertext the device last read. Under the write lock.
fn put_private_blob(
    state: &State,
    write: &WriteLock<'_>,
    path: &str,
    ciphertext: &str,
    base: Option<&str>,
    by: By<'_>,
) -> Result<Receipt> {
    let bytes = private_envelope(path, ciphertext)?;
    let sha256 = sha256_hex(&bytes);
    let rel = match base {
        None => state.paths.resolve_new(path)?.rel,
        Some(_) => state.paths.resolve(path)?.rel,
    };
    let known = state.attachments.read().get(&rel).cloned();
    let kind = match (base, &known) {
        // The same bytes: a retry whose first answer was lost.
        (None, Some(k)) if k.sha256 == sha256 => {
            return Ok(receipt(k, state.committed_seq(), false, true))
        }
        (None, Some(_)) => {
            return Err(
                Error::new(Reason::NAME_COLLISION, format!("{path:?} already exists"))
                    .with_meta("path", path),
            )
        }
        (None, None) => "create",
        (Some(_), None) => return Err(Error::not_found(path)),
        (Some(want), Some(k)) if want.strip_prefix("sha256:").unwrap_or(want) != k.sha256 => {
            return Err(Error::new(
                Reason::VERSION_MOVED,
                format!("{path:?} changed since the base the device read"),
            )
            .with_meta("path", path))
        }
        (Some(_), Some(_)) => "update",
    };
    let now = chrono::Utc::now();
    let size = bytes.len() as u64;
    let attachment = Attachment {
        content_type: crate::vault::attachments::sniff(&bytes[..bytes.len().min(512)], &rel),
        path: rel.clone(),
        size,
        sha256,
        modified_at: now,
        stamp: Stamp {
            size,
            mtime_ns: now.timestamp_nanos_opt().unwrap_or_default(),
            inode: 0,
        },
    };
    record_file(
        state,
        write,
        by,
        format!("private note {rel}"),
        (&rel, kind, true),
        Some(attachment.clone()),
        &attachment,
    )
}

fn delete(
    state: &State,
    write: &WriteLock<'_>,
    path: &str,
    sha256: Option<&str>,
    by: By<'_>,
) -> Result<Receipt> {
    let safe = state.paths.resolve(path)?;
    let Some(known) = state.attachments.read().get(&safe.rel).cloned() else {
        return Err(Error::new(
            Reason::ATTACHMENT_NOT_FOUND,
            format!("no attachment {path:?}"),
        )
        .with_meta("path", path));
    };
    let want = sha256.unwrap_or(&known.sha256);
    if !in_blobs(state) {
        settle_history(state, &known);
        // Into `.trash/`, like a deleted note (Obsidian's convention): the bytes stay at
        // hand in the folder, and history keeps them too.
        let trash = crate::storage::folder::trash_path(&state.paths.root, &safe.rel);
        fsio::move_checked(&safe.abs, &trash, want)?;
    } else if want != known.sha256 {
        // History keeps the bytes: the blob stays, only the row goes.
        return Err(Error::new(
            Reason::VERSION_MOVED,
            format!("{path:?} no longer has the bytes that sha256 names"),
        )
        .with_meta("sha256", known.sha256.clone()));
    }
    let subject = format!("delete {}", safe.rel);
    record_file(
        state,
        write,
        by,
        subject,
        (&safe.rel, "delete", true),
        None,
        &known,
    )
}

/// A hosted vault's upload, recorded: its bytes are in the blob store already (the
/// upload route streamed them there, named by their sha256), so putting it in place is
/// its attachment row, written by the recorder like a local upload's. Under the write
/// lock (`write`).
fn put_blob(
    state: &State,
    write: &WriteLock<'_>,
    path: &str,
    sha256: &str,
    size: u64,
    content_type: &str,
    by: By<'_>,
) -> Result<Receipt> {
    let safe = state.paths.resolve_new(path)?;
    if let Some(there) = state.attachments.read().get(&safe.rel) {
        // The same bytes at the same place: a retry whose first answer was lost.
        if there.sha256 == sha256 {
            return Ok(receipt(there, state.committed_seq(), false, true));
        }
        return Err(
            Error::new(Reason::NAME_COLLISION, format!("{path:?} already exists"))
                .with_meta("path", path),
        );
    }
    let now = chrono::Utc::now();
    let attachment = Attachment {
        path: safe.rel.clone(),
        size,
        sha256: sha256.to_string(),
        content_type: content_type.to_string(),
        modified_at: now,
        // No file: the stamp is the size and the time it was recorded.
        stamp: Stamp {
            size,
            mtime_ns: now.timestamp_nanos_opt().unwrap_or_default(),
            inode: 0,
        },
    };
    record_upload(state, write, by, &safe.rel, attachment, true)
}

/// Record an uploaded attachment (its bytes in place, in the folder or the blob store);
/// `durable`: its receipt waits for its history commit.
fn record_upload(
    state: &State,
    write: &WriteLock<'_>,
    by: By<'_>,
    rel: &str,
    attachment: Attachment,
    durable: bool,
) -> Result<Receipt> {
    let subject = format!("upload {rel}");
    record_file(
        state,
        write,
        by,
        subject,
        (rel, "create", durable),
        Some(attachment.clone()),
        &attachment,
    )
}

/// Record one change of a file kept by path (an attachment, a private note): one batch
/// at `rel` (`kind`: create, update, delete; `durable`: the receipt waits for history),
/// and its receipt, which tells of `facts` (the file as it is now, or was).
fn record_file(
    state: &State,
    write: &WriteLock<'_>,
    by: By<'_>,
    subject: String,
    (rel, kind, durable): (&str, &str, bool),
    to: Option<Attachment>,
    facts: &Attachment,
) -> Result<Receipt> {
    // The receipt is made once, as the transaction keeps it: a replay answers the same.
    let made = std::cell::RefCell::new(None);
    let settle = |seqs: &[i64], problem: Option<&str>| {
        let seq = seqs.first().copied().unwrap_or(state.committed_seq());
        let mut r = receipt(facts, seq, kind == "create", false);
        r.flow_back_error = problem.map(str::to_string);
        let now = crate::clock::timestamp(chrono::Utc::now());
        let settled = match by.keep {
            Some(keep) => vec![settlement(&r, keep, &now)?],
            None => Vec::new(),
        };
        *made.borrow_mut() = Some(r);
        Ok(settled)
    };
    let recorded = record_settling(
        state,
        write,
        Batch {
            actor: by.actor,
            subject,
            entries: Vec::new(),
            files: vec![FileEntry {
                path: rel.to_string(),
                to,
                kind: kind.into(),
            }],
            whole_vault: None,
            durable,
            marks: Vec::new(),
        },
        || Ok(()),
        None,
        Some(&settle),
    )?;
    made.into_inner().ok_or_else(|| {
        Error::internal(format!(
            "{rel:?} was recorded without its receipt (history: {:?})",
            recorded.history_problem
        ))
    })
}

/// Who makes an attachment change, and what the write keeps with it (see [`apply`]).
#[derive(Clone, Copy)]
pub(crate) struct By<'a> {
    pub actor: &'a str,
    pub keep: Option<&'a Keep<'a>>,
}
