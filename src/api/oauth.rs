//! Auth over HTTP: the token proxy (`POST /v1/auth/token`) and the protected-resource
//! metadata (RFC 9728) at `/.well-known/oauth-protected-resource` and its `/mcp` twin.
//! Both are open (the interface's "Authentication" items 8 and 9); the proxy counts as a
//! write for the rate limits. The exchange itself is `auth::idp`.

use std::sync::Arc;

use crate::api::wire::Json;
use crate::surface::origin::public_base;
use axum::body::Bytes;
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::api::routes::METADATA_PATH;
use crate::api::writes::json_value;
use crate::auth::idp::{self, Grant};
use crate::config::Config;
use crate::error::{Error, Reason};
use crate::state::State;
use crate::surface::input::parse_as;

// Named here too for `http`, which names this daemon's links the same way.

/// `POST /v1/auth/token` body: an `authorization_code` grant (`code`, `code_verifier`,
/// `redirect_uri`) or a `refresh_token` grant (`refresh_token`). JSON, or form-encoded as
/// OAuth clients send it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// `authorization_code` or `refresh_token`.
    pub grant_type: String,
    pub code: Option<String>,
    pub code_verifier: Option<String>,
    /// The client's registered callback URI.
    pub redirect_uri: Option<String>,
    pub refresh_token: Option<String>,
}

/// The token response.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenResponse {
    pub access_token: String,
    /// `null` when the provider issued none.
    pub refresh_token: Option<String>,
    /// Seconds the access token lives: the provider's figure, else from the token's
    /// `exp`, else 0 (unknown).
    pub expires_in: i64,
    /// The provider's organization; `null` when neither the provider, the token nor the
    /// configuration names one.
    pub organization_id: Option<String>,
}

/// The longest grant field accepted.
const MAX_FIELD: usize = 8 * 1024;

/// Exchange an authorization code (PKCE) or a refresh token at the identity provider,
/// with the API key the server holds.
#[utoipa::path(
    post,
    path = "/v1/auth/token",
    tag = "Auth",
    request_body = TokenRequest,
    responses(
        (status = 200, description = "The provider's tokens.", body = TokenResponse),
        (status = 400, description = "`VALIDATION_FAILED`, or `GRANT_INVALID`: the provider refused the code or refresh token.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited (the write limit).", body = ErrorEnvelope),
        (status = 502, description = "`IDP_UNAVAILABLE`: the provider did not answer well.", body = ErrorEnvelope),
        (status = 503, description = "`IDP_NOT_CONFIGURED`: no provider is configured.", body = ErrorEnvelope),
    ),
    security(())
)]
pub async fn token(state: Arc<State>, parts: Parts, body: Bytes) -> ApiResult<Response> {
    Query::parse(parts.uri.query(), &[])?;
    let grant = grant(&parts.headers, &body)?;
    let tokens = idp::exchange(state.config.identity_provider(), &grant).await?;
    let body = TokenResponse {
        access_token: tokens.access_token,
        refresh_token: tokens.refresh_token,
        expires_in: tokens.expires_in,
        organization_id: tokens.organization_id,
    };
    // RFC 6749 section 5.1: a token response is never cached.
    Ok((
        [("cache-control", "no-store"), ("pragma", "no-cache")],
        Json(body),
    )
        .into_response())
}

