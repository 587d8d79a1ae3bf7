//! The metadata half of the storage seam: what the pipeline, the recorder, the queries,
//! the auth layer and the console ask of a vault's metadata, one trait per concern, over
//! the plain rows of [`super::rows`]. Local mode's implementation is SQLite
//! (`meta::Meta`); hosted mode's will be PostgreSQL, one vault's rows of a shared
//! database.
//!
//! What a caller may count on in either implementation: each method that writes several
//! rows writes them in one transaction (all or none); a row read after a write answered
//! is the row written (read-your-writes); a failure is an `Error` with its cause, never
//! a partial answer.

use super::rows::{
    AttachmentChangeRow, AttachmentRow, AuditEvent, AuditRow, CheckpointRow, IdempotencyRow,
    IdpSignIn, IntentRow, KeyHeld, NoteRow, OpRow, PatRow, PendingRow, RevisionRow, SessionRow,
    Settlement,
};
use crate::error::Result;

/// Every concern of the metadata store, as one object a vault's state holds.
pub trait Metadata:
    Settings + Records + Idempotency + OpLog + ReviewQueue + Tokens + Sessions + Audit
{
}

impl<T> Metadata for T where
    T: Settings + Records + Idempotency + OpLog + ReviewQueue + Tokens + Sessions + Audit
{
}

/// Vault settings, and small counters and markers kept beside them.
pub trait Settings: Send + Sync {
    fn setting(&self, key: &str) -> Result<Option<String>>;

    /// The settings `keys`, in their order: one read where a store can (every write
    /// reads the policy and the budget).
    fn settings(&self, keys: &[&str]) -> Result<Vec<Option<String>>> {
        keys.iter().map(|k| self.setting(k)).collect()
    }

    fn set_setting(&self, key: &str, value: &str) -> Result<()>;

    fn record_applied_write(&self, at: &str) -> Result<()>;

    /// Applied writes since `since`, and the oldest of them.
    fn applied_writes_since(&self, since: &str) -> Result<(u64, Option<String>)>;

    /// Mark a presigned link's nonce used; `false` when it was used already. Nonces
    /// past their expiry are forgotten (their links are refused as expired anyway).
    fn use_nonce(&self, nonce: &str, expires_at: i64, now: i64) -> Result<bool>;
}

/// Note and attachment rows and the revision chain: what the recorder writes.
pub trait Records: Send + Sync {
    /// Every note row, for the startup scan to compare with the folder.
    fn all_notes(&self) -> Result<Vec<NoteRow>>;

    /// The highest committed sequence number (0 before the first change).
    fn committed_seq(&self) -> Result<i64>;

    /// Record a batch of revisions and the resulting note rows in one transaction.
    /// `notes` upserts rows; `removed` deletes rows by note id.
    fn record(
        &self,
        revisions: &[RevisionRow],
        ops: &[OpRow],
        notes: &[NoteRow],
        removed: &[String],
    ) -> Result<()> {
        self.record_settled(revisions, ops, notes, removed, &[])
    }

    /// [`Records::record`] of a batch whose rows need not be held at once (a first start
    /// records the whole vault; the recorder uses it for every batch without settled
    /// rows): `part(range)` makes the sync ops and note rows of
    /// `revisions[range]`, asked for one range after another; still one transaction. A
    /// store that cannot take rows in parts asks for them all at once.
    fn record_parts(
        &self,
        revisions: &[RevisionRow],
        removed: &[String],
        part: &mut dyn FnMut(std::ops::Range<usize>) -> (Vec<OpRow>, Vec<NoteRow>),
    ) -> Result<()> {
        let (ops, notes) = part(0..revisions.len());
        self.record(revisions, &ops, &notes, removed)
    }

    /// [`Records::record`], and in the same transaction what the batch's writes keep
    /// with them (their receipts, budget counts, audit events): a write and its answer
    /// are stored together or not at all.
    fn record_settled(
        &self,
        revisions: &[RevisionRow],
        ops: &[OpRow],
        notes: &[NoteRow],
        removed: &[String],
        settled: &[Settlement],
    ) -> Result<()>;

    /// One revision by its version id.
    fn revision(&self, version_id: &str) -> Result<Option<RevisionRow>>;

    /// The latest revision recorded at `path` (to find a deleted note by its slug).
    fn latest_revision_at(&self, path: &str) -> Result<Option<RevisionRow>>;

