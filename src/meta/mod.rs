//! The metadata store: SQLite (bundled), WAL with `synchronous = FULL` (a committed row
//! survives a power cut), versioned schema migrations.
//!
//! It holds what the folder cannot: stable note ids, the revision chain, settings, the
//! page-token key and the personal access tokens (keyed hashes only, `tokens.rs`). It is auxiliary: the folder stays the truth.

pub mod audit;
pub mod console;
mod open;
pub mod tokens;

use std::path::Path;

use parking_lot::Mutex;
use rusqlite::{params, Connection, OptionalExtension};

use crate::error::Result;

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
/// Never edit a shipped migration: append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: notes, revisions, settings
    "CREATE TABLE settings (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE notes (
        note_id      TEXT PRIMARY KEY,
        path         TEXT NOT NULL UNIQUE,
        version_id   TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        created_at   TEXT NOT NULL,
        observed_at  TEXT NOT NULL
    );
    CREATE TABLE revisions (
        seq             INTEGER PRIMARY KEY,
        version_id      TEXT NOT NULL UNIQUE,
        note_id         TEXT NOT NULL,
        path            TEXT NOT NULL,
        prev_version_id TEXT,
        content_hash    TEXT,
        actor           TEXT NOT NULL,
        kind            TEXT NOT NULL,
        created_at      TEXT NOT NULL
    );
    CREATE INDEX revisions_by_note ON revisions (note_id, seq);",
    // 2: idempotency records of applied writes
    "CREATE TABLE idempotency (
        key        TEXT PRIMARY KEY,
        op_hash    TEXT NOT NULL,
        status     INTEGER NOT NULL,
        body       TEXT NOT NULL,
        created_at TEXT NOT NULL
    );",
    // 3: the review queue and the write-budget window
    "CREATE TABLE pending_writes (
        id         TEXT PRIMARY KEY,
        kind       TEXT NOT NULL,
        status     TEXT NOT NULL,
        agent_id   TEXT NOT NULL,
        created_at TEXT NOT NULL,
        decided_at TEXT,
        error      TEXT,
        payload    TEXT NOT NULL,
        result     TEXT,
        preview    TEXT NOT NULL,
        slug       TEXT NOT NULL
    );
    CREATE INDEX pending_writes_by_time ON pending_writes (created_at);
    CREATE TABLE applied_writes (at TEXT NOT NULL);
    CREATE INDEX applied_writes_by_time ON applied_writes (at);",
    // 4: the history commit of a revision, when known at once (API writes)
    "ALTER TABLE revisions ADD COLUMN commit_id TEXT;",
    // 5: receipts stored as the pipeline's receipt (JSON), not rendered; intents of
    // writes under way, resolved at start after a crash
    "ALTER TABLE idempotency ADD COLUMN receipt TEXT;
    CREATE TABLE write_intents (
        key        TEXT PRIMARY KEY,
        op_hash    TEXT NOT NULL,
        intent     TEXT NOT NULL,
        created_at TEXT NOT NULL
    );",
    // 6: pending writes keep the pipeline's request and receipt (JSON); rows from before
    // keep the HTTP request and the rendered receipt (domain = 0) until upgraded
    "ALTER TABLE pending_writes ADD COLUMN domain INTEGER NOT NULL DEFAULT 0;",
    // 7: personal access tokens: the keyed hash of each (never the token), its public
    // prefix, name, scopes (space-separated) and times
    "CREATE TABLE personal_tokens (
        prefix       TEXT PRIMARY KEY,
        name         TEXT NOT NULL UNIQUE,
        hash         TEXT NOT NULL,
        scopes       TEXT NOT NULL,
        created_at   TEXT NOT NULL,
        expires_at   TEXT,
        last_used_at TEXT
    );",
    // 8: attachments: the facts of each (so a warm start re-hashes only files whose
    // size, mtime or inode changed), the log of their changes (each with its seq), and
    // the nonces of presigned PUT links already used
    "CREATE TABLE attachments (
        path         TEXT PRIMARY KEY,
        size         INTEGER NOT NULL,
        mtime_ns     INTEGER NOT NULL,
        inode        INTEGER NOT NULL,
        sha256       TEXT NOT NULL,
        content_type TEXT NOT NULL,
        modified_at  TEXT NOT NULL
    );
    CREATE TABLE attachment_changes (
        seq        INTEGER PRIMARY KEY,
        path       TEXT NOT NULL,
        sha256     TEXT,
        kind       TEXT NOT NULL,
        actor      TEXT NOT NULL,
        created_at TEXT NOT NULL,
        commit_id  TEXT
    );
    CREATE TABLE presign_nonces (
        nonce      TEXT PRIMARY KEY,
        expires_at INTEGER NOT NULL
    );",
    // 9: the web console: one-time sign-in codes and server-side sessions (the BLAKE3
    // digest of each secret, never the secret), sign-ins through the identity provider
    // under way (the PKCE verifier until the provider sends the person back), and the
    // audit log (ids and counters only)
    "CREATE TABLE sign_in_codes (
        digest     TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        used_at    TEXT
    );
    CREATE TABLE console_sessions (
        digest       TEXT PRIMARY KEY,
        csrf         TEXT NOT NULL,
        created_at   TEXT NOT NULL,
        expires_at   TEXT NOT NULL,
        last_seen_at TEXT NOT NULL
    );
    CREATE TABLE idp_sign_ins (
        state_digest TEXT PRIMARY KEY,
        nonce_digest TEXT NOT NULL,
        verifier     TEXT NOT NULL,
        redirect_uri TEXT NOT NULL,
        expires_at   TEXT NOT NULL
    );
    CREATE TABLE audit_events (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        kind       TEXT NOT NULL,
        actor      TEXT NOT NULL,
        created_at TEXT NOT NULL,
        subject    TEXT,
        counts     TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX audit_events_by_time ON audit_events (created_at);",
    // 10: the device sync plane: the op log (one op per recorded change, at its seq,
    // written in the transaction of its revision or attachment change; compaction drops
    // old ones), the devices' checkpoints, and the wrapped-key state of private notes
    // (ciphertext and public KDF parameters only). Existing changes are carried over,
    // so a device starting from seq 0 reads the whole log.
    "CREATE TABLE sync_ops (
        seq             INTEGER PRIMARY KEY,
        kind            TEXT NOT NULL,
        note_id         TEXT,
        path            TEXT NOT NULL,
        from_path       TEXT,
        version_id      TEXT,
        prev_version_id TEXT,
        content_hash    TEXT,
        visibility      TEXT NOT NULL,
        actor           TEXT NOT NULL,
        created_at      TEXT NOT NULL
    );
    CREATE INDEX sync_ops_by_key ON sync_ops (COALESCE(note_id, 'path:' || path), seq);
    CREATE INDEX sync_ops_by_path ON sync_ops (path);
    INSERT INTO sync_ops (seq, kind, note_id, path, from_path, version_id, prev_version_id,
                          content_hash, visibility, actor, created_at)
      SELECT r.seq,
             CASE WHEN r.content_hash IS NULL THEN 'delete'
                  WHEN p.path IS NOT NULL AND p.path <> r.path THEN 'move'
                  ELSE 'upsert' END,
             r.note_id, r.path,
             CASE WHEN p.path IS NOT NULL AND p.path <> r.path THEN p.path END,
             r.version_id, r.prev_version_id, r.content_hash, 'standard', r.actor, r.created_at
      FROM revisions r LEFT JOIN revisions p ON p.version_id = r.prev_version_id;
    INSERT INTO sync_ops (seq, kind, path, content_hash, visibility, actor, created_at)
      SELECT seq,
             CASE WHEN path LIKE '%_.nvpriv' THEN
                    CASE WHEN sha256 IS NULL THEN 'delete' ELSE 'upsert' END
                  WHEN sha256 IS NULL THEN 'attachment_delete' ELSE 'attachment_upsert' END,
             path, CASE WHEN sha256 IS NULL THEN NULL ELSE 'sha256:' || sha256 END,
             CASE WHEN path LIKE '%_.nvpriv' THEN 'private' ELSE 'standard' END,
             actor, created_at
      FROM attachment_changes;
    CREATE TABLE sync_checkpoints (
        device_id  TEXT PRIMARY KEY,
        seq        INTEGER NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE e2ee_keys (
        id          INTEGER PRIMARY KEY CHECK (id = 1),
        hierarchy   TEXT NOT NULL,
        enabled_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL
    );",
    // 11: the review queue by status and age: the console's count and first page of
    // pending writes (and its poll) read the index, not every row's payload and diff
    "CREATE INDEX IF NOT EXISTS pending_writes_by_status
        ON pending_writes (status, created_at, id);",
    // 12: who decided a pending write (a token's name, a console person, or an
    // unauthenticated local request)
    "ALTER TABLE pending_writes ADD COLUMN decided_by TEXT;",
];

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

