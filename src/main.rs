//! The `notevault` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use notevault::auth::pat;
use notevault::cli::{
    Cli, Command, DeviceCommand, ReindexArgs, ServeArgs, TokenCommand, TokenStoreArgs,
};
use notevault::clock::timestamp;
use notevault::config::{Config, Layer};
use notevault::meta::tokens::PatRow;
use notevault::meta::Meta;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Openapi => {
            println!("{}", notevault::api::openapi::document_json());
            ExitCode::SUCCESS
        }
        Command::Serve(args) => exit(serve(args)),
        Command::Reindex(args) => exit(reindex(args)),
        Command::Token(command) => exit(token(command)),
        Command::Device(command) => exit(device(command)),
    }
}

/// The reference device client; secrets come from flags or the environment (clap) and
/// are never printed, but the recovery key `init --recovery` makes, once.
fn device(command: DeviceCommand) -> anyhow::Result<()> {
    use notevault::device;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match command {
            DeviceCommand::Init(a) => {
                let d = a.device;
                let recovery = device::init(
                    &d.dir,
                    &a.server,
                    &a.device_id,
                    d.token,
                    d.passphrase.as_deref(),
                    a.recovery,
                )
                .await?;
                if let Some(key) = recovery {
                    println!("recovery key (shown once; keep it offline): {key}");
                }
                eprintln!("notevault: {} is a device of {}", d.dir.display(), a.server);
            }
            DeviceCommand::Pull(d) => {
                let n = device::pull(&d.dir, d.token, d.passphrase.as_deref()).await?;
                eprintln!("notevault: pulled {n} ops");
            }
            DeviceCommand::Push(d) => {
                let (applied, conflicts) =
                    device::push(&d.dir, d.token, d.passphrase.as_deref()).await?;
                eprintln!(
                    "notevault: pushed {applied} changes, {conflicts} kept as conflicted copies"
                );
            }
            DeviceCommand::Passphrase(a) => {
                let d = a.device;
                device::passphrase(
                    &d.dir,
                    d.token,
                    d.passphrase.as_deref(),
                    a.recovery_key.as_deref(),
                    &a.new_passphrase,
                )
                .await?;
                eprintln!("notevault: the data key is wrapped under the new passphrase");
            }
        }
        Ok(())
    })
}

fn exit(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("notevault: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn logs() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NOTEVAULT_LOG")
                .unwrap_or_else(|_| "notevault=info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// glibc gives every thread that allocates its own arena (up to 8 per core), each keeping
/// freed memory: with a few dozen request threads that multiplies the daemon's resident
/// memory. Two arenas are enough for two cores' worth of contention.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it is called before any other
    // thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[allow(
    clippy::disallowed_methods,
    reason = "the CLI hands the environment to Config::load"
)]
fn config_file(given: Option<PathBuf>) -> Option<PathBuf> {
    given.or_else(|| std::env::var_os("NOTEVAULT_CONFIG").map(PathBuf::from))
}

/// Drop the index, open the vault without watching (which rebuilds it from the folder),
/// wait for the index and the history writer, and say what was done.
#[allow(
    clippy::disallowed_methods,
    reason = "the CLI hands the environment to Config::load"
)]
fn reindex(args: ReindexArgs) -> anyhow::Result<()> {
    logs();
    let flags = Layer {
        vault: args.vault,
        state_dir: args.state_dir,
        watch: Some(false),
        ..Layer::default()
    };
    let config = Config::load(
        config_file(args.config).as_deref(),
        |k| std::env::var(k).ok(),
        flags,
    )
    .map_err(anyhow::Error::msg)?;
    let started = std::time::Instant::now();
    notevault::index::SearchIndex::drop_index(&config.state_dir_of_vault()?)?;
    let daemon = notevault::daemon::open(config)?;
    let state = daemon.state.clone();
    let opened = started.elapsed();
    if !state
        .index
        .wait_for_blocking(state.committed_seq(), std::time::Duration::from_secs(3600))
    {
        anyhow::bail!("the index did not finish within an hour");
    }
    let indexed = started.elapsed();
    state.index.shutdown();
    let index = state.index.state();
    if let Some(e) = index.last_error {
        anyhow::bail!("indexing failed: {e}");
    }
    state.history.flush(std::time::Duration::from_secs(3600));
    let notes = index.synced_notes.unwrap_or(0);
    let secs = indexed.as_secs_f64();
    println!(
        "indexed {notes} notes of {} in {:.0} ms ({:.0} notes/s; scan {:.0} ms, index {} ms)",
        state.root().display(),
        indexed.as_secs_f64() * 1000.0,
        notes as f64 / secs.max(1e-9),
        opened.as_secs_f64() * 1000.0,
        index.sync_ms.unwrap_or(0)
    );
    // The index and the history are written and closed; freeing 44k notes one by one
    // would only delay the exit (~0.1 s on the corpus). The system takes the memory back.
    std::mem::forget(state);
    std::mem::forget(daemon);
    Ok(())
}

