//! The identity provider as the daemon reaches it: one HTTP client (reqwest over rustls,
//! shared by the JWK Set fetches and the token proxy), and the token proxy's exchange.
//!
//! The token proxy (`POST /v1/auth/token`) lets a public client (a native app doing PKCE)
//! finish its sign-in without holding the provider's API key: the daemon forwards the
//! grant to `idp_token_url` as an OAuth 2.0 token request (RFC 6749 section 4.1.3 / 6,
//! form-encoded), authenticating with `IDP_API_KEY` as `client_secret` (and
//! `idp_client_id` as `client_id` when set). What comes back is reduced to the four fields
//! of the interface's token response; the provider's own error text is never passed on
//! (it may echo the grant), only its OAuth `error` code. The API key is sent in that one
//! request body and nowhere else: not logged, not in an error.

use std::sync::OnceLock;
use std::time::Duration;

use serde::Deserialize;

use crate::auth::Secret;
use crate::error::{Error, Reason, Result};

/// The longest the token proxy waits for the provider.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest provider answer read.
const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// The process's client for the identity provider: one connection pool, rustls, no
/// redirects (a token endpoint that redirects is misconfigured, and a redirect would
/// carry the API key elsewhere), a connect timeout.
pub fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("notevault/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default()
    })
}

/// Read a response body of at most `limit` bytes.
async fn body_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> std::result::Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| e.without_url().to_string())?
    {
        if out.len() + chunk.len() > limit {
            return Err(format!("the answer is larger than {limit} bytes"));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// GET `url` and read at most `limit` bytes of a 2xx answer (the caller bounds the time).
pub async fn get_bounded(url: &str, limit: usize) -> std::result::Result<Vec<u8>, String> {
    let response = client()
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {}", e.without_url()))?;
    if !response.status().is_success() {
        return Err(format!("{url} answered {}", response.status()));
    }
    body_bounded(response, limit).await
}

/// The identity provider as the token proxy reaches it (the settings `idp_token_url`,
/// `IDP_API_KEY`, `idp_client_id`, `org_id`; see `Config::identity_provider`).
#[derive(Debug, Clone, Copy)]
pub struct Provider<'a> {
    pub token_url: Option<&'a str>,
    pub api_key: Option<&'a Secret>,
    pub client_id: Option<&'a str>,
    pub org_id: Option<&'a str>,
}

/// A grant the token proxy forwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    AuthorizationCode {
        code: String,
        code_verifier: String,
        redirect_uri: String,
    },
    RefreshToken {
        refresh_token: String,
    },
}

/// The token response of the interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: Option<String>,
    pub expires_in: i64,
    pub organization_id: Option<String>,
}

/// What a provider answers (RFC 6749 section 5.1, plus `organization_id` as WorkOS-style
/// providers send it).
#[derive(Deserialize)]
struct Answer {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
    #[serde(default)]
    organization_id: Option<String>,
}

/// A provider's refusal (RFC 6749 section 5.2).
#[derive(Deserialize)]
struct Refusal {
    error: String,
}

fn provider_down(message: impl Into<String>) -> Error {
    Error::new(Reason::IDP_UNAVAILABLE, message).with_retry_after(5)
}

