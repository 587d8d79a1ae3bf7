//! `POST /v1/notes/{note}:rollback`: restore a listed revision as a new revision.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::request::Parts;
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::*;

/// `:rollback` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackNote {
    /// The listed revision to restore (`revision_id` / `version_id` of a revision entry).
    pub revision_id: String,
    /// Precondition: the note's current version.
    pub version_id: Option<String>,
    pub agent_id: Option<String>,
}

/// Restore a listed revision as a new revision (also of a deleted note).
#[utoipa::path(
    post,
    path = "/v1/notes/{note}:rollback",
    tag = "Review",
    request_body = RollbackNote,
    params(
        ("note" = String, Path, description = "A note_id, or a slug with `/` raw or as `%2F` (a deleted note too).", min_length = 1),
        ("Idempotency-Key" = String, Header, description = "Unique per distinct operation."),
    ),
    responses(
        (status = 200, description = "Applied.", body = Receipt),
        (status = 201, description = "Applied: a deleted note was restored.", body = Receipt),
        (status = 202, description = "Queued for review.", body = Receipt),
        (status = 400, description = "Invalid request.", body = ErrorEnvelope),
        (status = 404, description = "`VERSION_NOT_FOUND` (unknown id, or a revision of another note) or no such note.", body = ErrorEnvelope),
        (status = 409, description = "The note changed since `version_id`, or its path is taken.", body = ErrorEnvelope),
        (status = 422, description = "Idempotency-Key reused, or writes refused.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited or write budget spent.", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn rollback(
    state: Arc<State>,
    note: String,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Response> {
    let query = parts.uri.query().unwrap_or("");
    let raw = json_value(&parts.headers, &body)?;
    let request = rollback_request(note.clone(), query, &raw)?;
    let legacy = legacy_hash(
        "POST /v1/notes/{note}:rollback",
        Some(&note),
        &raw,
        query,
        &request.agent_id,
    );
    submit(state, &parts.headers, request, legacy, false).await
}

pub(super) fn rollback_request(
    note: String,
    query: &str,
    raw: &Value,
) -> Result<writes::Request, Error> {
    Query::parse(Some(query), &[])?;
    let req: RollbackNote = parse_as(raw)?;
    writes::Request::rollback(note, req.revision_id, req.version_id, req.agent_id)
}
