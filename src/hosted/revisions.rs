//! Hosted mode's revision store: each revision's bytes in `contents` (by content hash,
//! once per vault), read back through the revision row at its seq. A "commit" hands the
//! bytes to the metadata transaction that writes the revision rows naming them
//! ([`Staged`]), so a recorded revision always has its bytes, and they cost no round trip
//! of their own.

use std::sync::{mpsc, Arc};
use std::time::Duration;

use parking_lot::Mutex;
use uuid::Uuid;

use crate::error::Result;
use crate::storage::{CommitRequest, Content, HistoryStatus, Revisions, Stored, Written};
use crate::vault::packed::Packed;

use super::{block_on, db_error, Database};

/// Note bytes committed and not yet written: the content hashes and the bytes, in
/// order. Shared by a vault's revision store, which stages them, and its metadata store,
/// whose next transaction writing revision rows takes them and inserts them first
/// (`meta::PgMeta::record_settled`). A vault records one change at a time, with one
/// commit, so what is staged is what that transaction names: a commit replaces what a
/// change that failed before its rows left. Migration 2 dropped the foreign keys to
/// `contents`, so a metadata store that does not share its revision store's `Staged`
/// writes rows whose bytes read back lost, without an error: build both with one.
#[derive(Default)]
pub struct Staged(Mutex<(Vec<String>, Vec<Packed>)>);

impl Staged {
    /// Everything staged, taken out: the content hashes and the bytes (shared, not
    /// copied), in order.
    pub fn take(&self) -> (Vec<String>, Vec<Packed>) {
        std::mem::take(&mut *self.0.lock())
    }
}

pub struct PgRevisions {
    db: Database,
    vault: Uuid,
    staged: Arc<Staged>,
}

impl PgRevisions {
    /// The revisions of `vault`, staging committed bytes in `staged` (its metadata
    /// store's).
    pub fn new(db: Database, vault: Uuid, staged: Arc<Staged>) -> Self {
        Self { db, vault, staged }
    }

    /// The bytes of `request`'s notes, staged for the transaction that names them.
    fn stage(&self, request: &CommitRequest) {
        let mut staged = self.staged.0.lock();
        *staged = Default::default();
        for change in &request.changes {
            match &change.content {
                Some(Content::Bytes(kept)) => {
                    staged.0.push(crate::vault::content_hash(&kept.bytes()));
                    staged.1.push(kept.clone());
                }
                // A shared vault has no folder: a note comes with its bytes, and an
                // attachment's are in the blob store already, by the sha256 its row
                // names (`storage::blobs`), before it is recorded.
                Some(Content::File(_)) | None => {}
            }
        }
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
        // Answered at once: the bytes are durable with the revision rows that follow and
        // name them (a failure to write them fails that transaction, the whole change).
        self.stage(&request);
        let _ = tx.send(Ok(Written {
            id: None,
            left_out: Vec::new(),
        }));
        rx
    }

    fn flush(&self, _timeout: Duration) {}

    fn stop(&self) {}

    fn status(&self) -> HistoryStatus {
        // Every recorded revision's bytes are stored with its row: nothing is behind.
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

    fn content_at_seq(&self, seq: i64, path: &str) -> Result<Stored> {
        let mut one = self.contents_at_seqs(&[(seq, path)])?;
        Ok(one.pop().unwrap_or(Stored::NotRecorded))
    }

    fn contents_at_seqs(&self, at: &[(i64, &str)]) -> Result<Vec<Stored>> {
        if at.is_empty() {
            return Ok(Vec::new());
        }
        let seqs: Vec<i64> = at.iter().map(|(seq, _)| *seq).collect();
        let rows = block_on(async {
            let client = self.db.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT r.seq, r.content_hash, c.bytes FROM revisions r
                     LEFT JOIN contents c
                       ON c.vault_id = r.vault_id AND c.content_hash = r.content_hash
                     WHERE r.vault_id = $1 AND r.seq = ANY($2)",
                )
                .await
                .map_err(db_error)?;
            client
                .query(&stmt, &[&self.vault, &seqs])
                .await
                .map_err(db_error)
        })?;
        // One revision per seq (the table's key); a seq asked twice is answered twice.
        let by_seq: std::collections::HashMap<i64, Stored> = rows
            .into_iter()
            .map(|row| {
                let stored = match (
                    row.get::<_, Option<String>>(1),
                    row.get::<_, Option<Vec<u8>>>(2),
                ) {
                    (None, _) => Stored::Absent,
                    (Some(_), Some(bytes)) => Stored::Bytes(bytes),
                    (Some(hash), None) => {
                        Stored::Lost(format!("its bytes ({hash}) are gone from the database"))
                    }
                };
                (row.get::<_, i64>(0), stored)
            })
            .collect();
        Ok(seqs
            .iter()
            .map(|seq| by_seq.get(seq).cloned().unwrap_or(Stored::NotRecorded))
            .collect())
    }

    fn git_dir(&self) -> Option<&std::path::Path> {
        None
    }
}
