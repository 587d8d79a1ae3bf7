//! Personal access tokens as the metadata store keeps them: the keyed hash of each token
//! (`auth::pat::hash`; never the token), its public prefix (the row's key), name, scopes
//! and times. Looked up per request, so a token created or revoked by `notevault token`
//! while the daemon runs counts at once.
//!
//! The rows found are cached ([`PatCache`]), keyed by SQLite's `PRAGMA data_version`:
//! it changes when another connection (the `notevault token` CLI) commits anything to the
//! store, and then the cache is emptied before it is read, so a revoke counts at the
//! next request as before. This connection's own token writes drop what they change.
//! A lookup is then one cached pragma (a read transaction that checks the WAL header)
//! instead of a parsed and run `SELECT` (`benches/auth.rs`: ~30 us of a read's CPU).

use rusqlite::{params, OptionalExtension};

use super::Meta;
use crate::error::Result;
use crate::storage::metadata::Tokens;
use crate::storage::rows::PatRow;

fn pat_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<PatRow> {
    Ok(PatRow {
        prefix: r.get(0)?,
        name: r.get(1)?,
        hash: r.get(2)?,
        scopes: r.get(3)?,
        created_at: r.get(4)?,
        expires_at: r.get(5)?,
        last_used_at: r.get(6)?,
    })
}

const COLUMNS: &str = "prefix, name, hash, scopes, created_at, expires_at, last_used_at";

/// The token rows found since the store last changed, by prefix. Only rows that exist
/// are kept (an unknown prefix is asked of SQLite each time), so it holds at most the
/// store's tokens.
#[derive(Default)]
pub(super) struct PatCache {
    /// `PRAGMA data_version` when the rows were read.
    data_version: Option<i64>,
    rows: std::collections::HashMap<String, PatRow>,
}

impl Tokens for Meta {
    fn pat_key(&self) -> Result<[u8; 32]> {
        let conn = self.conn.lock();
        let stored: Option<String> = conn
            .query_row(
                "SELECT value FROM settings WHERE key = 'pat_hash_key'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(hex) = stored {
            return blake3::Hash::from_hex(hex.trim())
                .map(|h| *h.as_bytes())
                .map_err(|_| crate::error::Error::internal("corrupt personal access token key"));
        }
        let fresh = blake3::hash(uuid::Uuid::new_v4().as_bytes());
        let fresh = blake3::keyed_hash(fresh.as_bytes(), uuid::Uuid::new_v4().as_bytes());
        conn.execute(
            "INSERT OR IGNORE INTO settings (key, value) VALUES ('pat_hash_key', ?1)",
            [fresh.to_hex().as_str()],
        )?;
        let hex: String = conn.query_row(
            "SELECT value FROM settings WHERE key = 'pat_hash_key'",
            [],
            |r| r.get(0),
        )?;
        blake3::Hash::from_hex(hex.trim())
            .map(|h| *h.as_bytes())
            .map_err(|_| crate::error::Error::internal("corrupt personal access token key"))
    }

    fn insert_pat(&self, row: &PatRow) -> Result<bool> {
        let conn = self.conn.lock();
        let inserted = conn.execute(
            "INSERT OR IGNORE INTO personal_tokens (prefix, name, hash, scopes, created_at, expires_at, last_used_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL)",
            params![row.prefix, row.name, row.hash, row.scopes, row.created_at, row.expires_at],
        )?;
        self.forget_pats();
        Ok(inserted == 1)
    }

    fn pats(&self) -> Result<Vec<PatRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM personal_tokens ORDER BY name"
        ))?;
        let rows = stmt.query_map([], pat_from)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn pat(&self, prefix: &str) -> Result<Option<PatRow>> {
        let conn = self.conn.lock();
        let version: i64 = conn
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |r| r.get(0))?;
        let mut cache = self.pats.lock();
        if cache.data_version != Some(version) {
            cache.rows.clear();
            cache.data_version = Some(version);
        }
        if let Some(row) = cache.rows.get(prefix) {
            return Ok(Some(row.clone()));
        }
        let row = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM personal_tokens WHERE prefix = ?1"
            ))?
            .query_row([prefix], pat_from)
            .optional()?;
        if let Some(row) = &row {
            cache.rows.insert(prefix.to_string(), row.clone());
        }
        Ok(row)
    }

    fn revoke_pat(&self, name_or_prefix: &str) -> Result<usize> {
        let conn = self.conn.lock();
        let revoked = conn.execute(
            "DELETE FROM personal_tokens WHERE name = ?1 OR prefix = ?1",
            [name_or_prefix],
        )?;
        self.forget_pats();
        Ok(revoked)
    }

    fn touch_pat(&self, prefix: &str, at: &str) -> Result<()> {
        let conn = self.conn.lock();
        conn.execute(
            "UPDATE personal_tokens SET last_used_at = ?2 WHERE prefix = ?1",
            params![prefix, at],
        )?;
        self.forget_pats();
        Ok(())
    }
}

