//! The one write pipeline: validate → idempotency → (policy, the queuing branch, arrives
//! with the review issue) → apply (file, history, metadata, catalog) → receipt.
//!
//! HTTP, MCP and device pushes (`POST /v1/sync/ops`) call the same [`submit`]. `reconcile` takes
//! changes found on disk through the same stores.
//!
//! Ordering and durability: one group of writes applies at a time (the service's write
//! lock; writes that arrive together form a group, see `group`), so `committed_seq` and
//! the history commits advance together. A change is on disk (temp file fsynced, atomic
//! rename, folder fsynced) and committed to `history.git` before its revision is
//! recorded, and its idempotency record is stored before the receipt leaves the daemon.

mod apply;
mod attachments;
pub mod folders;
mod group;
pub mod links;
mod plan;
pub mod receipt;
pub mod recover;
pub mod review;
mod submit;

pub(crate) use apply::trash_path;
pub(crate) use apply::{
    apply, commit_change, linking_to, record_change, rewrite_links, Change, Identity, Recorded,
};
pub use plan::{folder_creatable, plan, Plan};
pub use receipt::{
    AttachmentFacts, FolderFacts, FolderIntent, Intent, NoteFacts, Receipt, ReceiptStatus,
};
pub(crate) use submit::{apply_now, store_receipt};
pub use submit::{submit, Idempotency, IntentKey, Submitted};

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

/// A write operation, already validated for shape by the caller.
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
            | Op::PutPrivate { .. } => "write",
            Op::Delete { .. } | Op::DeleteAttachment { .. } => "delete",
            Op::Edit { .. } => "edit",
            Op::Move { .. } | Op::MoveAttachment { .. } => "move",
            Op::Rename { .. } => "rename",
            Op::CreateFolder { .. } => "folder_create",
            Op::MoveFolder { .. } => "folder_move",
            Op::DeleteFolder { .. } => "folder_delete",
        }
    }

    /// Whether the operation is on a folder (see [`folders`]) rather than one note.
    pub fn is_folder(&self) -> bool {
        matches!(
            self,
            Op::CreateFolder { .. } | Op::MoveFolder { .. } | Op::DeleteFolder { .. }
        )
    }
}

/// A write as the pipeline takes it: the operation and the agent that asks for it.
/// A queued write keeps it (as JSON) and an approval applies it, through the same door
/// as a direct write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub op: Op,
    pub agent_id: String,
}
