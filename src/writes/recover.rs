//! Writes that were under way when the daemon stopped (a crash, `kill -9`, a power cut).
//!
//! A write records its [`Intent`] under its `Idempotency-Key` before it changes the
//! folder, and drops it in the transaction that stores its receipt. An intent found at
//! start is resolved against what the scan found, before the changes made while stopped
//! are reconciled: a change that landed is recorded as that write (its version, actor and
//! kind, not as an editor's change) and its receipt stored, so the client's retry with
//! the same key gets the receipt instead of `VERSION_MOVED` or `NAME_COLLISION`; a change
//! that did not land is forgotten, and the retry applies it. A folder operation's intent
//! is resolved the same way (`folders::resolve`).
//!
//! A write that fails after its change landed (the disk filled while it was recorded)
//! keeps its intent too, and its retry resolves it live ([`resolve_retry`]).

use std::sync::Arc;

use crate::error::Result;
use crate::state::{State, WriteLock};
use crate::storage::rows::{IntentRow, RevisionRow};
use crate::vault::observe::Observed;
use crate::vault::path::slug_of;

use super::{
    linking_to, record_change, rewrite_links, store_receipt, FolderIntent, Identity, Intent,
    IntentKey, NoteFacts, Receipt, ReceiptStatus, Recorded, Subject,
};

/// What became of the intents found at start.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    /// Changes that landed and were recorded now.
    pub recorded: usize,
    /// Changes that landed and were recorded before the stop (only the receipt was
    /// missing).
    pub already_recorded: usize,
    /// Changes that did not land.
    pub forgotten: usize,
}

/// Resolve every intent left by writes that did not finish. `changed` and `removed` are
/// what the start-up scan found different from the store; what a landed write explains is
/// taken out of them. `unsure`: notes whose path may hold a write's refused bytes (a
/// leftover of its exchange that could not be cleared): no write is taken as landed
/// there, so none is answered with a receipt. The caller holds the write lock (`write`), and the
/// catalog holds the notes as stored.
pub fn resolve_intents(
    state: &State,
    write: &WriteLock<'_>,
    changed: &mut Vec<Observed>,
    removed: &mut Vec<String>,
    unsure: &std::collections::HashSet<String>,
) -> Result<Resolved> {
    let mut resolved = Resolved::default();
    for row in state.meta.intents()? {
        let key = IntentKey {
            key: &row.key,
            op_hash: &row.op_hash,
            legacy: None,
        };
        if let Ok(folder) = serde_json::from_str::<FolderIntent>(&row.intent) {
            match super::folders::resolve(state, write, &folder, changed, removed)? {
                Some(receipt) => {
                    store_receipt(state, key, &receipt)?;
                    resolved.recorded += 1;
                }
                None => {
                    state.meta.forget_intent(&row.key)?;
                    resolved.forgotten += 1;
                }
            }
            continue;
        }
        let intent: Intent = match serde_json::from_str(&row.intent) {
            Ok(intent) => intent,
            Err(e) => {
                tracing::warn!(error = %e, "a stored write intent is corrupt; it is dropped");
                state.meta.forget_intent(&row.key)?;
                resolved.forgotten += 1;
                continue;
            }
        };
        if let Some(revision) = state.meta.revision(&intent.version_id)? {
            store_receipt(state, key, &receipt_of_recorded(state, &intent, &revision))?;
            resolved.already_recorded += 1;
            continue;
        }
        // (Asked only where sure: `landed` takes what it explains out of `changed`.)
        let sure = !unsure.contains(&intent.to_rel);
        let found = sure
            .then(|| landed(&state.paths.root, &intent, changed, removed))
            .flatten();
        match found {
            Some(bytes) => {
                let receipt = record_landed(state, write, &intent, bytes)?;
                store_receipt(state, key, &receipt)?;
                resolved.recorded += 1;
            }
            None => match sure
                .then(|| recorded_meanwhile(state, &intent))
                .transpose()?
            {
                // The change landed and was recorded as an editor's (the watcher saw it
                // before the stop).
                Some(Some(revision)) => {
                    store_receipt(state, key, &receipt_of_recorded(state, &intent, &revision))?;
                    resolved.already_recorded += 1;
                }
                _ => {
                    state.meta.forget_intent(&row.key)?;
                    resolved.forgotten += 1;
                }
            },
        }
    }
    if resolved != Resolved::default() {
        tracing::info!(
            recorded = resolved.recorded,
            already_recorded = resolved.already_recorded,
            forgotten = resolved.forgotten,
            "resolved writes that were under way when the daemon stopped"
        );
    }
    Ok(resolved)
}