#[allow(
    clippy::disallowed_methods,
    reason = "the CLI hands the environment to Config::load"
)]
fn serve(args: ServeArgs) -> anyhow::Result<()> {
    logs();
    let file = config_file(args.config.clone());
    let flags = Layer {
        vault: args.vault,
        listen: args.listen,
        state_dir: args.state_dir,
        insecure_open: args.insecure_open.then_some(true),
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        watch: args.no_watch.then_some(false),
        ..Layer::default()
    };
    let config = Config::load(file.as_deref(), |k| std::env::var(k).ok(), flags)
        .map_err(anyhow::Error::msg)?;
    refuse_exposed(&config)?;
    if config.auth_issuer.is_some() && !config.auth_configured() {
        tracing::warn!("auth_issuer is set but auth is off (no AUTH_REQUIRED, no static tokens): the daemon is open and JWTs are not checked");
    }
    // The certificate and key are read and checked now, before the vault is opened: a
    // mistake there is a one-line error at once.
    notevault::http::tls::acceptor(&config).map_err(anyhow::Error::msg)?;
    let scheme = config.scheme();
    limit_malloc_arenas();
    // Blocking work (search, grep, reads) is short: a bounded pool keeps threads, and the
    // memory each one holds, in proportion to the machine.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(64)
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
        let daemon = tokio::task::spawn_blocking(move || notevault::daemon::open(config)).await??;
        let state = daemon.state.clone();
        let addr = listener.local_addr()?;
        tracing::info!(%addr, vault = %state.root().display(), tls = scheme == "https", "serving");
        eprintln!(
            "notevault: serving {} on {scheme}://{addr}",
            state.root().display()
        );
        notevault::http::run(listener, state, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
        drop(daemon);
        Ok(())
    })
}

/// A non-loopback address is served only with auth and TLS both, or with
/// `--insecure-open`: tokens sent in the clear on a network are tokens given away. The
/// refusal says what is missing and both ways out.
fn refuse_exposed(config: &Config) -> anyhow::Result<()> {
    let auth = config.auth_configured();
    let tls = config.tls_configured();
    if config.listen.ip().is_loopback() || (auth && tls) || config.insecure_open {
        return Ok(());
    }
    let missing = match (auth, tls) {
        (false, false) => "without auth and over plain HTTP",
        (false, true) => "without auth",
        _ => "over plain HTTP (without TLS)",
    };
    anyhow::bail!(
        "refusing to serve {} {missing}: give --tls-cert FILE and --tls-key FILE and set AUTH_REQUIRED=true (with tokens from `notevault token create`) or static_tokens, or bind a loopback address such as 127.0.0.1, or pass --insecure-open to accept the risk",
        config.listen
    )
}

/// The metadata store of the vault the token command names (made if the daemon never ran
/// there). Only the store: a daemon may be serving the vault meanwhile.
#[allow(
    clippy::disallowed_methods,
    reason = "the CLI hands the environment to Config::load"
)]
fn token_store(store: TokenStoreArgs) -> anyhow::Result<Meta> {
    let flags = Layer {
        vault: store.vault,
        state_dir: store.state_dir,
        ..Layer::default()
    };
    let config = Config::load(
        config_file(store.config).as_deref(),
        |k| std::env::var(k).ok(),
        flags,
    )
    .map_err(anyhow::Error::msg)?;
    let dir = config.state_dir_of_vault()?;
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("state dir {} is not writable: {e}", dir.display()))?;
    Meta::open(&dir.join("meta.sqlite"))
        .map_err(|e| anyhow::anyhow!("state dir {}: {}", dir.display(), e.message))
}

/// `notevault token create|list|revoke`.
fn token(command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create(args) => {
            let name = args.name.trim().to_string();
            if name.is_empty()
                || name.len() > 100
                || name.chars().any(char::is_control)
                || name.starts_with(pat::PREFIX)
            {
                anyhow::bail!(
                    "invalid token name {name:?}: 1 to 100 characters, no control characters, not starting with {}",
                    pat::PREFIX
                );
            }
            let lifetime = args
                .expires_in
                .as_deref()
                .map(pat::parse_lifetime)
                .transpose()
                .map_err(anyhow::Error::msg)?;
            let meta = token_store(args.store)?;
            if meta.pats()?.iter().any(|p| p.name == name) {
                anyhow::bail!(
                    "a token named {name:?} exists: revoke it first, or pick another name"
                );
            }
            let key = meta.pat_key()?;
            let now = chrono::Utc::now();
            let mut scopes = args.scopes;
            scopes.sort();
            scopes.dedup();
            // A prefix taken by another token (one chance in 2^47) gets a new token.
            for _ in 0..8 {
                let token = pat::generate().map_err(anyhow::Error::msg)?;
                let row = PatRow {
                    prefix: pat::public_prefix(&token).to_string(),
                    name: name.clone(),
                    hash: pat::hash(&key, &token),
                    scopes: scopes.join(" "),
                    created_at: timestamp(now),
                    expires_at: lifetime
                        .map(|d| chrono::Duration::from_std(d).map(|d| timestamp(now + d)))
                        .transpose()?,
                    last_used_at: None,
                };
                if meta.insert_pat(&row)? {
                    println!("{token}");
                    return Ok(());
                }
            }
            anyhow::bail!("could not store the token: try again")
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
            if meta.revoke_pat(&args.token)? == 0 {
                anyhow::bail!("no token named or prefixed {:?}", args.token);
            }
            eprintln!("notevault: revoked {}", args.token);
            Ok(())
        }
    }
}
