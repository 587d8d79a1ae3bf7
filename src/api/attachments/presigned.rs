//! Presigned links: made (`POST /v1/attachments:presign`, the MCP `attachment_link`
//! tool) and checked in place of the bearer.

use std::sync::Arc;

use crate::api::wire::Json;
use axum::http::request::Parts;
use axum::http::HeaderValue;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::target::{default_folder, target_path};
use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::notes::blocking;
use crate::auth::{self, Need, Permission};
use crate::error::{Error, Reason};
use crate::state::State;

/// What the MCP `attachment_link` tool takes: which attachment, and for how long.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachmentLinkParams {
    /// A file name found anywhere in the vault.
    pub file_name: Option<String>,
    /// A vault-relative path (instead of `file_name`).
    pub path: Option<String>,
    /// With `file_name`, which of several files of that name.
    pub sha256: Option<String>,
    /// Seconds, clamped to 10..86400 (default 300).
    pub expires_in: Option<i64>,
}

/// A presigned GET link to an attachment (the MCP `attachment_link` tool): the bytes stay
/// an HTTP download, for the agent or for a person it hands the link to.
pub async fn attachment_link(
    state: Arc<State>,
    p: AttachmentLinkParams,
    base: String,
) -> Result<PresignResponse, Error> {
    let req = PresignRequest {
        file_name: p.file_name,
        path: p.path,
        sha256: p.sha256,
        method: Some("GET".into()),
        expires_in: p.expires_in,
    };
    presign_link(state, req, base, false).await
}

/// A presigned link's request.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PresignRequest {
    /// A file name found anywhere in the vault (GET), or the name a PUT creates in the
    /// attachment folder.
    pub file_name: Option<String>,
    /// A vault-relative path (instead of `file_name`).
    pub path: Option<String>,
    /// With `file_name`, which of several files of that name (GET).
    pub sha256: Option<String>,
    /// `GET` (default; reusable until it expires) or `PUT` (once; needs `notes.write`).
    pub method: Option<String>,
    /// Seconds, clamped to 10..86400 (default 300).
    pub expires_in: Option<i64>,
}

/// A presigned link.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PresignResponse {
    pub url: String,
    pub method: String,
    pub expires_at: String,
    /// The vault-relative path the link reads or creates.
    pub path: String,
}

/// What a path segment of a link escapes.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'?')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'\\');

/// Shortest and longest life of a presigned link, and its default.
pub const PRESIGN_MIN_SECS: i64 = 10;
pub const PRESIGN_MAX_SECS: i64 = 24 * 3600;
pub const PRESIGN_DEFAULT_SECS: i64 = 300;

/// Make a presigned link (both surfaces). `can_write`: the caller holds `notes.write`.
pub async fn presign_link(
    state: Arc<State>,
    req: PresignRequest,
    base: String,
    can_write: bool,
) -> Result<PresignResponse, Error> {
    let method = req.method.as_deref().unwrap_or("GET").to_ascii_uppercase();
    if method != "GET" && method != "PUT" {
        return Err(Error::invalid_field("method", "must be GET or PUT"));
    }
    let ttl = req
        .expires_in
        .unwrap_or(PRESIGN_DEFAULT_SECS)
        .clamp(PRESIGN_MIN_SECS, PRESIGN_MAX_SECS);
    let name = match (&req.file_name, &req.path) {
        (Some(n), None) | (None, Some(n)) if !n.is_empty() => n.clone(),
        _ => {
            return Err(Error::invalid_field(
                "file_name",
                "give exactly one of `file_name` and `path`",
            ))
        }
    };
    let state2 = state.clone();
    let path = if method == "GET" {
        let sha = req.sha256.clone();
        blocking(move || crate::queries::attachments::find(&state2, &name, sha.as_deref()))
            .await?
            .path
            .clone()
    } else {
        if !can_write {
            return Err(Error::new(
                Reason::PERMISSION_MISSING,
                "a presigned PUT link needs the notes.write permission",
            )
            .with_meta("scope", "notes.write"));
        }
        let (folder, file) = match name.rsplit_once('/') {
            Some((f, n)) => (f.to_string(), n.to_string()),
            None => (default_folder(&state), name.clone()),
        };
        let path = target_path(&state, &folder, &file)?;
        if state.paths.root.join(&path).exists() {
            return Err(Error::new(
                Reason::NAME_COLLISION,
                format!("{path:?} already exists"),
            ));
        }
        path
    };
    let expires = chrono::Utc::now().timestamp() + ttl;
    let nonce = if method == "PUT" {
        uuid::Uuid::new_v4().simple().to_string()
    } else {
        String::new()
    };
    let sig =
        crate::auth::presigned::signature(&state.presign_key, &method, &path, expires, &nonce);
    let encoded: Vec<String> = path
        .split('/')
        .map(|p| percent_encoding::utf8_percent_encode(p, SEGMENT).to_string())
        .collect();
    let mut url = format!(
        "{base}/v1/attachments/{}?expires={expires}&signature={sig}",
        encoded.join("/")
    );
    if !nonce.is_empty() {
        url.push_str(&format!("&nonce={nonce}"));
    }
    Ok(PresignResponse {
        url,
        method,
        expires_at: crate::clock::timestamp(
            chrono::DateTime::from_timestamp(expires, 0).unwrap_or_default(),
        ),
        path,
    })
}

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
    let base = crate::api::oauth::public_base(&state.config, &parts.headers);
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
