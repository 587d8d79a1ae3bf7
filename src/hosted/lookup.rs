//! What a serving instance asks the database across vaults: which vault a credential
//! belongs to, whether a vault is still served, and the settings every instance must
//! agree on (made once, by whichever instance asks first).

use uuid::Uuid;

use crate::error::Result;

use super::registry::Vault;
use super::{db_error, Database};

/// The vault `id`, unless there is none or it is being deleted, and its committed seq
/// (read together: a request learns both in one round trip).
pub async fn served(db: &Database, id: &str) -> Result<Option<(Vault, i64)>> {
    let Ok(id) = Uuid::parse_str(id) else {
        return Ok(None);
    };
    let client = db.client().await?;
    let stmt = client
        .prepare_cached(
            "SELECT v.id, v.name, v.org_id, v.created_at, v.deleting, c.committed_seq
             FROM vaults v LEFT JOIN vault_counters c ON c.vault_id = v.id WHERE v.id = $1",
        )
        .await
        .map_err(db_error)?;
    let row = client.query_opt(&stmt, &[&id]).await.map_err(db_error)?;
    Ok(row
        .map(|r| {
            let vault = Vault {
                id: r.get("id"),
                name: r.get("name"),
                org_id: r.get("org_id"),
                created_at: r.get("created_at"),
                deleting: r.get("deleting"),
            };
            (vault, r.get::<_, Option<i64>>("committed_seq").unwrap_or(0))
        })
        .filter(|(v, _)| !v.deleting))
}

async fn vault_where(db: &Database, sql: &str, key: &str) -> Result<Option<String>> {
    let client = db.client().await?;
    let row = client.query_opt(sql, &[&key]).await.map_err(db_error)?;
    Ok(row.map(|r| r.get::<_, Uuid>(0).to_string()))
}

/// The vault of the personal access token with this public prefix.
pub async fn vault_of_token(db: &Database, prefix: &str) -> Result<Option<String>> {
    vault_where(
        db,
        "SELECT vault_id FROM personal_tokens WHERE prefix = $1",
        prefix,
    )
    .await
}

/// The vault of the console session with this digest.
pub async fn vault_of_session(db: &Database, digest: &str) -> Result<Option<String>> {
    vault_where(
        db,
        "SELECT vault_id FROM console_sessions WHERE digest = $1",
        digest,
    )
    .await
}

/// The vault of the console sign-in code with this digest.
pub async fn vault_of_sign_in_code(db: &Database, digest: &str) -> Result<Option<String>> {
    vault_where(
        db,
        "SELECT vault_id FROM sign_in_codes WHERE digest = $1",
        digest,
    )
    .await
}

/// The id and `org_id` of the served vault of the sign-in through the identity provider
/// whose `state` has this digest (its callback may reach any instance).
pub async fn vault_of_idp_sign_in(
    db: &Database,
    digest: &str,
) -> Result<Option<(Uuid, Option<String>)>> {
    let client = db.client().await?;
    let row = client
        .query_opt(
            "SELECT v.id, v.org_id FROM idp_sign_ins s JOIN vaults v ON v.id = s.vault_id
             WHERE s.state_digest = $1 AND NOT v.deleting",
            &[&digest],
        )
        .await
        .map_err(db_error)?;
    Ok(row.map(|r| (r.get(0), r.get(1))))
}

/// The id and `org_id` of the served vault a person names: by its id, or by its name.
pub async fn vault_named(
    db: &Database,
    name_or_id: &str,
) -> Result<Option<(Uuid, Option<String>)>> {
    let client = db.client().await?;
    let row = match Uuid::parse_str(name_or_id) {
        Ok(id) => {
            client
                .query_opt(
                    "SELECT id, org_id FROM vaults WHERE id = $1 AND NOT deleting",
                    &[&id],
                )
                .await
        }
        Err(_) => {
            client
                .query_opt(
                    "SELECT id, org_id FROM vaults WHERE name = $1 AND NOT deleting",
                    &[&name_or_id],
                )
                .await
        }
    }
    .map_err(db_error)?;
    Ok(row.map(|r| (r.get(0), r.get(1))))
}

/// The vaults of an organization, oldest first.
pub async fn vaults_of_org(db: &Database, org_id: &str) -> Result<Vec<String>> {
    let client = db.client().await?;
    let rows = client
        .query(
            "SELECT id FROM vaults WHERE org_id = $1 AND NOT deleting ORDER BY created_at, id",
            &[&org_id],
        )
        .await
        .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|r| r.get::<_, Uuid>(0).to_string())
        .collect())
}

/// One setting of a vault.
const READ_SETTING: &str = "SELECT value FROM settings WHERE vault_id = $1 AND key = $2";

/// The setting `key` of a vault, `None` when it has none.
pub async fn setting(db: &Database, vault: Uuid, key: &str) -> Result<Option<String>> {
    let client = db.client().await?;
    let row = client
        .query_opt(READ_SETTING, &[&vault, &key])
        .await
        .map_err(db_error)?;
    Ok(row.map(|r| r.get(0)))
}

/// The setting `key` of a vault; when it has none, `made` becomes it. Two instances
/// asking at once agree on one value. Read first: a vault opens on a read-only database
/// (a replica promoted late, a primary in recovery), which refuses even an insert that
/// would do nothing.
pub async fn setting_or(db: &Database, vault: Uuid, key: &str, made: &str) -> Result<String> {
    let client = db.client().await?;
    if let Some(row) = client
        .query_opt(READ_SETTING, &[&vault, &key])
        .await
        .map_err(db_error)?
    {
        return Ok(row.get(0));
    }
    client
        .execute(
            "INSERT INTO settings (vault_id, key, value) VALUES ($1, $2, $3)
             ON CONFLICT (vault_id, key) DO NOTHING",
            &[&vault, &key, &made],
        )
        .await
        .map_err(db_error)?;
    let row = client
        .query_one(READ_SETTING, &[&vault, &key])
        .await
        .map_err(db_error)?;
    Ok(row.get(0))
}

/// Writes waiting for review in `vaults` (for the metrics: the vaults open on an
/// instance, so that a scrape reads their index, never the whole table).
pub async fn pending_writes(db: &Database, vaults: &[Uuid]) -> Result<i64> {
    let client = db.client().await?;
    let row = client
        .query_one(
            "SELECT COUNT(*) FROM pending_writes WHERE vault_id = ANY($1) AND status = 'pending'",
            &[&vaults],
        )
        .await
        .map_err(db_error)?;
    Ok(row.get(0))
}
