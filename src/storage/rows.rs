//! The rows the metadata stores keep: plain data, the same in every implementation of
//! the seam's metadata traits.

/// An attachment's facts as the store keeps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentRow {
    pub path: String,
    pub size: u64,
    pub mtime_ns: i64,
    pub inode: u64,
    pub sha256: String,
    pub content_type: String,
    pub modified_at: String,
}

/// One recorded change of an attachment (its seq is a `committed_seq`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentChangeRow {
    pub seq: i64,
    pub path: String,
    /// `None` for a delete.
    pub sha256: Option<String>,
    /// `create`, `update`, `delete`.
    pub kind: String,
    pub actor: String,
    pub created_at: String,
    pub commit_id: Option<String>,
}

/// A stored write result, replayed for the same `Idempotency-Key` and operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRow {
    pub key: String,
    pub op_hash: String,
    /// The receipt (opaque JSON); `None` in rows stored before receipts were, which
    /// replay `status` and `body` as they were answered.
    pub receipt: Option<String>,
    pub status: u16,
    pub body: String,
}

/// A write under way, recorded before it changed the folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentRow {
    pub key: String,
    pub op_hash: String,
    /// The intent (opaque JSON).
    pub intent: String,
}

/// What an `Idempotency-Key` holds when a write with it arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyHeld {
    /// The receipt of the write it ran.
    Receipt(IdempotencyRow),
    /// The intent of a write with it that did not finish.
    Intent(IntentRow),
    /// Nothing: the key is new.
    Nothing,
}

/// A note row as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteRow {
    pub note_id: String,
    pub path: String,
    pub version_id: String,
    pub content_hash: String,
    pub created_at: String,
    pub observed_at: String,
}

/// One revision (a change to one note) as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionRow {
    pub seq: i64,
    pub version_id: String,
    pub note_id: String,
    pub path: String,
    pub prev_version_id: Option<String>,
    /// `None` for a delete.
    pub content_hash: Option<String>,
    pub actor: String,
    /// `create`, `update`, `delete`, `move`.
    pub kind: String,
    pub created_at: String,
    /// The `history.git` commit holding it, when recorded (API writes); else it is found
    /// by its `Notevault-Seq` trailer.
    pub commit_id: Option<String>,
}

/// One op of the sync log (its seq is a `committed_seq`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpRow {
    pub seq: i64,
    /// `upsert`, `delete`, `move`, `attachment_upsert`, `attachment_delete`, `e2ee_key`.
    pub kind: String,
    pub note_id: Option<String>,
    /// Where the note or attachment is after the op (for a delete: where it was).
    pub path: String,
    /// Where a moved note was.
    pub from_path: Option<String>,
    pub version_id: Option<String>,
    pub prev_version_id: Option<String>,
    /// `blake3:<hex>` of a note's bytes, `sha256:<hex>` of an attachment's; `None` for a
    /// delete.
    pub content_hash: Option<String>,
    pub visibility: String,
    pub actor: String,
    pub created_at: String,
}

/// A device's checkpoint: the seq it has applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointRow {
    pub device_id: String,
    pub seq: i64,
    pub updated_at: String,
}

/// A write waiting for (or decided by) a reviewer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRow {
    pub id: String,
    /// `write`, `edit`, `delete`, `move`, `rename`.
    pub kind: String,
    /// `pending`, `applied`, `rejected`.
    pub status: String,
    pub agent_id: String,
    pub created_at: String,
    pub decided_at: Option<String>,
    /// Who decided it (`auth::Who`); `None` while pending, and for rows decided before
    /// migration 12.
    pub decided_by: Option<String>,
    pub error: Option<String>,
    /// The write's `writes::Request` as JSON, applied on approval (a row stored before
    /// migration 6, `domain == false`: the HTTP request as received).
    pub payload: String,
    /// The `writes::Receipt` of an applied write as JSON (before migration 6: as
    /// rendered).
    pub result: Option<String>,
    /// A unified diff of what the write would change, taken when it was queued.
    pub preview: String,
    pub slug: String,
    /// `payload` and `result` hold the pipeline's request and receipt (every row since
    /// migration 6, and older pending rows once upgraded).
    pub domain: bool,
}

/// One personal access token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatRow {
    /// `nvp_` and 8 characters: public.
    pub prefix: String,
    pub name: String,
    /// The keyed hash, hex.
    pub hash: String,
    /// Permission names, space-separated (`notes.write notes.review`).
    pub scopes: String,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub last_used_at: Option<String>,
}

