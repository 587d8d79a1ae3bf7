//! The sync op log: ops appended with their changes, pages of it, device checkpoints,
//! compaction, and the E2EE key hierarchy it carries.

use tokio_postgres::Row;
use uuid::Uuid;

use super::flight::{params, Flight};
use super::{limit, seq_span, PgMeta};
use crate::error::Result;
use crate::hosted::{block_on, db_error};
use crate::storage::metadata::{OpLog, Settings};
use crate::storage::rows::{CheckpointRow, OpRow};

/// Append ops to the vault's log in the caller's transaction (which claims their seqs).
pub(super) fn insert_ops<'a>(flight: &mut Flight<'a>, vault: &'a Uuid, ops: &'a [OpRow]) {
    flight.each(
        "INSERT INTO sync_ops (vault_id, seq, kind, note_id, path, from_path, version_id,
           prev_version_id, content_hash, visibility, actor, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        ops,
        |o| {
            params![
                vault,
                &o.seq,
                &o.kind,
                &o.note_id,
                &o.path,
                &o.from_path,
                &o.version_id,
                &o.prev_version_id,
                &o.content_hash,
                &o.visibility,
                &o.actor,
                &o.created_at,
            ]
        },
    );
}

const OP_COLUMNS: &str = "o.seq, o.kind, o.note_id, o.path, o.from_path, o.version_id, \
                          o.prev_version_id, o.content_hash, o.visibility, o.actor, o.created_at";

fn op_from(r: &Row) -> OpRow {
    OpRow {
        seq: r.get(0),
        kind: r.get(1),
        note_id: r.get(2),
        path: r.get(3),
        from_path: r.get(4),
        version_id: r.get(5),
        prev_version_id: r.get(6),
        content_hash: r.get(7),
        visibility: r.get(8),
        actor: r.get(9),
        created_at: r.get(10),
    }
}

impl OpLog for PgMeta {
    fn ops_page(&self, after: i64, through: i64, limit_to: usize) -> Result<Vec<OpRow>> {
        let sql = format!(
            "SELECT {OP_COLUMNS} FROM sync_ops o
             WHERE o.vault_id = $1 AND o.seq > $2 AND o.seq <= $3 ORDER BY o.seq LIMIT $4"
        );
        let rows = self.query(&sql, &[&self.vault, &after, &through, &limit(limit_to)])?;
        Ok(rows.iter().map(op_from).collect())
    }

    fn live_at(&self, at: i64, after_path: &str, limit_to: usize) -> Result<Vec<OpRow>> {
        let sql = format!(
            "SELECT {OP_COLUMNS} FROM sync_ops o
             WHERE o.vault_id = $1 AND o.kind IN ('upsert', 'move', 'attachment_upsert')
               AND o.seq <= $2 AND o.path > $3
               AND o.seq = (SELECT MAX(l.seq) FROM sync_ops l
                            WHERE l.vault_id = $1
                              AND COALESCE(l.note_id, 'path:' || l.path)
                                = COALESCE(o.note_id, 'path:' || o.path)
                              AND l.seq <= $2)
             ORDER BY o.path LIMIT $4"
        );
        let rows = self.query(&sql, &[&self.vault, &at, &after_path, &limit(limit_to)])?;
        Ok(rows.iter().map(op_from).collect())
    }

    fn set_checkpoint(&self, device_id: &str, seq: i64, now: &str) -> Result<()> {
        self.execute(
            "INSERT INTO sync_checkpoints (vault_id, device_id, seq, updated_at)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (vault_id, device_id) DO UPDATE SET
               seq = GREATEST(sync_checkpoints.seq, excluded.seq),
               updated_at = excluded.updated_at",
            &[&self.vault, &device_id, &seq, &now],
        )?;
        Ok(())
    }

    fn checkpoints(&self) -> Result<Vec<CheckpointRow>> {
        let rows = self.query(
            "SELECT device_id, seq, updated_at FROM sync_checkpoints
             WHERE vault_id = $1 ORDER BY seq, device_id",
            &[&self.vault],
        )?;
        Ok(rows
            .iter()
            .map(|r| CheckpointRow {
                device_id: r.get(0),
                seq: r.get(1),
                updated_at: r.get(2),
            })
            .collect())
    }

    fn last_op_seq_before(&self, cutoff: &str) -> Result<i64> {
        Ok(self
            .query(
                "SELECT COALESCE(MAX(seq), 0) FROM sync_ops
                 WHERE vault_id = $1 AND created_at <= $2",
                &[&self.vault, &cutoff],
            )?
            .first()
            .map(|r| r.get(0))
            .unwrap_or(0))
    }

    fn compact_ops(&self, through: i64) -> Result<usize> {
        let vault = &self.vault;
        block_on(async {
            let mut client = self.db.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            let dropped = tx
                .execute(
                    "DELETE FROM sync_ops s
                     WHERE s.vault_id = $1 AND s.seq <= $2
                       AND s.kind NOT IN ('delete', 'attachment_delete')
                       AND EXISTS (SELECT 1 FROM sync_ops l
                                   WHERE l.vault_id = $1
                                     AND COALESCE(l.note_id, 'path:' || l.path)
                                       = COALESCE(s.note_id, 'path:' || s.path)
                                     AND l.seq > s.seq)",
                    &[vault, &through],
                )
                .await
                .map_err(db_error)?;
            tx.execute(
                "INSERT INTO settings (vault_id, key, value)
                 VALUES ($1, 'sync_compacted_through', $2)
                 ON CONFLICT (vault_id, key) DO UPDATE SET
                   value = GREATEST(settings.value::bigint, excluded.value::bigint)::text",
                &[vault, &through.to_string()],
            )
            .await
            .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            Ok(dropped as usize)
        })
    }

    fn compacted_through(&self) -> Result<i64> {
        Ok(self
            .setting("sync_compacted_through")?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    fn e2ee_hierarchy(&self) -> Result<Option<String>> {
        Ok(self
            .query_opt(
                "SELECT hierarchy FROM e2ee_keys WHERE vault_id = $1",
                &[&self.vault],
            )?
            .map(|r| r.get(0)))
    }

    fn record_key(&self, op: &OpRow, hierarchy: &str, now: &str) -> Result<()> {
        let vault = self.vault;
        let mut flight = Flight::claiming(vault, seq_span([op.seq]));
        insert_ops(&mut flight, &vault, std::slice::from_ref(op));
        flight.push(
            "INSERT INTO e2ee_keys (vault_id, hierarchy, enabled_at, updated_at)
             VALUES ($1, $2, $3, $3)
             ON CONFLICT (vault_id) DO UPDATE SET hierarchy = excluded.hierarchy,
               updated_at = excluded.updated_at",
            params![vault, hierarchy, now],
        );
        block_on(async { flight.commit(self.db.client().await?).await })
    }
}