/// The grant of a token request body, each field checked.
fn grant(headers: &HeaderMap, body: &Bytes) -> Result<Grant, Error> {
    let form = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    let raw = if form {
        let mut object = serde_json::Map::new();
        for (k, v) in form_urlencoded::parse(body) {
            if object.insert(k.to_string(), v.to_string().into()).is_some() {
                return Err(Error::invalid_field(k, "is given more than once"));
            }
        }
        serde_json::Value::Object(object)
    } else {
        json_value(headers, body)?
    };
    let request: TokenRequest = parse_as(&raw)?;
    let field = |name: &str, value: Option<String>| -> Result<String, Error> {
        match value {
            None => Err(Error::invalid_field(
                name,
                format!("is required for grant_type {}", request.grant_type),
            )),
            Some(v) if v.is_empty() || v.len() > MAX_FIELD => Err(Error::invalid_field(
                name,
                format!("must be 1 to {MAX_FIELD} bytes"),
            )),
            Some(v) => Ok(v),
        }
    };
    let stray = |names: &[(&str, bool)]| -> Result<(), Error> {
        match names.iter().find(|(_, given)| *given) {
            Some((name, _)) => Err(Error::invalid_field(
                *name,
                format!("is not a field of grant_type {}", request.grant_type),
            )),
            None => Ok(()),
        }
    };
    match request.grant_type.as_str() {
        "authorization_code" => {
            stray(&[("refresh_token", request.refresh_token.is_some())])?;
            Ok(Grant::AuthorizationCode {
                code: field("code", request.code.clone())?,
                code_verifier: field("code_verifier", request.code_verifier.clone())?,
                redirect_uri: field("redirect_uri", request.redirect_uri.clone())?,
            })
        }
        "refresh_token" => {
            stray(&[
                ("code", request.code.is_some()),
                ("code_verifier", request.code_verifier.is_some()),
                ("redirect_uri", request.redirect_uri.is_some()),
            ])?;
            Ok(Grant::RefreshToken {
                refresh_token: field("refresh_token", request.refresh_token.clone())?,
            })
        }
        other => Err(Error::invalid_field(
            "grant_type",
            format!("must be authorization_code or refresh_token, got {other:?}"),
        )),
    }
}

/// The protected-resource metadata (RFC 9728 section 2).
#[derive(Debug, Serialize, ToSchema)]
pub struct ResourceMetadata {
    /// The protected resource: this daemon's base URL, or its `/mcp` URL.
    pub resource: String,
    /// The issuer whose tokens this resource accepts.
    pub authorization_servers: Vec<String>,
    pub bearer_methods_supported: Vec<String>,
    pub scopes_supported: Vec<String>,
    pub resource_name: String,
    pub resource_documentation: String,
}

/// The metadata document for `resource_path` (`""`: the `/v1` API; `/mcp`: the MCP
/// endpoint). `ROUTE_NOT_FOUND` without an issuer.
pub fn metadata(config: &Config, headers: &HeaderMap, resource_path: &str) -> ApiResult<Response> {
    let Some(issuer) = &config.auth_issuer else {
        return Err(Error::new(
            Reason::ROUTE_NOT_FOUND,
            format!("{METADATA_PATH} is served only when an identity provider (auth_issuer) is configured"),
        )
        .into());
    };
    let base = public_base(config, headers);
    Ok(Json(ResourceMetadata {
        resource: format!("{base}{resource_path}"),
        authorization_servers: vec![issuer.clone()],
        bearer_methods_supported: vec!["header".into()],
        scopes_supported: vec!["notes.write".into(), "notes.review".into()],
        resource_name: "notevault".into(),
        resource_documentation: config.docs_url.clone(),
    })
    .into_response())
}

/// Protected-resource metadata of the `/v1` API.
#[utoipa::path(
    get,
    path = "/.well-known/oauth-protected-resource",
    tag = "Auth",
    responses(
        (status = 200, description = "The metadata.", body = ResourceMetadata),
        (status = 404, description = "`ROUTE_NOT_FOUND`: no issuer is configured.", body = ErrorEnvelope),
    ),
    security(())
)]
pub async fn resource_metadata(state: Arc<State>, parts: Parts) -> ApiResult<Response> {
    Query::parse(parts.uri.query(), &[])?;
    metadata(&state.config, &parts.headers, "")
}

/// Protected-resource metadata of the MCP endpoint (its `resource` is the `/mcp` URL).
#[utoipa::path(
    get,
    path = "/.well-known/oauth-protected-resource/mcp",
    tag = "Auth",
    responses(
        (status = 200, description = "The metadata.", body = ResourceMetadata),
        (status = 404, description = "`ROUTE_NOT_FOUND`: no issuer is configured.", body = ErrorEnvelope),
    ),
    security(())
)]
pub async fn mcp_resource_metadata(state: Arc<State>, parts: Parts) -> ApiResult<Response> {
    Query::parse(parts.uri.query(), &[])?;
    metadata(&state.config, &parts.headers, "/mcp")
}
