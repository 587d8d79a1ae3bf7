//! The command-line definition, in the library so the man pages are generated from it
//! (`tests/it/cli.rs` checks the checked-in copies in `man/`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};

/// The exit statuses of every subcommand, for the man page's EXIT STATUS section and
/// `main`: one table.
pub mod exit {
    /// It did what was asked.
    pub const SUCCESS: u8 = 0;
    /// It could not do its work (an unusable vault or state directory, a daemon that does
    /// not answer, an output file that exists); the one line on stderr says why and what
    /// to do.
    pub const FAILURE: u8 = 1;
    /// The command line is wrong: an unknown subcommand, flag, value or shell.
    pub const USAGE: u8 = 2;
    /// `check` found a problem (without `--repair`, or one `--repair` could not fix).
    pub const PROBLEMS: u8 = 3;

    /// `(status, meaning)`, in order.
    pub const TABLE: &[(u8, &str)] = &[
        (SUCCESS, "success"),
        (
            FAILURE,
            "failure: the command could not do its work (an unusable vault or state directory, a daemon that does not answer, an output file that exists); one line on stderr says why and what to do",
        ),
        (
            USAGE,
            "usage: an unknown subcommand, flag, value or shell",
        ),
        (
            PROBLEMS,
            "check found a problem in the state directory (without --repair, or one --repair could not fix); the summary on stdout lists each",
        ),
    ];
}

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
    /// Serve a vault over HTTP (the /v1 API and /mcp), or HTTPS with --tls-cert and --tls-key.
    Serve(ServeArgs),
    /// Rebuild the search index of a vault from its folder (the daemon must be stopped).
    Reindex(ReindexArgs),
    /// Print the OpenAPI 3.1 contract as JSON.
    Openapi,
    /// Create, list and revoke personal access tokens (kept hashed in the state directory;
    /// a running daemon sees a change at once).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Print a one-time sign-in link to the web console of the daemon serving a vault
    /// (valid 15 minutes, for one sign-in).
    LoginLink(TokenStoreArgs),
    /// Write a .tar.gz of the vault's notes and attachments, byte for byte (optionally with
    /// the history), the same archive as POST /v1/export; the daemon may be running.
    Export(ExportArgs),
    /// Verify the state directory against the folder: catalog, metadata ids, search index,
    /// history (git fsck), leftover temp files; exit 3 on a problem (the daemon must be
    /// stopped).
    Check(CheckArgs),
    /// Ask the daemon serving a vault how it is: seq, index freshness, watcher, history
    /// backlog, pending writes; with no daemon serving it, what the folder holds.
    Status(StatusArgs),
    /// Search a vault's notes (the daemon serving it, or the folder read directly): the
    /// best matches, each with its slug, title and the line that matched.
    Search(SearchArgs),
    /// Print a note's text as in its file (the daemon serving the vault, or the folder
    /// read directly), or lines A to B of it with --lines.
    Read(ReadArgs),
    /// List a vault's notes (the daemon serving it, or the folder read directly): slug and
    /// title, optionally under a path prefix.
    Ls(LsArgs),
    /// Print a shell completion script (bash, zsh, fish or powershell) on stdout.
    Completions(CompletionsArgs),
    /// The reference device client: keep a folder in step with a daemon over the sync
    /// plane; private notes are encrypted on the device and never leave it in plaintext.
    #[command(subcommand)]
    Device(DeviceCommand),
    /// Hosted mode's PostgreSQL database: bring its schema up to this notevault's.
    #[command(subcommand)]
    Db(DbCommand),
    /// Hosted mode's vaults in PostgreSQL: create, list and delete them.
    #[command(subcommand)]
    Vault(VaultCommand),
    /// Bring a folder vault into a hosted vault, with its history: every revision, its
    /// actor and time, and the notes as they are now.
    Import(ImportArgs),
    /// Serve MCP over stdio (for clients that launch a command): through the daemon serving
    /// the vault when one answers, else from the vault itself.
    Mcp(McpArgs),
}

