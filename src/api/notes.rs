//! `/v1/notes` handlers: listing, line-sliced read, raw read, links (the calls are
//! `surface::notes`), and the index status.

use std::sync::Arc;

use axum::http::request::Parts;

use crate::api::error::{in_vault_terms, ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::api::wire::{Json, NoteList, NoteRead, RawNote};
use crate::queries::notes::MAX_LINES;
use crate::state::State;
use crate::surface::blocking;
use crate::surface::notes::MAX_PAGE_SIZE;
use crate::surface::notes::{
    list_notes, note_links, read_note, ListNotesParams, NoteLinks, NoteParam, ReadNoteParams,
};
// The names the other handlers use.

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
    /// The segments a start-up sync left are to be merged into one, or being merged:
    /// searches cost more until then.
    pub merging: bool,
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
    /// `static` (a model2vec-style model: the mean of its tokens' vectors) or
    /// `transformer` (a BERT sentence model run in process); null while none is loaded.
    pub kind: Option<String>,
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
    /// Changes recorded and not yet embedded (a changed note is found by its words until
    /// then; a hybrid search with `min_seq` waits for them).
    pub pending: usize,
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
            last_error: s.last_error.as_deref().map(in_vault_terms),
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
        kind: v.kind.map(str::to_string),
        fingerprint: v.fingerprint,
        dimensions: v.dimensions,
        error: v.error,
        rebuilt: v.rebuilt,
        loaded: v.loaded,
        reused: v.reused,
        computed: v.computed,
        notes: v.notes,
        syncing: v.syncing,
        pending: v.pending,
        last_error: v.last_error.as_deref().map(in_vault_terms),
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
            last_error: ix.last_error.as_deref().map(in_vault_terms),
            merging: ix.merging,
        },
        watcher,
        history: HistoryState {
            head: h.head,
            commits: h.commits,
            pending: h.pending,
            backlog: h.backlog,
            head_seq: h.head_seq,
            last_error: h.last_error.as_deref().map(in_vault_terms),
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
