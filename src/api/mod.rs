//! The `/v1` HTTP API: the route table and its dispatch (one permission check per row),
//! the handlers per resource (query strings and bodies read into the typed parameters of
//! `surface`'s calls), the guards, status codes and the OpenAPI document. The application
//! around it (middleware, `/mcp`, the server) is `http`; the domain (`queries`, `writes`,
//! `vault`, ...) knows nothing of either.

pub mod account;
pub mod attachment_headers;
pub mod attachments;
pub mod error;
pub mod folders;
pub mod grep;
pub mod guard;
pub mod notes;
pub mod oauth;
pub mod openapi;
pub mod params;
pub mod properties;
pub mod review;
pub mod revisions;
pub mod routes;
pub mod search;
pub mod strict_json;
pub mod sync;
mod sync_blobs;
pub mod sync_keys;
pub mod tags;
pub mod vault;
pub mod wire;
pub mod writes;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method};
use axum::response::{IntoResponse, Response};

use crate::api::error::ApiError;
use crate::api::routes::{recognize, Op};
use crate::auth::{self, Credential};
use crate::error::{Error, Reason};
use crate::state::State;
use crate::surface::input::read_body;

/// Open local mode lets any local request decide a pending write or change the write
/// settings (the spec's rule), unless the owner asked for signed-in decisions
/// (`review_decisions = "signed_in"`, `serve --review`): then only a person signed in to
/// the console or a `notes.review` token may.
fn review_by_anyone(state: &State) -> Result<(), Error> {
    use crate::queries::settings::{review_decisions, ReviewDecisions};
    if review_decisions(state)? == ReviewDecisions::Anyone {
        return Ok(());
    }
    Err(Error::new(
        Reason::PERMISSION_MISSING,
        "this daemon takes review decisions only from a person signed in to the console or a token with notes.review (review_decisions = \"signed_in\")",
    )
    .with_meta("scope", auth::Permission::NotesReview.as_str()))
}

/// The credential [`authenticate`] put into a request. Without one (a router built
/// without that layer) nothing is served.
pub fn credential(extensions: &axum::http::Extensions) -> Result<&Credential, Error> {
    extensions
        .get::<Credential>()
        .ok_or_else(|| Error::internal("the request has no credential: the auth layer did not run"))
}

/// Route the request through the route table, after the one permission check of its row,
/// against the vault the auth layer resolved for it.
pub async fn dispatch(req: Request) -> Response {
    let Some(state) = req.extensions().get::<Arc<State>>().cloned() else {
        return ApiError(Error::internal(
            "the request has no vault: the auth layer did not run",
        ))
        .into_response();
    };
    let path = req.uri().path().to_string();
    let matched = match recognize(req.method(), &path, |key| {
        crate::queries::status::note_exists(&state, key)
    }) {
        Ok(matched) => matched,
        Err(e) => return ApiError(e).into_response(),
    };
    let template = RouteTemplate(matched.template);
    let mut response = match dispatch_inner(state, req, matched).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    response.extensions_mut().insert(template);
    response
}

