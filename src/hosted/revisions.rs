//! Hosted mode's revision store: each revision's bytes in `contents` (by content hash,
//! once per vault), read back through the revision row at its seq. A "commit" writes the
//! bytes before the metadata transaction that writes the revision rows names them, so a
//! recorded revision always has its bytes.

use std::sync::mpsc;
use std::time::Duration;

use uuid::Uuid;

use crate::error::Result;
use crate::storage::{CommitRequest, Content, HistoryStatus, Revisions, Stored, Written};

use super::{block_on, db_error, Database};

pub struct PgRevisions {
    db: Database,
    vault: Uuid,
}

impl PgRevisions {
    pub fn new(db: Database, vault: Uuid) -> Self {
        Self { db, vault }
    }

    async fn put(&self, request: &CommitRequest) -> Result<()> {
        let mut hashes = Vec::new();
        let mut bodies: Vec<std::borrow::Cow<'_, [u8]>> = Vec::new();
        for change in &request.changes {
            match &change.content {
                Some(Content::Bytes(kept)) => {
                    let bytes = kept.bytes();
                    hashes.push(crate::vault::content_hash(&bytes));
                    bodies.push(bytes);
                }
                // A shared vault has no folder: a note comes with its bytes, and an
                // attachment's are in the blob store already, by the sha256 its row
                // names (`storage::blobs`), before it is recorded.
                Some(Content::File(_)) | None => {}
            }
        }
        if hashes.is_empty() {
            return Ok(());
        }
        let client = self.db.client().await?;
        // No WAL flush of its own: the metadata transaction that names these bytes
        // commits after this one, and its flush makes all earlier WAL durable, this
        // commit's too. Lost in a crash before it, they were named by nothing. One
        // statement, its own transaction: `synchronous_commit` set for it alone
        // (`set_config(…, true)`), one round trip where BEGIN, SET LOCAL, INSERT and
        // COMMIT took four.
        let stmt = client
            .prepare_cached(
                "INSERT INTO contents (vault_id, content_hash, bytes)
                 SELECT $1, h, b
                 FROM unnest($2::text[], $3::bytea[]) AS t(h, b),
                      (SELECT set_config('synchronous_commit', 'off', true)) AS unflushed
                 ON CONFLICT (vault_id, content_hash) DO NOTHING",
            )
            .await
            .map_err(db_error)?;
        client
            .execute(&stmt, &[&self.vault, &hashes, &bodies])
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// The bytes of these content hashes (those the store has), for a cold start.
    pub fn bytes_of(&self, hashes: &[String]) -> Result<Vec<(String, Vec<u8>)>> {
        block_on(async {
            let client = self.db.client().await?;
            let rows = client
                .query(
                    "SELECT content_hash, bytes FROM contents
                     WHERE vault_id = $1 AND content_hash = ANY($2)",
                    &[&self.vault, &hashes],
                )
                .await
                .map_err(db_error)?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }
}

impl Revisions for PgRevisions {
    fn commit(&self, request: CommitRequest) -> mpsc::Receiver<Result<Written>> {
        let (tx, rx) = mpsc::channel();
        // Written now, not queued: the revision rows that follow name these bytes.
        let written = block_on(self.put(&request)).map(|()| Written {
            id: None,
            left_out: Vec::new(),
        });
        let _ = tx.send(written);
        rx
    }

    fn flush(&self, _timeout: Duration) {}

    fn stop(&self) {}

    fn status(&self) -> HistoryStatus {
        // Every recorded revision's bytes were stored before its row: nothing is behind.
        HistoryStatus {
            head_seq: i64::MAX,
            ..HistoryStatus::default()
        }
    }

    fn note_lost_revisions(&self, _count: u64) {}

    fn read_at(&self, _commit: &str, _path: &str) -> Result<Stored> {
        // No revision of a hosted vault names a commit (`Written::id` is `None`).
        Ok(Stored::NotRecorded)
    }

    fn content_at_seq(&self, seq: i64, _path: &str) -> Result<Stored> {
        block_on(async {
            let client = self.db.client().await?;
            let row = client
                .query_opt(
                    "SELECT r.content_hash, c.bytes FROM revisions r
                     LEFT JOIN contents c
                       ON c.vault_id = r.vault_id AND c.content_hash = r.content_hash
                     WHERE r.vault_id = $1 AND r.seq = $2",
                    &[&self.vault, &seq],
                )
                .await
                .map_err(db_error)?;
            Ok(match row {
                None => Stored::NotRecorded,
                Some(row) => match (
                    row.get::<_, Option<String>>(0),
                    row.get::<_, Option<Vec<u8>>>(1),
                ) {
                    (None, _) => Stored::Absent,
                    (Some(_), Some(bytes)) => Stored::Bytes(bytes),
                    (Some(hash), None) => {
                        Stored::Lost(format!("its bytes ({hash}) are gone from the database"))
                    }
                },
            })
        })
    }

    fn git_dir(&self) -> Option<&std::path::Path> {
        None
    }
}
