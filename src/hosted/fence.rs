//! One writer per vault, and one write per `Idempotency-Key`, across every instance:
//! session advisory locks, each held on a connection of its own for as long as the
//! change (or the keyed write) takes, let go when it is done. A lock whose connection
//! dies is let go by the server, so a killed instance never holds a vault or a key.
//!
//! A vault's lock has the one-bigint key; a write key's the two-int form (vault, key),
//! a key space of its own. A keyed write takes its key's lock before its vault's, never
//! the other way round, so the two never wait on each other in a circle.

use std::sync::Arc;

use parking_lot::Mutex;
use uuid::Uuid;

use crate::error::{Error, Reason, Result};
use crate::state::{Fence, Fenced};

use super::{block_on, db_error, Client, Database};

/// The longest a change waits for another instance's change of the same vault, or for
/// another instance's write under the same key: below the pool's statement timeout, so
/// a wait that runs out is told apart from a database that does not answer.
const WAIT_MS: i64 = 4_000;

/// Where this process's letting go of a vault's lock, under way, is left.
type Unlocking = Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>;

pub struct VaultFence {
    db: Database,
    /// The pool of the write keys' locks, a pool of its own: writes waiting for their
    /// turn hold these, and must not take the connections the writing one needs.
    keys: Database,
    vault: Uuid,
    /// The vault lock's letting go, under way: it is not waited for by the change that
    /// held the lock, only by this process's next change, which would otherwise find
    /// the lock still taken (by itself) and wait for it.
    unlocking: Unlocking,
}

impl VaultFence {
    pub fn new(db: Database, keys: Database, vault: Uuid) -> Self {
        Self {
            db,
            keys,
            vault,
            unlocking: Arc::default(),
        }
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

    /// `what` (`pg_advisory_lock`, …) of this key, prepared on `client` (once per
    /// connection: a write takes and lets go of two locks).
    async fn prepare(
        self,
        client: &Client,
        what: &str,
    ) -> std::result::Result<tokio_postgres::Statement, tokio_postgres::Error> {
        let args = match self {
            Key::Vault(_) => "$1",
            Key::Write(..) => "$1, $2",
        };
        client
            .prepare_cached(&format!("SELECT {what}({args})"))
            .await
    }

    /// Run `stmt` (from [`Key::prepare`]) for this key: its one row.
    async fn query(
        self,
        client: &Client,
        stmt: &tokio_postgres::Statement,
    ) -> std::result::Result<tokio_postgres::Row, tokio_postgres::Error> {
        match self {
            Key::Vault(k) => client.query_one(stmt, &[&k]).await,
            Key::Write(a, b) => client.query_one(stmt, &[&a, &b]).await,
        }
    }

    async fn run(
        self,
        client: &Client,
        what: &str,
    ) -> std::result::Result<tokio_postgres::Row, tokio_postgres::Error> {
        let stmt = self.prepare(client, what).await?;
        self.query(client, &stmt).await
    }
}

/// The vault's stored seq (0 for a vault without its counter: deleted).
const SEQ: &str = "SELECT committed_seq FROM vault_counters WHERE vault_id = $1";

/// [`SEQ`] of `vault`, prepared as `stmt`; `None` when no vault's seq is asked for.
async fn stored_seq(
    client: &Client,
    stmt: Option<&tokio_postgres::Statement>,
    vault: Option<Uuid>,
) -> std::result::Result<Option<i64>, tokio_postgres::Error> {
    let (Some(stmt), Some(vault)) = (stmt, vault) else {
        return Ok(None);
    };
    let row = client.query_opt(stmt, &[&vault]).await?;
    Ok(Some(row.map_or(0, |r| r.get(0))))
}

struct Held {
    client: Option<Client>,
    key: Key,
    /// Where the letting go's task is left for the next change to wait on (the vault's
    /// lock); `None`: nothing waits for it (a write key's).
    unlocking: Option<Unlocking>,
}

impl VaultFence {
    /// Take `key`'s lock on a connection of `db`; with `seq_of`, also read that vault's
    /// stored seq once the lock is held, in the same round trip when the lock is free.
    fn take(
        &self,
        db: &Database,
        key: Key,
        busy: &'static str,
        seq_of: Option<Uuid>,
    ) -> Result<(Client, Option<i64>)> {
        block_on(async {
            let client = db.client().await?;
            match locked(&client, key, busy, seq_of).await {
                Ok(seq) => Ok((client, seq)),
                Err(e) => {
                    // The lock may be held all the same (a statement cut off after it
                    // was taken, the seq unread) or the session's lock timeout still
                    // set: the connection is closed, not handed out again like that,
                    // and the server lets go of a closed session's locks.
                    drop(deadpool_postgres::Object::take(client));
                    Err(e)
                }
            }
        })
    }
}

/// [`VaultFence::take`] on `client`: the stored seq of `seq_of` once the lock is held.
async fn locked(
    client: &Client,
    key: Key,
    busy: &'static str,
    seq_of: Option<Uuid>,
) -> Result<Option<i64>> {
    let seq_stmt = match seq_of {
        Some(_) => Some(client.prepare_cached(SEQ).await.map_err(db_error)?),
        None => None,
    };
    // Free (the common case): taken, and the seq read after it, in one round trip (each
    // statement its own snapshot, so the read sees every change committed before the
    // lock was let go to this process). Both prepared first, so they go out in this
    // order.
    let try_lock = key
        .prepare(client, "pg_try_advisory_lock")
        .await
        .map_err(db_error)?;
    let (taken, seq) = futures::join!(
        key.query(client, &try_lock),
        stored_seq(client, seq_stmt.as_ref(), seq_of)
    );
    if taken.map_err(db_error)?.get::<_, bool>(0) {
        return seq.map_err(db_error);
    }
    // Taken by another: wait for it, bounded. The timeout is set, the lock waited for,
    // then the timeout reset and the seq read, each pair sent together (the lock is
    // handed over to this process once per change of the other's: each round trip here
    // is one both wait for).
    let lock = key
        .prepare(client, "pg_advisory_lock")
        .await
        .map_err(db_error)?;
    let set = format!("SET lock_timeout = {WAIT_MS}");
    let (set, waited) = futures::join!(client.batch_execute(&set), key.query(client, &lock));
    set.map_err(db_error)?;
    match waited {
        Ok(_) => {
            let (reset, seq) = futures::join!(
                client.batch_execute("RESET lock_timeout"),
                stored_seq(client, seq_stmt.as_ref(), seq_of)
            );
            reset.map_err(db_error)?;
            seq.map_err(db_error)
        }
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) => {
            Err(Error::new(
                Reason::SERVER_BUSY,
                format!("{busy} for {} s; nothing was written", WAIT_MS / 1000),
            )
            .with_retry_after(1))
        }
        Err(e) => Err(db_error(e)),
    }
}

