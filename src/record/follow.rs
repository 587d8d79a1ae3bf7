//! Following the stores of a shared vault (hosted mode): the changes other processes
//! recorded are taken into this process's catalog, search index and seq, in seq order,
//! from the op log and the revisions' bytes. Nothing is written to the stores: the
//! recorder of the process that made a change wrote them.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::state::{State, WriteLock};
use crate::storage::rows::OpRow;
use crate::storage::Stored;
use crate::vault::catalog::note_from;
use crate::vault::observe::Observed;

/// Ops read from the store at a time.
const PAGE: usize = 512;

/// Ops whose notes' bytes are read in one go: another instance's group of writes at
/// once, and a bound on what one read holds.
const READ_AT_ONCE: usize = 32;

/// Take in every change the stores hold past this state's seq, under the write lock.
pub fn catch_up(state: &State, write: &WriteLock<'_>) -> Result<()> {
    catch_up_to(state, write, state.meta.committed_seq()?)
}

/// [`catch_up`] to `stored`, the stores' seq read under the write lock.
pub fn catch_up_to(state: &State, write: &WriteLock<'_>, stored: i64) -> Result<()> {
    if !state.holds(write) {
        return Err(Error::internal(
            "a vault was caught up under another vault's write lock",
        ));
    }
    let mut at = state.committed_seq();
    while at < stored {
        let ops = state.meta.ops_page(at, stored, PAGE)?;
        let Some(last) = ops.last().map(|op| op.seq) else {
            break;
        };
        // The bytes of a run of notes in one read, not one per op: a writer of another
        // instance waits for this under the vault's lock.
        for run in ops.chunks(READ_AT_ONCE) {
            let wanted: Vec<(i64, &str)> = run
                .iter()
                .filter(|op| wants_bytes(op))
                .map(|op| (op.seq, op.path.as_str()))
                .collect();
            let mut bytes = state.history.contents_at_seqs(&wanted)?.into_iter();
            for op in run {
                let stored = if wants_bytes(op) { bytes.next() } else { None };
                take_in(state, op, stored)?;
            }
        }
        if ops.iter().any(|op| op.kind.starts_with("attachment_")) {
            attachments_again(state)?;
        }
        // Readers of the catalog never see a note newer than the seq they are answered
        // with: the seq moves once the page is in.
        state.set_committed_seq(last);
        at = last;
    }
    if at < stored {
        // Seqs without ops (compacted away): nothing of them is left to take in.
        state.set_committed_seq(stored);
        state.index.advance(stored);
    }
    Ok(())
}

/// Take in what the other processes recorded, if anything: one read of the stored seq
/// when nothing is new.
pub fn refresh(state: &State) -> Result<()> {
    if state.shared.is_none() || state.meta.committed_seq()? <= state.committed_seq() {
        return Ok(());
    }
    let write = state.lock();
    catch_up(state, &write)
}

/// The attachments' catalog as the stores hold it (another process uploaded, moved or
/// deleted one: its row says what is there now).
fn attachments_again(state: &State) -> Result<()> {
    let rows = state.meta.all_attachments()?;
    let mut catalog = state.attachments.write();
    let stored: std::collections::HashSet<&str> = rows.iter().map(|r| r.path.as_str()).collect();
    let gone: Vec<String> = catalog
        .iter()
        .filter(|a| !stored.contains(a.path.as_str()))
        .map(|a| a.path.clone())
        .collect();
    for path in gone {
        catalog.remove(&path);
    }
    for row in rows {
        catalog.insert(super::attachment_of(row));
    }
    Ok(())
}

/// [`refresh`], the stored seq read already (with the vault's row, by the request that
/// opens it).
pub fn refresh_from(state: &State, stored: i64) -> Result<()> {
    if state.shared.is_none() || stored <= state.committed_seq() {
        return Ok(());
    }
    let write = state.lock();
    catch_up(state, &write)
}

/// The note an op changes in the catalog: `None` for ops of what the catalog does not
/// hold (attachments, private notes, key changes).
fn note_of(op: &OpRow) -> Option<&String> {
    match (&op.note_id, op.visibility.as_str()) {
        (Some(id), "standard") if matches!(op.kind.as_str(), "upsert" | "move" | "delete") => {
            Some(id)
        }
        _ => None,
    }
}

/// Whether taking `op` in needs the note's bytes at its seq (an upsert or a move).
fn wants_bytes(op: &OpRow) -> bool {
    note_of(op).is_some() && op.kind != "delete"
}

/// One op into the catalog and the index, with what the store holds at its seq (read
/// for a note's upsert or move); an op of what the catalog does not hold only advances
/// the index's seq.
fn take_in(state: &State, op: &OpRow, stored: Option<Stored>) -> Result<()> {
    let Some(note_id) = note_of(op) else {
        state.index.advance(op.seq);
        return Ok(());
    };
    let known = state.catalog.read().get_by_id(note_id).cloned();
    if op.kind == "delete" {
        if let Some(note) = known {
            state.catalog.write().remove(note.slug());
        }
        state.index.remove(note_id, op.seq);
        return Ok(());
    }
    let bytes: Arc<[u8]> = match stored.unwrap_or(Stored::NotRecorded) {
        Stored::Bytes(bytes) => bytes.into(),
        // A revision whose bytes the store lost (an import of a folder whose history had
        // lost them): the catalog keeps what it had; the vault serves on.
        other => {
            tracing::warn!(seq = op.seq, path = %op.path, stored = ?other, "a revision's bytes cannot be read back; the note is left as it was");
            state.index.advance(op.seq);
            return Ok(());
        }
    };
    let at = crate::clock::parse_or_now(&op.created_at);
    let created_at = known.as_ref().map_or(at, |n| n.created_at);
    let observed = Observed::of_bytes(op.path.clone(), bytes, at.into(), created_at.into(), true);
    let version_id = op.version_id.clone().unwrap_or_default();
    let note = note_from(observed, note_id.clone(), version_id, created_at, at);
    let note = {
        let mut catalog = state.catalog.write();
        if let Some(old) = &known {
            if old.path != note.path {
                catalog.remove(old.slug());
            }
        }
        catalog.insert(note)
    };
    state.index.upsert(note, op.seq);
    Ok(())
}
