//! Presigned links over HTTP: made (`POST /v1/attachments:presign`; the call is
//! `surface::attachments::presign_link`, the MCP `attachment_link` tool's too) and
//! checked in place of the bearer.

use std::sync::Arc;

use axum::http::request::Parts;
use axum::http::HeaderValue;
use axum::response::Response;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::wire::Json;
use crate::auth::{self, Need, Permission};
use crate::error::{Error, Reason};
use crate::state::State;
use crate::surface::attachments::{presign_link, signature, PresignRequest, PresignResponse};

/// Make a presigned link to read (GET) or create (PUT) an attachment without a bearer.
#[utoipa::path(
    post,
    path = "/v1/attachments:presign",
    operation_id = "presign_attachment",
    tag = "Attachments",
    request_body = PresignRequest,
    responses(
        (status = 200, description = "The link and its expiry.", body = PresignResponse),
        (status = 400, description = "Bad body.", body = ErrorEnvelope),
        (status = 403, description = "A PUT link without `notes.write`.", body = ErrorEnvelope),
        (status = 404, description = "No such attachment (GET).", body = ErrorEnvelope),
        (status = 409, description = "Ambiguous name (GET), or the path exists (PUT).", body = ErrorEnvelope),
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

/// A presigned request's check, in place of the bearer: `Ok(None)` when the request
/// carries no signature (the bearer decides), `Ok(Some(nonce))` for a good link (the
/// nonce of a PUT, spent now), else `AUTH_INVALID`.
pub fn verify_presigned(
    state: &State,
    method: &str,
    path: &str,
    query: Option<&str>,
) -> Result<Option<String>, Error> {
    let Some(query) = query else { return Ok(None) };
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let Some(sig) = get("signature") else {
        return Ok(None);
    };
    let invalid = |why: &str| {
        Error::new(
            Reason::AUTH_INVALID,
            format!("the presigned link is not valid: {why}"),
        )
    };
    let expires: i64 = get("expires")
        .and_then(|e| e.parse().ok())
        .ok_or_else(|| invalid("it has no expiry"))?;
    let nonce = get("nonce").unwrap_or("");
    let want = signature(&state.presign_key, method, path, expires, nonce);
    if !bool::from(subtle::ConstantTimeEq::ct_eq(
        want.as_bytes(),
        sig.as_bytes(),
    )) {
        return Err(invalid("its signature does not match"));
    }
    let now = chrono::Utc::now().timestamp();
    if expires < now {
        return Err(invalid("it expired").with_meta("expired_at", expires.to_string()));
    }
    if method == "PUT" {
        if nonce.is_empty() {
            return Err(invalid("a PUT link has a nonce"));
        }
        if !state.meta.use_nonce(nonce, expires, now)? {
            return Err(invalid("a PUT link works once, and this one was used"));
        }
        return Ok(Some(nonce.to_string()));
    }
    Ok(Some(String::new()))
}

/// The query parameters of a presigned link.
pub(super) const PRESIGN_PARAMS: &[&str] = &["expires", "nonce", "signature"];

/// Vary on nothing a shared cache could confuse: a presigned answer is private.
pub fn private(mut r: Response) -> Response {
    r.headers_mut().insert(
        "cache-control",
        HeaderValue::from_static("private, no-store"),
    );
    r
}