/// A signed-in console session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub digest: String,
    /// The token every state-changing console request carries (form field or header).
    pub csrf: String,
    pub created_at: String,
    pub expires_at: String,
    pub last_seen_at: String,
}

/// A sign-in through the identity provider under way: what the callback needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdpSignIn {
    /// The digest of the nonce kept in the browser's cookie (binds the callback to the
    /// browser that started the sign-in).
    pub nonce_digest: String,
    /// The PKCE code verifier.
    pub verifier: String,
    /// The redirect URI the authorization request named (the exchange must name it too).
    pub redirect_uri: String,
}

/// What happened. The names are the `kind` of a row, stable on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditKind {
    WriteApplied,
    WriteQueued,
    WriteApproved,
    WriteRejected,
    TokenCreated,
    TokenRevoked,
    SignedIn,
    SignedOut,
    SettingsChanged,
    Exported,
    Purged,
    E2eeKeysChanged,
}

impl AuditKind {
    pub const ALL: [AuditKind; 12] = [
        AuditKind::WriteApplied,
        AuditKind::WriteQueued,
        AuditKind::WriteApproved,
        AuditKind::WriteRejected,
        AuditKind::TokenCreated,
        AuditKind::TokenRevoked,
        AuditKind::SignedIn,
        AuditKind::SignedOut,
        AuditKind::SettingsChanged,
        AuditKind::Exported,
        AuditKind::Purged,
        AuditKind::E2eeKeysChanged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::WriteApplied => "write.applied",
            AuditKind::WriteQueued => "write.queued",
            AuditKind::WriteApproved => "write.approved",
            AuditKind::WriteRejected => "write.rejected",
            AuditKind::TokenCreated => "token.created",
            AuditKind::TokenRevoked => "token.revoked",
            AuditKind::SignedIn => "session.signed_in",
            AuditKind::SignedOut => "session.signed_out",
            AuditKind::SettingsChanged => "settings.changed",
            AuditKind::Exported => "vault.exported",
            AuditKind::Purged => "vault.purged",
            AuditKind::E2eeKeysChanged => "e2ee.keys_changed",
        }
    }
}

/// One row of the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub id: i64,
    pub kind: String,
    /// Who: an agent id, `console`, `cli`, `api`.
    pub actor: String,
    pub created_at: String,
    /// What it was about, as an id (a note id, a pending-write id, a token's public
    /// prefix), when there is one.
    pub subject: Option<String>,
    /// Counters, as a JSON object of numbers (`{"notes": 12, "bytes": 3400}`).
    pub counts: String,
}

/// A new row of the audit log (its id and time are given when it is appended).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent<'a> {
    pub kind: AuditKind,
    pub actor: &'a str,
    pub subject: Option<&'a str>,
    pub counts: &'a [(&'a str, i64)],
}

impl<'a> AuditEvent<'a> {
    pub fn new(kind: AuditKind, actor: &'a str) -> Self {
        Self {
            kind,
            actor,
            subject: None,
            counts: &[],
        }
    }

    pub fn subject(mut self, subject: &'a str) -> Self {
        self.subject = Some(subject);
        self
    }

    pub fn counts(mut self, counts: &'a [(&'a str, i64)]) -> Self {
        self.counts = counts;
        self
    }
}

/// What a write keeps in the transaction that records its revision, so that a write and
/// its answer are stored together (exactly once by construction): its receipt under its
/// `Idempotency-Key` (the key's intent let go), its count against the write budget, its
/// audit event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settlement {
    pub receipt: Option<KeptReceipt>,
    /// When the write was asked for: one applied write for the budget.
    pub applied_at: Option<String>,
    pub audit: Option<SettledAudit>,
}

/// A receipt kept under its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptReceipt {
    pub key: String,
    pub op_hash: String,
    /// The receipt as JSON.
    pub receipt: String,
    pub created_at: String,
}

/// An audit event appended with the write it tells of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettledAudit {
    pub kind: AuditKind,
    pub actor: String,
    pub subject: String,
    pub counts: Vec<(&'static str, i64)>,
    pub at: String,
}

impl SettledAudit {
    pub fn event(&self) -> AuditEvent<'_> {
        AuditEvent::new(self.kind, &self.actor)
            .subject(&self.subject)
            .counts(&self.counts)
    }
}