/// Whether the intent's change is what the folder holds now; if so, take it out of the
/// scan's findings and answer its new bytes (`Some(None)` for a delete).
#[allow(clippy::option_option)]
fn landed(
    root: &std::path::Path,
    intent: &Intent,
    changed: &mut Vec<Observed>,
    removed: &mut Vec<String>,
) -> Option<Option<Arc<[u8]>>> {
    let from_gone = |removed: &Vec<String>| {
        intent
            .from_path
            .as_ref()
            .is_none_or(|from| *from == intent.to_rel || removed.contains(from))
    };
    let take_from = |removed: &mut Vec<String>| {
        if let Some(from) = &intent.from_path {
            removed.retain(|r| r != from);
        }
    };
    match &intent.content_hash {
        Some(hash) => {
            let at = changed
                .iter()
                .position(|o| o.rel == intent.to_rel && o.content_hash == *hash)?;
            if !from_gone(removed) {
                return None;
            }
            let observed = changed.remove(at);
            take_from(removed);
            let bytes = match observed.content {
                Some(kept) => kept.to_arc(),
                // Over 10 MiB: the scan keeps no bytes.
                None => crate::vault::observe::read_file(&root.join(&intent.to_rel)).ok()?,
            };
            Some(Some(bytes))
        }
        None => {
            let from = intent.from_path.as_ref()?;
            if !removed.contains(from) {
                return None;
            }
            take_from(removed);
            Some(None)
        }
    }
}

/// Record a change that landed as the write it was.
fn record_landed(
    state: &State,
    write: &WriteLock<'_>,
    intent: &Intent,
    bytes: Option<Arc<[u8]>>,
) -> Result<Receipt> {
    let from = state
        .catalog
        .read()
        .get_by_id(&intent.note_id)
        .filter(|n| Some(&n.version_id) == intent.from_version.as_ref())
        .cloned();
    let moved = from
        .as_ref()
        .filter(|n| n.path != intent.to_rel && bytes.is_some())
        .cloned();
    let linking = moved.as_ref().map(|old| linking_to(state, old));
    let mut receipt = record_change(
        state,
        write,
        Recorded {
            from: from.as_ref(),
            to_rel: &intent.to_rel,
            bytes,
            actor: &intent.actor,
            kind: &intent.kind,
            renamed: intent.renamed,
        },
        Identity {
            note_id: intent.note_id.clone(),
            version_id: intent.version_id.clone(),
        },
    )?;
    if let (Some(old), Some(linking)) = (moved, linking) {
        rewrite_links(state, write, &mut receipt, &old, &intent.actor, &linking);
    }
    Ok(receipt)
}

/// The receipt of a write whose change was recorded before the stop.
fn receipt_of_recorded(state: &State, intent: &Intent, revision: &RevisionRow) -> Receipt {
    let note = state
        .catalog
        .read()
        .get_by_id(&revision.note_id)
        .filter(|n| n.version_id == revision.version_id)
        .map(|n| NoteFacts::from(n.as_ref()));
    let moved = intent
        .from_path
        .as_ref()
        .is_some_and(|from| *from != intent.to_rel && intent.content_hash.is_some());
    Receipt {
        status: ReceiptStatus::Applied,
        slug: slug_of(&revision.path).to_string(),
        note_id: revision.note_id.clone(),
        version_id: revision.version_id.clone(),
        content_hash: revision.content_hash.clone().unwrap_or_default(),
        committed_seq: revision.seq,
        renamed: intent.renamed,
        unchanged: false,
        links_updated: 0,
        links_failed: Vec::new(),
        flow_back_error: moved.then(|| {
            "the daemon stopped while it rewrote links to this note; check them with GET /v1/notes/{note}:links".to_string()
        }),
        pending_id: None,
        created: intent.from_path.is_none(),
        subject: Subject::Note(note),
    }
}

