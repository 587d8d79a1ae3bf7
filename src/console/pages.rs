//! The console's pages: review (pending writes with their diffs, approve and reject, the
//! decided ones), access tokens, write settings, activity (the audit log) and the vault
//! (overview, private notes, purge). Each handler reads the session first ([`signed`]),
//! and a post checks its CSRF token ([`signed_post`]) before anything changes.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, RawQuery, State as Shared};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::Utc;

use super::diff::{self, DiffLine};
use super::{field, html, is_htmx, problem_page, signed, signed_post, status_of, Console, Signed};
use crate::auth::{pat, Permission};
use crate::error::{Error, Reason, Result};
use crate::meta::audit::{AuditEvent, AuditKind, AuditRow};
use crate::meta::PendingRow;
use crate::queries::settings::{settings as write_settings, WritePolicy};
use crate::state::State;

/// The most pending writes one review page shows (oldest first); the rest wait their turn.
pub const MAX_PENDING_SHOWN: usize = 100;
/// The decided writes the review page lists (newest first).
const DECIDED_SHOWN: usize = 20;

/// What every page's frame shows.
pub struct Chrome {
    pub vault_name: String,
    pub csrf: String,
    pub page: &'static str,
    pub pending: usize,
    pub notice: Option<&'static str>,
    pub problem: Option<String>,
}

fn chrome(state: &State, signed: &Signed, page: &'static str) -> Result<Chrome> {
    let pending = state.meta.count_pending()?;
    Ok(Chrome {
        vault_name: crate::purge::vault_name(state),
        csrf: signed.row.csrf.clone(),
        page,
        pending,
        notice: None,
        problem: None,
    })
}

/// The fixed notices a redirect after a post names (`?done=`): never text from the URL.
fn notice(done: Option<&str>) -> (Option<&'static str>, Option<String>) {
    match done {
        Some("approved") => (Some("Approved: the write is applied to the note."), None),
        Some("rejected") => (Some("Rejected: the note is untouched."), None),
        Some("already") => (
            None,
            Some("That write was already decided (in another tab or by another reviewer); nothing changed.".into()),
        ),
        Some("failed") => (
            None,
            Some("That write could not be applied (the note changed since it was queued); it is rejected and the note is untouched.".into()),
        ),
        Some("revoked") => (Some("Token revoked: it stops working at its next request."), None),
        Some("saved") => (Some("Write settings saved."), None),
        _ => (None, None),
    }
}

/// A query parameter of a page's URL (a page never fails on a bad query: it ignores it).
fn param(raw: &Option<String>, name: &str) -> Option<String> {
    form_urlencoded::parse(raw.as_deref().unwrap_or("").as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// The vault's state as the pages show it.
pub struct Overview {
    pub root: String,
    pub notes: usize,
    pub attachments: usize,
    pub committed_seq: i64,
    pub indexed_seq: i64,
    pub watcher: String,
    pub policy: &'static str,
}

fn overview(state: &State) -> Result<Overview> {
    let status = crate::queries::status::status(state);
    Ok(Overview {
        root: state.root().display().to_string(),
        notes: status.notes,
        attachments: state.attachments.read().len(),
        committed_seq: status.committed_seq,
        indexed_seq: status.indexed_seq,
        watcher: status.watcher.state,
        policy: write_settings(state)?.policy.as_str(),
    })
}

/// A pending write as a card.
pub struct WriteView {
    pub id: String,
    pub title: String,
    pub path: String,
    pub kind: String,
    pub agent: String,
    pub created_at: String,
    pub diff: Vec<DiffLine>,
}

/// A decided write as a row.
pub struct DecidedView {
    pub title: String,
    pub path: String,
    pub kind: String,
    pub agent: String,
    pub status: String,
    pub error: Option<String>,
    pub decided_at: String,
    /// Who decided (`auth::Who`); "unrecorded" for a row decided before that was kept.
    pub decided_by: String,
}

/// The title of the note a write is about (the catalog's; for a note that does not exist
/// yet, its file name) and its path.
fn title_and_path(state: &State, slug: &str) -> (String, String) {
    let catalog = state.catalog.read();
    match catalog.get(slug) {
        Some(note) => (note.title.clone(), note.path.clone()),
        None => (
            slug.rsplit('/').next().unwrap_or(slug).to_string(),
            format!("{slug}.md"),
        ),
    }
}

fn write_view(state: &State, row: &PendingRow) -> WriteView {
    let (title, path) = title_and_path(state, &row.slug);
    WriteView {
        id: row.id.clone(),
        title,
        path,
        kind: row.kind.clone(),
        agent: row.agent_id.clone(),
        created_at: row.created_at.clone(),
        diff: diff::lines(&row.preview),
    }
}

/// The pending writes to show (oldest first, at most [`MAX_PENDING_SHOWN`]), how many more
/// wait, and the latest decided ones.
/// What the pending list shows, as a short fingerprint: the count and the ids shown. The
/// page polls with it and hears 204 while it has not changed.
fn list_version(waiting: usize, ids: impl Iterator<Item = impl AsRef<str>>) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&(waiting as u64).to_le_bytes());
    for id in ids {
        hasher.update(id.as_ref().as_bytes());
        hasher.update(&[0]);
    }
    hasher.finalize().to_hex()[..16].to_string()
}

