//! The review queue's rows, and the receipts and intents kept by `Idempotency-Key`.

use tokio_postgres::Row;

use uuid::Uuid;

use super::flight::{params, Flight};
use super::{Params, PgMeta};
use crate::error::{Error, Reason, Result};
use crate::hosted::{block_on, db_error, is_unique_violation, RETRY_AFTER_SECONDS};
use crate::storage::metadata::{Idempotency, ReviewQueue};
use crate::storage::rows::{IdempotencyRow, IntentRow, KeptReceipt, KeyHeld, PendingRow};

const PENDING_COLUMNS: &str = "id, kind, status, agent_id, created_at, decided_at, error, \
                               payload, result, preview, slug, domain, decided_by";

fn pending_from(r: &Row) -> PendingRow {
    PendingRow {
        id: r.get(0),
        kind: r.get(1),
        status: r.get(2),
        agent_id: r.get(3),
        created_at: r.get(4),
        decided_at: r.get(5),
        error: r.get(6),
        payload: r.get(7),
        result: r.get(8),
        preview: r.get(9),
        slug: r.get(10),
        domain: r.get(11),
        decided_by: r.get(12),
    }
}

impl PgMeta {
    fn pending_where(&self, clause: &str, params: super::Params<'_>) -> Result<Vec<PendingRow>> {
        let sql =
            format!("SELECT {PENDING_COLUMNS} FROM pending_writes WHERE vault_id = $1 {clause}");
        Ok(self.query(&sql, params)?.iter().map(pending_from).collect())
    }
}

impl ReviewQueue for PgMeta {
    fn insert_pending(&self, row: &PendingRow) -> Result<()> {
        self.execute(
            "INSERT INTO pending_writes (vault_id, id, kind, status, agent_id, created_at,
               decided_at, error, payload, result, preview, slug, domain, decided_by)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            &[
                &self.vault,
                &row.id,
                &row.kind,
                &row.status,
                &row.agent_id,
                &row.created_at,
                &row.decided_at,
                &row.error,
                &row.payload,
                &row.result,
                &row.preview,
                &row.slug,
                &row.domain,
                &row.decided_by,
            ],
        )?;
        Ok(())
    }

    fn pending(&self, id: &str) -> Result<Option<PendingRow>> {
        Ok(self
            .pending_where("AND id = $2", &[&self.vault, &id])?
            .pop())
    }

    fn all_pending(&self) -> Result<Vec<PendingRow>> {
        self.pending_where("ORDER BY created_at, id", &[&self.vault])
    }

    fn count_pending(&self) -> Result<usize> {
        let rows = self.query(
            "SELECT COUNT(*) FROM pending_writes WHERE vault_id = $1 AND status = 'pending'",
            &[&self.vault],
        )?;
        Ok(rows.first().map(|r| r.get::<_, i64>(0)).unwrap_or(0) as usize)
    }

    fn pending_ids(&self, limit: usize) -> Result<Vec<String>> {
        let rows = self.query(
            "SELECT id FROM pending_writes WHERE vault_id = $1 AND status = 'pending'
             ORDER BY created_at, id LIMIT $2",
            &[&self.vault, &super::limit(limit)],
        )?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn pending_rows(&self, decided: bool, limit: usize) -> Result<Vec<PendingRow>> {
        // NULLS LAST: where SQLite puts them (a NULL is its smallest value).
        let clause = if decided {
            "AND status != 'pending' ORDER BY decided_at DESC NULLS LAST, id LIMIT $2"
        } else {
            "AND status = 'pending' ORDER BY created_at, id LIMIT $2"
        };
        self.pending_where(clause, &[&self.vault, &super::limit(limit)])
    }

    fn decide_pending(
        &self,
        id: &str,
        status: &str,
        decided_at: &str,
        decided_by: &str,
        error: Option<&str>,
        result: Option<&str>,
    ) -> Result<bool> {
        let changed = self.execute(
            "UPDATE pending_writes SET status = $3, decided_at = $4, decided_by = $5,
               error = $6, result = $7
             WHERE vault_id = $1 AND id = $2 AND status = 'pending'",
            &[
                &self.vault,
                &id,
                &status,
                &decided_at,
                &decided_by,
                &error,
                &result,
            ],
        )?;
        Ok(changed == 1)
    }

    fn legacy_pending(&self) -> Result<Vec<PendingRow>> {
        self.pending_where(
            "AND NOT domain AND status = 'pending' ORDER BY created_at, id",
            &[&self.vault],
        )
    }

    fn upgrade_pending(&self, id: &str, request: &str) -> Result<()> {
        self.execute(
            "UPDATE pending_writes SET payload = $3, domain = true
             WHERE vault_id = $1 AND id = $2 AND NOT domain",
            &[&self.vault, &id, &request],
        )?;
        Ok(())
    }
}

/// A key's receipt and intent rows: for [`held_of`].
const HELD: &str = "SELECT true, op_hash, receipt FROM idempotency WHERE vault_id = $1 AND key = $2
     UNION ALL
     SELECT false, op_hash, intent FROM write_intents WHERE vault_id = $1 AND key = $2";

/// What `key` holds, from the rows of [`HELD`].
fn held_of(rows: &[Row], key: &str) -> KeyHeld {
    // A receipt, when there is one, is the answer (as `idempotency` is asked first).
    let row = rows.iter().find(|r| r.get::<_, bool>(0)).or(rows.first());
    match row {
        None => KeyHeld::Nothing,
        Some(r) if r.get::<_, bool>(0) => KeyHeld::Receipt(IdempotencyRow {
            key: key.to_string(),
            op_hash: r.get(1),
            receipt: Some(r.get(2)),
            status: 0,
            body: String::new(),
        }),
        Some(r) => KeyHeld::Intent(IntentRow {
            key: key.to_string(),
            op_hash: r.get(1),
            intent: r.get(2),
        }),
    }
}

