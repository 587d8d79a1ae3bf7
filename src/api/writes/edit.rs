//! `POST /v1/notes/{note}:edit`: replace one exact string.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::request::Parts;
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::*;

/// `:edit` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EditNote {
    /// The version the edit was made against (UUID).
    pub version_id: String,
    /// 1..100000 characters; must occur exactly once in the current file.
    pub old_string: String,
    /// 0..100000 characters.
    pub new_string: String,
    /// 1..100 characters, default `unknown`.
    pub agent_id: Option<String>,
}

/// Replace a unique substring of a note.
#[utoipa::path(
    post,
    path = "/v1/notes/{note}:edit",
    tag = "Notes",
    request_body = EditNote,
    params(
        ("note" = String, Path, description = "A note_id, or a slug with `/` raw or as `%2F`.", min_length = 1),
        ("Idempotency-Key" = String, Header, description = "Unique per distinct operation."),
    ),
    responses(
        (status = 200, description = "Applied.", body = Receipt),
        (status = 400, description = "Invalid request.", body = ErrorEnvelope),
        (status = 404, description = "No such note.", body = ErrorEnvelope),
        (status = 409, description = "`VERSION_MOVED`: the note changed since `version_id`.", body = ErrorEnvelope),
        (status = 422, description = "`EDIT_AMBIGUOUS` (with `candidate_lines`), `EDIT_MATCH_NOT_FOUND` or a reused key.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn edit(
    state: Arc<State>,
    note: String,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Response> {
    let query = parts.uri.query().unwrap_or("");
    let raw = json_value(&parts.headers, &body)?;
    let request = edit_request(note.clone(), query, &raw)?;
    let legacy = legacy_hash(
        "POST /v1/notes/{note}:edit",
        Some(&note),
        &raw,
        query,
        &request.agent_id,
    );
    submit(state, &parts.headers, request, legacy, false).await
}

pub(super) fn edit_request(
    note: String,
    query: &str,
    raw: &Value,
) -> Result<writes::Request, Error> {
    Query::parse(Some(query), &[])?;
    let req: EditNote = parse_as(raw)?;
    writes::Request::edit(
        note,
        req.version_id,
        req.old_string,
        req.new_string,
        req.agent_id,
    )
}
