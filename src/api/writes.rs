//! Note writes over HTTP: create, PATCH with `update_mask`, delete, `:edit`, `:move`,
//! `:rename` (and the legacy slash forms). Each handler validates the request into a
//! `writes::Op` and hands it to the one pipeline with its idempotency key.
//!
//! Success codes: 201 for an applied create, 202 for a queued write, 200 otherwise; an
//! idempotent replay returns the original status and body byte for byte.

use std::sync::{Arc, OnceLock};

use axum::body::{Body, Bytes};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::notes::blocking;
use crate::api::params::Query;
use crate::api::wire::{NoteHandle, Receipt};
use crate::error::{Error, Reason};
use crate::state::State;
use crate::vault::frontmatter::FmValue;
use crate::writes::{self, Idempotency, Op, PatchChange, ReceiptStatus};

/// Largest request body (a whole note plus JSON).
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// `agent_id`: 1..100 characters, default `unknown`; it grants nothing.
fn agent_id(value: Option<String>) -> Result<String, Error> {
    match value {
        None => Ok("unknown".into()),
        Some(a) if (1..=100).contains(&a.chars().count()) && !a.chars().any(char::is_control) => {
            Ok(a)
        }
        Some(_) => Err(Error::invalid_field(
            "agent_id",
            "must be 1 to 100 characters, without control characters",
        )),
    }
}

/// The spec's UUID pattern: versions 1-8, variant 8/9/a/b, or the nil or all-f UUID.
pub fn is_spec_uuid(s: &str) -> bool {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(
            r"^(?i:[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$",
        )
        .expect("valid regex")
    })
    .is_match(s)
}

fn version_field(field: &str, value: Option<String>) -> Result<Option<String>, Error> {
    match value {
        Some(v) if !is_spec_uuid(&v) => Err(Error::invalid_field(
            field,
            "must be a UUID (versions 1-8, or the nil or max UUID)",
        )),
        other => Ok(other.map(|v| v.to_lowercase())),
    }
}

fn idempotency_key(headers: &HeaderMap) -> Result<String, Error> {
    let Some(value) = headers.get("idempotency-key") else {
        return Err(Error::new(
            Reason::IDEMPOTENCY_KEY_MISSING,
            "writes need an Idempotency-Key header",
        ));
    };
    match value.to_str() {
        Ok(k) if (1..=255).contains(&k.len()) && k.chars().all(|c| c.is_ascii_graphic()) => {
            Ok(k.to_string())
        }
        _ => Err(Error::invalid_field(
            "Idempotency-Key",
            "must be 1 to 255 visible ASCII characters",
        )),
    }
}

/// Parse a JSON object body, naming the problem on any error.
pub(crate) fn json_value(headers: &HeaderMap, body: &Bytes) -> Result<Value, Error> {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime != "application/json" && !mime.ends_with("+json") {
        return Err(Error::invalid_field(
            "Content-Type",
            format!("must be application/json, got {content_type:?}"),
        ));
    }
    let raw: Value = serde_json::from_slice(body)
        .map_err(|e| Error::invalid_field("body", format!("is not valid JSON: {e}")))?;
    if !raw.is_object() {
        return Err(Error::invalid_field("body", "must be a JSON object"));
    }
    Ok(raw)
}

fn check_len(field: &str, value: &str, min: usize, max: usize) -> Result<(), Error> {
    let n = value.chars().count();
    if n < min || n > max {
        return Err(Error::invalid_field(
            field,
            format!("must be {min} to {max} characters, got {n}"),
        ));
    }
    Ok(())
}

