//! The review queue's rows: writes waiting for (or decided by) a reviewer.

use rusqlite::{params, OptionalExtension};

use super::Meta;
use crate::error::Result;
use crate::storage::metadata::ReviewQueue;
use crate::storage::rows::PendingRow;

impl ReviewQueue for Meta {
    fn insert_pending(&self, row: &PendingRow) -> Result<()> {
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

    fn pending(&self, id: &str) -> Result<Option<PendingRow>> {
        let conn = self.conn.lock();
        let sql = format!(
            "SELECT {} FROM pending_writes WHERE id = ?1",
            Self::PENDING_COLUMNS
        );
        Ok(conn.query_row(&sql, [id], Self::pending_from).optional()?)
    }

    fn all_pending(&self) -> Result<Vec<PendingRow>> {
        let conn = self.conn.lock();
        let sql = format!(
            "SELECT {} FROM pending_writes ORDER BY created_at, id",
            Self::PENDING_COLUMNS
        );
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map([], Self::pending_from)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn count_pending(&self) -> Result<usize> {
        let n: i64 = self
            .conn
            .lock()
            .prepare_cached("SELECT COUNT(*) FROM pending_writes WHERE status = 'pending'")?
            .query_row([], |r| r.get(0))?;
        Ok(n as usize)
    }

    fn pending_ids(&self, limit: usize) -> Result<Vec<String>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT id FROM pending_writes WHERE status = 'pending'
             ORDER BY created_at, id LIMIT ?1",
        )?;
        let rows = stmt.query_map([limit as i64], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn pending_rows(&self, decided: bool, limit: usize) -> Result<Vec<PendingRow>> {
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

    fn decide_pending(
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

    fn legacy_pending(&self) -> Result<Vec<PendingRow>> {
        let conn = self.conn.lock();
        let sql = format!(
            "SELECT {} FROM pending_writes WHERE domain = 0 AND status = 'pending'",
            Self::PENDING_COLUMNS
        );
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map([], Self::pending_from)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn upgrade_pending(&self, id: &str, request: &str) -> Result<()> {
        self.conn.lock().execute(
            "UPDATE pending_writes SET payload = ?2, domain = 1 WHERE id = ?1 AND domain = 0",
            params![id, request],
        )?;
        Ok(())
    }
}

impl Meta {
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
}
