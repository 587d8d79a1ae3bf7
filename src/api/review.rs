//! Review over HTTP: write settings and the pending-write queue (list, read, approve,
//! reject).

use std::sync::Arc;

use crate::api::wire::Json;
use axum::body::Bytes;
use axum::http::request::Parts;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::{self, PageTokens, Query};
use crate::api::writes::{is_spec_uuid, render};
use crate::error::{Error, Reason};
use crate::filter;
use crate::state::State;
use crate::storage::rows::PendingRow;
use crate::surface::blocking;
use crate::surface::notes::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::writes::review::{self, WritePolicy};

/// The vault's write settings.
#[derive(Debug, Serialize, ToSchema)]
pub struct WriteSettings {
    /// `auto_apply`, `review`, `review_destructive` or `read_only`.
    pub write_policy: String,
    /// Applied writes allowed per rolling hour; 0 is unlimited.
    pub write_budget: u32,
}

impl From<review::WriteSettings> for WriteSettings {
    fn from(s: review::WriteSettings) -> Self {
        Self {
            write_policy: s.policy.as_str().to_string(),
            write_budget: s.budget,
        }
    }
}

/// `PATCH /v1/vault/write-settings` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchWriteSettings {
    pub write_policy: Option<String>,
    pub write_budget: Option<i64>,
}

