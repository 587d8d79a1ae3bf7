//! Hosted mode's side of finding a request's vault: the database holds many vaults, so
//! before the credential is checked (by the same `resolve` as local mode's), the vaults it
//! may be for are found by what it carries (a static token's `vault_id`, a personal
//! access token's prefix, a JWT's `vault_id` or `org_id`, a console session or sign-in
//! code) and opened.
//! No path names a vault; a request that names none reaches the lobby.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::{header, HeaderMap, HeaderValue, Method, Uri};
use parking_lot::Mutex;

use crate::auth::{self, jwt, pat, session, Presented};
use crate::error::{Error, Result};
use crate::state::State;
use crate::vaults::Directory;

use super::{AppState, ServedVault};

/// The database's vaults as this instance serves them.
pub struct HostedServed {
    directory: Arc<dyn Directory>,
    /// Each vault served so far, with its MCP service (its sessions live as long).
    served: Mutex<HashMap<String, Arc<ServedVault>>>,
    /// `/readyz`'s checks, one at a time.
    pub(super) readiness: Arc<super::probes::Readiness>,
}

impl HostedServed {
    pub fn new(directory: Arc<dyn Directory>) -> Self {
        Self {
            directory,
            served: Mutex::new(HashMap::new()),
            readiness: Arc::default(),
        }
    }

    /// The directory of the database's vaults (its readiness, for `/readyz`).
    pub fn directory(&self) -> Arc<dyn Directory> {
        self.directory.clone()
    }

    /// The vaults the request's credential may be for, opened and caught up; the lobby
    /// when it names none. A database that cannot be reached is the error. With a JWT,
    /// its checked claims too (`resolve` grants from them: one signature check).
    pub async fn candidates(
        &self,
        app: &AppState,
        method: &Method,
        headers: &HeaderMap,
        uri: &Uri,
    ) -> Result<(Vec<Arc<ServedVault>>, Option<jwt::Checked>)> {
        let (ids, checked) = named(app, method, headers, uri).await;
        let vaults = self.open_named(app, ids).await?;
        Ok((vaults, checked))
    }

    async fn open_named(&self, app: &AppState, ids: Vec<Named>) -> Result<Vec<Arc<ServedVault>>> {
        let found = if ids.is_empty() {
            Vec::new()
        } else {
            let directory = self.directory.clone();
            tokio::task::spawn_blocking(move || -> Result<Vec<Arc<State>>> {
                let mut found = Vec::new();
                for id in lookups(&*directory, ids)? {
                    found.extend(directory.open(&id)?);
                }
                Ok(found)
            })
            .await
            .map_err(|e| Error::internal(format!("opening a vault failed: {e}")))??
        };
        if found.is_empty() {
            return Ok(vec![app.vaults[0].clone()]);
        }
        let mut served = self.served.lock();
        // Vaults closed meanwhile (idle, deleted) leave memory with their service.
        served.retain(|_, v| !v.state.closed());
        Ok(found
            .into_iter()
            .map(|state| {
                let entry = served
                    .entry(state.vault_id.clone())
                    .or_insert_with(|| serve(app, &state));
                // Opened again after it was closed: a new state, served anew.
                if !Arc::ptr_eq(&entry.state, &state) {
                    *entry = serve(app, &state);
                }
                entry.clone()
            })
            .collect())
    }
}

fn serve(app: &AppState, state: &Arc<State>) -> Arc<ServedVault> {
    ServedVault::new(state, &app.docs_url, &app.mcp_cancel)
}

/// What to look up: a vault id named outright, or a key that finds one.
enum Named {
    Vault(String),
    Token(String),
    Session(String),
    SignInCode(String),
    Org(String),
    /// A presigned link (an attachment's or an export's): its vault, opened only if the
    /// link holds under its key.
    Link(String, Method, Uri),
}

/// What the credential carries that names vaults (only a JWT's signature is checked
/// here: its checked claims come along).
async fn named(
    app: &AppState,
    method: &Method,
    headers: &HeaderMap,
    uri: &Uri,
) -> (Vec<Named>, Option<jwt::Checked>) {
    // A presigned link stands in for the bearer (`vault::presigned` checks it).
    if let Some(vault) = signed_link_vault(uri) {
        return (vec![Named::Link(vault, method.clone(), uri.clone())], None);
    }
    // Only a token whose signature holds opens the vaults it names: a made-up one must
    // not load vaults. A bad one reaches the lobby, which refuses it.
    if let (Some(verifier), Presented::Bearer(token)) = (&app.jwt, bearer(headers)) {
        if jwt::looks_like(token) && app.static_tokens.find(token).is_none() {
            let Ok(checked) = verifier.check(token).await else {
                return (Vec::new(), None);
            };
            let named = match checked.vault() {
                (Some(vault), _) => vec![Named::Vault(vault.to_string())],
                (None, Some(org)) => vec![Named::Org(org.to_string())],
                (None, None) => Vec::new(),
            };
            return (named, Some(checked));
        }
    }
    (credential_names(app, headers, uri), None)
}

