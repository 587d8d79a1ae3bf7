//! Review: write policies, the write budget and the pending-write queue.
//!
//! Under a queuing policy `submit` stores the [`Request`] (the operation and its agent,
//! as JSON) with a diff preview instead of applying it; the note is untouched. Approving
//! applies the stored request through the same door as a direct write (`apply_now`:
//! budget, write lock, pipeline) and stores its receipt; if the note moved since, the
//! pending write is decided with its `error` set and nothing is written.

use chrono::{DateTime, Duration, Utc};

use crate::clock::timestamp;
use crate::error::{Error, Reason, Result};
pub use crate::queries::settings::{
    review_decisions, settings, settings_of, ReviewDecisions, WritePolicy, WriteSettings,
    WRITE_SETTINGS,
};
use crate::state::{State, WriteLock};
use crate::storage::rows::PendingRow;
use crate::storage::rows::{AuditEvent, AuditKind};
use crate::writes::{
    apply_now, plan, store_receipt, Applied, IntentKey, Op, Receipt, ReceiptStatus, Request,
    Subject,
};

/// The length of the budget window.
pub const BUDGET_WINDOW_SECS: i64 = 3600;

/// Change the write policy and budget (what is `None` stays); `actor` is who, for the
/// audit log.
pub fn set_settings(
    state: &State,
    policy: Option<WritePolicy>,
    budget: Option<u32>,
    actor: &str,
) -> Result<WriteSettings> {
    if let Some(p) = policy {
        state.meta.set_setting("write_policy", p.as_str())?;
    }
    if let Some(b) = budget {
        state.meta.set_setting("write_budget", &b.to_string())?;
    }
    if policy.is_some() || budget.is_some() {
        let counts = budget.map(|b| [("write_budget", i64::from(b))]);
        state.meta.note_audit(
            &AuditEvent::new(AuditKind::SettingsChanged, actor)
                .subject("write_settings")
                .counts(counts.as_ref().map_or(&[], |c| &c[..])),
        );
    }
    settings(state)
}

/// Set who takes review decisions in open local mode (the vault's setting; a
/// configured `signed_in` stays in force whatever this says); `actor` is who, for the
/// audit log.
pub fn set_review_decisions(state: &State, who: ReviewDecisions, actor: &str) -> Result<()> {
    state.meta.set_setting("review_decisions", who.as_str())?;
    let signed_in = i64::from(who == ReviewDecisions::SignedIn);
    state.meta.note_audit(
        &AuditEvent::new(AuditKind::SettingsChanged, actor)
            .subject("review_decisions")
            .counts(&[("signed_in", signed_in)]),
    );
    Ok(())
}

impl Op {
    /// Delete, move, rename, or a PATCH that moves the note.
    pub fn is_destructive(&self) -> bool {
        match self {
            Op::Delete { .. }
            | Op::Move { .. }
            | Op::Rename { .. }
            | Op::DeleteAttachment { .. }
            | Op::MoveAttachment { .. }
            | Op::MoveFolder { .. }
            | Op::DeleteFolder { .. } => true,
            Op::Patch { changes, .. } => changes
                .iter()
                .any(|c| matches!(c, crate::writes::PatchChange::Folder(_))),
            _ => false,
        }
    }
}

/// What the policy says of `op`: `Ok(true)` to queue it, `Ok(false)` to apply it.
pub(crate) fn must_queue(settings: &WriteSettings, op: &Op) -> Result<bool> {
    match settings.policy {
        WritePolicy::ReadOnly => Err(Error::new(
            Reason::WRITE_REFUSED,
            "the vault's write policy is read_only",
        )
        .with_meta("write_policy", "read_only")),
        // An upload is not queued: its bytes would have to wait outside the vault for a
        // reviewer. Where the policy would queue it, it is refused. (An attachment's move
        // or delete queues like a note's.)
        WritePolicy::Review if matches!(op, Op::PutAttachment { .. } | Op::PutPrivate { .. }) =>
        {
            Err(Error::new(
                Reason::WRITE_REFUSED,
                format!(
                    "the write policy {} would queue this upload, and uploads are not queued for review (their bytes would wait outside the vault)",
                    settings.policy.as_str()
                ),
            )
            .with_meta("write_policy", settings.policy.as_str()))
        }
        WritePolicy::Review => Ok(true),
        WritePolicy::ReviewDestructive => Ok(op.is_destructive()),
        WritePolicy::AutoApply => Ok(false),
    }
}

