//! The device sync plane: reads of the op log, the snapshot (a consistent cut at one
//! seq), device checkpoints, compaction, and the wrapped-key state of private notes.
//!
//! The op log itself is appended by the one recorder (`record::record`), one op per
//! recorded change at its `committed_seq`, in the transaction of its revision; nothing
//! here writes an op. Device pushes go through the one write pipeline (`writes`).
//!
//! Private notes: the daemon stores only ciphertext and the wrapped data key. The
//! wrapped-key state here holds what a device sends (a KDF salt, its public scrypt
//! constants, the data key wrapped under the passphrase's key and, optionally, under a
//! recovery key); it never sees a passphrase or a data key.

pub mod e2ee;
pub mod push;

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use crate::clock::timestamp;
use crate::error::{Error, Reason, Result};
use crate::state::State;
use crate::storage::rows::OpRow;
use crate::vault::content_hash;

/// One op as a device reads it: the row, and the note's bytes when they are carried.
#[derive(Debug, Clone)]
pub struct Op {
    pub row: OpRow,
    /// The bytes of a standard note's version: carried when that version is still the
    /// note's current one. `None` for deletes, attachments and superseded versions (a
    /// later op of the same note carries its newer state: apply only the path change).
    pub content: Option<Vec<u8>>,
    /// A later op of the same note exists (`content` is not carried).
    pub superseded: bool,
}

/// One page of ops.
#[derive(Debug)]
pub struct OpsPage {
    pub ops: Vec<Op>,
    /// The seq to read after next (the last op's seq, or `after_seq` for an empty page).
    pub next_after_seq: i64,
    /// More ops up to `committed_seq` wait after this page.
    pub has_more: bool,
    pub committed_seq: i64,
    pub compacted_through_seq: i64,
}

/// The largest page of ops or snapshot entries.
pub const MAX_PAGE: usize = 500;
/// The page size when none is asked for.
pub const DEFAULT_PAGE: usize = 100;

/// `SYNC_COMPACTED`: ops after `after` were compacted away (through `horizon`).
fn compacted(after: i64, horizon: i64) -> Error {
    Error::new(
        Reason::SYNC_COMPACTED,
        format!("ops after seq {after} were compacted through seq {horizon}"),
    )
    .with_meta("compacted_through_seq", horizon.to_string())
}

/// Ops with a seq above `after`, up to the committed seq (a batch recorded in two
/// transactions is never seen half), at most `page_size`.
pub fn ops(state: &State, after: i64, page_size: usize) -> Result<OpsPage> {
    let committed = state.committed_seq();
    if after < 0 {
        return Err(Error::invalid_field("after_seq", "must be 0 or more"));
    }
    if after > committed {
        return Err(Error::invalid_field(
            "after_seq",
            format!("is beyond the committed seq {committed}; read again with at most it"),
        )
        .with_meta("committed_seq", committed.to_string()));
    }
    let horizon = state.meta.compacted_through()?;
    if after < horizon {
        return Err(compacted(after, horizon));
    }
    let rows = state.meta.ops_page(after, committed, page_size + 1)?;
    // Compacted while this page was read: it may miss ops.
    let horizon_now = state.meta.compacted_through()?;
    if after < horizon_now {
        return Err(compacted(after, horizon_now));
    }
    let has_more = rows.len() > page_size;
    let mut ops = Vec::with_capacity(rows.len().min(page_size));
    for row in rows.into_iter().take(page_size) {
        let (content, superseded) = match (&row.note_id, &row.version_id, &row.content_hash) {
            (Some(note_id), Some(version), Some(hash))
                if row.visibility == "standard" && row.kind != "delete" =>
            {
                match current_bytes(state, note_id, version, hash)? {
                    Some(bytes) => (Some(bytes), false),
                    None => (None, true),
                }
            }
            (None, _, Some(hash)) if row.visibility == "private" => {
                match private_bytes(state, &row.path, hash)? {
                    Some(bytes) => (Some(bytes), false),
                    None => (None, true),
                }
            }
            _ => (None, false),
        };
        ops.push(Op {
            row,
            content,
            superseded,
        });
    }
    let next_after_seq = ops.last().map_or(after, |o| o.row.seq);
    Ok(OpsPage {
        ops,
        next_after_seq,
        has_more,
        committed_seq: committed,
        compacted_through_seq: horizon,
    })
}

/// The bytes of a note's version when it is the note's current one (`None`: the note
/// has moved on, or is gone). The catalog's bytes when it keeps them, else the file,
/// checked against the version's hash.
fn current_bytes(
    state: &State,
    note_id: &str,
    version: &str,
    hash: &str,
) -> Result<Option<Vec<u8>>> {
    let note = state.catalog.read().get_by_id(note_id).cloned();
    let Some(note) = note.filter(|n| n.version_id == version) else {
        return Ok(None);
    };
    if let Some(bytes) = &note.content {
        return Ok(Some(bytes.bytes().into_owned()));
    }
    let abs = state.paths.resolve(&note.path)?.abs;
    match std::fs::read(abs) {
        Ok(bytes) if content_hash(&bytes) == hash => Ok(Some(bytes)),
        // Changed on disk a moment ago: its op is on its way.
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::internal(format!("cannot read {}: {e}", note.path)).with_cause(e)),
    }
}

