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
