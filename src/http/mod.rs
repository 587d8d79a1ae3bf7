//! The HTTP application: the `/v1` route table (`api`) and the MCP endpoint (`mcp`)
//! behind one middleware stack, served by our accept loop (`server`). This is the only
//! module that knows both surfaces; neither imports it.
//!
//! Middleware, outermost first: request id (a task-local read by the envelope) →
//! Host/Origin guard → CORS (when origins are configured; inside the guard, so a foreign
//! preflight is refused) → `authenticate` (the one layer that puts the request's
//! `Credential` into its extensions) → rate limits (the class from the route table) →
//! panic catcher → `/mcp` or `api::dispatch`.

mod hosted;
pub mod metrics;
mod probes;
pub mod server;
pub mod tls;
mod vault;

pub use vault::ServedVault;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State as Shared};
use axum::http::HeaderValue;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::net::TcpListener;

use crate::api::error::{self, ApiError, RequestId, DOCS_URL, REQUEST_ID, VAULT_PREFIX};
use crate::api::guard::{Guards, HostGuard, RateLimits};
use crate::api::{credential, dispatch, routes, writes};
use crate::auth::{self, jwt, pat, Credential, Permission, Presented, StaticTokens};
use crate::config::Config;
use crate::error::{Error, Reason};
use crate::vaults::{Directory, Vaults};

/// What the middleware and the handlers reach: shared, so that the clone each middleware
/// and extractor takes per request is one reference count, not a copy of every field
/// (the MCP service's cancellation token takes a lock to be cloned).
#[derive(Clone)]
pub struct AppState(Arc<AppParts>);

impl std::ops::Deref for AppState {
    type Target = AppParts;

    fn deref(&self) -> &AppParts {
        &self.0
    }
}

/// The fields of [`AppState`].
pub struct AppParts {
    /// The daemon's settings (the default vault's configuration): the listener, TLS,
    /// the Host guard, rate limits, credentials.
    pub config: Config,
    /// The vaults served, the default first; a request reaches one ([`vault::ServedVault`]).
    pub vaults: Vec<Arc<ServedVault>>,
    pub guards: Arc<Guards>,
    pub docs_url: Arc<str>,
    /// Ends the MCP sessions and streams when the server shuts down.
    pub mcp_cancel: tokio_util::sync::CancellationToken,
    /// The configured static tokens, for `authenticate`.
    pub static_tokens: Arc<StaticTokens>,
    /// The verifier of the identity provider's JWTs, when an issuer is configured.
    pub jwt: Option<Arc<jwt::Verifier>>,
    /// Hosted mode: the vaults of the database, found by the credential; `vaults` then
    /// holds only the lobby, an empty vault that a request naming no vault reaches.
    pub hosted: Option<hosted::HostedServed>,
    /// Set when a stop was asked for: `/readyz` answers 503 while requests are still
    /// served for `drain_seconds`.
    pub draining: Arc<std::sync::atomic::AtomicBool>,
}

impl AppState {
    pub fn new(vaults: impl Into<Vaults>) -> Self {
        Self::build(vaults.into(), None)
    }

    /// Hosted mode's application: the vaults of `directory`, and `lobby` for requests
    /// that name none.
    pub fn hosted(lobby: Arc<crate::state::State>, directory: Arc<dyn Directory>) -> Self {
        Self::build(lobby.into(), Some(directory))
    }

    fn build(vaults: Vaults, directory: Option<Arc<dyn Directory>>) -> Self {
        crate::telemetry::install();
        let config = vaults.default_vault().config.clone();
        let guards = Arc::new(Guards {
            hosts: HostGuard::new(&config),
            limits: Arc::new(RateLimits::new(&config)),
        });
        let docs_url: Arc<str> = config.docs_url.clone().into();
        let mcp_cancel = tokio_util::sync::CancellationToken::new();
        let static_tokens = Arc::new(StaticTokens::new(&config.static_tokens));
        let served = vaults
            .all()
            .iter()
            .map(|state| ServedVault::new(state, &docs_url, &mcp_cancel))
            .collect();
        Self(Arc::new(AppParts {
            hosted: directory.map(hosted::HostedServed::new),
            draining: Arc::default(),
            static_tokens,
            jwt: config.jwt_verifier().map(Arc::new),
            docs_url,
            vaults: served,
            config,
            guards,
            mcp_cancel,
        }))
    }