/// A private note's ciphertext when the file still has the bytes `hash`
/// (`sha256:<hex>`) names (`None`: it changed since, or is gone).
fn private_bytes(state: &State, path: &str, hash: &str) -> Result<Option<Vec<u8>>> {
    // A hosted vault's row says whether the blob is still those bytes: no fetch if not.
    let moved_on = state.shared.is_some()
        && state
            .attachments
            .read()
            .get(path)
            .is_none_or(|a| format!("sha256:{}", a.sha256) != hash);
    if moved_on {
        return Ok(None);
    }
    Ok(private_file(state, path)?.and_then(|(bytes, now)| (now == hash).then_some(bytes)))
}

/// A private note's file as it is now: its ciphertext and `sha256:<hex>` (`None`: gone).
/// A hosted vault's is the blob its row names.
fn private_file(state: &State, path: &str) -> Result<Option<(Vec<u8>, String)>> {
    if let Some(blobs) = state.shared.as_ref().and_then(|s| s.blobs.as_deref()) {
        let Some(row) = state.attachments.read().get(path).cloned() else {
            return Ok(None);
        };
        let bytes = blob_bytes(blobs, &state.vault_id, &row.sha256)?;
        return Ok(Some((bytes, format!("sha256:{}", row.sha256))));
    }
    let abs = state.paths.resolve(path)?.abs;
    match std::fs::read(abs) {
        Ok(bytes) => {
            let hex = crate::vault::observe::sha256_hex(&bytes);
            Ok(Some((bytes, format!("sha256:{hex}"))))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::internal(format!("cannot read {path}: {e}")).with_cause(e)),
    }
}

/// The whole blob `sha256` of a hosted vault, read from a request's blocking task (the
/// store's client runs on the request's runtime).
fn blob_bytes(
    blobs: &dyn crate::storage::blobs::BlobStore,
    vault: &str,
    sha256: &str,
) -> Result<Vec<u8>> {
    use futures::StreamExt;
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| Error::internal("the blob store is read from a request's task"))?;
    runtime.block_on(async {
        let mut stream = blobs.get(vault, sha256, None).await?;
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                Error::new(
                    crate::error::Reason::BLOB_STORE_UNAVAILABLE,
                    format!("the blob store stopped sending a private note: {e}"),
                )
                .with_retry_after(crate::storage::blobs::RETRY_AFTER_SECONDS)
            })?;
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    })
}

/// The bytes of a note's version: current bytes, else history's.
fn version_bytes(state: &State, row: &OpRow) -> Result<Vec<u8>> {
    let (Some(note_id), Some(version), Some(hash)) =
        (&row.note_id, &row.version_id, &row.content_hash)
    else {
        return Err(Error::internal("a snapshot entry without a version"));
    };
    if let Some(bytes) = current_bytes(state, note_id, version, hash)? {
        return Ok(bytes);
    }
    let revision = state.meta.revision(version)?.ok_or_else(|| {
        Error::internal(format!(
            "the revision {version} of a live note is not recorded"
        ))
    })?;
    crate::queries::history::revision_content(state, &revision)?
        .ok_or_else(|| Error::internal(format!("the revision {version} is a delete")))
}

/// Where a snapshot page starts: the cut's seq, the compaction horizon when the cut was
/// taken, and the last path answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub at: i64,
    pub horizon: i64,
    pub after_path: String,
}

/// A snapshot whose cut a compaction has passed: its later pages could miss notes.
fn cut_compacted() -> Error {
    Error::invalid_field(
        "page_token",
        "the op log was compacted since this snapshot's first page; read the snapshot again from its first page",
    )
}

/// One live note (standard or private) or attachment of a snapshot.
#[derive(Debug)]
pub struct Entry {
    pub row: OpRow,
    /// A standard note's bytes at the cut, or a private note's ciphertext as the file
    /// holds it now (`None` for attachments, which a device reads with
    /// `GET /v1/attachments/{file_name}`, and for a private note deleted since the cut).
    /// A private note changed after the cut carries its newer ciphertext, and `row`'s
    /// `content_hash` is that file's: a device never starts from nothing for it, and the
    /// ops after the cut bring the same bytes again (a device skips bytes it has).
    pub content: Option<Vec<u8>>,
}

