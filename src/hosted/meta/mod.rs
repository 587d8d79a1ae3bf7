//! Hosted mode's metadata store: [`PgMeta`], the storage seam's metadata traits
//! (`storage::metadata`) over one vault's rows of the shared PostgreSQL database.
//!
//! The reference behaviour is SQLite's (`meta::Meta`): the same rows back for the same
//! calls, the same order, the same paging, the same answers for a missing row. Every
//! statement names the vault (`vault_id = $1`), so two vaults of one database never see
//! each other's rows. Times are stored as the rows carry them (RFC 3339 text, compared in
//! byte order: migration 2), so a reader gets back the very string written.
//!
//! The traits are synchronous: each method runs its statements through
//! [`super::block_on`] on a connection of the pool; a database that cannot be reached
//! answers `STORAGE_UNAVAILABLE` with `Retry-After` within the pool's acquire timeout.
//!
//! A change's seqs are claimed in the transaction that writes it: `vault_counters`
//! moves from the seq before the batch's first to its last, or the transaction is rolled
//! back (another instance recorded a change of this vault meanwhile); its statements go
//! out as one flight (`flight`).

mod access;
mod audit;
mod flight;
mod oplog;
mod records;
mod review;

use tokio_postgres::types::ToSql;
use tokio_postgres::Row;
use uuid::Uuid;

use super::{block_on, db_error, Database};
use crate::error::{Error, Result};
use crate::storage::metadata::Settings;

/// One vault's metadata in the shared database. Cheap to clone.
#[derive(Clone)]
pub struct PgMeta {
    db: Database,
    vault: Uuid,
    /// Note bytes its revision store committed, for the next revision rows.
    contents: std::sync::Arc<super::revisions::Staged>,
}

/// Bound parameters of a statement; `$1` is always the vault.
type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

impl PgMeta {
    /// The metadata of the vault `vault_id` (which the registry created) in `db`.
    pub fn new(db: Database, vault_id: Uuid) -> Self {
        Self::sharing(db, vault_id, std::sync::Arc::default())
    }

    /// [`PgMeta::new`], writing the note bytes its revision store stages in `contents`
    /// with the revision rows that name them.
    pub fn sharing(
        db: Database,
        vault_id: Uuid,
        contents: std::sync::Arc<super::revisions::Staged>,
    ) -> Self {
        Self {
            db,
            vault: vault_id,
            contents,
        }
    }

    /// The vault whose rows this store reads and writes.
    pub fn vault_id(&self) -> Uuid {
        self.vault
    }

    /// The rows `sql` answers.
    fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        block_on(async {
            let client = self.db.client().await?;
            let stmt = client.prepare_cached(sql).await.map_err(db_error)?;
            client.query(&stmt, params).await.map_err(db_error)
        })
    }

    /// The one row `sql` answers, if any.
    fn query_opt(&self, sql: &str, params: Params<'_>) -> Result<Option<Row>> {
        block_on(async {
            let client = self.db.client().await?;
            let stmt = client.prepare_cached(sql).await.map_err(db_error)?;
            client.query_opt(&stmt, params).await.map_err(db_error)
        })
    }

    /// Run `sql`: how many rows it changed.
    fn execute(&self, sql: &str, params: Params<'_>) -> Result<u64> {
        block_on(async {
            let client = self.db.client().await?;
            let stmt = client.prepare_cached(sql).await.map_err(db_error)?;
            client.execute(&stmt, params).await.map_err(db_error)
        })
    }
}

/// A `LIMIT` as PostgreSQL takes it (never negative: `usize::MAX` is "all").
fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The lowest and highest of a batch's seqs; `None` for a batch without any.
fn seq_span(seqs: impl IntoIterator<Item = i64>) -> Option<(i64, i64)> {
    seqs.into_iter().fold(None, |span, s| match span {
        None => Some((s, s)),
        Some((lo, hi)) => Some((lo.min(s), hi.max(s))),
    })
}

/// The settings of a vault among `$2`: rows for [`values_of`].
const SETTINGS: &str = "SELECT key, value FROM settings WHERE vault_id = $1 AND key = ANY($2)";

/// The value of each of `keys`, in their order, from the rows of [`SETTINGS`].
fn values_of(rows: &[Row], keys: &[&str]) -> Vec<Option<String>> {
    keys.iter()
        .map(|k| {
            rows.iter()
                .find(|r| r.get::<_, &str>(0) == *k)
                .map(|r| r.get(1))
        })
        .collect()
}

impl Settings for PgMeta {
    fn setting(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .query_opt(
                "SELECT value FROM settings WHERE vault_id = $1 AND key = $2",
                &[&self.vault, &key],
            )?
            .map(|r| r.get(0)))
    }

    fn settings(&self, keys: &[&str]) -> Result<Vec<Option<String>>> {
        let rows = self.query(SETTINGS, &[&self.vault, &keys])?;
        Ok(values_of(&rows, keys))
    }

    fn set_setting(&self, key: &str, value: &str) -> Result<()> {
        self.execute(
            "INSERT INTO settings (vault_id, key, value) VALUES ($1, $2, $3)
             ON CONFLICT (vault_id, key) DO UPDATE SET value = excluded.value",
            &[&self.vault, &key, &value],
        )?;
        Ok(())
    }

    fn record_applied_write(&self, at: &str) -> Result<()> {
        self.execute(
            "INSERT INTO applied_writes (vault_id, at) VALUES ($1, $2)",
            &[&self.vault, &at],
        )?;
        Ok(())
    }

    fn applied_writes_since(&self, since: &str) -> Result<(u64, Option<String>)> {
        let rows = self.query(
            "SELECT COUNT(*), MIN(at) FROM applied_writes WHERE vault_id = $1 AND at > $2",
            &[&self.vault, &since],
        )?;
        let row = rows
            .first()
            .ok_or_else(|| Error::internal("COUNT answered no row"))?;
        Ok((row.get::<_, i64>(0) as u64, row.get(1)))
    }

    fn use_nonce(&self, nonce: &str, expires_at: i64, now: i64) -> Result<bool> {
        self.execute(
            "DELETE FROM presign_nonces WHERE vault_id = $1 AND expires_at < $2",
            &[&self.vault, &now],
        )?;
        let n = self.execute(
            "INSERT INTO presign_nonces (vault_id, nonce, expires_at) VALUES ($1, $2, $3)
             ON CONFLICT (vault_id, nonce) DO NOTHING",
            &[&self.vault, &nonce, &expires_at],
        )?;
        Ok(n == 1)
    }
}
