//! The command-line definition, in the library so the man pages are generated from it
//! (`tests/cli.rs` checks the checked-in copies in `man/`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "notevault",
    version,
    about = "Serve a folder of markdown notes to people, editors and AI agents"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Serve a vault over HTTP (the /v1 API) on a loopback address.
    Serve(ServeArgs),
    /// Rebuild the search index of a vault from its folder (the daemon must be stopped).
    Reindex(ReindexArgs),
    /// Print the OpenAPI 3.1 contract as JSON.
    Openapi,
}

#[derive(clap::Args)]
pub struct ReindexArgs {
    /// The vault folder [default: .]
    pub vault: Option<PathBuf>,
    /// Where history, metadata and index live [default: <VAULT>/.notevault]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// A TOML config file (also NOTEVAULT_CONFIG)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// The vault folder [default: .]
    pub vault: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:4000]
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Where history, metadata and index live [default: <VAULT>/.notevault]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// A TOML config file (also NOTEVAULT_CONFIG)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Serve a non-loopback address without authentication
    #[arg(long)]
    pub insecure_open: bool,
    /// Do not watch the folder (external edits are then seen when a note is read)
    #[arg(long)]
    pub no_watch: bool,
}

/// The clap command, for man pages and completions.
pub fn command() -> clap::Command {
    Cli::command()
}
