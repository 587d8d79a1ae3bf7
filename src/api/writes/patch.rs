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
    let prepared = prepare_patch(
        note,
        parts.uri.query().unwrap_or(""),
        json_value(&parts.headers, &body)?,
    )?;
    submit(state, &parts.headers, prepared).await
}

pub(super) fn prepare_patch(note: String, query: &str, raw: Value) -> Result<Prepared, Error> {
    let q = Query::parse(Some(query), &["update_mask"])?;
    let mask = q.str("update_mask").unwrap_or("").to_string();
    let entries: Vec<&str> = mask
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    if entries.is_empty() {
        return Err(Error::new(
            Reason::INVALID_UPDATE_MASK,
            "update_mask is required",
        ));
    }
    let req: PatchNote = parse_as(&raw)?;
    let agent = agent_id(req.agent_id.clone())?;
    let version_id = version_field("version_id", req.version_id.clone())?;
    let mut changes = Vec::new();
    for entry in &entries {
        let change = match *entry {
            "title" => match &req.title {
                Some(t) => PatchChange::SetKey("title".into(), FmValue::Scalar(t.clone())),
                None => PatchChange::RemoveKey("title".into()),
            },
            "status" => match &req.status {
                Some(s) => PatchChange::SetKey("status".into(), FmValue::Scalar(s.clone())),
                None => PatchChange::RemoveKey("status".into()),
            },
            "tags" => match &req.tags {
                Some(t) => PatchChange::SetKey("tags".into(), FmValue::List(t.clone())),
                None => PatchChange::RemoveKey("tags".into()),
            },
            "content" => {
                let content = req.content.clone().unwrap_or_default();
                check_len("content", &content, 0, MAX_BODY)?;
                PatchChange::Content(content)
            }
            "folder" => PatchChange::Folder(req.folder.clone().unwrap_or_default()),
            other => match other.strip_prefix("frontmatter.") {
                Some(key) => {
                    let field = format!("frontmatter.{key}");
                    check_fm_key(&field, key).map_err(|e| Error::new(Reason::INVALID_UPDATE_MASK, e.message))?;
                    match req.frontmatter.as_ref().and_then(|m| m.get(key)) {
                        Some(v) => match fm_value(&field, v)? {
                            Some(v) => PatchChange::SetKey(key.to_string(), v),
                            None => PatchChange::RemoveKey(key.to_string()),
                        },
                        None => PatchChange::RemoveKey(key.to_string()),
                    }
                }
                None => {
                    return Err(Error::new(
                        Reason::INVALID_UPDATE_MASK,
                        format!("{other:?} cannot be updated; the mask lists only title, content, folder, tags, status, frontmatter.<key>"),
                    )
                    .with_meta("update_mask", mask.clone())
                    )
                }
            },
        };
        changes.push(change);
    }
    let op = Op::Patch {
        note: note.clone(),
        version_id,
        changes,
    };
    Ok(Prepared {
        route: "PATCH /v1/notes/{note}",
        note: Some(note.clone()),
        query: query.to_string(),
        body: raw,
        agent,
        op,
        embed_note: true,
    })
}
