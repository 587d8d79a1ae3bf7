//! Note writes over HTTP: create, PATCH with `update_mask`, delete, `:edit`, `:move`,
//! `:rename` (and the legacy slash forms). Each handler validates the request into a
//! `writes::Op` and hands it to the one pipeline with its idempotency key.
//!
//! Success codes: 201 for an applied create, 202 for a queued write, 200 otherwise; an
//! idempotent replay returns the original status and body byte for byte.

use std::sync::{Arc, OnceLock};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::notes::blocking;
use crate::api::params::Query;
use crate::api::wire::{NoteHandle, Receipt};
use crate::error::{Error, Reason};
use crate::state::State;
use crate::vault::frontmatter::FmValue;
use crate::writes::{self, Idempotency, Op, PatchChange, ReceiptStatus};

mod create;
mod delete;
mod edit;
mod folder;
mod patch;
mod relocate;
mod rollback;
mod tools;

pub use create::*;
pub use delete::*;
pub use edit::*;
pub use folder::*;
pub use patch::*;
pub use relocate::*;
pub use rollback::*;
pub use tools::*;

/// Largest request body (a whole note plus JSON).
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// `agent_id`: 1..100 characters, default `unknown`; it grants nothing.
pub(crate) fn agent_id(value: Option<String>) -> Result<String, Error> {
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

pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<String, Error> {
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

/// A body-only request's parts: no query parameters, a JSON object of `T`'s fields
/// (the object as sent, for the operation hash, and `T`).
pub(crate) fn parsed<T: DeserializeOwned>(
    parts: &axum::http::request::Parts,
    body: &Bytes,
) -> Result<(Value, T), Error> {
    Query::parse(parts.uri.query(), &[])?;
    let raw = json_value(&parts.headers, body)?;
    let req = parse_as(&raw)?;
    Ok((raw, req))
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
    let raw = crate::api::strict_json::parse(body).map_err(|refusal| match refusal {
        crate::api::strict_json::Refusal::Syntax(e) => {
            Error::invalid_field("body", format!("is not valid JSON: {e}"))
        }
        crate::api::strict_json::Refusal::Duplicate(key) => Error::invalid_field(
            key,
            "appears more than once in its object; send each key once",
        ),
    })?;
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
    let status_text = match receipt.status {
        ReceiptStatus::Applied => "applied",
        ReceiptStatus::Queued => "queued",
    };
    let links_failed = || {
        receipt
            .links_failed
            .iter()
            .map(|(slug, reason)| crate::api::wire::LinkFailure {
                slug: slug.clone(),
                reason: crate::api::error::in_vault_terms(reason),
            })
            .collect()
    };
    if let Some(folder) = &receipt.folder {
        let wire = crate::api::wire::FolderReceipt {
            status: status_text.into(),
            path: folder.path.clone(),
            from_path: folder.from_path.clone(),
            pending_id: receipt.pending_id.clone(),
            committed_seq: receipt.committed_seq,
            notes: folder.notes,
            trashed_to: folder.trashed_to.clone(),
            links_updated: receipt.links_updated,
            links_failed: links_failed(),
            flow_back_error: receipt
                .flow_back_error
                .as_deref()
                .map(crate::api::error::in_vault_terms),
        };
        return (
            status,
            serde_json::to_string(&wire).unwrap_or_else(|_| "{}".into()),
        );
    }
    let wire = Receipt {
        status: status_text.into(),
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
        links_failed: links_failed(),
        flow_back_error: receipt
            .flow_back_error
            .as_deref()
            .map(crate::api::error::in_vault_terms),
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
pub fn upgrade_legacy_pending(state: &State) -> Result<usize, Error> {
    let rows = writes::review::legacy_pending(state)?;
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
        writes::review::upgrade_pending(state, &row.id, &request)?;
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
async fn submit(state: Arc<State>, headers: &HeaderMap, prepared: Prepared) -> ApiResult<Response> {
    let key = idempotency_key(headers)?;
    let (status, body) = submit_keyed(state, key, None, prepared).await?;
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    Ok((
        status,
        [("content-type", "application/json")],
        Body::from(body),
    )
        .into_response())
}

/// Run a prepared request through the pipeline under `key`: its (possibly replayed)
/// receipt, rendered as `(status, JSON body)`. The HTTP routes and the MCP write tools
/// both come here. `meaning` is the hash of what makes two requests the same, when the
/// caller knows better than the prepared request (a tool call: its arguments).
async fn submit_keyed(
    state: Arc<State>,
    key: String,
    meaning: Option<String>,
    prepared: Prepared,
) -> Result<(u16, String), Error> {
    let hash = meaning.unwrap_or_else(|| {
        op_hash(
            prepared.route,
            prepared.note.as_deref(),
            &prepared.body,
            &prepared.query,
            &prepared.agent,
        )
    });
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
            &state,
            request,
            Idempotency {
                key: &key,
                op_hash: hash,
            },
        )
    })
    .await?;
    Ok(match submitted {
        writes::Submitted::Receipt(receipt) => render(&receipt, embed_note),
        writes::Submitted::Rendered(status, body) => (status, body),
    })
}
