//! Sign-in to the console through the identity provider: the OAuth 2.0 authorization
//! code flow with PKCE (RFC 7636, `S256`). `GET /sign-in/idp` makes a `state`, a nonce and
//! a code verifier, keeps them (the verifier by the digest of `state`, for ten minutes,
//! `meta::console`), puts the nonce in a short cookie bound to `/sign-in` (`SameSite=Lax`:
//! it must come back with the provider's redirect), and sends the browser to
//! `idp_authorize_url`. `GET /sign-in/callback` takes the `state` once, checks the cookie's
//! nonce (a callback from another browser is refused: no login CSRF), exchanges the code
//! with the token proxy's exchange (`auth::idp::exchange`, the API key never leaves the
//! daemon), verifies the access token with the daemon's JWT verifier (issuer, expiry,
//! audience, this vault), and, for a session token, starts a console session.
//!
//! Offered when `idp_authorize_url`, `idp_client_id`, `auth_issuer` (with its keys),
//! `idp_token_url` and `IDP_API_KEY` are all set. The token must hold `notes.review`: the
//! console approves writes, makes tokens and purges.

use axum::extract::RawQuery;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;
use base64::Engine;
use chrono::Utc;
use sha2::Digest;

use super::{problem_page, sign_in_page, signed_in, start_session, status_of, Console};
use crate::auth::idp::{self, Grant};
use crate::auth::{session, Credential, Permission};
use crate::clock::timestamp;
use crate::error::{Error, Result};
use crate::storage::rows::IdpSignIn;

/// How long a person has at the provider.
const FLOW_LIFETIME: chrono::Duration = chrono::Duration::minutes(10);
/// The cookie that binds a sign-in under way to the browser that started it.
const NONCE_COOKIE: &str = "notevault_sign_in";

/// Whether the console offers a sign-in through the provider.
pub(super) fn configured(console: &Console) -> bool {
    let c = &console.state.config;
    console.jwt.is_some()
        && c.idp_authorize_url.is_some()
        && c.idp_token_url.is_some()
        && c.idp_api_key.is_some()
        && c.idp_client_id.is_some()
}

fn nonce_cookie(value: Option<&str>, tls: bool) -> String {
    let secure = if tls { "; Secure" } else { "" };
    match value {
        Some(v) => format!(
            "{NONCE_COOKIE}={v}; Path=/sign-in; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
            FLOW_LIFETIME.num_seconds()
        ),
        None => {
            format!("{NONCE_COOKIE}=; Path=/sign-in; HttpOnly; SameSite=Lax; Max-Age=0{secure}")
        }
    }
}

fn redirect_uri(console: &Console, headers: &HeaderMap) -> String {
    format!(
        "{}/sign-in/callback",
        crate::surface::origin::public_base(&console.state.config, headers)
    )
}

/// `GET /sign-in/idp` (in hosted mode `?vault=NAME`): off to the provider.
pub(super) async fn start(
    Extension(console): Extension<Console>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    if !configured(&console) {
        return sign_in_page(
            &console,
            StatusCode::NOT_FOUND,
            Some("This daemon has no identity provider to sign in with (idp_authorize_url, idp_client_id, auth_issuer, idp_token_url and IDP_API_KEY)."),
        );
    }
    // Hosted mode: the lobby keeps the sign-in in the rows of the vault a person names.
    let named = console.lobby().then(|| {
        form_urlencoded::parse(raw.as_deref().unwrap_or("").as_bytes())
            .find(|(k, _)| k == "vault")
            .map(|(_, v)| v.chars().take(64).collect::<String>())
            .filter(|v| !v.is_empty())
    });
    if let Some(None) = named {
        return sign_in_page(
            &console,
            StatusCode::BAD_REQUEST,
            Some("Name the vault to sign in to."),
        );
    }
    let secrets = (|| -> std::result::Result<_, String> {
        Ok((
            session::new_secret()?,
            session::new_secret()?,
            session::new_secret()?,
        ))
    })();
    let Ok((state_param, nonce, verifier)) = secrets else {
        return problem_page(StatusCode::INTERNAL_SERVER_ERROR, "no random source");
    };
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    let now = Utc::now();
    let redirect = redirect_uri(&console, &headers);
    let (digest, at) = (
        session::digest(&state_param),
        (timestamp(now), timestamp(now + FLOW_LIFETIME)),
    );
    let sign_in = IdpSignIn {
        nonce_digest: session::digest(&nonce),
        verifier,
        redirect_uri: redirect.clone(),
    };
    let (keeper, vault) = (console.clone(), named.flatten());
    let kept = tokio::task::spawn_blocking(move || match (&vault, &keeper.directory) {
        (Some(name), Some(directory)) => {
            directory.begin_idp_sign_in(name, &digest, &sign_in, (&at.0, &at.1))
        }
        _ => keeper
            .state
            .meta
            .insert_idp_sign_in(&digest, &sign_in, &at.0, &at.1)
            .map(|()| true),
    })
    .await;
    match kept {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => {
            return sign_in_page(
                &console,
                StatusCode::NOT_FOUND,
                Some("There is no vault of that name. Check its name and sign in again."),
            )
        }
        Ok(Err(e)) => return problem_page(status_of(&e), &e.message),
        Err(_) => return problem_page(StatusCode::INTERNAL_SERVER_ERROR, "sign-in failed"),
    }
    let config = &console.state.config;
    let authorize = config.idp_authorize_url.as_deref().unwrap_or_default();
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("response_type", "code")
        .append_pair(
            "client_id",
            config.idp_client_id.as_deref().unwrap_or_default(),
        )
        .append_pair("redirect_uri", &redirect)
        .append_pair("scope", "openid")
        .append_pair("state", &state_param)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256")
        .finish();
    let separator = if authorize.contains('?') { '&' } else { '?' };
    let mut response = Redirect::to(&format!("{authorize}{separator}{query}")).into_response();
    if let Ok(v) = HeaderValue::from_str(&nonce_cookie(Some(&nonce), config.tls_configured())) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}

