//! The owner's pages: write settings, activity (the audit log), and the vault (overview,
//! private notes, export, purge).

use askama::Template;
use axum::extract::RawQuery;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;
use chrono::Utc;

use super::{field, signed_post, Console, Signed};
use crate::error::{Reason, Result};
use crate::queries::settings::{settings as write_settings, WritePolicy};
use crate::state::State;
use crate::storage::rows::{AuditKind, AuditRow};

use super::pages::{
    chrome, notice, overview, page, param, rendered, signed_page, Chrome, Overview,
};

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
    Extension(console): Extension<Console>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    signed_page(&console, &headers, move |state, signed| {
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
    Extension(console): Extension<Console>,
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

/// What an audit row's subject names, in words: a review decision's note (its title and
/// path), a token's name; anything else as stored.
fn subject_of(state: &State, kind: &str, subject: Option<String>) -> String {
    let Some(subject) = subject else {
        return String::new();
    };
    if kind.starts_with("write.") {
        if let Ok(Some(row)) = state.meta.pending(&subject) {
            let catalog = state.catalog.read();
            return match catalog.get(&row.slug) {
                Some(note) => format!("{} ({})", note.title, note.path),
                None => format!("{}.md", row.slug),
            };
        }
    }
    if kind.starts_with("token.") {
        if let Some(pat) = state
            .meta
            .pats()
            .ok()
            .and_then(|pats| pats.into_iter().find(|p| p.prefix == subject))
        {
            return format!("token {} ({})", pat.name, pat.prefix);
        }
    }
    subject
}

fn event_view(state: &State, row: AuditRow) -> EventView {
    let subject = subject_of(state, &row.kind, row.subject);
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
        subject,
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
    Extension(console): Extension<Console>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    signed_page(&console, &headers, move |state, signed| {
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
                events: rows.into_iter().map(|r| event_view(state, r)).collect(),
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
    /// The notice in pieces, each `(is code, text)`: its `code` spans set as code, never
    /// as literal backticks.
    pub notice: Vec<(bool, &'static str)>,
}

/// `text` split at its backticks: the odd pieces are code.
fn code_spans(text: &'static str) -> Vec<(bool, &'static str)> {
    text.split('`')
        .enumerate()
        .filter(|(_, piece)| !piece.is_empty())
        .map(|(i, piece)| (i % 2 == 1, piece))
        .collect()
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
                    count: crate::queries::private::private_note_count(state),
                    notice: code_spans(keys.recovery_notice()),
                }
            },
        }
        .render(),
    )
}

/// `POST /export`: the export archive, downloaded (what `POST /v1/export` answers: the
/// stream, or a redirect to the archive in the blob store).
pub async fn export(
    Extension(console): Extension<Console>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (_, fields) = match signed_post(&console, &headers, &body) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    let history = field(&fields, "history") == Some("true");
    let base = crate::surface::origin::public_base(&console.state.config, &headers);
    let state = console.state.clone();
    match crate::surface::export::export(state, history, "console", base).await {
        Ok(crate::surface::export::Exported::Streamed(response)) => response,
        Ok(crate::surface::export::Exported::Stored(link)) => {
            Redirect::to(&link.url).into_response()
        }
        Err(e) => page(&console.state, move |_| Err(e)).await,
    }
}

/// `GET /vault`: the overview, private notes, export and purge.
pub async fn vault(Extension(console): Extension<Console>, headers: HeaderMap) -> Response {
    signed_page(&console, &headers, move |state, signed| {
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
    Extension(console): Extension<Console>,
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