/// Read the write settings.
#[utoipa::path(
    get,
    path = "/v1/vault/write-settings",
    tag = "Review",
    responses(
        (status = 200, description = "The write settings.", body = WriteSettings),
        (status = 400, description = "Bad parameter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn get_settings(state: Arc<State>, parts: Parts) -> ApiResult<Json<WriteSettings>> {
    Query::parse(parts.uri.query(), &[])?;
    let settings = blocking(move || review::settings(&state)).await?;
    Ok(Json(settings.into()))
}

/// Change the write policy and/or budget (`update_mask`: `write_policy`, `write_budget`).
#[utoipa::path(
    patch,
    path = "/v1/vault/write-settings",
    tag = "Review",
    request_body = PatchWriteSettings,
    params(("update_mask" = String, Query, description = "`write_policy`, `write_budget`, or both, comma-separated.")),
    responses(
        (status = 200, description = "The new settings.", body = WriteSettings),
        (status = 400, description = "`INVALID_UPDATE_MASK` or an invalid value.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn patch_settings(
    state: Arc<State>,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Json<WriteSettings>> {
    let q = Query::parse(parts.uri.query(), &["update_mask"])?;
    let mask: Vec<&str> = q
        .str("update_mask")
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .collect();
    if mask.is_empty()
        || mask
            .iter()
            .any(|m| !matches!(*m, "write_policy" | "write_budget"))
    {
        return Err(Error::new(
            Reason::INVALID_UPDATE_MASK,
            "update_mask must be write_policy, write_budget, or both",
        )
        .into());
    }
    let raw = crate::api::writes::json_value(&parts.headers, &body)?;
    let req: PatchWriteSettings = crate::api::writes::parse_as(&raw)?;
    let policy = if mask.contains(&"write_policy") {
        let name = req.write_policy.ok_or_else(|| {
            Error::invalid_field("write_policy", "is in the mask but missing from the body")
        })?;
        Some(WritePolicy::parse(&name).ok_or_else(|| {
            Error::invalid_field(
                "write_policy",
                format!("unknown policy {name:?}; use auto_apply, review, review_destructive or read_only"),
            )
        })?)
    } else {
        None
    };
    let budget = if mask.contains(&"write_budget") {
        let b = req.write_budget.ok_or_else(|| {
            Error::invalid_field("write_budget", "is in the mask but missing from the body")
        })?;
        Some(u32::try_from(b).map_err(|_| {
            Error::invalid_field(
                "write_budget",
                "must be 0 (unlimited) or a positive number of writes per hour",
            )
        })?)
    } else {
        None
    };
    let who = decider(&parts);
    let settings = blocking(move || review::set_settings(&state, policy, budget, &who)).await?;
    Ok(Json(settings.into()))
}

/// A write waiting for, or decided by, a reviewer.
#[derive(Debug, Serialize, ToSchema)]
pub struct PendingWrite {
    pub id: String,
    /// `write`, `edit`, `delete`, `move` or `rename`.
    pub kind: String,
    /// `pending`, `applied` or `rejected`.
    pub status: String,
    pub agent_id: String,
    pub created_at: String,
    pub decided_at: Option<String>,
    /// Who decided it: `token <name> (<prefix>)`, `static token #<n>`,
    /// `identity-provider user <sub>`, `a person signed in to the console`, or `an
    /// unauthenticated local request` (open local mode); null while pending.
    pub decided_by: Option<String>,
    /// Why an approved write could not apply (it is then `rejected`).
    pub error: Option<String>,
    /// The write as the pipeline keeps it: `op` (the operation and its fields) and
    /// `agent_id`.
    #[schema(value_type = Object)]
    pub payload: Value,
    /// The receipt of an applied write, as its direct twin answers it.
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    /// The note the write is about.
    pub slug: String,
    /// A unified diff of what the write would change, taken when it was queued.
    pub diff: String,
}

impl From<PendingRow> for PendingWrite {
    fn from(r: PendingRow) -> Self {
        Self {
            payload: serde_json::from_str(&r.payload).unwrap_or(Value::Null),
            result: r.result.as_deref().and_then(|s| {
                if r.domain {
                    // The pipeline's receipt, rendered as the write's answer.
                    let receipt: crate::writes::Receipt = serde_json::from_str(s).ok()?;
                    serde_json::from_str(&render(&receipt, false).1).ok()
                } else {
                    // Decided by an older version: stored as rendered.
                    serde_json::from_str(s).ok()
                }
            }),
            id: r.id,
            kind: r.kind,
            status: r.status,
            agent_id: r.agent_id,
            created_at: r.created_at,
            decided_at: r.decided_at,
            decided_by: r.decided_by,
            error: r.error.as_deref().map(crate::api::error::in_vault_terms),
            slug: r.slug,
            diff: r.preview,
        }
    }
}

/// `GET /v1/writes`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PendingWriteList {
    /// How complete the list is; its counts are of writes in the queue (pending and
    /// decided), not of notes.
    pub coverage: crate::api::wire::Coverage,
    pub writes: Vec<PendingWrite>,
    pub next_page_token: Option<String>,
    /// Writes matching the query, over all pages.
    pub total_size: usize,
}

const WRITE_FILTER_FIELDS: &[&str] = &[
    "status",
    "kind",
    "agent_id",
    "created_at",
    "decided_at",
    "slug",
];

fn pending_field(r: &PendingRow, field: &str) -> filter::Value {
    let time = |t: &Option<String>| {
        t.as_deref()
            .and_then(filter::parse_time)
            .map_or(filter::Value::Missing, filter::Value::Time)
    };
    match field {
        "status" => filter::Value::Text(r.status.clone()),
        "kind" => filter::Value::Text(r.kind.clone()),
        "agent_id" => filter::Value::Text(r.agent_id.clone()),
        "slug" => filter::Value::Text(r.slug.clone()),
        "created_at" => time(&Some(r.created_at.clone())),
        "decided_at" => time(&r.decided_at),
        _ => filter::Value::Missing,
    }
}

/// List pending and decided writes, oldest first.
#[utoipa::path(
    get,
    path = "/v1/writes",
    tag = "Review",
    params(
        ("status" = Option<String>, Query, description = "`pending`, `applied` or `rejected`."),
        ("filter" = Option<String>, Query, description = "AIP-160 over `status`, `kind`, `agent_id`, `created_at`, `decided_at`, `slug`."),
        ("page_size" = Option<usize>, Query, description = "1..500 (default 50)."),
        ("page_token" = Option<String>, Query, description = "`next_page_token` of the previous page."),
    ),
    responses(
        (status = 200, description = "Writes.", body = PendingWriteList),
        (status = 400, description = "Bad parameter or filter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn list_writes(state: Arc<State>, parts: Parts) -> ApiResult<Json<PendingWriteList>> {
    let q = Query::parse(
        parts.uri.query(),
        &["status", "filter", "page_size", "page_token"],
    )?;
    let status = q.non_empty("status")?.map(str::to_string);
    if let Some(s) = &status {
        if !matches!(s.as_str(), "pending" | "applied" | "rejected") {
            return Err(
                Error::invalid_field("status", "must be pending, applied or rejected").into(),
            );
        }
    }
    let expr = params::filter(&q, WRITE_FILTER_FIELDS)?;
    let page_size = q.int("page_size", DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)?;
    let fingerprint_filter = q.str("filter").unwrap_or("").to_string();
    let status_text = status.clone().unwrap_or_default();
    let fingerprint = [
        ("route", "writes"),
        ("status", status_text.as_str()),
        ("filter", fingerprint_filter.as_str()),
    ];
    let tokens = PageTokens {
        key: &state.token_key,
    };
    let after = q
        .non_empty("page_token")?
        .map(|t| tokens.open(&fingerprint, t))
        .transpose()?;
    let state2 = state.clone();
    let rows = blocking(move || crate::queries::status::pending_writes(&state2)).await?;
    let queued = rows.len();
    let matching: Vec<PendingRow> = rows
        .into_iter()
        .filter(|r| status.as_ref().is_none_or(|s| r.status == *s))
        .filter(|r| {
            expr.as_ref()
                .is_none_or(|e| e.matches(&|f| pending_field(r, f)))
        })
        .collect();
    let total_size = matching.len();
    let start = match &after {
        Some(id) => matching
            .iter()
            .position(|r| r.id == *id)
            .map_or(matching.len(), |i| i + 1),
        None => 0,
    };
    let page: Vec<PendingRow> = matching
        .into_iter()
        .skip(start)
        .take(page_size + 1)
        .collect();
    let more = page.len() > page_size;
    let page: Vec<PendingRow> = page.into_iter().take(page_size).collect();
    let next_page_token = more
        .then(|| page.last().map(|r| tokens.issue(&fingerprint, &r.id)))
        .flatten();
    let committed_seq = state.committed_seq();
    Ok(Json(PendingWriteList {
        coverage: crate::api::wire::Coverage {
            notes_total: queued,
            notes_searched: queued,
            notes_matched: total_size,
            notes_returned: page.len(),
            truncated: next_page_token.is_some(),
            excluded_count: 0,
            excluded: Vec::new(),
            excluded_by_reason: Default::default(),
            indexed_seq: committed_seq,
            committed_seq,
            notes: vec![
                "Counts are of writes in the queue (pending and decided), not of notes".into(),
            ],
            retrievers: None,
        },
        writes: page.into_iter().map(PendingWrite::from).collect(),
        next_page_token,
        total_size,
    }))
}

fn check_id(id: &str) -> Result<(), Error> {
    if is_spec_uuid(id) {
        Ok(())
    } else {
        Err(Error::invalid_field(
            "id",
            "must be a UUID (versions 1-8, or the nil or max UUID)",
        ))
    }
}

/// Read one pending write (needs `notes.review` when auth is on).
#[utoipa::path(
    get,
    path = "/v1/writes/{id}",
    tag = "Review",
    params(("id" = String, Path, description = "The `pending_id` of a queued write.")),
    responses(
        (status = 200, description = "The pending write.", body = PendingWrite),
        (status = 400, description = "A malformed id.", body = ErrorEnvelope),
        (status = 404, description = "`PENDING_WRITE_NOT_FOUND`.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn get_write(
    state: Arc<State>,
    id: String,
    parts: Parts,
) -> ApiResult<Json<PendingWrite>> {
    Query::parse(parts.uri.query(), &[])?;
    check_id(&id)?;
    let row =
        blocking(move || crate::queries::status::pending_write(&state, &id.to_lowercase())).await?;
    let row =
        row.ok_or_else(|| Error::new(Reason::PENDING_WRITE_NOT_FOUND, "no such pending write"))?;
    Ok(Json(row.into()))
}

/// Who the request's credential is (`http::authenticate` put it there), for the row and
/// the audit log.
fn decider(parts: &Parts) -> String {
    parts
        .extensions
        .get::<crate::auth::Who>()
        .map_or_else(|| "api".to_string(), |w| w.0.clone())
}

async fn decide(
    state: Arc<State>,
    id: String,
    parts: Parts,
    approve: bool,
) -> ApiResult<Json<PendingWrite>> {
    Query::parse(parts.uri.query(), &[])?;
    check_id(&id)?;
    let id = id.to_lowercase();
    let who = decider(&parts);
    let row = blocking(move || review::decide(&state, &id, approve, &who)).await?;
    Ok(Json(row.into()))
}

/// Approve a pending write: it is applied now through the pipeline; if the note moved
/// since it was queued, it is decided with `error` set and the note is untouched.
#[utoipa::path(
    post,
    path = "/v1/writes/{id}:approve",
    tag = "Review",
    params(("id" = String, Path, description = "The `pending_id`.")),
    responses(
        (status = 200, description = "The decided pending write.", body = PendingWrite),
        (status = 400, description = "A malformed id.", body = ErrorEnvelope),
        (status = 404, description = "`PENDING_WRITE_NOT_FOUND`.", body = ErrorEnvelope),
        (status = 409, description = "`ALREADY_DECIDED`.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn approve(state: Arc<State>, id: String, parts: Parts) -> ApiResult<Json<PendingWrite>> {
    decide(state, id, parts, true).await
}

/// Reject a pending write; the note is untouched.
#[utoipa::path(
    post,
    path = "/v1/writes/{id}:reject",
    tag = "Review",
    params(("id" = String, Path, description = "The `pending_id`.")),
    responses(
        (status = 200, description = "The decided pending write.", body = PendingWrite),
        (status = 400, description = "A malformed id.", body = ErrorEnvelope),
        (status = 404, description = "`PENDING_WRITE_NOT_FOUND`.", body = ErrorEnvelope),
        (status = 409, description = "`ALREADY_DECIDED`.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn reject(state: Arc<State>, id: String, parts: Parts) -> ApiResult<Json<PendingWrite>> {
    decide(state, id, parts, false).await
}