#[derive(clap::Args)]
pub struct McpArgs {
    /// The vault folder [default: .]
    pub vault: Option<PathBuf>,
    /// A bearer token: the write tools need one holding notes.write (also NOTEVAULT_TOKEN)
    #[arg(
        long,
        value_name = "TOKEN",
        env = "NOTEVAULT_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// The daemon's base URL [default: the one serving the vault, if any]
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Serve from the vault itself, even when a daemon serves it
    #[arg(long, conflicts_with = "url")]
    pub no_daemon: bool,
    /// Trust this PEM certificate (a daemon serving HTTPS with its own certificate)
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Where history, metadata and index live [default: <VAULT>/.notevault]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// A TOML config file (also NOTEVAULT_CONFIG)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct ExportArgs {
    /// The vault folder [default: .]
    pub vault: Option<PathBuf>,
    /// A hosted vault to export instead of a folder, by name or id (with --database)
    #[arg(
        long = "vault",
        id = "hosted_vault",
        value_name = "NAME|ID",
        conflicts_with = "vault"
    )]
    pub hosted_vault: Option<String>,
    /// The hosted vault's database, postgres://… (also NOTEVAULT_DATABASE_URL)
    #[arg(long, value_name = "URL", requires = "hosted_vault")]
    pub database: Option<String>,
    /// The archive to write (.tar.gz); refused if it exists, unless --force
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Add the history: a git bundle of history.git (history.bundle)
    #[arg(long)]
    pub history: bool,
    /// Replace FILE if it exists
    #[arg(long)]
    pub force: bool,
    /// Where history, metadata and index live [default: <VAULT>/.notevault]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// A TOML config file (also NOTEVAULT_CONFIG)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The vault folder [default: .]
    pub vault: Option<PathBuf>,
    /// Rebuild what is derived (search index, catalog rows) and remove leftover temp files
    #[arg(long)]
    pub repair: bool,
    /// Where history, metadata and index live [default: <VAULT>/.notevault]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// A TOML config file (also NOTEVAULT_CONFIG)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct StatusArgs {
    /// The vault folder [default: .]; without it and with no daemon found for `.`, the
    /// daemon at http://127.0.0.1:4000 is asked
    pub vault: Option<PathBuf>,
    #[command(flatten)]
    pub reach: ReachArgs,
}

/// How a reading command reaches a vault: the daemon serving it (found through the URL
/// its state directory records, or --url), else the folder read directly.
#[derive(clap::Args)]
pub struct ReachArgs {
    /// Ask the daemon at this base URL instead of the one the vault's state directory names
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// A bearer token, when the daemon requires auth (also NOTEVAULT_TOKEN)
    #[arg(
        long,
        value_name = "TOKEN",
        env = "NOTEVAULT_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Trust this PEM certificate (a daemon serving HTTPS with its own certificate)
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Print the answers as JSON (those of the /v1 API) instead of a summary
    #[arg(long)]
    pub json: bool,
    /// Where history, metadata and index live [default: <VAULT>/.notevault]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// A TOML config file (also NOTEVAULT_CONFIG)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct SearchArgs {
    /// What to find: words, "a phrase", +required, -excluded, prefix*, tags:x (as GET /v1/search's q)
    #[arg(value_name = "QUERY")]
    pub query: String,
    /// The vault folder [default: .]
    pub vault: Option<PathBuf>,
    /// Results to show, 1..100
    #[arg(long, short = 'n', value_name = "N", default_value_t = 10)]
    pub limit: usize,
    #[command(flatten)]
    pub reach: ReachArgs,
}

#[derive(clap::Args)]
pub struct ReadArgs {
    /// The note: its slug (its path without .md, e.g. projects/roadmap) or its note_id
    #[arg(value_name = "NOTE")]
    pub note: String,
    /// The vault folder [default: .]
    pub vault: Option<PathBuf>,
    /// Only lines A to B (1-based, both included; A: to the end, :B from the start)
    #[arg(long, value_name = "A:B")]
    pub lines: Option<String>,
    #[command(flatten)]
    pub reach: ReachArgs,
}

#[derive(clap::Args)]
pub struct LsArgs {
    /// The vault folder [default: .]
    pub vault: Option<PathBuf>,
    /// Only notes whose slug starts with this, e.g. projects/ (a folder) or daily/2026-
    #[arg(long, value_name = "P")]
    pub prefix: Option<String>,
    #[command(flatten)]
    pub reach: ReachArgs,
}

#[derive(clap::Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish or powershell
    #[arg(value_name = "SHELL")]
    pub shell: String,
}

