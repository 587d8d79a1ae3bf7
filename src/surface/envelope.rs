//! The error envelope: the one place where an [`Error`] becomes the answer a client
//! reads, as an HTTP response (`/v1`, `/mcp`, the console) or a tool result's body.

use std::collections::BTreeMap;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::{Error, Reason};

tokio::task_local! {
    /// The id of the request being served (`X-Request-Id`, `requestId`).
    pub static REQUEST_ID: String;
    /// `docs_url` of the serving daemon, for `help` links.
    pub static DOCS_URL: std::sync::Arc<str>;
    /// The vault's folder on the server, with a trailing `/` ([`vault_prefix`]).
    pub static VAULT_PREFIX: std::sync::Arc<str>;
}

/// What [`VAULT_PREFIX`] holds for a vault at `root`.
pub fn vault_prefix(root: &std::path::Path) -> std::sync::Arc<str> {
    format!("{}/", root.display()).into()
}

/// `message` with the vault's folder left out of the paths it names, for readability: a
/// client reads a note's path in the vault (the log keeps the whole message). Only a
/// path's start is cut, where the message or a word, quote or parenthesis starts, so a
/// path that merely contains the folder's name (`/srv/vault/work/srv/vault/x`, or one
/// outside the vault) is left whole.
pub fn in_vault_terms(message: &str) -> String {
    VAULT_PREFIX
        .try_with(|prefix| cut_prefix(message, prefix))
        .unwrap_or_else(|_| message.to_string())
}

fn cut_prefix(message: &str, prefix: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut copied = 0;
    for (at, _) in message.match_indices(prefix) {
        let starts = message[..at]
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || "'\"`(".contains(c));
        if starts {
            out.push_str(&message[copied..at]);
            copied = at + prefix.len();
        }
    }
    out.push_str(&message[copied..]);
    out
}

/// The request id, also kept in the request's extensions (for handlers that run outside
/// the middleware's task, such as MCP tool calls).
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// The error body of every failed request.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorEnvelope {
    /// The HTTP status text, e.g. `Not Found`.
    pub error: String,
    /// What went wrong, for a person.
    pub message: String,
    #[serde(rename = "statusCode")]
    pub status_code: u16,
    #[serde(rename = "requestId")]
    pub request_id: String,
    /// AIP-193 `ErrorInfo.reason`, UPPER_SNAKE.
    pub reason: String,
    /// One imperative sentence naming the next request.
    pub hint: String,
    /// `{docs_url}/api/errors#<reason lowercased>`.
    pub help: String,
    /// Typed details, each with an `@type`: ErrorInfo (always), BadRequest, RetryInfo, Help.
    #[schema(value_type = Vec<Object>)]
    pub details: Vec<serde_json::Value>,
}

/// `Error` as the API answers it.
#[derive(Debug)]
pub struct ApiError(pub Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        Self(e)
    }
}

pub fn current_request_id() -> String {
    REQUEST_ID
        .try_with(|id| id.clone())
        .unwrap_or_else(|_| "unknown".to_string())
}

fn docs_url() -> String {
    DOCS_URL
        .try_with(|u| u.to_string())
        .unwrap_or_else(|_| crate::config::Config::default().docs_url)
}

/// Build the envelope of `err`.
pub fn envelope(err: &Error) -> ErrorEnvelope {
    let reason = err.reason;
    let status = StatusCode::from_u16(reason.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let help = format!(
        "{}/api/errors#{}",
        docs_url().trim_end_matches('/'),
        reason.as_str().to_lowercase()
    );
    let mut metadata: BTreeMap<String, String> = err.metadata.clone();
    metadata.insert("requestId".into(), current_request_id());
    let mut details = vec![serde_json::json!({
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason.as_str(),
        "domain": "notevault",
        "metadata": metadata,
    })];
    if !err.field_violations.is_empty() {
        details.push(serde_json::json!({
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": err.field_violations.iter().map(|v| serde_json::json!({
                "field": v.field,
                "description": v.description,
            })).collect::<Vec<_>>(),
        }));
    }
    if let Some(secs) = err.retry_after {
        details.push(serde_json::json!({
            "@type": "type.googleapis.com/google.rpc.RetryInfo",
            "retryDelay": format!("{secs}s"),
        }));
    }
    details.push(serde_json::json!({
        "@type": "type.googleapis.com/google.rpc.Help",
        "links": [{ "description": format!("{} in the error reference", reason.as_str()), "url": help }],
    }));
    ErrorEnvelope {
        error: status.canonical_reason().unwrap_or("Error").to_string(),
        message: in_vault_terms(&err.message),
        status_code: status.as_u16(),
        request_id: current_request_id(),
        reason: reason.as_str().to_string(),
        hint: reason.hint().to_string(),
        help,
        details,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let err = self.0;
        if err.reason == Reason::INTERNAL || err.reason.status() >= 500 {
            tracing::error!(request_id = %current_request_id(), reason = %err.reason, message = %err.message, "request failed");
        }
        let body = envelope(&err);
        let status =
            StatusCode::from_u16(body.status_code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(secs) = err.retry_after {
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                response.headers_mut().insert("retry-after", v);
            }
        }
        if let Some(challenge) = crate::auth::challenge(&err) {
            if let Ok(v) = HeaderValue::from_str(&challenge) {
                response.headers_mut().insert("www-authenticate", v);
            }
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::cut_prefix;

    #[test]
    fn only_a_paths_start_is_cut() {
        let cut = |m: &str| cut_prefix(m, "/srv/vault/");
        assert_eq!(cut("/srv/vault/a.md is open"), "a.md is open");
        assert_eq!(
            cut("cannot read `/srv/vault/b/c.md`: gone"),
            "cannot read `b/c.md`: gone"
        );
        assert_eq!(
            cut("(/srv/vault/x.md) and '/srv/vault/y.md'"),
            "(x.md) and 'y.md'"
        );
        // Inside another path, or a path outside the vault: left whole.
        assert_eq!(cut("/srv/vault/work/srv/vault/x.md"), "work/srv/vault/x.md");
        assert_eq!(cut("/backup/srv/vault/x.md"), "/backup/srv/vault/x.md");
        assert_eq!(cut("no path here"), "no path here");
    }
}
