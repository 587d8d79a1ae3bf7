//! Notes as every surface reads them: a listing (prefix, filter, order, pages), a
//! line-sliced read, and a note's links. `GET /v1/notes...` and the MCP `list_notes`,
//! `read_note` and `note_links` tools call these and answer the same JSON.

use std::sync::Arc;

use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::Error;
use crate::queries::notes::{DEFAULT_LINES, MAX_LINES};
use crate::state::State;
use crate::surface::blocking;
use crate::surface::params::{self, PageTokens};
use crate::surface::wire::{Coverage, ExcludedNote, Lines, NoteHandle, NoteList, NoteRead};

/// Default and largest `page_size` of list routes.
pub const DEFAULT_PAGE_SIZE: usize = 50;
pub const MAX_PAGE_SIZE: usize = 500;

/// What a note listing takes: the query of `GET /v1/notes` and the arguments of the MCP
/// `list_notes` tool.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListNotesParams {
    /// Only notes whose slug starts with this path prefix, e.g. `projects/` (a folder and
    /// everything under it) or `daily/2026-` (a name prefix).
    pub prefix: Option<String>,
    /// AIP-160 filter over `tags`, `folder`, `path`, `slug`, `title`, `status`,
    /// `visibility`, `created_at`, `updated_at`, `links_to`, `linked_from`, `orphan` and
    /// `frontmatter.<key>`, e.g. `tags:idea AND status != "done"`,
    /// `links_to:projects/roadmap`, `orphan = true`, `updated_at > "2026-01-01T00:00:00Z"`.
    /// A mistake answers `INVALID_FILTER` with its position.
    pub filter: Option<String>,
    /// AIP-132 order: `slug` (the default), `title`, `created_at` or `updated_at`, each
    /// with `asc` (default) or `desc`, e.g. `updated_at desc` for the latest first.
    pub order_by: Option<String>,
    /// Notes per page, 1..500 (default 50).
    #[schema(minimum = 1, maximum = 500)]
    pub page_size: Option<usize>,
    /// The `next_page_token` of the previous page; repeat the other parameters unchanged.
    pub page_token: Option<String>,
}

/// List notes by path prefix, filter and order: handles and coverage, never bodies
/// (`GET /v1/notes`, the MCP `list_notes` tool).
pub async fn list_notes(state: Arc<State>, p: ListNotesParams) -> Result<NoteList, Error> {
    let filter = params::filter_text(
        params::non_empty("filter", p.filter.as_deref())?,
        crate::queries::notes::NOTE_FILTER_FIELDS,
    )?;
    let mut order = params::parse_order(
        params::non_empty("order_by", p.order_by.as_deref())?,
        &["slug", "path", "title", "created_at", "updated_at"],
        crate::queries::notes::Order::asc("slug"),
    )?;
    if order.field == "path" {
        order.field = "slug".into();
    }
    let page_size = params::in_range(
        "page_size",
        p.page_size,
        DEFAULT_PAGE_SIZE,
        1,
        MAX_PAGE_SIZE,
    )?;
    let prefix = p.prefix.clone().unwrap_or_default();
    state.paths.check_prefix(&prefix)?;
    let filter_text = p.filter.clone().unwrap_or_default();
    let order_text = p.order_by.clone().unwrap_or_default();
    let fingerprint = [
        ("route", "notes"),
        ("prefix", prefix.as_str()),
        ("filter", filter_text.as_str()),
        ("order_by", order_text.as_str()),
    ];
    let tokens = PageTokens {
        key: &state.token_key,
    };
    let cursor = match params::non_empty("page_token", p.page_token.as_deref())? {
        Some(t) => Some(tokens.open(&fingerprint, t)?),
        None => None,
    };
    let state2 = state.clone();
    let prefix2 = prefix.clone();
    // Slug order pages by the last slug (stable under inserts); other orders by offset.
    let by_slug = order == crate::queries::notes::Order::asc("slug");
    let page = blocking(move || {
        if by_slug {
            return Ok(crate::queries::notes::list(
                &state2,
                &prefix2,
                filter.as_ref(),
                cursor.as_deref(),
                page_size,
            ));
        }
        let offset: usize = match cursor.as_deref() {
            Some(c) => c.parse().map_err(|_| {
                Error::invalid_field("page_token", "is not a page token of this route")
            })?,
            None => 0,
        };
        Ok(crate::queries::notes::list_ordered(
            &state2,
            &prefix2,
            filter.as_ref(),
            &order,
            offset,
            page_size,
        ))
    })
    .await?;
    let next_page_token = page
        .next_after
        .as_deref()
        .map(|cursor| tokens.issue(&fingerprint, cursor));
    Ok(NoteList {
        coverage: Coverage {
            notes_total: page.total,
            notes_searched: page.total,
            notes_matched: page.matched,
            notes_returned: page.notes.len(),
            truncated: next_page_token.is_some(),
            excluded_count: page.excluded.len(),
            excluded_by_reason: crate::surface::wire::ExcludedCounts {
                unreadable: page.excluded.len(),
                ..Default::default()
            },
            excluded: page
                .excluded
                .iter()
                .take(100)
                .map(ExcludedNote::from)
                .collect(),
            indexed_seq: page.committed_seq,
            committed_seq: page.committed_seq,
            notes: Vec::new(),
            retrievers: None,
        },
        notes: page
            .notes
            .iter()
            .map(|n| NoteHandle::from(n.as_ref()))
            .collect(),
        next_page_token,
    })
}