    /// The default vault (a request without a bearer reaches it).
    pub fn default_vault(&self) -> &Arc<ServedVault> {
        &self.vaults[0]
    }
}

/// The whole application as a router, for `run` and for `oneshot` tests: `/mcp` (rmcp's
/// streamable HTTP service), the web console's pages, and the route table, behind the
/// same middleware.
pub fn router(app: AppState) -> Router {
    let probes = probes::routes(app.clone());
    let routes = Router::new()
        .route("/mcp", axum::routing::any(mcp))
        .merge(crate::console::routes());
    let (routes, open_metrics) = metrics::place(routes, &app);
    layered(routes.fallback(dispatch), app)
        .merge(probes)
        .merge(open_metrics)
}

/// `/mcp`: the same one check as a routed request ([`routes::MCP`]), then the vault's
/// rmcp service, whose handler reads the credential from the request to decide the tools
/// it offers.
async fn mcp(Shared(app): Shared<AppState>, req: Request) -> Response {
    if let Err(err) = credential(req.extensions()).and_then(|c| auth::require(c, routes::MCP.need))
    {
        return ApiError(err).into_response();
    }
    let Some(vault) = req.extensions().get::<Arc<ServedVault>>().cloned() else {
        return ApiError(Error::internal(
            "the request has no vault: the auth layer did not run",
        ))
        .into_response();
    };
    crate::mcp::handle(&vault.mcp, req, app.config.body_read_timeout).await
}

/// Wrap `app` in the middleware every request passes, outermost first: request id,
/// Host/Origin guard, CORS (when origins are configured; inside the guard, so a preflight
/// from a foreign origin is refused like any request), the credential, rate limits, panic
/// catching.
fn layered(routes: Router<AppState>, app: AppState) -> Router {
    let mut routes = routes
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(on_panic))
        .layer(middleware::from_fn_with_state(app.clone(), rate_limit))
        .layer(middleware::from_fn_with_state(app.clone(), authenticate));
    if !app.config.allowed_origins.is_empty() {
        let origins: Vec<HeaderValue> = app
            .config
            .allowed_origins
            .iter()
            .filter_map(|o| o.parse().ok())
            .collect();
        routes = routes.layer(
            tower_http::cors::CorsLayer::new()
                .allow_origin(origins)
                .allow_methods(tower_http::cors::Any)
                .allow_headers(tower_http::cors::Any)
                .expose_headers(tower_http::cors::Any),
        );
    }
    routes
        .layer(middleware::from_fn_with_state(app.clone(), host_guard))
        .layer(middleware::from_fn_with_state(app.clone(), request_id))
        .with_state(app)
}

/// Serve `vaults` (one vault's state, or the registry of several) on `listener` until
/// `shutdown` resolves, or a vault asks to stop (a purge) (see [`server`]: timeouts, the
/// connection cap, TLS, and the envelope for what the HTTP parser refuses). HTTPS when
/// the config names a certificate and key ([`tls`]; unusable files are an `InvalidInput`
/// error whose message names the file).
pub async fn run(
    listener: TcpListener,
    vaults: impl Into<Vaults>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    run_with(listener, vaults.into(), None, shutdown).await
}

/// [`run`], in hosted mode when given the `directory` of the database's vaults (`vaults`
/// then the lobby alone).
pub async fn run_with(
    listener: TcpListener,
    vaults: Vaults,
    directory: Option<Arc<dyn Directory>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    run_with_metrics(listener, None, vaults, directory, shutdown).await
}

