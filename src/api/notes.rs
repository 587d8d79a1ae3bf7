//! `/v1/notes` handlers: listing, line-sliced read, raw read.

use std::sync::Arc;

use crate::api::wire::Json;
use axum::http::request::Parts;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::{self, PageTokens, Query};
use crate::api::wire::{Coverage, ExcludedNote, Lines, NoteHandle, NoteList, NoteRead, RawNote};
use crate::error::Error;
use crate::queries::notes::{DEFAULT_LINES, MAX_LINES};
use crate::state::State;

/// Default and largest `page_size` of list routes.
pub const DEFAULT_PAGE_SIZE: usize = 50;
pub const MAX_PAGE_SIZE: usize = 500;

/// Run blocking domain work off the async threads.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    let request_id = crate::api::error::current_request_id();
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(join) => {
            tracing::error!(request_id = %request_id, error = %join, "blocking task failed");
            Err(Error::internal("the request's worker failed"))
        }
    }
}

/// List notes by path prefix.
#[utoipa::path(
    get,
    path = "/v1/notes",
    tag = "Notes",
    params(
        ("prefix" = Option<String>, Query, description = "Legacy path-prefix listing: only notes whose slug starts with this (e.g. `projects/`)."),
        ("filter" = Option<String>, Query, description = "AIP-160 filter over `tags`, `folder`, `path`, `slug`, `title`, `status`, `visibility`, `created_at`, `updated_at`, `links_to`, `linked_from`, `orphan`, `frontmatter.<key>` (e.g. `tags:idea AND status != done`, `links_to:projects/roadmap`, `orphan = true`). A mistake answers `INVALID_FILTER` with its position."),
        ("order_by" = Option<String>, Query, description = "AIP-132 order: `slug` (the default), `title`, `created_at` or `updated_at`, each with `asc` (default) or `desc`."),
        ("page_size" = Option<usize>, Query, description = "Notes per page, 1..500 (default 50)."),
        ("page_token" = Option<String>, Query, description = "`next_page_token` of the previous page, with the same other parameters."),
    ),
    responses(
        (status = 200, description = "Note handles and coverage; never bodies.", body = NoteList),
        (status = 400, description = "Bad parameter or filter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn list(state: Arc<State>, parts: Parts) -> ApiResult<Json<NoteList>> {
    let q = Query::parse(
        parts.uri.query(),
        &["prefix", "filter", "order_by", "page_size", "page_token"],
    )?;
    let p = ListNotesParams {
        prefix: q.owned("prefix"),
        filter: q.owned("filter"),
        order_by: q.owned("order_by"),
        page_size: q.opt_int("page_size", 1, MAX_PAGE_SIZE)?,
        page_token: q.owned("page_token"),
    };
    Ok(Json(list_notes(state, p).await?))
}

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
            excluded_by_reason: crate::api::wire::ExcludedCounts {
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

/// Read a note by line slices.
#[utoipa::path(
    get,
    path = "/v1/notes/{note}",
    tag = "Notes",
    params(
        ("note" = String, Path, description = "A note_id, or a slug with `/` raw or as `%2F`.", min_length = 1),
        ("offset" = Option<usize>, Query, description = "First line, 1-based (default 1)."),
        ("limit" = Option<usize>, Query, description = "Lines to return, 1..2000 (default 200)."),
    ),
    responses(
        (status = 200, description = "The note handle plus `lines`. A private note answers its handle (`visibility: private`) and no lines: the daemon holds only ciphertext.", body = NoteRead),
        (status = 400, description = "Bad offset or limit, or an unsafe path.", body = ErrorEnvelope),
        (status = 404, description = "No such note.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn get(state: Arc<State>, key: String, parts: Parts) -> ApiResult<Json<NoteRead>> {
    let q = Query::parse(parts.uri.query(), &["offset", "limit"])?;
    let p = ReadNoteParams {
        note: key,
        offset: q.opt_int("offset", 1, usize::MAX)?,
        limit: q.opt_int("limit", 1, MAX_LINES)?,
    };
    Ok(Json(read_note(state, p).await?))
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

/// Read a note's whole markdown file.
#[utoipa::path(
    get,
    path = "/v1/notes/{note}/raw",
    tag = "Notes",
    params(
        ("note" = String, Path, description = "A note_id, or a slug with `/` raw or as `%2F`.", min_length = 1),
    ),
    responses(
        (status = 200, description = "The whole file.", body = RawNote),
        (status = 400, description = "An unsafe path.", body = ErrorEnvelope),
        (status = 404, description = "No such note.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn raw(state: Arc<State>, key: String, parts: Parts) -> ApiResult<Json<RawNote>> {
    Query::parse(parts.uri.query(), &[])?;
    let (note, bytes) = blocking(move || crate::record::refresh::read(&state, &key)).await?;
    let (text, _) = crate::vault::markdown::decode(&bytes);
    Ok(Json(RawNote {
        content: text.into_owned(),
        content_hash: note.content_hash.clone(),
        path: note.path.clone(),
        slug: note.slug().to_string(),
        version_id: note.version_id.clone(),
    }))
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

/// A note's links: outgoing (with the note each resolves to), backlinks and unresolved
/// links, each with line numbers. Handles only, never bodies.
#[utoipa::path(
    get,
    path = "/v1/notes/{note}:links",
    tag = "Notes",
    params(("note" = String, Path, description = "A note_id, or a slug with `/` raw or as `%2F`.", min_length = 1)),
    responses(
        (status = 200, description = "The links.", body = NoteLinks),
        (status = 400, description = "Bad parameter or unsafe path.", body = ErrorEnvelope),
        (status = 404, description = "No such note.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn links(state: Arc<State>, key: String, parts: Parts) -> ApiResult<Json<NoteLinks>> {
    Query::parse(parts.uri.query(), &[])?;
    Ok(Json(note_links(state, NoteParam { note: key }).await?))
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

/// The watcher's state.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct WatcherStatus {
    /// `watching`, `stopped` or `off`.
    pub state: String,
    /// Batches of external changes taken in.
    pub batches: u64,
    /// Full rescans after a watcher overflow or error.
    pub rescans: u64,
    pub last_error: Option<String>,
    pub last_batch_at: Option<String>,
}

/// `history.git`'s state.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct HistoryState {
    pub head: Option<String>,
    /// Commits written since start.
    pub commits: u64,
    /// Commits queued, not yet written.
    pub pending: u64,
    /// Failed commits waiting for a retry.
    pub backlog: u64,
    /// The newest seq history accounts for (recorded, or known to be missing).
    pub head_seq: i64,
    /// The last failure of a history commit (kept across restarts) and when it happened.
    pub last_error: Option<String>,
    pub last_error_at: Option<String>,
    /// Files left out of history (a name git cannot store, an unreadable file): how many
    /// since the repository was made, and the newest 100 by name.
    pub left_out_total: u64,
    pub left_out: Vec<HistoryLeftOut>,
    /// Commits given up after repeated failures.
    pub dropped_commits: u64,
    /// Revisions whose bytes never reached history (the daemon stopped while history was
    /// behind, or their commit was lost in a storage failure), found at start.
    pub lost_revisions: u64,
    /// Torn objects removed by repairs at start after a storage failure.
    pub torn_objects_removed: u64,
    /// The last repair at start: when, torn objects, HEAD before and after (`moved`).
    #[schema(value_type = Option<Object>)]
    pub last_repair: Option<crate::history::Repair>,
}

/// A file left out of history, and why.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct HistoryLeftOut {
    pub path: String,
    pub reason: String,
    /// The `Notevault-Seq` of the commit it was left out of.
    pub seq: String,
    pub at: String,
}

/// The search index's state.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct SearchIndexState {
    /// The change search reflects (`min_seq` waits for it).
    pub indexed_seq: i64,
    /// Notes whose newest version is not searchable yet.
    pub not_yet_indexed: usize,
    pub documents: u64,
    pub segments: usize,
    pub schema_version: u32,
    /// Why the index was rebuilt at this start (missing, corrupt, older schema); null
    /// when it was reused.
    pub rebuilt: Option<String>,
    /// Notes (re)indexed by the start-up sync, and how long it took.
    pub synced_notes: Option<usize>,
    pub sync_ms: Option<u64>,
    pub commits: u64,
    pub last_commit_ms: Option<u64>,
    pub last_error: Option<String>,
}

/// `GET /v1/index-status`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct IndexStatus {
    /// The newest change the vault has recorded.
    pub committed_seq: i64,
    /// The change the search index reflects. The catalog (listing, filters, links,
    /// grep) follows every change at once, so it is at `committed_seq`.
    pub indexed_seq: i64,
    pub notes: usize,
    pub excluded: usize,
    pub search_index: SearchIndexState,
    pub watcher: WatcherStatus,
    pub history: HistoryState,
    pub start_scan: StartScanState,
    pub embeddings: EmbeddingsState,
}

/// The note vectors of hybrid search (`GET /v1/search?mode=hybrid`): the local embedding
/// model named by `NOTEVAULT_EMBED_MODEL` (or `embed_model`), and how many notes have
/// vectors. Derived state in `<state dir>/vectors/`, one file per model.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct EmbeddingsState {
    /// `off` (no model configured), `ready`, or `failed` (the model could not be loaded:
    /// `error` says why; search stays lexical).
    pub state: String,
    /// The model folder as configured.
    pub model: Option<String>,
    /// A digest of the model's files: stored vectors of another model are rebuilt.
    pub fingerprint: Option<String>,
    pub dimensions: Option<usize>,
    pub error: Option<String>,
    /// Why the stored vectors were not reused at this start (none yet, another model,
    /// damaged); null when they were.
    pub rebuilt: Option<String>,
    /// Notes whose vectors were read from the state directory at this start.
    pub loaded: usize,
    /// Of those, the ones still current at the start-up sync (not embedded again).
    pub reused: usize,
    /// Notes embedded since this start.
    pub computed: usize,
    /// Notes with vectors now.
    pub notes: usize,
    /// The start-up sync is still embedding.
    pub syncing: bool,
    pub last_error: Option<String>,
}

/// How the last start observed the notes: a note whose file has the size, times and
/// inode the previous full scan saw is recalled from the scan cache (not read); its bytes
/// are read by the verify that follows (a full rescan: every file hashed again, a change
/// recorded), and the search index starts once it is done. Grep waits for it.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct StartScanState {
    /// Notes taken from the scan cache at the start.
    pub notes_recalled: usize,
    /// Notes read at the start.
    pub notes_read: usize,
    /// The recalled notes are still being read.
    pub verifying: bool,
}

/// How fresh the daemon's view of the folder is: sequence numbers, the watcher (rescans,
/// last error) and the history writer.
#[utoipa::path(
    get,
    path = "/v1/index-status",
    tag = "Notes",
    responses(
        (status = 200, description = "The status.", body = IndexStatus),
        (status = 400, description = "Bad parameter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn index_status(state: Arc<State>, parts: Parts) -> ApiResult<Json<IndexStatus>> {
    Query::parse(parts.uri.query(), &[])?;
    let status = blocking(move || Ok(crate::queries::status::status(&state))).await?;
    let watcher = {
        let s = status.watcher;
        WatcherStatus {
            state: s.state,
            batches: s.batches,
            rescans: s.rescans,
            last_error: s
                .last_error
                .as_deref()
                .map(crate::api::error::in_vault_terms),
            last_batch_at: s.last_batch_at.map(crate::clock::timestamp),
        }
    };
    let h = status.history;
    let (notes, excluded) = (status.notes, status.excluded);
    let seq = status.committed_seq;
    let ix = status.index;
    let indexed_seq = status.indexed_seq;
    let start_scan = StartScanState {
        notes_recalled: status.start_scan.recalled,
        notes_read: status.start_scan.read,
        verifying: status.start_scan.verifying,
    };
    let v = status.vectors;
    let embeddings = EmbeddingsState {
        state: v.state.to_string(),
        model: v.model,
        fingerprint: v.fingerprint,
        dimensions: v.dimensions,
        error: v.error,
        rebuilt: v.rebuilt,
        loaded: v.loaded,
        reused: v.reused,
        computed: v.computed,
        notes: v.notes,
        syncing: v.syncing,
        last_error: v
            .last_error
            .as_deref()
            .map(crate::api::error::in_vault_terms),
    };
    Ok(Json(IndexStatus {
        embeddings,
        start_scan,
        committed_seq: seq,
        indexed_seq,
        notes,
        excluded,
        search_index: SearchIndexState {
            indexed_seq,
            not_yet_indexed: ix.not_yet_indexed(),
            documents: ix.docs,
            segments: ix.segments,
            schema_version: crate::index::SCHEMA_VERSION,
            rebuilt: ix.rebuilt,
            synced_notes: ix.synced_notes,
            sync_ms: ix.sync_ms,
            commits: ix.commits,
            last_commit_ms: ix.last_commit_ms,
            last_error: ix
                .last_error
                .as_deref()
                .map(crate::api::error::in_vault_terms),
        },
        watcher,
        history: HistoryState {
            head: h.head,
            commits: h.commits,
            pending: h.pending,
            backlog: h.backlog,
            head_seq: h.head_seq,
            last_error: h
                .last_error
                .as_deref()
                .map(crate::api::error::in_vault_terms),
            last_error_at: h.last_error_at,
            left_out_total: h.left_out_total,
            left_out: h
                .left_out
                .into_iter()
                .map(|l| HistoryLeftOut {
                    path: l.path,
                    reason: l.reason,
                    seq: l.seq,
                    at: l.at,
                })
                .collect(),
            dropped_commits: h.dropped_commits,
            lost_revisions: h.lost_revisions,
            torn_objects_removed: h.torn_objects_removed,
            last_repair: h.last_repair,
        },
    }))
}
