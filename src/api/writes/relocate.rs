//! `POST /v1/notes/{note}:move` and `:rename`: a new folder or a new name; links to the note are rewritten.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::request::Parts;
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::*;

/// `:move` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveNote {
    /// The destination folder (`""` for the vault root; created one level deep at most).
    pub folder: String,
    pub version_id: Option<String>,
    pub agent_id: Option<String>,
}

/// Move a note to another folder; links to it are rewritten.
#[utoipa::path(
    post,
    path = "/v1/notes/{note}:move",
    tag = "Notes",
    request_body = MoveNote,
    params(
        ("note" = String, Path, description = "A note_id, or a slug with `/` raw or as `%2F`.", min_length = 1),
        ("Idempotency-Key" = String, Header, description = "Unique per distinct operation."),
    ),
    responses(
        (status = 200, description = "Applied; `links_updated` and `links_failed` report the link rewrites.", body = Receipt),
        (status = 400, description = "Invalid request or unsafe path.", body = ErrorEnvelope),
        (status = 404, description = "No such note.", body = ErrorEnvelope),
        (status = 409, description = "The target exists, or the note changed.", body = ErrorEnvelope),
        (status = 422, description = "Idempotency-Key reused.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn move_(
    state: Arc<State>,
    note: String,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Response> {
    let query = parts.uri.query().unwrap_or("");
    let raw = json_value(&parts.headers, &body)?;
    let request = move_request(note.clone(), query, &raw)?;
    let legacy = legacy_hash(
        "POST /v1/notes/{note}:move",
        Some(&note),
        &raw,
        query,
        &request.agent_id,
    );
    submit(state, &parts.headers, request, legacy, false).await
}

pub(super) fn move_request(
    note: String,
    query: &str,
    raw: &Value,
) -> Result<writes::Request, Error> {
    Query::parse(Some(query), &[])?;
    let req: MoveNote = parse_as(raw)?;
    writes::Request::move_note(note, req.folder, req.version_id, req.agent_id)
}

/// `:rename` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameNote {
    /// The new file name, without folder (`.md` optional).
    pub name: String,
    pub version_id: Option<String>,
    pub agent_id: Option<String>,
}

/// Rename a note in its folder; links to it are rewritten.
#[utoipa::path(
    post,
    path = "/v1/notes/{note}:rename",
    tag = "Notes",
    request_body = RenameNote,
    params(
        ("note" = String, Path, description = "A note_id, or a slug with `/` raw or as `%2F`.", min_length = 1),
        ("Idempotency-Key" = String, Header, description = "Unique per distinct operation."),
    ),
    responses(
        (status = 200, description = "Applied; `renamed` is true.", body = Receipt),
        (status = 400, description = "Invalid request or unsafe name.", body = ErrorEnvelope),
        (status = 404, description = "No such note.", body = ErrorEnvelope),
        (status = 409, description = "The target exists, or the note changed.", body = ErrorEnvelope),
        (status = 422, description = "Idempotency-Key reused.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn rename(
    state: Arc<State>,
    note: String,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Response> {
    let query = parts.uri.query().unwrap_or("");
    let raw = json_value(&parts.headers, &body)?;
    let request = rename_request(note.clone(), query, &raw)?;
    let legacy = legacy_hash(
        "POST /v1/notes/{note}:rename",
        Some(&note),
        &raw,
        query,
        &request.agent_id,
    );
    submit(state, &parts.headers, request, legacy, false).await
}

pub(super) fn rename_request(
    note: String,
    query: &str,
    raw: &Value,
) -> Result<writes::Request, Error> {
    Query::parse(Some(query), &[])?;
    let req: RenameNote = parse_as(raw)?;
    writes::Request::rename(note, req.name, req.version_id, req.agent_id)
}
