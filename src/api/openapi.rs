//! The OpenAPI 3.1 document, generated from the handlers' annotations (utoipa).

use utoipa::OpenApi;

use crate::api::error::ErrorEnvelope;
use crate::api::wire;

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
        crate::api::notes::get,
        crate::api::notes::raw,
        crate::api::writes::create,
        crate::api::writes::patch,
        crate::api::writes::delete,
        crate::api::writes::edit,
        crate::api::writes::move_,
        crate::api::writes::rename,
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
        wire::Receipt,
        wire::LinkFailure,
        crate::api::writes::CreateNote,
        crate::api::writes::PatchNote,
        crate::api::writes::EditNote,
        crate::api::writes::MoveNote,
        crate::api::writes::RenameNote,
    )),
    tags(
        (name = "Notes", description = "List and read notes."),
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
