//! `DELETE /v1/notes/{note}`: the note goes to `.trash/`.

use std::sync::Arc;

use axum::http::request::Parts;
use axum::response::Response;
use serde_json::Value;

use super::*;

/// Delete a note: the file moves to the vault's `.trash/` and history records the delete.
#[utoipa::path(
    delete,
    path = "/v1/notes/{note}",
    tag = "Notes",
    params(
        ("note" = String, Path, description = "A note_id, or a slug with `/` raw or as `%2F`.", min_length = 1),
        ("version_id" = Option<String>, Query, description = "Precondition: the version being deleted."),
        ("agent_id" = Option<String>, Query, description = "Who asks (1..100 characters, default `unknown`)."),
        ("Idempotency-Key" = String, Header, description = "Unique per distinct operation."),
    ),
    responses(
        (status = 200, description = "Applied.", body = Receipt),
        (status = 400, description = "Invalid request.", body = ErrorEnvelope),
        (status = 404, description = "No such note.", body = ErrorEnvelope),
        (status = 409, description = "The note changed since `version_id`.", body = ErrorEnvelope),
        (status = 422, description = "Idempotency-Key reused.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn delete(state: Arc<State>, note: String, parts: Parts) -> ApiResult<Response> {
    let request = delete_request(note.clone(), parts.uri.query().unwrap_or(""))?;
    let version = match &request.op {
        writes::Op::Delete { version_id, .. } => version_id.clone().unwrap_or_default(),
        _ => String::new(),
    };
    let legacy = legacy_hash(
        "DELETE /v1/notes/{note}",
        Some(&note),
        &Value::Null,
        &version,
        &request.agent_id,
    );
    submit(state, &parts.headers, request, legacy, false).await
}

pub(super) fn delete_request(note: String, query: &str) -> Result<writes::Request, Error> {
    let q = Query::parse(Some(query), &["version_id", "agent_id"])?;
    writes::Request::delete(
        note,
        q.str("version_id").map(str::to_string),
        q.str("agent_id").map(str::to_string),
    )
}
