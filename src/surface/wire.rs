//! Wire types: the JSON shapes every surface answers (note handles, line slices,
//! coverage, lists, receipts), converted from domain types at the edge.

use serde::Serialize;
use utoipa::ToSchema;

use crate::queries::notes::LinePage;
use crate::vault::note::Note;
use crate::vault::observe::Excluded;

/// A note handle: what list and search answers carry, never a body.
#[derive(Debug, Serialize, ToSchema)]
pub struct NoteHandle {
    pub note_id: String,
    pub slug: String,
    pub title: String,
    /// Frontmatter `status`, `active` when absent.
    pub status: String,
    /// `standard` or `private`.
    pub visibility: String,
    pub version_id: String,
    /// `blake3:<hex>` of the file's bytes.
    pub content_hash: String,
    /// When the daemon recorded this version (RFC 3339).
    pub observed_at: String,
    /// Vault-relative path of the file.
    pub path: String,
    /// Frontmatter tags (body `#hashtags` are not tags).
    pub tags: Vec<String>,
    /// What a reader should know about this note (broken frontmatter, lossy decoding).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl From<&Note> for NoteHandle {
    fn from(n: &Note) -> Self {
        Self::from(&crate::writes::NoteFacts::from(n))
    }
}

impl From<&crate::writes::NoteFacts> for NoteHandle {
    fn from(n: &crate::writes::NoteFacts) -> Self {
        Self {
            note_id: n.note_id.clone(),
            slug: n.slug.clone(),
            title: n.title.clone(),
            status: n.status.clone(),
            visibility: n.visibility.clone(),
            version_id: n.version_id.clone(),
            content_hash: n.content_hash.clone(),
            observed_at: n.observed_at.clone(),
            path: n.path.clone(),
            tags: n.tags.clone(),
            warnings: n.warnings.clone(),
        }
    }
}

/// One numbered line.
#[derive(Debug, Serialize, ToSchema)]
pub struct Line<'a> {
    /// 1-based line number.
    pub n: usize,
    /// The line without its line ending.
    pub text: &'a str,
}

/// A slice of a note's lines.
#[derive(Debug, Serialize, ToSchema)]
pub struct Lines {
    pub offset: usize,
    pub limit: usize,
    /// Lines in the whole note.
    pub total: usize,
    /// The `offset` of the next slice; `null` at the end.
    pub next_offset: Option<usize>,
    #[schema(value_type = Vec<Line>)]
    pub items: LineItems,
}

/// The lines of a page, written out as `[{n, text}]` straight from the note's bytes.
#[derive(Debug, Default)]
pub struct LineItems(Option<LinePage>);

impl Serialize for LineItems {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let Some(page) = &self.0 else {
            return s.serialize_seq(Some(0))?.end();
        };
        let lines = page.lines();
        let mut seq = s.serialize_seq(Some(lines.len()))?;
        for (n, text) in lines {
            seq.serialize_element(&Line { n, text: &text })?;
        }
        seq.end()
    }
}

impl From<LinePage> for Lines {
    fn from(p: LinePage) -> Self {
        Self {
            offset: p.offset,
            limit: p.limit,
            total: p.total,
            next_offset: p.next_offset,
            items: LineItems(Some(p)),
        }
    }
}

/// `GET /v1/notes/{note}`: the handle plus a slice of lines.
#[derive(Debug, Serialize, ToSchema)]
pub struct NoteRead {
    #[serde(flatten)]
    pub note: NoteHandle,
    pub lines: Lines,
}

/// `GET /v1/notes/{note}/raw`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RawNote {
    /// The whole file (lossily decoded where it is not UTF-8).
    pub content: String,
    pub content_hash: String,
    pub path: String,
    pub slug: String,
    pub version_id: String,
}

/// A file left out of an answer, and why.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExcludedNote {
    pub path: String,
    pub reason: String,
}

impl From<&Excluded> for ExcludedNote {
    fn from(e: &Excluded) -> Self {
        Self {
            path: e.path.clone(),
            reason: e.reason.clone(),
        }
    }
}

/// How complete an answer is. Read it before treating a result set as complete.
#[derive(Debug, Serialize, ToSchema)]
pub struct Coverage {
    /// Notes in the vault.
    pub notes_total: usize,
    /// Notes this answer considered.
    pub notes_searched: usize,
    /// Notes that matched, over all pages.
    pub notes_matched: usize,
    /// Notes on this page.
    pub notes_returned: usize,
    /// More results follow (see `next_page_token`).
    pub truncated: bool,
    /// Files left out of every answer (unreadable, a symlink leaving the vault, ...).
    pub excluded_count: usize,
    /// The first 100 of them.
    pub excluded: Vec<ExcludedNote>,
    /// Notes left out, counted by why.
    pub excluded_by_reason: ExcludedCounts,
    /// The change the answer reflects.
    pub indexed_seq: i64,
    /// The newest change the vault has recorded.
    pub committed_seq: i64,
    /// Plain-language remarks, e.g. "Private notes were not searched".
    pub notes: Vec<String>,
    /// Search only: the retrievers the answer comes from (`lexical`; with `mode=hybrid`
    /// also `vector`), whether each ran and how many notes each covered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrievers: Option<Vec<RetrieverCoverage>>,
}

/// One retriever of a search.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrieverCoverage {
    /// `lexical` (BM25 over the index) or `vector` (the embedding model's note vectors).
    pub retriever: String,
    /// Whether it ran; a `vector` retriever that did not says why in `reason`.
    pub ran: bool,
    /// Notes it could find: indexed notes (`lexical`), notes whose current version has
    /// vectors (`vector`).
    pub notes_covered: usize,
    /// Notes it found (`lexical`: every match; `vector`: the nearest notes handed to the
    /// fusion, at most 100).
    pub notes_matched: usize,
    /// Why it did not run (no model configured, the model could not be loaded).
    pub reason: Option<String>,
}

