//! `GET /metrics`: the process's metrics (`telemetry`) in the Prometheus text format,
//! the gauges read at the scrape first (memory, open vaults and their op-log lag, the
//! review queue, the database pools).
//!
//! Where: local mode on the daemon's listener, like the probes (outside every layer, no
//! credential: it is loopback by default, and a metric names no note, vault or token).
//! Hosted mode on `metrics_listen` only, a second listener for a scraper on a private
//! network, so that no scraper holds a bearer and the public listener shows nothing of
//! the fleet's load; the public listener answers `ROUTE_NOT_FOUND` naming that key.

use std::net::SocketAddr;

use axum::extract::State as Shared;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::api::error::ApiError;
use crate::error::{Error, Reason};

use super::AppState;

/// Where `/metrics` goes on the daemon's listener: `routes` (inside every layer) and a
/// router outside them. Local mode: served outside, beside the probes. Hosted mode: an
/// envelope naming `metrics_listen`, inside (a request id, the access log).
pub(super) fn place(routes: Router<AppState>, app: &AppState) -> (Router<AppState>, Router) {
    match app.hosted {
        None => (routes, self::routes(app.clone())),
        Some(_) => (
            routes.route("/metrics", axum::routing::any(elsewhere)),
            Router::new(),
        ),
    }
}

/// The route of `/metrics` on a listener that serves it.
fn routes(app: AppState) -> Router {
    Router::new().route("/metrics", get(scrape)).with_state(app)
}

/// Hosted mode's public listener: `/metrics` is not served there.
async fn elsewhere() -> Response {
    ApiError(
        Error::new(
            Reason::ROUTE_NOT_FOUND,
            "GET /metrics is served in hosted mode on the `metrics_listen` address only (NOTEVAULT_METRICS_LISTEN, --metrics-listen), not on this listener",
        )
        .with_meta("config_key", "metrics_listen"),
    )
    .into_response()
}

async fn scrape(Shared(app): Shared<AppState>) -> Response {
    let sampled = tokio::task::spawn_blocking(move || sample(&app)).await;
    if let Err(e) = sampled {
        tracing::warn!(error = %e, "the metrics' gauges could not be read for this scrape");
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::telemetry::render(),
    )
        .into_response()
}

/// Read the gauges a scrape reports as of now. Blocking: SQLite or the database.
fn sample(app: &AppState) {
    crate::telemetry::sample_memory();
    let (open, pending) = match &app.hosted {
        Some(hosted) => {
            let directory = hosted.directory();
            directory.sample_pools();
            (directory.open_vaults(), directory.pending_writes())
        }
        None => {
            let open: Vec<_> = app.vaults.iter().map(|v| v.state.clone()).collect();
            let pending = open
                .iter()
                .map(|s| s.meta.count_pending())
                .sum::<crate::error::Result<usize>>()
                .ok();
            (open, pending)
        }
    };
    let lag = open
        .iter()
        .map(|s| s.committed_seq() - s.index.indexed_seq())
        .max()
        .unwrap_or(0);
    crate::telemetry::set_vaults(open.len(), lag);
    if let Some(pending) = pending {
        crate::telemetry::set_review_queue(pending);
    }
}

/// Bind `metrics_listen` and say where on stderr (never " on http://": that line is the
/// main listener's, which tools look for), before the address line.
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot listen on metrics_listen {addr}: {e}"),
        )
    })?;
    let bound = listener.local_addr()?;
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "notevault: metrics at http://{bound}/metrics"
    );
    Ok(listener)
}

/// Serve `/metrics` alone on `listener` until the guard returned is dropped (plain
/// HTTP: a private network's scraper).
pub(super) fn serve(
    listener: tokio::net::TcpListener,
    app: AppState,
) -> tokio_util::sync::DropGuard {
    let stop = tokio_util::sync::CancellationToken::new();
    let guard = stop.clone().drop_guard();
    let app = routes(app);
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "the metrics listener stopped");
        }
    });
    guard
}
