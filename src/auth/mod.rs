//! Credentials and permissions. Today the daemon runs in open local mode (loopback, no
//! tokens): every request carries the open credential, which holds every permission.
//! The auth issue fills in tokens here.
//!
//! Each route states what it needs ([`Need`], a column of `api::routes`); [`require`] is the
//! one check of a credential against a need, made once per request (by `api::dispatch`, and
//! at the `/mcp` entry). The refusals it answers carry what [`challenge`] turns into the
//! `WWW-Authenticate` header of the interface specification.

use crate::error::{Error, Reason, Result};

/// The realm named in `WWW-Authenticate` challenges.
pub const REALM: &str = "notevault";

/// What a credential may do (the spec's permission names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    NotesWrite,
    NotesReview,
}

impl Permission {
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
}

impl Credential {
    /// The permissions a token grants; `None` for the open and the anonymous credential.
    fn permissions(&self) -> Option<&[Permission]> {
        match self {
            Credential::Token { permissions } | Credential::Pat { permissions } => {
                Some(permissions)
            }
            Credential::Open | Credential::Anonymous => None,
        }
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
    /// A signed-in session, never a personal access token (the session-only routes, and
    /// with `notes.write` the key route), holding the permission if one is named.
    Session(Option<Permission>),
}

impl From<Permission> for Need {
    fn from(permission: Permission) -> Self {
        Need::Permission(permission)
    }
}

impl Need {
    /// The permission this need names, if any.
    pub fn permission(self) -> Option<Permission> {
        match self {
            Need::Permission(p) | Need::Session(Some(p)) => Some(p),
            Need::Nothing | Need::Read | Need::Session(None) => None,
        }
    }
}

/// The one permission check: refuse `credential` when it does not meet `need`, with
/// `AUTH_MISSING` (no credential), `CREDENTIAL_FORBIDDEN` (a personal access token where a
/// session is needed) or `PERMISSION_MISSING` (the permission named in `scope`).
pub fn require(credential: &Credential, need: impl Into<Need>) -> Result<()> {
    let need = need.into();
    match (credential, need) {
        (_, Need::Nothing) | (Credential::Open, _) => return Ok(()),
        (Credential::Anonymous, _) => {
            return Err(Error::new(
                Reason::AUTH_MISSING,
                "this route needs a credential and the request sent none",
            ))
        }
        (Credential::Pat { .. }, Need::Session(_)) => {
            return Err(Error::new(
                Reason::CREDENTIAL_FORBIDDEN,
                "a personal access token may not call this route; it needs a signed-in session",
            ))
        }
        _ => {}
    }
    let Some(permission) = need.permission() else {
        return Ok(());
    };
    let granted = credential.permissions().unwrap_or_default();
    if granted.contains(&permission) {
        return Ok(());
    }
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

/// Whether the MCP endpoint lists (and serves) its conditional write tools, `write_note`
/// and `edit_note`, to `credential` (interface spec, "What the service does" item 9).
/// They are offered only to a token holding `notes.write` while writes are possible (the
/// vault's write policy is not `read_only`). Open local mode stays a read-only tool
/// server: the design keeps the unauthenticated loopback endpoint free of write tools.
pub fn mcp_write_tools(credential: &Credential, writes_possible: bool) -> bool {
    match credential.permissions() {
        Some(permissions) => writes_possible && permissions.contains(&Permission::NotesWrite),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_write_tools_need_a_writing_token_and_a_writable_vault() {
        assert!(!mcp_write_tools(&Credential::Open, true));
        assert!(!mcp_write_tools(&Credential::Open, false));
        let writer = Credential::Token {
            permissions: vec![Permission::NotesWrite],
        };
        assert!(mcp_write_tools(&writer, true));
        assert!(!mcp_write_tools(&writer, false));
        let reviewer = Credential::Token {
            permissions: vec![Permission::NotesReview],
        };
        assert!(!mcp_write_tools(&reviewer, true));
        let reader = Credential::Token {
            permissions: Vec::new(),
        };
        assert!(!mcp_write_tools(&reader, true));
    }

    #[test]
    fn tokens_need_the_permission_and_open_mode_has_all() {
        assert!(require(&Credential::Open, Permission::NotesReview).is_ok());
        let writer = Credential::Token {
            permissions: vec![Permission::NotesWrite],
        };
        assert!(require(&writer, Permission::NotesWrite).is_ok());
        let err = require(&writer, Permission::NotesReview).unwrap_err();
        assert_eq!(err.reason, Reason::PERMISSION_MISSING);
        assert_eq!(err.metadata["scope"], "notes.review");
    }

    /// Every credential against every need: the reason of the refusal, or `None` when it
    /// passes.
    #[test]
    fn require_is_a_table_of_credentials_and_needs() {
        use Permission::{NotesReview as Review, NotesWrite as Write};
        let session = |p: &[Permission]| Credential::Token {
            permissions: p.to_vec(),
        };
        let pat = |p: &[Permission]| Credential::Pat {
            permissions: p.to_vec(),
        };
        let cases: Vec<(Credential, Need, Option<Reason>)> = vec![
            (Credential::Open, Need::Session(Some(Write)), None),
            (Credential::Open, Need::Read, None),
            (Credential::Anonymous, Need::Nothing, None),
            (
                Credential::Anonymous,
                Need::Read,
                Some(Reason::AUTH_MISSING),
            ),
            (
                Credential::Anonymous,
                Need::Permission(Write),
                Some(Reason::AUTH_MISSING),
            ),
            (session(&[]), Need::Read, None),
            (session(&[]), Need::Nothing, None),
            (
                session(&[]),
                Need::Permission(Write),
                Some(Reason::PERMISSION_MISSING),
            ),
            (session(&[Write]), Need::Permission(Write), None),
            (
                session(&[Write]),
                Need::Permission(Review),
                Some(Reason::PERMISSION_MISSING),
            ),
            (session(&[Review]), Need::Permission(Review), None),
            (session(&[]), Need::Session(None), None),
            (session(&[Write]), Need::Session(Some(Write)), None),
            (
                session(&[]),
                Need::Session(Some(Write)),
                Some(Reason::PERMISSION_MISSING),
            ),
            (pat(&[]), Need::Read, None),
            (pat(&[Write]), Need::Permission(Write), None),
            (
                pat(&[Review]),
                Need::Permission(Write),
                Some(Reason::PERMISSION_MISSING),
            ),
            (
                pat(&[Write, Review]),
                Need::Session(None),
                Some(Reason::CREDENTIAL_FORBIDDEN),
            ),
            (
                pat(&[Write]),
                Need::Session(Some(Write)),
                Some(Reason::CREDENTIAL_FORBIDDEN),
            ),
        ];
        for (credential, need, refused) in cases {
            let got = require(&credential, need).err().map(|e| e.reason);
            assert_eq!(got, refused, "{credential:?} on {need:?}");
        }
    }

    #[test]
    fn challenges_follow_rfc_6750_and_the_spec() {
        let pat = Credential::Pat {
            permissions: vec![Permission::NotesWrite],
        };
        let missing = require(&pat, Permission::NotesReview).unwrap_err();
        assert_eq!(
            challenge(&missing).unwrap(),
            r#"Bearer realm="notevault", error="insufficient_scope", scope="notes.review""#
        );
        let forbidden = require(&pat, Need::Session(None)).unwrap_err();
        assert_eq!(
            challenge(&forbidden).unwrap(),
            r#"Bearer realm="notevault", error="insufficient_scope""#
        );
        let anonymous = require(&Credential::Anonymous, Need::Read).unwrap_err();
        assert_eq!(
            challenge(&anonymous).unwrap(),
            r#"Bearer realm="notevault""#
        );
        let invalid = Error::new(Reason::AUTH_INVALID, "expired");
        assert_eq!(
            challenge(&invalid).unwrap(),
            r#"Bearer realm="notevault", error="invalid_token""#
        );
        for other in [Reason::ORIGIN_FORBIDDEN, Reason::NOTE_NOT_FOUND] {
            assert_eq!(challenge(&Error::new(other, "x")), None, "{other}");
        }
    }
}