    /// One page of a note's revisions by seq: after `after` (exclusive) in the given
    /// direction, at most `limit`.
    fn revisions_page(
        &self,
        note_id: &str,
        after: Option<i64>,
        descending: bool,
        limit: usize,
    ) -> Result<Vec<RevisionRow>>;

    /// Revisions of one note, oldest first.
    fn revisions_of(&self, note_id: &str) -> Result<Vec<RevisionRow>>;

    /// Revisions with a seq above `after`, by seq.
    fn revisions_after(&self, after: i64) -> Result<Vec<RevisionRow>>;

    /// Every stored attachment's facts.
    fn all_attachments(&self) -> Result<Vec<AttachmentRow>>;

    /// Record attachment changes and their facts in one transaction: `changes` are
    /// appended to the log, `upserts` stored, `removed` (paths) forgotten.
    fn record_attachments(
        &self,
        changes: &[AttachmentChangeRow],
        ops: &[OpRow],
        upserts: &[AttachmentRow],
        removed: &[String],
    ) -> Result<()> {
        self.record_attachments_settled(changes, ops, upserts, removed, &[])
    }

    /// [`Records::record_attachments`], and in the same transaction what the batch's
    /// writes keep with them, as [`Records::record_settled`] does for notes.
    fn record_attachments_settled(
        &self,
        changes: &[AttachmentChangeRow],
        ops: &[OpRow],
        upserts: &[AttachmentRow],
        removed: &[String],
        settled: &[Settlement],
    ) -> Result<()>;

    /// Name the history commit that holds each of these revisions (by seq).
    fn set_commit_ids(&self, seqs: &[i64], commit_id: &str) -> Result<()>;
}

/// Receipts kept by `Idempotency-Key`, and the intents of writes under way.
pub trait Idempotency: Settings + Send + Sync {
    fn idempotency(&self, key: &str) -> Result<Option<IdempotencyRow>>;

    /// Keep a receipt under its key, and drop the key's intent, in one transaction.
    fn store_receipt(
        &self,
        key: &str,
        op_hash: &str,
        receipt: &str,
        created_at: &str,
    ) -> Result<()>;

    /// Record the intent of a write under way (replacing an earlier one of the key).
    fn store_intent(&self, key: &str, op_hash: &str, intent: &str) -> Result<()>;

    fn forget_intent(&self, key: &str) -> Result<()>;

    /// Every intent left by writes that did not finish, oldest first.
    fn intents(&self) -> Result<Vec<IntentRow>>;

    /// The intent stored under `key`, if any (one row, not every intent of the vault).
    fn intent(&self, key: &str) -> Result<Option<IntentRow>>;

    /// What `key` holds: its receipt, else its intent; what every write with a key asks
    /// first, so a store that can answers both in one look-up.
    fn held(&self, key: &str) -> Result<KeyHeld> {
        if let Some(row) = self.idempotency(key)? {
            return Ok(KeyHeld::Receipt(row));
        }
        Ok(self.intent(key)?.map_or(KeyHeld::Nothing, KeyHeld::Intent))
    }

    /// [`Idempotency::held`] of `key` and [`Settings::settings`] of `keys`: what every
    /// write with a key reads before it plans, in one round trip where a store can.
    fn held_and_settings(
        &self,
        key: &str,
        keys: &[&str],
    ) -> Result<(KeyHeld, Vec<Option<String>>)> {
        Ok((self.held(key)?, self.settings(keys)?))
    }
}

/// The sync op log, device checkpoints and the E2EE key hierarchy it carries.
pub trait OpLog: Send + Sync {
    /// Ops with `after < seq <= through`, by seq, at most `limit`.
    fn ops_page(&self, after: i64, through: i64, limit: usize) -> Result<Vec<OpRow>>;

    /// What is live at seq `at`: for each note (by id) and each file kept by path
    /// (attachments, private notes), its latest op at or below `at` when that is not a
    /// delete; by path after `after_path`, at most `limit`.
    fn live_at(&self, at: i64, after_path: &str, limit: usize) -> Result<Vec<OpRow>>;

    fn set_checkpoint(&self, device_id: &str, seq: i64, now: &str) -> Result<()>;

    fn checkpoints(&self) -> Result<Vec<CheckpointRow>>;

