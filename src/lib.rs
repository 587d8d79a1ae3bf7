//! notevault: serve a folder of markdown notes to people, editors and AI agents.
//!
//! Module map (see ARCHITECTURE.md for the invariants each keeps):

pub mod api; // the /v1 API: route table, dispatch, handlers, wire types, envelope, OpenAPI
pub mod auth; // credentials (open local mode, bearer tokens) and permissions, checked in one place
pub mod check; // notevault check: the state directory verified against the folder, read-only
pub mod cli; // the command-line definition (clap), shared with the man pages
pub mod clock; // RFC 3339 timestamps as answered; imports nothing of the crate
pub mod cmd; // the subcommands' handlers, a file per group; only the binary calls them
pub mod config; // one Config: defaults < file < env < flags
pub mod console; // the web console: sign-in, sessions, review, tokens, settings, activity, purge
pub mod daemon; // the composition root: opens the stores, scans, starts the index and the watcher
pub mod device; // the reference device client: sync a folder, private notes encrypted on the device
pub mod error; // the one Error type and the one table of reasons
pub mod export; // the export archive (.tar.gz of the notes and attachments, optional history bundle)
pub mod filter; // AIP-160 filters: parser (grammar in its doc) and evaluator
pub mod history; // history.git: a bare gix repository, one commit per batch
pub mod hosted; // hosted mode's PostgreSQL: pool, schema and migrations, the vault registry
pub mod http; // the HTTP application: /v1 and /mcp behind one middleware stack, and the server
pub mod index; // search index (tantivy), search, grep, tag and property rollups
pub mod mcp; // the MCP endpoint (/mcp): rmcp streamable HTTP, read-only tools over the /v1 calls
pub mod memory; // malloc_trim after a burst
pub mod meta; // SQLite metadata: note ids, revisions, settings; migrations
pub mod progress; // progress of long start-up work: a bar on a terminal, log lines otherwise
pub mod purge; // a purge asked for: the confirmation, then stop serving (daemon::purge removes the state)
pub mod queries; // the read calls both surfaces share
pub mod record; // the one recorder: every change on disk becomes history, revisions, catalog, seq, index
pub mod state; // the stores and the seq, as plain data
pub mod storage; // the storage seam: traits the pipeline, recorder and queries reach stores by
pub mod surface; // what api, mcp and console share: the calls, their params and answers, the envelope
pub mod sync; // the device sync plane: op log reads, snapshot, checkpoints, compaction, E2EE state
pub mod telemetry; // the metrics: one Prometheus recorder, names and labels; imports nothing of the crate
pub mod vault; // domain core: notes, frontmatter, paths; no HTTP
pub mod vaults; // the vault registry: every vault one daemon serves, the default first
pub mod watch; // the live watcher
pub mod writes; // the write pipeline: plan, idempotency, review, apply