/// A write whose change landed before it failed (the disk filled up while it was
/// recorded) keeps its intent, so that its retry with the same key answers the receipt
/// of that change rather than `NAME_COLLISION` or `VERSION_MOVED`; the user's bytes are
/// on disk and are kept, not rolled back. One that did not land is forgotten.
pub(crate) fn after_failure(state: &State, key: &str) {
    let landed = match intent_of(state, key) {
        Ok(Some((_, intent))) => landed_now(&state.paths.root, &intent).is_some(),
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(error = %e.message, "cannot read a write intent");
            false
        }
    };
    if landed {
        tracing::warn!("a write failed after its change landed; its retry gets the receipt");
    } else if let Err(forget) = state.meta.forget_intent(key) {
        tracing::warn!(error = %forget.message, "cannot forget a write intent");
    }
}

/// The receipt for a retry of a write that failed after its change landed
/// ([`after_failure`]), its change recorded now if nothing recorded it meanwhile; `None`
/// when no such write is known (the retry applies as a new write).
/// `held`: the intent stored under the key, as read with its receipt (`KeyHeld`).
pub(crate) fn resolve_retry(
    state: &State,
    key: IntentKey<'_>,
    held: Option<IntentRow>,
) -> Result<Option<Receipt>> {
    let Some((op_hash, intent)) = held.and_then(parsed) else {
        return Ok(None);
    };
    if !super::op::is_bound(&op_hash, key.op_hash, key.legacy) {
        return Err(crate::error::Error::new(
            crate::error::Reason::IDEMPOTENCY_KEY_REUSED,
            "this Idempotency-Key was already used for a different request",
        )
        .with_meta("idempotency_key", key.key));
    }
    let write = &state.lock_to_record()?;
    if let Some(revision) = state.meta.revision(&intent.version_id)? {
        return Ok(Some(receipt_of_recorded(state, &intent, &revision)));
    }
    let Some(bytes) = landed_now(&state.paths.root, &intent) else {
        state.meta.forget_intent(key.key)?;
        return Ok(None);
    };
    // What the catalog holds where the change landed: still the note as the write read
    // it (record the change as this write), or the change already (a read or the
    // watcher recorded it meanwhile: answer that revision).
    let before = {
        let catalog = state.catalog.read();
        match &intent.from_version {
            Some(v) => catalog
                .get_by_id(&intent.note_id)
                .is_some_and(|n| n.version_id == *v),
            None => catalog.get(slug_of(&intent.to_rel)).is_none(),
        }
    };
    if before {
        return record_landed(state, write, &intent, bytes).map(Some);
    }
    if let Some(revision) = recorded_meanwhile(state, &intent)? {
        return Ok(Some(receipt_of_recorded(state, &intent, &revision)));
    }
    state.meta.forget_intent(key.key)?;
    Ok(None)
}

/// The revision that recorded the intent's new bytes at its path as someone else's
/// change (the watcher, or a read, saw the file before the write was recorded).
fn recorded_meanwhile(state: &State, intent: &Intent) -> Result<Option<RevisionRow>> {
    let version = state
        .catalog
        .read()
        .get(slug_of(&intent.to_rel))
        .filter(|n| Some(&n.content_hash) == intent.content_hash.as_ref())
        .map(|n| n.version_id.clone());
    match version {
        Some(v) => state.meta.revision(&v),
        None => Ok(None),
    }
}

/// The op hash and note intent stored under `key` (a folder's is not resolved live).
fn intent_of(state: &State, key: &str) -> Result<Option<(String, Intent)>> {
    Ok(state.meta.intent(key)?.and_then(parsed))
}

/// A stored intent's op hash and note intent (`None`: a folder's).
fn parsed(row: IntentRow) -> Option<(String, Intent)> {
    let intent = serde_json::from_str::<Intent>(&row.intent).ok()?;
    Some((row.op_hash, intent))
}

/// Whether the intent's change is what the folder holds now (checked against the files,
/// not a scan); if so, its new bytes (`Some(None)` for a delete).
#[allow(clippy::option_option)]
fn landed_now(root: &std::path::Path, intent: &Intent) -> Option<Option<Arc<[u8]>>> {
    let from_gone = intent.from_path.as_ref().is_none_or(|from| {
        (*from == intent.to_rel && intent.content_hash.is_some()) || !root.join(from).exists()
    });
    if !from_gone {
        return None;
    }
    match &intent.content_hash {
        Some(hash) => {
            let bytes = crate::vault::observe::read_file(&root.join(&intent.to_rel)).ok()?;
            (crate::vault::content_hash(&bytes) == *hash).then_some(Some(bytes))
        }
        None => Some(None),
    }
}
