//! Applying a planned write: its intent, the file step (atomic write or move, checked
//! against the version that was read), then the one recorder; links to a moved note are
//! rewritten after.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::clock::timestamp;
use crate::error::{Error, Result};
use crate::record::crash_point;
use crate::state::{State, WriteLock};
use crate::storage::files::Placements;
use crate::storage::rows::{AuditKind, KeptReceipt, RevisionRow, SettledAudit, Settlement};
use crate::vault::note::Note;
use crate::vault::observe::Observed;
use crate::vault::path::slug_of;

use super::{links, plan, Intent, IntentKey, NoteFacts, Op, Receipt, ReceiptStatus, Subject};

/// Apply `op`: plan it, write it, then rewrite the links to a moved note. With `intent`,
/// the write is recorded under that key before the file changes (see [`Intent`]).
pub(crate) fn apply(
    state: &State,
    write: &WriteLock<'_>,
    op: &Op,
    agent_id: &str,
    intent: Option<IntentKey<'_>>,
) -> Result<Receipt> {
    let actor = format!("agent:{agent_id}");
    if op.is_folder() {
        return super::folders::apply(state, write, op, &actor, intent);
    }
    if op.is_attachment() {
        return super::attachments::apply(state, write, op, &actor, None).map(|(r, _)| r);
    }
    let plan = plan(state, write, op)?;
    let moved_from = plan
        .from
        .as_ref()
        .filter(|(n, _)| n.path != plan.to_rel && plan.bytes.is_some())
        .map(|(n, _)| n.clone());
    // The notes linking to it, found in the link graph before the move changes names.
    let linking = match &moved_from {
        Some(old) => linking_to(state, old),
        None => Vec::new(),
    };
    let mut receipt = commit_change(
        state,
        write,
        Change {
            from: plan.from.as_ref().map(|(n, b)| (n, &b[..])),
            to_rel: &plan.to_rel,
            bytes: plan.bytes.clone(),
            actor: &actor,
            kind: plan.kind,
            new_id: plan.restore_id.as_deref(),
            renamed: plan.renamed,
        },
        intent,
    )?;
    if let Some(old) = moved_from {
        rewrite_links(state, write, &mut receipt, &old, &actor, &linking);
    }
    Ok(receipt)
}

/// The slugs of the notes whose links resolve to `note`.
pub(crate) fn linking_to(state: &State, note: &Note) -> Vec<String> {
    let catalog = state.catalog.read();
    let graph = crate::vault::graph::Graph::build(&catalog);
    graph
        .backlinks(note)
        .into_iter()
        .map(|(n, _)| n.slug().to_string())
        .collect()
}

/// Rewrite the links of `linking` that pointed at `old` to the receipt's note.
pub(crate) fn rewrite_links(
    state: &State,
    write: &WriteLock<'_>,
    receipt: &mut Receipt,
    old: &Note,
    actor: &str,
    linking: &[String],
) {
    let (updated, failed) =
        links::rewrite_links_to(state, write, old, &receipt.slug, actor, linking);
    receipt.links_updated = updated;
    receipt.links_failed = failed;
    if updated > 0 {
        receipt.committed_seq = state.committed_seq();
    }
}

/// One change to one note, as the pipeline applies it.
pub(crate) struct Change<'a> {
    /// The note and the bytes it was read with (`None` for a create).
    pub from: Option<(&'a Arc<Note>, &'a [u8])>,
    /// The path it ends at.
    pub to_rel: &'a str,
    /// Its new content (`None` for a delete, which moves the file to `.trash/`).
    pub bytes: Option<Arc<[u8]>>,
    pub actor: &'a str,
    /// `create`, `update`, `move`, `delete`.
    pub kind: &'a str,
    /// The note id a create restores (a rollback of a deleted note).
    pub new_id: Option<&'a str>,
    /// The note got a new name in its folder (the receipt says so).
    pub renamed: bool,
}

/// The identity a recorded change gets.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub note_id: String,
    pub version_id: String,
}

