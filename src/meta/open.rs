//! Opening the metadata store: WAL with `synchronous = FULL`, and on a full disk
//! (SQLite cannot make its shared-memory WAL index) with exclusive locking instead, so
//! the daemon starts and serves reads.

use std::path::Path;

use parking_lot::Mutex;
use rusqlite::Connection;

use super::{migrate, Meta};
use crate::error::Result;

impl Meta {
    /// Open (or create) the store and run pending migrations.
    pub fn open(path: &Path) -> Result<Self> {
        let mut conn = match Self::connect(path, false) {
            // On a full disk SQLite cannot make the shared-memory WAL index (`-shm`):
            // with exclusive locking it keeps that index in memory, so the daemon starts
            // and serves reads; writes answer `INSUFFICIENT_STORAGE` until space is freed.
            // Until the next start no other process (the token CLI) can open the store.
            Err(e) if full_or_io(&e) => {
                tracing::warn!(error = %e, "the metadata store cannot make its shared index (is the disk full?); opening it with exclusive locking");
                Self::connect(path, true)?
            }
            other => other?,
        };
        migrate(&mut conn)?;
        Ok(Self {
            conn: Mutex::new(conn),
            pats: Mutex::default(),
        })
    }

    fn connect(path: &Path, exclusive: bool) -> rusqlite::Result<Connection> {
        let conn = Connection::open(path)?;
        if exclusive {
            conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
        }
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // FULL: a transaction is on disk (the WAL synced) when it commits, so a receipt
        // sent after its rows survives a power cut, not only a crash of the process.
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // The first read: a WAL index that cannot be made fails here.
        conn.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))?;
        Ok(conn)
    }
}

/// Whether opening failed for lack of space (or with an IO error, which is how a
/// shared-memory index that cannot grow is reported).
fn full_or_io(err: &rusqlite::Error) -> bool {
    matches!(err, rusqlite::Error::SqliteFailure(e, _)
        if matches!(e.code, rusqlite::ErrorCode::DiskFull | rusqlite::ErrorCode::SystemIoFailure))
}
