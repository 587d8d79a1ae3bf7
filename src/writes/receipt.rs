//! What a write did, as the pipeline keeps it: the receipt a replay answers again (also
//! after a restart), and the intent a write records before it changes the folder, so a
//! retry after a crash gets the receipt of the change that landed.
//!
//! Both are domain values, stored as JSON by the metadata store; the API renders a
//! receipt into its status and body at the edge, the same way for the first answer and
//! for every replay.

use serde::{Deserialize, Serialize};

use crate::clock::timestamp;
use crate::vault::note::Note;

/// `applied` or `queued`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReceiptStatus {
    Applied,
    Queued,
}

/// A note's handle facts at the moment of a write (what a receipt embeds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoteFacts {
    pub note_id: String,
    pub slug: String,
    pub title: String,
    pub status: String,
    pub visibility: String,
    pub version_id: String,
    pub content_hash: String,
    /// RFC 3339 with milliseconds, as answered.
    pub observed_at: String,
    pub path: String,
    pub tags: Vec<String>,
    pub warnings: Vec<String>,
}

impl From<&Note> for NoteFacts {
    fn from(n: &Note) -> Self {
        Self {
            note_id: n.note_id.clone(),
            slug: n.slug().to_string(),
            title: n.title.clone(),
            status: n.status.clone(),
            visibility: n.visibility.as_str().to_string(),
            version_id: n.version_id.clone(),
            content_hash: n.content_hash.clone(),
            observed_at: timestamp(n.observed_at),
            path: n.path.clone(),
            tags: n.tags.clone(),
            warnings: n.warnings.clone(),
        }
    }
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub status: ReceiptStatus,
    pub slug: String,
    pub note_id: String,
    pub version_id: String,
    pub content_hash: String,
    pub committed_seq: i64,
    /// The note after the write (`None` after a delete).
    pub note: Option<NoteFacts>,
    pub renamed: bool,
    pub unchanged: bool,
    pub links_updated: usize,
    /// `(slug, reason)` of each note whose links could not be rewritten.
    pub links_failed: Vec<(String, String)>,
    pub flow_back_error: Option<String>,
    pub pending_id: Option<String>,
    /// A note was created (the HTTP layer answers 201).
    pub created: bool,
    /// What a folder operation did (`None` for a note's write).
    #[serde(default)]
    pub folder: Option<FolderFacts>,
    /// The attachment after an attachment write (before it, for a delete).
    #[serde(default)]
    pub attachment: Option<AttachmentFacts>,
}

/// What a folder operation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FolderFacts {
    /// The folder after the operation (where it went, for a move; where it was, for a
    /// delete).
    pub path: String,
    /// Where it was, for a move.
    pub from_path: Option<String>,
    /// Notes that moved with it, or went to `.trash/` with it.
    pub notes: usize,
    /// For a delete with `trash_notes`: where its files went.
    pub trashed_to: Option<String>,
}

/// An attachment's facts at the moment of a write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentFacts {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    pub content_type: String,
    pub modified_at: String,
}

impl From<&crate::vault::attachments::Attachment> for AttachmentFacts {
    fn from(a: &crate::vault::attachments::Attachment) -> Self {
        Self {
            path: a.path.clone(),
            size: a.size,
            sha256: a.sha256.clone(),
            content_type: a.content_type.clone(),
            modified_at: timestamp(a.modified_at),
        }
    }
}

/// A write about to change the folder, recorded under its `Idempotency-Key` before the
/// file is replaced, and resolved at the next start if the daemon stops before the
/// receipt is stored: a change that landed is recorded as this write (its version, actor
/// and kind) and its receipt stored for the retry; one that did not is forgotten, so the
/// retry applies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    pub actor: String,
    /// `create`, `update`, `move`, `delete`.
    pub kind: String,
    pub note_id: String,
    pub version_id: String,
    /// Where the note was and the version it had (`None` for a create).
    pub from_path: Option<String>,
    pub from_version: Option<String>,
    /// Where it ends up, and the hash of its new bytes (`None` for a delete).
    pub to_rel: String,
    pub content_hash: Option<String>,
    pub renamed: bool,
}

/// A folder operation about to change the folder, recorded like a note's [`Intent`]
/// (see `writes::folders::resolve`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FolderIntent {
    pub actor: String,
    pub folder_op: super::Op,
    /// The folder, and where it goes (a move) or its files go (a delete to the trash).
    pub path: String,
    pub to: Option<String>,
    /// `(note_id, version_id)` of each note inside: the revision its move or delete is
    /// recorded as.
    pub notes: Vec<(String, String)>,
}
