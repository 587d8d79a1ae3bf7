//! `notevault db migrate` and `notevault vault create|list|delete`: hosted mode's
//! database and its vault registry, from the command line.

use std::path::PathBuf;

use crate::cli::{DatabaseArgs, DbCommand, VaultCommand};
use crate::config::{Config, Layer, Secret};
use crate::hosted::{registry, schema, Database, Options};

use super::config_file;

/// The database the flags, the environment or the config file name.
#[allow(
    clippy::disallowed_methods,
    reason = "the CLI hands the environment to Config::load"
)]
pub(super) fn database(args: DatabaseArgs) -> anyhow::Result<Database> {
    let flags = Layer {
        database_url: args.database.map(Secret::new),
        ..Layer::default()
    };
    let file: Option<PathBuf> = config_file(args.config);
    let config = Config::load(file.as_deref(), |k| std::env::var(k).ok(), flags)
        .map_err(anyhow::Error::msg)?;
    let Some(url) = config.database_url else {
        anyhow::bail!(
            "no database: give --database postgres://USER:PASSWORD@HOST:PORT/DATABASE, or set NOTEVAULT_DATABASE_URL (or database_url in the config file)"
        );
    };
    Database::open(url.expose(), Options::default()).map_err(message)
}

/// The public base URL the config file or the environment names (`public_url`).
#[allow(
    clippy::disallowed_methods,
    reason = "the CLI hands the environment to Config::load"
)]
pub(super) fn public_url(config: Option<PathBuf>) -> anyhow::Result<Option<String>> {
    let file: Option<PathBuf> = config_file(config);
    let config = Config::load(file.as_deref(), |k| std::env::var(k).ok(), Layer::default())
        .map_err(anyhow::Error::msg)?;
    Ok(config.public_url)
}

/// The blob store the config file or the environment names (`blob_store`), if any.
#[allow(
    clippy::disallowed_methods,
    reason = "the CLI hands the environment to Config::load"
)]
pub(super) fn blobs(
    config: Option<PathBuf>,
) -> anyhow::Result<Option<std::sync::Arc<dyn crate::storage::blobs::BlobStore>>> {
    let file: Option<PathBuf> = config_file(config);
    let config = Config::load(file.as_deref(), |k| std::env::var(k).ok(), Layer::default())
        .map_err(anyhow::Error::msg)?;
    crate::daemon::hosted::blobs(&config).map_err(message)
}

/// The database at `url` and its vault `name_or_id`, for a one-shot command.
pub fn vault_of(url: &str, name_or_id: &str) -> anyhow::Result<(Database, registry::Vault)> {
    let db = Database::open(url, Options::default()).map_err(message)?;
    let vault = crate::hosted::block_on(async {
        schema::check(&db).await?;
        registry::find(&db, name_or_id).await
    })
    .map_err(message)?;
    Ok((db, vault))
}

pub(super) fn message(e: crate::error::Error) -> anyhow::Error {
    anyhow::anyhow!("{}", e.message)
}

/// Run `work` on a small runtime of its own (these commands are one-shot).
fn block_on<T>(work: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(work)
}

/// `notevault db migrate`.
pub fn db(command: DbCommand) -> anyhow::Result<()> {
    match command {
        DbCommand::Migrate(args) => {
            let db = database(args)?;
            let done = block_on(async { schema::migrate(&db).await.map_err(message) })?;
            if done.from == done.to {
                println!("database schema is at version {} already", done.to);
            } else {
                println!(
                    "database schema migrated from version {} to {}",
                    done.from, done.to
                );
            }
            Ok(())
        }
    }
}

