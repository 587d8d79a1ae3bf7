//! Credentials and permissions. Today the daemon runs in open local mode (loopback, no
//! tokens): every request carries the open credential, which holds every permission.
//! The auth issue fills in tokens here; handlers already ask through [`require`], so the
//! permission checks live in this one place.

use crate::error::{Error, Reason, Result};

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
    /// Open local mode: no token is configured or required.
    Open,
    /// A token and the permissions it grants.
    Token { permissions: Vec<Permission> },
}

/// Refuse a credential that lacks `permission` (`PERMISSION_MISSING`, scope named).
pub fn require(credential: &Credential, permission: Permission) -> Result<()> {
    match credential {
        Credential::Open => Ok(()),
        Credential::Token { permissions } if permissions.contains(&permission) => Ok(()),
        Credential::Token { .. } => Err(Error::new(
            Reason::PERMISSION_MISSING,
            format!("this token lacks {}", permission.as_str()),
        )
        .with_meta("scope", permission.as_str())),
    }
}

/// Whether the MCP endpoint lists (and serves) its conditional write tools, `write_note`
/// and `edit_note`, to `credential` (interface spec, "What the service does" item 9).
/// They are offered only to a token holding `notes.write` while writes are possible (the
/// vault's write policy is not `read_only`). Open local mode stays a read-only tool
/// server: the design keeps the unauthenticated loopback endpoint free of write tools.
pub fn mcp_write_tools(credential: &Credential, writes_possible: bool) -> bool {
    match credential {
        Credential::Open => false,
        Credential::Token { permissions } => {
            writes_possible && permissions.contains(&Permission::NotesWrite)
        }
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
}
