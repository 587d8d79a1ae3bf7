//! Folder writes over HTTP: `POST /v1/folders` (create), `POST /v1/folders:move`,
//! `POST /v1/folders:rename` and `POST /v1/folders:delete`. A folder's identity is its
//! vault-relative `path` in the JSON body (the interface's `/v1/folders` row), so the
//! AIP-136 custom methods sit on the collection. Each validates into a `writes::Op` and
//! goes through the one pipeline: `Idempotency-Key`, `agent_id`, the review policy (a
//! move or delete is destructive), the budget.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::request::Parts;
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::wire::FolderReceipt;

use super::*;

/// `POST /v1/folders` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateFolder {
    /// The folder to make, e.g. `projects/alpha`: at most one nested level, its parent
    /// existing.
    pub path: String,
    pub agent_id: Option<String>,
}

/// `POST /v1/folders:move` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveFolder {
    /// The folder to move.
    pub path: String,
    /// The folder it moves into (`""` for the vault's top).
    pub folder: String,
    pub agent_id: Option<String>,
}

/// `POST /v1/folders:rename` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameFolder {
    /// The folder to rename.
    pub path: String,
    /// Its new name in the same parent (no `/`).
    pub name: String,
    pub agent_id: Option<String>,
}

/// `POST /v1/folders:delete` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteFolder {
    /// The folder to delete.
    pub path: String,
    /// Also delete a folder that holds files: they move to `.trash/<path>` and each note
    /// in it gets a delete revision. Without it only an empty folder is deleted.
    #[serde(default)]
    pub trash_notes: bool,
    pub agent_id: Option<String>,
}

/// Answer a folder request: validated, through the pipeline.
async fn folder_write(
    state: Arc<State>,
    parts: &Parts,
    route: &str,
    raw: &Value,
    request: writes::Request,
) -> ApiResult<Response> {
    let legacy = legacy_hash(route, None, raw, "", &request.agent_id);
    submit(state, &parts.headers, request, legacy, false).await
}

/// Make an empty folder.
#[utoipa::path(
    post,
    path = "/v1/folders",
    tag = "Notes",
    request_body = CreateFolder,
    params(("Idempotency-Key" = String, Header, description = "Unique per distinct operation.")),
    responses(
        (status = 201, description = "Created; a history commit records it.", body = FolderReceipt),
        (status = 202, description = "Queued for review.", body = FolderReceipt),
        (status = 400, description = "`VALIDATION_FAILED` (deeper than `a/b`), `UNSAFE_PATH`.", body = ErrorEnvelope),
        (status = 404, description = "`FOLDER_NOT_FOUND`: the parent does not exist.", body = ErrorEnvelope),
        (status = 409, description = "`NAME_COLLISION`: something is there already.", body = ErrorEnvelope),
        (status = 422, description = "Idempotency-Key reused.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn create_folder(state: Arc<State>, parts: Parts, body: Bytes) -> ApiResult<Response> {
    let (raw, req): (Value, CreateFolder) = parsed(&parts, &body)?;
    let request = writes::Request::create_folder(req.path, req.agent_id)?;
    folder_write(state, &parts, "POST /v1/folders", &raw, request).await
}

/// Move a folder, with everything in it, into another folder; links to its notes are
/// rewritten.
#[utoipa::path(
    post,
    path = "/v1/folders:move",
    tag = "Notes",
    request_body = MoveFolder,
    params(("Idempotency-Key" = String, Header, description = "Unique per distinct operation.")),
    responses(
        (status = 200, description = "Applied; `links_updated` and `links_failed` report the link rewrites.", body = FolderReceipt),
        (status = 202, description = "Queued for review.", body = FolderReceipt),
        (status = 400, description = "Invalid request or unsafe path.", body = ErrorEnvelope),
        (status = 404, description = "`FOLDER_NOT_FOUND`.", body = ErrorEnvelope),
        (status = 409, description = "`NAME_COLLISION`: the target exists.", body = ErrorEnvelope),
        (status = 422, description = "Idempotency-Key reused.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn move_folder(state: Arc<State>, parts: Parts, body: Bytes) -> ApiResult<Response> {
    let (raw, req): (Value, MoveFolder) = parsed(&parts, &body)?;
    let request = writes::Request::move_folder(req.path, req.folder, req.agent_id)?;
    folder_write(state, &parts, "POST /v1/folders:move", &raw, request).await
}

/// Rename a folder in its parent; links to its notes are rewritten.
#[utoipa::path(
    post,
    path = "/v1/folders:rename",
    tag = "Notes",
    request_body = RenameFolder,
    params(("Idempotency-Key" = String, Header, description = "Unique per distinct operation.")),
    responses(
        (status = 200, description = "Applied; `links_updated` and `links_failed` report the link rewrites.", body = FolderReceipt),
        (status = 202, description = "Queued for review.", body = FolderReceipt),
        (status = 400, description = "Invalid request or unsafe path.", body = ErrorEnvelope),
        (status = 404, description = "`FOLDER_NOT_FOUND`.", body = ErrorEnvelope),
        (status = 409, description = "`NAME_COLLISION`: the target exists.", body = ErrorEnvelope),
        (status = 422, description = "Idempotency-Key reused.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn rename_folder(state: Arc<State>, parts: Parts, body: Bytes) -> ApiResult<Response> {
    let (raw, req): (Value, RenameFolder) = parsed(&parts, &body)?;
    let request = writes::Request::rename_folder(req.path, req.name, req.agent_id)?;
    folder_write(state, &parts, "POST /v1/folders:rename", &raw, request).await
}

/// Delete a folder: an empty one, or with `trash_notes` one whose files move to
/// `.trash/`.
#[utoipa::path(
    post,
    path = "/v1/folders:delete",
    tag = "Notes",
    request_body = DeleteFolder,
    params(("Idempotency-Key" = String, Header, description = "Unique per distinct operation.")),
    responses(
        (status = 200, description = "Applied.", body = FolderReceipt),
        (status = 202, description = "Queued for review.", body = FolderReceipt),
        (status = 400, description = "`VALIDATION_FAILED` (not empty and no `trash_notes`), `UNSAFE_PATH`.", body = ErrorEnvelope),
        (status = 404, description = "`FOLDER_NOT_FOUND`.", body = ErrorEnvelope),
        (status = 422, description = "Idempotency-Key reused.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn delete_folder(state: Arc<State>, parts: Parts, body: Bytes) -> ApiResult<Response> {
    let (raw, req): (Value, DeleteFolder) = parsed(&parts, &body)?;
    let request = writes::Request::delete_folder(req.path, req.trash_notes, req.agent_id)?;
    folder_write(state, &parts, "POST /v1/folders:delete", &raw, request).await
}
