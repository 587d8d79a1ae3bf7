//! Personal access tokens as the metadata store keeps them: the keyed hash of each token
//! (`auth::pat::hash`; never the token), its public prefix (the row's key), name, scopes
//! and times. Looked up per request, so a token created or revoked by `notevault token`
//! while the daemon runs counts at once.

use rusqlite::{params, OptionalExtension};

use super::Meta;
use crate::error::Result;

/// One personal access token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatRow {
    /// `nvp_` and 8 characters: public.
    pub prefix: String,
    pub name: String,
    /// The keyed hash, hex.
    pub hash: String,
    /// Permission names, space-separated (`notes.write notes.review`).
    pub scopes: String,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub last_used_at: Option<String>,
}

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

impl Meta {
    /// The key of the tokens' keyed hash: made once (by whichever of the daemon and the
    /// CLI needs it first) and kept in the settings.
    pub fn pat_key(&self) -> Result<[u8; 32]> {
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

    /// Store a new token; `false` when its name or prefix is taken.
    pub fn insert_pat(&self, row: &PatRow) -> Result<bool> {
        let inserted = self.conn.lock().execute(
            "INSERT OR IGNORE INTO personal_tokens (prefix, name, hash, scopes, created_at, expires_at, last_used_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL)",
            params![row.prefix, row.name, row.hash, row.scopes, row.created_at, row.expires_at],
        )?;
        Ok(inserted == 1)
    }

    /// Every token, by name.
    pub fn pats(&self) -> Result<Vec<PatRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM personal_tokens ORDER BY name"
        ))?;
        let rows = stmt.query_map([], pat_from)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The token whose public prefix is `prefix`.
    pub fn pat(&self, prefix: &str) -> Result<Option<PatRow>> {
        Ok(self
            .conn
            .lock()
            .query_row(
                &format!("SELECT {COLUMNS} FROM personal_tokens WHERE prefix = ?1"),
                [prefix],
                pat_from,
            )
            .optional()?)
    }

    /// Delete the token named `name_or_prefix` (its name, or its public prefix); how many
    /// went (0 or 1).
    pub fn revoke_pat(&self, name_or_prefix: &str) -> Result<usize> {
        Ok(self.conn.lock().execute(
            "DELETE FROM personal_tokens WHERE name = ?1 OR prefix = ?1",
            [name_or_prefix],
        )?)
    }

    /// Note a use of the token (`token list` shows it).
    pub fn touch_pat(&self, prefix: &str, at: &str) -> Result<()> {
        self.conn.lock().execute(
            "UPDATE personal_tokens SET last_used_at = ?2 WHERE prefix = ?1",
            params![prefix, at],
        )?;
        Ok(())
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
}