impl Fence for VaultFence {
    fn hold(&self) -> Result<Fenced> {
        // This process's own letting go of the lock, if still under way, first.
        // Bounded: against a server that stopped answering, `take` answers in time.
        let unlocking = self.unlocking.lock().take();
        if let Some(unlocking) = unlocking {
            let wait = std::time::Duration::from_millis(WAIT_MS as u64);
            let _ = block_on(tokio::time::timeout(wait, unlocking));
        }
        let (client, seq) = self.take(
            &self.db,
            Key::of_vault(self.vault),
            "another instance has been writing this vault",
            Some(self.vault),
        )?;
        Ok(Fenced {
            guard: Box::new(Held {
                client: Some(client),
                key: Key::of_vault(self.vault),
                unlocking: Some(self.unlocking.clone()),
            }),
            stored_seq: seq.unwrap_or(0),
        })
    }

    fn delete_vault(&self) -> Result<()> {
        block_on(super::registry::delete(&self.db, &self.vault.to_string())).map(|_| ())
    }

    fn hold_key(&self, key: &str) -> Result<Box<dyn Send>> {
        let key = Key::of_write(self.vault, key);
        let (client, _) = self.take(
            &self.keys,
            key,
            "another instance has been applying a write with this Idempotency-Key",
            None,
        )?;
        Ok(Box::new(Held {
            client: Some(client),
            key,
            unlocking: None,
        }))
    }
}

impl Drop for Held {
    /// The lock is let go on the database runtime, not waited for here: the change
    /// that held it is answered one round trip sooner.
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let key = self.key;
        let task = super::runtime().spawn(async move {
            if let Err(e) = key.run(&client, "pg_advisory_unlock").await {
                // The connection is closed rather than handed out again still holding
                // the lock; the server lets go of a closed session's locks.
                tracing::warn!(error = %e, "cannot let go of an advisory lock; its connection is closed");
                drop(deadpool_postgres::Object::take(client));
            }
        });
        if let Some(unlocking) = &self.unlocking {
            *unlocking.lock() = Some(task);
        }
    }
}
