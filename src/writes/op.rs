//! The write operations and the request the pipeline takes: built only by the
//! constructors of `request.rs`, which validate them, whichever door they come through
//! (`/v1`, MCP, a device's push). A request's [`Request::identity`] is what its
//! `Idempotency-Key` is bound to.

use serde::{Deserialize, Serialize};

use crate::vault::frontmatter::FmValue;

/// One change a PATCH asks for (in mask order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatchChange {
    /// Set a top-level frontmatter key (`title`, `status`, `tags`, `frontmatter.<key>`).
    SetKey(String, FmValue),
    /// Remove a top-level frontmatter key (`frontmatter.<key>` set to null).
    RemoveKey(String),
    /// Replace the body after the frontmatter.
    Content(String),
    /// Move the note into this folder (`""` is the vault root).
    Folder(String),
}

/// A write operation, validated by its constructor (see `request.rs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    Create {
        slug: String,
        body: String,
        keys: Vec<(String, FmValue)>,
    },
    Patch {
        note: String,
        version_id: Option<String>,
        changes: Vec<PatchChange>,
    },
    Delete {
        note: String,
        version_id: Option<String>,
    },
    /// Replace a note's whole file with `content` (a device's push): the base version is
    /// required, so an edit made since is never overwritten (`VERSION_MOVED`).
    Replace {
        note: String,
        version_id: String,
        content: String,
    },
    Edit {
        note: String,
        version_id: String,
        old_string: String,
        new_string: String,
    },
    Move {
        note: String,
        folder: String,
        version_id: Option<String>,
    },
    Rename {
        note: String,
        name: String,
        version_id: Option<String>,
    },
    /// Restore the content of a listed revision (also of a deleted note) as a new revision.
    Rollback {
        note: String,
        revision_id: String,
        version_id: Option<String>,
    },
    /// Make an empty folder (at most one level below an existing one).
    CreateFolder { path: String },
    /// Rename or move a folder with everything in it; links to its notes are rewritten.
    MoveFolder { path: String, to: String },
    /// Delete a folder: an empty one, or with `trash_notes` one whose files move to
    /// `.trash/` (each note a delete revision).
    DeleteFolder { path: String, trash_notes: bool },
    /// Put an uploaded file, staged as one of our temp files in the vault, at `path`
    /// (which must not exist): an attachment.
    PutAttachment {
        path: String,
        staged: String,
        sha256: String,
        size: u64,
        content_type: String,
    },
    /// Write a private note's file (`<name>.nvpriv`): a device's ciphertext envelope,
    /// base64. Without a base it is created (nothing may be there); with one, the file
    /// must still have the bytes the base names (`sha256:<hex>`), else `VERSION_MOVED`.
    PutPrivate {
        path: String,
        ciphertext: String,
        base: Option<String>,
    },
    /// Remove an attachment, if it still has these bytes (`sha256`; `None`: the bytes
    /// the catalog holds).
    DeleteAttachment {
        path: String,
        sha256: Option<String>,
    },
    /// Move or rename an attachment (to a path that does not exist); the links and embeds
    /// that name it are rewritten.
    MoveAttachment {
        path: String,
        to: String,
        sha256: Option<String>,
    },
    /// Append `content` to a note, at its end or at the end of `heading`'s section; or,
    /// with `replace`, put it in place of what that section holds (`writes::sections`).
    Section {
        note: String,
        version_id: Option<String>,
        heading: Option<String>,
        content: String,
        replace: bool,
    },
    /// MCP's `write_note`: create the note `note` names, or replace the body of the note
    /// it is. Its identity is the call's, so a retry replays even once the note exists;
    /// `submit` resolves it into a `Create` or a `Patch` before anything else sees it.
    Write {
        note: String,
        content: String,
        version_id: Option<String>,
    },
}

impl Op {
    /// An attachment operation (applied by `writes::attachments`, never queued).
    pub fn is_attachment(&self) -> bool {
        matches!(
            self,
            Op::PutAttachment { .. }
                | Op::PutPrivate { .. }
                | Op::DeleteAttachment { .. }
                | Op::MoveAttachment { .. }
        )
    }