/// What a line-sliced read takes: `GET /v1/notes/{note}` and the MCP `read_note` tool.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadNoteParams {
    /// The note: its slug (the vault-relative path without `.md`, e.g.
    /// `projects/roadmap`) or its `note_id`, as list and search answers give them.
    #[schema(min_length = 1)]
    pub note: String,
    /// First line to return, 1-based (default 1). Continue a long note with the
    /// `next_offset` of the previous slice.
    #[schema(minimum = 1)]
    pub offset: Option<usize>,
    /// Lines to return, 1..2000 (default 200).
    #[schema(minimum = 1, maximum = 2000)]
    pub limit: Option<usize>,
}

/// A line-sliced read: the handle plus `lines` (both surfaces).
pub async fn read_note(state: Arc<State>, p: ReadNoteParams) -> Result<NoteRead, Error> {
    let offset = params::in_range("offset", p.offset, 1, 1, usize::MAX)?;
    let limit = params::in_range("limit", p.limit, DEFAULT_LINES, 1, MAX_LINES)?;
    let key = p.note;
    // A note whose kept bytes still match its file is answered here, without a hop to a
    // blocking thread (one `stat`); anything else reads, hashes and reconciles there.
    if let Some(read) = crate::queries::notes::read_lines_kept(&state, &key, offset, limit) {
        let (note, page) = read?;
        return Ok(NoteRead {
            note: NoteHandle::from(note.as_ref()),
            lines: page.into(),
        });
    }
    let read =
        blocking(
            move || match crate::queries::notes::read_lines(&state, &key, offset, limit) {
                Err(e) if e.reason == crate::error::Reason::NOTE_NOT_FOUND => {
                    match crate::queries::notes::private_note(&state, &key) {
                        Some(private) => Ok(Err(private)),
                        None => Err(e),
                    }
                }
                other => other.map(Ok),
            },
        )
        .await?;
    Ok(match read {
        Ok((note, page)) => NoteRead {
            note: NoteHandle::from(note.as_ref()),
            lines: page.into(),
        },
        Err(private) => private_read(&private, offset),
    })
}

/// The read of a private note: its handle (`visibility: private`; `note_id` is its slug,
/// `version_id` and `content_hash` its file's `sha256:<hex>`) and no lines: the daemon
/// holds only ciphertext.
fn private_read(a: &crate::vault::attachments::Attachment, offset: usize) -> NoteRead {
    NoteRead {
        note: NoteHandle::from(&crate::queries::private::handle(a)),
        lines: Lines {
            offset,
            limit: 0,
            total: 0,
            next_offset: None,
            items: Default::default(),
        },
    }
}

/// One outgoing link.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct OutgoingLink {
    /// The target as written.
    pub target: String,
    /// 1-based line of the link.
    pub line: usize,
    /// `![[...]]`.
    pub embed: bool,
    /// A relative markdown link rather than a wikilink.
    pub markdown: bool,
    /// The note it resolves to; null when unresolved.
    pub note: Option<NoteHandle>,
}

/// A note linking to this one.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Backlink {
    pub note: NoteHandle,
    /// Lines of its links to this note.
    pub lines: Vec<usize>,
}

/// `GET /v1/notes/{note}:links`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct NoteLinks {
    pub note: NoteHandle,
    pub outgoing: Vec<OutgoingLink>,
    pub backlinks: Vec<Backlink>,
    /// Outgoing links that name no note.
    pub unresolved: Vec<OutgoingLink>,
    pub coverage: Coverage,
}

/// A tool argument naming one note.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteParam {
    /// The note: its slug (the vault-relative path without `.md`, e.g.
    /// `projects/roadmap`) or its `note_id`, as list and search answers give them.
    #[schema(min_length = 1)]
    pub note: String,
}

/// A note's links (`GET /v1/notes/{note}:links`, the MCP `note_links` tool).
pub async fn note_links(state: Arc<State>, p: NoteParam) -> Result<NoteLinks, Error> {
    let key = p.note;
    let report = blocking(move || crate::queries::notes::links(&state, &key)).await?;
    let to_wire = |(link, note): &(
        crate::vault::links::RawLink,
        Option<Arc<crate::vault::note::Note>>,
    )| OutgoingLink {
        target: link.target.clone(),
        line: link.line,
        embed: link.embed,
        markdown: link.markdown,
        note: note.as_deref().map(NoteHandle::from),
    };
    let outgoing: Vec<OutgoingLink> = report.outgoing.iter().map(to_wire).collect();
    let unresolved: Vec<OutgoingLink> = report
        .outgoing
        .iter()
        .filter(|(_, n)| n.is_none())
        .map(to_wire)
        .collect();
    let backlinks: Vec<Backlink> = report
        .backlinks
        .iter()
        .map(|(n, lines)| Backlink {
            note: NoteHandle::from(n.as_ref()),
            lines: lines.clone(),
        })
        .collect();
    Ok(NoteLinks {
        note: NoteHandle::from(report.note.as_ref()),
        coverage: Coverage {
            notes_total: report.total,
            notes_searched: report.total,
            notes_matched: backlinks.len(),
            notes_returned: backlinks.len(),
            truncated: false,
            excluded_count: 0,
            excluded_by_reason: Default::default(),
            excluded: Vec::new(),
            indexed_seq: report.committed_seq,
            committed_seq: report.committed_seq,
            notes: vec!["Links to attachments (non-markdown files) are not listed".into()],
            retrievers: None,
        },
        outgoing,
        backlinks,
        unresolved,
    })
}

/// A note's whole text as on disk (lossily decoded where it is not UTF-8): what an MCP
/// resource read answers.
pub async fn markdown(state: Arc<State>, key: String) -> Result<String, Error> {
    let (_, bytes) = blocking(move || crate::record::refresh::read(&state, &key)).await?;
    Ok(crate::vault::markdown::decode(&bytes).0.into_owned())
}