/// A change on disk, not recorded yet: what [`record_staged`] records. Owned, so it can
/// wait for the rest of its group (`writes::group`).
pub(crate) struct Staged {
    pub from: Option<Arc<Note>>,
    pub to_rel: String,
    /// The bytes now at `to_rel` (`None` for a delete).
    pub bytes: Option<Arc<[u8]>>,
    pub kind: String,
    pub renamed: bool,
    pub identity: Identity,
}

/// What staging a change did.
pub(crate) enum Stage {
    /// Identical content in the same place: no new version, no commit; the receipt.
    Unchanged(Box<Receipt>),
    /// The file step is done (its folders' fsync is owed, in the caller's `DirSyncs`).
    Staged(Staged),
    /// Asked for with `defer_sync`, for a write in place: the new bytes are prepared in
    /// the caller's placements ([`Placements::prepare`]); once settled, it is staged.
    Prepared(Staged),
}

/// Apply one change: write the file (atomically, checking that the file is still the
/// version that was read), then [`record`] it. With `intent`, the write's intent is stored
/// under its key before the folder changes.
pub(crate) fn commit_change(
    state: &State,
    write: &WriteLock<'_>,
    change: Change<'_>,
    intent: Option<IntentKey<'_>>,
) -> Result<Receipt> {
    let actor = change.actor;
    let mut files = state.files.placements();
    match stage_change(state, write, change, intent, &mut *files, false)? {
        Stage::Unchanged(receipt) => Ok(*receipt),
        Stage::Prepared(_) => Err(Error::internal("a write was prepared, not applied")),
        Stage::Staged(staged) => {
            crash_point(state, "after-file");
            crate::record::full_point(state, "after-file")?;
            let receipts = record_staged(state, write, actor, vec![staged], &mut *files, &[])?;
            receipts
                .into_iter()
                .next()
                .ok_or_else(|| Error::internal("the recorder recorded nothing"))
        }
    }
}

/// The file step of one change: its intent stored (with `intent`), then the note written,
/// moved or trashed through `files` (the storage seam), checked against the version that
/// was read. Durability is left to `files`: the caller syncs them before the change is
/// recorded. With `defer_sync`, a write in place is only prepared ([`Stage::Prepared`]).
pub(crate) fn stage_change(
    state: &State,
    _write: &WriteLock<'_>,
    change: Change<'_>,
    intent: Option<IntentKey<'_>>,
    files: &mut dyn Placements,
    defer_sync: bool,
) -> Result<Stage> {
    let Change {
        from,
        to_rel,
        bytes,
        ..
    } = &change;
    let (from, to_rel) = (*from, *to_rel);
    let same_place = from.is_none_or(|(n, _)| n.path == to_rel);
    // Identical content in the same place: no new version, no commit.
    if let (Some((note, old)), Some(new)) = (from, bytes) {
        if same_place && old == &new[..] {
            return Ok(Stage::Unchanged(Box::new(Receipt {
                unchanged: true,
                ..receipt_of(note, state.committed_seq(), false)
            })));
        }
    }
    // A note whose bytes are not kept (over 10 MiB) may still be waiting for a history
    // commit that reads the file late: let it read the version it records first.
    // (A note unread since the start holds a version history already has.)
    if from.is_some_and(|(n, _)| n.content.is_none() && !n.unread()) {
        state.history.flush(std::time::Duration::from_secs(30));
    }
    let identity = Identity {
        note_id: from
            .map(|(n, _)| n.note_id.clone())
            .or_else(|| change.new_id.map(str::to_string))
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
        version_id: uuid::Uuid::now_v7().to_string(),
    };
    if let Some(key) = intent {
        let recorded = Intent {
            actor: change.actor.to_string(),
            kind: change.kind.to_string(),
            note_id: identity.note_id.clone(),
            version_id: identity.version_id.clone(),
            from_path: from.map(|(n, _)| n.path.clone()),
            from_version: from.map(|(n, _)| n.version_id.clone()),
            to_rel: to_rel.to_string(),
            content_hash: bytes.as_deref().map(crate::vault::content_hash),
            renamed: change.renamed,
        };
        let json = serde_json::to_string(&recorded).map_err(|e| {
            Error::internal(format!("cannot record a write intent: {e}")).with_cause(e)
        })?;
        state.meta.store_intent(key.key, key.op_hash, &json)?;
        crash_point(state, "before-file");
    }
    let expect_old = from.map(|(n, _)| n.content_hash.as_str());
    let mut prepared = false;
    match (bytes, from) {
        (Some(new), _) if same_place && defer_sync => {
            files.prepare(to_rel, new, expect_old)?;
            prepared = true;
        }
        (Some(new), _) if same_place => files.write(to_rel, new, expect_old)?,
        (Some(new), Some((note, old))) => {
            // A move (maybe with new content).
            let rewrite = (&new[..] != old).then_some(&new[..]);
            files.move_note(&note.path, to_rel, &note.content_hash, rewrite)?;
        }
        (None, Some((note, _))) => files.trash(&note.path, &note.content_hash)?,
        (Some(_), None) | (None, None) => unreachable!("a create always has content"),
    }
    let Change {
        kind,
        renamed,
        bytes,
        ..
    } = change;
    let staged = Staged {
        from: from.map(|(n, _)| n.clone()),
        to_rel: to_rel.to_string(),
        bytes,
        kind: kind.to_string(),
        renamed,
        identity,
    };
    Ok(if prepared {
        Stage::Prepared(staged)
    } else {
        Stage::Staged(staged)
    })
}