impl Meta {
    /// Forget the cached token rows: this connection changed the table (its own commits
    /// do not move `data_version`).
    fn forget_pats(&self) {
        self.pats.lock().rows.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_stored_listed_found_and_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let meta = Meta::open(&dir.path().join("meta.sqlite")).unwrap();
        let key = meta.pat_key().unwrap();
        assert_eq!(meta.pat_key().unwrap(), key, "the key is made once");
        assert!(meta.pats().unwrap().is_empty());
        let row = PatRow {
            prefix: "nvp_abcdefgh".into(),
            name: "claude".into(),
            hash: "00".repeat(32),
            scopes: "notes.write".into(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            expires_at: None,
            last_used_at: None,
        };
        assert!(meta.insert_pat(&row).unwrap());
        assert!(!meta.insert_pat(&row).unwrap(), "a name is taken once");
        meta.touch_pat("nvp_abcdefgh", "2026-01-02T00:00:00.000Z")
            .unwrap();
        let found = meta.pat("nvp_abcdefgh").unwrap().unwrap();
        assert_eq!(
            found.last_used_at.as_deref(),
            Some("2026-01-02T00:00:00.000Z")
        );
        assert_eq!(meta.pats().unwrap().len(), 1);
        assert_eq!(meta.revoke_pat("claude").unwrap(), 1);
        assert_eq!(meta.revoke_pat("nvp_abcdefgh").unwrap(), 0);
        assert!(meta.pat("nvp_abcdefgh").unwrap().is_none());
    }

    /// The daemon's connection caches the rows it found; another connection's create,
    /// revoke or change (the CLI) is seen at the next lookup, and so are its own writes.
    #[test]
    fn the_cache_sees_every_change_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.sqlite");
        let daemon = Meta::open(&path).unwrap();
        let cli = Meta::open(&path).unwrap();
        let row = |prefix: &str, name: &str| PatRow {
            prefix: prefix.into(),
            name: name.into(),
            hash: "00".repeat(32),
            scopes: String::new(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            expires_at: None,
            last_used_at: None,
        };
        assert!(daemon.pat("nvp_aaaaaaaa").unwrap().is_none());
        assert!(cli.insert_pat(&row("nvp_aaaaaaaa", "a")).unwrap());
        assert_eq!(daemon.pat("nvp_aaaaaaaa").unwrap().unwrap().name, "a");
        // Cached now; still the same row while nothing changes.
        assert_eq!(daemon.pat("nvp_aaaaaaaa").unwrap().unwrap().name, "a");
        // Another connection changes the row, then revokes it: seen at once each time.
        cli.conn
            .lock()
            .execute(
                "UPDATE personal_tokens SET scopes = 'notes.write' WHERE prefix = 'nvp_aaaaaaaa'",
                [],
            )
            .unwrap();
        assert_eq!(
            daemon.pat("nvp_aaaaaaaa").unwrap().unwrap().scopes,
            "notes.write"
        );
        assert_eq!(cli.revoke_pat("a").unwrap(), 1);
        assert!(daemon.pat("nvp_aaaaaaaa").unwrap().is_none());
        // Its own writes too (they do not move data_version).
        assert!(daemon.insert_pat(&row("nvp_bbbbbbbb", "b")).unwrap());
        assert!(daemon.pat("nvp_bbbbbbbb").unwrap().is_some());
        daemon
            .touch_pat("nvp_bbbbbbbb", "2026-01-02T00:00:00.000Z")
            .unwrap();
        assert_eq!(
            daemon
                .pat("nvp_bbbbbbbb")
                .unwrap()
                .unwrap()
                .last_used_at
                .as_deref(),
            Some("2026-01-02T00:00:00.000Z")
        );
        assert_eq!(daemon.revoke_pat("nvp_bbbbbbbb").unwrap(), 1);
        assert!(daemon.pat("nvp_bbbbbbbb").unwrap().is_none());
        // And the CLI's revoke of a token the daemon cached.
        assert!(cli.insert_pat(&row("nvp_cccccccc", "c")).unwrap());
        assert!(daemon.pat("nvp_cccccccc").unwrap().is_some());
        assert_eq!(cli.revoke_pat("nvp_cccccccc").unwrap(), 1);
        assert!(daemon.pat("nvp_cccccccc").unwrap().is_none());
    }
}
