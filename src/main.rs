//! The `notevault` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use notevault::auth::pat;
use notevault::auth::Permission;
use notevault::cli::{
    exit as status, Cli, Command, CompletionsArgs, DeviceCommand, ExportArgs, ReindexArgs,
    ServeArgs, TokenCommand, TokenStoreArgs,
};
use notevault::clock::timestamp;
use notevault::config::{Config, Layer};
use notevault::meta::audit::{AuditEvent, AuditKind};
use notevault::meta::Meta;

fn main() -> ExitCode {
    notevault::memory::configure();
    let cli = Cli::parse();
    match cli.command {
        Command::Openapi => {
            println!("{}", notevault::api::openapi::document_json());
            ExitCode::SUCCESS
        }
        Command::Serve(args) => exit(serve(args)),
        Command::Reindex(args) => exit(reindex(args)),
        Command::Token(command) => exit(token(command)),
        Command::LoginLink(store) => exit(login_link(store)),
        Command::Export(args) => exit(export(args)),
        Command::Completions(args) => completions(args),
        Command::Check(args) => match notevault_check(args) {
            Ok(code) => ExitCode::from(code),
            Err(e) => exit(Err(e)),
        },
        Command::Status(args) => exit(daemon_status(args)),
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
                let report = device::push(&d.dir, d.token, d.passphrase.as_deref()).await?;
                for (file, copy) in &report.conflicts {
                    eprintln!("notevault: {file}: changed here and on the daemon; your version is kept as {copy}");
                }
                for (file, id) in &report.pending {
                    eprintln!("notevault: {file}: queued for review as pending write {id}, not applied yet (a pull brings it once a reviewer approves it)");
                }
                for r in &report.refused {
                    eprintln!("notevault: {}: not pushed: {}", r.local, r.text);
                }
                eprintln!(
                    "notevault: pushed {} changes, {} kept as conflicted copies, {} pending review, {} refused",
                    report.applied,
                    report.conflicts.len(),
                    report.pending.len(),
                    report.refused.len()
                );
                if !report.settled() {
                    anyhow::bail!("not every change is on the daemon yet (see above)");
                }
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
            DeviceCommand::RotateKey(a) => {
                let d = a.device;
                let done = device::rotate_key(
                    &d.dir,
                    d.token,
                    d.passphrase.as_deref(),
                    a.recovery_key.as_deref(),
                )
                .await?;
                eprintln!(
                    "notevault: the data key is keyVersion {}; {} private notes sealed again, the old key dropped",
                    done.key_version, done.sealed
                );
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
            ExitCode::from(status::FAILURE)
        }
    }
}

/// The configuration of a command that works on a vault offline (export, check, token):
/// the vault and state directory flags over the file and the environment.
#[allow(
    clippy::disallowed_methods,
    reason = "the CLI hands the environment to Config::load"
)]
fn offline_config(
    vault: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    config: Option<PathBuf>,
) -> anyhow::Result<Config> {
    let flags = Layer {
        vault,
        state_dir,
        watch: Some(false),
        ..Layer::default()
    };
    Config::load(
        config_file(config).as_deref(),
        |k| std::env::var(k).ok(),
        flags,
    )
    .map_err(anyhow::Error::msg)
}

/// `notevault export`: the archive of `notevault::export`, written to a file that is
/// either whole or absent.
fn export(args: ExportArgs) -> anyhow::Result<()> {
    let config = offline_config(args.vault, args.state_dir, args.config)?;
    let state_dir = config.state_dir_of_vault()?;
    let options = notevault::export::Options {
        history: args.history,
    };
    let manifest = notevault::export::to_file(
        &config.vault,
        &state_dir,
        &options,
        &args.output,
        args.force,
    )?;
    for skipped in &manifest.skipped {
        eprintln!("notevault: left out {}: {}", skipped.path, skipped.reason);
    }
    println!(
        "exported {} notes and {} attachments ({} bytes{}) to {}",
        manifest.notes,
        manifest.attachments,
        manifest.bytes,
        match manifest.history {
            "bundle" => ", history as a git bundle",
            "bare" => ", history as a bare repository",
            _ => "",
        },
        args.output.display()
    );
    Ok(())
}

