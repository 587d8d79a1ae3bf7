//! The pending PUT links of the blob store (`storage::presign::PendingUploads`) as rows
//! of `presigned_uploads`: written when a link is made, removed once its object is
//! recorded, refused, or its link expired unused.

use uuid::Uuid;

use super::{block_on, db_error, Database};
use crate::error::{Error, Result};
use crate::storage::presign::{Pending, PendingUploads};

pub struct PgPendingUploads {
    db: Database,
}

impl PgPendingUploads {
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

fn vault_uuid(vault: &str) -> Result<Uuid> {
    Uuid::parse_str(vault).map_err(|_| Error::internal(format!("{vault:?} is not a vault id")))
}

impl PendingUploads for PgPendingUploads {
    fn add(&self, vault: &str, p: &Pending) -> Result<()> {
        let vault = vault_uuid(vault)?;
        let size = i64::try_from(p.size).map_err(Error::internal_cause)?;
        block_on(async {
            let client = self.db.client().await?;
            client
                .execute(
                    "INSERT INTO presigned_uploads
                     (vault_id, id, path, sha256, size, content_type, agent_id, expires_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    &[
                        &vault,
                        &p.id,
                        &p.path,
                        &p.sha256,
                        &size,
                        &p.content_type,
                        &p.agent_id,
                        &p.expires_at,
                    ],
                )
                .await
                .map_err(db_error)
                .map(drop)
        })
    }

    fn list(&self, vault: &str) -> Result<Vec<Pending>> {
        let vault = vault_uuid(vault)?;
        let rows = block_on(async {
            let client = self.db.client().await?;
            client
                .query(
                    "SELECT id, path, sha256, size, content_type, agent_id, expires_at
                     FROM presigned_uploads WHERE vault_id = $1 ORDER BY id",
                    &[&vault],
                )
                .await
                .map_err(db_error)
        })?;
        Ok(rows
            .iter()
            .map(|r| Pending {
                id: r.get(0),
                path: r.get(1),
                sha256: r.get(2),
                size: r.get::<_, i64>(3).max(0) as u64,
                content_type: r.get(4),
                agent_id: r.get(5),
                expires_at: r.get(6),
            })
            .collect())
    }

    fn remove(&self, vault: &str, id: &str) -> Result<()> {
        let vault = vault_uuid(vault)?;
        block_on(async {
            let client = self.db.client().await?;
            client
                .execute(
                    "DELETE FROM presigned_uploads WHERE vault_id = $1 AND id = $2",
                    &[&vault, &id],
                )
                .await
                .map_err(db_error)
                .map(drop)
        })
    }
}
