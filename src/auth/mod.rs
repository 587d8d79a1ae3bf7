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

#[cfg(test)]
mod tests {
    use super::*;

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
