//! The blob collector: removes what the blob store holds that no row references (the
//! bytes of a deleted vault, of an upload whose write failed after its bytes landed) and
//! what cut-off uploads left (a staged result, a multipart upload's parts), once older
//! than `blob_grace_seconds`. History's bytes stay: a blob named by an `attachment_changes`
//! row is referenced. One instance collects at a time (a session advisory lock).
//!
//! The grace is what makes it safe beside uploads under way: an upload's bytes land before
//! its row, and renew the object's time when the same bytes land again; each object is
//! checked again just before it goes ([`BlobStore::sweep`]).
//!
//! Export archives (`exports/`) are named by no row: each goes once older than
//! [`EXPORT_KEEP_SECS`] (its link's life and a margin for a download begun just before
//! the link expired), whatever `blob_grace_seconds` says.

use std::collections::HashSet;
use std::time::Duration;

use crate::error::Result;
use crate::storage::blobs::{BlobStore, StoredKind, EXPORT_KEEP_SECS};

use super::{db_error, Database};

/// Serializes collectors across instances (`pg_try_advisory_lock`).
const COLLECT_LOCK: i64 = 0x6e76_626c_6f62_6763; // "nvblobgc"

/// What one pass removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Collected {
    /// Blobs no row referenced.
    pub blobs: usize,
    /// Staged uploads and aborted multipart uploads.
    pub uploads: usize,
    /// Export archives past their keeping.
    pub exports: usize,
}

/// One pass over every vault in `blobs`; `None` when another instance is collecting.
pub async fn collect(
    db: &Database,
    blobs: &dyn BlobStore,
    grace: Duration,
) -> Result<Option<Collected>> {
    let client = db.client().await?;
    let locked: bool = client
        .query_one("SELECT pg_try_advisory_lock($1)", &[&COLLECT_LOCK])
        .await
        .map_err(db_error)?
        .get(0);
    if !locked {
        return Ok(None);
    }
    let pass = sweep_all(&client, blobs, grace).await;
    // A connection goes back to the pool: its lock must not go with it. (Should the
    // unlock fail, the connection is broken, and the lock went with its session.)
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&COLLECT_LOCK])
        .await;
    pass.map(Some)
}

async fn sweep_all(
    client: &tokio_postgres::Client,
    blobs: &dyn BlobStore,
    grace: Duration,
) -> Result<Collected> {
    let now = chrono::Utc::now();
    let before = now - chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::days(3650));
    let exports_before = now - chrono::Duration::seconds(EXPORT_KEEP_SECS as i64);
    let mut collected = Collected::default();
    for vault in blobs.vaults().await? {
        // Listed first, rows read after: a blob whose row commits meanwhile is seen
        // referenced, and one listed before its bytes landed again is renewed.
        let stored = blobs.inventory(&vault).await?;
        if stored.is_empty() {
            continue;
        }
        let referenced = referenced(client, &vault).await?;
        for item in &stored {
            let keep = match item.kind {
                // A staged object a pending store PUT names waits for its settling.
                StoredKind::Blob | StoredKind::Staged => referenced.contains(&item.name),
                StoredKind::Multipart | StoredKind::Export => false,
            };
            let before = match item.kind {
                StoredKind::Export => exports_before,
                _ => before,
            };
            if keep || item.modified >= before {
                continue;
            }
            if blobs.sweep(&vault, item, before).await? {
                match item.kind {
                    StoredKind::Blob => collected.blobs += 1,
                    StoredKind::Export => collected.exports += 1,
                    _ => collected.uploads += 1,
                }
            }
        }
    }
    Ok(collected)
}

/// The sha256 of every blob the rows of `vault` name, and the staged objects of its
/// pending store PUTs (none: a vault no row names, or a folder in the store that is not
/// a vault id).
async fn referenced(client: &tokio_postgres::Client, vault: &str) -> Result<HashSet<String>> {
    let Ok(id) = uuid::Uuid::parse_str(vault) else {
        return Ok(HashSet::new());
    };
    let rows = client
        .query(
            "SELECT sha256 FROM attachments WHERE vault_id = $1
             UNION SELECT sha256 FROM attachment_changes
                   WHERE vault_id = $1 AND sha256 IS NOT NULL
             UNION SELECT 'presigned-' || id FROM presigned_uploads WHERE vault_id = $1",
            &[&id],
        )
        .await
        .map_err(db_error)?;
    Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
}

/// How often an instance collects: a quarter of the grace, between a second and an hour.
pub fn every(grace: Duration) -> Duration {
    (grace / 4).clamp(Duration::from_secs(1), Duration::from_secs(3600))
}
