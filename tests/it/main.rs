//! The integration tests, one binary (as ripgrep's `tests/`): a module per area, the
//! shared harness in `common/`. One binary links the crate once, where a binary per
//! file linked it once each. Only `tests/architecture.rs` stays apart (it reads the
//! sources, links nothing of the crate, and `cargo test --test architecture` is the
//! house rules' command).
//!
//! A new area is a file `tests/it/NAME.rs` and its `mod NAME;` line below; it reaches
//! the harness with `use crate::common;`. Tests share this process and run on parallel
//! threads: no `std::env::set_var`, no `set_current_dir`, no global subscriber or hook;
//! a child process takes its settings through `Command::env`, a server its `Config`.

mod common;

mod attachments;
mod attachments_blobs;
mod attachments_digest;
mod attachments_faults;
mod attachments_local;
mod attachments_presign_store;
mod auth;
mod check;
mod cli;
mod cli_reads;
mod console;
mod contract;
mod crash;
mod device;
mod device_push;
mod device_sync;
mod disk_full;
mod errors;
mod export;
mod fidelity;
mod fleet;
mod folder_writes;
mod folders;
mod fst_registry;
mod fuzz;
mod grep;
mod history;
mod hosted_console;
mod hosted_db;
mod hosted_export;
mod hosted_export_link;
mod hosted_faults;
mod hosted_meta;
mod hosted_private;
mod hosted_serve;
mod http_edges;
mod hybrid;
#[cfg(feature = "transformer")]
mod hybrid_transformer;
mod idp;
mod inplace;
mod links;
mod mcp;
mod mcp_sections;
mod mcp_stdio;
mod mcp_writes;
mod metrics;
mod names;
mod notes;
mod openapi;
mod probes;
mod questions;
mod races;
mod readme;
mod review;
mod search;
mod secrets;
mod start;
mod storage_fault;
mod sync;
mod tls;
mod vaults;
mod watch;
mod writes;