/// A change that is on disk, to be recorded.
pub(crate) struct Recorded<'a> {
    pub from: Option<&'a Arc<Note>>,
    pub to_rel: &'a str,
    /// The bytes now at `to_rel` (`None` for a delete).
    pub bytes: Option<Arc<[u8]>>,
    pub actor: &'a str,
    pub kind: &'a str,
    pub renamed: bool,
}

/// Record a write whose change is on disk, through the one recorder (durably: its
/// history commit is written first), and make its receipt. The caller holds the write
/// lock.
pub(crate) fn record_change(
    state: &State,
    write: &WriteLock<'_>,
    change: Recorded<'_>,
    identity: Identity,
) -> Result<Receipt> {
    let staged = Staged {
        from: change.from.cloned(),
        to_rel: change.to_rel.to_string(),
        bytes: change.bytes,
        kind: change.kind.to_string(),
        renamed: change.renamed,
        identity,
    };
    let receipts = record_staged(
        state,
        write,
        change.actor,
        vec![staged],
        &mut *state.files.placements(),
        &[],
    )?;
    receipts
        .into_iter()
        .next()
        .ok_or_else(|| Error::internal("the recorder recorded nothing"))
}

/// What a staged write keeps in the transaction that records it (`rows::Settlement`):
/// its count against the write budget, and for a submitted write (one with an intent
/// key) its receipt under the key and its audit event.
pub(crate) struct Keep<'a> {
    pub intent: Option<IntentKey<'a>>,
    pub agent: &'a str,
    /// When it was asked for (what the budget counts).
    pub at: DateTime<Utc>,
}

