//! Hosted mode's schema: migrations applied in order, embedded in the binary, and the
//! version a database is at (`notevault_schema`, one row).
//!
//! The tables mirror `meta`'s SQLite ones, each row carrying its `vault_id` (a foreign
//! key to `vaults` with `ON DELETE CASCADE`, so deleting a vault's row purges all of it
//! in one statement). Bytes a client gets back as they were sent (receipts, request
//! payloads, the key hierarchy) are `text`, never `jsonb`, which would reorder keys.

use crate::error::{Error, Reason, Result};

use super::{db_error, Database};

/// Schema migrations, applied in order; `notevault_schema.version` records how many ran.
/// Never edit a shipped migration: append a new one.
pub const MIGRATIONS: &[&str] = &[
    // 1: every table of hosted mode
    "CREATE TABLE vaults (
        id         uuid PRIMARY KEY,
        name       text NOT NULL UNIQUE,
        org_id     text,
        created_at timestamptz NOT NULL DEFAULT now(),
        -- set, and committed, before the purge: every instance refuses the vault at once
        deleting   boolean NOT NULL DEFAULT false
    );
    CREATE INDEX vaults_by_org ON vaults (org_id) WHERE org_id IS NOT NULL;

    -- the per-vault gapless seq: bumped (UPDATE .. RETURNING) in the transaction of the
    -- change it numbers, so a rolled-back write leaves no gap and writers of one vault
    -- queue on this row alone
    CREATE TABLE vault_counters (
        vault_id      uuid PRIMARY KEY REFERENCES vaults (id) ON DELETE CASCADE,
        committed_seq bigint NOT NULL DEFAULT 0
    );

    CREATE TABLE settings (
        vault_id uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        key      text NOT NULL,
        value    text NOT NULL,
        PRIMARY KEY (vault_id, key)
    );

    -- note and revision bytes, deduplicated by hash within a vault (not across vaults:
    -- a purge must not touch another vault's bytes, and equal hashes say nothing across)
    CREATE TABLE contents (
        vault_id     uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        content_hash text NOT NULL,
        bytes        bytea NOT NULL,
        PRIMARY KEY (vault_id, content_hash)
    );

    -- the current state of each note: its handle's fields and its bytes (by hash)
    CREATE TABLE notes (
        vault_id     uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        note_id      text NOT NULL,
        path         text NOT NULL,
        title        text NOT NULL,
        status       text,
        visibility   text NOT NULL DEFAULT 'standard',
        version_id   text NOT NULL,
        content_hash text NOT NULL,
        seq          bigint NOT NULL,
        created_at   timestamptz NOT NULL,
        observed_at  timestamptz NOT NULL,
        PRIMARY KEY (vault_id, note_id),
        UNIQUE (vault_id, path),
        FOREIGN KEY (vault_id, content_hash) REFERENCES contents (vault_id, content_hash)
    );

    CREATE TABLE revisions (
        vault_id        uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        seq             bigint NOT NULL,
        version_id      text NOT NULL,
        note_id         text NOT NULL,
        path            text NOT NULL,
        prev_version_id text,
        -- NULL: the note was deleted
        content_hash    text,
        actor           text NOT NULL,
        kind            text NOT NULL,
        created_at      timestamptz NOT NULL,
        PRIMARY KEY (vault_id, seq),
        UNIQUE (vault_id, version_id),
        FOREIGN KEY (vault_id, content_hash) REFERENCES contents (vault_id, content_hash)
    );
    CREATE INDEX revisions_by_note ON revisions (vault_id, note_id, seq);

    -- the device sync plane's op log, one op per change at its seq
    CREATE TABLE sync_ops (
        vault_id        uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        seq             bigint NOT NULL,
        kind            text NOT NULL,
        note_id         text,
        path            text NOT NULL,
        from_path       text,
        version_id      text,
        prev_version_id text,
        content_hash    text,
        visibility      text NOT NULL,
        actor           text NOT NULL,
        created_at      timestamptz NOT NULL,
        PRIMARY KEY (vault_id, seq)
    );
    CREATE INDEX sync_ops_by_path ON sync_ops (vault_id, path);
    CREATE TABLE sync_checkpoints (
        vault_id   uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        device_id  text NOT NULL,
        seq        bigint NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (vault_id, device_id)
    );
    -- private notes' key hierarchy: wrapped keys and public KDF parameters only
    CREATE TABLE e2ee_keys (
        vault_id   uuid PRIMARY KEY REFERENCES vaults (id) ON DELETE CASCADE,
        hierarchy  text NOT NULL,
        enabled_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL
    );

    -- idempotency records: written in the transaction of the write they answer
    CREATE TABLE idempotency (
        vault_id   uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        key        text NOT NULL,
        op_hash    text NOT NULL,
        receipt    text NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (vault_id, key)
    );

    -- the review queue and the write-budget window
    CREATE TABLE pending_writes (
        vault_id   uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        id         text NOT NULL,
        kind       text NOT NULL,
        status     text NOT NULL,
        agent_id   text NOT NULL,
        created_at timestamptz NOT NULL,
        decided_at timestamptz,
        decided_by text,
        error      text,
        payload    text NOT NULL,
        result     text,
        preview    text NOT NULL,
        slug       text NOT NULL,
        PRIMARY KEY (vault_id, id)
    );
    CREATE INDEX pending_writes_by_status ON pending_writes (vault_id, status, created_at, id);
    CREATE TABLE applied_writes (
        vault_id uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        at       timestamptz NOT NULL
    );
    CREATE INDEX applied_writes_by_time ON applied_writes (vault_id, at);

    -- personal access tokens: the keyed hash only; the prefix is unique across vaults,
    -- since a bearer's prefix is what finds its vault
    CREATE TABLE personal_tokens (
        prefix       text PRIMARY KEY,
        vault_id     uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        name         text NOT NULL,
        hash         text NOT NULL,
        scopes       text NOT NULL,
        created_at   timestamptz NOT NULL,
        expires_at   timestamptz,
        last_used_at timestamptz,
        UNIQUE (vault_id, name)
    );

    -- the console: sign-in codes, sessions, sign-ins through the identity provider (the
    -- BLAKE3 digest of each secret, never the secret)
    CREATE TABLE sign_in_codes (
        digest     text PRIMARY KEY,
        vault_id   uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        used_at    timestamptz
    );
    CREATE TABLE console_sessions (
        digest       text PRIMARY KEY,
        vault_id     uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        csrf         text NOT NULL,
        created_at   timestamptz NOT NULL,
        expires_at   timestamptz NOT NULL,
        last_seen_at timestamptz NOT NULL
    );
    CREATE TABLE idp_sign_ins (
        state_digest text PRIMARY KEY,
        vault_id     uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        nonce_digest text NOT NULL,
        verifier     text NOT NULL,
        redirect_uri text NOT NULL,
        expires_at   timestamptz NOT NULL
    );
    CREATE TABLE presign_nonces (
        vault_id   uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        nonce      text NOT NULL,
        expires_at bigint NOT NULL,
        PRIMARY KEY (vault_id, nonce)
    );

    -- the audit log: ids and counters only
    CREATE TABLE audit_events (
        vault_id   uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        id         bigint GENERATED ALWAYS AS IDENTITY,
        kind       text NOT NULL,
        actor      text NOT NULL,
        created_at timestamptz NOT NULL,
        subject    text,
        counts     text NOT NULL DEFAULT '{}',
        PRIMARY KEY (vault_id, id)
    );
    CREATE INDEX audit_events_by_time ON audit_events (vault_id, created_at);",
    // 2: what the metadata traits' rows (`storage::rows`) need and 1 lacks.
    // - Times are `text COLLATE "C"`, as the rows carry them (RFC 3339, milliseconds,
    //   UTC): a reader gets back the very string written, and comparing or ordering them
    //   is byte order, as in SQLite (for that format, time order too).
    // - Names and paths that answers are ordered by compare in byte order ("C"), as
    //   SQLite's do, whatever the database's default collation.
    // - No foreign key from notes and revisions to `contents`: the revision store's bytes
    //   are written in the metadata transaction (`revisions::Staged`), but it is complete
    //   without them (a delete's revision has none; `contents` rows are collected by
    //   reference), and the metadata alone is tested without bytes.
    // - `notes.title` and `notes.seq` may be unknown: the recorder's note row (`NoteRow`)
    //   does not carry them.
    // - The attachment tables, write intents, a revision's history commit, whether a
    //   pending write holds the pipeline's request (`domain`).
    r#"ALTER TABLE notes DROP CONSTRAINT notes_vault_id_content_hash_fkey;
    ALTER TABLE revisions DROP CONSTRAINT revisions_vault_id_content_hash_fkey;
    ALTER TABLE notes ALTER COLUMN title DROP NOT NULL;
    ALTER TABLE notes ALTER COLUMN seq DROP NOT NULL;
    ALTER TABLE notes ALTER COLUMN created_at TYPE text COLLATE "C" USING to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE notes ALTER COLUMN observed_at TYPE text COLLATE "C" USING to_char(observed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE revisions ALTER COLUMN created_at TYPE text COLLATE "C" USING to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE sync_ops ALTER COLUMN created_at TYPE text COLLATE "C" USING to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE sync_checkpoints ALTER COLUMN updated_at TYPE text COLLATE "C" USING to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE e2ee_keys ALTER COLUMN enabled_at TYPE text COLLATE "C" USING to_char(enabled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE e2ee_keys ALTER COLUMN updated_at TYPE text COLLATE "C" USING to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE idempotency ALTER COLUMN created_at TYPE text COLLATE "C" USING to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE pending_writes ALTER COLUMN created_at TYPE text COLLATE "C" USING to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE pending_writes ALTER COLUMN decided_at TYPE text COLLATE "C" USING to_char(decided_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE applied_writes ALTER COLUMN at TYPE text COLLATE "C" USING to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE personal_tokens ALTER COLUMN created_at TYPE text COLLATE "C" USING to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE personal_tokens ALTER COLUMN expires_at TYPE text COLLATE "C" USING to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE personal_tokens ALTER COLUMN last_used_at TYPE text COLLATE "C" USING to_char(last_used_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE sign_in_codes ALTER COLUMN created_at TYPE text COLLATE "C" USING to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE sign_in_codes ALTER COLUMN expires_at TYPE text COLLATE "C" USING to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE sign_in_codes ALTER COLUMN used_at TYPE text COLLATE "C" USING to_char(used_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE console_sessions ALTER COLUMN created_at TYPE text COLLATE "C" USING to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE console_sessions ALTER COLUMN expires_at TYPE text COLLATE "C" USING to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE console_sessions ALTER COLUMN last_seen_at TYPE text COLLATE "C" USING to_char(last_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE idp_sign_ins ALTER COLUMN expires_at TYPE text COLLATE "C" USING to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE audit_events ALTER COLUMN created_at TYPE text COLLATE "C" USING to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ALTER TABLE notes ALTER COLUMN path TYPE text COLLATE "C";
    ALTER TABLE revisions ALTER COLUMN path TYPE text COLLATE "C";
    ALTER TABLE sync_ops ALTER COLUMN path TYPE text COLLATE "C";
    ALTER TABLE sync_ops ALTER COLUMN note_id TYPE text COLLATE "C";
    ALTER TABLE sync_checkpoints ALTER COLUMN device_id TYPE text COLLATE "C";
    ALTER TABLE pending_writes ALTER COLUMN id TYPE text COLLATE "C";
    ALTER TABLE personal_tokens ALTER COLUMN name TYPE text COLLATE "C";
    ALTER TABLE revisions ADD COLUMN commit_id text;
    ALTER TABLE pending_writes ADD COLUMN domain boolean NOT NULL DEFAULT false;
    -- the latest op of each note (or file kept by path): `live_at`, compaction
    CREATE INDEX sync_ops_by_key
        ON sync_ops (vault_id, (COALESCE(note_id, 'path:' || path)), seq);

    -- the intents of writes under way, resolved after a crash
    CREATE TABLE write_intents (
        vault_id   uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        key        text COLLATE "C" NOT NULL,
        op_hash    text NOT NULL,
        intent     text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        PRIMARY KEY (vault_id, key)
    );

    -- attachments' facts, and the log of their changes (each at its seq)
    CREATE TABLE attachments (
        vault_id     uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        path         text COLLATE "C" NOT NULL,
        size         bigint NOT NULL,
        mtime_ns     bigint NOT NULL,
        inode        bigint NOT NULL,
        sha256       text NOT NULL,
        content_type text NOT NULL,
        modified_at  text COLLATE "C" NOT NULL,
        PRIMARY KEY (vault_id, path)
    );
    CREATE TABLE attachment_changes (
        vault_id   uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        seq        bigint NOT NULL,
        path       text COLLATE "C" NOT NULL,
        sha256     text,
        kind       text NOT NULL,
        actor      text NOT NULL,
        created_at text COLLATE "C" NOT NULL,
        commit_id  text,
        PRIMARY KEY (vault_id, seq)
    );"#,
    // 3: PUT links the blob store serves (`storage::presign`): what each object becomes.
    r#"CREATE TABLE presigned_uploads (
        vault_id     uuid NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        id           text NOT NULL,
        path         text COLLATE "C" NOT NULL,
        sha256       text NOT NULL,
        size         bigint NOT NULL,
        content_type text NOT NULL,
        agent_id     text NOT NULL,
        expires_at   bigint NOT NULL,
        PRIMARY KEY (vault_id, id)
    );"#,
];

/// The schema version this build migrates a database to.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Serializes migrations of one database across processes (`pg_advisory_xact_lock`):
/// two instances started at once migrate once.
const MIGRATION_LOCK: i64 = 0x6e76_6d69_6772_6174; // "nvmigrat"

const VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS notevault_schema (
        id         integer PRIMARY KEY CHECK (id = 1),
        version    bigint NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
    );
    INSERT INTO notevault_schema (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;";

/// What [`migrate`] did: the version found and the version left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    pub from: i64,
    pub to: i64,
}

fn newer(found: i64) -> Error {
    Error::new(
        Reason::STORAGE_UNAVAILABLE,
        format!(
            "database schema {found} is newer than this notevault knows ({SCHEMA_VERSION}); upgrade notevault"
        ),
    )
}

/// Apply the migrations the database has not had, each in its own transaction under the
/// migration lock. A database at a newer version than this build is refused untouched.
pub async fn migrate(db: &Database) -> Result<Migrated> {
    let mut client = db.client().await?;
    let mut first = None;
    loop {
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(db_error)?;
        tx.batch_execute(VERSION_TABLE).await.map_err(db_error)?;
        let row = tx
            .query_one(
                "SELECT version FROM notevault_schema WHERE id = 1 FOR UPDATE",
                &[],
            )
            .await
            .map_err(db_error)?;
        let done: i64 = row.get(0);
        let from = *first.get_or_insert(done);
        if done > SCHEMA_VERSION {
            return Err(newer(done));
        }
        let Some(sql) = MIGRATIONS.get(done as usize) else {
            tx.commit().await.map_err(db_error)?;
            return Ok(Migrated { from, to: done });
        };
        tx.batch_execute(sql).await.map_err(db_error)?;
        tx.execute(
            "UPDATE notevault_schema SET version = $1, updated_at = now() WHERE id = 1",
            &[&(done + 1)],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
    }
}

/// The version the database is at: 0 when never migrated.
pub async fn version(db: &Database) -> Result<i64> {
    let client = db.client().await?;
    let exists = client
        .query_one("SELECT to_regclass('notevault_schema') IS NOT NULL", &[])
        .await
        .map_err(db_error)?;
    if !exists.get::<_, bool>(0) {
        return Ok(0);
    }
    let row = client
        .query_opt("SELECT version FROM notevault_schema WHERE id = 1", &[])
        .await
        .map_err(db_error)?;
    Ok(row.map(|r| r.get(0)).unwrap_or(0))
}

/// The database is at exactly this build's schema: older asks for `notevault db
/// migrate`, newer for a newer notevault.
pub async fn check(db: &Database) -> Result<()> {
    let found = version(db).await?;
    if found > SCHEMA_VERSION {
        return Err(newer(found));
    }
    if found < SCHEMA_VERSION {
        return Err(Error::new(
            Reason::STORAGE_UNAVAILABLE,
            format!(
                "database schema {found} is older than this notevault's ({SCHEMA_VERSION}); run `notevault db migrate` first"
            ),
        ));
    }
    Ok(())
}
