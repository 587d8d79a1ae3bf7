//! The `notevault` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use notevault::config::{Config, Layer};

#[derive(Parser)]
#[command(
    name = "notevault",
    version,
    about = "Serve a folder of markdown notes to people, editors and AI agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a vault over HTTP (the /v1 API) on a loopback address.
    Serve(ServeArgs),
    /// Print the OpenAPI 3.1 contract as JSON.
    Openapi,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// The vault folder [default: .]
    vault: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:4000]
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Where history, metadata and index live [default: <VAULT>/.notevault]
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// A TOML config file (also NOTEVAULT_CONFIG)
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Serve a non-loopback address without authentication
    #[arg(long)]
    insecure_open: bool,
}

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
