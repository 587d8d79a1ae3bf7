//! The session-only account routes (a personal access token gets 403
//! `CREDENTIAL_FORBIDDEN`, and open local mode `AUTH_MISSING`: the route table's `Need::SignedIn`):
//! `GET /v1/audit-events` (the audit log, newest first: ids and counters only),
//! `POST /v1/export` (the archive of `crate::export`, streamed, or a link to it in the
//! blob store) and
//! `POST /v1/vault/purge` (everything the daemon holds about the vault, behind the
//! vault's name typed as confirmation; it also needs `notes.write` and `notes.review`).

use std::sync::Arc;

use crate::api::wire::Json;
use axum::body::Bytes;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::{self, PageTokens, Query};
use crate::error::Error;
use crate::filter;
use crate::state::State;
use crate::storage::rows::AuditRow;
use crate::surface::blocking;
use crate::surface::export::{ExportLink, Exported};

/// One row of the audit log.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEvent {
    pub id: String,
    /// `write.applied`, `write.queued`, `write.approved`, `write.rejected`,
    /// `token.created`, `token.revoked`, `session.signed_in`, `session.signed_out`,
    /// `settings.changed`, `vault.exported`, `vault.purged`, `e2ee.keys_changed`.
    pub kind: String,
    /// Who: an agent id, `console`, `cli`, `api`.
    pub actor: String,
    pub created_at: String,
    /// What it was about, as an id (a note id, a pending-write id, a token's public
    /// prefix), when there is one.
    pub subject: Option<String>,
    /// Counters (numbers only).
    #[schema(value_type = Object)]
    pub counts: Value,
}

impl From<AuditRow> for AuditEvent {
    fn from(r: AuditRow) -> Self {
        Self {
            id: r.id.to_string(),
            kind: r.kind,
            actor: r.actor,
            created_at: r.created_at,
            subject: r.subject,
            counts: serde_json::from_str(&r.counts).unwrap_or(Value::Object(Default::default())),
        }
    }
}

/// `GET /v1/audit-events`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEventList {
    pub audit_events: Vec<AuditEvent>,
    pub next_page_token: Option<String>,
}

const AUDIT_FILTER_FIELDS: &[&str] = &["kind", "actor", "created_at"];

fn audit_field(r: &AuditRow, field: &str) -> filter::Value {
    match field {
        "kind" => filter::Value::Text(r.kind.clone()),
        "actor" => filter::Value::Text(r.actor.clone()),
        "created_at" => {
            filter::parse_time(&r.created_at).map_or(filter::Value::Missing, filter::Value::Time)
        }
        _ => filter::Value::Missing,
    }
}

/// The audit log, newest first (session only).
#[utoipa::path(
    get,
    path = "/v1/audit-events",
    tag = "Account",
    params(
        ("filter" = Option<String>, Query, description = "AIP-160 over `kind`, `actor`, `created_at`."),
        ("page_size" = Option<usize>, Query, description = "1..500 (default 50)."),
        ("page_token" = Option<String>, Query, description = "`next_page_token` of the previous page."),
    ),
    responses(
        (status = 200, description = "Audit events, newest first.", body = AuditEventList),
        (status = 400, description = "Bad parameter or filter.", body = ErrorEnvelope),
        (status = 401, description = "No credential.", body = ErrorEnvelope),
        (status = 403, description = "`CREDENTIAL_FORBIDDEN` for a personal access token.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn audit_events(state: Arc<State>, parts: Parts) -> ApiResult<Json<AuditEventList>> {
    let q = Query::parse(parts.uri.query(), &["filter", "page_size", "page_token"])?;
    let expr = params::filter(&q, AUDIT_FILTER_FIELDS)?;
    let page_size = q.int("page_size", 50, 1, 500)?;
    let filter_text = q.str("filter").unwrap_or("").to_string();
    let fingerprint = [("route", "audit-events"), ("filter", filter_text.as_str())];
    let tokens = PageTokens {
        key: &state.token_key,
    };
    let before = q
        .non_empty("page_token")?
        .map(|t| tokens.open(&fingerprint, t))
        .transpose()?
        .map(|id| {
            id.parse::<i64>()
                .map_err(|_| Error::invalid_field("page_token", "is not a token of this route"))
        })
        .transpose()?;
    let state2 = state.clone();
    let (rows, more) = blocking(move || {
        let keep = |r: &AuditRow| {
            expr.as_ref()
                .is_none_or(|e| e.matches(&|f| audit_field(r, f)))
        };
        state2.meta.audit_page(before, None, &keep, page_size)
    })
    .await?;
    let next_page_token = more
        .then(|| {
            rows.last()
                .map(|r| tokens.issue(&fingerprint, &r.id.to_string()))
        })
        .flatten();
    Ok(Json(AuditEventList {
        audit_events: rows.into_iter().map(AuditEvent::from).collect(),
        next_page_token,
    }))
}

/// `POST /v1/vault/purge`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PurgeRequest {
    /// The vault's name (its folder's name), typed exactly.
    pub confirm: String,
    /// Also move every note into `.trash/` in the folder (default: the folder is
    /// untouched). The answer says what will run: a purge already asked keeps its own.
    #[serde(default)]
    pub trash_notes: bool,
}

