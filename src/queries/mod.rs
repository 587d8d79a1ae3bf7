//! The read calls every surface shares (`/v1` and MCP): note listings, line reads,
//! folders, links, history and revision bytes, search, grep, tags, aggregation and the
//! vault summary, each with its coverage. `api` and `mcp` read through these (and write
//! through `writes`), never through the stores directly. Reading never records, except
//! reconcile on read (`record::refresh`), which goes through the one recorder.

pub mod attachments;
pub mod history;
pub mod notes;
pub mod private;
pub mod rollups;
pub mod search;
pub mod settings;
pub mod status;
pub mod summary;
