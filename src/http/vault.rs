//! Which vault a request reaches. A credential that names one decides (a static token's
//! `vault_id`, a JWT's `vault_id` or `org_id`, the store that holds a personal access
//! token); a request without a bearer reaches the vault whose store holds its console
//! session (or the sign-in code it presents), else the default vault.

use std::sync::Arc;

use axum::http::{header, HeaderMap};

use crate::auth::session;
use crate::clock::timestamp;
use crate::state::State;

/// One vault as the application serves it: its state, the `/mcp` service of its tools
/// (its sessions are its own), and what its requests' errors leave out.
pub struct ServedVault {
    pub state: Arc<State>,
    pub mcp: crate::mcp::McpService,
    /// The vault's folder, as error messages leave it out.
    pub vault_prefix: Arc<str>,
    /// The key of this vault's personal access tokens' keyed hash, once read.
    pub pat_key: std::sync::OnceLock<[u8; 32]>,
}

impl ServedVault {
    /// `state` as served: with an MCP service of its own.
    pub fn new(
        state: &Arc<State>,
        docs_url: &Arc<str>,
        mcp_cancel: &tokio_util::sync::CancellationToken,
    ) -> Arc<Self> {
        Arc::new(Self {
            mcp: crate::mcp::service(state.clone(), docs_url.clone(), mcp_cancel.clone()),
            vault_prefix: crate::api::error::vault_prefix(&state.paths.root),
            state: state.clone(),
            pat_key: std::sync::OnceLock::new(),
        })
    }
}

/// The vault a request without a bearer reaches among `vaults` (the default first): the
/// one whose store holds the console session of its cookie, or, for `GET /sign-in`, the
/// unused sign-in code it presents. A lookup fault is logged and reaches the default.
pub fn without_bearer(
    vaults: &[Arc<ServedVault>],
    headers: &HeaderMap,
    path: &str,
    query: Option<&str>,
    tls: bool,
) -> usize {
    if vaults.len() < 2 {
        return 0;
    }
    let now = timestamp(chrono::Utc::now());
    let cookie = session::cookie(
        headers.get_all(header::COOKIE).iter().map(|v| v.as_bytes()),
        session::cookie_name(tls),
    )
    .filter(|s| session::well_formed(s));
    if let Some(secret) = cookie {
        let digest = session::digest(secret);
        if let Some(i) = find(vaults, |state| {
            state.meta.session(&digest, &now).map(|s| s.is_some())
        }) {
            return i;
        }
    }
    if path == "/sign-in" {
        let code = form_urlencoded::parse(query.unwrap_or("").as_bytes())
            .find(|(k, _)| k == "code")
            .map(|(_, v)| v.into_owned())
            .filter(|c| session::well_formed(c));
        if let Some(code) = code {
            let digest = session::digest(&code);
            if let Some(i) = find(vaults, |state| state.meta.sign_in_code_open(&digest, &now)) {
                return i;
            }
        }
    }
    0
}

fn find(
    vaults: &[Arc<ServedVault>],
    holds: impl Fn(&State) -> crate::error::Result<bool>,
) -> Option<usize> {
    vaults.iter().position(|v| match holds(&v.state) {
        Ok(held) => held,
        Err(e) => {
            tracing::warn!(vault = %v.state.vault_id, error = %e.message, "cannot look up a console session");
            false
        }
    })
}

/// What a presigned link to this request signs: its method (`HEAD` reads as `GET`) and
/// path (an attachment's, or an export's link path); `None` for a route links never name.
pub fn signed_path(
    method: &axum::http::Method,
    uri: &axum::http::Uri,
) -> Option<(&'static str, String)> {
    use crate::api::routes::{recognize, Op};
    let matched = recognize(method, uri.path(), |_| false).ok()?;
    let path = match matched.op {
        Op::GetExport => crate::surface::export::link_path(&matched.param?),
        Op::GetAttachment | Op::PutAttachment => matched.param?,
        _ => return None,
    };
    let method = match *method {
        axum::http::Method::PUT => "PUT",
        _ => "GET",
    };
    Some((method, path))
}

/// [`presigned`], off the async threads when the request is a link (a PUT link's nonce
/// is spent in the vault's store: SQLite, or PostgreSQL round trips).
pub async fn presigned_blocking(
    vaults: &[Arc<ServedVault>],
    method: &axum::http::Method,
    uri: &axum::http::Uri,
) -> Option<Result<(crate::auth::Credential, usize), crate::error::Error>> {
    crate::auth::presigned::Link::from_query(uri.query())?;
    let (vaults, method, uri) = (vaults.to_vec(), method.clone(), uri.clone());
    match tokio::task::spawn_blocking(move || presigned(&vaults, &method, &uri)).await {
        Ok(checked) => checked,
        Err(e) => Some(Err(crate::error::Error::internal(format!(
            "checking a presigned link failed: {e}"
        )))),
    }
}

/// The credential and vault of a presigned attachment link, when the request is one: a
/// GET, HEAD or PUT of an attachment (or a GET of an export) whose query carries a
/// `signature`. The link is the vault's whose key signed it for this method and object;
/// it must not have expired, and a PUT link's nonce is spent now (it works once). A link that fails a check is a
/// refusal (`AUTH_INVALID`, saying why), never a fall back to the bearer.
pub fn presigned(
    vaults: &[Arc<ServedVault>],
    method: &axum::http::Method,
    uri: &axum::http::Uri,
) -> Option<Result<(crate::auth::Credential, usize), crate::error::Error>> {
    use crate::auth::presigned::{invalid, Link};
    let link = Link::from_query(uri.query())?;
    let (method, path) = signed_path(method, uri)?;
    let checked = (|| {
        // Expired first: the expiry is the link's own text, and an expired export link
        // opened no vault to check its signature with.
        let now = chrono::Utc::now().timestamp();
        link.check(method, now)?;
        let mut signer = None;
        for (i, vault) in vaults.iter().enumerate() {
            if link.signed_with(&vault.state.presign_key, method, &path)? {
                signer = Some(i);
                break;
            }
        }
        let vault = signer.ok_or_else(|| invalid("its signature does not match"))?;
        if method != "PUT" {
            return Ok((crate::auth::Credential::Presigned { nonce: None }, vault));
        }
        if !vaults[vault]
            .state
            .meta
            .use_nonce(&link.nonce, link.expires(), now)?
        {
            return Err(invalid("a PUT link works once, and this one was used"));
        }
        Ok((
            crate::auth::Credential::Presigned {
                nonce: Some(link.nonce.clone()),
            },
            vault,
        ))
    })();
    Some(checked)
}
