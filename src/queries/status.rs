//! How fresh the daemon's view is (`GET /v1/index-status`), the pending-write queue as
//! reviewers read it, and the small lookups the route table makes.

use std::time::Duration;

use crate::error::Result;
use crate::history::HistoryStatus;
use crate::index::IndexState;
use crate::state::{State, WatchStatus};
use crate::storage::rows::PendingRow;

/// Everything `GET /v1/index-status` reports, read at one moment.
#[derive(Debug, Clone)]
pub struct Status {
    pub committed_seq: i64,
    pub indexed_seq: i64,
    pub notes: usize,
    pub excluded: usize,
    pub index: IndexState,
    pub watcher: WatchStatus,
    pub history: HistoryStatus,
    pub start_scan: crate::vault::scan_cache::StartScan,
    pub vectors: crate::index::embed::VectorStatus,
}

pub fn status(state: &State) -> Status {
    let (notes, excluded) = {
        let c = state.catalog.read();
        (c.len(), c.excluded.len())
    };
    Status {
        committed_seq: state.committed_seq(),
        indexed_seq: state.index.indexed_seq(),
        notes,
        excluded,
        index: state.index.state(),
        watcher: state.watch_status.lock().clone(),
        history: state.history.status(),
        start_scan: state.unread.start_scan(),
        vectors: state.index.vectors.status(),
    }
}

/// Whether a note id or slug names a note of the catalog (the route table's test for a
/// slug that ends like a method).
pub fn note_exists(state: &State, key: &str) -> bool {
    state.catalog.read().find(key).is_some()
}

/// Wait until the search index holds every change up to `seq`; `false` after `timeout`.
pub async fn wait_indexed(state: &State, seq: i64, timeout: Duration) -> bool {
    state.index.wait_for(seq, timeout).await
}

/// Every pending write (decided ones too), newest first as the store keeps them.
pub fn pending_writes(state: &State) -> Result<Vec<PendingRow>> {
    state.meta.all_pending()
}

/// One pending write by id.
pub fn pending_write(state: &State, id: &str) -> Result<Option<PendingRow>> {
    state.meta.pending(id)
}
