//! The vault summary: `GET /v1/vault` and the MCP `vault_summary` tool call [`vault`].

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::Error;
use crate::state::State;
use crate::surface::blocking;

/// A status and its count.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatusCount {
    pub status: String,
    pub count: usize,
}

/// Private-notes (E2EE) state.
#[derive(Debug, Serialize, ToSchema)]
pub struct E2eeState {
    pub enabled: bool,
}

/// `GET /v1/vault`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VaultSummary {
    /// This vault's stable id: a token's `vault_id`, when it names one, must be this.
    pub vault_id: String,
    /// The vault folder on this machine.
    pub root: String,
    pub notes: usize,
    /// Files left out (unreadable, symlinks leaving the vault).
    pub excluded: usize,
    pub private_notes: usize,
    pub folders: usize,
    /// Distinct frontmatter tags.
    pub tags: usize,
    /// Bytes of all notes.
    pub bytes: u64,
    /// Notes by `status`.
    pub statuses: Vec<StatusCount>,
    pub write_policy: String,
    pub write_budget: u32,
    pub e2ee: E2eeState,
    pub committed_seq: i64,
    /// The change the search index reflects.
    pub indexed_seq: i64,
}

/// The summary every surface calls.
pub async fn vault(state: Arc<State>) -> Result<VaultSummary, Error> {
    let vault_id = state.vault_id.clone();
    let (s, e2ee) = blocking(move || {
        // Private notes are on once a key hierarchy is stored (`POST /v1/sync/e2ee:enable`).
        let e2ee = state.meta.e2ee_hierarchy()?.is_some();
        Ok((crate::queries::summary::summary(&state)?, e2ee))
    })
    .await?;
    Ok(VaultSummary {
        vault_id,
        root: s.root,
        notes: s.notes,
        excluded: s.excluded,
        private_notes: s.private,
        folders: s.folders,
        tags: s.tags,
        bytes: s.bytes,
        statuses: s
            .statuses
            .into_iter()
            .map(|(status, count)| StatusCount { status, count })
            .collect(),
        write_policy: s.settings.policy.as_str().to_string(),
        write_budget: s.settings.budget,
        e2ee: E2eeState { enabled: e2ee },
        committed_seq: s.committed_seq,
        indexed_seq: s.indexed_seq,
    })
}

/// Arguments of a tool that takes none.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}
