//! The OpenAPI 3.1 document, generated from the handlers' annotations (utoipa).

use utoipa::OpenApi;

use crate::surface::envelope::ErrorEnvelope;
use crate::surface::wire;

/// The unauthenticated contract.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "Meta",
    responses((status = 200, description = "This document.", content_type = "application/json", body = Object))
)]
#[allow(dead_code)]
fn openapi_json() {}

/// Deprecated: use `POST /v1/notes/{note}:edit`. Answers `Deprecation: true` and a
/// `Link: <...:edit>; rel="successor-version"` header.
#[utoipa::path(
    post,
    path = "/v1/notes/{note}/edit",
    tag = "Notes",
    request_body = crate::api::writes::EditNote,
    params(("note" = String, Path, min_length = 1), ("Idempotency-Key" = String, Header)),
    responses(
        (status = 200, description = "As `:edit`.", body = wire::Receipt),
        (status = 400, description = "As `:edit`.", body = ErrorEnvelope),
        (status = 404, description = "As `:edit`.", body = ErrorEnvelope),
        (status = 409, description = "As `:edit`.", body = ErrorEnvelope),
        (status = 422, description = "As `:edit`.", body = ErrorEnvelope),
    )
)]
#[deprecated]
#[allow(dead_code)]
fn legacy_edit() {}

