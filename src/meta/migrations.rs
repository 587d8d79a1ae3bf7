//! The schema: migrations applied in order, and the version a store is migrated to.

use rusqlite::Connection;

use crate::error::Result;

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
/// Never edit a shipped migration: append a new one.
pub(super) const MIGRATIONS: &[&str] = &[
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

/// The schema version this build migrates a store to.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

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
