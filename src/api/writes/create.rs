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

/// Characters a file name may not hold (Obsidian's set plus the path separators).
fn file_name_of(title: &str) -> String {
    let name: String = title
        .chars()
        .map(|c| {
            if "/\\:*?\"<>|#^[]".contains(c) || c.is_control() {
                '-'
            } else {
                c
            }
        })
        .collect();
    name.trim().trim_matches('.').to_string()
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
    let prepared = prepare_create(
        parts.uri.query().unwrap_or(""),
        json_value(&parts.headers, &body)?,
    )?;
    submit(state, &parts.headers, prepared).await
}

pub(super) fn prepare_create(query: &str, raw: Value) -> Result<Prepared, Error> {
    Query::parse(Some(query), &[])?;
    let req: CreateNote = parse_as(&raw)?;
    let agent = agent_id(req.agent_id.clone())?;
    check_len("content", &req.content, 0, MAX_BODY)?;
    let mut keys = Vec::new();
    let slug = match (&req.slug, &req.title) {
        (Some(slug), _) => {
            if req.folder.is_some() {
                return Err(Error::invalid_field(
                    "folder",
                    "give either `slug` or `folder` with `title`, not both",
                ));
            }
            let slug = slug
                .strip_suffix(".md")
                .unwrap_or(slug)
                .trim_end_matches('/')
                .to_string();
            check_len("slug", &slug, 1, 512)?;
            if let Some(title) = &req.title {
                keys.push(("title".to_string(), FmValue::Scalar(title.clone())));
            }
            slug
        }
        (None, Some(title)) => {
            let name = file_name_of(title);
            if name.is_empty() {
                return Err(Error::invalid_field("title", "gives an empty file name"));
            }
            if name != *title {
                keys.push(("title".to_string(), FmValue::Scalar(title.clone())));
            }
            match req.folder.as_deref().map(|f| f.trim_end_matches('/')) {
                Some(folder) if !folder.is_empty() => format!("{folder}/{name}"),
                _ => name,
            }
        }
        (None, None) => {
            return Err(Error::invalid_field(
                "slug",
                "give `slug`, or `title` (and `folder`)",
            ))
        }
    };
    if let Some(tags) = &req.tags {
        keys.push(("tags".into(), FmValue::List(tags.clone())));
    }
    if let Some(status) = &req.status {
        keys.push(("status".into(), FmValue::Scalar(status.clone())));
    }
    for (key, value) in req.frontmatter.iter().flatten() {
        let field = format!("frontmatter.{key}");
        check_fm_key(&field, key)?;
        if let Some(v) = fm_value(&field, value)? {
            keys.push((key.clone(), v));
        }
    }
    let op = Op::Create {
        slug,
        body: req.content,
        keys,
    };
    Ok(Prepared {
        route: "POST /v1/notes",
        note: None,
        query: query.to_string(),
        body: raw,
        agent,
        op,
        embed_note: true,
    })
}
