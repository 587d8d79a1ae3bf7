//! The door of the pipeline: idempotency (a per-key lock, then replay, `IDEMPOTENCY_KEY_REUSED`
//! or a new write), the policy's branch to the review queue, and the budget.

use chrono::Utc;

use crate::clock::timestamp;
use crate::error::{Error, Reason, Result};
use crate::record::crash_point;
use crate::state::State;
use crate::storage::rows::{AuditEvent, AuditKind, IdempotencyRow, KeyHeld};

use super::op::is_bound;
use super::{review, Op, PatchChange, Receipt, ReceiptStatus, Request};

/// The idempotency of one request: its key, and the hash a version before request
/// identities took of it (`None` when the door cannot tell it), so that a key recorded
/// then still replays its receipt, and still refuses another request.
pub struct Idempotency<'a> {
    pub key: &'a str,
    pub legacy: Option<String>,
}

/// The key of a write being applied, which its intent is recorded under: the key, the
/// request's identity, and its legacy hash (see [`Idempotency`]).
#[derive(Debug, Clone, Copy)]
pub struct IntentKey<'a> {
    pub key: &'a str,
    pub op_hash: &'a str,
    pub legacy: Option<&'a str>,
}

/// Submit a write (see [`answer`]), counted by its outcome: applied, queued, refused by
/// reason, or replayed from its receipt (`telemetry`).
pub fn submit(state: &State, request: Request, idem: Idempotency<'_>) -> Result<Receipt> {
    let identity = request.identity();
    counted(|| answer(state, &identity, idem, move || Ok(request)))
}

/// Submit a write whose request names what it changes only once resolved (an attachment
/// given by its file name): its key binds to `call`, the call as its client made it, and
/// `build` resolves it only once the key is new, so a retry of a write that was applied
/// (its attachment gone or moved since) replays its receipt rather than answering what
/// the name finds now.
pub fn submit_call(
    state: &State,
    call: &serde_json::Value,
    idem: Idempotency<'_>,
    build: impl FnOnce() -> Result<Request>,
) -> Result<Receipt> {
    let identity = super::op::call_identity(call);
    counted(|| answer(state, &identity, idem, build))
}

fn counted(answer: impl FnOnce() -> Result<Receipt>) -> Result<Receipt> {
    use crate::telemetry::{self, WriteOutcome};
    let (answered, replay) = telemetry::counting_replays(answer);
    telemetry::write(match &answered {
        _ if replay => WriteOutcome::Replayed,
        Ok(receipt) if receipt.status == ReceiptStatus::Queued => WriteOutcome::Queued,
        Ok(_) => WriteOutcome::Applied,
        Err(e) => WriteOutcome::Refused(e.reason.as_str()),
    });
    answered
}

/// Submit a write: replay it if this key already ran this request, refuse a key reused
/// for another request, else apply it (or queue it) and store its receipt under the key.
/// `identity` is what the key binds to; `build` makes the request once the key is new.
fn answer(
    state: &State,
    identity: &str,
    idem: Idempotency<'_>,
    build: impl FnOnce() -> Result<Request>,
) -> Result<Receipt> {
    let key_lock = state.key_locks.get(idem.key);
    let _key_guard = key_lock.lock();
    // Other processes serving the vault apply writes too: the key is theirs to wait on.
    let _shared_key = match &state.shared {
        Some(shared) => Some(shared.fence.hold_key(idem.key)?),
        None => None,
    };
    // The vault's write settings come with it: one round trip fewer.
    let (held, stored) = state
        .meta
        .held_and_settings(idem.key, &review::WRITE_SETTINGS)?;
    let held = match held {
        KeyHeld::Receipt(row) => return replay(row, identity, &idem),
        KeyHeld::Intent(row) => Some(row),
        KeyHeld::Nothing => None,
    };
    let intent = IntentKey {
        key: idem.key,
        op_hash: identity,
        legacy: idem.legacy.as_deref(),
    };
    if let Some(receipt) = super::recover::resolve_retry(state, intent, held)? {
        store_receipt(state, intent, &receipt)?;
        return Ok(receipt);
    }
    // After a start that walked nothing, a write waits for the verify: the note it
    // names may have been renamed or removed while the daemon was stopped (the settings
    // read before may have changed meanwhile).
    let settings = if state.unread.wait_walk() {
        review::settings(state)?
    } else {
        review::settings_of(stored)
    };
    let request = resolve(state, build()?)?;
    let applied = if review::must_queue(&settings, &request.op)? {
        state
            .lock_to_record()
            .and_then(|write| review::queue(state, &write, &request))
            .map(|receipt| Applied {
                receipt,
                settled: false,
            })
    } else {
        apply_now(state, &settings, &request, Some(intent))
    };
    let Applied { receipt, settled } = match applied {
        Ok(applied) => applied,
        Err(e) => {
            // The error is the answer, unless the change landed before it (then the retry
            // gets its receipt).
            super::recover::after_failure(state, idem.key);
            return Err(e);
        }
    };
    crash_point(state, "before-receipt");
    if settled {
        // Its receipt, budget count and audit event were kept as it was recorded.
        return Ok(receipt);
    }
    store_receipt(state, intent, &receipt)?;
    let (kind, subject) = match receipt.status {
        ReceiptStatus::Applied => (AuditKind::WriteApplied, receipt.note_id.as_str()),
        ReceiptStatus::Queued => (
            AuditKind::WriteQueued,
            receipt.pending_id.as_deref().unwrap_or_default(),
        ),
    };
    if !receipt.unchanged {
        let links = receipt.links_updated as i64;
        state.meta.note_audit(
            &AuditEvent::new(kind, &request.agent_id)
                .subject(subject)
                .counts(&[("links_updated", links)]),
        );
    }
    Ok(receipt)
}

