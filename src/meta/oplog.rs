//! The sync op log: ops appended with their changes, pages of it, device checkpoints,
//! compaction, and the E2EE key hierarchy it carries.

use rusqlite::{params, OptionalExtension};

use super::Meta;
use crate::error::Result;
use crate::storage::metadata::{OpLog, Settings};
use crate::storage::rows::{CheckpointRow, OpRow};

/// Append ops to the sync log inside the caller's transaction.
pub(super) fn insert_ops(
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
impl OpLog for Meta {
    fn ops_page(&self, after: i64, through: i64, limit: usize) -> Result<Vec<OpRow>> {
        let conn = self.conn.lock();
        let sql = format!(
            "SELECT {OP_COLUMNS} FROM sync_ops WHERE seq > ?1 AND seq <= ?2 ORDER BY seq LIMIT ?3"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![after, through, limit as i64], op_from)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn live_at(&self, at: i64, after_path: &str, limit: usize) -> Result<Vec<OpRow>> {
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

    fn set_checkpoint(&self, device_id: &str, seq: i64, now: &str) -> Result<()> {
        self.conn.lock().execute(
            "INSERT INTO sync_checkpoints (device_id, seq, updated_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (device_id) DO UPDATE SET seq = MAX(seq, excluded.seq),
               updated_at = excluded.updated_at",
            params![device_id, seq, now],
        )?;
        Ok(())
    }

    fn checkpoints(&self) -> Result<Vec<CheckpointRow>> {
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

    fn last_op_seq_before(&self, cutoff: &str) -> Result<i64> {
        Ok(self.conn.lock().query_row(
            "SELECT COALESCE(MAX(seq), 0) FROM sync_ops WHERE created_at <= ?1",
            [cutoff],
            |r| r.get(0),
        )?)
    }

    fn compact_ops(&self, through: i64) -> Result<usize> {
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

    fn compacted_through(&self) -> Result<i64> {
        Ok(self
            .setting("sync_compacted_through")?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    fn e2ee_hierarchy(&self) -> Result<Option<String>> {
        Ok(self
            .conn
            .lock()
            .query_row("SELECT hierarchy FROM e2ee_keys WHERE id = 1", [], |r| {
                r.get(0)
            })
            .optional()?)
    }

    fn record_key(&self, op: &OpRow, hierarchy: &str, now: &str) -> Result<()> {
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