impl Idempotency for PgMeta {
    fn idempotency(&self, key: &str) -> Result<Option<IdempotencyRow>> {
        // Hosted mode keeps receipts only: no row predates them (SQLite's rows from
        // before its migration 5 replay `status` and `body`; a receipt's are 0 and "").
        Ok(self
            .query_opt(
                "SELECT key, op_hash, receipt FROM idempotency WHERE vault_id = $1 AND key = $2",
                &[&self.vault, &key],
            )?
            .map(|r| IdempotencyRow {
                key: r.get(0),
                op_hash: r.get(1),
                receipt: Some(r.get(2)),
                status: 0,
                body: String::new(),
            }))
    }

    fn held(&self, key: &str) -> Result<KeyHeld> {
        let rows = self.query(HELD, &[&self.vault, &key])?;
        Ok(held_of(&rows, key))
    }

    fn held_and_settings(
        &self,
        key: &str,
        keys: &[&str],
    ) -> Result<(KeyHeld, Vec<Option<String>>)> {
        // Both sent before either answer is read: one round trip.
        block_on(async {
            let client = self.db.client().await?;
            let held = client.prepare_cached(HELD).await.map_err(db_error)?;
            let settings = client
                .prepare_cached(super::SETTINGS)
                .await
                .map_err(db_error)?;
            let (by_key, by_keys): (Params<'_>, Params<'_>) =
                (&[&self.vault, &key], &[&self.vault, &keys]);
            let (held, settings) = futures::join!(
                client.query(&held, by_key),
                client.query(&settings, by_keys),
            );
            Ok((
                held_of(&held.map_err(db_error)?, key),
                super::values_of(&settings.map_err(db_error)?, keys),
            ))
        })
    }

    fn store_receipt(
        &self,
        key: &str,
        op_hash: &str,
        receipt: &str,
        created_at: &str,
    ) -> Result<()> {
        let kept = KeptReceipt {
            key: key.to_string(),
            op_hash: op_hash.to_string(),
            receipt: receipt.to_string(),
            created_at: created_at.to_string(),
        };
        let mut flight = Flight::claiming(self.vault, None);
        keep_receipts(&mut flight, &self.vault, [&kept]);
        block_on(async { flight.commit(self.db.client().await?).await })
    }

    fn store_intent(&self, key: &str, op_hash: &str, intent: &str) -> Result<()> {
        self.execute(
            "INSERT INTO write_intents (vault_id, key, op_hash, intent) VALUES ($1, $2, $3, $4)
             ON CONFLICT (vault_id, key) DO UPDATE SET op_hash = excluded.op_hash,
               intent = excluded.intent, created_at = excluded.created_at",
            &[&self.vault, &key, &op_hash, &intent],
        )?;
        Ok(())
    }

    fn forget_intent(&self, key: &str) -> Result<()> {
        self.execute(
            "DELETE FROM write_intents WHERE vault_id = $1 AND key = $2",
            &[&self.vault, &key],
        )?;
        Ok(())
    }

    fn intent(&self, key: &str) -> Result<Option<IntentRow>> {
        let rows = self.query(
            "SELECT key, op_hash, intent FROM write_intents WHERE vault_id = $1 AND key = $2",
            &[&self.vault, &key],
        )?;
        Ok(rows.first().map(|r| IntentRow {
            key: r.get(0),
            op_hash: r.get(1),
            intent: r.get(2),
        }))
    }

    fn intents(&self) -> Result<Vec<IntentRow>> {
        let rows = self.query(
            "SELECT key, op_hash, intent FROM write_intents WHERE vault_id = $1
             ORDER BY created_at, key",
            &[&self.vault],
        )?;
        Ok(rows
            .iter()
            .map(|r| IntentRow {
                key: r.get(0),
                op_hash: r.get(1),
                intent: r.get(2),
            })
            .collect())
    }
}

/// Keep receipts under their keys and let go of the keys' intents, in the caller's
/// transaction (sent pipelined).
pub(super) fn keep_receipts<'a>(
    flight: &mut Flight<'a>,
    vault: &'a Uuid,
    kept: impl IntoIterator<Item = &'a KeptReceipt> + Clone,
) {
    for k in kept.clone() {
        flight.push_told(
            "INSERT INTO idempotency (vault_id, key, op_hash, receipt, created_at)
             VALUES ($1, $2, $3, $4, $5)",
            params![vault, &k.key, &k.op_hash, &k.receipt, &k.created_at],
            receipt_kept_meanwhile,
        );
    }
    flight.each(
        "DELETE FROM write_intents WHERE vault_id = $1 AND key = $2",
        kept,
        |k| params![vault, &k.key],
    );
}

fn receipt_kept_meanwhile(e: tokio_postgres::Error) -> Error {
    if is_unique_violation(&e) {
        // Another instance kept a receipt under this key meanwhile: a retry with the
        // key replays it (SQLite's store answers this reason too).
        Error::new(
            Reason::STORAGE_UNAVAILABLE,
            format!("a receipt is stored under this idempotency key already: {e}"),
        )
        .with_retry_after(RETRY_AFTER_SECONDS)
    } else {
        db_error(e)
    }
}
