//! Credentials and permissions: the types, and the one check of a credential against what
//! a route needs. Which credential a request carries is decided by `http::authenticate`
//! (the one auth layer): in open local mode (no `AUTH_REQUIRED`, no static or personal
//! tokens) every request gets [`Credential::Open`], which holds every permission;
//! otherwise the `Authorization: Bearer` header is read with [`presented`] and looked up
//! among the configured [`StaticTokens`] (in constant time), then among the personal
//! access tokens of the metadata store ([`pat`]: their format and keyed hash).
//!
//! Each route states what it needs ([`Need`], a column of `api::routes`); [`require`] is the
//! one check of a credential against a need, made once per request (by `api::dispatch`, and
//! at the `/mcp` entry). The refusals it answers carry what [`challenge`] turns into the
//! `WWW-Authenticate` header of the interface specification.
//!
//! A token is a secret: it is never logged, never put in an error message, and never
//! printed by `Debug`; [`public_prefix`] is the most of it a log line may carry.

pub mod idp;
pub mod jwt;
pub mod pat;
pub mod presigned;
pub mod session;

use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::error::{Error, Reason, Result};

/// A secret setting (`IDP_API_KEY`): `Debug` never shows it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one request that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// The realm named in `WWW-Authenticate` challenges.
pub const REALM: &str = "notevault";

/// What a credential may do (the spec's permission names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Permission {
    #[serde(rename = "notes.write")]
    NotesWrite,
    #[serde(rename = "notes.review")]
    NotesReview,
}

impl Permission {
    /// The permission named `name` (`notes.write`, `notes.review`).
    pub fn from_name(name: &str) -> Option<Permission> {
        [Permission::NotesWrite, Permission::NotesReview]
            .into_iter()
            .find(|p| p.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::NotesWrite => "notes.write",
            Permission::NotesReview => "notes.review",
        }
    }
}

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// Open local mode: no token is configured or required. Holds every permission.
    Open,
    /// Auth is required and the request presented no credential.
    Anonymous,
    /// A session credential (a static bearer, an identity-provider JWT, a console
    /// session) and the permissions it grants.
    Token { permissions: Vec<Permission> },
    /// A personal access token and the permissions it grants. Unlike a session, it may not
    /// call session-only routes or the key route.
    Pat { permissions: Vec<Permission> },
    /// Auth is required and the request presented a credential that is refused:
    /// `AUTH_INVALID` (unknown or malformed token), `AUTH_MISSING` (an `Authorization`
    /// header of another scheme than Bearer), `VAULT_FORBIDDEN` (a token for another
    /// vault). Every route that needs anything answers this refusal; the message never
    /// holds the token.
    Refused {
        reason: Reason,
        message: String,
        /// Seconds after which a retry may succeed (`AUTH_UNAVAILABLE`).
        retry_after: Option<u64>,
        /// The refusal's `ErrorInfo.metadata` (a presigned link's `expired_at`).
        metadata: std::collections::BTreeMap<String, String>,
    },
    /// A presigned attachment (or export) link, checked by `http::authenticate` for
    /// exactly this request's method and object (so it meets the need of that one route);
    /// `nonce`: a PUT link's one-time nonce, spent by that check.
    Presigned { nonce: Option<String> },
}

impl Credential {
    /// The permissions a token grants; `None` for the open and the anonymous credential.
    fn permissions(&self) -> Option<&[Permission]> {
        match self {
            Credential::Token { permissions } | Credential::Pat { permissions } => {
                Some(permissions)
            }
            Credential::Open
            | Credential::Anonymous
            | Credential::Refused { .. }
            | Credential::Presigned { .. } => None,
        }
    }
}

/// Who a request's credential is, as a review decision records it: a token's name and
/// public prefix, a static token's place in the configuration, an identity provider's
/// subject, or [`Who::OPEN`]. Never a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who(pub String);

impl Who {
    /// The open credential of open local mode: any process on this machine.
    pub const OPEN: &'static str = "an unauthenticated local request";
    /// A person signed in to the web console.
    pub const CONSOLE: &'static str = "a person signed in to the console";
}

/// What a static token stands for: a session (the default) or a personal access token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenKind {
    #[default]
    Session,
    Pat,
}

/// One static bearer token of the configuration (TOML `[[static_tokens]]`, environment
/// `NOTEVAULT_STATIC_TOKENS` as a JSON list of the same entries). `Debug` shows its
/// public prefix only.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticToken {
    pub token: String,
    #[serde(default)]
    pub permissions: Vec<Permission>,
    #[serde(default)]
    pub kind: TokenKind,
    /// The vault it is for; `None`: any vault this daemon serves.
    #[serde(default)]
    pub vault_id: Option<String>,
}

impl std::fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticToken")
            .field("token", &format_args!("{}…", public_prefix(&self.token)))
            .field("permissions", &self.permissions)
            .field("kind", &self.kind)
            .field("vault_id", &self.vault_id)
            .finish()
    }
}

impl StaticToken {
    /// The credential this token gives.
    pub fn credential(&self) -> Credential {
        let permissions = self.permissions.clone();
        match self.kind {
            TokenKind::Session => Credential::Token { permissions },
            TokenKind::Pat => Credential::Pat { permissions },
        }
    }
}

