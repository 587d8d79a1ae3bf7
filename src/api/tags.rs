//! `GET /v1/tags`: its query string read into `surface::tags::TagsParams`, then the call
//! the MCP `list_tags` tool makes too.

use std::sync::Arc;

use axum::http::request::Parts;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::api::wire::Json;
use crate::state::State;
use crate::surface::tags::{tags, TagList, TagsParams, TAGS_PAGE_SIZE};

/// The frontmatter tag rollup with counts, nested tags rolled up into their parents.
/// Body `#hashtags` are not tags.
#[utoipa::path(
    get,
    path = "/v1/tags",
    tag = "Search",
    params(
        ("filter" = Option<String>, Query, description = "AIP-160 filter: count only the tags of the notes it keeps."),
        ("order_by" = Option<String>, Query, description = "`tag` (default, ascending) or `count` (`count desc` for the most used first)."),
        ("page_size" = Option<usize>, Query, description = "Tags per page, 1..1000 (default 200)."),
        ("page_token" = Option<String>, Query, description = "`next_page_token` of the previous page, with the same other parameters."),
    ),
    responses(
        (status = 200, description = "Tags with counts, and coverage.", body = TagList),
        (status = 400, description = "Bad filter, order or page token.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn tags_route(state: Arc<State>, parts: Parts) -> ApiResult<Json<TagList>> {
    let q = Query::parse(
        parts.uri.query(),
        &["filter", "order_by", "page_size", "page_token"],
    )?;
    let page_size = q.opt_int("page_size", 1, TAGS_PAGE_SIZE.1)?;
    let params = TagsParams {
        filter: q.non_empty("filter")?.map(str::to_string),
        order_by: q.non_empty("order_by")?.map(str::to_string),
        page_size,
        page_token: q.non_empty("page_token")?.map(str::to_string),
    };
    Ok(Json(tags(state, params).await?))
}
