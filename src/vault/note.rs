//! One note as the daemon knows it: what the catalog, the link tables and every reader
//! hold of it.

use chrono::{DateTime, Utc};
use serde_norway::Mapping;

/// `standard` or `private`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    Standard,
    Private,
}

impl Visibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Standard => "standard",
            Visibility::Private => "private",
        }
    }
}

/// One note as the daemon knows it.
#[derive(Debug, Clone)]
pub struct Note {
    pub note_id: String,
    /// Vault-relative path with `.md` (the slug is this without it: [`Note::slug`]).
    pub path: String,
    pub title: String,
    pub status: String,
    pub visibility: Visibility,
    pub tags: Vec<String>,
    /// Boxed: a note without frontmatter (~90 % of the 44k corpus) then holds a pointer,
    /// not the map's 72 bytes; one with frontmatter pays ~16 bytes more (the box).
    pub frontmatter: Option<Box<Mapping>>,
    /// Frontmatter `aliases` (other names `[[links]]` may use).
    pub aliases: Vec<String>,
    /// Outgoing links as written, with their lines.
    pub links: Vec<crate::vault::links::RawLink>,
    /// What a reader should know: broken frontmatter, lossy decoding.
    pub warnings: Vec<String>,
    pub version_id: String,
    pub content_hash: String,
    pub size: u64,
    pub created_at: DateTime<Utc>,
    /// The file's modification time.
    pub updated_at: DateTime<Utc>,
    /// When the daemon recorded this version.
    pub observed_at: DateTime<Utc>,
    /// The file's bytes as of `content_hash` (packed), for reads, search and grep;
    /// `None` when the note is too large to keep (or private).
    pub content: Option<crate::vault::packed::Packed>,
    /// The file's stamp when the bytes of `content_hash` were read from it (`None`: not
    /// known; a read hashes the file).
    pub stamp: Option<crate::vault::observe::FileStamp>,
}

impl Note {
    /// The note's slug: its path without `.md` (kept once, in the path); a private
    /// note's handle (`queries::private`): its path without `.nvpriv`.
    pub fn slug(&self) -> &str {
        match self.visibility {
            Visibility::Standard => crate::vault::path::slug_of(&self.path),
            Visibility::Private => self
                .path
                .strip_suffix(crate::vault::PRIVATE_SUFFIX)
                .unwrap_or(&self.path),
        }
    }

    /// Whether the note's bytes were not read yet: its hash and facts came from the scan
    /// cache at start (`vault::scan_cache`), and the verify that follows reads them. (A
    /// note over [`MAX_CONTENT_BYTES`](crate::vault::observe::MAX_CONTENT_BYTES) or a private
    /// one is never kept, and is not unread.)
    pub fn unread(&self) -> bool {
        self.content.is_none()
            && self.visibility == Visibility::Standard
            && self.size <= crate::vault::observe::MAX_CONTENT_BYTES
    }

    /// The bytes search and grep read: the kept bytes of a note up to
    /// [`MAX_CONTENT_BYTES`](crate::vault::observe::MAX_CONTENT_BYTES). (A store with no
    /// folder keeps a larger note whole, to read it back; it is still not searched.)
    pub fn searched_bytes(&self) -> Option<&crate::vault::packed::Packed> {
        self.content
            .as_ref()
            .filter(|_| self.size <= crate::vault::observe::MAX_CONTENT_BYTES)
    }

    /// A 64-bit hash of the note id: how the search index names the note.
    pub fn key(&self) -> u64 {
        key_of(&self.note_id)
    }
}

/// The 64-bit key of a note id (the first 8 bytes of its BLAKE3 hash).
pub fn key_of(note_id: &str) -> u64 {
    let h = blake3::hash(note_id.as_bytes());
    u64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"))
}
