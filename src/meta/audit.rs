//! The audit log: what was done to the vault's daemon and by whom, as ids and counters
//! only: never a note's content or title, never a token (a token's public prefix is an id).
//! Appended by the code that does the thing (the write pipeline, the review, the token
//! store's callers, the console's sign-in, the settings, export and purge); read newest
//! first by `GET /v1/audit-events` and the console's activity page.

use rusqlite::{params, Connection};

use super::Meta;
use crate::error::Result;
use crate::storage::metadata::Audit;
use crate::storage::rows::{AuditEvent, AuditRow};

impl Audit for Meta {
    fn append_audit(&self, event: &AuditEvent<'_>, now: &str) -> Result<()> {
        insert_audit(&self.conn.lock(), event, now)
    }

    fn audit_page(
        &self,
        before: Option<i64>,
        since: Option<&str>,
        keep: &dyn Fn(&AuditRow) -> bool,
        limit: usize,
    ) -> Result<(Vec<AuditRow>, bool)> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT id, kind, actor, created_at, subject, counts FROM audit_events
             WHERE id < ?1 AND created_at >= ?2 ORDER BY id DESC",
        )?;
        let mut rows = stmt.query(params![before.unwrap_or(i64::MAX), since.unwrap_or("")])?;
        let mut page = Vec::new();
        while let Some(r) = rows.next()? {
            let row = AuditRow {
                id: r.get(0)?,
                kind: r.get(1)?,
                actor: r.get(2)?,
                created_at: r.get(3)?,
                subject: r.get(4)?,
                counts: r.get(5)?,
            };
            if !keep(&row) {
                continue;
            }
            if page.len() == limit {
                return Ok((page, true));
            }
            page.push(row);
        }
        Ok((page, false))
    }
}

/// Append `event` at `now` (in the caller's transaction, if it has one).
pub(super) fn insert_audit(conn: &Connection, event: &AuditEvent<'_>, now: &str) -> Result<()> {
    let counts: serde_json::Map<String, serde_json::Value> = event
        .counts
        .iter()
        .map(|(k, v)| ((*k).to_string(), serde_json::Value::from(*v)))
        .collect();
    conn.prepare_cached(
        "INSERT INTO audit_events (kind, actor, created_at, subject, counts)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        event.kind.as_str(),
        event.actor,
        now,
        event.subject,
        serde_json::Value::Object(counts).to_string()
    ])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::rows::AuditKind;

    #[test]
    fn rows_come_newest_first_filtered_and_paged() {
        let dir = tempfile::tempdir().unwrap();
        let meta = Meta::open(&dir.path().join("meta.sqlite")).unwrap();
        for i in 0..5 {
            let kind = if i % 2 == 0 {
                AuditKind::WriteApplied
            } else {
                AuditKind::TokenCreated
            };
            meta.append_audit(
                &AuditEvent::new(kind, "agent").counts(&[("n", i)]),
                "2026-01-01T00:00:00.000Z",
            )
            .unwrap();
        }
        let writes = |r: &AuditRow| r.kind == "write.applied";
        let (page, more) = meta.audit_page(None, None, &writes, 2).unwrap();
        assert_eq!(page.iter().map(|r| r.id).collect::<Vec<_>>(), [5, 3]);
        assert!(more);
        assert_eq!(page[0].counts, r#"{"n":4}"#);
        let (page, more) = meta.audit_page(Some(3), None, &writes, 2).unwrap();
        assert_eq!(page.iter().map(|r| r.id).collect::<Vec<_>>(), [1]);
        assert!(!more);
    }
}