/// Record changes that are on disk as one batch of the one recorder, durably: one
/// history commit carries them all, one transaction records their revisions and sync
/// ops, each with its own seq and version. `files` (the placements that made them) are
/// synced while history writes the commit, before anything else is recorded. `keep`
/// (empty, or one per change): what each write keeps in that transaction. Answers a
/// receipt per change, in order. Under the write lock (`write`).
pub(crate) fn record_staged(
    state: &State,
    write: &WriteLock<'_>,
    actor: &str,
    staged: Vec<Staged>,
    files: &mut dyn Placements,
    keep: &[Keep<'_>],
) -> Result<Vec<Receipt>> {
    let now = Utc::now();
    let subject = match staged.as_slice() {
        [one] => format!("{} {}", one.kind, slug_of(&one.to_rel)),
        many => {
            let named: Vec<String> = many
                .iter()
                .take(5)
                .map(|s| format!("{} {}", s.kind, slug_of(&s.to_rel)))
                .collect();
            let more = many.len().saturating_sub(named.len());
            let tail = if more > 0 {
                format!(", and {more} more")
            } else {
                String::new()
            };
            format!("{} writes: {}{tail}", many.len(), named.join(", "))
        }
    };
    let mut shapes = Vec::with_capacity(staged.len());
    let mut entries = Vec::with_capacity(staged.len());
    for s in staged {
        let Staged {
            from,
            to_rel,
            bytes,
            kind,
            renamed,
            identity,
        } = s;
        let created_at = from.as_ref().map_or(now, |n| n.created_at);
        let to = bytes.as_ref().map(|new| {
            let mtime = state.files.modified(&to_rel).unwrap_or_else(|| now.into());
            Observed::of_bytes(
                to_rel.clone(),
                new.clone(),
                mtime,
                created_at.into(),
                state.shared.is_some(),
            )
        });
        shapes.push((from.is_none(), renamed));
        entries.push(crate::record::Entry {
            from,
            to,
            bytes,
            kind,
            note_id: identity.note_id,
            version_id: identity.version_id,
            created_at,
        });
    }
    if !keep.is_empty() && keep.len() != shapes.len() {
        return Err(Error::internal(
            "a write to keep has no change, or a change two",
        ));
    }
    // The receipts are made once, as the transaction keeps them: a replay answers the
    // same bytes as the first answer.
    let made = std::cell::RefCell::new(Vec::with_capacity(shapes.len()));
    let settle = |entries: &[(&RevisionRow, &Note)], problem: Option<&str>| {
        let mut settled = Vec::with_capacity(keep.len());
        let now = timestamp(Utc::now());
        for (i, ((revision, note), (created, renamed))) in entries.iter().zip(&shapes).enumerate() {
            let receipt = receipt_for(revision, note, *created, *renamed, problem);
            if let Some(keep) = keep.get(i) {
                settled.push(settlement(&receipt, keep, &now)?);
            }
            made.borrow_mut().push(receipt);
        }
        Ok(settled)
    };
    crate::record::record_settling(
        state,
        write,
        crate::record::Batch {
            actor,
            subject,
            entries,
            files: Vec::new(),
            whole_vault: None,
            durable: true,
            marks: Vec::new(),
        },
        || files.sync(),
        Some(&settle),
        None,
    )?;
    Ok(made.into_inner())
}

/// The receipt of a recorded change: `note` as recorded (as it was, for a delete).
fn receipt_for(
    revision: &RevisionRow,
    note: &Note,
    created: bool,
    renamed: bool,
    history_problem: Option<&str>,
) -> Receipt {
    let mut receipt = receipt_of(note, revision.seq, created);
    receipt.version_id = revision.version_id.clone();
    receipt.content_hash = revision.content_hash.clone().unwrap_or_default();
    receipt.flow_back_error = history_problem.map(str::to_string);
    receipt.renamed = renamed;
    if revision.content_hash.is_none() {
        receipt.subject = Subject::Note(None);
    }
    receipt
}

/// What a write keeps with its recorded change (see [`Keep`]).
pub(crate) fn settlement(receipt: &Receipt, keep: &Keep<'_>, now: &str) -> Result<Settlement> {
    let kept = match keep.intent {
        Some(key) => Some(KeptReceipt {
            key: key.key.to_string(),
            op_hash: key.op_hash.to_string(),
            receipt: serde_json::to_string(receipt).map_err(|e| {
                Error::internal(format!("cannot store a receipt: {e}")).with_cause(e)
            })?,
            created_at: now.to_string(),
        }),
        None => None,
    };
    let audit = keep.intent.map(|_| SettledAudit {
        kind: AuditKind::WriteApplied,
        actor: keep.agent.to_string(),
        subject: receipt.note_id.clone(),
        counts: vec![("links_updated", receipt.links_updated as i64)],
        at: now.to_string(),
    });
    Ok(Settlement {
        receipt: kept,
        applied_at: Some(timestamp(keep.at)),
        audit,
    })
}

fn receipt_of(note: &Note, seq: i64, created: bool) -> Receipt {
    Receipt {
        status: ReceiptStatus::Applied,
        slug: note.slug().to_string(),
        note_id: note.note_id.clone(),
        version_id: note.version_id.clone(),
        content_hash: note.content_hash.clone(),
        committed_seq: seq,
        renamed: false,
        unchanged: false,
        links_updated: 0,
        links_failed: Vec::new(),
        flow_back_error: None,
        pending_id: None,
        created,
        subject: Subject::Note(Some(NoteFacts::from(note))),
    }
}
