//! One writer per vault, and one write per `Idempotency-Key`, across every instance:
//! session advisory locks, each held on a connection of its own for as long as the
//! change (or the keyed write) takes, let go when it is done. A lock whose connection
//! dies is let go by the server, so a killed instance never holds a vault or a key.
//!
//! A vault's lock has the one-bigint key; a write key's the two-int form (vault, key),
//! a key space of its own. A keyed write takes its key's lock before its vault's, never
//! the other way round, so the two never wait on each other in a circle.

use uuid::Uuid;

use crate::error::{Error, Reason, Result};
use crate::state::Fence;

use super::{block_on, db_error, Client, Database};

/// The longest a change waits for another instance's change of the same vault, or for
/// another instance's write under the same key: below the pool's statement timeout, so
/// a wait that runs out is told apart from a database that does not answer.
const WAIT_MS: i64 = 4_000;

pub struct VaultFence {
    db: Database,
    /// The pool of the write keys' locks, a pool of its own: writes waiting for their
    /// turn hold these, and must not take the connections the writing one needs.
    keys: Database,
    vault: Uuid,
}

impl VaultFence {
    pub fn new(db: Database, keys: Database, vault: Uuid) -> Self {
        Self { db, keys, vault }
    }
}

/// Which lock.
#[derive(Clone, Copy)]
enum Key {
    Vault(i64),
    Write(i32, i32),
}

impl Key {
    fn of_vault(vault: Uuid) -> Self {
        // The vault id's last 8 bytes (random in UUIDv4 and v7; a clash only makes two
        // vaults share a lock).
        Key::Vault(i64::from_be_bytes(
            vault.as_bytes()[8..16].try_into().expect("8 bytes"),
        ))
    }

    fn of_write(vault: Uuid, key: &str) -> Self {
        let v = i32::from_be_bytes(vault.as_bytes()[12..16].try_into().expect("4 bytes"));
        let k = blake3::hash(key.as_bytes());
        Key::Write(
            v,
            i32::from_be_bytes(k.as_bytes()[..4].try_into().expect("4 bytes")),
        )
    }

    async fn run(
        self,
        client: &Client,
        what: &str,
    ) -> std::result::Result<tokio_postgres::Row, tokio_postgres::Error> {
        // Prepared once per connection: a write takes and lets go of two locks.
        match self {
            Key::Vault(k) => {
                let stmt = client.prepare_cached(&format!("SELECT {what}($1)")).await?;
                client.query_one(&stmt, &[&k]).await
            }
            Key::Write(a, b) => {
                let stmt = client
                    .prepare_cached(&format!("SELECT {what}($1, $2)"))
                    .await?;
                client.query_one(&stmt, &[&a, &b]).await
            }
        }
    }
}

struct Held {
    client: Option<Client>,
    key: Key,
}

impl VaultFence {
    fn take(&self, db: &Database, key: Key, busy: &'static str) -> Result<Box<dyn Send>> {
        let client = block_on(async {
            let client = db.client().await?;
            // Free (the common case): taken in one round trip.
            let taken = key
                .run(&client, "pg_try_advisory_lock")
                .await
                .map_err(db_error)?;
            if taken.get::<_, bool>(0) {
                return Ok(client);
            }
            client
                .batch_execute(&format!("SET lock_timeout = {WAIT_MS}"))
                .await
                .map_err(db_error)?;
            match key.run(&client, "pg_advisory_lock").await {
                Ok(_) => {
                    client
                        .batch_execute("RESET lock_timeout")
                        .await
                        .map_err(db_error)?;
                    Ok(client)
                }
                Err(e)
                    if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) =>
                {
                    Err(Error::new(
                        Reason::SERVER_BUSY,
                        format!("{busy} for {} s; nothing was written", WAIT_MS / 1000),
                    )
                    .with_retry_after(1))
                }
                Err(e) => Err(db_error(e)),
            }
        })?;
        Ok(Box::new(Held {
            client: Some(client),
            key,
        }))
    }
}

impl Fence for VaultFence {
    fn hold(&self) -> Result<Box<dyn Send>> {
        self.take(
            &self.db,
            Key::of_vault(self.vault),
            "another instance has been writing this vault",
        )
    }

    fn delete_vault(&self) -> Result<()> {
        block_on(super::registry::delete(&self.db, &self.vault.to_string())).map(|_| ())
    }

    fn hold_key(&self, key: &str) -> Result<Box<dyn Send>> {
        self.take(
            &self.keys,
            Key::of_write(self.vault, key),
            "another instance has been applying a write with this Idempotency-Key",
        )
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let unlocked = block_on(self.key.run(&client, "pg_advisory_unlock"));
        if let Err(e) = unlocked {
            // The connection is closed rather than handed out again still holding the
            // lock; the server lets go of a closed session's locks.
            tracing::warn!(error = %e, "cannot let go of an advisory lock; its connection is closed");
            drop(deadpool_postgres::Object::take(client));
        }
    }
}
