//! `POST /v1/properties:aggregate`: its body read into
//! `surface::properties::AggregateRequest`, then the call the MCP `aggregate_properties`
//! tool makes too.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::request::Parts;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::api::wire::Json;
use crate::state::State;
use crate::surface::properties::{aggregate, AggregateRequest, PropertyAggregate};

/// Group the notes a filter keeps by a frontmatter property, with counts (and min/max
/// for numbers and dates). A query, not a write: no `Idempotency-Key`, read rate limit.
#[utoipa::path(
    post,
    path = "/v1/properties:aggregate",
    tag = "Search",
    request_body = AggregateRequest,
    responses(
        (status = 200, description = "The groups and coverage.", body = PropertyAggregate),
        (status = 400, description = "Bad body or filter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn aggregate_route(
    state: Arc<State>,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Json<PropertyAggregate>> {
    Query::parse(parts.uri.query(), &[])?;
    let raw = crate::api::writes::json_value(&parts.headers, &body)?;
    let req: AggregateRequest = crate::surface::input::parse_as(&raw)?;
    Ok(Json(aggregate(state, req).await?))
}
