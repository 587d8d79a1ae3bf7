//! `GET /v1/folders`: its query string read into `surface::folders::ListFoldersParams`,
//! then the listing the MCP `list_folders` tool makes too.

use std::sync::Arc;

use axum::http::request::Parts;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::api::wire::{FolderList, Json};
use crate::state::State;
use crate::surface::folders::{list_folders, ListFoldersParams};
use crate::surface::notes::MAX_PAGE_SIZE;

/// List the vault's folders (derived from the notes in them), with note counts.
#[utoipa::path(
    get,
    path = "/v1/folders",
    operation_id = "list_folders",
    tag = "Notes",
    params(
        ("prefix" = Option<String>, Query, description = "Only folders whose path starts with this (e.g. `projects`)."),
        ("page_size" = Option<usize>, Query, description = "Folders per page, 1..500 (default 50)."),
        ("page_token" = Option<String>, Query, description = "`next_page_token` of the previous page, with the same other parameters."),
    ),
    responses(
        (status = 200, description = "Folders and coverage.", body = FolderList),
        (status = 400, description = "Bad parameter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn list(state: Arc<State>, parts: Parts) -> ApiResult<Json<FolderList>> {
    let q = Query::parse(parts.uri.query(), &["prefix", "page_size", "page_token"])?;
    let p = ListFoldersParams {
        prefix: q.owned("prefix"),
        page_size: q.opt_int("page_size", 1, MAX_PAGE_SIZE)?,
        page_token: q.owned("page_token"),
    };
    Ok(Json(list_folders(state, p).await?))
}