/// The template of the route a response answers (`/v1/notes/{note}`), for the request
/// log: never the path, which names notes.
#[derive(Debug, Clone, Copy)]
pub struct RouteTemplate(pub &'static str);

async fn dispatch_inner(
    state: Arc<State>,
    req: Request,
    matched: routes::Matched,
) -> Result<Response, ApiError> {
    // The one check; a presigned link is a credential like a bearer (`http::authenticate`).
    let credential = credential(req.extensions())?;
    auth::require(credential, matched.access.need)?;
    if matched.access == routes::REVIEW && *credential == auth::Credential::Open {
        review_by_anyone(&state)?;
    }
    if matches!(
        matched.op,
        Op::UploadAttachment
            | Op::PresignAttachment
            | Op::GetAttachment
            | Op::PutAttachment
            | Op::DeleteAttachment
            | Op::MoveAttachment
            | Op::RenameAttachment
    ) {
        crate::writes::attachments::blob_store(&state)?;
    }
    let presigned = match credential {
        auth::Credential::Presigned { nonce } => Some(nonce.clone()),
        _ => None,
    };
    let (parts, body) = req.into_parts();
    // Uploads read their own body, streamed, with their own byte cap.
    let streamed = matches!(matched.op, Op::UploadAttachment | Op::PutAttachment);
    let (bytes, body) =
        if !streamed && matches!(parts.method, Method::POST | Method::PATCH | Method::PUT) {
            (
                read_body(body, writes::MAX_BODY, state.config.body_read_timeout).await?,
                Body::empty(),
            )
        } else {
            (axum::body::Bytes::new(), body)
        };
    let note = || {
        matched.param.clone().ok_or_else(|| {
            ApiError(Error::new(
                Reason::ROUTE_NOT_FOUND,
                "missing path parameter",
            ))
        })
    };
    let head = parts.method == Method::HEAD;
    let response = match matched.op {
        Op::OpenApi => (
            [("content-type", "application/json")],
            openapi::document_json(),
        )
            .into_response(),
        Op::ListNotes => notes::list(state, parts).await?.into_response(),
        Op::ListFolders => folders::list(state, parts).await?.into_response(),
        Op::GetNote => notes::get(state, note()?, parts).await?.into_response(),
        Op::GetRaw => notes::raw(state, note()?, parts).await?.into_response(),
        Op::CreateNote => writes::create(state, parts, bytes).await?,
        Op::PatchNote => writes::patch(state, note()?, parts, bytes).await?,
        Op::DeleteNote => writes::delete(state, note()?, parts).await?,
        Op::EditNote => writes::edit(state, note()?, parts, bytes).await?,
        Op::AppendNote => writes::append(state, note()?, parts, bytes).await?,
        Op::ReplaceSection => writes::replace_section(state, note()?, parts, bytes).await?,
        Op::MoveNote => writes::move_(state, note()?, parts, bytes).await?,
        Op::RenameNote => writes::rename(state, note()?, parts, bytes).await?,
        Op::RollbackNote => writes::rollback(state, note()?, parts, bytes).await?,
        Op::ListRevisions => revisions::list_revisions(state, note()?, parts)
            .await?
            .into_response(),
        Op::DiffNote => revisions::diff(state, note()?, parts)
            .await?
            .into_response(),
        Op::NoteLinks => notes::links(state, note()?, parts).await?.into_response(),
        Op::IndexStatus => notes::index_status(state, parts).await?.into_response(),
        Op::Search => search::search_route(state, parts).await?.into_response(),
        Op::Grep => grep::grep_route(state, parts).await?.into_response(),
        Op::Tags => tags::tags_route(state, parts).await?.into_response(),
        Op::AggregateProperties => properties::aggregate_route(state, parts, bytes)
            .await?
            .into_response(),
        Op::Vault => vault::vault_route(state, parts).await?.into_response(),
        Op::GetWriteSettings => review::get_settings(state, parts).await?.into_response(),
        Op::PatchWriteSettings => review::patch_settings(state, parts, bytes)
            .await?
            .into_response(),
        Op::ListWrites => review::list_writes(state, parts).await?.into_response(),
        Op::GetWrite => review::get_write(state, note()?, parts)
            .await?
            .into_response(),
        Op::ApproveWrite => review::approve(state, note()?, parts)
            .await?
            .into_response(),
        Op::RejectWrite => review::reject(state, note()?, parts).await?.into_response(),
        Op::AuthToken => oauth::token(state, parts, bytes).await?,
        Op::CreateFolder => writes::create_folder(state, parts, bytes).await?,
        Op::MoveFolder => writes::move_folder(state, parts, bytes).await?,
        Op::RenameFolder => writes::rename_folder(state, parts, bytes).await?,
        Op::DeleteFolder => writes::delete_folder(state, parts, bytes).await?,
        Op::ResourceMetadata => oauth::resource_metadata(state, parts).await?,
        Op::McpResourceMetadata => oauth::mcp_resource_metadata(state, parts).await?,
        Op::ListAttachments => attachments::list(state, parts).await?.into_response(),
        Op::UploadAttachment => attachments::upload(state, parts, body).await?,
        Op::PresignAttachment => attachments::presign(state, parts, bytes)
            .await?
            .into_response(),
        Op::GetAttachment => {
            let r = attachments::get(state, note()?, parts).await?;
            if presigned.is_some() {
                attachments::private(r)
            } else {
                r
            }
        }
        Op::PutAttachment => {
            let nonce = presigned.flatten();
            attachments::put(state, note()?, parts, body, nonce).await?
        }
        Op::DeleteAttachment => attachments::delete(state, note()?, parts).await?,
        Op::MoveAttachment => attachments::move_(state, note()?, parts, bytes).await?,
        Op::RenameAttachment => attachments::rename(state, note()?, parts, bytes).await?,
        Op::AuditEvents => account::audit_events(state, parts).await?.into_response(),
        Op::Export => account::export(state, parts, bytes).await?,
        Op::GetExport => attachments::export_link::get(state, note()?, parts).await?,
        Op::PurgeVault => account::purge(state, parts, bytes).await?,
        Op::SyncOps => sync::ops_route(state, parts).await?.into_response(),
        Op::SyncPush => sync::push_route(state, parts, bytes).await?.into_response(),
        Op::SyncSnapshot => sync::snapshot_route(state, parts).await?.into_response(),
        Op::SyncCheckpoint => sync::checkpoint_route(state, parts, bytes)
            .await?
            .into_response(),
        Op::SyncCompact => sync::compact_route(state, parts).await?.into_response(),
        Op::SyncE2ee => sync_keys::e2ee_route(state, parts).await?.into_response(),
        Op::SyncE2eeEnable => sync_keys::enable_route(state, parts, bytes)
            .await?
            .into_response(),
        Op::SyncE2eeKeys => sync_keys::keys_route(state, parts, bytes)
            .await?
            .into_response(),
    };
    let mut response = response;
    if let (Some(successor), Some(raw)) = (matched.successor, &matched.raw_param) {
        let link = format!(
            "<{}>; rel=\"successor-version\"",
            successor.replace("{note}", raw).replace("{id}", raw)
        );
        let headers = response.headers_mut();
        headers.insert("deprecation", HeaderValue::from_static("true"));
        if let Ok(v) = HeaderValue::from_str(&link) {
            headers.insert("link", v);
        }
    }
    if head {
        let (parts, _) = response.into_parts();
        return Ok(Response::from_parts(parts, Body::empty()));
    }
    Ok(response)
}