#[derive(Subcommand)]
pub enum DeviceCommand {
    /// Make a folder a device of a daemon; with a passphrase, turn private notes on (the
    /// first device) or unlock them; then pull.
    Init(DeviceInitArgs),
    /// Apply the daemon's changes to the folder (the snapshot first, and again after
    /// compaction; then the ops after the device's seq).
    Pull(DeviceArgs),
    /// Push the folder's changes (private notes `*.private.md` encrypted), then pull; an
    /// edit whose base moved is kept as a conflicted copy.
    Push(DeviceArgs),
    /// Wrap the data key under a new passphrase (unwrapped with the current passphrase
    /// or the recovery key).
    Passphrase(DevicePassphraseArgs),
    /// Make a new data key (keyVersion + 1), seal every private note again under it and
    /// push it, then drop the old key; interrupted, both keys stay and running it again
    /// finishes
    RotateKey(DeviceRotateArgs),
}

/// A device folder and how to reach its daemon.
#[derive(clap::Args)]
pub struct DeviceArgs {
    /// The device folder
    pub dir: PathBuf,
    /// A bearer token for the daemon (a session token: the key routes refuse personal
    /// access tokens)
    #[arg(long, env = "NOTEVAULT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The passphrase of private notes (prefer the environment variable)
    #[arg(long, env = "NOTEVAULT_PASSPHRASE", hide_env_values = true)]
    pub passphrase: Option<String>,
}

#[derive(clap::Args)]
pub struct DeviceInitArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
    /// The daemon's base URL
    #[arg(long, value_name = "URL")]
    pub server: String,
    /// This device's id (1..100 characters; its pushes carry `device:<ID>`)
    #[arg(long, value_name = "ID")]
    pub device_id: String,
    /// Also make a recovery key (printed once on stdout) when turning private notes on
    #[arg(long)]
    pub recovery: bool,
}

#[derive(clap::Args)]
pub struct DeviceRotateArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
    /// The recovery key, when the vault has one: it is renewed to open the new data key
    #[arg(long, env = "NOTEVAULT_RECOVERY_KEY", hide_env_values = true)]
    pub recovery_key: Option<String>,
}

#[derive(clap::Args)]
pub struct DevicePassphraseArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
    /// The new passphrase
    #[arg(long, env = "NOTEVAULT_NEW_PASSPHRASE", hide_env_values = true)]
    pub new_passphrase: String,
    /// Unwrap with the recovery key instead of the current passphrase
    #[arg(long, env = "NOTEVAULT_RECOVERY_KEY", hide_env_values = true)]
    pub recovery_key: Option<String>,
}

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Create a token and print it, alone, on stdout (it is shown this once).
    Create(TokenCreateArgs),
    /// List the tokens: name, prefix, scopes, created, expires, last used (never a token).
    List(TokenStoreArgs),
    /// Revoke a token by its name or its prefix (`nvp_` and 8 characters).
    Revoke(TokenRevokeArgs),
}

/// Where the tokens are kept: the vault's state directory, or with `--database` a hosted
/// vault's rows.
#[derive(clap::Args)]
pub struct TokenStoreArgs {
    /// The vault folder [default: .]; with --database, the hosted vault's name or id
    pub vault: Option<PathBuf>,
    /// Hosted mode: the PostgreSQL database holding the vault
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    /// Where history, metadata and index live [default: <VAULT>/.notevault]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// A TOML config file (also NOTEVAULT_CONFIG)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct TokenCreateArgs {
    /// A name for the token, unique in this vault (who or what uses it)
    #[arg(long, value_name = "NAME")]
    pub name: String,
    /// A permission beyond reading (repeat for both)
    #[arg(long = "scope", value_name = "SCOPE", value_parser = ["notes.write", "notes.review"])]
    pub scopes: Vec<String>,
    /// Lifetime: a number and s, m, h, d or w (30d) [default: no expiry]
    #[arg(long, value_name = "DURATION")]
    pub expires_in: Option<String>,
    #[command(flatten)]
    pub store: TokenStoreArgs,
}