/// One page of a snapshot.
#[derive(Debug)]
pub struct SnapshotPage {
    /// The cut: every entry of every page is the state at this seq; a device continues
    /// with ops after it.
    pub seq: i64,
    pub entries: Vec<Entry>,
    /// Where the next page starts (`None`: this was the last page).
    pub next: Option<Cursor>,
}

/// A page of the snapshot at `cursor` (`None`: a new snapshot at the committed seq),
/// by path.
pub fn snapshot(state: &State, cursor: Option<Cursor>, page_size: usize) -> Result<SnapshotPage> {
    // A compaction drops ops below its horizon that a later op supersedes: one that runs
    // after a cut was taken may drop what the cut needs, so a cut lives only while the
    // horizon it was taken at holds.
    let first = cursor.is_none();
    let (cursor, rows) = loop {
        let horizon = state.meta.compacted_through()?;
        let cursor = match &cursor {
            Some(c) if c.horizon != horizon => return Err(cut_compacted()),
            Some(c) => c.clone(),
            None => Cursor {
                at: state.committed_seq(),
                horizon,
                after_path: String::new(),
            },
        };
        let rows = state
            .meta
            .live_at(cursor.at, &cursor.after_path, page_size + 1)?;
        match (state.meta.compacted_through()? == horizon, first) {
            (true, _) => break (cursor, rows),
            (false, true) => continue,
            (false, false) => return Err(cut_compacted()),
        }
    };
    let more = rows.len() > page_size;
    let mut entries = Vec::with_capacity(rows.len().min(page_size));
    for mut row in rows.into_iter().take(page_size) {
        let content = match (&row.note_id, row.visibility.as_str(), &row.content_hash) {
            (Some(_), "standard", _) => Some(version_bytes(state, &row)?),
            (None, "private", Some(_)) => match private_file(state, &row.path)? {
                Some((bytes, hash)) => {
                    row.content_hash = Some(hash);
                    Some(bytes)
                }
                None => None,
            },
            _ => None,
        };
        entries.push(Entry { row, content });
    }
    let next = match (more, entries.last()) {
        (true, Some(last)) => Some(Cursor {
            at: cursor.at,
            horizon: cursor.horizon,
            after_path: last.row.path.clone(),
        }),
        _ => None,
    };
    Ok(SnapshotPage {
        seq: cursor.at,
        entries,
        next,
    })
}

/// Record that `device_id` has applied the ops up to `seq` (a checkpoint only moves
/// forward). `seq` beyond the committed seq is refused.
pub fn checkpoint(state: &State, device_id: &str, seq: i64) -> Result<i64> {
    let committed = state.committed_seq();
    if seq > committed {
        return Err(Error::invalid_field(
            "seq",
            format!("is beyond the committed seq {committed}"),
        ));
    }
    state
        .meta
        .set_checkpoint(device_id, seq, &timestamp(Utc::now()))?;
    Ok(committed)
}

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    /// The horizon now: ops after `after_seq` below it are refused as `SYNC_COMPACTED`.
    pub compacted_through_seq: i64,
    pub dropped: usize,
}

/// A checkpoint is live (holds compaction back) this long after the device last
/// checked in; a device gone longer recovers through the snapshot.
pub const DEVICE_TTL_DAYS: i64 = 90;

/// Compact the op log as of `now`: the horizon is the newest op older than the
/// retention (`sync_retention_days`), held back to the oldest live checkpoint (a device
/// that checked in within [`DEVICE_TTL_DAYS`]). Below it, only the latest op of each
/// note and attachment and the delete tombstones stay.
pub fn compact(state: &State, now: DateTime<Utc>) -> Result<Compacted> {
    let retention = Duration::days(i64::from(state.config.sync_retention_days));
    let cutoff = timestamp(now - retention);
    let live_since = timestamp(now - Duration::days(DEVICE_TTL_DAYS));
    let mut horizon = state
        .meta
        .last_op_seq_before(&cutoff)?
        .min(state.committed_seq());
    for c in state.meta.checkpoints()? {
        if c.updated_at > live_since {
            horizon = horizon.min(c.seq);
        }
    }
    let previous = state.meta.compacted_through()?;
    if horizon <= previous {
        return Ok(Compacted {
            compacted_through_seq: previous,
            dropped: 0,
        });
    }
    let dropped = state.meta.compact_ops(horizon)?;
    tracing::info!(through = horizon, dropped, "sync ops compacted");
    Ok(Compacted {
        compacted_through_seq: horizon,
        dropped,
    })
}

/// Compact every `every` until the state is dropped (the daemon's timer).
pub fn compact_periodically(state: std::sync::Weak<State>, every: std::time::Duration) {
    loop {
        std::thread::sleep(every);
        let Some(state) = state.upgrade() else { return };
        if let Err(e) = compact(&state, Utc::now()) {
            tracing::warn!(error = %e.message, "sync compaction failed");
        }
        drop::<Arc<State>>(state);
    }
}
