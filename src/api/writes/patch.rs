//! `PATCH /v1/notes/{note}` with `update_mask`: frontmatter keys, the body, the folder.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::request::Parts;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::*;

/// `PATCH /v1/notes/{note}` body: the fields named in `update_mask`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchNote {
    pub title: Option<String>,
    /// The new body after the frontmatter.
    pub content: Option<String>,
    /// Move the note into this folder (`""` for the vault root).
    pub folder: Option<String>,
    pub tags: Option<Vec<String>>,
    pub status: Option<String>,
    /// Values for `frontmatter.<key>` mask entries; null removes the key.
    #[schema(value_type = Option<Object>)]
    pub frontmatter: Option<Map<String, Value>>,
    /// Precondition: the version the change was made against.
    pub version_id: Option<String>,
    pub agent_id: Option<String>,
}

/// Update fields of a note named by `update_mask`.
#[utoipa::path(
    patch,
    path = "/v1/notes/{note}",
    tag = "Notes",
    request_body = PatchNote,
    params(
        ("note" = String, Path, description = "A note_id, or a slug with `/` raw or as `%2F`.", min_length = 1),
        ("update_mask" = String, Query, description = "Comma-separated: `title`, `content`, `folder`, `tags`, `status`, `frontmatter.<key>`. A masked field absent from the body is cleared."),
        ("Idempotency-Key" = String, Header, description = "Unique per distinct operation."),
    ),
    responses(
        (status = 200, description = "Applied; the receipt embeds `note`.", body = Receipt),
        (status = 400, description = "Invalid mask or body.", body = ErrorEnvelope),
        (status = 404, description = "No such note.", body = ErrorEnvelope),
        (status = 409, description = "The note changed since `version_id`.", body = ErrorEnvelope),
        (status = 422, description = "Idempotency-Key reused.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn patch(
    state: Arc<State>,
    note: String,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Response> {
    let query = parts.uri.query().unwrap_or("");
    let raw = json_value(&parts.headers, &body)?;
    let request = patch_request(note.clone(), query, &raw)?;
    let legacy = legacy_hash(
        "PATCH /v1/notes/{note}",
        Some(&note),
        &raw,
        query,
        &request.agent_id,
    );
    submit(state, &parts.headers, request, legacy, true).await
}

pub(super) fn patch_request(
    note: String,
    query: &str,
    raw: &Value,
) -> Result<writes::Request, Error> {
    let q = Query::parse(Some(query), &["update_mask"])?;
    let mask = q.str("update_mask").unwrap_or("");
    writes::request::mask_entries(mask)?;
    let req: PatchNote = parse_as(raw)?;
    writes::Request::patch(
        note,
        mask,
        writes::NotePatch {
            title: req.title,
            content: req.content,
            folder: req.folder,
            tags: req.tags,
            status: req.status,
            frontmatter: req.frontmatter,
            version_id: req.version_id,
            agent_id: req.agent_id,
        },
    )
}
