//! The web console: pages for a signed-in person, server-rendered (askama templates in
//! `templates/`, compiled into the binary) with a vendored htmx for the parts that update
//! in place, every asset embedded (`assets/`), no build step.
//!
//! A person signs in with a one-time link ([`sign_in_link`], printed by `notevault serve`
//! on a terminal and by `notevault login-link`); opening it starts a server-side session
//! (`meta::console`) carried by an `HttpOnly`, `SameSite=Strict` cookie (`Secure` and
//! `__Host-` under TLS; `auth::session`). Every page needs the session, in open local
//! mode too: any web page the browser visits could otherwise drive the console. Every
//! state-changing request carries the session's CSRF token (a form field, or the
//! `X-CSRF-Token` header htmx sends) besides passing the Host/Origin guard every request
//! passes. A signed-in session is a session credential with every permission: the pages
//! call the same domain functions as `/v1` (`writes::review::decide`,
//! `writes::review::set_settings`, the token store), never a route of their own making.
//!
//! Pages answer with a strict Content-Security-Policy (scripts, styles and requests from
//! this server only; no inline script), `no-store`, `Referrer-Policy: same-origin` (with `no-referrer` a browser sends `Origin: null` on form posts, which the Host/Origin guard refuses) and `nosniff`.

mod diff;
mod idp;
mod pages;
mod tokens;
mod vault;

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, RawQuery};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Extension;
use axum::Router;
use chrono::Utc;

use crate::auth::session;
use crate::clock::timestamp;
use crate::error::{Error, Result};
use crate::state::State;
use crate::storage::metadata::Metadata;
use crate::storage::rows::SessionRow;
use crate::storage::rows::{AuditEvent, AuditKind};

pub use pages::{render_review, ReviewPage};

/// What the console's handlers reach.
#[derive(Clone)]
pub struct Console {
    pub state: Arc<State>,
    /// The identity provider's JWT verifier, when an issuer is configured (the sign-in
    /// through the provider checks the token it hands back).
    pub jwt: Option<Arc<crate::auth::jwt::Verifier>>,
    /// Hosted mode: a person names the vault to sign in to (the lobby, an empty vault
    /// without a name, answers requests that name none).
    pub hosted: bool,
    /// Hosted mode: the database's vaults, where the lobby keeps a sign-in through the
    /// provider and opens its vault once the provider's token holds.
    pub directory: Option<Arc<dyn crate::vaults::Directory>>,
}

impl Console {
    /// The vault's name in hosted mode (`None` in local mode and in the lobby).
    fn vault_name(&self) -> Option<&str> {
        self.state.shared.as_ref().map(|s| s.name.as_str())
    }

    /// Whether this is hosted mode's lobby: the request named no vault it could find.
    fn lobby(&self) -> bool {
        self.hosted && self.vault_name().is_none()
    }
}

/// The console's routes; each request carries the [`Console`] of the vault it reaches
/// (the auth layer puts it there).
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    Router::new()
        .route("/", get(pages::review))
        .route("/pending", get(pages::pending))
        .route("/writes/bulk", post(pages::decide_selected))
        .route("/writes/{id}/{action}", post(pages::decide))
        .route("/tokens", get(tokens::tokens).post(tokens::create_token))
        .route("/tokens/{prefix}/revoke", post(tokens::revoke_token))
        .route("/settings", get(vault::settings).post(vault::save_settings))
        .route("/activity", get(vault::activity))
        .route("/vault", get(vault::vault))
        .route("/export", post(vault::export))
        .route("/purge", post(vault::purge))
        .route("/sign-in", get(sign_in))
        .route("/sign-in/idp", get(idp::start))
        .route("/sign-in/callback", get(idp::callback))
        .route("/sign-out", post(sign_out))
        .route("/assets/{name}", get(asset))
        .layer(axum::middleware::map_response(secure_headers))
}

/// Make a one-time sign-in code, store its digest, and answer the link that uses it:
/// `<base>/sign-in?code=…`. It works once, for `session::CODE_LIFETIME`.
pub fn sign_in_link(meta: &dyn Metadata, base: &str) -> Result<String> {
    let code = session::new_secret().map_err(Error::internal)?;
    let now = Utc::now();
    let expires =
        now + chrono::Duration::from_std(session::CODE_LIFETIME).expect("a 15-minute duration");
    meta.insert_sign_in_code(
        &session::digest(&code),
        &timestamp(now),
        &timestamp(expires),
    )?;
    Ok(format!(
        "{}/sign-in?code={code}",
        base.trim_end_matches('/')
    ))
}