/// Deprecated: use `POST /v1/notes/{note}:move`.
#[utoipa::path(
    post,
    path = "/v1/notes/{note}/move",
    tag = "Notes",
    request_body = crate::api::writes::MoveNote,
    params(("note" = String, Path, min_length = 1), ("Idempotency-Key" = String, Header)),
    responses(
        (status = 200, description = "As `:move`.", body = wire::Receipt),
        (status = 400, description = "As `:move`.", body = ErrorEnvelope),
        (status = 404, description = "As `:move`.", body = ErrorEnvelope),
        (status = 409, description = "As `:move`.", body = ErrorEnvelope),
        (status = 422, description = "As `:move`.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
#[deprecated]
#[allow(dead_code)]
fn legacy_move() {}

/// Deprecated: use `POST /v1/notes/{note}:rename`.
#[utoipa::path(
    post,
    path = "/v1/notes/{note}/rename",
    tag = "Notes",
    request_body = crate::api::writes::RenameNote,
    params(("note" = String, Path, min_length = 1), ("Idempotency-Key" = String, Header)),
    responses(
        (status = 200, description = "As `:rename`.", body = wire::Receipt),
        (status = 400, description = "As `:rename`.", body = ErrorEnvelope),
        (status = 404, description = "As `:rename`.", body = ErrorEnvelope),
        (status = 409, description = "As `:rename`.", body = ErrorEnvelope),
        (status = 422, description = "As `:rename`.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
#[deprecated]
#[allow(dead_code)]
fn legacy_rename() {}

/// Deprecated: use `GET /v1/notes/{note}:listRevisions` (same contract).
#[utoipa::path(
    get,
    path = "/v1/notes/{note}/versions",
    tag = "Review",
    params(
        ("note" = String, Path, min_length = 1),
        ("filter" = Option<String>, Query, min_length = 1),
        ("order_by" = Option<String>, Query, min_length = 1),
        ("page_size" = Option<usize>, Query, minimum = 1, maximum = 500),
        ("page_token" = Option<String>, Query, min_length = 1),
        ("limit" = Option<usize>, Query, minimum = 1, maximum = 500),
        ("cursor" = Option<String>, Query, min_length = 1),
    ),
    responses(
        (status = 200, description = "As `:listRevisions`.", body = crate::surface::revisions::RevisionList),
        (status = 400, description = "As `:listRevisions`.", body = ErrorEnvelope),
        (status = 404, description = "As `:listRevisions`.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
#[deprecated]
#[allow(dead_code)]
fn legacy_versions() {}

/// Deprecated: use `POST /v1/writes/{id}:approve`.
#[utoipa::path(
    post,
    path = "/v1/writes/{id}/approve",
    tag = "Review",
    params(("id" = String, Path)),
    responses(
        (status = 200, description = "As `:approve`.", body = crate::api::review::PendingWrite),
        (status = 400, description = "As `:approve`.", body = ErrorEnvelope),
        (status = 404, description = "As `:approve`.", body = ErrorEnvelope),
        (status = 409, description = "As `:approve`.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
#[deprecated]
#[allow(dead_code)]
fn legacy_approve() {}

/// Deprecated: use `POST /v1/writes/{id}:reject`.
#[utoipa::path(
    post,
    path = "/v1/writes/{id}/reject",
    tag = "Review",
    params(("id" = String, Path)),
    responses(
        (status = 200, description = "As `:reject`.", body = crate::api::review::PendingWrite),
        (status = 400, description = "As `:reject`.", body = ErrorEnvelope),
        (status = 404, description = "As `:reject`.", body = ErrorEnvelope),
        (status = 409, description = "As `:reject`.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
#[deprecated]
#[allow(dead_code)]
fn legacy_reject() {}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "notevault",
        version = "0.1.0",
        description = "A local daemon serving a folder of markdown notes to people, editors and agents. \
Search and list answers return handles, provenance and coverage, never bodies; a body is read only with \
`GET /v1/notes/{note}` (line slices) or `GET /v1/notes/{note}/raw`. Every error is an envelope with a \
`reason` and a `hint` naming the next request.",
        license(name = "MIT OR Apache-2.0")
    ),
    servers(
        (url = "{base_url}", description = "Production", variables(
            ("base_url" = (default = "http://127.0.0.1:4000", description = "Base address, without /v1"))
        )),
        (url = "http://127.0.0.1:4000", description = "Local"),
    ),
    paths(
        openapi_json,
        crate::api::notes::list,
        crate::api::folders::list,
        crate::api::attachments::listing::list,
        crate::api::attachments::download::get,
        crate::api::attachments::upload::upload,
        crate::api::attachments::upload::put,
        crate::api::attachments::relocate::delete,
        crate::api::attachments::presigned::presign,
        crate::api::notes::get,
        crate::api::notes::raw,
        crate::api::notes::links,
        crate::api::notes::index_status,
        crate::api::writes::create,
        crate::api::writes::patch,
        crate::api::writes::delete,
        crate::api::writes::edit,
        crate::api::writes::append,
        crate::api::writes::replace_section,
        crate::api::writes::move_,
        crate::api::writes::rename,
        crate::api::writes::rollback,
        crate::api::search::search_route,
        crate::api::grep::grep_route,
        crate::api::tags::tags_route,
        crate::api::properties::aggregate_route,
        crate::api::vault::vault_route,
        crate::api::revisions::list_revisions,
        crate::api::revisions::diff,
        crate::api::review::get_settings,
        crate::api::review::patch_settings,
        crate::api::review::list_writes,
        crate::api::review::get_write,
        crate::api::review::approve,
        crate::api::review::reject,
        crate::api::oauth::token,
        crate::api::attachments::relocate::move_,
        crate::api::attachments::relocate::rename,
        crate::api::writes::create_folder,
        crate::api::writes::move_folder,
        crate::api::writes::rename_folder,
        crate::api::writes::delete_folder,
        crate::api::oauth::resource_metadata,
        crate::api::oauth::mcp_resource_metadata,
        crate::api::account::audit_events,
        crate::api::account::export,
        crate::api::attachments::export_link::get,
        crate::api::account::purge,
        crate::api::sync::ops_route,
        crate::api::sync::push_route,
        crate::api::sync::snapshot_route,
        crate::api::sync::checkpoint_route,
        crate::api::sync::compact_route,
        crate::api::sync_keys::e2ee_route,
        crate::api::sync_keys::enable_route,
        crate::api::sync_keys::keys_route,
        legacy_versions,
        legacy_approve,
        legacy_reject,
        legacy_edit,
        legacy_move,
        legacy_rename,
    ),
    components(schemas(
        ErrorEnvelope,
        wire::NoteHandle,
        wire::NoteRead,
        wire::Lines,
        wire::Line,
        wire::RawNote,
        wire::NoteList,
        wire::Coverage,
        wire::ExcludedNote,
        wire::ExcludedCounts,
        wire::RetrieverCoverage,
        crate::surface::search::SearchResponse,
        crate::surface::search::SearchResult,
        crate::surface::search::Snippet,
        crate::surface::grep::GrepResponse,
        crate::surface::grep::GrepResult,
        crate::surface::grep::GrepLine,
        crate::surface::tags::TagList,
        crate::surface::tags::TagEntry,
        crate::surface::properties::AggregateRequest,
        crate::surface::properties::PropertyAggregate,
        crate::surface::properties::PropertyGroup,
        crate::surface::vault::VaultSummary,
        crate::surface::vault::StatusCount,
        crate::surface::vault::E2eeState,
        wire::Folder,
        wire::FolderList,
        crate::surface::attachments::Attachment,
        crate::surface::attachments::AttachmentList,
        crate::surface::attachments::AttachmentCoverage,
        crate::api::attachments::AttachmentReceipt,
        crate::surface::attachments::PresignRequest,
        crate::surface::attachments::PresignResponse,
        crate::surface::notes::NoteLinks,
        crate::surface::notes::OutgoingLink,
        crate::surface::notes::Backlink,
        crate::api::notes::IndexStatus,
        crate::api::notes::SearchIndexState,
        crate::api::notes::WatcherStatus,
        crate::api::notes::HistoryState,
        crate::api::notes::StartScanState,
        crate::api::notes::EmbeddingsState,
        crate::api::notes::HistoryLeftOut,
        wire::Receipt,
        wire::LinkFailure,
        crate::api::writes::CreateNote,
        crate::api::writes::PatchNote,
        crate::api::writes::EditNote,
        crate::api::writes::AppendNote,
        crate::api::writes::ReplaceSection,
        crate::api::writes::MoveNote,
        crate::api::writes::RenameNote,
        crate::api::writes::RollbackNote,
        crate::api::oauth::TokenRequest,
        crate::api::attachments::MoveAttachment,
        crate::api::attachments::RenameAttachment,
        crate::api::writes::CreateFolder,
        crate::api::writes::MoveFolder,
        crate::api::writes::RenameFolder,
        crate::api::writes::DeleteFolder,
        crate::api::wire::FolderReceipt,
        crate::api::oauth::TokenResponse,
        crate::api::oauth::ResourceMetadata,
        crate::api::review::WriteSettings,
        crate::api::review::PatchWriteSettings,
        crate::api::review::PendingWrite,
        crate::api::review::PendingWriteList,
        crate::surface::revisions::RevisionEntry,
        crate::surface::revisions::RevisionList,
        crate::api::revisions::NoteDiff,
        crate::api::account::AuditEvent,
        crate::api::account::AuditEventList,
        crate::api::account::ExportRequest,
        crate::surface::export::ExportLink,
        crate::api::account::PurgeRequest,
        crate::api::account::PurgeAccepted,
        crate::api::sync::SyncOp,
        crate::api::sync::SyncOpsPage,
        crate::api::sync::SnapshotEntry,
        crate::api::sync::SnapshotPage,
        crate::api::sync::CheckpointRequest,
        crate::api::sync::Checkpoint,
        crate::api::sync::Compaction,
        crate::api::sync_keys::KdfWire,
        crate::api::sync_keys::RecoveryWire,
        crate::api::sync_keys::HierarchyWire,
        crate::api::sync_keys::WrappedKeyState,
        crate::api::sync_keys::KeysRequest,
        crate::api::sync_keys::KdfRequest,
        crate::api::sync_keys::RecoveryRequest,
        crate::api::sync::PushOpRequest,
        crate::api::sync::PushRequest,
        crate::api::sync::PushResult,
        crate::api::sync::PushResults,
    )),
    tags(
        (name = "Notes", description = "List and read notes."),
        (name = "Search", description = "Search, grep, the tag rollup, property aggregation and the vault summary; every answer carries coverage."),
        (name = "Review", description = "Write settings, the pending-write queue, revisions, rollback and diffs."),
        (name = "Attachments", description = "Files of the vault that are not notes: list, download, upload, presigned links, delete."),
        (name = "Account", description = "Session-only routes: the audit log, the export and the purge. A personal access token gets 403 `CREDENTIAL_FORBIDDEN`; in open local mode nobody is signed in, so they answer 401 `AUTH_MISSING`."),
        (name = "Sync", description = "The device sync plane: the op log, snapshots, checkpoints, compaction and the wrapped-key state of private notes."),
        (name = "Meta", description = "The contract."),
    )
)]
pub struct ApiDoc;

/// The document as served at `/openapi.json` and printed by `notevault openapi`.
pub fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// Pretty JSON of [`document`].
pub fn document_json() -> String {
    document()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
