//! A note's revisions as every surface lists them: `GET /v1/notes/{note}:listRevisions`
//! and the MCP `list_revisions` tool.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::Error;
use crate::filter;
use crate::state::State;
use crate::storage::rows::RevisionRow;
use crate::surface::blocking;
use crate::surface::notes::DEFAULT_PAGE_SIZE;
use crate::surface::params::{self, PageTokens};

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

/// [`list_note_revisions`], naming the size and token parameters as the caller sent them
/// (`/v1` still takes the legacy `limit` and `cursor`).
pub async fn revisions(
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