/// Turn a JSON value into a frontmatter value: strings quoted as needed, numbers and
/// booleans plain, lists of scalars as lists. `None` for null (remove the key).
fn fm_value(field: &str, value: &Value) -> Result<Option<FmValue>, Error> {
    Ok(Some(match value {
        Value::Null => return Ok(None),
        Value::String(s) => FmValue::Scalar(s.clone()),
        Value::Number(n) => FmValue::Plain(n.to_string()),
        Value::Bool(b) => FmValue::Plain(b.to_string()),
        Value::Array(items) => FmValue::List(
            items
                .iter()
                .map(|i| match i {
                    Value::String(s) => Ok(s.clone()),
                    Value::Number(n) => Ok(n.to_string()),
                    Value::Bool(b) => Ok(b.to_string()),
                    _ => Err(Error::invalid_field(
                        field,
                        "list items must be strings, numbers or booleans",
                    )),
                })
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(_) => {
            return Err(Error::invalid_field(
                field,
                "nested mappings are not supported; set scalar or list values",
            ))
        }
    }))
}

fn check_fm_key(field: &str, key: &str) -> Result<(), Error> {
    if key.is_empty()
        || key.len() > 200
        || key.contains(['\n', '\r'])
        || key.trim() != key
        || key.starts_with('#')
    {
        return Err(Error::invalid_field(
            field,
            "a frontmatter key must be 1 to 200 characters, without newlines or surrounding spaces",
        ));
    }
    Ok(())
}

/// The op hash: route, note, canonical body, the write-relevant query, agent.
fn op_hash(route: &str, note: Option<&str>, body: &Value, query: &str, agent: &str) -> String {
    let mut h = blake3::Hasher::new();
    for part in [route, note.unwrap_or(""), &body.to_string(), query, agent] {
        h.update(part.as_bytes());
        h.update(&[0]);
    }
    h.finalize().to_hex().to_string()
}

/// A receipt as the API answers it: `(status, JSON body)`.
pub fn render(receipt: &writes::Receipt, embed_note: bool) -> (u16, String) {
    let status = match (receipt.status, receipt.created) {
        (ReceiptStatus::Queued, _) => 202,
        (ReceiptStatus::Applied, true) => 201,
        (ReceiptStatus::Applied, false) => 200,
    };
    let wire = Receipt {
        status: match receipt.status {
            ReceiptStatus::Applied => "applied",
            ReceiptStatus::Queued => "queued",
        }
        .into(),
        slug: receipt.slug.clone(),
        pending_id: receipt.pending_id.clone(),
        note_id: receipt.note_id.clone(),
        version_id: receipt.version_id.clone(),
        content_hash: receipt.content_hash.clone(),
        committed_seq: receipt.committed_seq,
        note: receipt
            .note
            .as_ref()
            .filter(|_| embed_note)
            .map(NoteHandle::from),
        renamed: receipt.renamed,
        unchanged: receipt.unchanged,
        links_updated: receipt.links_updated,
        links_failed: receipt
            .links_failed
            .iter()
            .map(|(slug, reason)| crate::api::wire::LinkFailure {
                slug: slug.clone(),
                reason: reason.clone(),
            })
            .collect(),
        flow_back_error: receipt.flow_back_error.clone(),
    };
    (
        status,
        serde_json::to_string(&wire).unwrap_or_else(|_| "{}".into()),
    )
}

/// A write request, validated into an operation; the route, note, query and body are
/// what the operation hash of its `Idempotency-Key` is made of.
pub struct Prepared {
    /// The route template, part of the operation's identity.
    pub route: &'static str,
    pub note: Option<String>,
    /// The query string (it carries `update_mask`, `version_id`, `agent_id`).
    pub query: String,
    /// The request body as sent.
    pub body: Value,
    pub agent: String,
    pub op: Op,
    /// Embed the note in the receipt (create and PATCH).
    pub embed_note: bool,
}

/// Pending writes queued by a version that stored the HTTP request (before the pipeline
/// kept its own request, migration 6) are prepared once more and stored as the
/// pipeline's request, so an approval applies them like any other. Runs at serve start.
pub fn upgrade_legacy_pending(svc: &State) -> Result<usize, Error> {
    let rows = svc.meta.legacy_pending()?;
    for row in &rows {
        let v: Value = serde_json::from_str(&row.payload)
            .map_err(|e| Error::internal(format!("a stored pending write is corrupt: {e}")))?;
        let route = ROUTES
            .iter()
            .copied()
            .find(|r| Some(*r) == v["route"].as_str())
            .ok_or_else(|| Error::internal("a stored pending write names an unknown route"))?;
        let prepared = prepare(
            route,
            v["note"].as_str(),
            v["query"].as_str().unwrap_or(""),
            v["body"].clone(),
        )?;
        let request = writes::Request {
            op: prepared.op,
            agent_id: prepared.agent,
        };
        let json = serde_json::to_string(&request)
            .map_err(|e| Error::internal(format!("cannot store a pending write: {e}")))?;
        svc.meta.upgrade_pending(&row.id, &json)?;
    }
    Ok(rows.len())
}

const ROUTES: &[&str] = &[
    "POST /v1/notes",
    "PATCH /v1/notes/{note}",
    "DELETE /v1/notes/{note}",
    "POST /v1/notes/{note}:edit",
    "POST /v1/notes/{note}:move",
    "POST /v1/notes/{note}:rename",
    "POST /v1/notes/{note}:rollback",
];

/// Validate a request for `route` into an operation.
pub fn prepare(
    route: &'static str,
    note: Option<&str>,
    query: &str,
    body: Value,
) -> Result<Prepared, Error> {
    let note_of = || {
        note.map(str::to_string)
            .ok_or_else(|| Error::invalid_field("note", "is required"))
    };
    match route {
        "POST /v1/notes" => prepare_create(query, body),
        "PATCH /v1/notes/{note}" => prepare_patch(note_of()?, query, body),
        "DELETE /v1/notes/{note}" => prepare_delete(note_of()?, query),
        "POST /v1/notes/{note}:edit" => prepare_edit(note_of()?, query, body),
        "POST /v1/notes/{note}:move" => prepare_move(note_of()?, query, body),
        "POST /v1/notes/{note}:rename" => prepare_rename(note_of()?, query, body),
        "POST /v1/notes/{note}:rollback" => prepare_rollback(note_of()?, query, body),
        other => Err(Error::internal(format!("no write route {other}"))),
    }
}

pub(crate) fn parse_as<T: DeserializeOwned>(raw: &Value) -> Result<T, Error> {
    serde_path_to_error::deserialize(raw).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde names an unknown or missing field inside its message.
        let field = if path == "." {
            inner
                .split('`')
                .nth(1)
                .map(str::to_string)
                .unwrap_or_else(|| "body".to_string())
        } else {
            path
        };
        Error::invalid_field(field, inner)
    })
}