/// What a purge answers: the daemon stops serving and removes its state.
#[derive(Debug, Serialize, ToSchema)]
pub struct PurgeAccepted {
    /// `stopping`: the daemon answers this, stops serving, and then removes its history,
    /// metadata, index, tokens, queue, sync log and sessions.
    pub status: String,
    pub vault: String,
    pub trash_notes: bool,
}

/// Remove everything the daemon holds about the vault (session only): the daemon stops
/// serving, then removes history, metadata, index, tokens, the queue, the sync log and
/// sessions. The notes folder is untouched unless `trash_notes` is true (the notes then
/// go to `.trash/`). The audit log keeps one row that a purge happened.
#[utoipa::path(
    post,
    path = "/v1/vault/purge",
    tag = "Account",
    request_body = PurgeRequest,
    responses(
        (status = 202, description = "Accepted: the daemon stops and purges.", body = PurgeAccepted),
        (status = 400, description = "`VALIDATION_FAILED`: `confirm` is not the vault's name.", body = ErrorEnvelope),
        (status = 401, description = "No credential.", body = ErrorEnvelope),
        (status = 403, description = "`CREDENTIAL_FORBIDDEN` for a personal access token; `PERMISSION_MISSING` for a session without `notes.write` and `notes.review`.", body = ErrorEnvelope),
        (status = 413, description = "Body too large.", body = ErrorEnvelope),
        (status = 415, description = "Not JSON.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn purge(state: Arc<State>, parts: Parts, body: Bytes) -> ApiResult<Response> {
    let (_, req): (_, PurgeRequest) = crate::api::writes::parsed(&parts, &body)?;
    let vault = crate::purge::vault_name(&state);
    let asked =
        blocking(move || crate::purge::request(&state, &req.confirm, req.trash_notes, "api"))
            .await?;
    let trash_notes = asked.trash_notes;
    Ok((
        StatusCode::ACCEPTED,
        Json(PurgeAccepted {
            status: "stopping".into(),
            vault,
            trash_notes,
        }),
    )
        .into_response())
}

/// `POST /v1/export`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportRequest {
    /// Add the history: a git bundle of `history.git` (`history.bundle`).
    #[serde(default)]
    pub history: bool,
}

/// A `.tar.gz` of the vault's notes and attachments (private notes as the ciphertext
/// files they are), optionally with the history as a git bundle, and a manifest (session
/// only). Streamed (200); `Content-Disposition` names `notevault-<vault>-<date>.tar.gz`.
/// A hosted vault with a blob store has the archive written whole to the store first,
/// then answers 303 See Other: `Location` is a link to it (the store's own with
/// `blob_public_endpoint`, else this service's, served by any instance), for the same
/// life as a presigned attachment link; the body says the same. A client following
/// redirects gets the archive.
#[utoipa::path(
    post,
    path = "/v1/export",
    tag = "Account",
    request_body(content = Option<ExportRequest>, description = "Optional: `{\"history\": true}` adds the history."),
    responses(
        (status = 200, description = "The archive (application/gzip), streamed.", content_type = "application/gzip"),
        (status = 303, description = "Hosted, with a blob store: the archive is in the store; `Location` is the link to GET it (also `url` in the body). `Cache-Control: no-store`.", body = ExportLink,
            headers(("Location" = String, description = "The link to the archive."))),
        (status = 400, description = "`VALIDATION_FAILED`: a bad body.", body = ErrorEnvelope),
        (status = 401, description = "No credential (or open local mode: nobody is signed in).", body = ErrorEnvelope),
        (status = 403, description = "`CREDENTIAL_FORBIDDEN` for a personal access token.", body = ErrorEnvelope),
        (status = 413, description = "Body too large.", body = ErrorEnvelope),
        (status = 415, description = "Not JSON.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 503, description = "`BLOB_STORE_UNAVAILABLE` (`Retry-After`): the store did not take or give the bytes; nothing was kept, and no export recorded. `STORAGE_UNAVAILABLE`: the database.", body = ErrorEnvelope),
    )
)]
pub async fn export(state: Arc<State>, parts: Parts, body: Bytes) -> ApiResult<Response> {
    let history = if body.is_empty() {
        Query::parse(parts.uri.query(), &[])?;
        false
    } else {
        let (_, req): (_, ExportRequest) = crate::api::writes::parsed(&parts, &body)?;
        req.history
    };
    let base = crate::surface::origin::public_base(&state.config, &parts.headers);
    let link = match crate::surface::export::export(state, history, "api", base).await? {
        Exported::Streamed(response) => return Ok(response),
        Exported::Stored(link) => link,
    };
    let location = HeaderValue::from_str(&link.url).map_err(Error::internal_cause)?;
    let mut response = (StatusCode::SEE_OTHER, Json(link)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, location);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}
