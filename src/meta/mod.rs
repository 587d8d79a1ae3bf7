//! The metadata store: SQLite (bundled), WAL with `synchronous = FULL` (a committed row
//! survives a power cut), versioned schema migrations.
//!
//! It holds what the folder cannot: stable note ids, the revision chain, settings, the
//! page-token key and the personal access tokens (keyed hashes only, `tokens.rs`). It is auxiliary: the folder stays the truth.

pub mod audit;
pub mod console;
mod idempotency;
mod inspect;
mod migrations;
mod open;
mod oplog;
mod pending;
pub mod tokens;

pub use inspect::{inspect, Inspection};
pub(crate) use migrations::migrate;
pub use migrations::SCHEMA_VERSION;
use oplog::insert_ops;

use parking_lot::Mutex;
use rusqlite::{params, Connection, OptionalExtension};

use crate::error::Result;
use crate::storage::metadata::{Records, Settings};
use crate::storage::rows::{
    AttachmentChangeRow, AttachmentRow, NoteRow, OpRow, RevisionRow, Settlement,
};

pub struct Meta {
    conn: Mutex<Connection>,
    /// Personal access token rows as last read (`tokens.rs`), valid while the database
    /// has not changed; locked after `conn`, never before.
    pats: Mutex<tokens::PatCache>,
}

impl Meta {
    /// The schema's version (SQLite's `user_version`).
    pub fn schema_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .lock()
            .pragma_query_value(None, "user_version", |r| r.get(0))?)
    }
}

impl Settings for Meta {
    fn setting(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .lock()
            .query_row("SELECT value FROM settings WHERE key = ?1", [key], |r| {
                r.get(0)
            })
            .optional()?)
    }

    fn set_setting(&self, key: &str, value: &str) -> Result<()> {
        self.conn.lock().execute(
            "INSERT INTO settings (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            params![key, value],
        )?;
        Ok(())
    }

    fn record_applied_write(&self, at: &str) -> Result<()> {
        insert_applied_write(&self.conn.lock(), at)
    }

    fn applied_writes_since(&self, since: &str) -> Result<(u64, Option<String>)> {
        Ok(self.conn.lock().query_row(
            "SELECT COUNT(*), MIN(at) FROM applied_writes WHERE at > ?1",
            [since],
            |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)),
        )?)
    }

    fn use_nonce(&self, nonce: &str, expires_at: i64, now: i64) -> Result<bool> {
        let conn = self.conn.lock();
        conn.execute("DELETE FROM presign_nonces WHERE expires_at < ?1", [now])?;
        let n = conn.execute(
            "INSERT OR IGNORE INTO presign_nonces (nonce, expires_at) VALUES (?1, ?2)",
            params![nonce, expires_at],
        )?;
        Ok(n == 1)
    }
}

impl Records for Meta {
    fn all_notes(&self) -> Result<Vec<NoteRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare(
            "SELECT note_id, path, version_id, content_hash, created_at, observed_at FROM notes
             ORDER BY path",
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

    fn committed_seq(&self) -> Result<i64> {
        Ok(self.conn.lock().query_row(
            "SELECT MAX((SELECT COALESCE(MAX(seq), 0) FROM revisions),
                        (SELECT COALESCE(MAX(seq), 0) FROM attachment_changes),
                        (SELECT COALESCE(MAX(seq), 0) FROM sync_ops))",
            [],
            |r| r.get(0),
        )?)
    }

