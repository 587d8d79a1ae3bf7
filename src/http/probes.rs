//! `GET /healthz` and `GET /readyz`, for a load balancer or an orchestrator: outside
//! `/v1`, before every other layer (no credential, no Host check, no rate limit), and
//! answering nothing about any vault's content.
//!
//! Healthy: the process serves HTTP. Ready: every part a request needs answers: in local
//! mode each vault's start-up index sync is done (the start-up scan ran before serving);
//! in hosted mode the database answers and its schema is this binary's; and no stop was
//! asked for (the drain). A part that is not ready is named with why, and the answer is
//! 503.

use std::sync::atomic::Ordering;

use axum::extract::State as Shared;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Map, Value};

use super::hosted::{Checks, HostedServed};
use super::AppState;

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
        let found = hosted_checks(hosted).await;
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
async fn hosted_checks(hosted: &HostedServed) -> Checks {
    let (readiness, directory) = (hosted.readiness.clone(), hosted.directory());
    let arrived = readiness.done.load(Ordering::SeqCst);
    let turn = tokio::spawn(async move {
        let mut last = readiness.last.lock().await;
        if readiness.done.load(Ordering::SeqCst) > arrived {
            if let Some(checks) = last.as_ref() {
                return checks.clone();
            }
        }
        let checks = match tokio::task::spawn_blocking(move || directory.ready()).await {
            Ok(found) => found,
            Err(e) => vec![("database", Err(format!("the check failed: {e}")))],
        };
        *last = Some(checks.clone());
        readiness.done.fetch_add(1, Ordering::SeqCst);
        checks
    });
    turn.await
        .unwrap_or_else(|e| vec![("database", Err(format!("the check failed: {e}")))])
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