/// [`run_with`], serving `GET /metrics` alone on `metrics` too (`metrics_listen`, bound
/// by the caller, which says where it listens).
pub async fn run_with_metrics(
    listener: TcpListener,
    metrics: Option<TcpListener>,
    vaults: Vaults,
    directory: Option<Arc<dyn Directory>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let acceptor = tls::acceptor(&vaults.default_vault().config)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    for state in vaults.all() {
        match writes::upgrade_legacy_pending(state) {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                pending = n,
                vault = %state.vault_id,
                "pending writes stored by an older version upgraded"
            ),
            Err(e) => {
                tracing::warn!(vault = %state.vault_id, error = %e.message, "cannot upgrade pending writes stored by an older version")
            }
        }
    }
    // A purge of any vault stops serving (the daemon then removes that vault's state).
    let stops: Vec<_> = vaults.all().iter().map(|s| s.stop.clone()).collect();
    let stop = async move {
        let any = stops.iter().map(|s| Box::pin(s.cancelled()));
        futures::future::select_all(any).await;
    };
    let app = AppState::build(vaults, directory);
    // Dropped at the end of this function: the metrics listener closes with the main one.
    let _metrics = metrics.map(|listener| metrics::serve(listener, app.clone()));
    let limits = server::Limits::from(&app.config);
    let docs_url = app.docs_url.clone();
    let mcp_cancel = app.mcp_cancel.clone();
    let draining = app.draining.clone();
    let drain = std::time::Duration::from_secs(app.config.drain_seconds);
    let app = router(app);
    server::serve(listener, app, limits, docs_url, acceptor, async move {
        // The caller's shutdown, or a stop the daemon asked for itself (a purge).
        tokio::select! {
            () = shutdown => {
                // Not ready first, still serving: a load balancer stops sending here
                // before the listener closes on requests it already sent.
                draining.store(true, std::sync::atomic::Ordering::Relaxed);
                if !drain.is_zero() {
                    tracing::info!(seconds = drain.as_secs(), "draining: /readyz answers 503, requests are still served");
                    tokio::time::sleep(drain).await;
                }
            }
            () = stop => {}
        }
        // Open MCP streams would hold the graceful shutdown forever: end them first.
        mcp_cancel.cancel();
    })
    .await
}

/// The vault a response answers for, for the request log.
#[derive(Debug, Clone)]
struct LoggedVault(String);

/// Give every request an id (`X-Request-Id`, `requestId`), scoped for the error envelope;
/// and log one line per request (target `notevault::access`): its id, vault, method,
/// route template, status and latency. Never a path, a token or a body: they name notes.
async fn request_id(Shared(app): Shared<AppState>, mut req: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let id = uuid::Uuid::now_v7().simple().to_string();
    let method = req.method().clone();
    let surface = match req.uri().path() {
        "/mcp" => "/mcp",
        p if p.starts_with("/v1/") => "unmatched",
        _ => "console",
    };
    req.extensions_mut().insert(RequestId(id.clone()));
    let mut response = REQUEST_ID
        .scope(
            id.clone(),
            DOCS_URL.scope(
                app.docs_url.clone(),
                VAULT_PREFIX.scope(app.default_vault().vault_prefix.clone(), next.run(req)),
            ),
        )
        .await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", v);
    }
    let route = response
        .extensions()
        .get::<crate::api::RouteTemplate>()
        .map_or(surface, |t| t.0);
    let vault = response
        .extensions()
        .get::<LoggedVault>()
        .map_or("", |v| v.0.as_str());
    let (status, took) = (response.status().as_u16(), started.elapsed());
    crate::telemetry::request(route, status, took);
    tracing::info!(
        target: "notevault::access",
        request_id = %id,
        vault,
        method = %method,
        route,
        status,
        latency_ms = took.as_secs_f64() * 1000.0,
        "request"
    );
    response
}

/// The Host/Origin check.
async fn host_guard(Shared(app): Shared<AppState>, req: Request, next: Next) -> Response {
    let target = req.uri().authority().map(|a| a.as_str());
    if let Err(err) = app.guards.hosts.check(req.headers(), target) {
        return ApiError(err).into_response();
    }
    next.run(req).await
}

