//! `notevault serve`: the daemon, from the configuration to a graceful stop.

use crate::cli::ServeArgs;
use crate::config::{Config, Layer};

use super::config_file;

/// The target these events had when they were logged from the binary: log lines and
/// `NOTEVAULT_LOG` filters naming it stay as they were.
const TARGET: &str = "notevault";

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
pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    super::log_as(args.log_format);
    let json_logs = args.log_format == crate::cli::LogFormat::Json;
    let review = args.review;
    let migrate = args.migrate;
    let file = config_file(args.config.clone());
    let (vault, vaults) = match args.vaults.as_slice() {
        [] => (None, None),
        [one] => (Some(one.clone()), None),
        several => (
            None,
            Some(
                several
                    .iter()
                    .map(|path| crate::config::VaultEntry {
                        path: path.clone(),
                        ..Default::default()
                    })
                    .collect(),
            ),
        ),
    };
    let flags = Layer {
        vault,
        vaults,
        listen: args.listen,
        state_dir: args.state_dir,
        insecure_open: args.insecure_open.then_some(true),
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        watch: args.no_watch.then_some(false),
        database_url: args.database.clone().map(crate::config::Secret::new),
        blob_store: args.blob_store.clone(),
        blob_public_endpoint: args.blob_public_endpoint.clone(),
        metrics_listen: args.metrics_listen,
        ..Layer::default()
    };
    let mut config = Config::load(file.as_deref(), |k| std::env::var(k).ok(), flags)
        .map_err(anyhow::Error::msg)?;
    if config.database_url.is_some() {
        if !args.vaults.is_empty() {
            anyhow::bail!("hosted mode (a database is configured) serves the database's vaults, not a folder: serve without VAULT, or bring the folder in with `notevault import`");
        }
        // Auth is always on in hosted mode: no open vault.
        config.auth_required = true;
    }
    refuse_exposed(&config)?;
    if config.auth_issuer.is_some() && !config.auth_configured() {
        tracing::warn!(target: TARGET, "auth_issuer is set but auth is off (no AUTH_REQUIRED, no static tokens): the daemon is open and JWTs are not checked");
    }
    // The certificate and key are read and checked now, before the vault is opened: a
    // mistake there is a one-line error at once.
    crate::http::tls::acceptor(&config).map_err(anyhow::Error::msg)?;
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
        let metrics = match config.metrics_listen {
            Some(addr) => Some(crate::http::metrics::bind(addr).await?),
            None => None,
        };
        if config.database_url.is_some() {
            let listeners = (listener, metrics);
            return super::hosted::serve(config, listeners, migrate, stop_signal()).await;
        }
        let configs = config.vault_configs().map_err(anyhow::Error::msg)?;
        let daemons =
            tokio::task::spawn_blocking(move || crate::daemon::open_all(configs)).await??;
        let states: Vec<_> = daemons.iter().map(|d| d.state.clone()).collect();
        if review {
            use crate::writes::review::{self, ReviewDecisions, WritePolicy};
            for state in &states {
                review::set_settings(state, Some(WritePolicy::Review), None, "cli")?;
                review::set_review_decisions(state, ReviewDecisions::SignedIn, "cli")?;
            }
        }
        let addr = listener.local_addr()?;
        for state in &states {
            tracing::info!(target: TARGET, %addr, vault = %state.root().display(), vault_id = %state.vault_id, tls = scheme == "https", "serving");
        }
        {
            use std::io::Write;
            let folders: Vec<String> = states
                .iter()
                .map(|s| s.root().display().to_string())
                .collect();
            // A closed stderr must not stop serving (`eprintln!` would panic).
            let _ = writeln!(
                std::io::stderr(),
                "notevault: serving {} on {scheme}://{addr}",
                folders.join(", ")
            );
        }
        // A wildcard address is no address to open: the link names loopback (which the
        // Host guard allows) on the port served.
        let shown = match addr.ip() {
            std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
                std::net::SocketAddr::from(([127, 0, 0, 1], addr.port()))
            }
            std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
                std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, addr.port()))
            }
            _ => addr,
        };
        let base = format!("{scheme}://{shown}");
        for state in &states {
            let url = state.config.public_url.clone().unwrap_or(base.clone());
            console_link(state, &url, states.len() > 1, json_logs);
        }
        let vaults = crate::vaults::Vaults::new(states).map_err(anyhow::Error::msg)?;
        crate::http::run_with_metrics(listener, metrics, vaults, None, stop_signal()).await?;
        // What the index and the history hold goes to disk before the process ends;
        // a second Ctrl-C or SIGTERM ends it at once (writes are crash-safe).
        tokio::spawn(async {
            stop_signal().await;
            std::process::exit(130);
        });
        for daemon in daemons {
            let purge = daemon.state.purge.get().cloned();
            match purge {
                Some(request) => {
                    let root = daemon.state.root().display().to_string();
                    let purged = tokio::task::spawn_blocking(move || {
                        crate::daemon::purge(daemon, &request)
                    })
                    .await??;
                    use std::io::Write;
                    let _ = writeln!(
                        std::io::stderr(),
                        "notevault: purged the daemon's data about the vault {root} ({} notes moved to .trash/, {} left in place); the notes folder is otherwise untouched",
                        purged.trashed, purged.kept
                    );
                }
                None => tokio::task::spawn_blocking(move || daemon.stop()).await?,
            }
        }
        Ok(())
    })
}

/// Ctrl-C (SIGINT), or SIGTERM (`systemctl stop`, `kill`): either ends serving the same
/// way, requests under way answered and what the index and the history hold written.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let terminate = async {
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            // Without the handler SIGTERM keeps its default: the process ends at once,
            // which loses no acknowledged write.
            Err(e) => {
                tracing::warn!(target: TARGET, error = %e, "cannot handle SIGTERM; Ctrl-C stops gracefully");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

/// Keep the URL served (for `notevault login-link`) and, on a terminal, print a one-time
/// sign-in link to the console. Not into a log: a service's output goes to the journal,
/// and the link signs in whoever opens it; a service's user asks `notevault login-link`.
/// With `json_logs` the line is logged: a log shipper reads one object per line.
fn console_link(state: &crate::state::State, url: &str, several: bool, json_logs: bool) {
    use std::io::{IsTerminal, Write};
    let meta = &*state.meta;
    // With several vaults each line names its own.
    let of = if several {
        format!(" of {}", state.root().display())
    } else {
        String::new()
    };
    if let Err(e) = meta.set_setting(crate::console::URL_SETTING, url) {
        tracing::warn!(target: TARGET, error = %e.message, "cannot keep the served URL for login-link");
    }
    if json_logs {
        tracing::info!(target: TARGET, url = %format!("{url}/"), vault = %state.root().display(), "web console (sign in with the link `notevault login-link` prints)");
        return;
    }
    // Written, not `eprintln!`ed: whoever started the daemon may have closed its stderr
    // after the address line, and a failed print must not stop serving.
    let mut stderr = std::io::stderr().lock();
    if !stderr.is_terminal() {
        let _ = writeln!(
            stderr,
            "notevault: web console{of} at {url}/ (sign in with the link `notevault login-link` prints)"
        );
        return;
    }
    let _ = match crate::console::sign_in_link(meta, url) {
        Ok(link) => writeln!(
            stderr,
            "notevault: sign in to the web console{of} (one use, 15 minutes): {link}"
        ),
        Err(e) => writeln!(stderr, "notevault: no sign-in link: {}", e.message),
    };
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