/// `notevault completions SHELL`: the script clap_complete generates from the one clap
/// definition (`completions/` holds the checked-in copies).
fn completions(args: CompletionsArgs) -> ExitCode {
    use clap_complete::Shell;
    let shell = match args.shell.to_ascii_lowercase().as_str() {
        "bash" => Shell::Bash,
        "zsh" => Shell::Zsh,
        "fish" => Shell::Fish,
        "powershell" | "pwsh" => Shell::PowerShell,
        other => {
            eprintln!(
                "notevault: unknown shell {other:?}: use bash, zsh, fish or powershell (notevault completions bash > ~/.local/share/bash-completion/completions/notevault)"
            );
            return ExitCode::from(status::USAGE);
        }
    };
    let mut cmd = notevault::cli::command();
    clap_complete::generate(shell, &mut cmd, "notevault", &mut std::io::stdout());
    ExitCode::SUCCESS
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
fn reindex(args: ReindexArgs) -> anyhow::Result<()> {
    logs();
    let config = offline_config(args.vault, args.state_dir, args.config)?;
    println!("{}", rebuild(config, true)?);
    Ok(())
}

/// Open the vault once without watching (migrations, catalog, index, history caught up
/// with the folder; the index rebuilt first with `drop_index`), wait for the index and
/// the history writer, and say what was done.
fn rebuild(config: Config, drop_index: bool) -> anyhow::Result<String> {
    let started = std::time::Instant::now();
    if drop_index {
        notevault::index::SearchIndex::drop_index(&config.state_dir_of_vault()?)?;
    }
    let daemon = notevault::daemon::open(config)?;
    let state = daemon.state.clone();
    let opened = started.elapsed();
    if !state
        .index
        .wait_for_blocking(state.committed_seq(), std::time::Duration::from_secs(3600))
    {
        if let Some(e) = state.index.state().last_error {
            anyhow::bail!("indexing failed: {e}");
        }
        anyhow::bail!("the index did not finish within an hour");
    }
    // With a model, the note vectors too (they are embedded beside the index writer).
    while state.index.vectors.status().syncing {
        std::thread::sleep(std::time::Duration::from_millis(20));
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
    let summary = format!(
        "indexed {notes} notes of {} in {:.0} ms ({:.0} notes/s; scan {:.0} ms, index {} ms)",
        state.root().display(),
        indexed.as_secs_f64() * 1000.0,
        notes as f64 / secs.max(1e-9),
        opened.as_secs_f64() * 1000.0,
        index.sync_ms.unwrap_or(0)
    );
    // A verify after a start that used the scan cache has ended (the index waited for
    // it); holding the write lock to the exit keeps its cache write from being cut off.
    let recording = state.write_lock.lock();
    // The index and the history are written and closed; freeing 44k notes one by one
    // would only delay the exit (~0.1 s on the corpus). The system takes the memory back.
    std::mem::forget(recording);
    std::mem::forget(state);
    std::mem::forget(daemon);
    Ok(summary)
}

#[allow(
    clippy::disallowed_methods,
    reason = "the CLI hands the environment to Config::load"
)]
fn serve(args: ServeArgs) -> anyhow::Result<()> {
    logs();
    let review = args.review;
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
        if review {
            use notevault::writes::review::{self, ReviewDecisions, WritePolicy};
            review::set_settings(&state, Some(WritePolicy::Review), None, "cli")?;
            review::set_review_decisions(&state, ReviewDecisions::SignedIn, "cli")?;
        }
        let addr = listener.local_addr()?;
        tracing::info!(%addr, vault = %state.root().display(), tls = scheme == "https", "serving");
        {
            use std::io::Write;
            // A closed stderr must not stop serving (`eprintln!` would panic).
            let _ = writeln!(
                std::io::stderr(),
                "notevault: serving {} on {scheme}://{addr}",
                state.root().display()
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
        let url = state.config.public_url.clone().unwrap_or(base);
        console_link(&state.meta, &url);
        notevault::http::run(listener, state.clone(), stop_signal()).await?;
        let purge = state.purge.get().cloned();
        drop(state);
        match purge {
            Some(request) => {
                let purged = tokio::task::spawn_blocking(move || {
                    notevault::daemon::purge(daemon, &request)
                })
                .await??;
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "notevault: purged the daemon's data about the vault ({} notes moved to .trash/, {} left in place); the notes folder is otherwise untouched",
                    purged.trashed, purged.kept
                );
            }
            // What the index and the history hold goes to disk before the process ends;
            // a second Ctrl-C or SIGTERM ends it at once (writes are crash-safe).
            None => {
                tokio::spawn(async {
                    stop_signal().await;
                    std::process::exit(130);
                });
                tokio::task::spawn_blocking(move || daemon.stop()).await?
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
                tracing::warn!(error = %e, "cannot handle SIGTERM; Ctrl-C stops gracefully");
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
fn console_link(meta: &Meta, url: &str) {
    use std::io::{IsTerminal, Write};
    if let Err(e) = meta.set_setting(notevault::console::URL_SETTING, url) {
        tracing::warn!(error = %e.message, "cannot keep the served URL for login-link");
    }
    // Written, not `eprintln!`ed: whoever started the daemon may have closed its stderr
    // after the address line, and a failed print must not stop serving.
    let mut stderr = std::io::stderr().lock();
    if !stderr.is_terminal() {
        let _ = writeln!(
            stderr,
            "notevault: web console at {url}/ (sign in with the link `notevault login-link` prints)"
        );
        return;
    }
    let _ = match notevault::console::sign_in_link(meta, url) {
        Ok(link) => writeln!(
            stderr,
            "notevault: sign in to the web console (one use, 15 minutes): {link}"
        ),
        Err(e) => writeln!(stderr, "notevault: no sign-in link: {}", e.message),
    };
}

/// `notevault login-link`: a one-time sign-in link for the daemon serving the vault (the
/// URL it keeps in the metadata store when it starts).
fn login_link(store: TokenStoreArgs) -> anyhow::Result<()> {
    let meta = token_store(store)?;
    let Some(url) = meta.setting(notevault::console::URL_SETTING)? else {
        anyhow::bail!("no daemon has served this vault yet: start `notevault serve` first");
    };
    let link = notevault::console::sign_in_link(&meta, &url)
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    println!("{link}");
    Ok(())
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
fn token_store(store: TokenStoreArgs) -> anyhow::Result<Meta> {
    let config = offline_config(store.vault, store.state_dir, store.config)?;
    let dir = config.state_dir_of_vault()?;
    notevault::state::create_state_dir(&dir)
        .map_err(|e| anyhow::anyhow!("state dir {} is not writable: {e}", dir.display()))?;
    Meta::open(&dir.join("meta.sqlite"))
        .map_err(|e| anyhow::anyhow!("state dir {}: {}", dir.display(), e.message))
}

/// Append an audit row; a failure is a warning (the token was made or revoked).
fn audit(meta: &Meta, event: AuditEvent<'_>) {
    if let Err(e) = meta.append_audit(&event, &timestamp(chrono::Utc::now())) {
        eprintln!(
            "notevault: warning: cannot append to the audit log: {}",
            e.message
        );
    }
}

/// `notevault token create|list|revoke`.
fn token(command: TokenCommand) -> anyhow::Result<()> {
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
                &meta,
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
                &meta,
                AuditEvent::new(AuditKind::TokenRevoked, "cli").subject(&prefix),
            );
            eprintln!("notevault: revoked {}", args.token);
            Ok(())
        }
    }
}

/// `notevault check [--repair]`: the report of `notevault::check`, one line per finding;
/// with `--repair`, leftovers removed and what is derived rebuilt, then checked again.
fn notevault_check(args: notevault::cli::CheckArgs) -> anyhow::Result<u8> {
    let config = offline_config(args.vault, args.state_dir, args.config)?;
    let state_dir = config.state_dir_of_vault()?;
    let mut report =
        notevault::check::check(&config.vault, &state_dir).map_err(anyhow::Error::msg)?;
    print_report(&report);
    if args.repair && (report.problems() > 0 || report.reopen) {
        logs();
        // Each leftover on its own: one that cannot be cleared is reported (the check
        // after the repair lists it again) and the others are still cleared.
        for leftover in &report.leftovers {
            use notevault::vault::fsio::Leftover;
            match notevault::vault::fsio::resolve_leftover(leftover) {
                Ok(Leftover::Removed) => {}
                Ok(Leftover::PutBack(note)) => println!(
                    "repair: {} is back as it was before a write that was interrupted while it replaced it",
                    note.display()
                ),
                Ok(Leftover::Recovered { note, copy }) => println!(
                    "repair: {} changed after a write that replaced it was interrupted; the save that write swapped out is kept as {}",
                    note.display(),
                    copy.display()
                ),
                Err(e) => println!("repair: cannot clear {}: {e}", leftover.display()),
            }
        }
        if report.reopen || report.reindex {
            let summary = rebuild(config.clone(), report.reindex)?;
            println!("repair: {summary}");
        }
        report = notevault::check::check(&config.vault, &state_dir).map_err(anyhow::Error::msg)?;
        println!("after repair:");
        print_report(&report);
    }
    let problems = report.problems();
    if problems == 0 {
        println!("check: ok");
        return Ok(status::SUCCESS);
    }
    let fixable = problems - report.beyond_repair.min(problems);
    if args.repair || fixable == 0 {
        println!(
            "check: {problems} problems (--repair cannot fix them; each line says what to do)"
        );
    } else {
        println!("check: {problems} problems: `notevault check --repair` fixes {fixable} of them");
    }
    Ok(status::PROBLEMS)
}

fn print_report(report: &notevault::check::Report) {
    for f in &report.findings {
        let mark = if f.problem { "PROBLEM" } else { "ok" };
        println!("{:<10} {:<7} {}", f.area, mark, f.text);
    }
}

/// `notevault status`: what a running daemon says of itself (`GET /v1/index-status`,
/// `GET /v1/vault`, the review queue), as a summary or JSON.
fn daemon_status(args: notevault::cli::StatusArgs) -> anyhow::Result<()> {
    let base = args.url.trim_end_matches('/').to_string();
    let mut builder = reqwest::Client::builder().timeout(std::time::Duration::from_secs(10));
    if let Some(file) = &args.cacert {
        let pem = std::fs::read(file)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
        let cert = reqwest::Certificate::from_pem(&pem)
            .map_err(|e| anyhow::anyhow!("{} is not a PEM certificate: {e}", file.display()))?;
        builder = builder.add_root_certificate(cert);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (index, vault, writes) = runtime.block_on(async {
        let client = builder.build()?;
        let get = |path: &'static str| {
            let client = client.clone();
            let url = format!("{base}{path}");
            let token = args.token.clone();
            async move { status_get(&client, &url, token.as_deref()).await }
        };
        let index = get("/v1/index-status").await?;
        let vault = get("/v1/vault").await?;
        let writes = get("/v1/writes?status=pending&page_size=1").await?;
        anyhow::Ok((index, vault, writes))
    })?;
    if args.json {
        let all = serde_json::json!({
            "url": base,
            "index_status": index,
            "vault": vault,
            "pending_writes": writes["total_size"],
        });
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    let n = |v: &serde_json::Value| v.as_i64().unwrap_or(0);
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::Null => "none".to_string(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let committed = n(&index["committed_seq"]);
    let indexed = n(&index["indexed_seq"]);
    println!(
        "daemon     {base}: vault {} ({} notes, id {})",
        text(&vault["root"]),
        n(&vault["notes"]),
        text(&vault["vault_id"])
    );
    let search = &index["search_index"];
    println!(
        "seq        committed {committed}, indexed {indexed} ({})",
        if indexed >= committed {
            "index fresh".to_string()
        } else {
            format!(
                "index {} behind, {} notes not yet indexed",
                committed - indexed,
                n(&search["not_yet_indexed"])
            )
        }
    );
    println!(
        "index      {} documents, schema {}, last error: {}",
        n(&search["documents"]),
        n(&search["schema_version"]),
        text(&search["last_error"])
    );
    let watcher = &index["watcher"];
    println!(
        "watcher    {} ({} batches, {} rescans, last error: {})",
        text(&watcher["state"]),
        n(&watcher["batches"]),
        n(&watcher["rescans"]),
        text(&watcher["last_error"])
    );
    let history = &index["history"];
    println!(
        "history    through seq {}, backlog {}, pending commits {}, left out {}, dropped commits {}, last error: {}",
        n(&history["head_seq"]),
        n(&history["backlog"]),
        n(&history["pending"]),
        n(&history["left_out_total"]),
        n(&history["dropped_commits"]),
        text(&history["last_error"])
    );
    println!(
        "writes     {} pending review (policy {})",
        n(&writes["total_size"]),
        text(&vault["write_policy"])
    );
    Ok(())
}

/// One GET of `notevault status`; a failure is one line that says what to do.
async fn status_get(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.map_err(|e| {
        // The causes say whether a TLS handshake failed on the certificate.
        let mut causes = String::new();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            causes.push_str(&cause.to_string());
            source = cause.source();
        }
        if causes.to_ascii_lowercase().contains("certificate") {
            return anyhow::anyhow!(
                "{url}: the daemon's TLS certificate is not trusted: pass --cacert FILE with its certificate (PEM)"
            );
        }
        let why = if e.is_connect() {
            "nothing answers there"
        } else if e.is_timeout() {
            "it did not answer within 10 s"
        } else {
            "the request failed"
        };
        anyhow::anyhow!(
            "no notevault daemon at {url} ({why}): start one with `notevault serve`, or pass --url"
        )
    })?;
    let code = response.status();
    let body: serde_json::Value = response.json().await.map_err(|_| {
        anyhow::anyhow!("{url} answered {code} without JSON: is it a notevault daemon? pass --url")
    })?;
    if code.is_success() {
        return Ok(body);
    }
    if code == reqwest::StatusCode::UNAUTHORIZED {
        anyhow::bail!(
            "the daemon at {url} needs a token ({}): pass --token or set NOTEVAULT_TOKEN (`notevault token create`)",
            body["reason"].as_str().unwrap_or("401")
        );
    }
    anyhow::bail!(
        "{url} answered {code} {}: {} {}",
        body["reason"].as_str().unwrap_or(""),
        body["message"].as_str().unwrap_or(""),
        body["hint"].as_str().unwrap_or("")
    )
}