/// The setting under which `notevault serve` keeps the URL it serves, so that
/// `notevault login-link` prints a link to the running daemon.
pub const URL_SETTING: &str = "console_url";

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "same-origin"),
        ("x-frame-options", "DENY"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// The session of a request, or the sign-in page (401) that answers it.
pub(crate) struct Signed {
    pub row: SessionRow,
}

/// The session a request's cookie names, if it is one that has not ended.
fn session_of(console: &Console, headers: &HeaderMap) -> Option<SessionRow> {
    let tls = console.state.config.tls_configured();
    let secret = session::cookie(
        headers.get_all(header::COOKIE).iter().map(|v| v.as_bytes()),
        session::cookie_name(tls),
    )?;
    if !session::well_formed(secret) {
        return None;
    }
    let now = Utc::now();
    let row = match console
        .state
        .meta
        .session(&session::digest(secret), &timestamp(now))
    {
        Ok(row) => row?,
        Err(e) => {
            tracing::warn!(error = %e.message, "cannot read console sessions");
            return None;
        }
    };
    let a_minute_ago = timestamp(now - chrono::Duration::seconds(60));
    if row.last_seen_at < a_minute_ago {
        if let Err(e) = console
            .state
            .meta
            .touch_session(&row.digest, &timestamp(now))
        {
            tracing::warn!(error = %e.message, "cannot note a session's use");
        }
    }
    Some(row)
}

fn signed(console: &Console, headers: &HeaderMap) -> std::result::Result<Signed, Box<Response>> {
    match session_of(console, headers) {
        Some(row) => Ok(Signed { row }),
        None => Err(Box::new(sign_in_page(
            console,
            StatusCode::UNAUTHORIZED,
            session::cookie(
                headers.get_all(header::COOKIE).iter().map(|v| v.as_bytes()),
                session::cookie_name(console.state.config.tls_configured()),
            )
            .is_some()
            .then_some("Your session has ended (signed out, expired, or from an earlier run). Sign in again."),
        ))),
    }
}

/// The fields of a form post, once its CSRF token is the session's; else the answer.
fn checked_form(
    signed: &Signed,
    headers: &HeaderMap,
    body: &[u8],
) -> std::result::Result<Form, Box<Response>> {
    let fields: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
    let presented = headers
        .get("x-csrf-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| {
            fields
                .iter()
                .find(|(k, _)| k == "csrf")
                .map(|(_, v)| v.clone())
        });
    match presented {
        Some(token) if session::csrf_matches(&token, &signed.row.csrf) => Ok(fields),
        _ => Err(Box::new(problem_page(
            StatusCode::FORBIDDEN,
            "This form is stale or came from another page (its CSRF token is missing or wrong); nothing changed. Reload the page and try again.",
        ))),
    }
}

/// A form's fields, in order.
pub(crate) type Form = Vec<(String, String)>;

/// A post's session and form fields: the session first, then its CSRF token (every
/// state-changing console route starts here); else the page that answers it.
pub(crate) fn signed_post(
    console: &Console,
    headers: &HeaderMap,
    body: &[u8],
) -> std::result::Result<(Signed, Form), Box<Response>> {
    let signed = signed(console, headers)?;
    let fields = checked_form(&signed, headers, body)?;
    Ok((signed, fields))
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn is_htmx(headers: &HeaderMap) -> bool {
    headers.get("hx-request").is_some_and(|v| v == "true")
}

#[derive(Template)]
#[template(path = "signin.html")]
struct SignInPage<'a> {
    problem: Option<&'a str>,
    /// Offer the sign-in through the identity provider.
    idp: bool,
    /// Hosted mode: the provider's sign-in asks which vault (filled in with `vault`).
    hosted: bool,
    vault: &'a str,
}

fn sign_in_page(console: &Console, status: StatusCode, problem: Option<&str>) -> Response {
    let idp = idp::configured(console);
    let page = SignInPage {
        problem,
        idp,
        hosted: console.hosted,
        vault: console.vault_name().unwrap_or_default(),
    };
    html(status, page.render())
}

/// Start a session (after a sign-in code or the identity provider said who it is):
/// store its digest and CSRF token, note the sign-in, and answer its secret.
fn start_session(state: &State, actor: &str, subject: Option<&str>) -> Result<String> {
    let now = Utc::now();
    let secret = session::new_secret().map_err(Error::internal)?;
    let csrf = session::new_secret().map_err(Error::internal)?;
    let expires =
        now + chrono::Duration::from_std(session::SESSION_LIFETIME).expect("a 12-hour duration");
    state.meta.insert_session(&SessionRow {
        digest: session::digest(&secret),
        csrf,
        created_at: timestamp(now),
        expires_at: timestamp(expires),
        last_seen_at: timestamp(now),
    })?;
    let mut event = AuditEvent::new(AuditKind::SignedIn, actor);
    if let Some(subject) = subject {
        event = event.subject(subject);
    }
    state.meta.note_audit(&event);
    Ok(secret)
}

