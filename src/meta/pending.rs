//! The review queue's rows: writes waiting for (or decided by) a reviewer.

use rusqlite::{params, OptionalExtension};

use super::Meta;
use crate::error::Result;

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

impl Meta {
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
}