/// The version of the pending list as it is now.
fn current_version(state: &State) -> Result<String> {
    let waiting = state.meta.count_pending()?;
    let ids = state.meta.pending_ids(MAX_PENDING_SHOWN)?;
    Ok(list_version(waiting, ids.iter()))
}

/// The pending writes shown, how many more wait, the list's version, and the latest
/// decided writes (with `decided`).
struct Queue {
    pending: Vec<WriteView>,
    more: usize,
    version: String,
    decided: Vec<DecidedView>,
}

fn queue(state: &State, with_decided: bool) -> Result<Queue> {
    let waiting = state.meta.count_pending()?;
    let rows = state.meta.pending_rows(false, MAX_PENDING_SHOWN)?;
    let version = list_version(waiting, rows.iter().map(|r| &r.id));
    let shown: Vec<WriteView> = rows.iter().map(|r| write_view(state, r)).collect();
    let more = waiting.saturating_sub(shown.len());
    if !with_decided {
        return Ok(Queue {
            pending: shown,
            more,
            version,
            decided: Vec::new(),
        });
    }
    let decided = state
        .meta
        .pending_rows(true, DECIDED_SHOWN)?
        .into_iter()
        .map(|r| {
            let (title, path) = title_and_path(state, &r.slug);
            DecidedView {
                title,
                path,
                kind: r.kind,
                agent: r.agent_id,
                status: r.status,
                error: r.error,
                decided_at: r.decided_at.unwrap_or_default(),
                decided_by: r.decided_by.unwrap_or_else(|| "unrecorded".into()),
            }
        })
        .collect();
    Ok(Queue {
        pending: shown,
        more,
        version,
        decided,
    })
}

#[derive(Template)]
#[template(path = "review.html")]
pub struct ReviewPage {
    chrome: Chrome,
    csrf: String,
    overview: Overview,
    pending: Vec<WriteView>,
    more: usize,
    decided: Vec<DecidedView>,
    /// The pending list's version (the poller asks with it).
    version: String,
    /// The poller is swapped out of band (in fragments only).
    oob: bool,
}

#[derive(Template)]
#[template(path = "pending_update.html")]
struct PendingFragment {
    csrf: String,
    pending: Vec<WriteView>,
    more: usize,
    version: String,
    oob: bool,
}

#[derive(Template)]
#[template(path = "decided.html")]
struct DecidedFragment<'a> {
    id: &'a str,
    class: &'static str,
    message: String,
    /// The pending list's version after the decision: the page's next poll hears 204,
    /// so this answer stays on the page until something else changes.
    version: String,
    oob: bool,
}

/// The review page as HTML for a session whose CSRF token is `csrf` (also what
/// `benches/console.rs` times).
pub fn render_review(state: &State, csrf: &str, done: Option<&str>) -> Result<String> {
    let Queue {
        pending,
        more,
        version,
        decided,
    } = queue(state, true)?;
    let (notice, problem) = notice(done);
    let page = ReviewPage {
        chrome: Chrome {
            vault_name: crate::purge::vault_name(state),
            csrf: csrf.to_string(),
            page: "review",
            pending: pending.len() + more,
            notice,
            problem,
        },
        csrf: csrf.to_string(),
        overview: overview(state)?,
        pending,
        more,
        decided,
        version,
        oob: false,
    };
    page.render()
        .map_err(|e| Error::internal(format!("the review page: {e}")))
}