/// Notes left out of an answer, by reason.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct ExcludedCounts {
    /// Private notes: end-to-end encrypted, never searched.
    pub private: usize,
    /// Notes above the size searched (listed in `excluded`).
    pub too_large: usize,
    /// Notes changed since the index caught up (search only).
    pub not_yet_indexed: usize,
    /// Files that could not be read (listed in `excluded`).
    pub unreadable: usize,
}

impl From<&crate::index::coverage::CoverageFacts> for Coverage {
    fn from(c: &crate::index::coverage::CoverageFacts) -> Self {
        Self {
            notes_total: c.total,
            notes_searched: c.searched,
            notes_matched: c.matched,
            notes_returned: c.returned,
            truncated: c.truncated,
            excluded_count: c.excluded.len(),
            excluded: c
                .excluded
                .iter()
                .take(100)
                .map(ExcludedNote::from)
                .collect(),
            excluded_by_reason: ExcludedCounts {
                private: c.private,
                too_large: c.too_large,
                not_yet_indexed: c.not_yet_indexed,
                unreadable: c.unreadable,
            },
            indexed_seq: c.indexed_seq,
            committed_seq: c.committed_seq,
            notes: c.remarks.clone(),
            retrievers: (!c.retrievers.is_empty()).then(|| {
                c.retrievers
                    .iter()
                    .map(|r| RetrieverCoverage {
                        retriever: r.name.to_string(),
                        ran: r.ran,
                        notes_covered: r.notes,
                        notes_matched: r.matched,
                        reason: r.reason.clone(),
                    })
                    .collect()
            }),
        }
    }
}

/// `GET /v1/notes`.
#[derive(Debug, Serialize, ToSchema)]
pub struct NoteList {
    pub notes: Vec<NoteHandle>,
    /// Pass as `page_token` for the next page; `null` on the last page.
    pub next_page_token: Option<String>,
    pub coverage: Coverage,
}

/// A note whose links could not be rewritten, and why.
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
pub struct LinkFailure {
    pub slug: String,
    pub reason: String,
}

/// The receipt of a note write.
#[derive(Debug, Serialize, ToSchema)]
pub struct Receipt {
    /// `applied` or `queued`.
    pub status: String,
    pub slug: String,
    /// Identifies a queued write (`GET /v1/writes/{id}`); null when applied.
    pub pending_id: Option<String>,
    pub note_id: String,
    pub version_id: String,
    pub content_hash: String,
    pub committed_seq: i64,
    /// The note after the write; embedded for an applied create and PATCH.
    pub note: Option<NoteHandle>,
    pub renamed: bool,
    /// The content was identical: no new version, no commit.
    pub unchanged: bool,
    /// Notes whose links to this one were rewritten (move, rename).
    pub links_updated: usize,
    pub links_failed: Vec<LinkFailure>,
    /// The file was written but a follow-up (history commit) failed.
    pub flow_back_error: Option<String>,
}

/// The receipt of a folder write (`POST /v1/folders` and its `:move`, `:rename`,
/// `:delete`).
#[derive(Debug, Serialize, ToSchema)]
pub struct FolderReceipt {
    /// `applied` or `queued`.
    pub status: String,
    /// The folder after the write (where it went, for a move or rename).
    pub path: String,
    /// Where it was, for a move or rename.
    pub from_path: Option<String>,
    /// Identifies a queued write (`GET /v1/writes/{id}`); null when applied.
    pub pending_id: Option<String>,
    pub committed_seq: i64,
    /// Notes that moved with the folder, or went to the trash with it.
    pub notes: usize,
    /// Where a deleted folder's files went (`.trash/...`); null otherwise.
    pub trashed_to: Option<String>,
    /// Notes whose links to the moved notes were rewritten.
    pub links_updated: usize,
    pub links_failed: Vec<LinkFailure>,
    /// The folder changed but a follow-up (history commit) failed.
    pub flow_back_error: Option<String>,
}

/// A folder of the vault: every folder that holds a note at any depth, and the folders
/// without notes at the top two levels (an empty one the API made).
#[derive(Debug, Serialize, ToSchema)]
pub struct Folder {
    /// Vault-relative path, `/`-separated, no trailing slash (e.g. `projects/2027`): the
    /// folder's identity, and the `prefix` that lists its notes (`projects/2027/`).
    pub path: String,
    /// The last segment of `path`.
    pub name: String,
    /// The parent folder's path; null for a top-level folder.
    pub parent: Option<String>,
    /// 1 for a top-level folder, 2 for one inside it, ...
    pub depth: usize,
    /// Notes directly in this folder.
    pub notes: usize,
    /// Notes in this folder and in every folder below it.
    pub notes_total: usize,
}

impl From<&crate::queries::notes::FolderEntry> for Folder {
    fn from(f: &crate::queries::notes::FolderEntry) -> Self {
        let (parent, name) = match crate::vault::path::split_path(&f.path) {
            ("", name) => (None, name.to_string()),
            (parent, name) => (Some(parent.to_string()), name.to_string()),
        };
        Self {
            depth: f.path.split('/').count(),
            path: f.path.clone(),
            name,
            parent,
            notes: f.notes,
            notes_total: f.notes_total,
        }
    }
}

/// `GET /v1/folders`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FolderList {
    /// In path order (a parent before its children).
    pub folders: Vec<Folder>,
    /// Pass as `page_token` for the next page; `null` on the last page.
    pub next_page_token: Option<String>,
    /// `notes_matched`: notes inside the folders that matched; `notes_returned`: notes
    /// directly in the folders of this page.
    pub coverage: Coverage,
}
