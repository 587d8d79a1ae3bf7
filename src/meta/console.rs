//! The web console's sign-in codes and sessions as the metadata store keeps them: the
//! BLAKE3 digest of each secret (`auth::session::digest`; never the secret), its times,
//! and a session's CSRF token. A code is used once: the update that marks it used is
//! conditional, so of two tabs opening the same link exactly one signs in.

use rusqlite::{params, OptionalExtension};

use super::Meta;
use crate::error::Result;
use crate::storage::metadata::Sessions;
use crate::storage::rows::{IdpSignIn, SessionRow};

impl Sessions for Meta {
    fn insert_sign_in_code(&self, digest: &str, now: &str, expires_at: &str) -> Result<()> {
        let conn = self.conn.lock();
        conn.execute(
            "DELETE FROM sign_in_codes WHERE expires_at <= ?1 OR used_at IS NOT NULL",
            [now],
        )?;
        conn.execute(
            "INSERT INTO sign_in_codes (digest, created_at, expires_at) VALUES (?1, ?2, ?3)",
            params![digest, now, expires_at],
        )?;
        Ok(())
    }

    fn use_sign_in_code(&self, digest: &str, now: &str) -> Result<bool> {
        let used = self.conn.lock().execute(
            "UPDATE sign_in_codes SET used_at = ?2
             WHERE digest = ?1 AND used_at IS NULL AND expires_at > ?2",
            params![digest, now],
        )?;
        Ok(used == 1)
    }

    fn sign_in_code_open(&self, digest: &str, now: &str) -> Result<bool> {
        Ok(self
            .conn
            .lock()
            .prepare_cached(
                "SELECT 1 FROM sign_in_codes WHERE digest = ?1 AND used_at IS NULL AND expires_at > ?2",
            )?
            .query_row(params![digest, now], |_| Ok(()))
            .optional()?
            .is_some())
    }

    fn insert_session(&self, row: &SessionRow) -> Result<()> {
        let conn = self.conn.lock();
        conn.execute(
            "DELETE FROM console_sessions WHERE expires_at <= ?1",
            [&row.created_at],
        )?;
        conn.execute(
            "INSERT INTO console_sessions (digest, csrf, created_at, expires_at, last_seen_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                row.digest,
                row.csrf,
                row.created_at,
                row.expires_at,
                row.last_seen_at
            ],
        )?;
        Ok(())
    }

    fn session(&self, digest: &str, now: &str) -> Result<Option<SessionRow>> {
        Ok(self
            .conn
            .lock()
            .prepare_cached(
                "SELECT digest, csrf, created_at, expires_at, last_seen_at
                 FROM console_sessions WHERE digest = ?1 AND expires_at > ?2",
            )?
            .query_row(params![digest, now], |r| {
                Ok(SessionRow {
                    digest: r.get(0)?,
                    csrf: r.get(1)?,
                    created_at: r.get(2)?,
                    expires_at: r.get(3)?,
                    last_seen_at: r.get(4)?,
                })
            })
            .optional()?)
    }

    fn touch_session(&self, digest: &str, now: &str) -> Result<()> {
        self.conn.lock().execute(
            "UPDATE console_sessions SET last_seen_at = ?2 WHERE digest = ?1",
            params![digest, now],
        )?;
        Ok(())
    }

    fn delete_session(&self, digest: &str) -> Result<bool> {
        Ok(self
            .conn
            .lock()
            .execute("DELETE FROM console_sessions WHERE digest = ?1", [digest])?
            == 1)
    }

    fn insert_idp_sign_in(
        &self,
        state_digest: &str,
        sign_in: &IdpSignIn,
        now: &str,
        expires_at: &str,
    ) -> Result<()> {
        let conn = self.conn.lock();
        conn.execute("DELETE FROM idp_sign_ins WHERE expires_at <= ?1", [now])?;
        conn.execute(
            "INSERT INTO idp_sign_ins (state_digest, nonce_digest, verifier, redirect_uri, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                state_digest,
                sign_in.nonce_digest,
                sign_in.verifier,
                sign_in.redirect_uri,
                expires_at
            ],
        )?;
        Ok(())
    }

    fn take_idp_sign_in(&self, state_digest: &str, now: &str) -> Result<Option<IdpSignIn>> {
        let conn = self.conn.lock();
        let found = conn
            .query_row(
                "DELETE FROM idp_sign_ins WHERE state_digest = ?1
                 RETURNING nonce_digest, verifier, redirect_uri, expires_at",
                [state_digest],
                |r| {
                    Ok((
                        IdpSignIn {
                            nonce_digest: r.get(0)?,
                            verifier: r.get(1)?,
                            redirect_uri: r.get(2)?,
                        },
                        r.get::<_, String>(3)?,
                    ))
                },
            )
            .optional()?;
        Ok(found.and_then(|(sign_in, expires)| (expires.as_str() > now).then_some(sign_in)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_signs_in_once_and_not_after_it_expired() {
        let dir = tempfile::tempdir().unwrap();
        let meta = Meta::open(&dir.path().join("meta.sqlite")).unwrap();
        let t0 = "2026-01-01T00:00:00.000Z";
        let t1 = "2026-01-01T00:05:00.000Z";
        let t2 = "2026-01-01T00:20:00.000Z";
        meta.insert_sign_in_code("a", t0, "2026-01-01T00:15:00.000Z")
            .unwrap();
        meta.insert_sign_in_code("b", t0, "2026-01-01T00:15:00.000Z")
            .unwrap();
        assert!(meta.use_sign_in_code("a", t1).unwrap());
        assert!(!meta.use_sign_in_code("a", t1).unwrap(), "used twice");
        assert!(!meta.use_sign_in_code("b", t2).unwrap(), "expired");
        assert!(!meta.use_sign_in_code("zzz", t1).unwrap(), "unknown");
    }

    #[test]
    fn a_session_ends_at_expiry_and_at_sign_out() {
        let dir = tempfile::tempdir().unwrap();
        let meta = Meta::open(&dir.path().join("meta.sqlite")).unwrap();
        let row = SessionRow {
            digest: "d".into(),
            csrf: "c".into(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            expires_at: "2026-01-01T12:00:00.000Z".into(),
            last_seen_at: "2026-01-01T00:00:00.000Z".into(),
        };
        meta.insert_session(&row).unwrap();
        assert_eq!(
            meta.session("d", "2026-01-01T01:00:00.000Z").unwrap(),
            Some(row)
        );
        assert_eq!(meta.session("d", "2026-01-01T12:00:00.000Z").unwrap(), None);
        assert!(meta.delete_session("d").unwrap());
        assert_eq!(meta.session("d", "2026-01-01T01:00:00.000Z").unwrap(), None);
    }
}
