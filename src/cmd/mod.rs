//! The subcommands of the `notevault` binary, a file per group, so that `main.rs` only
//! parses the command line and picks one. The binary is their only caller.

mod device;
mod hosted;
mod import;
mod maintenance;
mod mcp;
mod reach;
mod reads;
mod serve;
mod status;
mod token;

use std::path::PathBuf;

use crate::cli::LogFormat;
use crate::config::{Config, Layer};

pub use device::device;
pub use hosted::{db, vault};
pub use import::import;
pub use maintenance::{completions, export, notevault_check, reindex};
pub use mcp::mcp;
pub use reads::{ls, read, search};
pub use serve::serve;
pub use status::daemon_status;
pub use token::{login_link, token};

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

fn logs() {
    log_as(LogFormat::Text);
}

/// Logs to stderr: `NOTEVAULT_LOG` filters (default `notevault=info`). Text for a
/// person, without the per-request lines; JSON (tracing's formatter, one object per
/// line) for an operator's log shipper, with one line per request.
fn log_as(format: LogFormat) {
    let default = match format {
        LogFormat::Text => "notevault=info,notevault::access=warn",
        LogFormat::Json => "notevault=info",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("NOTEVAULT_LOG")
        .unwrap_or_else(|_| default.into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder.json().with_current_span(false).init(),
    }
}

#[allow(
    clippy::disallowed_methods,
    reason = "the CLI hands the environment to Config::load"
)]
fn config_file(given: Option<PathBuf>) -> Option<PathBuf> {
    given.or_else(|| std::env::var_os("NOTEVAULT_CONFIG").map(PathBuf::from))
}
