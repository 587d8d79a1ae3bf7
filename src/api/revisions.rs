//! A note's revisions over HTTP: the revision list (also of a deleted note), the diff
//! between two revisions. Rollback is a write (`writes/rollback.rs`).

use std::sync::Arc;

use axum::http::request::Parts;
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::api::wire::Json;
use crate::api::writes::is_spec_uuid;
use crate::error::{Error, Reason};
use crate::state::State;
use crate::storage::rows::RevisionRow;
use crate::surface::blocking;
use crate::surface::revisions::{revisions, ListRevisionsParams, RevisionList};
use crate::writes::review::{self};

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
