//! Hosted mode's vault registry: the vaults a database holds (id, unique name, optional
//! `org_id`), created, listed and deleted with all their rows.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::{Error, Reason, Result};

use super::{db_error, is_unique_violation, Database};

/// The longest vault name, in characters.
pub const MAX_NAME_CHARS: usize = 100;

/// One vault of the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vault {
    pub id: Uuid,
    pub name: String,
    pub org_id: Option<String>,
    pub created_at: DateTime<Utc>,
    /// Its purge has begun: it is served no more.
    pub deleting: bool,
}

impl Vault {
    fn from_row(row: &tokio_postgres::Row) -> Self {
        Self {
            id: row.get("id"),
            name: row.get("name"),
            org_id: row.get("org_id"),
            created_at: row.get("created_at"),
            deleting: row.get("deleting"),
        }
    }
}

const COLUMNS: &str = "id, name, org_id, created_at, deleting";

/// A name a person can type and tell from an id: 1 to 100 characters, no control
/// character, no space at either end, and not itself a UUID (so `NAME|ID` is never
/// ambiguous).
pub fn check_name(name: &str) -> Result<()> {
    let bad = |why: &str| Err(Error::invalid_field("name", why));
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_NAME_CHARS {
        return bad("a vault name has 1 to 100 characters");
    }
    if name.chars().any(char::is_control) {
        return bad("a vault name has no control character");
    }
    if name.trim() != name {
        return bad("a vault name neither starts nor ends with a space");
    }
    if Uuid::parse_str(name).is_ok() {
        return bad("a vault name is not a UUID (ids are)");
    }
    Ok(())
}

/// Create a vault named `name` (unique) in `org_id`, with its seq counter at 0.
pub async fn create(db: &Database, name: &str, org_id: Option<&str>) -> Result<Vault> {
    check_name(name)?;
    if let Some(org) = org_id {
        if org.is_empty() || org.chars().any(char::is_control) {
            return Err(Error::invalid_field(
                "org_id",
                "an org id is not empty and has no control character",
            ));
        }
    }
    let mut client = db.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    let row = tx
        .query_one(
            &format!(
                "INSERT INTO vaults (id, name, org_id) VALUES ($1, $2, $3) RETURNING {COLUMNS}"
            ),
            &[&Uuid::now_v7(), &name, &org_id],
        )
        .await
        .map_err(|e| {
            if is_unique_violation(&e) {
                Error::new(
                    Reason::NAME_COLLISION,
                    format!("a vault named `{name}` exists already"),
                )
                .with_meta("name", name)
            } else {
                db_error(e)
            }
        })?;
    let vault = Vault::from_row(&row);
    tx.execute(
        "INSERT INTO vault_counters (vault_id) VALUES ($1)",
        &[&vault.id],
    )
    .await
    .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(vault)
}

/// Every vault, by name.
pub async fn list(db: &Database) -> Result<Vec<Vault>> {
    let client = db.client().await?;
    let rows = client
        .query(&format!("SELECT {COLUMNS} FROM vaults ORDER BY name"), &[])
        .await
        .map_err(db_error)?;
    Ok(rows.iter().map(Vault::from_row).collect())
}

/// The vault `name_or_id` names: its id when it parses as a UUID, else its name.
pub async fn find(db: &Database, name_or_id: &str) -> Result<Vault> {
    let client = db.client().await?;
    let row = match Uuid::parse_str(name_or_id) {
        Ok(id) => client
            .query_opt(
                &format!("SELECT {COLUMNS} FROM vaults WHERE id = $1"),
                &[&id],
            )
            .await
            .map_err(db_error)?,
        Err(_) => client
            .query_opt(
                &format!("SELECT {COLUMNS} FROM vaults WHERE name = $1"),
                &[&name_or_id],
            )
            .await
            .map_err(db_error)?,
    };
    row.map(|r| Vault::from_row(&r)).ok_or_else(|| {
        Error::invalid_field(
            "vault",
            format!("no vault named `{name_or_id}` or with that id"),
        )
    })
}

/// Delete a vault with the purge's semantics: first flagged `deleting` (committed, so
/// every instance stops serving it), then its row and, through the foreign keys' cascade,
/// every row of it in one transaction. A delete interrupted between the two leaves the
/// flag, and running it again finishes.
pub async fn delete(db: &Database, name_or_id: &str) -> Result<Vault> {
    let vault = find(db, name_or_id).await?;
    let mut client = db.client().await?;
    client
        .execute(
            "UPDATE vaults SET deleting = true WHERE id = $1",
            &[&vault.id],
        )
        .await
        .map_err(db_error)?;
    let tx = client.transaction().await.map_err(db_error)?;
    tx.execute("DELETE FROM vaults WHERE id = $1", &[&vault.id])
        .await
        .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(vault)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_typed_by_a_person_and_never_an_id() {
        for good in ["team", "Team Notes", "équipe-1", &"x".repeat(100)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        let id = Uuid::now_v7().to_string();
        for bad in ["", " a", "a ", "a\nb", &"x".repeat(101), &id] {
            let err = check_name(bad).unwrap_err();
            assert_eq!(err.reason, Reason::VALIDATION_FAILED, "{bad:?}");
        }
    }
}
