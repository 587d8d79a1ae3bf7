//! `GET /v1/vault`: the summary the MCP `vault_summary` tool answers too.

use std::sync::Arc;

use axum::http::request::Parts;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::api::wire::Json;
use crate::state::State;
use crate::surface::vault::{vault, VaultSummary};

/// A summary of the vault: counts, size, write settings, private-notes state, freshness.
#[utoipa::path(
    get,
    path = "/v1/vault",
    tag = "Search",
    responses(
        (status = 200, description = "The summary.", body = VaultSummary),
        (status = 400, description = "Bad parameter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn vault_route(state: Arc<State>, parts: Parts) -> ApiResult<Json<VaultSummary>> {
    Query::parse(parts.uri.query(), &[])?;
    Ok(Json(vault(state).await?))
}
