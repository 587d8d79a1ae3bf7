//! Review over HTTP: write settings, the pending-write queue (list, read, approve,
//! reject), revision lists and diffs.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::request::Parts;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::notes::{blocking, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::api::params::{self, PageTokens, Query};
use crate::api::writes::{is_spec_uuid, render};
use crate::auth::{self, Credential, Permission};
use crate::error::{Error, Reason};
use crate::filter;
use crate::meta::{PendingRow, RevisionRow};
use crate::state::State;
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
pub async fn get_settings(svc: Arc<State>, parts: Parts) -> ApiResult<Json<WriteSettings>> {
    Query::parse(parts.uri.query(), &[])?;
    let settings = blocking(move || review::settings(&svc)).await?;
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
    svc: Arc<State>,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Json<WriteSettings>> {
    auth::require(&Credential::Open, Permission::NotesReview)?;
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
    let settings = blocking(move || review::set_settings(&svc, policy, budget)).await?;
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
            error: r.error,
            slug: r.slug,
            diff: r.preview,
        }
    }
}

/// `GET /v1/writes`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PendingWriteList {
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
pub async fn list_writes(svc: Arc<State>, parts: Parts) -> ApiResult<Json<PendingWriteList>> {
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
        key: &svc.token_key,
    };
    let after = q
        .non_empty("page_token")?
        .map(|t| tokens.open(&fingerprint, t))
        .transpose()?;
    let svc2 = svc.clone();
    let rows = blocking(move || svc2.meta.all_pending()).await?;
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
    Ok(Json(PendingWriteList {
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
pub async fn get_write(svc: Arc<State>, id: String, parts: Parts) -> ApiResult<Json<PendingWrite>> {
    Query::parse(parts.uri.query(), &[])?;
    auth::require(&Credential::Open, Permission::NotesReview)?;
    check_id(&id)?;
    let row = blocking(move || svc.meta.pending(&id.to_lowercase())).await?;
    let row =
        row.ok_or_else(|| Error::new(Reason::PENDING_WRITE_NOT_FOUND, "no such pending write"))?;
    Ok(Json(row.into()))
}

async fn decide(
    svc: Arc<State>,
    id: String,
    parts: Parts,
    approve: bool,
) -> ApiResult<Json<PendingWrite>> {
    Query::parse(parts.uri.query(), &[])?;
    auth::require(&Credential::Open, Permission::NotesReview)?;
    check_id(&id)?;
    let id = id.to_lowercase();
    let row = blocking(move || review::decide(&svc, &id, approve)).await?;
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
pub async fn approve(svc: Arc<State>, id: String, parts: Parts) -> ApiResult<Json<PendingWrite>> {
    decide(svc, id, parts, true).await
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
pub async fn reject(svc: Arc<State>, id: String, parts: Parts) -> ApiResult<Json<PendingWrite>> {
    decide(svc, id, parts, false).await
}

/// One revision of a note (AIP-162 names and the v1 aliases).
#[derive(Debug, Serialize, ToSchema)]
pub struct RevisionEntry {
    pub revision_id: String,
    pub revision_create_time: String,
    pub version_id: String,
    pub id: String,
    pub created_at: String,
    pub prev_version_id: Option<String>,
    /// Null for a delete.
    pub content_hash: Option<String>,
    /// `filesystem`, or `agent:<agent_id>`.
    pub actor: String,
    /// `create`, `update`, `move` or `delete`.
    pub kind: String,
    pub path: String,
}

impl From<&RevisionRow> for RevisionEntry {
    fn from(r: &RevisionRow) -> Self {
        Self {
            revision_id: r.version_id.clone(),
            revision_create_time: r.created_at.clone(),
            version_id: r.version_id.clone(),
            id: r.version_id.clone(),
            created_at: r.created_at.clone(),
            prev_version_id: r.prev_version_id.clone(),
            content_hash: r.content_hash.clone(),
            actor: r.actor.clone(),
            kind: r.kind.clone(),
            path: r.path.clone(),
        }
    }
}

/// A note's revisions.
#[derive(Debug, Serialize, ToSchema)]
pub struct RevisionList {
    pub slug: String,
    /// Null when the note is deleted.
    pub current_version_id: Option<String>,
    pub versions: Vec<RevisionEntry>,
    pub next_page_token: Option<String>,
    /// Legacy alias of `next_page_token`.
    pub next_cursor: Option<String>,
}

fn revision_field(r: &RevisionRow, field: &str) -> filter::Value {
    match field {
        "actor" => filter::Value::Text(r.actor.clone()),
        "kind" => filter::Value::Text(r.kind.clone()),
        "created_at" | "revision_create_time" => {
            filter::parse_time(&r.created_at).map_or(filter::Value::Missing, filter::Value::Time)
        }
        _ => filter::Value::Missing,
    }
}

/// List a note's revisions, newest first unless `order_by` says otherwise.
#[utoipa::path(
    get,
    path = "/v1/notes/{note}:listRevisions",
    tag = "Review",
    params(
        ("note" = String, Path, description = "A note_id or slug (a deleted note too).", min_length = 1),
        ("filter" = Option<String>, Query, description = "AIP-160 over `actor`, `kind`, `created_at`.", min_length = 1),
        ("order_by" = Option<String>, Query, description = "`created_at desc` (default) or `created_at asc`.", min_length = 1),
        ("page_size" = Option<usize>, Query, description = "1..500 (default 50).", minimum = 1, maximum = 500),
        ("page_token" = Option<String>, Query, description = "`next_page_token` of the previous page.", min_length = 1),
        ("limit" = Option<usize>, Query, description = "Legacy alias of `page_size`.", minimum = 1, maximum = 500),
        ("cursor" = Option<String>, Query, description = "Legacy alias of `page_token`.", min_length = 1),
    ),
    responses(
        (status = 200, description = "Revisions.", body = RevisionList),
        (status = 400, description = "Bad parameter or filter.", body = ErrorEnvelope),
        (status = 404, description = "No such note.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn list_revisions(
    svc: Arc<State>,
    note: String,
    parts: Parts,
) -> ApiResult<Json<RevisionList>> {
    let q = Query::parse(
        parts.uri.query(),
        &[
            "filter",
            "order_by",
            "page_size",
            "page_token",
            "limit",
            "cursor",
        ],
    )?;
    // The legacy `limit` and `cursor` stand in for their AIP names when those are absent.
    let (size_name, token_name) = (
        if q.str("page_size").is_some() {
            "page_size"
        } else {
            "limit"
        },
        if q.str("page_token").is_some() {
            "page_token"
        } else {
            "cursor"
        },
    );
    let p = ListRevisionsParams {
        note,
        filter: q.owned("filter"),
        order_by: q.owned("order_by"),
        page_size: q.opt_int(size_name, 1, 500)?,
        page_token: q.owned(token_name),
    };
    Ok(Json(revisions(svc, p, size_name, token_name).await?))
}

/// What a revision list takes: `GET /v1/notes/{note}:listRevisions` and the MCP
/// `list_revisions` tool.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRevisionsParams {
    /// The note: its slug or `note_id` (a deleted note is found by either too).
    #[schema(min_length = 1)]
    pub note: String,
    /// AIP-160 filter over `actor` (`filesystem` for edits made on disk,
    /// `agent:<agent_id>` for API writes), `kind` (`create`, `update`, `move`, `delete`)
    /// and `created_at`, e.g. `actor = "filesystem" AND created_at > "2026-01-01T00:00:00Z"`.
    pub filter: Option<String>,
    /// `created_at desc` (newest first, the default) or `created_at asc`.
    pub order_by: Option<String>,
    /// Revisions per page, 1..500 (default 50).
    #[schema(minimum = 1, maximum = 500)]
    pub page_size: Option<usize>,
    /// The `next_page_token` of the previous page; repeat the other parameters unchanged.
    pub page_token: Option<String>,
}

/// A note's revisions, newest first unless `order_by` says otherwise (both surfaces).
pub async fn list_note_revisions(
    svc: Arc<State>,
    p: ListRevisionsParams,
) -> Result<RevisionList, Error> {
    revisions(svc, p, "page_size", "page_token").await
}

/// [`list_note_revisions`], naming the size and token parameters as the caller sent them.
async fn revisions(
    svc: Arc<State>,
    p: ListRevisionsParams,
    size_name: &str,
    token_name: &str,
) -> Result<RevisionList, Error> {
    if p.note.is_empty() {
        return Err(Error::invalid_field("note", "must be at least 1 character"));
    }
    let expr = params::filter_text(
        params::non_empty("filter", p.filter.as_deref())?,
        &["actor", "kind", "created_at", "revision_create_time"],
    )?;
    let descending = params::parse_order(
        params::non_empty("order_by", p.order_by.as_deref())?,
        &["created_at", "revision_create_time"],
        crate::queries::notes::Order {
            field: "created_at".into(),
            desc: true,
        },
    )?
    .desc;
    let page_size = params::in_range(size_name, p.page_size, DEFAULT_PAGE_SIZE, 1, 500)?;
    let filter_text = p.filter.clone().unwrap_or_default();
    let svc2 = svc.clone();
    let key = p.note.clone();
    let paged = expr.is_none();
    let history =
        blocking(move || crate::queries::history::history_with(&svc2, &key, !paged)).await?;
    let order = if descending { "desc" } else { "asc" };
    let fingerprint = [
        ("route", "revisions"),
        ("note", history.note_id.as_str()),
        ("filter", filter_text.as_str()),
        ("order", order),
    ];
    let tokens = PageTokens {
        key: &svc.token_key,
    };
    let after: Option<i64> =
        match params::non_empty(token_name, p.page_token.as_deref())? {
            Some(t) => Some(tokens.open(&fingerprint, t)?.parse().map_err(|_| {
                Error::invalid_field(token_name, "is not a page token of this list")
            })?),
            None => None,
        };
    // Without a filter the store pages by seq; with one, the note's revisions are
    // filtered here.
    let page: Vec<RevisionRow> = if paged {
        let svc3 = svc.clone();
        let note_id = history.note_id.clone();
        blocking(move || {
            svc3.meta
                .revisions_page(&note_id, after, descending, page_size + 1)
        })
        .await?
    } else {
        let mut rows: Vec<&RevisionRow> = history
            .revisions
            .iter()
            .filter(|r| {
                expr.as_ref()
                    .is_none_or(|e| e.matches(&|f| revision_field(r, f)))
            })
            .collect();
        if descending {
            rows.reverse();
        }
        rows.into_iter()
            .filter(|r| match after {
                Some(seq) if descending => r.seq < seq,
                Some(seq) => r.seq > seq,
                None => true,
            })
            .take(page_size + 1)
            .cloned()
            .collect()
    };
    let more = page.len() > page_size;
    let page = &page[..page.len().min(page_size)];
    let next = more
        .then(|| {
            page.last()
                .map(|r| tokens.issue(&fingerprint, &r.seq.to_string()))
        })
        .flatten();
    Ok(RevisionList {
        slug: history.slug,
        current_version_id: history.current_version_id,
        versions: page.iter().map(RevisionEntry::from).collect(),
        next_cursor: next.clone(),
        next_page_token: next,
    })
}

/// A unified diff between two revisions, or a revision and the current file.
#[derive(Debug, Serialize, ToSchema)]
pub struct NoteDiff {
    pub slug: String,
    pub from: String,
    /// A revision id, or `current`.
    pub to: String,
    /// Unified diff (empty when identical).
    pub diff: String,
}

/// Diff two revisions of a note (or a revision and the current file).
#[utoipa::path(
    get,
    path = "/v1/notes/{note}:diff",
    tag = "Review",
    params(
        ("note" = String, Path, description = "A note_id or slug (a deleted note too).", min_length = 1),
        ("from" = String, Query, description = "A revision id of this note."),
        ("to" = Option<String>, Query, description = "A revision id of this note; the current file when absent."),
    ),
    responses(
        (status = 200, description = "The diff.", body = NoteDiff),
        (status = 400, description = "Bad parameter.", body = ErrorEnvelope),
        (status = 404, description = "No such note or revision.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn diff(svc: Arc<State>, note: String, parts: Parts) -> ApiResult<Json<NoteDiff>> {
    let q = Query::parse(parts.uri.query(), &["from", "to"])?;
    let from = q
        .non_empty("from")?
        .ok_or_else(|| {
            Error::invalid_field("from", "is required: a revision id from :listRevisions")
        })?
        .to_lowercase();
    let to = q.non_empty("to")?.map(str::to_lowercase);
    for (field, v) in [("from", Some(&from)), ("to", to.as_ref())] {
        if let Some(v) = v {
            if !is_spec_uuid(v) {
                return Err(Error::invalid_field(field, "must be a revision id (UUID)").into());
            }
        }
    }
    let result = blocking(move || {
        let history = crate::queries::history::history_of(&svc, &note)?;
        let find = |id: &str| {
            history
                .revisions
                .iter()
                .find(|r| r.version_id == id)
                .ok_or_else(|| {
                    Error::new(
                        Reason::VERSION_NOT_FOUND,
                        format!("no revision {id} of {}", history.slug),
                    )
                    .with_meta("revision_id", id)
                })
        };
        let text = |r: &RevisionRow| -> Result<String, Error> {
            Ok(crate::queries::history::revision_content(&svc, r)?
                .map(|b| crate::vault::markdown::decode(&b).0.into_owned())
                .unwrap_or_default())
        };
        let a = find(&from)?;
        let before = text(a)?;
        let (after, after_path, to_label) = match &to {
            Some(id) => {
                let b = find(id)?;
                (text(b)?, b.path.clone(), id.clone())
            }
            None => {
                let (n, bytes) = crate::record::refresh::read(&svc, &history.note_id)?;
                (
                    crate::vault::markdown::decode(&bytes).0.into_owned(),
                    n.path.clone(),
                    "current".to_string(),
                )
            }
        };
        let diff = review::preview(Some(&a.path), &after_path, &before, Some(&after));
        Ok(NoteDiff {
            slug: history.slug.clone(),
            from: from.clone(),
            to: to_label,
            diff,
        })
    })
    .await?;
    Ok(Json(result))
}