    /// The pending-write `kind` of this operation.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Create { .. }
            | Op::Patch { .. }
            | Op::Replace { .. }
            | Op::Rollback { .. }
            | Op::PutAttachment { .. }
            | Op::PutPrivate { .. }
            | Op::Write { .. } => "write",
            Op::Delete { .. } | Op::DeleteAttachment { .. } => "delete",
            Op::Edit { .. } | Op::Section { .. } => "edit",
            Op::Move { .. } | Op::MoveAttachment { .. } => "move",
            Op::Rename { .. } => "rename",
            Op::CreateFolder { .. } => "folder_create",
            Op::MoveFolder { .. } => "folder_move",
            Op::DeleteFolder { .. } => "folder_delete",
        }
    }

    /// Whether the operation is on a folder (see `writes::folders`) rather than one note.
    pub fn is_folder(&self) -> bool {
        matches!(
            self,
            Op::CreateFolder { .. } | Op::MoveFolder { .. } | Op::DeleteFolder { .. }
        )
    }
}

/// A write as the pipeline takes it: the operation and the agent that asks for it.
/// A queued write keeps it (as JSON) and an approval applies it, through the same door
/// as a direct write. Only the constructors of `request.rs` make one (the private
/// field), so every request the pipeline sees was validated; a stored one was when it
/// was queued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub op: Op,
    pub agent_id: String,
    #[serde(skip)]
    validated: Validated,
}

/// The mark of a request built by a constructor (a stored one was built so when queued).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Validated;

/// A request of `op` for `agent_id`, for the constructors (which validated both).
pub(super) fn validated(op: Op, agent_id: String) -> Request {
    Request {
        op,
        agent_id,
        validated: Validated,
    }
}

/// The tag of a [`Request::identity`]: a stored hash without it was taken by a version
/// before the request was (over the route and the JSON body, see `Idempotency::legacy`).
const IDENTITY_SCHEME: &str = "op2:";

impl Request {
    /// What the request means, as its `Idempotency-Key` is bound to it: a hash of its
    /// canonical encoding (the serde form, which the stored pending writes share), less
    /// what a retry may change and the write does not depend on (an upload's staged temp
    /// file, and its size and type, which its bytes' hash fixes).
    pub fn identity(&self) -> String {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(op) = value.get_mut("op").and_then(|op| op.as_object_mut()) {
            if matches!(self.op, Op::PutAttachment { .. }) {
                for transient in ["staged", "size", "content_type"] {
                    op.remove(transient);
                }
            }
        }
        let hash = blake3::hash(value.to_string().as_bytes());
        format!("{IDENTITY_SCHEME}{}", hash.to_hex())
    }
}

/// The identity of a call (see `writes::submit_call`): its canonical JSON, hashed and
/// tagged as a request's is.
pub(crate) fn call_identity(call: &serde_json::Value) -> String {
    let hash = blake3::hash(call.to_string().as_bytes());
    format!("{IDENTITY_SCHEME}{}", hash.to_hex())
}

/// Whether `stored` (an idempotency record's or an intent's hash) binds its key to the
/// request of this `identity`: the same identity, or for a record stored before
/// identities (no scheme tag) the hash that version took, when the caller can tell it.
pub(crate) fn is_bound(stored: &str, identity: &str, legacy: Option<&str>) -> bool {
    if stored.starts_with(IDENTITY_SCHEME) {
        stored == identity
    } else {
        legacy == Some(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upload(staged: &str, content_type: &str) -> Request {
        validated(
            Op::PutAttachment {
                path: "a.png".into(),
                staged: staged.into(),
                sha256: "abc".into(),
                size: 3,
                content_type: content_type.into(),
            },
            "x".into(),
        )
    }

    /// A retried upload stages its bytes in another temp file: the same request.
    #[test]
    fn an_identity_leaves_out_what_a_retry_changes() {
        let a = upload(".nv-tmp-1", "image/png");
        assert_eq!(a.identity(), upload(".nv-tmp-2", "image/png").identity());
        assert!(a.identity().starts_with(IDENTITY_SCHEME));
        let other = Request {
            agent_id: "y".into(),
            ..a.clone()
        };
        assert_ne!(a.identity(), other.identity(), "the agent is part of it");
    }

    #[test]
    fn a_legacy_hash_binds_only_an_untagged_record() {
        let id = "op2:aaaa";
        assert!(is_bound(id, id, None));
        assert!(!is_bound("op2:bbbb", id, Some("op2:bbbb")));
        assert!(is_bound("0123", id, Some("0123")));
        assert!(!is_bound("0123", id, None));
        assert!(!is_bound("0123", id, Some("4567")));
    }
}
