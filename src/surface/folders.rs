//! The folders of the vault, derived from the catalog: `GET /v1/folders` and the MCP
//! `list_folders` tool call [`list_folders`].

use std::sync::Arc;

use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::Error;
use crate::state::State;
use crate::surface::blocking;
use crate::surface::notes::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::surface::params::{self, PageTokens};
use crate::surface::wire::{Coverage, ExcludedNote, Folder, FolderList};

/// What a folder listing takes: `GET /v1/folders` and the MCP `list_folders` tool.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListFoldersParams {
    /// Only folders whose path starts with this, e.g. `projects` (the folder and the
    /// ones below it) or `projects/` (only the ones below it).
    pub prefix: Option<String>,
    /// Folders per page, 1..500 (default 50).
    #[schema(minimum = 1, maximum = 500)]
    pub page_size: Option<usize>,
    /// The `next_page_token` of the previous page; repeat the other parameters unchanged.
    pub page_token: Option<String>,
}

/// List folders by path prefix, with note counts and coverage (both surfaces).
pub async fn list_folders(state: Arc<State>, p: ListFoldersParams) -> Result<FolderList, Error> {
    let page_size = params::in_range(
        "page_size",
        p.page_size,
        DEFAULT_PAGE_SIZE,
        1,
        MAX_PAGE_SIZE,
    )?;
    let prefix = p.prefix.unwrap_or_default();
    state.paths.check_prefix(&prefix)?;
    let fingerprint = [("route", "folders"), ("prefix", prefix.as_str())];
    let tokens = PageTokens {
        key: &state.token_key,
    };
    let after = match params::non_empty("page_token", p.page_token.as_deref())? {
        Some(t) => Some(tokens.open(&fingerprint, t)?),
        None => None,
    };
    let state2 = state.clone();
    let prefix2 = prefix.clone();
    let listing = blocking(move || Ok(crate::queries::notes::folders(&state2, &prefix2))).await?;
    let matched: Vec<_> = listing.folders.iter().collect();
    // Notes inside the matched folders: the totals of the matched folders whose parent
    // did not match too.
    let notes_matched: usize = matched
        .iter()
        .filter(|f| {
            f.path
                .rsplit_once('/')
                .is_none_or(|(parent, _)| !parent.starts_with(prefix.as_str()))
        })
        .map(|f| f.notes_total)
        .sum();
    let start = match &after {
        Some(path) => matched.partition_point(|f| f.path.as_str() <= path.as_str()),
        None => 0,
    };
    let page: Vec<_> = matched.iter().skip(start).take(page_size).collect();
    let more = start + page.len() < matched.len();
    let next_page_token = more
        .then(|| page.last().map(|f| tokens.issue(&fingerprint, &f.path)))
        .flatten();
    Ok(FolderList {
        coverage: Coverage {
            notes_total: listing.total,
            notes_searched: listing.total,
            notes_matched,
            notes_returned: page.iter().map(|f| f.notes).sum(),
            truncated: next_page_token.is_some(),
            excluded_count: listing.excluded.len(),
            excluded_by_reason: crate::surface::wire::ExcludedCounts {
                unreadable: listing.excluded.len(),
                ..Default::default()
            },
            excluded: listing
                .excluded
                .iter()
                .take(100)
                .map(ExcludedNote::from)
                .collect(),
            indexed_seq: listing.committed_seq,
            committed_seq: listing.committed_seq,
            notes: vec![
                "Folders holding notes are listed at any depth; folders without a note only at the top two levels".into(),
            ],
            retrievers: None,
        },
        folders: page.into_iter().map(|f| Folder::from(*f)).collect(),
        next_page_token,
    })
}
