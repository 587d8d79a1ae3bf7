//! `GET /healthz` and `GET /readyz`, for a load balancer or an orchestrator: outside
//! `/v1`, before every other layer (no credential, no Host check, no rate limit), and
//! answering nothing about any vault's content.
//!
//! Healthy: the process serves HTTP. Ready: every part a request needs answers: in local
//! mode each vault's start-up index sync is done (the start-up scan ran before serving);
//! in hosted mode the database answers and its schema is this binary's; and no stop was
//! asked for (the drain). A part that is not ready is named with why, and the answer is
//! 503.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::State as Shared;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Map, Value};

use super::AppState;
use crate::vaults::{Checks, Directory};

pub fn routes(app: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(app)
}

async fn healthz() -> Response {
    Json(json!({"status": "serving"})).into_response()
}

async fn readyz(Shared(app): Shared<AppState>) -> Response {
    let mut checks: Vec<(String, Result<(), String>)> = Vec::new();
    if app.draining.load(std::sync::atomic::Ordering::Relaxed) {
        checks.push((
            "drain".into(),
            Err("stopping: requests under way are finished, send new ones elsewhere".into()),
        ));
    }
    if let Some(hosted) = &app.hosted {
        let found = hosted.readiness.clone().checks(hosted.directory()).await;
        checks.extend(found.into_iter().map(|(part, r)| (part.to_string(), r)));
    } else {
        let several = app.vaults.len() > 1;
        for served in &app.vaults {
            let part = if several {
                format!("index of {}", served.state.root().display())
            } else {
                "index".to_string()
            };
            checks.push((part, index_ready(&served.state)));
        }
    }
    let ready = checks.iter().all(|(_, r)| r.is_ok());
    let parts: Map<String, Value> = checks
        .into_iter()
        .map(|(part, r)| (part, Value::String(r.err().unwrap_or_else(|| "ok".into()))))
        .collect();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({"status": if ready { "ready" } else { "not_ready" }, "checks": parts});
    (status, Json(body)).into_response()
}

/// The hosted parts' checks (database, schema, blob store), one at a time: a probe that
/// arrives while one runs takes that check's answer rather than queue one of its own
/// (the answer may thus predate the probe by one check's length). The check runs in a
/// task of its own, so a probe given up by its client (a balancer's timeout) leaves no
/// half-done turn behind: balancers probing often, or an instance slow to answer, never
/// pile checks up.
#[derive(Default)]
pub(super) struct Readiness {
    /// The last check's answer; locked while a check runs.
    last: tokio::sync::Mutex<Option<Checks>>,
    /// How many checks ended.
    done: AtomicU64,
}

impl Readiness {
    async fn checks(self: Arc<Self>, directory: Arc<dyn Directory>) -> Checks {
        let failed =
            |e: tokio::task::JoinError| vec![("database", Err(format!("the check failed: {e}")))];
        let arrived = self.done.load(Ordering::SeqCst);
        let turn = tokio::spawn(async move {
            let mut last = self.last.lock().await;
            if self.done.load(Ordering::SeqCst) > arrived {
                if let Some(checks) = last.as_ref() {
                    return checks.clone();
                }
            }
            let checks = tokio::task::spawn_blocking(move || directory.ready())
                .await
                .unwrap_or_else(failed);
            *last = Some(checks.clone());
            self.done.fetch_add(1, Ordering::SeqCst);
            checks
        });
        turn.await.unwrap_or_else(failed)
    }
}

/// A local vault's index: its start-up sync applied (searches cover every note).
fn index_ready(state: &crate::state::State) -> Result<(), String> {
    let index = state.index.state();
    if let Some(e) = index.last_error {
        return Err(format!("the search index failed: {e}"));
    }
    if !state.index.start_sync_settled() || index.sync_remaining > 0 {
        return Err(format!(
            "the start-up index sync has {} notes to go",
            index.sync_remaining
        ));
    }
    Ok(())
}
