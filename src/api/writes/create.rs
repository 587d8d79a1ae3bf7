//! `POST /v1/notes`: create a note (201 applied, 202 queued).

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::request::Parts;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::*;

/// `POST /v1/notes` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateNote {
    /// Where the note goes: the path without `.md` (`projects/new-idea`). Or give `title`
    /// (and `folder`) and the file is named after the title.
    pub slug: Option<String>,
    /// Folder for a note named after its `title` (one level deep at most when created).
    pub folder: Option<String>,
    pub title: Option<String>,
    /// The markdown body (after the frontmatter).
    #[serde(default)]
    pub content: String,
    pub tags: Option<Vec<String>>,
    pub status: Option<String>,
    /// More frontmatter keys (scalars or lists).
    #[schema(value_type = Option<Object>)]
    pub frontmatter: Option<Map<String, Value>>,
    pub agent_id: Option<String>,
}

/// Create a note.
#[utoipa::path(
    post,
    path = "/v1/notes",
    tag = "Notes",
    request_body = CreateNote,
    params(("Idempotency-Key" = String, Header, description = "Unique per distinct operation; a retry reuses it.")),
    responses(
        (status = 201, description = "Applied; the receipt embeds `note`.", body = Receipt),
        (status = 400, description = "Invalid request, unsafe path or missing Idempotency-Key.", body = ErrorEnvelope),
        (status = 409, description = "A note with that path exists.", body = ErrorEnvelope),
        (status = 422, description = "Idempotency-Key reused with another request.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn create(state: Arc<State>, parts: Parts, body: Bytes) -> ApiResult<Response> {
    let query = parts.uri.query().unwrap_or("");
    let raw = json_value(&parts.headers, &body)?;
    let request = create_request(query, &raw)?;
    let legacy = legacy_hash("POST /v1/notes", None, &raw, query, &request.agent_id);
    submit(state, &parts.headers, request, legacy, true).await
}

pub(super) fn create_request(query: &str, raw: &Value) -> Result<writes::Request, Error> {
    Query::parse(Some(query), &[])?;
    let req: CreateNote = parse_as(raw)?;
    writes::Request::create(writes::NewNote {
        slug: req.slug,
        folder: req.folder,
        title: req.title,
        content: req.content,
        tags: req.tags,
        status: req.status,
        frontmatter: req.frontmatter,
        agent_id: req.agent_id,
    })
}
