//! The `notevault` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use notevault::cli::{Cli, Command, ServeArgs};
use notevault::config::{Config, Layer};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Openapi => {
            println!("{}", notevault::api::openapi::document_json());
            ExitCode::SUCCESS
        }
        Command::Serve(args) => match serve(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("notevault: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NOTEVAULT_LOG")
                .unwrap_or_else(|_| "notevault=info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let file = args
        .config
        .clone()
        .or_else(|| std::env::var_os("NOTEVAULT_CONFIG").map(PathBuf::from));
    let flags = Layer {
        vault: args.vault,
        listen: args.listen,
        state_dir: args.state_dir,
        insecure_open: args.insecure_open.then_some(true),
        watch: args.no_watch.then_some(false),
        ..Layer::default()
    };
    let config = Config::load(file.as_deref(), |k| std::env::var(k).ok(), flags)
        .map_err(anyhow::Error::msg)?;
    if !config.listen.ip().is_loopback() && !config.auth_required && !config.insecure_open {
        anyhow::bail!(
            "refusing to serve {} without auth: bind a loopback address, set AUTH_REQUIRED, or pass --insecure-open",
            config.listen
        );
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
        let svc = tokio::task::spawn_blocking(move || notevault::service::Service::open(config))
            .await??;
        let addr = listener.local_addr()?;
        tracing::info!(%addr, vault = %svc.root().display(), "serving");
        eprintln!(
            "notevault: serving {} on http://{addr}",
            svc.root().display()
        );
        notevault::api::run(listener, svc, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
        Ok(())
    })
}
