//! The audit log: ids and counters only, never content, read newest first.
//!
//! An id is unique and increasing within the vault (the table's identity, shared by every
//! vault of the database, so one vault's ids have gaps where another's rows were made, and
//! where a transaction that was rolled back took some).

use super::flight::{params, Flight};
use super::PgMeta;
use crate::error::Result;
use crate::storage::metadata::Audit;
use crate::storage::rows::{AuditEvent, AuditRow, SettledAudit};

/// Rows read at once while a page is filled (`keep` may pass over many).
const CHUNK: usize = 256;

impl Audit for PgMeta {
    fn append_audit(&self, event: &AuditEvent<'_>, now: &str) -> Result<()> {
        self.execute(
            "INSERT INTO audit_events (vault_id, kind, actor, created_at, subject, counts)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &self.vault,
                &event.kind.as_str(),
                &event.actor,
                &now,
                &event.subject,
                &counts_json(event),
            ],
        )?;
        Ok(())
    }

    fn audit_page(
        &self,
        before: Option<i64>,
        since: Option<&str>,
        keep: &dyn Fn(&AuditRow) -> bool,
        limit: usize,
    ) -> Result<(Vec<AuditRow>, bool)> {
        let since = since.unwrap_or("");
        let chunk = super::limit(CHUNK.max(limit.saturating_add(1)));
        let mut cursor = before.unwrap_or(i64::MAX);
        let mut page = Vec::new();
        // Read newest first a chunk at a time, as SQLite's cursor steps: stop at the
        // first kept row past a full page.
        loop {
            let rows = self.query(
                "SELECT id, kind, actor, created_at, subject, counts FROM audit_events
                 WHERE vault_id = $1 AND id < $2 AND created_at >= $3
                 ORDER BY id DESC LIMIT $4",
                &[&self.vault, &cursor, &since, &chunk],
            )?;
            for r in &rows {
                let row = AuditRow {
                    id: r.get(0),
                    kind: r.get(1),
                    actor: r.get(2),
                    created_at: r.get(3),
                    subject: r.get(4),
                    counts: r.get(5),
                };
                cursor = row.id;
                if !keep(&row) {
                    continue;
                }
                if page.len() == limit {
                    return Ok((page, true));
                }
                page.push(row);
            }
            if (rows.len() as i64) < chunk {
                return Ok((page, false));
            }
        }
    }
}

/// The same JSON as SQLite's store writes: an object of numbers, in the event's order.
fn counts_json(event: &AuditEvent<'_>) -> String {
    let counts: serde_json::Map<String, serde_json::Value> = event
        .counts
        .iter()
        .map(|(k, v)| ((*k).to_string(), serde_json::Value::from(*v)))
        .collect();
    serde_json::Value::Object(counts).to_string()
}

/// Append audit events told with the writes they are of, in the caller's transaction.
pub(super) fn insert_audits<'a>(
    flight: &mut Flight<'a>,
    vault: &'a uuid::Uuid,
    audits: &[&'a SettledAudit],
) {
    flight.each(
        "INSERT INTO audit_events (vault_id, kind, actor, created_at, subject, counts)
         VALUES ($1, $2, $3, $4, $5, $6)",
        audits.iter().copied(),
        |a| {
            params![
                vault,
                a.kind.as_str(),
                &a.actor,
                &a.at,
                &a.subject,
                counts_json(&a.event())
            ]
        },
    );
}