/// The one place a request gets its credential, kept in its extensions for `dispatch`
/// (which checks it against the route's need) and for `/mcp`. Open local mode (no
/// `AUTH_REQUIRED`, no static tokens, no stored personal access token) gives every
/// request the open credential; otherwise the request's bearer token is looked up, and a
/// request without one is anonymous (see [`resolve`]). A credential also keys the rate limits ([`RateKey`]).
async fn authenticate(Shared(app): Shared<AppState>, mut req: Request, next: Next) -> Response {
    // A presigned link stands in for the bearer (never for the Host/Origin guard, which
    // ran before); a bad one is refused, never served.
    // Hosted mode: the vaults the credential may be for, opened (and caught up) now.
    let (named, checked) = match &app.hosted {
        None => (None, None),
        Some(hosted) => match hosted
            .candidates(&app, req.method(), req.headers(), req.uri())
            .await
        {
            Ok((named, checked)) => (Some(named), checked),
            Err(e) => return ApiError(e).into_response(),
        },
    };
    let vaults = named.as_deref().unwrap_or(&app.vaults);
    // Hosted: a link names its vault (`vault`); one that names none was checked against
    // the lobby's key, and is refused.
    let presigned = vault::presigned_blocking(vaults, req.method(), req.uri()).await;
    let (credential, key, vault) = match presigned {
        Some(Ok((credential, vault))) => (credential, None, vault),
        Some(Err(e)) => refused_error(&e, ""),
        None => resolve(&app, vaults, req.headers(), req.uri(), checked).await,
    };
    let vault = vaults[vault].clone();
    let who = match (&credential, &key) {
        (_, Some(key)) => Some(auth::Who(key.who.clone())),
        (Credential::Open, None) => Some(auth::Who(auth::Who::OPEN.into())),
        _ => None,
    };
    req.extensions_mut().insert(credential);
    if let Some(who) = who {
        req.extensions_mut().insert(who);
    }
    if let Some(key) = key {
        req.extensions_mut().insert(key);
    }
    // What the surfaces serve the request from: the vault it reaches.
    let path = req.uri().path();
    if path != "/mcp" && !path.starts_with("/v1/") {
        req.extensions_mut().insert(crate::console::Console {
            state: vault.state.clone(),
            jwt: app.jwt.clone(),
            hosted: app.hosted.is_some(),
            directory: app.hosted.as_ref().map(|h| h.directory()),
        });
    }
    req.extensions_mut().insert(vault.state.clone());
    // With an issuer, a challenge names the metadata document (RFC 9728 section 5.1):
    // `/mcp`'s for the MCP endpoint, the `/v1` one otherwise.
    let metadata = app.jwt.as_ref().map(|_| {
        let base = crate::surface::origin::public_base(&app.config, req.headers());
        match req.uri().path() {
            "/mcp" => format!("{base}{}/mcp", routes::METADATA_PATH),
            _ => format!("{base}{}", routes::METADATA_PATH),
        }
    });
    let prefix = vault.vault_prefix.clone();
    let logged = LoggedVault(vault.state.vault_id.clone());
    req.extensions_mut().insert(vault);
    let mut response = VAULT_PREFIX.scope(prefix, next.run(req)).await;
    response.extensions_mut().insert(logged);
    if let Some(url) = metadata {
        let headers = response.headers_mut();
        if let Some(challenge) = headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
        {
            let value = format!("{challenge}, resource_metadata=\"{url}\"");
            if let Ok(v) = HeaderValue::from_str(&value) {
                headers.insert("www-authenticate", v);
            }
        }
    }
    response
}

/// What the rate limits count a request against when it carries a credential (else its
/// client address): `static:<n>` for the n-th static token. Never the token itself.
#[derive(Debug, Clone)]
struct RateKey {
    key: String,
    /// Who the credential is, as a decision records it (a token's name, never the token).
    who: String,
}

/// A request's credential, its rate-limit key, and the index of the vault it reaches.
type Resolved = (Credential, Option<RateKey>, usize);

