//! Receipts kept by `Idempotency-Key`, and the intents of writes under way.

use rusqlite::{params, Connection, OptionalExtension};

use super::Meta;
use crate::error::Result;
use crate::storage::metadata::Idempotency;
use crate::storage::rows::{IdempotencyRow, IntentRow, KeptReceipt};

impl Idempotency for Meta {
    fn idempotency(&self, key: &str) -> Result<Option<IdempotencyRow>> {
        Ok(self
            .conn
            .lock()
            .query_row(
                "SELECT key, op_hash, receipt, status, body FROM idempotency WHERE key = ?1",
                [key],
                |r| {
                    Ok(IdempotencyRow {
                        key: r.get(0)?,
                        op_hash: r.get(1)?,
                        receipt: r.get(2)?,
                        status: r.get(3)?,
                        body: r.get(4)?,
                    })
                },
            )
            .optional()?)
    }

    fn store_receipt(
        &self,
        key: &str,
        op_hash: &str,
        receipt: &str,
        created_at: &str,
    ) -> Result<()> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction()?;
        keep_receipt(
            &tx,
            &KeptReceipt {
                key: key.to_string(),
                op_hash: op_hash.to_string(),
                receipt: receipt.to_string(),
                created_at: created_at.to_string(),
            },
        )?;
        tx.commit()?;
        Ok(())
    }

    fn store_intent(&self, key: &str, op_hash: &str, intent: &str) -> Result<()> {
        self.conn.lock().execute(
            "INSERT OR REPLACE INTO write_intents (key, op_hash, intent, created_at)
             VALUES (?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
            params![key, op_hash, intent],
        )?;
        Ok(())
    }

    fn forget_intent(&self, key: &str) -> Result<()> {
        self.conn
            .lock()
            .execute("DELETE FROM write_intents WHERE key = ?1", [key])?;
        Ok(())
    }

    fn intent(&self, key: &str) -> Result<Option<IntentRow>> {
        let conn = self.conn.lock();
        let mut stmt =
            conn.prepare_cached("SELECT key, op_hash, intent FROM write_intents WHERE key = ?1")?;
        let mut rows = stmt.query_map([key], |r| {
            Ok(IntentRow {
                key: r.get(0)?,
                op_hash: r.get(1)?,
                intent: r.get(2)?,
            })
        })?;
        Ok(rows.next().transpose()?)
    }

    fn intents(&self) -> Result<Vec<IntentRow>> {
        let conn = self.conn.lock();
        let mut stmt = conn
            .prepare("SELECT key, op_hash, intent FROM write_intents ORDER BY created_at, key")?;
        let rows = stmt.query_map([], |r| {
            Ok(IntentRow {
                key: r.get(0)?,
                op_hash: r.get(1)?,
                intent: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// Keep a receipt under its key and let go of the key's intent (the caller's transaction).
pub(super) fn keep_receipt(conn: &Connection, kept: &KeptReceipt) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO idempotency (key, op_hash, receipt, status, body, created_at)
         VALUES (?1, ?2, ?3, 0, '', ?4)",
    )?
    .execute(params![
        kept.key,
        kept.op_hash,
        kept.receipt,
        kept.created_at
    ])?;
    conn.prepare_cached("DELETE FROM write_intents WHERE key = ?1")?
        .execute([&kept.key])?;
    Ok(())
}