/// The longest token read from a request; a longer one is refused unread.
pub const MAX_TOKEN_LEN: usize = 4096;

/// Why a token is not one this daemon could ever accept (`None`: it could be): empty, too
/// long, or holding a character other than visible ASCII. Used for the configured tokens
/// and for the presented ones alike.
pub fn token_problem(token: &str) -> Option<&'static str> {
    if token.is_empty() {
        Some("the token is empty")
    } else if token.len() > MAX_TOKEN_LEN {
        Some("the token is longer than 4096 bytes")
    } else if !token.bytes().all(|b| b.is_ascii_graphic()) {
        Some("the token holds a character other than visible ASCII")
    } else {
        None
    }
}

/// The part of a token a log line may show: the `nvp_` prefix and the 8 characters
/// after it for a personal access token (what `token list` shows), nothing of any
/// other token (a short static token would be half given away).
pub fn public_prefix(token: &str) -> &str {
    match token.strip_prefix("nvp_") {
        Some(rest) if rest.len() >= 8 && token.is_char_boundary(12) => &token[..12],
        _ => "",
    }
}

/// What a request's `Authorization` headers present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presented<'a> {
    /// No `Authorization` header.
    Nothing,
    /// A header of another scheme (`Basic ...`): no bearer was sent.
    OtherScheme,
    /// A bearer token that could be valid (see [`token_problem`]).
    Bearer(&'a str),
    /// A header that is not one bearer token: why.
    Malformed(&'static str),
}

/// Read the `Authorization` header values of a request (RFC 6750 section 2.1: the scheme
/// `Bearer`, any letter case, one or more spaces, the token).
pub fn presented<'a>(values: &[&'a [u8]]) -> Presented<'a> {
    let value = match values {
        [] => return Presented::Nothing,
        [one] => *one,
        _ => return Presented::Malformed("the request has more than one Authorization header"),
    };
    if value.len() > MAX_TOKEN_LEN + 64 {
        return Presented::Malformed("the Authorization header is longer than 4 KiB");
    }
    let Ok(value) = std::str::from_utf8(value) else {
        return Presented::Malformed("the Authorization header is not ASCII");
    };
    let value = value.trim_matches(|c| c == ' ' || c == '\t');
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_graphic()) {
            Presented::Malformed("the Authorization header is not `Bearer <token>`")
        } else {
            Presented::OtherScheme
        };
    }
    let token = rest.trim_start_matches(' ');
    if token.is_empty() {
        return Presented::Malformed("the Authorization header has no token after `Bearer`");
    }
    match token_problem(token) {
        None => Presented::Bearer(token),
        Some(_) if token.contains(' ') => {
            Presented::Malformed("the Authorization header holds more than one token")
        }
        Some(problem) => Presented::Malformed(problem),
    }
}

/// The configured static tokens, looked up in constant time: the presented token's
/// BLAKE3 digest is compared with every entry's (`subtle`), with no early exit, so the
/// time taken says nothing of which bytes matched.
pub struct StaticTokens {
    entries: Vec<([u8; 32], StaticToken)>,
}

