//! Listing: `GET /v1/attachments`, its query string read into the parameters of the
//! call the MCP `list_attachments` tool makes too (`surface::attachments`).

use std::sync::Arc;

use axum::http::request::Parts;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::api::wire::Json;
use crate::state::State;
use crate::surface::attachments::{list_attachments, AttachmentList, ListAttachmentsParams};
use crate::surface::notes::MAX_PAGE_SIZE;

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