    /// The seq of the newest op created at or before `cutoff` (0 when none is).
    fn last_op_seq_before(&self, cutoff: &str) -> Result<i64>;

    /// Drop the ops at or below `through` that are not the latest op of their note (or
    /// file kept by path) and not a delete tombstone, and record `through` as the horizon,
    /// in one transaction. Answers how many ops were dropped.
    fn compact_ops(&self, through: i64) -> Result<usize>;

    /// Ops below this seq may have been dropped by compaction (0: none were).
    fn compacted_through(&self) -> Result<i64>;

    /// The wrapped-key hierarchy (JSON as stored), when private notes are enabled.
    fn e2ee_hierarchy(&self) -> Result<Option<String>>;

    /// Store the key hierarchy (the first one, or a replacement) and its `e2ee_key` op
    /// in one transaction.
    fn record_key(&self, op: &OpRow, hierarchy: &str, now: &str) -> Result<()>;
}

/// Writes waiting for (or decided by) a reviewer.
pub trait ReviewQueue: Send + Sync {
    fn insert_pending(&self, row: &PendingRow) -> Result<()>;

    fn pending(&self, id: &str) -> Result<Option<PendingRow>>;

    /// Every pending write, oldest first.
    fn all_pending(&self) -> Result<Vec<PendingRow>>;

    /// How many writes wait for a reviewer.
    fn count_pending(&self) -> Result<usize>;

    /// The ids of the writes that wait, oldest first, at most `limit` (what the console's
    /// poll compares, without reading the writes themselves).
    fn pending_ids(&self, limit: usize) -> Result<Vec<String>>;

    /// The writes that wait, oldest first, at most `limit`; or (with `decided`) the
    /// decided ones, most recently decided first.
    fn pending_rows(&self, decided: bool, limit: usize) -> Result<Vec<PendingRow>>;

    /// Decide a pending write; `false` when it was already decided (exactly one decider wins).
    fn decide_pending(
        &self,
        id: &str,
        status: &str,
        decided_at: &str,
        decided_by: &str,
        error: Option<&str>,
        result: Option<&str>,
    ) -> Result<bool>;

    /// Pending writes stored before migration 6 (their payload is an HTTP request).
    fn legacy_pending(&self) -> Result<Vec<PendingRow>>;

    /// Replace a pending write's payload with the pipeline's request.
    fn upgrade_pending(&self, id: &str, request: &str) -> Result<()>;
}

/// Personal access tokens: keyed hashes only, never a token.
pub trait Tokens: Send + Sync {
    /// The key of the tokens' keyed hash: made once (by whichever of the daemon and the
    /// CLI needs it first) and kept in the settings.
    fn pat_key(&self) -> Result<[u8; 32]>;

    /// Store a new token; `false` when its name or prefix is taken.
    fn insert_pat(&self, row: &PatRow) -> Result<bool>;

    /// Every token, by name.
    fn pats(&self) -> Result<Vec<PatRow>>;

    /// The token whose public prefix is `prefix`, as the store holds it now: from the
    /// cache while no other connection changed the store, else read.
    fn pat(&self, prefix: &str) -> Result<Option<PatRow>>;

    /// Delete the token named `name_or_prefix` (its name, or its public prefix); how many
    /// went (0 or 1).
    fn revoke_pat(&self, name_or_prefix: &str) -> Result<usize>;