/// Run a prepared request through the pipeline and answer its (possibly replayed) receipt.
async fn submit(svc: Arc<State>, headers: &HeaderMap, prepared: Prepared) -> ApiResult<Response> {
    let key = idempotency_key(headers)?;
    let hash = op_hash(
        prepared.route,
        prepared.note.as_deref(),
        &prepared.body,
        &prepared.query,
        &prepared.agent,
    );
    let Prepared {
        agent,
        op,
        embed_note,
        ..
    } = prepared;
    let request = writes::Request {
        op,
        agent_id: agent,
    };
    let submitted = blocking(move || {
        writes::submit(
            &svc,
            request,
            Idempotency {
                key: &key,
                op_hash: hash,
            },
        )
    })
    .await?;
    let (status, body) = match submitted {
        writes::Submitted::Receipt(receipt) => render(&receipt, embed_note),
        writes::Submitted::Rendered(status, body) => (status, body),
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    Ok((
        status,
        [("content-type", "application/json")],
        Body::from(body),
    )
        .into_response())
}

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
    )
)]
pub async fn create(svc: Arc<State>, parts: Parts, body: Bytes) -> ApiResult<Response> {
    let prepared = prepare_create(
        parts.uri.query().unwrap_or(""),
        json_value(&parts.headers, &body)?,
    )?;
    submit(svc, &parts.headers, prepared).await
}

fn prepare_create(query: &str, raw: Value) -> Result<Prepared, Error> {
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
                .trim_matches('/')
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
            match req.folder.as_deref().map(|f| f.trim_matches('/')) {
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
    )
)]
pub async fn patch(
    svc: Arc<State>,
    note: String,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Response> {
    let prepared = prepare_patch(
        note,
        parts.uri.query().unwrap_or(""),
        json_value(&parts.headers, &body)?,
    )?;
    submit(svc, &parts.headers, prepared).await
}

fn prepare_patch(note: String, query: &str, raw: Value) -> Result<Prepared, Error> {
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
    )
)]
pub async fn delete(svc: Arc<State>, note: String, parts: Parts) -> ApiResult<Response> {
    let prepared = prepare_delete(note, parts.uri.query().unwrap_or(""))?;
    submit(svc, &parts.headers, prepared).await
}

fn prepare_delete(note: String, query: &str) -> Result<Prepared, Error> {
    let q = Query::parse(Some(query), &["version_id", "agent_id"])?;
    let version_id = version_field("version_id", q.str("version_id").map(str::to_string))?;
    let agent = agent_id(q.str("agent_id").map(str::to_string))?;
    let query = version_id.clone().unwrap_or_default();
    let op = Op::Delete {
        note: note.clone(),
        version_id,
    };
    Ok(Prepared {
        route: "DELETE /v1/notes/{note}",
        note: Some(note.clone()),
        query: query.to_string(),
        body: Value::Null,
        agent,
        op,
        embed_note: false,
    })
}

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
    )
)]
pub async fn edit(svc: Arc<State>, note: String, parts: Parts, body: Bytes) -> ApiResult<Response> {
    let prepared = prepare_edit(
        note,
        parts.uri.query().unwrap_or(""),
        json_value(&parts.headers, &body)?,
    )?;
    submit(svc, &parts.headers, prepared).await
}

