//! Note writes over HTTP: create, PATCH with `update_mask`, delete, `:edit`, `:move`,
//! `:rename` (and the legacy slash forms). Each handler parses its JSON and query, builds
//! the request with a `writes::Request` constructor (which validates it) and hands it to
//! the one pipeline with its idempotency key; the receipt becomes a status and body here.
//!
//! Success codes: 201 for an applied create, 202 for a queued write, 200 otherwise; an
//! idempotent replay returns the original status and body byte for byte.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::api::wire::Receipt;
use crate::error::{Error, Reason};
use crate::state::State;
use crate::writes::{self, ReceiptStatus};

mod create;
mod delete;
mod edit;
mod folder;
mod patch;
mod relocate;
mod rollback;
mod section;

pub(crate) use crate::surface::writes::run;
use crate::surface::writes::{wire, Wire};
pub use create::*;
pub use delete::*;
pub use edit::*;
pub use folder::*;
pub use patch::*;
pub use relocate::*;
pub use rollback::*;
pub use section::*;

pub(crate) use crate::writes::request::agent_id;
pub use crate::writes::{is_spec_uuid, MAX_BODY};

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

/// The hash a version before request identities bound an `Idempotency-Key` to: the
/// route, note, canonical body, the write-relevant query, agent. Only a key recorded then
/// is compared with it (see `writes::Idempotency`).
fn legacy_hash(route: &str, note: Option<&str>, body: &Value, query: &str, agent: &str) -> String {
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
    match wire(receipt, embed_note) {
        Wire::Answered(status, body) => (status, body.to_string()),
        Wire::Folder(w) => (
            status,
            serde_json::to_string(&w).unwrap_or_else(|_| "{}".into()),
        ),
        Wire::Note(w) => (
            status,
            serde_json::to_string(&w).unwrap_or_else(|_| "{}".into()),
        ),
    }
}

/// Pending writes queued by a version that stored the HTTP request (before the pipeline
/// kept its own request, migration 6) are validated once more into the pipeline's
/// request and stored as such, so an approval applies them like any other. Runs at serve
/// start.
pub fn upgrade_legacy_pending(state: &State) -> Result<usize, Error> {
    let rows = writes::review::legacy_pending(state)?;
    for row in &rows {
        let v: Value = serde_json::from_str(&row.payload).map_err(|e| {
            Error::internal(format!("a stored pending write is corrupt: {e}")).with_cause(e)
        })?;
        let note = v["note"].as_str().map(str::to_string);
        let query = v["query"].as_str().unwrap_or("");
        let request = legacy_request(
            v["route"].as_str().unwrap_or(""),
            note,
            query,
            v["body"].clone(),
        )?;
        writes::review::upgrade_pending(state, &row.id, &request)?;
    }
    Ok(rows.len())
}

/// A pending write as an older version stored it: the route it came through, its note,
/// query and body, validated as that route validates them now.
fn legacy_request(
    route: &str,
    note: Option<String>,
    query: &str,
    body: Value,
) -> Result<writes::Request, Error> {
    let note = || note.ok_or_else(|| Error::invalid_field("note", "is required"));
    Ok(match route {
        "POST /v1/notes" => create_request(query, &body)?,
        "PATCH /v1/notes/{note}" => patch_request(note()?, query, &body)?,
        "DELETE /v1/notes/{note}" => delete_request(note()?, query)?,
        "POST /v1/notes/{note}:edit" => edit_request(note()?, query, &body)?,
        "POST /v1/notes/{note}:move" => move_request(note()?, query, &body)?,
        "POST /v1/notes/{note}:rename" => rename_request(note()?, query, &body)?,
        "POST /v1/notes/{note}:rollback" => rollback_request(note()?, query, &body)?,
        _ => {
            return Err(Error::internal(
                "a stored pending write names an unknown route",
            ))
        }
    })
}

pub(crate) use crate::surface::input::parse_as;

/// Run a validated request through the pipeline under the request's `Idempotency-Key`
/// and answer its (possibly replayed) receipt. `legacy` is the hash an older version
/// bound the key to (see `writes::Idempotency`).
async fn submit(
    state: Arc<State>,
    headers: &HeaderMap,
    request: writes::Request,
    legacy: String,
    embed_note: bool,
) -> ApiResult<Response> {
    let key = idempotency_key(headers)?;
    let receipt = run(state, key, request, Some(legacy)).await?;
    Ok(respond(&receipt, embed_note))
}

/// A receipt as an HTTP response.
pub(crate) fn respond(receipt: &writes::Receipt, embed_note: bool) -> Response {
    let (status, body) = render(receipt, embed_note);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    (
        status,
        [("content-type", "application/json")],
        Body::from(body),
    )
        .into_response()
}