/// Refuse a write when the budget of the rolling hour is spent.
pub(crate) fn check_budget(
    state: &State,
    settings: &WriteSettings,
    now: DateTime<Utc>,
) -> Result<()> {
    if settings.budget == 0 {
        return Ok(());
    }
    let since = now - Duration::seconds(BUDGET_WINDOW_SECS);
    let (count, oldest) = state.meta.applied_writes_since(&timestamp(since))?;
    if count < u64::from(settings.budget) {
        return Ok(());
    }
    let oldest = oldest
        .and_then(|o| DateTime::parse_from_rfc3339(&o).ok())
        .map(|o| o.with_timezone(&Utc))
        .unwrap_or(now);
    let wait = (oldest + Duration::seconds(BUDGET_WINDOW_SECS) - now)
        .num_seconds()
        .max(1) as u64;
    Err(Error::new(
        Reason::WRITE_BUDGET_EXCEEDED,
        format!(
            "the write budget of {} applied writes per hour is spent",
            settings.budget
        ),
    )
    .with_retry_after(wait)
    .with_meta("write_budget", settings.budget.to_string()))
}

/// A unified diff of a planned write.
pub fn preview(
    before_path: Option<&str>,
    after_path: &str,
    before: &str,
    after: Option<&str>,
) -> String {
    let diff = similar::TextDiff::from_lines(before, after.unwrap_or(""));
    let old = before_path.map_or("/dev/null".to_string(), |p| format!("a/{p}"));
    let new = if after.is_some() {
        format!("b/{after_path}")
    } else {
        "/dev/null".to_string()
    };
    diff.unified_diff()
        .context_radius(3)
        .header(&old, &new)
        .to_string()
}

/// Queue `op`: check it can apply now (so a reviewer sees a real diff), store it, and
/// answer a `queued` receipt. The note is untouched.
pub(crate) fn queue(state: &State, write: &WriteLock<'_>, request: &Request) -> Result<Receipt> {
    let op = &request.op;
    let payload = serde_json::to_string(request)
        .map_err(|e| Error::internal(format!("cannot store a pending write: {e}")).with_cause(e))?;
    let mut folder = None;
    let (diff, slug, from) = if let Some((preview, path)) = super::attachments::preview(state, op)?
    {
        (preview, path, None)
    } else if op.is_folder() {
        let plan = super::folders::plan(state, op)?;
        folder = Some(super::FolderFacts {
            path: plan.path.clone(),
            from_path: None,
            notes: plan.notes.len(),
            trashed_to: None,
        });
        (plan.preview(op), plan.path, None)
    } else {
        let plan = plan(state, write, op)?;
        let (before, after) = plan.texts();
        let diff = preview(
            plan.from_rel(),
            &plan.to_rel,
            &before,
            plan.bytes.as_ref().map(|_| after.as_str()),
        );
        let slug = crate::vault::path::slug_of(plan.from_rel().unwrap_or(&plan.to_rel)).to_string();
        (diff, slug, plan.from)
    };
    let id = uuid::Uuid::now_v7().to_string();
    state.meta.insert_pending(&PendingRow {
        id: id.clone(),
        kind: op.kind().to_string(),
        status: "pending".into(),
        agent_id: request.agent_id.clone(),
        created_at: timestamp(Utc::now()),
        decided_at: None,
        decided_by: None,
        error: None,
        payload,
        result: None,
        preview: diff,
        slug: slug.clone(),
        domain: true,
    })?;
    let (note_id, version_id, content_hash) = match &from {
        Some((n, _)) => (
            n.note_id.clone(),
            n.version_id.clone(),
            n.content_hash.clone(),
        ),
        None => (String::new(), String::new(), String::new()),
    };
    Ok(Receipt {
        status: ReceiptStatus::Queued,
        slug,
        note_id,
        version_id,
        content_hash,
        committed_seq: state.committed_seq(),
        renamed: false,
        unchanged: false,
        links_updated: 0,
        links_failed: Vec::new(),
        flow_back_error: None,
        pending_id: Some(id),
        created: false,
        subject: folder.map_or(Subject::Note(None), Subject::Folder),
    })
}

