//! `GET /v1/exports/{export}`: an export archive in the blob store, read through this
//! instance (the link `POST /v1/export` answers when `blob_public_endpoint` is not set).
//! The link is checked as a credential by `http::authenticate` (`auth::presigned`) like an
//! attachment's; any instance serves it, the vault named by its `vault` parameter.

use std::sync::Arc;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::Response;

use super::download::parse_range;
use super::presigned::PRESIGN_PARAMS;
use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::error::{Error, Reason};
use crate::state::State;

/// Download an export archive (`application/gzip`) from the blob store, with `Range`.
#[utoipa::path(
    get,
    path = "/v1/exports/{export}",
    operation_id = "get_export",
    tag = "Account",
    params(
        ("export" = String, Path, description = "The archive's object (`<uuid>.tar.gz`), as the link names it."),
        ("vault" = Option<String>, Query, description = "The vault's id (which vault's key signed the link)."),
        ("expires" = Option<i64>, Query, description = "The link's expiry (Unix seconds)."),
        ("signature" = Option<String>, Query, description = "The link's signature."),
    ),
    responses(
        (status = 200, description = "The archive, with `Content-Disposition` naming `notevault-<vault>-<date>.tar.gz`.", content_type = "application/gzip"),
        (status = 206, description = "The `Range` asked for, with `Content-Range`."),
        (status = 401, description = "A tampered or expired link (`AUTH_INVALID`), or no credential.", body = ErrorEnvelope),
        (status = 403, description = "`CREDENTIAL_FORBIDDEN`: a personal access token without a link.", body = ErrorEnvelope),
        (status = 404, description = "`EXPORT_NOT_FOUND`: no such archive (collected once its link expired).", body = ErrorEnvelope),
        (status = 416, description = "The `Range` is past the end.", body = ErrorEnvelope),
        (status = 503, description = "`BLOB_STORE_UNAVAILABLE` (`Retry-After`).", body = ErrorEnvelope),
    )
)]
pub async fn get(state: Arc<State>, object: String, parts: Parts) -> ApiResult<Response> {
    Query::parse(parts.uri.query(), PRESIGN_PARAMS)?;
    let not_found = || {
        Error::new(
            Reason::EXPORT_NOT_FOUND,
            format!("there is no export {object:?} in this vault's blob store"),
        )
    };
    // Only a name an export was given reaches the store.
    let made = object
        .strip_suffix(".tar.gz")
        .and_then(|id| uuid::Uuid::parse_str(id).ok())
        .and_then(|id| id.get_timestamp())
        .ok_or_else(not_found)?;
    let blobs = state
        .shared
        .as_ref()
        .and_then(|s| s.blobs.clone())
        .ok_or_else(not_found)?;
    let size = blobs
        .head_export(&state.vault_id, &object)
        .await?
        .ok_or_else(not_found)?;
    let range = match parts.headers.get("range").and_then(|v| v.to_str().ok()) {
        Some(r) => parse_range(r, size)?,
        None => None,
    };
    let at = chrono::DateTime::from_timestamp(made.to_unix().0 as i64, 0).unwrap_or_default();
    let name = crate::surface::export::file_name(&state, at);
    let mut response = Response::builder()
        .header("content-type", "application/gzip")
        .header(
            "content-disposition",
            format!("attachment; filename=\"{name}\""),
        )
        .header("accept-ranges", "bytes")
        .header("cache-control", "private, no-store");
    let (asked, len, status) = match range {
        Some((start, end)) => {
            response = response.header("content-range", format!("bytes {start}-{end}/{size}"));
            (
                Some(start..end + 1),
                end - start + 1,
                StatusCode::PARTIAL_CONTENT,
            )
        }
        None => (None, size, StatusCode::OK),
    };
    let stream = blobs.get_export(&state.vault_id, &object, asked).await?;
    Ok(response
        .status(status)
        .header("content-length", len.to_string())
        .body(Body::from_stream(stream))
        .map_err(Error::internal_cause)?)
}