    fn record_settled(
        &self,
        revisions: &[RevisionRow],
        ops: &[OpRow],
        notes: &[NoteRow],
        removed: &[String],
        settled: &[Settlement],
    ) -> Result<()> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction()?;
        insert_ops(&tx, ops)?;
        insert_revisions(&tx, revisions)?;
        delete_notes(&tx, removed)?;
        upsert_notes(&tx, notes)?;
        keep_settled(&tx, settled)?;
        tx.commit()?;
        Ok(())
    }

    fn record_parts(
        &self,
        revisions: &[RevisionRow],
        removed: &[String],
        part: &mut dyn FnMut(std::ops::Range<usize>) -> (Vec<OpRow>, Vec<NoteRow>),
    ) -> Result<()> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction()?;
        insert_revisions(&tx, revisions)?;
        delete_notes(&tx, removed)?;
        for start in (0..revisions.len()).step_by(RECORD_PART) {
            let (ops, notes) = part(start..revisions.len().min(start + RECORD_PART));
            insert_ops(&tx, &ops)?;
            upsert_notes(&tx, &notes)?;
        }
        tx.commit()?;
        Ok(())
    }

    fn revision(&self, version_id: &str) -> Result<Option<RevisionRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, version_id, note_id, path, prev_version_id, content_hash, actor, kind,
                    created_at, commit_id
             FROM revisions WHERE version_id = ?1",
        )?;
        Ok(stmt.query_row([version_id], revision_from).optional()?)
    }

    fn latest_revision_at(&self, path: &str) -> Result<Option<RevisionRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, version_id, note_id, path, prev_version_id, content_hash, actor, kind,
                    created_at, commit_id
             FROM revisions WHERE path = ?1 ORDER BY seq DESC LIMIT 1",
        )?;
        Ok(stmt.query_row([path], revision_from).optional()?)
    }

    fn revisions_page(
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

    fn revisions_of(&self, note_id: &str) -> Result<Vec<RevisionRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, version_id, note_id, path, prev_version_id, content_hash, actor, kind,
                    created_at, commit_id
             FROM revisions WHERE note_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([note_id], revision_from)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn revisions_after(&self, after: i64) -> Result<Vec<RevisionRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, version_id, note_id, path, prev_version_id, content_hash, actor, kind,
                    created_at, commit_id
             FROM revisions WHERE seq > ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([after], revision_from)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn all_attachments(&self) -> Result<Vec<AttachmentRow>> {
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

    fn record_attachments_settled(
        &self,
        changes: &[AttachmentChangeRow],
        ops: &[OpRow],
        upserts: &[AttachmentRow],
        removed: &[String],
        settled: &[Settlement],
    ) -> Result<()> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction()?;
        insert_ops(&tx, ops)?;
        keep_settled(&tx, settled)?;
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

    fn set_commit_ids(&self, seqs: &[i64], commit_id: &str) -> Result<()> {
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

/// What recorded writes keep in the transaction that records them (`rows::Settlement`).
fn keep_settled(tx: &rusqlite::Transaction<'_>, settled: &[Settlement]) -> Result<()> {
    for s in settled {
        if let Some(r) = &s.receipt {
            idempotency::keep_receipt(tx, r)?;
        }
        if let Some(at) = &s.applied_at {
            insert_applied_write(tx, at)?;
        }
        if let Some(a) = &s.audit {
            audit::insert_audit(tx, &a.event(), &a.at)?;
        }
    }
    Ok(())
}

/// The rows a [`Records::record_parts`] part holds at once.
const RECORD_PART: usize = 4096;

fn insert_revisions(tx: &rusqlite::Transaction<'_>, revisions: &[RevisionRow]) -> Result<()> {
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
    Ok(())
}

fn delete_notes(tx: &rusqlite::Transaction<'_>, removed: &[String]) -> Result<()> {
    let mut del = tx.prepare_cached("DELETE FROM notes WHERE note_id = ?1")?;
    for id in removed {
        del.execute([id])?;
    }
    Ok(())
}

fn upsert_notes(tx: &rusqlite::Transaction<'_>, notes: &[NoteRow]) -> Result<()> {
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
    Ok(())
}

#[cfg(test)]
mod tests;

fn insert_applied_write(conn: &Connection, at: &str) -> Result<()> {
    conn.prepare_cached("INSERT INTO applied_writes (at) VALUES (?1)")?
        .execute([at])?;
    Ok(())
}
