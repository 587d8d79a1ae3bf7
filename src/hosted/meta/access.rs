//! Personal access tokens, console sign-in codes and sessions: digests and keyed hashes
//! only. Read per request, uncached: a token revoked or a session ended through any
//! instance counts at the next request on every other.

use tokio_postgres::Row;

use super::PgMeta;
use crate::error::{Error, Result};
use crate::storage::metadata::{Sessions, Tokens};
use crate::storage::rows::{IdpSignIn, PatRow, SessionRow};

const PAT_COLUMNS: &str = "prefix, name, hash, scopes, created_at, expires_at, last_used_at";

fn pat_from(r: &Row) -> PatRow {
    PatRow {
        prefix: r.get(0),
        name: r.get(1),
        hash: r.get(2),
        scopes: r.get(3),
        created_at: r.get(4),
        expires_at: r.get(5),
        last_used_at: r.get(6),
    }
}

fn key_from_hex(hex: &str) -> Result<[u8; 32]> {
    blake3::Hash::from_hex(hex.trim())
        .map(|h| *h.as_bytes())
        .map_err(|_| Error::internal("corrupt personal access token key"))
}

impl Tokens for PgMeta {
    fn pat_key(&self) -> Result<[u8; 32]> {
        let read = || -> Result<Option<String>> {
            Ok(self
                .query_opt(
                    "SELECT value FROM settings WHERE vault_id = $1 AND key = 'pat_hash_key'",
                    &[&self.vault],
                )?
                .map(|r| r.get(0)))
        };
        if let Some(hex) = read()? {
            return key_from_hex(&hex);
        }
        let fresh = blake3::hash(uuid::Uuid::new_v4().as_bytes());
        let fresh = blake3::keyed_hash(fresh.as_bytes(), uuid::Uuid::new_v4().as_bytes());
        // Whoever stores the first key wins; every maker then reads that one.
        self.execute(
            "INSERT INTO settings (vault_id, key, value) VALUES ($1, 'pat_hash_key', $2)
             ON CONFLICT (vault_id, key) DO NOTHING",
            &[&self.vault, &fresh.to_hex().as_str()],
        )?;
        let hex = read()?.ok_or_else(|| Error::internal("the token key was not stored"))?;
        key_from_hex(&hex)
    }

    fn insert_pat(&self, row: &PatRow) -> Result<bool> {
        // A prefix is unique across vaults (a bearer's prefix finds its vault), a name
        // within the vault: either taken is `false`, and `create_pat` makes another.
        let inserted = self.execute(
            "INSERT INTO personal_tokens (prefix, vault_id, name, hash, scopes, created_at,
               expires_at, last_used_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)
             ON CONFLICT DO NOTHING",
            &[
                &row.prefix,
                &self.vault,
                &row.name,
                &row.hash,
                &row.scopes,
                &row.created_at,
                &row.expires_at,
            ],
        )?;
        Ok(inserted == 1)
    }

    fn pats(&self) -> Result<Vec<PatRow>> {
        let sql =
            format!("SELECT {PAT_COLUMNS} FROM personal_tokens WHERE vault_id = $1 ORDER BY name");
        Ok(self
            .query(&sql, &[&self.vault])?
            .iter()
            .map(pat_from)
            .collect())
    }

    fn pat(&self, prefix: &str) -> Result<Option<PatRow>> {
        let sql = format!(
            "SELECT {PAT_COLUMNS} FROM personal_tokens WHERE vault_id = $1 AND prefix = $2"
        );
        Ok(self
            .query_opt(&sql, &[&self.vault, &prefix])?
            .map(|r| pat_from(&r)))
    }

    fn revoke_pat(&self, name_or_prefix: &str) -> Result<usize> {
        Ok(self.execute(
            "DELETE FROM personal_tokens WHERE vault_id = $1 AND (name = $2 OR prefix = $2)",
            &[&self.vault, &name_or_prefix],
        )? as usize)
    }

    fn touch_pat(&self, prefix: &str, at: &str) -> Result<()> {
        self.execute(
            "UPDATE personal_tokens SET last_used_at = $3 WHERE vault_id = $1 AND prefix = $2",
            &[&self.vault, &prefix, &at],
        )?;
        Ok(())
    }
}