/// The credential of a request and the vault it reaches. Auth on: no `Authorization`
/// header is [`Credential::Anonymous`] (`AUTH_MISSING` where a route needs anything); a
/// configured token gives its credential, unless it names a vault this daemon does not
/// serve (`VAULT_FORBIDDEN`); a header of another scheme is `AUTH_MISSING`; an unknown
/// token, or a header that is not one bearer token, is `AUTH_INVALID`. A refused token
/// is logged with the request id and at most its public prefix. A request without a
/// bearer reaches the vault of its console session, else the default one
/// ([`vault::without_bearer`]).
async fn resolve(
    app: &AppState,
    vaults: &[Arc<ServedVault>],
    headers: &axum::http::HeaderMap,
    uri: &axum::http::Uri,
    checked: Option<jwt::Checked>,
) -> Resolved {
    let unnamed = || {
        vault::without_bearer(
            vaults,
            headers,
            uri.path(),
            uri.query(),
            app.config.tls_configured(),
        )
    };
    let values: Vec<&[u8]> = headers
        .get_all(axum::http::header::AUTHORIZATION)
        .iter()
        .map(HeaderValue::as_bytes)
        .collect();
    let presented = auth::presented(&values);
    // Open local mode (DESIGN.md, "Credentials"): no `AUTH_REQUIRED`, no static tokens. A
    // request without a bearer is the open credential, without a look at the token
    // store; one that presents a bearer is authenticated as in auth mode (a token made
    // in the console counts, and a bad one is refused, never silently ignored).
    if !app.config.auth_configured()
        && matches!(presented, Presented::Nothing | Presented::OtherScheme)
    {
        return (Credential::Open, None, unnamed());
    }
    let token = match presented {
        Presented::Nothing => return (Credential::Anonymous, None, unnamed()),
        Presented::OtherScheme => {
            return refused(
                Reason::AUTH_MISSING,
                "the Authorization header does not use the Bearer scheme",
                "",
            )
        }
        Presented::Malformed(why) => return refused(Reason::AUTH_INVALID, why, ""),
        Presented::Bearer(token) => token,
    };
    let Some((index, entry)) = app.static_tokens.find(token) else {
        if pat::looks_like(token) {
            return pat_credential(vaults, token);
        }
        if let (Some(verifier), true) = (&app.jwt, jwt::looks_like(token)) {
            let vaults: Vec<(&str, Option<&str>)> = vaults
                .iter()
                .map(|v| (v.state.vault_id.as_str(), v.state.config.org_id.as_deref()))
                .collect();
            // Hosted mode checked the token to find its vaults: granted from its claims.
            let verified = match checked {
                Some(checked) => verifier.grant(checked, &vaults),
                None => verifier.verify_among(token, &vaults).await,
            };
            return match verified {
                Ok((verified, vault)) => {
                    let key = RateKey {
                        key: format!("jwt:{}", verified.subject),
                        who: format!("identity-provider user {}", verified.subject),
                    };
                    (verified.credential, Some(key), vault)
                }
                Err(e) => refused_error(&e, ""),
            };
        }
        return refused(
            Reason::AUTH_INVALID,
            "the bearer token is not valid for this daemon",
            auth::public_prefix(token),
        );
    };
    let vault = match &entry.vault_id {
        None => 0,
        Some(named) => match vaults.iter().position(|v| v.state.vault_id == *named) {
            Some(vault) => vault,
            None => {
                return refused(
                    Reason::VAULT_FORBIDDEN,
                    "the bearer token is for another vault than the one this daemon serves",
                    auth::public_prefix(token),
                )
            }
        },
    };
    (
        entry.credential(),
        Some(RateKey {
            key: format!("static:{index}"),
            who: format!("static token #{}", index + 1),
        }),
        vault,
    )
}

/// A refused credential, logged with the request id and at most the token's public prefix.
fn refused(reason: Reason, message: &str, prefix: &str) -> Resolved {
    refused_error(&Error::new(reason, message), prefix)
}

/// [`refused`] with a refusal the caller has as an error (its `Retry-After` kept).
fn refused_error(e: &Error, prefix: &str) -> Resolved {
    tracing::info!(
        request_id = %error::current_request_id(),
        reason = %e.reason,
        token_prefix = prefix,
        why = %e.message,
        "credential refused"
    );
    (
        Credential::Refused {
            reason: e.reason,
            message: e.message.clone(),
            retry_after: e.retry_after,
            metadata: e.metadata.clone(),
        },
        None,
        0,
    )
}