fn prepare_edit(note: String, query: &str, raw: Value) -> Result<Prepared, Error> {
    Query::parse(Some(query), &[])?;
    let req: EditNote = parse_as(&raw)?;
    let version_id = version_field("version_id", Some(req.version_id))?.unwrap_or_default();
    check_len("old_string", &req.old_string, 1, 100_000)?;
    check_len("new_string", &req.new_string, 0, 100_000)?;
    let agent = agent_id(req.agent_id)?;
    let op = Op::Edit {
        note: note.clone(),
        version_id,
        old_string: req.old_string,
        new_string: req.new_string,
    };
    Ok(Prepared {
        route: "POST /v1/notes/{note}:edit",
        note: Some(note.clone()),
        query: query.to_string(),
        body: raw,
        agent,
        op,
        embed_note: false,
    })
}

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
    )
)]
pub async fn move_(
    svc: Arc<State>,
    note: String,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Response> {
    let prepared = prepare_move(
        note,
        parts.uri.query().unwrap_or(""),
        json_value(&parts.headers, &body)?,
    )?;
    submit(svc, &parts.headers, prepared).await
}

fn prepare_move(note: String, query: &str, raw: Value) -> Result<Prepared, Error> {
    Query::parse(Some(query), &[])?;
    let req: MoveNote = parse_as(&raw)?;
    let version_id = version_field("version_id", req.version_id)?;
    let agent = agent_id(req.agent_id)?;
    check_len("folder", &req.folder, 0, 512)?;
    let op = Op::Move {
        note: note.clone(),
        folder: req.folder,
        version_id,
    };
    Ok(Prepared {
        route: "POST /v1/notes/{note}:move",
        note: Some(note.clone()),
        query: query.to_string(),
        body: raw,
        agent,
        op,
        embed_note: false,
    })
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
    )
)]
pub async fn rename(
    svc: Arc<State>,
    note: String,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Response> {
    let prepared = prepare_rename(
        note,
        parts.uri.query().unwrap_or(""),
        json_value(&parts.headers, &body)?,
    )?;
    submit(svc, &parts.headers, prepared).await
}

fn prepare_rename(note: String, query: &str, raw: Value) -> Result<Prepared, Error> {
    Query::parse(Some(query), &[])?;
    let req: RenameNote = parse_as(&raw)?;
    let version_id = version_field("version_id", req.version_id)?;
    let agent = agent_id(req.agent_id)?;
    let name = req
        .name
        .strip_suffix(".md")
        .unwrap_or(&req.name)
        .to_string();
    check_len("name", &name, 1, 255)?;
    if name.contains('/') || name.contains('\\') {
        return Err(Error::unsafe_path(
            "a new name holds no folder; use :move to change folders",
        ));
    }
    let op = Op::Rename {
        note: note.clone(),
        name,
        version_id,
    };
    Ok(Prepared {
        route: "POST /v1/notes/{note}:rename",
        note: Some(note.clone()),
        query: query.to_string(),
        body: raw,
        agent,
        op,
        embed_note: false,
    })
}

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
    )
)]
pub async fn rollback(
    svc: Arc<State>,
    note: String,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Response> {
    let prepared = prepare_rollback(
        note,
        parts.uri.query().unwrap_or(""),
        json_value(&parts.headers, &body)?,
    )?;
    submit(svc, &parts.headers, prepared).await
}

fn prepare_rollback(note: String, query: &str, raw: Value) -> Result<Prepared, Error> {
    Query::parse(Some(query), &[])?;
    let req: RollbackNote = parse_as(&raw)?;
    let revision_id = version_field("revision_id", Some(req.revision_id))?.unwrap_or_default();
    let version_id = version_field("version_id", req.version_id)?;
    let agent = agent_id(req.agent_id)?;
    let op = Op::Rollback {
        note: note.clone(),
        revision_id,
        version_id,
    };
    Ok(Prepared {
        route: "POST /v1/notes/{note}:rollback",
        note: Some(note),
        query: query.to_string(),
        body: raw,
        agent,
        op,
        embed_note: false,
    })
}