impl Sessions for PgMeta {
    fn insert_sign_in_code(&self, digest: &str, now: &str, expires_at: &str) -> Result<()> {
        self.execute(
            "DELETE FROM sign_in_codes
             WHERE vault_id = $1 AND (expires_at <= $2 OR used_at IS NOT NULL)",
            &[&self.vault, &now],
        )?;
        self.execute(
            "INSERT INTO sign_in_codes (digest, vault_id, created_at, expires_at)
             VALUES ($2, $1, $3, $4)",
            &[&self.vault, &digest, &now, &expires_at],
        )?;
        Ok(())
    }

    fn use_sign_in_code(&self, digest: &str, now: &str) -> Result<bool> {
        let used = self.execute(
            "UPDATE sign_in_codes SET used_at = $3
             WHERE vault_id = $1 AND digest = $2 AND used_at IS NULL AND expires_at > $3",
            &[&self.vault, &digest, &now],
        )?;
        Ok(used == 1)
    }

    fn sign_in_code_open(&self, digest: &str, now: &str) -> Result<bool> {
        Ok(self
            .query_opt(
                "SELECT 1 FROM sign_in_codes
                 WHERE vault_id = $1 AND digest = $2 AND used_at IS NULL AND expires_at > $3",
                &[&self.vault, &digest, &now],
            )?
            .is_some())
    }

    fn insert_session(&self, row: &SessionRow) -> Result<()> {
        self.execute(
            "DELETE FROM console_sessions WHERE vault_id = $1 AND expires_at <= $2",
            &[&self.vault, &row.created_at],
        )?;
        self.execute(
            "INSERT INTO console_sessions (digest, vault_id, csrf, created_at, expires_at,
               last_seen_at)
             VALUES ($2, $1, $3, $4, $5, $6)",
            &[
                &self.vault,
                &row.digest,
                &row.csrf,
                &row.created_at,
                &row.expires_at,
                &row.last_seen_at,
            ],
        )?;
        Ok(())
    }

    fn session(&self, digest: &str, now: &str) -> Result<Option<SessionRow>> {
        Ok(self
            .query_opt(
                "SELECT digest, csrf, created_at, expires_at, last_seen_at FROM console_sessions
                 WHERE vault_id = $1 AND digest = $2 AND expires_at > $3",
                &[&self.vault, &digest, &now],
            )?
            .map(|r| SessionRow {
                digest: r.get(0),
                csrf: r.get(1),
                created_at: r.get(2),
                expires_at: r.get(3),
                last_seen_at: r.get(4),
            }))
    }

    fn touch_session(&self, digest: &str, now: &str) -> Result<()> {
        self.execute(
            "UPDATE console_sessions SET last_seen_at = $3 WHERE vault_id = $1 AND digest = $2",
            &[&self.vault, &digest, &now],
        )?;
        Ok(())
    }

    fn delete_session(&self, digest: &str) -> Result<bool> {
        Ok(self.execute(
            "DELETE FROM console_sessions WHERE vault_id = $1 AND digest = $2",
            &[&self.vault, &digest],
        )? == 1)
    }

    fn insert_idp_sign_in(
        &self,
        state_digest: &str,
        sign_in: &IdpSignIn,
        now: &str,
        expires_at: &str,
    ) -> Result<()> {
        self.execute(
            "DELETE FROM idp_sign_ins WHERE vault_id = $1 AND expires_at <= $2",
            &[&self.vault, &now],
        )?;
        self.execute(
            "INSERT INTO idp_sign_ins (state_digest, vault_id, nonce_digest, verifier,
               redirect_uri, expires_at)
             VALUES ($2, $1, $3, $4, $5, $6)",
            &[
                &self.vault,
                &state_digest,
                &sign_in.nonce_digest,
                &sign_in.verifier,
                &sign_in.redirect_uri,
                &expires_at,
            ],
        )?;
        Ok(())
    }

    fn take_idp_sign_in(&self, state_digest: &str, now: &str) -> Result<Option<IdpSignIn>> {
        let found = self.query_opt(
            "DELETE FROM idp_sign_ins WHERE vault_id = $1 AND state_digest = $2
             RETURNING nonce_digest, verifier, redirect_uri, expires_at",
            &[&self.vault, &state_digest],
        )?;
        Ok(found.and_then(|r| {
            let expires: String = r.get(3);
            (expires.as_str() > now).then(|| IdpSignIn {
                nonce_digest: r.get(0),
                verifier: r.get(1),
                redirect_uri: r.get(2),
            })
        }))
    }
}