#[derive(Template)]
#[template(path = "signedin.html")]
struct SignedInPage;

/// The answer to a sign-in: the session cookie, and a page that goes on to the review
/// page by itself. Not a redirect: a sign-in reached from another site (the identity
/// provider's redirect, a link in a web mail) is a cross-site navigation, and a browser
/// keeps `SameSite=Strict` cookies out of it and out of its redirects; the page's own
/// navigation to `/` is same-site, so the cookie goes along.
fn signed_in(console: &Console, secret: &str) -> Response {
    let cookie = session::set_cookie(Some(secret), console.state.config.tls_configured());
    let mut response = html(StatusCode::OK, SignedInPage.render());
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}

#[derive(Template)]
#[template(path = "problem.html")]
struct MessagePage<'a> {
    message: &'a str,
}

/// A page that says what went wrong (the envelope's message; never a stack or a secret).
fn problem_page(status: StatusCode, message: &str) -> Response {
    html(status, MessagePage { message }.render())
}

fn html(status: StatusCode, rendered: askama::Result<String>) -> Response {
    match rendered {
        Ok(body) => (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            body,
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "a console template failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "the page could not be rendered",
            )
                .into_response()
        }
    }
}

/// The status a domain error answers with on a page (the reason table's).
fn status_of(e: &Error) -> StatusCode {
    StatusCode::from_u16(e.reason.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// `GET /sign-in?code=…`: a code that exists, has not expired and was not used starts a
/// session; anything else is the sign-in page with why.
async fn sign_in(Extension(console): Extension<Console>, RawQuery(raw): RawQuery) -> Response {
    let code = form_urlencoded::parse(raw.as_deref().unwrap_or("").as_bytes())
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned());
    let Some(code) = code.as_deref().filter(|c| session::well_formed(c)) else {
        return sign_in_page(
            &console,
            StatusCode::UNAUTHORIZED,
            Some("This sign-in link is not complete. Copy the whole link, or ask for a new one."),
        );
    };
    let digest = session::digest(code);
    let state = console.state.clone();
    let started = tokio::task::spawn_blocking(move || -> Result<Option<String>> {
        if !state
            .meta
            .use_sign_in_code(&digest, &timestamp(Utc::now()))?
        {
            return Ok(None);
        }
        start_session(&state, "console", None).map(Some)
    })
    .await;
    match started {
        Ok(Ok(Some(secret))) => signed_in(&console, &secret),
        Ok(Ok(None)) => sign_in_page(
            &console,
            StatusCode::UNAUTHORIZED,
            Some("This sign-in link was used already or has expired. Ask for a new one."),
        ),
        Ok(Err(e)) => problem_page(status_of(&e), &e.message),
        Err(_) => problem_page(StatusCode::INTERNAL_SERVER_ERROR, "sign-in failed"),
    }
}

/// `POST /sign-out`: the session ends here and in the browser.
async fn sign_out(
    Extension(console): Extension<Console>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (signed, _) = match signed_post(&console, &headers, &body) {
        Ok(s) => s,
        Err(page) => return *page,
    };
    let state = console.state.clone();
    let digest = signed.row.digest.clone();
    let ended = tokio::task::spawn_blocking(move || {
        let ended = state.meta.delete_session(&digest)?;
        if ended {
            state
                .meta
                .note_audit(&AuditEvent::new(AuditKind::SignedOut, "console"));
        }
        Ok::<_, Error>(ended)
    })
    .await;
    if let Ok(Err(e)) = ended {
        return problem_page(status_of(&e), &e.message);
    }
    let cookie = session::set_cookie(None, console.state.config.tls_configured());
    let mut response = sign_in_page(&console, StatusCode::OK, None);
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}

/// `GET /assets/{name}`: the embedded stylesheet and scripts.
async fn asset(Path(name): Path<String>) -> Response {
    let (body, content_type): (&'static [u8], &str) = match name.as_str() {
        "console.css" => (
            include_bytes!("assets/console.css"),
            "text/css; charset=utf-8",
        ),
        "console.js" => (
            include_bytes!("assets/console.js"),
            "text/javascript; charset=utf-8",
        ),
        "htmx.min.js" => (
            include_bytes!("assets/htmx-2.0.10.min.js"),
            "text/javascript; charset=utf-8",
        ),
        _ => return problem_page(StatusCode::NOT_FOUND, "No such asset."),
    };
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "private, max-age=3600"),
        ],
        body,
    )
        .into_response()
}
