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
#[serde(from = "StoredReceipt", into = "StoredReceipt")]
pub struct Receipt {
    pub status: ReceiptStatus,
    pub slug: String,
    pub note_id: String,
    pub version_id: String,
    pub content_hash: String,
    pub committed_seq: i64,
    pub renamed: bool,
    pub unchanged: bool,
    pub links_updated: usize,
    /// `(slug, reason)` of each note whose links could not be rewritten.
    pub links_failed: Vec<(String, String)>,
    pub flow_back_error: Option<String>,
    pub pending_id: Option<String>,
    /// A note was created (the HTTP layer answers 201).
    pub created: bool,
    /// What the write was on.
    pub subject: Subject,
}

/// What a receipt is about, each kind with its own facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A note, as it is after the write (`None` after a delete, or while queued).
    Note(Option<NoteFacts>),
    /// A folder operation.
    Folder(FolderFacts),
    /// An attachment after its write (before it, for a delete).
    Attachment(AttachmentFacts),
    /// A replay of a write answered by a version that stored its answer rendered (before
    /// migration 5): the status and body as they were sent, the other parts empty.
    Answered { status: u16, body: String },
}

impl Receipt {
    /// The receipt of a replayed answer stored rendered (see [`Subject::Answered`]).
    pub fn answered(status: u16, body: String) -> Self {
        Self {
            status: ReceiptStatus::Applied,
            slug: String::new(),
            note_id: String::new(),
            version_id: String::new(),
            content_hash: String::new(),
            committed_seq: 0,
            renamed: false,
            unchanged: false,
            links_updated: 0,
            links_failed: Vec::new(),
            flow_back_error: None,
            pending_id: None,
            created: false,
            subject: Subject::Answered { status, body },
        }
    }

    /// The note after the write, when the receipt is a note's and holds it.
    pub fn note(&self) -> Option<&NoteFacts> {
        match &self.subject {
            Subject::Note(note) => note.as_ref(),
            _ => None,
        }
    }
}

/// A receipt as the metadata store keeps it (idempotency records, decided pending
/// writes): the form from before [`Subject`], three optional parts, which every stored
/// receipt has and every new one keeps.
#[derive(Serialize, Deserialize)]
struct StoredReceipt {
    status: ReceiptStatus,
    slug: String,
    note_id: String,
    version_id: String,
    content_hash: String,
    committed_seq: i64,
    note: Option<NoteFacts>,
    renamed: bool,
    unchanged: bool,
    links_updated: usize,
    links_failed: Vec<(String, String)>,
    flow_back_error: Option<String>,
    pending_id: Option<String>,
    created: bool,
    #[serde(default)]
    folder: Option<FolderFacts>,
    #[serde(default)]
    attachment: Option<AttachmentFacts>,
}

impl From<StoredReceipt> for Receipt {
    fn from(s: StoredReceipt) -> Self {
        let subject = match (s.folder, s.attachment) {
            (Some(folder), _) => Subject::Folder(folder),
            (None, Some(attachment)) => Subject::Attachment(attachment),
            (None, None) => Subject::Note(s.note),
        };
        Self {
            status: s.status,
            slug: s.slug,
            note_id: s.note_id,
            version_id: s.version_id,
            content_hash: s.content_hash,
            committed_seq: s.committed_seq,
            renamed: s.renamed,
            unchanged: s.unchanged,
            links_updated: s.links_updated,
            links_failed: s.links_failed,
            flow_back_error: s.flow_back_error,
            pending_id: s.pending_id,
            created: s.created,
            subject,
        }
    }
}

impl From<Receipt> for StoredReceipt {
    fn from(r: Receipt) -> Self {
        let (note, folder, attachment) = match r.subject {
            Subject::Note(note) => (note, None, None),
            Subject::Folder(folder) => (None, Some(folder), None),
            Subject::Attachment(attachment) => (None, None, Some(attachment)),
            // Never stored: it is read from the rendered columns it came from.
            Subject::Answered { .. } => (None, None, None),
        };
        Self {
            status: r.status,
            slug: r.slug,
            note_id: r.note_id,
            version_id: r.version_id,
            content_hash: r.content_hash,
            committed_seq: r.committed_seq,
            note,
            renamed: r.renamed,
            unchanged: r.unchanged,
            links_updated: r.links_updated,
            links_failed: r.links_failed,
            flow_back_error: r.flow_back_error,
            pending_id: r.pending_id,
            created: r.created,
            folder,
            attachment,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A receipt stored before `Subject` (no `folder` or `attachment` key at all, as
    /// migration 5 stored them) reads as a note's; every kind keeps its stored form.
    #[test]
    fn the_stored_form_reads_old_rows_and_round_trips() {
        let old = r#"{"status":"applied","slug":"a","note_id":"n","version_id":"v",
            "content_hash":"h","committed_seq":3,"note":null,"renamed":false,
            "unchanged":false,"links_updated":0,"links_failed":[],"flow_back_error":null,
            "pending_id":null,"created":false}"#;
        let r: Receipt = serde_json::from_str(old).unwrap();
        assert_eq!(r.subject, Subject::Note(None));
        assert_eq!(r.committed_seq, 3);
        let folder = Receipt {
            subject: Subject::Folder(FolderFacts {
                path: "x".into(),
                from_path: Some("y".into()),
                notes: 2,
                trashed_to: None,
            }),
            ..r.clone()
        };
        let attachment = Receipt {
            subject: Subject::Attachment(AttachmentFacts {
                path: "p.png".into(),
                size: 1,
                sha256: "s".into(),
                content_type: "image/png".into(),
                modified_at: "t".into(),
            }),
            ..r.clone()
        };
        for receipt in [r, folder, attachment] {
            let json = serde_json::to_string(&receipt).unwrap();
            let value: serde_json::Value = serde_json::from_str(&json).unwrap();
            for key in ["note", "folder", "attachment"] {
                assert!(value.get(key).is_some(), "{key} kept in {json}");
            }
            assert_eq!(serde_json::from_str::<Receipt>(&json).unwrap(), receipt);
        }
    }
}
