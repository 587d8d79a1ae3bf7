//! The console's review pages (pending writes with their diffs, approve and reject, the
//! decided ones) and what every page shares (its chrome, notices, rendering on a blocking
//! thread); tokens in `tokens`, the owner's pages in `vault`. Each handler reads the session first ([`signed`]),
//! and a post checks its CSRF token ([`signed_post`]) before anything changes.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, RawQuery};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;

use super::diff::{self, DiffLine};
use super::{html, is_htmx, problem_page, signed, signed_post, status_of, Console, Signed};
use crate::error::{Error, Reason, Result};
use crate::queries::settings::settings as write_settings;
use crate::state::State;
use crate::storage::rows::PendingRow;

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

pub(super) fn chrome(state: &State, signed: &Signed, page: &'static str) -> Result<Chrome> {
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
pub(super) fn notice(done: Option<&str>) -> (Option<&'static str>, Option<String>) {
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
        Some("bulk") => (
            Some("Decided the selected writes, one by one: the Decided list shows each outcome."),
            None,
        ),
        Some("none") => (
            None,
            Some("Nothing decided: select writes first (the box on each card).".into()),
        ),
        _ => (None, None),
    }
}

/// A query parameter of a page's URL (a page never fails on a bad query: it ignores it).
pub(super) fn param(raw: &Option<String>, name: &str) -> Option<String> {
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

pub(super) fn overview(state: &State) -> Result<Overview> {
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
            crate::vault::path::file_name_of(slug).to_string(),
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
    let decided = decided(state)?;
    Ok(Queue {
        pending: shown,
        more,
        version,
        decided,
    })
}

/// The latest decided writes, newest first.
fn decided(state: &State) -> Result<Vec<DecidedView>> {
    Ok(state
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
        .collect())
}

/// What a fragment swaps beside the list (out of band): the count in the navigation, the
/// vault's strip and the decided list, so that the page stays current after a decision
/// or a poll that found the queue changed.
struct Around {
    waiting: usize,
    overview: Overview,
    decided: Vec<DecidedView>,
}

fn around(state: &State) -> Result<Around> {
    Ok(Around {
        waiting: state.meta.count_pending()?,
        overview: overview(state)?,
        decided: decided(state)?,
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
    around: Around,
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
    around: Around,
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
        .map_err(|e| Error::internal(format!("the review page: {e}")).with_cause(e))
}

/// Run `work` on a blocking thread and answer its page, or the error as a page.
pub(super) async fn page(
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

/// A page for a signed-in person: the sign-in page without a session, else `work` on a
/// blocking thread (as [`page`]) with the session.
pub(super) async fn signed_page(
    console: &Console,
    headers: &HeaderMap,
    work: impl FnOnce(&State, Signed) -> Result<Response> + Send + 'static,
) -> Response {
    match signed(console, headers) {
        Ok(signed) => page(&console.state, move |state| work(state, signed)).await,
        Err(sign_in) => *sign_in,
    }
}

pub(super) fn rendered(status: StatusCode, result: askama::Result<String>) -> Result<Response> {
    Ok(html(status, result))
}

/// `GET /`: the pending writes.
pub async fn review(
    Extension(console): Extension<Console>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    signed_page(&console, &headers, move |state, signed| {
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
    Extension(console): Extension<Console>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    signed_page(&console, &headers, move |state, signed| {
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
                around: around(state)?,
            }
            .render(),
        )
    })
    .await
}

/// `POST /writes/{id}/approve|reject`: decide through the one review door. A write another
/// tab decided says so and changes nothing.
pub async fn decide(
    Extension(console): Extension<Console>,
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
                    around: around(state)?,
                }
                .render(),
            );
        }
        Ok(Redirect::to(&format!("/?done={done}")).into_response())
    })
    .await
}

/// `POST /writes/bulk`: the writes selected on the review page (`id`, repeated), each
/// approved or rejected (`action`) through the one review door, one decision per write
/// recorded with its decider; then the review page with what was decided.
pub async fn decide_selected(
    Extension(console): Extension<Console>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (_, fields) = match signed_post(&console, &headers, &body) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    let approve = match fields
        .iter()
        .find(|(k, _)| k == "action")
        .map(|(_, v)| v.as_str())
    {
        Some("approve") => true,
        Some("reject") => false,
        _ => {
            return problem_page(
                StatusCode::BAD_REQUEST,
                "Choose Approve selected or Reject selected.",
            )
        }
    };
    let ids: Vec<String> = fields
        .iter()
        .filter(|(k, _)| k == "id")
        .filter_map(|(_, v)| uuid::Uuid::parse_str(v).ok().map(|u| u.to_string()))
        .collect();
    page(&console.state, move |state| {
        if ids.is_empty() {
            return Ok(Redirect::to("/?done=none").into_response());
        }
        for id in &ids {
            // Each its own decision: one decided elsewhere meanwhile, or one that cannot
            // be applied, is listed with its outcome and the others go on.
            match crate::writes::review::decide(state, id, approve, crate::auth::Who::CONSOLE) {
                Ok(_) => {}
                Err(e)
                    if e.reason == Reason::ALREADY_DECIDED
                        || e.reason == Reason::PENDING_WRITE_NOT_FOUND => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Redirect::to("/?done=bulk").into_response())
    })
    .await
}