/// A personal access token's credential and vault: its checksum (a mistyped token is
/// refused without a lookup), its row by public prefix in the store of the vault that
/// made it (looked up per request, so a token created or revoked while serving counts at
/// once), its keyed hash (constant time), its expiry. A use is noted at most once a
/// minute.
fn pat_credential(vaults: &[Arc<ServedVault>], token: &str) -> Resolved {
    let prefix = pat::public_prefix(token);
    if !pat::well_formed(token) {
        return refused(
            Reason::AUTH_INVALID,
            "the personal access token is malformed (its checksum does not match)",
            prefix,
        );
    }
    let mut found = Ok(None);
    for (i, served) in vaults.iter().enumerate() {
        match served.state.meta.pat(prefix) {
            Ok(Some(row)) => {
                found = Ok(Some((i, row)));
                break;
            }
            Ok(None) => {}
            Err(e) => {
                found = Err(e);
                break;
            }
        }
    }
    let (vault, row) = match found {
        Ok(Some(found)) => found,
        Ok(None) => {
            return refused(
                Reason::AUTH_INVALID,
                "the personal access token is unknown or revoked",
                prefix,
            )
        }
        Err(e) => return refused_error(&e, prefix),
    };
    let served = &vaults[vault];
    let meta = &served.state.meta;
    let key = match served.pat_key.get() {
        Some(key) => Ok(*key),
        None => meta
            .pat_key()
            .map(|key| *served.pat_key.get_or_init(|| key)),
    };
    let key = match key {
        Ok(key) => key,
        Err(e) => return refused_error(&e, prefix),
    };
    if !pat::matches(&key, token, &row.hash) {
        return refused(
            Reason::AUTH_INVALID,
            "the personal access token is unknown or revoked",
            prefix,
        );
    }
    let now = crate::clock::timestamp(chrono::Utc::now());
    if row
        .expires_at
        .as_deref()
        .is_some_and(|at| at <= now.as_str())
    {
        return refused(
            Reason::AUTH_INVALID,
            "the personal access token has expired",
            prefix,
        );
    }
    let a_minute_ago = crate::clock::timestamp(chrono::Utc::now() - chrono::Duration::seconds(60));
    if row
        .last_used_at
        .as_deref()
        .is_none_or(|at| at < a_minute_ago.as_str())
    {
        if let Err(e) = meta.touch_pat(prefix, &now) {
            tracing::warn!(token_prefix = prefix, error = %e.message, "cannot note a token's use");
        }
    }
    let permissions = row
        .scopes
        .split_whitespace()
        .filter_map(Permission::from_name)
        .collect();
    (
        Credential::Pat { permissions },
        Some(RateKey {
            key: format!("pat:{prefix}"),
            who: format!("token {} ({prefix})", row.name),
        }),
        vault,
    )
}

/// The read and write rate limits, with their `RateLimit-*` headers; the class comes from
/// the route table.
async fn rate_limit(Shared(app): Shared<AppState>, req: Request, next: Next) -> Response {
    let Some(class) = routes::class(req.method(), req.uri().path()) else {
        return next.run(req).await;
    };
    // The credential when there is one, else the client address.
    let client = match req.extensions().get::<RateKey>() {
        Some(key) => key.key.clone(),
        None => req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_string())
            .unwrap_or_else(|| "local".to_string()),
    };
    let (admitted, mut response) = match app.guards.limits.admit(class, &client) {
        Ok(None) => return next.run(req).await,
        Ok(Some(admitted)) => (admitted, next.run(req).await),
        Err(refused) => {
            let (admitted, err) = *refused;
            (admitted, ApiError(err).into_response())
        }
    };
    let headers = response.headers_mut();
    for (name, value) in [
        ("ratelimit-limit", u64::from(admitted.limit)),
        ("ratelimit-remaining", u64::from(admitted.remaining)),
        ("ratelimit-reset", admitted.reset),
    ] {
        headers.insert(name, HeaderValue::from(value));
    }
    response
}

fn on_panic(panic: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    let what = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    tracing::error!(request_id = %error::current_request_id(), panic = %what, "handler panicked");
    ApiError(Error::internal(
        "the server hit an internal error while serving this request",
    ))
    .into_response()
}

#[cfg(test)]
mod tests;
