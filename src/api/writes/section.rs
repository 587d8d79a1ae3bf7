//! `POST /v1/notes/{note}:append` and `POST /v1/notes/{note}:replaceSection`: edits by
//! heading (`writes::sections`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::request::Parts;
use axum::response::Response;
use serde::Deserialize;
use utoipa::ToSchema;

use super::*;

/// `:append` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendNote {
    /// 1..100000 characters, added as whole lines.
    pub content: String,
    /// A heading's text (`Tasks` or `## Tasks`): append at the end of its section
    /// rather than at the end of the note; it must occur exactly once.
    pub heading: Option<String>,
    /// The version read (UUID); when given, the append is refused with
    /// `VERSION_MOVED` if the note changed since.
    pub version_id: Option<String>,
    /// 1..100 characters, default `unknown`.
    pub agent_id: Option<String>,
}

/// `:replaceSection` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplaceSection {
    /// A heading's text (`Tasks` or `## Tasks`) occurring exactly once; its section
    /// runs to the next heading of the same or a higher level.
    pub heading: String,
    /// What the section holds after the heading line (0..100000 characters).
    pub content: String,
    /// The version read (UUID).
    pub version_id: String,
    /// 1..100 characters, default `unknown`.
    pub agent_id: Option<String>,
}

/// Append to a note, at its end or at the end of a heading's section.
#[utoipa::path(
    post,
    path = "/v1/notes/{note}:append",
    tag = "Notes",
    request_body = AppendNote,
    params(
        ("note" = String, Path, description = "A note_id, or a slug with `/` raw or as `%2F`.", min_length = 1),
        ("Idempotency-Key" = String, Header, description = "Unique per distinct operation."),
    ),
    responses(
        (status = 200, description = "Applied.", body = Receipt),
        (status = 202, description = "Queued for review.", body = Receipt),
        (status = 400, description = "Invalid request.", body = ErrorEnvelope),
        (status = 404, description = "No such note.", body = ErrorEnvelope),
        (status = 409, description = "`VERSION_MOVED`: the note changed since `version_id`.", body = ErrorEnvelope),
        (status = 422, description = "`EDIT_MATCH_NOT_FOUND` (no such heading), `EDIT_AMBIGUOUS` (with `candidate_lines`) or a reused key.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn append(
    state: Arc<State>,
    note: String,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Response> {
    let query = parts.uri.query().unwrap_or("");
    Query::parse(Some(query), &[])?;
    let raw = json_value(&parts.headers, &body)?;
    let req: AppendNote = parse_as(&raw)?;
    let request = writes::Request::section(
        note.clone(),
        req.version_id,
        req.heading,
        req.content,
        false,
        req.agent_id,
    )?;
    let legacy = legacy_hash(
        "POST /v1/notes/{note}:append",
        Some(&note),
        &raw,
        query,
        &request.agent_id,
    );
    submit(state, &parts.headers, request, legacy, false).await
}

/// Replace what a heading's section holds (the heading line stays).
#[utoipa::path(
    post,
    path = "/v1/notes/{note}:replaceSection",
    tag = "Notes",
    request_body = ReplaceSection,
    params(
        ("note" = String, Path, description = "A note_id, or a slug with `/` raw or as `%2F`.", min_length = 1),
        ("Idempotency-Key" = String, Header, description = "Unique per distinct operation."),
    ),
    responses(
        (status = 200, description = "Applied.", body = Receipt),
        (status = 202, description = "Queued for review.", body = Receipt),
        (status = 400, description = "Invalid request.", body = ErrorEnvelope),
        (status = 404, description = "No such note.", body = ErrorEnvelope),
        (status = 409, description = "`VERSION_MOVED`: the note changed since `version_id`.", body = ErrorEnvelope),
        (status = 422, description = "`EDIT_MATCH_NOT_FOUND` (no such heading), `EDIT_AMBIGUOUS` (with `candidate_lines`) or a reused key.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn replace_section(
    state: Arc<State>,
    note: String,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Response> {
    let query = parts.uri.query().unwrap_or("");
    Query::parse(Some(query), &[])?;
    let raw = json_value(&parts.headers, &body)?;
    let req: ReplaceSection = parse_as(&raw)?;
    let request = writes::Request::section(
        note.clone(),
        Some(req.version_id),
        Some(req.heading),
        req.content,
        true,
        req.agent_id,
    )?;
    let legacy = legacy_hash(
        "POST /v1/notes/{note}:replaceSection",
        Some(&note),
        &raw,
        query,
        &request.agent_id,
    );
    submit(state, &parts.headers, request, legacy, false).await
}
