//! Presigned links over HTTP: made by `POST /v1/attachments:presign` (the call is
//! `surface::attachments::presign_link`, the MCP `attachment_link` tool's too); a link
//! is checked as a credential by `http::authenticate` (`auth::presigned`).

use std::sync::Arc;

use axum::http::request::Parts;
use axum::http::HeaderValue;
use axum::response::Response;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::wire::Json;
use crate::auth::{self, Need, Permission};

use crate::state::State;
use crate::surface::attachments::{presign_link, PresignRequest, PresignResponse};

/// Make a presigned link to read (GET) or create (PUT) an attachment without a bearer.
///
/// The instance's own link, or, for a hosted vault with `blob_public_endpoint` set, the
/// blob store's SigV4 presigned URL: the bytes go between the client and the store. A
/// store PUT link needs `size`, `content_type` and `sha256`, and signs them
/// (`Content-Length`, `Content-Type`, `x-amz-checksum-sha256`: send the answer's
/// `headers`); the object becomes the attachment at the vault's next listing.
#[utoipa::path(
    post,
    path = "/v1/attachments:presign",
    operation_id = "presign_attachment",
    tag = "Attachments",
    request_body = PresignRequest,
    responses(
        (status = 200, description = "The link and its expiry.", body = PresignResponse),
        (status = 400, description = "Bad body; a store PUT link without `size`, `content_type` or `sha256`.", body = ErrorEnvelope),
        (status = 403, description = "A PUT link without `notes.write`.", body = ErrorEnvelope),
        (status = 404, description = "No such attachment (GET).", body = ErrorEnvelope),
        (status = 409, description = "Ambiguous name (GET), or the path exists (PUT).", body = ErrorEnvelope),
        (status = 413, description = "A store PUT link's `size` over the byte cap.", body = ErrorEnvelope),
        (status = 415, description = "A store PUT link's `content_type` not allowed.", body = ErrorEnvelope),
        (status = 503, description = "The blob store or the database did not answer (`Retry-After`).", body = ErrorEnvelope),
    )
)]
pub async fn presign(
    state: Arc<State>,
    parts: Parts,
    bytes: axum::body::Bytes,
) -> ApiResult<Json<PresignResponse>> {
    let raw = crate::api::writes::json_value(&parts.headers, &bytes)?;
    let req: PresignRequest = crate::api::writes::parse_as(&raw)?;
    let credential = crate::api::credential(&parts.extensions)?;
    let can_write = auth::require(credential, Need::Permission(Permission::NotesWrite)).is_ok();
    let base = crate::surface::origin::public_base(&state.config, &parts.headers);
    Ok(Json(presign_link(state, req, base, can_write).await?))
}

/// The query parameters of a presigned link.
pub(super) const PRESIGN_PARAMS: &[&str] = crate::auth::presigned::PARAMS;

/// Vary on nothing a shared cache could confuse: a presigned answer is private.
pub fn private(mut r: Response) -> Response {
    r.headers_mut().insert(
        "cache-control",
        HeaderValue::from_static("private, no-store"),
    );
    r
}