impl StaticTokens {
    pub fn new(tokens: &[StaticToken]) -> Self {
        Self {
            entries: tokens
                .iter()
                .map(|t| (*blake3::hash(t.token.as_bytes()).as_bytes(), t.clone()))
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry (and its index in the configuration) whose token is `token`.
    pub fn find(&self, token: &str) -> Option<(usize, &StaticToken)> {
        let digest = blake3::hash(token.as_bytes());
        let mut found = None;
        for (i, (stored, entry)) in self.entries.iter().enumerate() {
            if bool::from(stored[..].ct_eq(&digest.as_bytes()[..])) {
                found = Some((i, entry));
            }
        }
        found
    }
}

/// What a route needs of its caller (the route table's permission column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing: served without a credential (`GET /openapi.json`).
    Nothing,
    /// Any credential of this vault: read access comes with every token.
    Read,
    /// A credential holding this permission.
    Permission(Permission),
    /// A session, never a personal access token, holding every permission named (the key
    /// routes: `notes.write` and `notes.review`). Open local mode passes.
    Session(&'static [Permission]),
    /// A signed-in session holding every permission named: a session credential, never a
    /// personal access token, and not the open credential either (the session-only account
    /// routes: audit events, export, purge). In open local mode nobody is signed in, so
    /// these routes answer `AUTH_MISSING` there: they are the console's (which signs a
    /// person in) or a session token's, never any local program's.
    SignedIn(&'static [Permission]),
    /// A presigned link of the route (an export's), else what `SignedIn(&[])` asks: the
    /// archive is the export's, so the export's caller may read it too.
    Link,
}

/// What changes the vault's keys or wipes it (the key routes, purge) asks for: a writer who
/// is also a reviewer, so a token made for an agent (`notes.write` alone) cannot.
pub const OWNER: &[Permission] = &[Permission::NotesWrite, Permission::NotesReview];

impl From<Permission> for Need {
    fn from(permission: Permission) -> Self {
        Need::Permission(permission)
    }
}

impl Need {
    /// The permissions this need names (none for a read).
    pub fn permissions(&self) -> &[Permission] {
        match self {
            Need::Permission(p) => std::slice::from_ref(p),
            Need::Session(ps) | Need::SignedIn(ps) => ps,
            Need::Nothing | Need::Read | Need::Link => &[],
        }
    }
}

/// The one permission check: refuse `credential` when it does not meet `need`, with
/// `AUTH_MISSING` (no credential), `CREDENTIAL_FORBIDDEN` (a personal access token where a
/// session is needed) or `PERMISSION_MISSING` (the permission named in `scope`).
pub fn require(credential: &Credential, need: impl Into<Need>) -> Result<()> {
    let need = match (credential, need.into()) {
        (Credential::Presigned { .. }, Need::Link) => return Ok(()),
        (_, Need::Link) => Need::SignedIn(&[]),
        (_, need) => need,
    };
    match (credential, need) {
        (_, Need::Nothing) => return Ok(()),
        (Credential::Open, Need::SignedIn(_)) => {
            return Err(Error::new(
                Reason::AUTH_MISSING,
                "this route needs a signed-in session: open local mode signs nobody in; use the web console (`notevault login-link`) or a session token",
            ))
        }
        (Credential::Open, _) => return Ok(()),
        (
            Credential::Refused {
                reason,
                message,
                retry_after,
                metadata,
            },
            _,
        ) => {
            let mut err = Error::new(*reason, message.clone());
            err.metadata = metadata.clone();
            return Err(match retry_after {
                Some(secs) => err.with_retry_after(*secs),
                None => err,
            });
        }
        (Credential::Presigned { .. }, Need::Session(_) | Need::SignedIn(_)) => {
            return Err(Error::new(
                Reason::CREDENTIAL_FORBIDDEN,
                "a presigned link reaches its one attachment only",
            ))
        }
        (Credential::Presigned { .. }, _) => return Ok(()),
        (Credential::Anonymous, _) => {
            return Err(Error::new(
                Reason::AUTH_MISSING,
                "this route needs a credential and the request sent none",
            ))
        }
        (Credential::Pat { .. }, Need::Session(_) | Need::SignedIn(_)) => {
            return Err(Error::new(
                Reason::CREDENTIAL_FORBIDDEN,
                "a personal access token may not call this route; it needs a signed-in session",
            ))
        }
        _ => {}
    }
    let granted = credential.permissions().unwrap_or_default();
    let Some(&permission) = need.permissions().iter().find(|p| !granted.contains(p)) else {
        return Ok(());
    };
    Err(Error::new(
        Reason::PERMISSION_MISSING,
        format!("this token lacks {}", permission.as_str()),
    )
    .with_meta("scope", permission.as_str()))
}

/// The `WWW-Authenticate` value (RFC 6750) that goes with `err`, for the reasons that are
/// about the credential: `Bearer realm="…"` on a 401, with `error="invalid_token"` when a
/// token was presented; `error="insufficient_scope"` on a 403, with the missing
/// permission as `scope` when there is one. `None` for every other reason.
pub fn challenge(err: &Error) -> Option<String> {
    let error = match err.reason {
        Reason::AUTH_MISSING => None,
        Reason::AUTH_INVALID => Some("invalid_token"),
        Reason::VAULT_FORBIDDEN | Reason::PERMISSION_MISSING | Reason::CREDENTIAL_FORBIDDEN => {
            Some("insufficient_scope")
        }
        _ => return None,
    };
    let mut value = format!("Bearer realm=\"{REALM}\"");
    if let Some(error) = error {
        value.push_str(&format!(", error=\"{error}\""));
    }
    if err.reason.status() == 403 {
        if let Some(scope) = err.metadata.get("scope") {
            value.push_str(&format!(", scope=\"{scope}\""));
        }
    }
    Some(value)
}

/// What the MCP endpoint does with its conditional write tools, `write_note` and
/// `edit_note`, for `credential` (interface spec, "What the service does" item 9).
#[derive(Debug)]
pub enum WriteTools {
    /// Listed and served: a token holding `notes.write` while writes are possible (the
    /// vault's write policy is not `read_only`).
    Offered,
    /// Not listed; a call is refused with this error: a token without `notes.write`
    /// hears which permission it lacks.
    Refused(Error),
    /// Not listed, and a call is an unknown tool: open local mode stays a read-only tool
    /// server (the design keeps the unauthenticated loopback endpoint free of write
    /// tools), and a read-only vault offers no writes to anyone.
    Unlisted,
}

/// The one rule for the MCP write tools (see [`WriteTools`]).
pub fn mcp_write_tools(credential: &Credential, writes_possible: bool) -> WriteTools {
    if credential.permissions().is_none() {
        return WriteTools::Unlisted;
    }
    if let Err(err) = require(credential, Permission::NotesWrite) {
        return WriteTools::Refused(err);
    }
    if writes_possible {
        WriteTools::Offered
    } else {
        WriteTools::Unlisted
    }
}

#[cfg(test)]
mod tests;