pub struct Meta {
    conn: Mutex<Connection>,
    /// Personal access token rows as last read (`tokens.rs`), valid while the database
    /// has not changed; locked after `conn`, never before.
    pats: Mutex<tokens::PatCache>,
}

impl Meta {
    pub fn schema_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .lock()
            .pragma_query_value(None, "user_version", |r| r.get(0))?)
    }

    pub fn setting(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .lock()
            .query_row("SELECT value FROM settings WHERE key = ?1", [key], |r| {
                r.get(0)
            })
            .optional()?)
    }

    pub fn set_setting(&self, key: &str, value: &str) -> Result<()> {
        self.conn.lock().execute(
            "INSERT INTO settings (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            params![key, value],
        )?;
        Ok(())
    }

    /// Every note row, for the startup scan to compare with the folder.
    pub fn all_notes(&self) -> Result<Vec<NoteRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare(
            "SELECT note_id, path, version_id, content_hash, created_at, observed_at FROM notes",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(NoteRow {
                note_id: r.get(0)?,
                path: r.get(1)?,
                version_id: r.get(2)?,
                content_hash: r.get(3)?,
                created_at: r.get(4)?,
                observed_at: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The highest committed sequence number (0 before the first change).
    pub fn committed_seq(&self) -> Result<i64> {
        Ok(self.conn.lock().query_row(
            "SELECT MAX((SELECT COALESCE(MAX(seq), 0) FROM revisions),
                        (SELECT COALESCE(MAX(seq), 0) FROM attachment_changes),
                        (SELECT COALESCE(MAX(seq), 0) FROM sync_ops))",
            [],
            |r| r.get(0),
        )?)
    }

    /// Record a batch of revisions and the resulting note rows in one transaction.
    /// `notes` upserts rows; `removed` deletes rows by note id.
    pub fn record(
        &self,
        revisions: &[RevisionRow],
        ops: impl IntoIterator<Item = OpRow>,
        notes: impl IntoIterator<Item = NoteRow>,
        removed: &[String],
    ) -> Result<()> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction()?;
        insert_ops(&tx, ops)?;
        {
            let mut rev = tx.prepare_cached(
                "INSERT INTO revisions (seq, version_id, note_id, path, prev_version_id,
                   content_hash, actor, kind, created_at, commit_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?;
            for r in revisions {
                rev.execute(params![
                    r.seq,
                    r.version_id,
                    r.note_id,
                    r.path,
                    r.prev_version_id,
                    r.content_hash,
                    r.actor,
                    r.kind,
                    r.created_at,
                    r.commit_id
                ])?;
            }
            let mut del = tx.prepare_cached("DELETE FROM notes WHERE note_id = ?1")?;
            for id in removed {
                del.execute([id])?;
            }
            let mut up = tx.prepare_cached(
                "INSERT INTO notes (note_id, path, version_id, content_hash, created_at, observed_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (note_id) DO UPDATE SET path = excluded.path,
                   version_id = excluded.version_id, content_hash = excluded.content_hash,
                   observed_at = excluded.observed_at",
            )?;
            for n in notes {
                up.execute(params![
                    n.note_id,
                    n.path,
                    n.version_id,
                    n.content_hash,
                    n.created_at,
                    n.observed_at
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    pub fn idempotency(&self, key: &str) -> Result<Option<IdempotencyRow>> {
        Ok(self
            .conn
            .lock()
            .query_row(
                "SELECT key, op_hash, receipt, status, body FROM idempotency WHERE key = ?1",
                [key],
                |r| {
                    Ok(IdempotencyRow {
                        key: r.get(0)?,
                        op_hash: r.get(1)?,
                        receipt: r.get(2)?,
                        status: r.get(3)?,
                        body: r.get(4)?,
                    })
                },
            )
            .optional()?)
    }

    /// Keep a receipt under its key, and drop the key's intent, in one transaction.
    pub fn store_receipt(
        &self,
        key: &str,
        op_hash: &str,
        receipt: &str,
        created_at: &str,
    ) -> Result<()> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction()?;
        tx.execute(
            "INSERT INTO idempotency (key, op_hash, receipt, status, body, created_at)
             VALUES (?1, ?2, ?3, 0, '', ?4)",
            params![key, op_hash, receipt, created_at],
        )?;
        tx.execute("DELETE FROM write_intents WHERE key = ?1", [key])?;
        tx.commit()?;
        Ok(())
    }

    /// Record the intent of a write under way (replacing an earlier one of the key).
    pub fn store_intent(&self, key: &str, op_hash: &str, intent: &str) -> Result<()> {
        self.conn.lock().execute(
            "INSERT OR REPLACE INTO write_intents (key, op_hash, intent, created_at)
             VALUES (?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
            params![key, op_hash, intent],
        )?;
        Ok(())
    }

    pub fn forget_intent(&self, key: &str) -> Result<()> {
        self.conn
            .lock()
            .execute("DELETE FROM write_intents WHERE key = ?1", [key])?;
        Ok(())
    }

    /// Every intent left by writes that did not finish, oldest first.
    pub fn intents(&self) -> Result<Vec<IntentRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn
            .prepare("SELECT key, op_hash, intent FROM write_intents ORDER BY created_at, key")?;
        let rows = stmt.query_map([], |r| {
            Ok(IntentRow {
                key: r.get(0)?,
                op_hash: r.get(1)?,
                intent: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn insert_pending(&self, row: &PendingRow) -> Result<()> {
        self.conn.lock().execute(
            "INSERT INTO pending_writes (id, kind, status, agent_id, created_at, decided_at, error,
               payload, result, preview, slug, domain, decided_by)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            params![
                row.id,
                row.kind,
                row.status,
                row.agent_id,
                row.created_at,
                row.decided_at,
                row.error,
                row.payload,
                row.result,
                row.preview,
                row.slug,
                row.domain,
                row.decided_by
            ],
        )?;
        Ok(())
    }

    fn pending_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<PendingRow> {
        Ok(PendingRow {
            id: r.get(0)?,
            kind: r.get(1)?,
            status: r.get(2)?,
            agent_id: r.get(3)?,
            created_at: r.get(4)?,
            decided_at: r.get(5)?,
            error: r.get(6)?,
            payload: r.get(7)?,
            result: r.get(8)?,
            preview: r.get(9)?,
            slug: r.get(10)?,
            domain: r.get(11)?,
            decided_by: r.get(12)?,
        })
    }

    const PENDING_COLUMNS: &'static str =
        "id, kind, status, agent_id, created_at, decided_at, error, payload, result, preview, slug, domain, decided_by";

    pub fn pending(&self, id: &str) -> Result<Option<PendingRow>> {
        let conn = self.conn.lock();
        let sql = format!(
            "SELECT {} FROM pending_writes WHERE id = ?1",
            Self::PENDING_COLUMNS
        );
        Ok(conn.query_row(&sql, [id], Self::pending_from).optional()?)
    }

    /// Every pending write, oldest first.
    pub fn all_pending(&self) -> Result<Vec<PendingRow>> {
        let conn = self.conn.lock();
        let sql = format!(
            "SELECT {} FROM pending_writes ORDER BY created_at, id",
            Self::PENDING_COLUMNS
        );
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map([], Self::pending_from)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// How many writes wait for a reviewer.
    pub fn count_pending(&self) -> Result<usize> {
        let n: i64 = self
            .conn
            .lock()
            .prepare_cached("SELECT COUNT(*) FROM pending_writes WHERE status = 'pending'")?
            .query_row([], |r| r.get(0))?;
        Ok(n as usize)
    }

    /// The ids of the writes that wait, oldest first, at most `limit` (what the console's
    /// poll compares, without reading the writes themselves).
    pub fn pending_ids(&self, limit: usize) -> Result<Vec<String>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT id FROM pending_writes WHERE status = 'pending'
             ORDER BY created_at, id LIMIT ?1",
        )?;
        let rows = stmt.query_map([limit as i64], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The writes that wait, oldest first, at most `limit`; or (with `decided`) the
    /// decided ones, most recently decided first.
    pub fn pending_rows(&self, decided: bool, limit: usize) -> Result<Vec<PendingRow>> {
        let conn = self.conn.lock();
        let sql = if decided {
            format!(
                "SELECT {} FROM pending_writes WHERE status != 'pending'
                 ORDER BY decided_at DESC, id LIMIT ?1",
                Self::PENDING_COLUMNS
            )
        } else {
            format!(
                "SELECT {} FROM pending_writes WHERE status = 'pending'
                 ORDER BY created_at, id LIMIT ?1",
                Self::PENDING_COLUMNS
            )
        };
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([limit as i64], Self::pending_from)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Decide a pending write; `false` when it was already decided (exactly one decider wins).
    pub fn decide_pending(
        &self,
        id: &str,
        status: &str,
        decided_at: &str,
        decided_by: &str,
        error: Option<&str>,
        result: Option<&str>,
    ) -> Result<bool> {
        let changed = self.conn.lock().execute(
            "UPDATE pending_writes SET status = ?2, decided_at = ?3, decided_by = ?4, error = ?5,
               result = ?6
             WHERE id = ?1 AND status = 'pending'",
            params![id, status, decided_at, decided_by, error, result],
        )?;
        Ok(changed == 1)
    }

    /// Pending writes stored before migration 6 (their payload is an HTTP request).
    pub fn legacy_pending(&self) -> Result<Vec<PendingRow>> {
        let conn = self.conn.lock();
        let sql = format!(
            "SELECT {} FROM pending_writes WHERE domain = 0 AND status = 'pending'",
            Self::PENDING_COLUMNS
        );
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map([], Self::pending_from)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Replace a pending write's payload with the pipeline's request.
    pub fn upgrade_pending(&self, id: &str, request: &str) -> Result<()> {
        self.conn.lock().execute(
            "UPDATE pending_writes SET payload = ?2, domain = 1 WHERE id = ?1 AND domain = 0",
            params![id, request],
        )?;
        Ok(())
    }

    pub fn record_applied_write(&self, at: &str) -> Result<()> {
        self.conn
            .lock()
            .execute("INSERT INTO applied_writes (at) VALUES (?1)", [at])?;
        Ok(())
    }

    /// Applied writes since `since`, and the oldest of them.
    pub fn applied_writes_since(&self, since: &str) -> Result<(u64, Option<String>)> {
        Ok(self.conn.lock().query_row(
            "SELECT COUNT(*), MIN(at) FROM applied_writes WHERE at > ?1",
            [since],
            |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)),
        )?)
    }

    /// One revision by its version id.
    pub fn revision(&self, version_id: &str) -> Result<Option<RevisionRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, version_id, note_id, path, prev_version_id, content_hash, actor, kind,
                    created_at, commit_id
             FROM revisions WHERE version_id = ?1",
        )?;
        Ok(stmt.query_row([version_id], revision_from).optional()?)
    }

    /// The latest revision recorded at `path` (to find a deleted note by its slug).
    pub fn latest_revision_at(&self, path: &str) -> Result<Option<RevisionRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, version_id, note_id, path, prev_version_id, content_hash, actor, kind,
                    created_at, commit_id
             FROM revisions WHERE path = ?1 ORDER BY seq DESC LIMIT 1",
        )?;
        Ok(stmt.query_row([path], revision_from).optional()?)
    }

    /// One page of a note's revisions by seq: after `after` (exclusive) in the given
    /// direction, at most `limit`.
    pub fn revisions_page(
        &self,
        note_id: &str,
        after: Option<i64>,
        descending: bool,
        limit: usize,
    ) -> Result<Vec<RevisionRow>> {
        let conn = self.conn.lock();
        let sql = if descending {
            "SELECT seq, version_id, note_id, path, prev_version_id, content_hash, actor, kind,
                    created_at, commit_id
             FROM revisions WHERE note_id = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3"
        } else {
            "SELECT seq, version_id, note_id, path, prev_version_id, content_hash, actor, kind,
                    created_at, commit_id
             FROM revisions WHERE note_id = ?1 AND seq > ?2 ORDER BY seq ASC LIMIT ?3"
        };
        let bound = after.unwrap_or(if descending { i64::MAX } else { i64::MIN });
        let mut stmt = conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params![note_id, bound, limit as i64], revision_from)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Revisions of one note, oldest first.
    pub fn revisions_of(&self, note_id: &str) -> Result<Vec<RevisionRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, version_id, note_id, path, prev_version_id, content_hash, actor, kind,
                    created_at, commit_id
             FROM revisions WHERE note_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([note_id], revision_from)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Revisions with a seq above `after`, by seq.
    pub fn revisions_after(&self, after: i64) -> Result<Vec<RevisionRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, version_id, note_id, path, prev_version_id, content_hash, actor, kind,
                    created_at, commit_id
             FROM revisions WHERE seq > ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([after], revision_from)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every stored attachment's facts.
    pub fn all_attachments(&self) -> Result<Vec<AttachmentRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare(
            "SELECT path, size, mtime_ns, inode, sha256, content_type, modified_at FROM attachments",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(AttachmentRow {
                path: r.get(0)?,
                size: r.get::<_, i64>(1)? as u64,
                mtime_ns: r.get(2)?,
                inode: r.get::<_, i64>(3)? as u64,
                sha256: r.get(4)?,
                content_type: r.get(5)?,
                modified_at: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Record attachment changes and their facts in one transaction: `changes` are
    /// appended to the log, `upserts` stored, `removed` (paths) forgotten.
    pub fn record_attachments(
        &self,
        changes: &[AttachmentChangeRow],
        ops: &[OpRow],
        upserts: &[AttachmentRow],
        removed: &[String],
    ) -> Result<()> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction()?;
        insert_ops(&tx, ops)?;
        {
            let mut log = tx.prepare_cached(
                "INSERT INTO attachment_changes (seq, path, sha256, kind, actor, created_at, commit_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for c in changes {
                log.execute(params![
                    c.seq,
                    c.path,
                    c.sha256,
                    c.kind,
                    c.actor,
                    c.created_at,
                    c.commit_id
                ])?;
            }
            let mut del = tx.prepare_cached("DELETE FROM attachments WHERE path = ?1")?;
            for path in removed {
                del.execute([path])?;
            }
            let mut up = tx.prepare_cached(
                "INSERT INTO attachments (path, size, mtime_ns, inode, sha256, content_type, modified_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (path) DO UPDATE SET size = excluded.size,
                   mtime_ns = excluded.mtime_ns, inode = excluded.inode,
                   sha256 = excluded.sha256, content_type = excluded.content_type,
                   modified_at = excluded.modified_at",
            )?;
            for a in upserts {
                up.execute(params![
                    a.path,
                    a.size as i64,
                    a.mtime_ns,
                    a.inode as i64,
                    a.sha256,
                    a.content_type,
                    a.modified_at
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Mark a presigned link's nonce used; `false` when it was used already. Nonces
    /// past their expiry are forgotten (their links are refused as expired anyway).
    pub fn use_nonce(&self, nonce: &str, expires_at: i64, now: i64) -> Result<bool> {
        let conn = self.conn.lock();
        conn.execute("DELETE FROM presign_nonces WHERE expires_at < ?1", [now])?;
        let n = conn.execute(
            "INSERT OR IGNORE INTO presign_nonces (nonce, expires_at) VALUES (?1, ?2)",
            params![nonce, expires_at],
        )?;
        Ok(n == 1)
    }

    /// Name the history commit that holds each of these revisions (by seq).
    pub fn set_commit_ids(&self, seqs: &[i64], commit_id: &str) -> Result<()> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction()?;
        {
            let mut stmt =
                tx.prepare_cached("UPDATE revisions SET commit_id = ?1 WHERE seq = ?2")?;
            for seq in seqs {
                stmt.execute(params![commit_id, seq])?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

/// Append ops to the sync log inside the caller's transaction.
fn insert_ops(
    tx: &rusqlite::Transaction<'_>,
    ops: impl IntoIterator<Item = impl std::borrow::Borrow<OpRow>>,
) -> Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT INTO sync_ops (seq, kind, note_id, path, from_path, version_id, prev_version_id,
           content_hash, visibility, actor, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
    for o in ops {
        let o = o.borrow();
        stmt.execute(params![
            o.seq,
            o.kind,
            o.note_id,
            o.path,
            o.from_path,
            o.version_id,
            o.prev_version_id,
            o.content_hash,
            o.visibility,
            o.actor,
            o.created_at
        ])?;
    }
    Ok(())
}

const OP_COLUMNS: &str = "seq, kind, note_id, path, from_path, version_id, prev_version_id, \
                          content_hash, visibility, actor, created_at";

fn op_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<OpRow> {
    Ok(OpRow {
        seq: r.get(0)?,
        kind: r.get(1)?,
        note_id: r.get(2)?,
        path: r.get(3)?,
        from_path: r.get(4)?,
        version_id: r.get(5)?,
        prev_version_id: r.get(6)?,
        content_hash: r.get(7)?,
        visibility: r.get(8)?,
        actor: r.get(9)?,
        created_at: r.get(10)?,
    })
}

/// The sync plane's rows: the op log, checkpoints, compaction, the wrapped-key state.
impl Meta {
    /// Ops with `after < seq <= through`, by seq, at most `limit`.
    pub fn ops_page(&self, after: i64, through: i64, limit: usize) -> Result<Vec<OpRow>> {
        let conn = self.conn.lock();
        let sql = format!(
            "SELECT {OP_COLUMNS} FROM sync_ops WHERE seq > ?1 AND seq <= ?2 ORDER BY seq LIMIT ?3"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![after, through, limit as i64], op_from)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// What is live at seq `at`: for each note (by id) and each file kept by path
    /// (attachments, private notes), its latest op at or below `at` when that is not a
    /// delete; by path after `after_path`, at most `limit`.
    pub fn live_at(&self, at: i64, after_path: &str, limit: usize) -> Result<Vec<OpRow>> {
        let conn = self.conn.lock();
        let sql = format!(
            "SELECT {OP_COLUMNS} FROM sync_ops o
             WHERE o.kind IN ('upsert', 'move', 'attachment_upsert') AND o.seq <= ?1 AND o.path > ?2
               AND o.seq = (SELECT MAX(seq) FROM sync_ops l
                            WHERE COALESCE(l.note_id, 'path:' || l.path)
                                = COALESCE(o.note_id, 'path:' || o.path)
                              AND l.seq <= ?1)
             ORDER BY o.path LIMIT ?3"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![at, after_path, limit as i64], op_from)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn set_checkpoint(&self, device_id: &str, seq: i64, now: &str) -> Result<()> {
        self.conn.lock().execute(
            "INSERT INTO sync_checkpoints (device_id, seq, updated_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (device_id) DO UPDATE SET seq = MAX(seq, excluded.seq),
               updated_at = excluded.updated_at",
            params![device_id, seq, now],
        )?;
        Ok(())
    }

    pub fn checkpoints(&self) -> Result<Vec<CheckpointRow>> {
        let conn = self.conn.lock();
        let mut stmt =
            conn.prepare("SELECT device_id, seq, updated_at FROM sync_checkpoints ORDER BY seq")?;
        let rows = stmt.query_map([], |r| {
            Ok(CheckpointRow {
                device_id: r.get(0)?,
                seq: r.get(1)?,
                updated_at: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The seq of the newest op created at or before `cutoff` (0 when none is).
    pub fn last_op_seq_before(&self, cutoff: &str) -> Result<i64> {
        Ok(self.conn.lock().query_row(
            "SELECT COALESCE(MAX(seq), 0) FROM sync_ops WHERE created_at <= ?1",
            [cutoff],
            |r| r.get(0),
        )?)
    }

    /// Drop the ops at or below `through` that are not the latest op of their note (or
    /// file kept by path) and not a delete tombstone, and record `through` as the horizon,
    /// in one transaction. Answers how many ops were dropped.
    pub fn compact_ops(&self, through: i64) -> Result<usize> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction()?;
        let dropped = tx.execute(
            "DELETE FROM sync_ops
             WHERE seq <= ?1 AND kind NOT IN ('delete', 'attachment_delete')
               AND EXISTS (SELECT 1 FROM sync_ops l
                           WHERE COALESCE(l.note_id, 'path:' || l.path)
                               = COALESCE(sync_ops.note_id, 'path:' || sync_ops.path)
                             AND l.seq > sync_ops.seq)",
            [through],
        )?;
        tx.execute(
            "INSERT INTO settings (key, value) VALUES ('sync_compacted_through', ?1)
             ON CONFLICT (key) DO UPDATE SET
               value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
            [through.to_string()],
        )?;
        tx.commit()?;
        Ok(dropped)
    }

    /// Ops below this seq may have been dropped by compaction (0: none were).
    pub fn compacted_through(&self) -> Result<i64> {
        Ok(self
            .setting("sync_compacted_through")?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    /// The wrapped-key hierarchy (JSON as stored), when private notes are enabled.
    pub fn e2ee_hierarchy(&self) -> Result<Option<String>> {
        Ok(self
            .conn
            .lock()
            .query_row("SELECT hierarchy FROM e2ee_keys WHERE id = 1", [], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// Store the key hierarchy (the first one, or a replacement) and its `e2ee_key` op
    /// in one transaction.
    pub fn record_key(&self, op: &OpRow, hierarchy: &str, now: &str) -> Result<()> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction()?;
        insert_ops(&tx, std::slice::from_ref(op))?;
        tx.execute(
            "INSERT INTO e2ee_keys (id, hierarchy, enabled_at, updated_at) VALUES (1, ?1, ?2, ?2)
             ON CONFLICT (id) DO UPDATE SET hierarchy = excluded.hierarchy,
               updated_at = excluded.updated_at",
            params![hierarchy, now],
        )?;
        tx.commit()?;
        Ok(())
    }
}

fn revision_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<RevisionRow> {
    Ok(RevisionRow {
        seq: r.get(0)?,
        version_id: r.get(1)?,
        note_id: r.get(2)?,
        path: r.get(3)?,
        prev_version_id: r.get(4)?,
        content_hash: r.get(5)?,
        actor: r.get(6)?,
        kind: r.get(7)?,
        created_at: r.get(8)?,
        commit_id: r.get(9)?,
    })
}

/// The schema version this build migrates a store to.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// What `notevault check` reads of a store, opened read-only: no migration, no write.
#[derive(Debug, Default)]
pub struct Inspection {
    /// `PRAGMA user_version`: the migrations that ran.
    pub schema: i64,
    /// What `PRAGMA quick_check` found (empty when the file is sound).
    pub damage: Vec<String>,
    pub notes: Vec<NoteRow>,
    pub revisions: i64,
    /// The highest seq recorded (revisions and attachment changes).
    pub committed_seq: i64,
    /// Note rows whose `version_id` is not a revision of that note at that path.
    pub unversioned: Vec<String>,
}

/// Read a store without changing it. An error is a store that cannot be read at all
/// (not a database, unreadable), in words for one line.
pub fn inspect(path: &Path) -> std::result::Result<Inspection, String> {
    use rusqlite::OpenFlags;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| e.to_string())?;
    let fail = |e: rusqlite::Error| e.to_string();
    let schema: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(fail)?;
    let mut out = Inspection {
        schema,
        ..Inspection::default()
    };
    let mut stmt = conn.prepare("PRAGMA quick_check").map_err(fail)?;
    let verdict: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .map_err(fail)?
        .collect::<std::result::Result<_, _>>()
        .map_err(fail)?;
    if verdict != ["ok"] {
        out.damage = verdict;
        return Ok(out);
    }
    if schema < 1 {
        return Ok(out);
    }
    let mut stmt = conn
        .prepare(
            "SELECT note_id, path, version_id, content_hash, created_at, observed_at FROM notes",
        )
        .map_err(fail)?;
    out.notes = stmt
        .query_map([], |r| {
            Ok(NoteRow {
                note_id: r.get(0)?,
                path: r.get(1)?,
                version_id: r.get(2)?,
                content_hash: r.get(3)?,
                created_at: r.get(4)?,
                observed_at: r.get(5)?,
            })
        })
        .map_err(fail)?
        .collect::<std::result::Result<_, _>>()
        .map_err(fail)?;
    out.revisions = conn
        .query_row("SELECT COUNT(*) FROM revisions", [], |r| r.get(0))
        .map_err(fail)?;
    out.committed_seq = conn
        .query_row("SELECT COALESCE(MAX(seq), 0) FROM revisions", [], |r| {
            r.get(0)
        })
        .map_err(fail)?;
    // Attachment changes have their own table since migration 8.
    if let Ok(seq) = conn.query_row(
        "SELECT COALESCE(MAX(seq), 0) FROM attachment_changes",
        [],
        |r| r.get::<_, i64>(0),
    ) {
        out.committed_seq = out.committed_seq.max(seq);
    }
    let mut stmt = conn
        .prepare(
            "SELECT n.path FROM notes n WHERE NOT EXISTS (SELECT 1 FROM revisions r
               WHERE r.version_id = n.version_id AND r.note_id = n.note_id)",
        )
        .map_err(fail)?;
    out.unversioned = stmt
        .query_map([], |r| r.get(0))
        .map_err(fail)?
        .collect::<std::result::Result<_, _>>()
        .map_err(fail)?;
    Ok(out)
}

pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    let done: usize =
        conn.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))? as usize;
    if done > MIGRATIONS.len() {
        return Err(crate::error::Error::new(
            crate::error::Reason::STORAGE_UNAVAILABLE,
            format!(
                "metadata store schema {done} is newer than this notevault ({}); upgrade notevault",
                MIGRATIONS.len()
            ),
        ));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(done) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