    /// Make a personal access token named `name` with `scopes` (permission names), living
    /// `lifetime` from `now` (or until revoked), and store its row; the token is returned
    /// once and never kept. The one maker of tokens, for the CLI and the console; the
    /// caller appends the audit row. A name must be 1 to 100 characters, without control
    /// characters, not starting with `nvp_`, and not taken (`VALIDATION_FAILED` on `name`).
    fn create_pat(
        &self,
        name: &str,
        scopes: &[crate::auth::Permission],
        lifetime: Option<std::time::Duration>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<(String, PatRow)> {
        use crate::auth::pat;
        use crate::clock::timestamp;
        use crate::error::Error;
        let name = name.trim();
        if name.is_empty()
            || name.chars().count() > 100
            || name.chars().any(char::is_control)
            || name.starts_with(pat::PREFIX)
        {
            return Err(Error::invalid_field(
                "name",
                format!(
                    "1 to 100 characters, no control characters, not starting with {}",
                    pat::PREFIX
                ),
            ));
        }
        if self.pats()?.iter().any(|p| p.name == name) {
            return Err(Error::invalid_field(
                "name",
                format!("a token named {name:?} exists: revoke it first, or pick another name"),
            ));
        }
        let expires_at = match lifetime {
            Some(d) => Some(timestamp(
                now + chrono::Duration::from_std(d)
                    .map_err(|_| Error::invalid_field("expires_in", "too long"))?,
            )),
            None => None,
        };
        let mut scopes: Vec<&str> = scopes.iter().map(|p| p.as_str()).collect();
        scopes.sort_unstable();
        scopes.dedup();
        let key = self.pat_key()?;
        // A prefix taken by another token (one chance in 2^47) gets a new token.
        for _ in 0..8 {
            let token = pat::generate().map_err(Error::internal)?;
            let row = PatRow {
                prefix: pat::public_prefix(&token).to_string(),
                name: name.to_string(),
                hash: pat::hash(&key, &token),
                scopes: scopes.join(" "),
                created_at: timestamp(now),
                expires_at: expires_at.clone(),
                last_used_at: None,
            };
            if self.insert_pat(&row)? {
                return Ok((token, row));
            }
        }
        Err(Error::internal("could not store the token: try again"))
    }

    /// Note a use of the token (`token list` shows it).
    fn touch_pat(&self, prefix: &str, at: &str) -> Result<()>;
}

/// The console's sign-in codes and sessions: digests only, never a secret.
pub trait Sessions: Send + Sync {
    /// Store a new sign-in code (its digest) valid until `expires_at`.
    fn insert_sign_in_code(&self, digest: &str, now: &str, expires_at: &str) -> Result<()>;

    /// Use the code whose digest is `digest`: `true` once, for a code that exists, has not
    /// expired and was not used; `false` otherwise.
    fn use_sign_in_code(&self, digest: &str, now: &str) -> Result<bool>;

    /// Whether the code whose digest is `digest` exists, has not expired and was not
    /// used (changes nothing: a daemon serving several vaults asks each which one made it).
    fn sign_in_code_open(&self, digest: &str, now: &str) -> Result<bool>;

    /// Store a new session.
    fn insert_session(&self, row: &SessionRow) -> Result<()>;

    /// The session whose digest is `digest`, if it exists and has not expired at `now`.
    fn session(&self, digest: &str, now: &str) -> Result<Option<SessionRow>>;

    /// Note that a session was used at `now` (shown on the console; at most once a minute).
    fn touch_session(&self, digest: &str, now: &str) -> Result<()>;

    /// End a session (sign-out): `true` when it existed.
    fn delete_session(&self, digest: &str) -> Result<bool>;

    /// Keep a sign-in through the provider under way, by the digest of its `state`.
    fn insert_idp_sign_in(
        &self,
        state_digest: &str,
        sign_in: &IdpSignIn,
        now: &str,
        expires_at: &str,
    ) -> Result<()>;

    /// Take (once) the sign-in whose `state` digest is `state_digest`, if it has not
    /// expired at `now`.
    fn take_idp_sign_in(&self, state_digest: &str, now: &str) -> Result<Option<IdpSignIn>>;
}

/// The audit log: ids and counters, never content.
pub trait Audit: Send + Sync {
    /// Append `event` at `now`.
    fn append_audit(&self, event: &AuditEvent<'_>, now: &str) -> Result<()>;

    /// Append `event` now; a failure is logged, never the caller's error (what it records
    /// has happened).
    fn note_audit(&self, event: &AuditEvent<'_>) {
        let now = crate::clock::timestamp(chrono::Utc::now());
        if let Err(e) = self.append_audit(event, &now) {
            tracing::warn!(kind = event.kind.as_str(), error = %e.message, "cannot append to the audit log");
        }
    }

    /// The newest rows older than `before` (an id; `None`: from the newest), made at
    /// `since` or later (`None`: any time; the time index narrows the scan), that `keep`
    /// accepts, at most `limit`, and whether more would follow.
    fn audit_page(
        &self,
        before: Option<i64>,
        since: Option<&str>,
        keep: &dyn Fn(&AuditRow) -> bool,
        limit: usize,
    ) -> Result<(Vec<AuditRow>, bool)>;
}