fn bearer(headers: &HeaderMap) -> Presented<'_> {
    let values: Vec<&[u8]> = headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .map(HeaderValue::as_bytes)
        .collect();
    auth::presented(&values)
}

/// What a credential other than a JWT or a link carries that names vaults (nothing is
/// verified).
fn credential_names(app: &AppState, headers: &HeaderMap, uri: &Uri) -> Vec<Named> {
    match bearer(headers) {
        Presented::Bearer(token) => {
            if let Some((_, entry)) = app.static_tokens.find(token) {
                return entry
                    .vault_id
                    .clone()
                    .map(Named::Vault)
                    .into_iter()
                    .collect();
            }
            if pat::looks_like(token) {
                return vec![Named::Token(pat::public_prefix(token).to_string())];
            }
            Vec::new()
        }
        // The two steps of a sign-in through the provider are the lobby's, whatever
        // session the browser holds: it keeps the flow through the directory, and opens
        // the vault only for a token the provider signed (`console::idp`).
        Presented::Nothing if is_idp_step(uri) => Vec::new(),
        Presented::Nothing => session::cookie(
            headers.get_all(header::COOKIE).iter().map(|v| v.as_bytes()),
            session::cookie_name(app.config.tls_configured()),
        )
        .filter(|s| session::well_formed(s))
        .map(|secret| Named::Session(session::digest(secret)))
        .or_else(|| sign_in_code(uri).map(|code| Named::SignInCode(session::digest(&code))))
        .into_iter()
        .collect(),
        Presented::OtherScheme | Presented::Malformed(_) => Vec::new(),
    }
}

/// The code of a console sign-in link (`/sign-in?code=…`), when well formed: the link
/// is the one request of a person that carries nothing else naming their vault.
fn sign_in_code(uri: &Uri) -> Option<String> {
    if uri.path() != "/sign-in" {
        return None;
    }
    form_urlencoded::parse(uri.query()?.as_bytes())
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .filter(|code| session::well_formed(code))
}

/// Whether the request is a step of a sign-in through the identity provider.
fn is_idp_step(uri: &Uri) -> bool {
    matches!(uri.path(), "/sign-in/idp" | "/sign-in/callback")
}

/// Whether the request is a presigned link of a hosted vault (an attachment's or an
/// export's): its `vault` and `signature` decide, not a bearer.
fn is_signed_link(uri: &Uri) -> bool {
    let path = uri.path();
    (path.starts_with("/v1/exports/") || path.starts_with("/v1/attachments/"))
        && uri
            .query()
            .is_some_and(|q| q.contains("signature") && q.contains("vault="))
}

/// The vault a presigned link names (`…?vault=…&expires=…&signature=…`), when it has not
/// expired: an expired or malformed one opens no vault.
fn signed_link_vault(uri: &Uri) -> Option<String> {
    if !is_signed_link(uri) {
        return None;
    }
    let (mut vault, mut expires, mut signed) = (None, None, false);
    for (k, v) in form_urlencoded::parse(uri.query()?.as_bytes()) {
        match &*k {
            "vault" => vault = uuid::Uuid::parse_str(&v).ok(),
            "expires" => expires = v.parse::<i64>().ok(),
            "signature" => signed = true,
            _ => {}
        }
    }
    let live = expires? >= chrono::Utc::now().timestamp();
    (signed && live).then(|| vault.map(|v| v.to_string()))?
}

/// Whether the link `uri` (for `method`) was signed with the key of the vault `id` (else
/// it opens nothing, and is refused against the lobby).
fn link_holds(directory: &dyn Directory, id: &str, method: &Method, uri: &Uri) -> Result<bool> {
    let (Some(key), Some(link), Some((method, path))) = (
        directory.link_key(id)?,
        crate::auth::presigned::Link::from_query(uri.query()),
        super::vault::signed_path(method, uri),
    ) else {
        return Ok(false);
    };
    link.signed_with(&key, method, &path)
}

fn lookups(directory: &dyn Directory, named: Vec<Named>) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    for n in named {
        match n {
            Named::Vault(id) => ids.push(id),
            Named::Token(prefix) => ids.extend(directory.vault_of_token(&prefix)?),
            Named::Session(digest) => ids.extend(directory.vault_of_session(&digest)?),
            Named::SignInCode(digest) => ids.extend(directory.vault_of_sign_in_code(&digest)?),
            Named::Org(org) => ids.extend(directory.vaults_of_org(&org)?),
            Named::Link(id, method, uri) => {
                if link_holds(directory, &id, &method, &uri)? {
                    ids.push(id);
                }
            }
        }
    }
    Ok(ids)
}