/// The receipt kept under the key, for a retry of the request it ran; a key reused for
/// another request is refused.
fn replay(row: IdempotencyRow, identity: &str, idem: &Idempotency<'_>) -> Result<Receipt> {
    if !is_bound(&row.op_hash, identity, idem.legacy.as_deref()) {
        return Err(Error::new(
            Reason::IDEMPOTENCY_KEY_REUSED,
            "this Idempotency-Key was already used for a different request",
        )
        .with_meta("idempotency_key", idem.key));
    }
    crate::telemetry::replayed();
    match row.receipt {
        Some(json) => serde_json::from_str(&json).map_err(|e| {
            Error::internal(format!("a stored receipt is corrupt: {e}")).with_cause(e)
        }),
        None => Ok(Receipt::answered(row.status, row.body)),
    }
}

/// MCP's `write_note` ([`Op::Write`]) as what it does now: a create where no note is,
/// else a new body for the note (`NOTE_NOT_FOUND` with a version and no note).
fn resolve(state: &State, request: Request) -> Result<Request> {
    let Request { op, agent_id, .. } = request;
    let op = match op {
        Op::Write {
            note,
            content,
            version_id,
        } => {
            if state.catalog.read().find(&note).is_some() {
                Op::Patch {
                    note,
                    version_id,
                    changes: vec![PatchChange::Content(content)],
                }
            } else if version_id.is_some() {
                return Err(Error::not_found(&note));
            } else {
                let created = Request::create(super::NewNote {
                    slug: Some(note),
                    content,
                    agent_id: Some(agent_id.clone()),
                    ..Default::default()
                })?;
                created.op
            }
        }
        op => op,
    };
    Ok(super::op::validated(op, agent_id))
}

/// A write applied now.
pub(crate) struct Applied {
    pub receipt: Receipt,
    /// Whether the transaction that recorded it also kept its receipt (under the intent's
    /// key), its budget count and (a submitted write) its audit event: then nobody keeps
    /// them again.
    pub settled: bool,
}

/// Apply a request now, spending the write budget: the one door of a direct write and of
/// an approved one. Past the budget it is `WRITE_BUDGET_EXCEEDED` and nothing changes.
/// Writes that arrive together are applied as a group (see `writes::group`).
pub(crate) fn apply_now(
    state: &State,
    settings: &review::WriteSettings,
    request: &Request,
    intent: Option<IntentKey<'_>>,
) -> Result<Applied> {
    let now = Utc::now();
    review::check_budget(state, settings, now)?;
    super::group::apply_grouped(state, request, intent, now)
}

/// Keep `receipt` under its key for replays, and let go of the key's intent, in one
/// transaction.
pub(crate) fn store_receipt(state: &State, key: IntentKey<'_>, receipt: &Receipt) -> Result<()> {
    let json = serde_json::to_string(receipt)
        .map_err(|e| Error::internal(format!("cannot store a receipt: {e}")).with_cause(e))?;
    state
        .meta
        .store_receipt(key.key, key.op_hash, &json, &timestamp(Utc::now()))
}
