//! The audit log: what was done to the vault's daemon and by whom, as ids and counters
//! only: never a note's content or title, never a token (a token's public prefix is an id).
//! Appended by the code that does the thing (the write pipeline, the review, the token
//! store's callers, the console's sign-in, the settings, export and purge); read newest
//! first by `GET /v1/audit-events` and the console's activity page.

use rusqlite::params;

use super::Meta;
use crate::error::Result;

/// What happened. The names are the `kind` of a row, stable on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditKind {
    WriteApplied,
    WriteQueued,
    WriteApproved,
    WriteRejected,
    TokenCreated,
    TokenRevoked,
    SignedIn,
    SignedOut,
    SettingsChanged,
    Exported,
    Purged,
    E2eeKeysChanged,
}

impl AuditKind {
    pub const ALL: [AuditKind; 12] = [
        AuditKind::WriteApplied,
        AuditKind::WriteQueued,
        AuditKind::WriteApproved,
        AuditKind::WriteRejected,
        AuditKind::TokenCreated,
        AuditKind::TokenRevoked,
        AuditKind::SignedIn,
        AuditKind::SignedOut,
        AuditKind::SettingsChanged,
        AuditKind::Exported,
        AuditKind::Purged,
        AuditKind::E2eeKeysChanged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::WriteApplied => "write.applied",
            AuditKind::WriteQueued => "write.queued",
            AuditKind::WriteApproved => "write.approved",
            AuditKind::WriteRejected => "write.rejected",
            AuditKind::TokenCreated => "token.created",
            AuditKind::TokenRevoked => "token.revoked",
            AuditKind::SignedIn => "session.signed_in",
            AuditKind::SignedOut => "session.signed_out",
            AuditKind::SettingsChanged => "settings.changed",
            AuditKind::Exported => "vault.exported",
            AuditKind::Purged => "vault.purged",
            AuditKind::E2eeKeysChanged => "e2ee.keys_changed",
        }
    }
}

/// One row of the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub id: i64,
    pub kind: String,
    /// Who: an agent id, `console`, `cli`, `api`.
    pub actor: String,
    pub created_at: String,
    /// What it was about, as an id (a note id, a pending-write id, a token's public
    /// prefix), when there is one.
    pub subject: Option<String>,
    /// Counters, as a JSON object of numbers (`{"notes": 12, "bytes": 3400}`).
    pub counts: String,
}

/// A new row of the audit log (its id and time are given when it is appended).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent<'a> {
    pub kind: AuditKind,
    pub actor: &'a str,
    pub subject: Option<&'a str>,
    pub counts: &'a [(&'a str, i64)],
}

impl<'a> AuditEvent<'a> {
    pub fn new(kind: AuditKind, actor: &'a str) -> Self {
        Self {
            kind,
            actor,
            subject: None,
            counts: &[],
        }
    }

    pub fn subject(mut self, subject: &'a str) -> Self {
        self.subject = Some(subject);
        self
    }

    pub fn counts(mut self, counts: &'a [(&'a str, i64)]) -> Self {
        self.counts = counts;
        self
    }
}

impl Meta {
    /// Append `event` at `now`.
    pub fn append_audit(&self, event: &AuditEvent<'_>, now: &str) -> Result<()> {
        let counts: serde_json::Map<String, serde_json::Value> = event
            .counts
            .iter()
            .map(|(k, v)| ((*k).to_string(), serde_json::Value::from(*v)))
            .collect();
        self.conn
            .lock()
            .prepare_cached(
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

    /// Append `event` now; a failure is logged, never the caller's error (what it records
    /// has happened).
    pub fn note_audit(&self, event: &AuditEvent<'_>) {
        let now = crate::clock::timestamp(chrono::Utc::now());
        if let Err(e) = self.append_audit(event, &now) {
            tracing::warn!(kind = event.kind.as_str(), error = %e.message, "cannot append to the audit log");
        }
    }

    /// The newest rows older than `before` (an id; `None`: from the newest), made at
    /// `since` or later (`None`: any time; the time index narrows the scan), that `keep`
    /// accepts, at most `limit`, and whether more would follow.
    pub fn audit_page(
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

#[cfg(test)]
mod tests {
    use super::*;

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
