//! Listing: `GET /v1/attachments` and the MCP `list_attachments` tool, one call.

use std::sync::Arc;

use crate::api::wire::Json;
use axum::http::request::Parts;
use serde::Deserialize;
use utoipa::ToSchema;

use super::{Attachment, AttachmentCoverage, AttachmentList};
use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::notes::{blocking, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::api::params::{self, PageTokens, Query};
use crate::api::wire::ExcludedNote;
use crate::error::Error;
use crate::state::State;

/// What an attachment listing takes: `GET /v1/attachments` and the MCP
/// `list_attachments` tool.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListAttachmentsParams {
    /// AIP-160 filter over `folder`, `path`, `file_name`, `content_type`, `size`,
    /// `modified_at`, `referenced` and `sha256`, e.g. `content_type = "image/png" AND
    /// size > 1000`, `referenced = false`.
    pub filter: Option<String>,
    /// AIP-132 order: `path` (default), `file_name`, `size`, `modified_at` or
    /// `content_type`, with `asc` or `desc`.
    pub order_by: Option<String>,
    /// Attachments per page, 1..500 (default 50).
    #[schema(minimum = 1, maximum = 500)]
    pub page_size: Option<usize>,
    /// The `next_page_token` of the previous page; repeat the other parameters unchanged.
    pub page_token: Option<String>,
}

/// List attachments with coverage (both surfaces).
pub async fn list_attachments(
    state: Arc<State>,
    p: ListAttachmentsParams,
) -> Result<AttachmentList, Error> {
    let filter = params::filter_text(
        params::non_empty("filter", p.filter.as_deref())?,
        crate::queries::attachments::FILTER_FIELDS,
    )?;
    let order = params::parse_order(
        params::non_empty("order_by", p.order_by.as_deref())?,
        crate::queries::attachments::ORDER_FIELDS,
        crate::queries::notes::Order::asc("path"),
    )?;
    let page_size = params::in_range(
        "page_size",
        p.page_size,
        DEFAULT_PAGE_SIZE,
        1,
        MAX_PAGE_SIZE,
    )?;
    let filter_text = p.filter.clone().unwrap_or_default();
    let order_text = p.order_by.clone().unwrap_or_default();
    let fingerprint = [
        ("route", "attachments"),
        ("filter", filter_text.as_str()),
        ("order_by", order_text.as_str()),
    ];
    let tokens = PageTokens {
        key: &state.token_key,
    };
    let offset = match params::non_empty("page_token", p.page_token.as_deref())? {
        Some(t) => tokens.open_offset(&fingerprint, t)?,
        None => 0,
    };
    let state2 = state.clone();
    let page = blocking(move || {
        Ok(crate::queries::attachments::list(
            &state2,
            filter.as_ref(),
            (order.field.as_str(), order.desc),
            offset,
            page_size,
        ))
    })
    .await?;
    let next_page_token = page
        .next_offset
        .map(|o| tokens.issue(&fingerprint, &o.to_string()));
    Ok(AttachmentList {
        coverage: AttachmentCoverage {
            attachments_total: page.total,
            attachments_matched: page.matched,
            attachments_returned: page.items.len(),
            truncated: next_page_token.is_some(),
            excluded_count: page.excluded.len(),
            excluded: page
                .excluded
                .iter()
                .take(100)
                .map(ExcludedNote::from)
                .collect(),
            committed_seq: page.committed_seq,
        },
        attachments: page
            .items
            .iter()
            .map(|(a, refs)| Attachment::of(a, *refs))
            .collect(),
        next_page_token,
    })
}

/// List the vault's attachments (every file that is not a note), with coverage.
#[utoipa::path(
    get,
    path = "/v1/attachments",
    operation_id = "list_attachments",
    tag = "Attachments",
    params(
        ("filter" = Option<String>, Query, description = "AIP-160 filter over `folder`, `path`, `file_name`, `content_type`, `size`, `modified_at`, `referenced`, `sha256`."),
        ("order_by" = Option<String>, Query, description = "`path` (default), `file_name`, `size`, `modified_at` or `content_type`, with `asc` or `desc`."),
        ("page_size" = Option<usize>, Query, description = "Attachments per page, 1..500 (default 50)."),
        ("page_token" = Option<String>, Query, description = "`next_page_token` of the previous page, with the same other parameters."),
    ),
    responses(
        (status = 200, description = "Attachments and coverage.", body = AttachmentList),
        (status = 400, description = "Bad parameter or filter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn list(state: Arc<State>, parts: Parts) -> ApiResult<Json<AttachmentList>> {
    let q = Query::parse(
        parts.uri.query(),
        &["filter", "order_by", "page_size", "page_token"],
    )?;
    let p = ListAttachmentsParams {
        filter: q.owned("filter"),
        order_by: q.owned("order_by"),
        page_size: q.opt_int("page_size", 1, MAX_PAGE_SIZE)?,
        page_token: q.owned("page_token"),
    };
    Ok(Json(list_attachments(state, p).await?))
}