/// Forward `grant` to the provider and reduce its answer to [`Tokens`]. Errors:
/// `IDP_NOT_CONFIGURED` (no `idp_token_url` or no `IDP_API_KEY`), `GRANT_INVALID` (the
/// provider refused the code or refresh token: its OAuth `error` code is named),
/// `IDP_UNAVAILABLE` (unreachable, too slow, an error status, an answer that is not a
/// token response, or the provider refusing the server's own credentials).
pub async fn exchange(provider: Provider<'_>, grant: &Grant) -> Result<Tokens> {
    let (Some(url), Some(key)) = (provider.token_url, provider.api_key) else {
        return Err(Error::new(
            Reason::IDP_NOT_CONFIGURED,
            match provider.token_url {
                None => "this daemon has no identity provider token endpoint (idp_token_url)",
                Some(_) => "this daemon has no identity provider API key (IDP_API_KEY)",
            },
        ));
    };
    let mut form: Vec<(&str, &str)> = match grant {
        Grant::AuthorizationCode {
            code,
            code_verifier,
            redirect_uri,
        } => vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("code_verifier", code_verifier),
            ("redirect_uri", redirect_uri),
        ],
        Grant::RefreshToken { refresh_token } => vec![
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
        ],
    };
    if let Some(id) = provider.client_id {
        form.push(("client_id", id));
    }
    form.push(("client_secret", key.expose()));
    let send = client()
        .post(url)
        .header("accept", "application/json")
        .form(&form)
        .send();
    let answer = async {
        let response = send.await.map_err(|e| {
            let why = if e.is_connect() {
                "cannot connect to the identity provider"
            } else {
                "the identity provider's connection failed"
            };
            provider_down(why)
        })?;
        let status = response.status();
        let body = body_bounded(response, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| provider_down(format!("the identity provider's answer was cut: {e}")))?;
        Ok::<_, Error>((status, body))
    };
    let (status, body) = tokio::time::timeout(EXCHANGE_TIMEOUT, answer)
        .await
        .map_err(|_| {
            provider_down(format!(
                "the identity provider did not answer within {} s",
                EXCHANGE_TIMEOUT.as_secs()
            ))
        })??;
    if status.is_success() {
        let answer: Answer = serde_json::from_slice(&body)
            .map_err(|_| provider_down("the identity provider's answer is not a token response"))?;
        return Ok(tokens(answer, provider));
    }
    let code = serde_json::from_slice::<Refusal>(&body)
        .ok()
        .map(|r| r.error)
        .filter(|c| c.len() <= 64 && c.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
    match (status.as_u16(), code.as_deref()) {
        (_, Some("invalid_client" | "unauthorized_client")) => {
            tracing::error!(
                status = status.as_u16(),
                "the identity provider refused the daemon's own credentials: check IDP_API_KEY and idp_client_id"
            );
            Err(provider_down(
                "the identity provider refused this daemon's credentials; its operator must fix IDP_API_KEY",
            ))
        }
        (400 | 401, Some(code)) => Err(Error::new(
            Reason::GRANT_INVALID,
            format!("the identity provider refused the grant: {code}"),
        )
        .with_meta("provider_error", code)),
        (400 | 401, None) => Err(Error::new(
            Reason::GRANT_INVALID,
            "the identity provider refused the grant",
        )),
        (status, _) => Err(provider_down(format!(
            "the identity provider answered HTTP {status}"
        ))),
    }
}

/// The token response from the provider's answer: `expires_in` as the provider says, else
/// from the access token's `exp` (read, not verified: the client verifies it on use),
/// else 0 (unknown); `organization_id` as the provider says, else the token's `org_id`,
/// else the configured `org_id`.
fn tokens(answer: Answer, provider: Provider<'_>) -> Tokens {
    let claims = unverified_claims(&answer.access_token);
    let claim = |name: &str| claims.as_ref().and_then(|c| c.get(name).cloned());
    let expires_in = answer
        .expires_in
        .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
        .or_else(|| {
            let exp = claim("exp")?.as_i64()?;
            Some((exp - chrono::Utc::now().timestamp()).max(0))
        })
        .unwrap_or(0);
    let organization_id = answer
        .organization_id
        .or_else(|| claim("org_id")?.as_str().map(str::to_string))
        .or_else(|| provider.org_id.map(str::to_string));
    Tokens {
        access_token: answer.access_token,
        refresh_token: answer.refresh_token,
        expires_in,
        organization_id,
    }
}

/// The payload of a compact JWS, unverified; `None` when `token` is not one.
fn unverified_claims(token: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}
