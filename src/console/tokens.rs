//! The tokens page: personal access tokens listed, created (shown once, with a ready MCP
//! configuration) and revoked.

use askama::Template;
use axum::extract::{Path, RawQuery};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;
use chrono::Utc;

use super::{field, signed_post, Console, Signed};
use crate::auth::{pat, Permission};
use crate::error::{Error, Reason, Result};
use crate::state::State;
use crate::storage::rows::{AuditEvent, AuditKind};

use super::pages::{chrome, notice, page, param, rendered, signed_page, Chrome};

/// A personal access token as the tokens page lists it (never the token).
pub struct TokenView {
    pub name: String,
    pub prefix: String,
    pub scopes: String,
    pub created_at: String,
    pub expires_at: String,
    pub last_used_at: String,
}

/// A token just made: shown once.
pub struct Created {
    pub name: String,
    pub token: String,
    pub mcp_config: String,
}

#[derive(Template)]
#[template(path = "tokens.html")]
struct TokensPage {
    chrome: Chrome,
    tokens: Vec<TokenView>,
    created: Option<Created>,
    /// Open local mode: a request without a bearer is served; one with a bearer is checked.
    open_mode: bool,
}

fn tokens_page(
    state: &State,
    signed: &Signed,
    done: Option<&str>,
    created: Option<Created>,
    problem: Option<String>,
    status: StatusCode,
) -> Result<Response> {
    let mut chrome = chrome(state, signed, "tokens")?;
    (chrome.notice, chrome.problem) = notice(done);
    if problem.is_some() {
        chrome.problem = problem;
    }
    let tokens = state
        .meta
        .pats()?
        .into_iter()
        .map(|p| TokenView {
            scopes: std::iter::once("read")
                .chain(p.scopes.split_whitespace())
                .collect::<Vec<_>>()
                .join(", "),
            name: p.name,
            prefix: p.prefix,
            created_at: p.created_at,
            expires_at: p.expires_at.unwrap_or_else(|| "never".into()),
            last_used_at: p.last_used_at.unwrap_or_else(|| "never".into()),
        })
        .collect();
    rendered(
        status,
        TokensPage {
            chrome,
            tokens,
            created,
            open_mode: !state.config.auth_configured(),
        }
        .render(),
    )
}

/// `GET /tokens`.
pub async fn tokens(
    Extension(console): Extension<Console>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    signed_page(&console, &headers, move |state, signed| {
        tokens_page(
            state,
            &signed,
            param(&raw, "done").as_deref(),
            None,
            None,
            StatusCode::OK,
        )
    })
    .await
}

/// The MCP configuration an agent pastes (Claude Code, Cursor: `mcpServers`).
fn mcp_config(base: &str, token: &str) -> String {
    let config = serde_json::json!({
        "mcpServers": {
            "notevault": {
                "type": "http",
                "url": format!("{base}/mcp"),
                "headers": { "Authorization": format!("Bearer {token}") }
            }
        }
    });
    serde_json::to_string_pretty(&config).unwrap_or_default()
}

/// `POST /tokens`: make a token (the one maker, `Meta::create_pat`) and show it once.
pub async fn create_token(
    Extension(console): Extension<Console>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (signed, fields) = match signed_post(&console, &headers, &body) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    let base = crate::surface::origin::public_base(&console.state.config, &headers);
    page(&console.state, move |state| {
        let made = (|| {
            let name = field(&fields, "name").unwrap_or_default();
            let mut scopes = Vec::new();
            for (_, v) in fields.iter().filter(|(k, _)| k == "scope") {
                scopes.push(Permission::from_name(v).ok_or_else(|| {
                    Error::invalid_field("scope", "must be notes.write or notes.review")
                })?);
            }
            let lifetime = match field(&fields, "expires_in").filter(|v| !v.is_empty()) {
                Some(v) => Some(
                    pat::parse_lifetime(v).map_err(|e| Error::invalid_field("expires_in", e))?,
                ),
                None => None,
            };
            state.meta.create_pat(name, &scopes, lifetime, Utc::now())
        })();
        match made {
            Ok((token, row)) => {
                state.meta.note_audit(
                    &AuditEvent::new(AuditKind::TokenCreated, "console").subject(&row.prefix),
                );
                let created = Created {
                    mcp_config: mcp_config(&base, &token),
                    name: row.name,
                    token,
                };
                tokens_page(state, &signed, None, Some(created), None, StatusCode::OK)
            }
            Err(e) if e.reason == Reason::VALIDATION_FAILED => tokens_page(
                state,
                &signed,
                None,
                None,
                Some(format!("No token made: {}", e.message)),
                StatusCode::BAD_REQUEST,
            ),
            Err(e) => Err(e),
        }
    })
    .await
}

/// `POST /tokens/{prefix}/revoke`.
pub async fn revoke_token(
    Extension(console): Extension<Console>,
    Path(prefix): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (signed, _) = match signed_post(&console, &headers, &body) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    page(&console.state, move |state| {
        // By prefix only: a name could be another token's prefix.
        let known = state.meta.pats()?.iter().any(|p| p.prefix == prefix);
        if !known || state.meta.revoke_pat(&prefix)? == 0 {
            return tokens_page(
                state,
                &signed,
                None,
                None,
                Some("No such token: it was revoked already.".into()),
                StatusCode::NOT_FOUND,
            );
        }
        state
            .meta
            .note_audit(&AuditEvent::new(AuditKind::TokenRevoked, "console").subject(&prefix));
        Ok(Redirect::to("/tokens?done=revoked").into_response())
    })
    .await
}
