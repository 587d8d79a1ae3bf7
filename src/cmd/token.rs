//! `notevault token` and `notevault login-link`: personal tokens and sign-in links,
//! made in the vault's metadata store while a daemon may be serving it.

use crate::auth::pat;
use crate::auth::Permission;
use crate::cli::{TokenCommand, TokenStoreArgs};
use crate::clock::timestamp;
use crate::meta::Meta;
use crate::storage::metadata::Metadata;
use crate::storage::rows::{AuditEvent, AuditKind};

use super::offline_config;

/// `notevault login-link`: a one-time sign-in link for the daemon serving the vault (the
/// URL it keeps in the metadata store when it starts).
pub fn login_link(store: TokenStoreArgs) -> anyhow::Result<()> {
    let hosted = store.database.is_some();
    let public = super::hosted::public_url(store.config.clone())?;
    let meta = token_store(store)?;
    // Hosted instances sit behind a load balancer whose address only the operator knows.
    let url = match public {
        Some(url) => url,
        None if hosted => anyhow::bail!(
            "a hosted vault's link needs the instances' public URL: set NOTEVAULT_PUBLIC_URL (or public_url in the config file), e.g. https://notes.example.com"
        ),
        None => match meta.setting(crate::console::URL_SETTING)? {
            Some(url) => url,
            None => anyhow::bail!(
                "no daemon has served this vault yet: start `notevault serve` first"
            ),
        },
    };
    let link =
        crate::console::sign_in_link(&*meta, &url).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    println!("{link}");
    Ok(())
}

/// The metadata store of the vault the token command names (made if the daemon never ran
/// there). Only the store: a daemon may be serving the vault meanwhile. With
/// `--database`, the hosted vault's rows.
fn token_store(store: TokenStoreArgs) -> anyhow::Result<Box<dyn Metadata>> {
    if let Some(url) = &store.database {
        let Some(vault) = store.vault.as_ref().and_then(|v| v.to_str()) else {
            anyhow::bail!("with --database, name the hosted vault (its name or id)");
        };
        let (db, vault) = super::hosted::vault_of(url, vault)?;
        return Ok(Box::new(crate::hosted::meta::PgMeta::new(db, vault.id)));
    }
    let config = offline_config(store.vault, store.state_dir, store.config)?;
    let dir = config.state_dir_of_vault()?;
    crate::state::create_state_dir(&dir)
        .map_err(|e| anyhow::anyhow!("state dir {} is not writable: {e}", dir.display()))?;
    let meta = Meta::open(&dir.join("meta.sqlite"))
        .map_err(|e| anyhow::anyhow!("state dir {}: {}", dir.display(), e.message))?;
    Ok(Box::new(meta))
}

/// Append an audit row; a failure is a warning (the token was made or revoked).
fn audit(meta: &dyn Metadata, event: AuditEvent<'_>) {
    if let Err(e) = meta.append_audit(&event, &timestamp(chrono::Utc::now())) {
        eprintln!(
            "notevault: warning: cannot append to the audit log: {}",
            e.message
        );
    }
}

/// `notevault token create|list|revoke`.
pub fn token(command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create(args) => {
            let lifetime = args
                .expires_in
                .as_deref()
                .map(pat::parse_lifetime)
                .transpose()
                .map_err(anyhow::Error::msg)?;
            let meta = token_store(args.store)?;
            let scopes: Vec<Permission> = args
                .scopes
                .iter()
                .filter_map(|s| Permission::from_name(s))
                .collect();
            let (token, row) = meta
                .create_pat(&args.name, &scopes, lifetime, chrono::Utc::now())
                .map_err(|e| anyhow::anyhow!("{}", e.message))?;
            audit(
                &*meta,
                AuditEvent::new(AuditKind::TokenCreated, "cli").subject(&row.prefix),
            );
            println!("{token}");
            Ok(())
        }
        TokenCommand::List(store) => {
            let meta = token_store(store)?;
            println!("NAME\tPREFIX\tSCOPES\tCREATED\tEXPIRES\tLAST USED");
            for p in meta.pats()? {
                let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
                let scopes = if p.scopes.is_empty() {
                    "read".to_string()
                } else {
                    p.scopes.replace(' ', ",")
                };
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    p.name,
                    p.prefix,
                    scopes,
                    p.created_at,
                    or_dash(p.expires_at),
                    or_dash(p.last_used_at)
                );
            }
            Ok(())
        }
        TokenCommand::Revoke(args) => {
            let meta = token_store(args.store)?;
            let Some(prefix) = meta
                .pats()?
                .into_iter()
                .find(|p| p.name == args.token || p.prefix == args.token)
                .map(|p| p.prefix)
            else {
                anyhow::bail!("no token named or prefixed {:?}", args.token);
            };
            meta.revoke_pat(&prefix)?;
            audit(
                &*meta,
                AuditEvent::new(AuditKind::TokenRevoked, "cli").subject(&prefix),
            );
            eprintln!("notevault: revoked {}", args.token);
            Ok(())
        }
    }
}