/// Approve or reject a pending write. An approval applies the stored request now,
/// through the same door as a direct write (the budget included: past it the approval is
/// `WRITE_BUDGET_EXCEEDED` and the write stays pending); its receipt is stored as the
/// row's `result`.
/// `reviewer` is who decides (`auth::Who`), kept on the row and in the audit log.
pub fn decide(state: &State, id: &str, approve: bool, reviewer: &str) -> Result<PendingRow> {
    let lock = state.key_locks.get(&format!("pending:{id}"));
    let _guard = lock.lock();
    // Another process may be deciding the same write: one decision, the other sees it.
    let _shared = match &state.shared {
        Some(shared) => Some(shared.fence.hold_key(&format!("pending:{id}"))?),
        None => None,
    };
    let row = state.meta.pending(id)?.ok_or_else(|| {
        Error::new(
            Reason::PENDING_WRITE_NOT_FOUND,
            format!("no pending write {id}"),
        )
        .with_meta("id", id)
    })?;
    if row.status != "pending" {
        return Err(Error::new(
            Reason::ALREADY_DECIDED,
            format!("pending write {id} was already decided ({})", row.status),
        )
        .with_meta("status", row.status.clone()));
    }
    let now = timestamp(Utc::now());
    let (status, error, result) = if approve {
        if !row.domain {
            return Err(Error::internal(
                "a pending write stored by an older version was not upgraded; restart the daemon",
            ));
        }
        let request: Request = serde_json::from_str(&row.payload).map_err(|e| {
            Error::internal(format!("a stored pending write is corrupt: {e}")).with_cause(e)
        })?;
        // The approval's write keeps its receipt under a key of its own, in the write's
        // transaction where the store can: an approval retried after the write landed but
        // before its decision was recorded (the database gone between the two) finds that
        // receipt, and is decided applied, not applied twice nor refused as a collision.
        let key = format!("approve:{id}");
        let intent = IntentKey {
            key: &key,
            op_hash: &key,
            legacy: None,
        };
        let landed = state.meta.idempotency(&key)?.and_then(|row| row.receipt);
        let applied = match landed {
            Some(json) => Ok(json),
            None => apply_now(state, &settings(state)?, &request, Some(intent)).and_then(
                |Applied { receipt, settled }| {
                    if !settled {
                        store_receipt(state, intent, &receipt)?;
                    }
                    serde_json::to_string(&receipt).map_err(|e| {
                        Error::internal(format!("cannot store a receipt: {e}")).with_cause(e)
                    })
                },
            ),
        };
        crate::record::crash_point(state, "before-decision");
        match applied {
            Ok(json) => ("applied", None, Some(json)),
            // Spent budget: nothing was decided; the approver retries later.
            Err(e) if e.reason == Reason::WRITE_BUDGET_EXCEEDED => return Err(e),
            Err(e) => (
                "rejected",
                Some(format!("{}: {}", e.reason, e.message)),
                None,
            ),
        }
    } else {
        ("rejected", None, None)
    };
    if !state.meta.decide_pending(
        id,
        status,
        &now,
        reviewer,
        error.as_deref(),
        result.as_deref(),
    )? {
        return Err(Error::new(
            Reason::ALREADY_DECIDED,
            format!("pending write {id} was already decided"),
        ));
    }
    let kind = match status {
        "applied" => AuditKind::WriteApproved,
        _ => AuditKind::WriteRejected,
    };
    // An approval whose write could not apply is decided `rejected`: the row says so.
    let failed = [("apply_failed", 1)];
    let counts: &[(&str, i64)] = if approve && status != "applied" {
        &failed
    } else {
        &[]
    };
    state
        .meta
        .note_audit(&AuditEvent::new(kind, reviewer).subject(id).counts(counts));
    state
        .meta
        .pending(id)?
        .ok_or_else(|| Error::internal("a decided pending write vanished"))
}

/// Pending writes queued by a version that stored the HTTP request (before migration 6);
/// the API validates each again into a request ([`upgrade_pending`]).
pub fn legacy_pending(state: &State) -> Result<Vec<PendingRow>> {
    state.meta.legacy_pending()
}

/// Store `request` as what the pending write `id` applies on approval.
pub fn upgrade_pending(state: &State, id: &str, request: &Request) -> Result<()> {
    let json = serde_json::to_string(request)
        .map_err(|e| Error::internal(format!("cannot store a pending write: {e}")).with_cause(e))?;
    state.meta.upgrade_pending(id, &json)
}