/// `notevault vault create|list|delete`: each refuses a database whose schema is not
/// this build's.
pub fn vault(command: VaultCommand) -> anyhow::Result<()> {
    match command {
        VaultCommand::Create(args) => {
            let db = database(args.database)?;
            let vault = block_on(async {
                schema::check(&db).await.map_err(message)?;
                registry::create(&db, &args.name, args.org.as_deref())
                    .await
                    .map_err(message)
            })?;
            println!("{}", vault.id);
            Ok(())
        }
        VaultCommand::List(args) => {
            let db = database(args.database)?;
            let vaults = block_on(async {
                schema::check(&db).await.map_err(message)?;
                registry::list(&db).await.map_err(message)
            })?;
            let when = |v: &registry::Vault| crate::clock::timestamp(v.created_at);
            let state = |v: &registry::Vault| if v.deleting { "deleting" } else { "active" };
            if args.json {
                let list: Vec<serde_json::Value> = vaults
                    .iter()
                    .map(|v| {
                        serde_json::json!({
                            "id": v.id.to_string(),
                            "name": v.name,
                            "org_id": v.org_id,
                            "created_at": when(v),
                            "state": state(v),
                        })
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(list));
                return Ok(());
            }
            println!("ID\tNAME\tORG\tCREATED\tSTATE");
            for v in &vaults {
                let org = v.org_id.as_deref().unwrap_or("-");
                println!("{}\t{}\t{org}\t{}\t{}", v.id, v.name, when(v), state(v));
            }
            Ok(())
        }
        VaultCommand::Delete(args) => {
            let db = database(args.database)?;
            let vault = block_on(async {
                schema::check(&db).await.map_err(message)?;
                registry::delete(&db, &args.vault).await.map_err(message)
            })?;
            println!(
                "deleted vault {} ({}) and all its rows",
                vault.name, vault.id
            );
            Ok(())
        }
    }
}

/// `notevault serve --database URL`: hosted mode. Every vault of the database is served
/// to the credentials that name it; this instance keeps only caches (each vault's
/// catalog and search index, in `--state-dir`, else a temporary folder removed at the
/// end) and a lobby (an empty vault that requests naming no vault reach).
pub async fn serve(
    config: Config,
    (listener, metrics): (tokio::net::TcpListener, Option<tokio::net::TcpListener>),
    migrate: bool,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    use crate::hosted::block_on as on_db;
    // Each vault's search index builds a segment per batch of writes: its writer thread
    // reuses its large blocks, not faulted in again each time (`memory::keep_here`).
    crate::memory::keep_large_blocks();
    if let Some(i) = config
        .static_tokens
        .iter()
        .position(|t| t.vault_id.is_none())
    {
        anyhow::bail!("static_tokens[{i}] names no vault_id: in hosted mode each static token is for one vault (`notevault vault list` shows their ids)");
    }
    let url = config
        .database_url
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no database is configured"))?;
    // The stores' pool (queries, and each vault's fence while a change is recorded),
    // and one for the locks that writes waiting on their Idempotency-Key hold.
    let pool = |max_connections| Options {
        max_connections,
        ..Options::default()
    };
    let db = Database::open(url.expose(), pool(32)).map_err(message)?;
    let keys = Database::open(
        url.expose(),
        Options {
            name: "keys",
            ..pool(32)
        },
    )
    .map_err(message)?;
    if migrate {
        let done = on_db(schema::migrate(&db)).map_err(message)?;
        if done.from != done.to {
            tracing::info!(from = done.from, to = done.to, "database schema migrated");
        }
    }
    on_db(schema::check(&db)).map_err(message)?;
    let (cache, _removed_at_end) = match &config.state_dir {
        Some(dir) => (dir.clone(), None),
        None => {
            let temp = tempfile::Builder::new()
                .prefix("notevault-hosted-")
                .tempdir()?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    // Each vault's cache is checked as a folder whose paths must stay inside it, by
    // their canonical form: a relative or symlinked --state-dir would leave it.
    crate::state::create_state_dir(&cache)?;
    let cache = cache
        .canonicalize()
        .map_err(|e| anyhow::anyhow!("cache folder {} is not usable: {e}", cache.display()))?;
    let opened = config.clone();
    let hosted = tokio::task::spawn_blocking(move || {
        crate::daemon::hosted::Hosted::open(&opened, db, keys, &cache)
    })
    .await??;
    let addr = listener.local_addr()?;
    {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "notevault: serving the vaults of the database on {}://{addr}",
            config.scheme()
        );
    }
    tracing::info!(%addr, "serving hosted mode");
    let served = crate::http::run_with_metrics(
        listener,
        metrics,
        crate::vaults::Vaults::from(hosted.lobby.state.clone()),
        Some(hosted.vaults.clone()),
        shutdown,
    )
    .await;
    tokio::task::spawn_blocking(move || hosted.stop()).await?;
    served?;
    Ok(())
}