#[derive(clap::Args)]
pub struct TokenRevokeArgs {
    /// The token's name or prefix
    #[arg(value_name = "NAME|PREFIX")]
    pub token: String,
    #[command(flatten)]
    pub store: TokenStoreArgs,
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
    /// The vault folder [default: .]; several folders are several vaults, each with its
    /// own state directory (<VAULT>/.notevault), the first the default one
    #[arg(value_name = "VAULT")]
    pub vaults: Vec<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:4000]
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Where history, metadata and index live [default: <VAULT>/.notevault]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// A TOML config file (also NOTEVAULT_CONFIG)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Serve HTTPS with this PEM certificate chain (also NOTEVAULT_TLS_CERT); needs --tls-key
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert: PKCS#8, RSA or EC, unencrypted (also NOTEVAULT_TLS_KEY)
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Serve a non-loopback address without authentication and TLS (accept the risk)
    #[arg(long)]
    pub insecure_open: bool,
    /// Do not watch the folder (external edits are then seen when a note is read)
    #[arg(long)]
    pub no_watch: bool,
    /// Queue every agent write for review, and take review decisions only from a person
    /// signed in to the console or a notes.review token (kept in the vault's settings)
    #[arg(long)]
    pub review: bool,
    /// Hosted mode: serve the vaults of this PostgreSQL database (no folder; also
    /// NOTEVAULT_DATABASE_URL or `database_url` in the config file)
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    /// Serve GET /metrics (Prometheus text, no credential) on this second address too, for
    /// a scraper on a private network; hosted mode serves it there only (also
    /// NOTEVAULT_METRICS_LISTEN or `metrics_listen` in the config file)
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Hosted mode: apply the database's schema migrations before serving
    #[arg(long, requires = "database")]
    pub migrate: bool,
    /// Hosted mode: keep attachment bytes in this object store, s3://BUCKET[/PREFIX]
    /// (also NOTEVAULT_BLOB_STORE or `blob_store`; credentials and endpoint from the
    /// standard AWS_* environment)
    #[arg(long, value_name = "URL")]
    pub blob_store: Option<String>,
    /// Hosted mode: where clients reach the blob store, http(s)://HOST[:PORT]; presigned
    /// links are then the store's own, so attachment bytes skip the instance (also
    /// NOTEVAULT_BLOB_PUBLIC_ENDPOINT or `blob_public_endpoint`)
    #[arg(long, value_name = "URL")]
    pub blob_public_endpoint: Option<String>,
    /// Logs on stderr: text for a person, or json (one object per line, with one line per
    /// request: id, vault, route, status, latency) for a log shipper (also
    /// NOTEVAULT_LOG_FORMAT)
    #[arg(long, value_name = "FORMAT", env = "NOTEVAULT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How `serve` writes its logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
pub enum DbCommand {
    /// Apply the schema migrations this notevault embeds (each once; a database with a
    /// newer schema is refused untouched).
    Migrate(DatabaseArgs),
}

#[derive(clap::Args)]
pub struct ImportArgs {
    /// The folder vault to bring in (a daemon has served it: its history is in its state
    /// directory)
    #[arg(value_name = "FOLDER")]
    pub folder: PathBuf,
    /// The hosted vault to fill, by name or id (made with `notevault vault create`; it
    /// must hold no note yet)
    #[arg(long, value_name = "NAME|ID")]
    pub vault: String,
    /// The folder's state directory [default: <FOLDER>/.notevault]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Bring the notes in without the folder's attachments and private notes (else a blob
    /// store is needed when it has any: NOTEVAULT_BLOB_STORE or `blob_store`, with the
    /// AWS_* settings)
    #[arg(long)]
    pub skip_attachments: bool,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

/// Which PostgreSQL database: --database, else NOTEVAULT_DATABASE_URL, else
/// `database_url` in the config file.
#[derive(clap::Args)]
pub struct DatabaseArgs {
    /// postgres://USER:PASSWORD@HOST:PORT/DATABASE (also NOTEVAULT_DATABASE_URL)
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    /// A TOML config file (also NOTEVAULT_CONFIG)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum VaultCommand {
    /// Create a vault and print its id, alone, on stdout.
    Create(VaultCreateArgs),
    /// List the vaults: id, name, org, created, state.
    List(VaultListArgs),
    /// Delete a vault and every row of it (notes, revisions, op log, tokens, sessions,
    /// audit events, settings, keys): it is served no more, at once.
    Delete(VaultDeleteArgs),
}

#[derive(clap::Args)]
pub struct VaultCreateArgs {
    /// A name unique in the database (1 to 100 characters, not a UUID)
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The organization whose identity-provider tokens (`org_id` claim) select it
    #[arg(long, value_name = "ORG")]
    pub org: Option<String>,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

#[derive(clap::Args)]
pub struct VaultListArgs {
    /// Print a JSON array instead of a table
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

#[derive(clap::Args)]
pub struct VaultDeleteArgs {
    /// The vault's name or id
    #[arg(value_name = "NAME|ID")]
    pub vault: String,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

/// The clap command, for man pages and completions.
pub fn command() -> clap::Command {
    Cli::command()
}