/// `GET /sign-in/callback?code=…&state=…` (or `?error=…`): back from the provider.
pub(super) async fn callback(
    Extension(console): Extension<Console>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let refused = |status: StatusCode, why: &str| {
        let mut page = sign_in_page(&console, status, Some(why));
        if let Ok(v) =
            HeaderValue::from_str(&nonce_cookie(None, console.state.config.tls_configured()))
        {
            page.headers_mut().append(header::SET_COOKIE, v);
        }
        page
    };
    if !configured(&console) {
        return refused(
            StatusCode::NOT_FOUND,
            "This daemon has no identity provider to sign in with.",
        );
    }
    let params: Vec<(String, String)> =
        form_urlencoded::parse(raw.as_deref().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    if let Some(error) = param("error") {
        // The provider's code only (its description may echo anything).
        let code: String = error
            .chars()
            .filter(|c| c.is_ascii_lowercase() || *c == '_')
            .take(64)
            .collect();
        return refused(
            StatusCode::UNAUTHORIZED,
            &format!("The identity provider did not sign you in ({code}). Try again."),
        );
    }
    let (Some(code), Some(state_param)) = (param("code"), param("state")) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "The identity provider sent you back without a code. Start the sign-in again.",
        );
    };
    // The lobby takes it back through the directory (hosted mode), a vault from its rows.
    let (taker, digest) = (console.clone(), session::digest(state_param));
    let taken = tokio::task::spawn_blocking(move || {
        let now = timestamp(Utc::now());
        match (&taker.directory, taker.lobby()) {
            (Some(directory), true) => directory.take_idp_sign_in(&digest, &now),
            _ => Ok(taker.state.meta.take_idp_sign_in(&digest, &now)?.map(|s| {
                let vault = taker.state.vault_id.clone();
                (vault, taker.state.config.org_id.clone(), s)
            })),
        }
    })
    .await
    .unwrap_or_else(|_| Err(Error::internal("taking the sign-in failed")));
    let (vault_id, org_id, sign_in) = match taken {
        Ok(Some(s)) => s,
        Ok(None) => {
            return refused(
                StatusCode::UNAUTHORIZED,
                "This sign-in expired or was finished already. Start it again.",
            )
        }
        Err(e) => return problem_page(status_of(&e), &e.message),
    };
    let nonce = session::cookie(
        headers.get_all(header::COOKIE).iter().map(|v| v.as_bytes()),
        NONCE_COOKIE,
    );
    if !nonce.is_some_and(|n| session::csrf_matches(&session::digest(n), &sign_in.nonce_digest)) {
        return refused(
            StatusCode::UNAUTHORIZED,
            "This sign-in was started in another browser. Start it again here.",
        );
    }
    let grant = Grant::AuthorizationCode {
        code: code.to_string(),
        code_verifier: sign_in.verifier,
        redirect_uri: sign_in.redirect_uri,
    };
    let subject = match verified(&console, &grant, &vault_id, org_id.as_deref()).await {
        Ok(subject) => subject,
        Err(e) => {
            return refused(
                status_of(&e),
                &format!(
                    "The identity provider's sign-in was not accepted: {}",
                    e.message
                ),
            )
        }
    };
    // The vault is opened (hosted mode) only now, for a token the provider signed.
    let opener = console.clone();
    let started = tokio::task::spawn_blocking(move || {
        let state = match (&opener.directory, opener.lobby()) {
            (Some(directory), true) => directory.open(&vault_id)?.ok_or_else(|| {
                Error::new(
                    crate::error::Reason::VAULT_FORBIDDEN,
                    "the vault of this sign-in is gone",
                )
            })?,
            _ => opener.state.clone(),
        };
        start_session(&state, "idp", Some(&subject))
    })
    .await;
    match started {
        Ok(Ok(secret)) => {
            let mut response = signed_in(&console, &secret);
            if let Ok(v) =
                HeaderValue::from_str(&nonce_cookie(None, console.state.config.tls_configured()))
            {
                response.headers_mut().append(header::SET_COOKIE, v);
            }
            response
        }
        Ok(Err(e)) => problem_page(status_of(&e), &e.message),
        Err(_) => problem_page(StatusCode::INTERNAL_SERVER_ERROR, "sign-in failed"),
    }
}

/// Exchange the code and verify the token: the subject of a session token for the vault
/// `vault_id` (of the organization `org_id`: hosted mode keeps one per vault).
async fn verified(
    console: &Console,
    grant: &Grant,
    vault_id: &str,
    org_id: Option<&str>,
) -> Result<String> {
    let tokens = idp::exchange(console.state.config.identity_provider(), grant).await?;
    let verifier = console
        .jwt
        .as_ref()
        .ok_or_else(|| Error::internal("no JWT verifier"))?;
    let verified = verifier
        .verify_among(&tokens.access_token, &[(vault_id, org_id)])
        .await?
        .0;
    match &verified.credential {
        // The console approves writes, makes tokens and purges: a person signs in with a
        // token that may review, not with any token of the organization.
        Credential::Token { .. } => {
            crate::auth::require(&verified.credential, Permission::NotesReview)?;
            Ok(verified.subject)
        }
        _ => Err(Error::new(
            crate::error::Reason::CREDENTIAL_FORBIDDEN,
            "the provider's token is not a session token",
        )),
    }
}
