//! One writer per vault across every instance: a session advisory lock on the vault,
//! held on a connection of its own for the change, let go when the change is recorded.
//! A lock whose connection dies is let go by the server, so a killed instance never
//! holds a vault.

use uuid::Uuid;

use crate::error::{Error, Reason, Result};
use crate::state::Fence;

use super::{block_on, db_error, Client, Database};

/// The longest a change waits for another instance's change of the same vault.
const WAIT_MS: i64 = 10_000;

pub struct VaultFence {
    db: Database,
    key: i64,
}

impl VaultFence {
    pub fn new(db: Database, vault: Uuid) -> Self {
        // The lock's key: the vault id's first 8 bytes (UUIDv4/v7 bits are random or
        // time-ordered there; a clash only makes two vaults share a lock).
        let bytes = vault.as_bytes();
        let key = i64::from_be_bytes(bytes[8..16].try_into().expect("8 bytes"));
        Self { db, key }
    }
}

struct Held {
    client: Option<Client>,
    key: i64,
}

impl Fence for VaultFence {
    fn hold(&self) -> Result<Box<dyn Send>> {
        let client = block_on(async {
            let client = self.db.client().await?;
            client
                .batch_execute(&format!("SET lock_timeout = {WAIT_MS}"))
                .await
                .map_err(db_error)?;
            match client
                .execute("SELECT pg_advisory_lock($1)", &[&self.key])
                .await
            {
                Ok(_) => Ok(client),
                Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) => {
                    Err(Error::new(
                        Reason::SERVER_BUSY,
                        format!(
                            "another instance has been writing this vault for {} s; nothing was written",
                            WAIT_MS / 1000
                        ),
                    )
                    .with_retry_after(1))
                }
                Err(e) => Err(db_error(e)),
            }
        })?;
        Ok(Box::new(Held {
            client: Some(client),
            key: self.key,
        }))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let unlocked = block_on(client.execute("SELECT pg_advisory_unlock($1)", &[&self.key]));
        if let Err(e) = unlocked {
            // The connection is closed rather than handed out again still holding the
            // lock; the server lets go of a closed session's locks.
            tracing::warn!(error = %e, "cannot let go of a vault's write lock; its connection is closed");
            drop(deadpool_postgres::Object::take(client));
        }
    }
}
