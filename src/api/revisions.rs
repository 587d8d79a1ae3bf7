//! A note's revisions over HTTP: the revision list (also of a deleted note), the diff
//! between two revisions. Rollback is a write (`writes/rollback.rs`).

use std::sync::Arc;

use crate::api::wire::Json;
use axum::http::request::Parts;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::notes::{blocking, DEFAULT_PAGE_SIZE};
use crate::api::params::{self, PageTokens, Query};
use crate::api::writes::is_spec_uuid;
use crate::error::{Error, Reason};
use crate::filter;
use crate::meta::RevisionRow;
use crate::state::State;
use crate::writes::review::{self};

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
    state: Arc<State>,
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
    Ok(Json(revisions(state, p, size_name, token_name).await?))
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
    state: Arc<State>,
    p: ListRevisionsParams,
) -> Result<RevisionList, Error> {
    revisions(state, p, "page_size", "page_token").await
}

/// [`list_note_revisions`], naming the size and token parameters as the caller sent them.
async fn revisions(
    state: Arc<State>,
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
    let state2 = state.clone();
    let key = p.note.clone();
    let paged = expr.is_none();
    let history =
        blocking(move || crate::queries::history::history_with(&state2, &key, !paged)).await?;
    let order = if descending { "desc" } else { "asc" };
    let fingerprint = [
        ("route", "revisions"),
        ("note", history.note_id.as_str()),
        ("filter", filter_text.as_str()),
        ("order", order),
    ];
    let tokens = PageTokens {
        key: &state.token_key,
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
        let svc3 = state.clone();
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
pub async fn diff(state: Arc<State>, note: String, parts: Parts) -> ApiResult<Json<NoteDiff>> {
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
        let history = crate::queries::history::history_of(&state, &note)?;
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
            Ok(crate::queries::history::revision_content(&state, r)?
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
                let (n, bytes) = crate::record::refresh::read(&state, &history.note_id)?;
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