/// Run `work` on a blocking thread and answer its page, or the error as a page.
async fn page(
    state: &Arc<State>,
    work: impl FnOnce(&State) -> Result<Response> + Send + 'static,
) -> Response {
    let state = state.clone();
    match tokio::task::spawn_blocking(move || work(&state)).await {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => problem_page(status_of(&e), &e.message),
        Err(_) => problem_page(StatusCode::INTERNAL_SERVER_ERROR, "the page failed"),
    }
}

fn rendered(status: StatusCode, result: askama::Result<String>) -> Result<Response> {
    Ok(html(status, result))
}

/// `GET /`: the pending writes.
pub async fn review(
    Shared(console): Shared<Console>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let signed = match signed(&console, &headers) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    page(&console.state, move |state| {
        let body = render_review(state, &signed.row.csrf, param(&raw, "done").as_deref())?;
        rendered(StatusCode::OK, Ok(body))
    })
    .await
}

/// `GET /pending?version=…`: the pending list alone, which the review page polls every 3
/// seconds so that a write an agent queues appears without a reload: 204 (nothing to
/// swap: focus, selection and a decision's answer stay) while the list is the version the
/// page has, else the list and the poller with the new version.
pub async fn pending(
    Shared(console): Shared<Console>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let signed = match signed(&console, &headers) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    page(&console.state, move |state| {
        // The version alone first (ids, not the writes): most polls end here.
        if param(&raw, "version").as_deref() == Some(current_version(state)?.as_str()) {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        let Queue {
            pending,
            more,
            version,
            ..
        } = queue(state, false)?;
        rendered(
            StatusCode::OK,
            PendingFragment {
                csrf: signed.row.csrf.clone(),
                pending,
                more,
                version,
                oob: true,
            }
            .render(),
        )
    })
    .await
}

/// `POST /writes/{id}/approve|reject`: decide through the one review door. A write another
/// tab decided says so and changes nothing.
pub async fn decide(
    Shared(console): Shared<Console>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (_, _) = match signed_post(&console, &headers, &body) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    let approve = match action.as_str() {
        "approve" => true,
        "reject" => false,
        _ => return problem_page(StatusCode::NOT_FOUND, "No such action: approve or reject."),
    };
    let Ok(id) = uuid::Uuid::parse_str(&id).map(|u| u.to_string()) else {
        return problem_page(StatusCode::NOT_FOUND, "No such pending write.");
    };
    let htmx = is_htmx(&headers);
    page(&console.state, move |state| {
        let (done, class, message) =
            match crate::writes::review::decide(state, &id, approve, crate::auth::Who::CONSOLE) {
                Ok(row) if row.status == "applied" => (
                    "approved",
                    "ok",
                    "Approved: the write is applied to the note.".to_string(),
                ),
                Ok(row) if approve => (
                    "failed",
                    "bad",
                    format!(
                        "Could not apply it ({}); it is rejected and the note is untouched.",
                        row.error.unwrap_or_default()
                    ),
                ),
                Ok(_) => ("rejected", "ok", "Rejected: the note is untouched.".to_string()),
                Err(e) if e.reason == Reason::ALREADY_DECIDED => (
                    "already",
                    "bad",
                    "This write was already decided (in another tab or by another reviewer); nothing changed.".to_string(),
                ),
                Err(e) if htmx => ("", "bad", format!("Nothing changed: {}", e.message)),
                Err(e) => return Err(e),
            };
        if htmx {
            return rendered(
                StatusCode::OK,
                DecidedFragment {
                    id: &id,
                    class,
                    message,
                    version: current_version(state)?,
                    oob: true,
                }
                .render(),
            );
        }
        Ok(Redirect::to(&format!("/?done={done}")).into_response())
    })
    .await
}

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
    Shared(console): Shared<Console>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let signed = match signed(&console, &headers) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    page(&console.state, move |state| {
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
    Shared(console): Shared<Console>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (signed, fields) = match signed_post(&console, &headers, &body) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    let base = crate::api::oauth::public_base(&console.state.config, &headers);
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
    Shared(console): Shared<Console>,
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

#[derive(Template)]
#[template(path = "settings.html")]
struct SettingsPage {
    chrome: Chrome,
    /// Each policy, what it does, and whether it is the vault's.
    policies: Vec<(&'static str, &'static str, bool)>,
    budget: u32,
    /// Review decisions only from a signed-in person or a `notes.review` token.
    signed_in_decisions: bool,
    /// The configuration says so: the switch cannot turn it off.
    decisions_configured: bool,
}

fn policy_help(p: WritePolicy) -> &'static str {
    match p {
        WritePolicy::AutoApply => "every write applies at once",
        WritePolicy::Review => "every agent write waits here for your approval",
        WritePolicy::ReviewDestructive => {
            "deletes, moves and renames wait for your approval; other writes apply"
        }
        WritePolicy::ReadOnly => "every write is refused",
    }
}

fn settings_page(
    state: &State,
    signed: &Signed,
    done: Option<&str>,
    problem: Option<String>,
    status: StatusCode,
) -> Result<Response> {
    let mut chrome = chrome(state, signed, "settings")?;
    (chrome.notice, chrome.problem) = notice(done);
    if problem.is_some() {
        chrome.problem = problem;
    }
    let current = write_settings(state)?;
    rendered(
        status,
        SettingsPage {
            chrome,
            policies: WritePolicy::ALL
                .into_iter()
                .map(|p| (p.as_str(), policy_help(p), p == current.policy))
                .collect(),
            budget: current.budget,
            signed_in_decisions: crate::writes::review::review_decisions(state)?
                == crate::writes::review::ReviewDecisions::SignedIn,
            decisions_configured: state.config.review_decisions
                == crate::writes::review::ReviewDecisions::SignedIn,
        }
        .render(),
    )
}

/// `GET /settings`.
pub async fn settings(
    Shared(console): Shared<Console>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let signed = match signed(&console, &headers) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    page(&console.state, move |state| {
        settings_page(
            state,
            &signed,
            param(&raw, "done").as_deref(),
            None,
            StatusCode::OK,
        )
    })
    .await
}

/// `POST /settings`: the policy and the budget, through `writes::review::set_settings`.
pub async fn save_settings(
    Shared(console): Shared<Console>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (signed, fields) = match signed_post(&console, &headers, &body) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    page(&console.state, move |state| {
        let policy = field(&fields, "write_policy").and_then(WritePolicy::parse);
        let budget = field(&fields, "write_budget").and_then(|b| b.trim().parse::<u32>().ok());
        let (Some(policy), Some(budget)) = (policy, budget) else {
            return settings_page(
                state,
                &signed,
                None,
                Some("Nothing saved: pick a policy, and give the budget as a whole number (0 for unlimited).".into()),
                StatusCode::BAD_REQUEST,
            );
        };
        crate::writes::review::set_settings(state, Some(policy), Some(budget), "console")?;
        let decisions = if field(&fields, "signed_in_decisions").is_some() {
            crate::writes::review::ReviewDecisions::SignedIn
        } else {
            crate::writes::review::ReviewDecisions::Anyone
        };
        if crate::writes::review::review_decisions(state)? != decisions {
            crate::writes::review::set_review_decisions(state, decisions, "console")?;
        }
        Ok(Redirect::to("/settings?done=saved").into_response())
    })
    .await
}

/// An audit row as the activity page shows it.
pub struct EventView {
    pub created_at: String,
    pub kind: String,
    pub actor: String,
    pub subject: String,
    pub counts: String,
}

fn event_view(row: AuditRow) -> EventView {
    let counts = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&row.counts)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    EventView {
        created_at: row.created_at,
        kind: row.kind,
        actor: row.actor,
        subject: row.subject.unwrap_or_default(),
        counts,
    }
}

#[derive(Template)]
#[template(path = "activity.html")]
struct ActivityPage {
    chrome: Chrome,
    /// Each kind, and whether it is the one shown.
    kinds: Vec<(&'static str, bool)>,
    /// The spans offered, and whether it is the one shown.
    days: Vec<(i64, bool)>,
    events: Vec<EventView>,
    more: bool,
}

/// `GET /activity`: the audit log of the last days, newest first.
pub async fn activity(
    Shared(console): Shared<Console>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let signed = match signed(&console, &headers) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    page(&console.state, move |state| {
        let days = param(&raw, "days")
            .and_then(|d| d.parse::<i64>().ok())
            .unwrap_or(7)
            .clamp(1, 365);
        let kind = param(&raw, "kind")
            .filter(|k| AuditKind::ALL.iter().any(|a| a.as_str() == k))
            .unwrap_or_default();
        let since = crate::clock::timestamp(Utc::now() - chrono::Duration::days(days));
        let keep = |r: &AuditRow| kind.is_empty() || r.kind == kind;
        let (rows, more) = state.meta.audit_page(None, Some(&since), &keep, 500)?;
        rendered(
            StatusCode::OK,
            ActivityPage {
                chrome: chrome(state, &signed, "activity")?,
                kinds: AuditKind::ALL
                    .iter()
                    .map(|k| (k.as_str(), k.as_str() == kind))
                    .collect(),
                days: [1, 7, 30, 365]
                    .into_iter()
                    .map(|d| (d, d == days))
                    .collect(),
                events: rows.into_iter().map(event_view).collect(),
                more,
            }
            .render(),
        )
    })
    .await
}

/// Private notes as the vault page shows them: never key material.
pub struct PrivateNotes {
    pub enabled: bool,
    pub key_version: Option<u32>,
    pub recovery: bool,
    pub count: usize,
    pub notice: &'static str,
}

#[derive(Template)]
#[template(path = "vault.html")]
struct VaultPage {
    chrome: Chrome,
    overview: Overview,
    private: PrivateNotes,
}

fn vault_page(
    state: &State,
    signed: &Signed,
    problem: Option<String>,
    status: StatusCode,
) -> Result<Response> {
    let mut chrome = chrome(state, signed, "vault")?;
    chrome.problem = problem;
    rendered(
        status,
        VaultPage {
            chrome,
            overview: overview(state)?,
            private: {
                let keys = crate::sync::e2ee::key_state(state)?;
                PrivateNotes {
                    enabled: keys.enabled(),
                    key_version: keys.hierarchy.as_ref().map(|h| h.key_version),
                    recovery: keys
                        .hierarchy
                        .as_ref()
                        .is_some_and(|h| h.recovery.is_some()),
                    count: crate::queries::search::private_note_count(state),
                    notice: keys.recovery_notice(),
                }
            },
        }
        .render(),
    )
}

/// `POST /export`: the export archive, downloaded (the same stream as `POST /v1/export`).
pub async fn export(
    Shared(console): Shared<Console>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (_, fields) = match signed_post(&console, &headers, &body) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    let history = field(&fields, "history") == Some("true");
    crate::api::account::export_response(console.state.clone(), history, "console")
}

/// `GET /vault`: the overview, private notes, export and purge.
pub async fn vault(Shared(console): Shared<Console>, headers: HeaderMap) -> Response {
    let signed = match signed(&console, &headers) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    page(&console.state, move |state| {
        vault_page(state, &signed, None, StatusCode::OK)
    })
    .await
}

#[derive(Template)]
#[template(path = "stopped.html")]
struct StoppedPage<'a> {
    message: &'a str,
}

/// `POST /purge`: the typed confirmation, then the daemon stops and removes its state.
pub async fn purge(
    Shared(console): Shared<Console>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (signed, fields) = match signed_post(&console, &headers, &body) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    page(&console.state, move |state| {
        let confirm = field(&fields, "confirm").unwrap_or_default();
        let trash_notes = field(&fields, "trash_notes") == Some("true");
        match crate::purge::request(state, confirm, trash_notes, "console") {
            Ok(asked) => rendered(
                StatusCode::OK,
                StoppedPage {
                    message: if asked.trash_notes {
                        "notevault is stopping and removing its data about this vault; the notes move to .trash/ in the folder. Start it again to serve the folder afresh."
                    } else {
                        "notevault is stopping and removing its data about this vault; the notes folder is untouched. Start it again to serve the folder afresh."
                    },
                }
                .render(),
            ),
            Err(e) if e.reason == Reason::VALIDATION_FAILED => vault_page(
                state,
                &signed,
                Some(format!(
                    "Nothing purged: type the vault's name, {}, exactly.",
                    crate::purge::vault_name(state)
                )),
                StatusCode::BAD_REQUEST,
            ),
            Err(e) => Err(e),
        }
    })
    .await
}
