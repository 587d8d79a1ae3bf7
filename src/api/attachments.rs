//! `/v1/attachments`: list, download (by name, name and `sha256`, or path; `Range`,
//! `ETag`, `If-None-Match`), multipart upload, presigned links (GET reusable until
//! expiry, PUT once) and delete. Uploads stream to one of our temp files in the vault
//! while they are hashed and counted, then go through the write pipeline (idempotency,
//! policy, budget) which puts the file in place with `fsio` and records it.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::wire::Json;
use crate::error::Error;
use crate::state::State;
use crate::writes;

// One file per part of the surface; `openapi.rs` names the handlers by these paths.
mod digest;
pub(crate) mod download;
pub(crate) mod export_link;
pub(crate) mod listing;
pub(crate) mod presigned;
pub(crate) mod relocate;
mod staging;
mod target;
pub(crate) mod upload;

// The paths the rest of the crate and the tests use.
pub use download::get;
pub use listing::list;
pub use presigned::{presign, private};
pub use relocate::{delete, move_, rename, MoveAttachment, RenameAttachment};
pub use upload::{put, upload};
// The shapes shared with MCP, named here for the handlers and the tests.
pub use crate::surface::attachments::{
    Attachment, AttachmentCoverage, AttachmentList, PresignRequest, PresignResponse,
};

/// An upload's receipt.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AttachmentReceipt {
    /// `applied`.
    pub status: String,
    pub committed_seq: i64,
    /// The same bytes were already at that path (a retry).
    pub unchanged: bool,
    pub attachment: Attachment,
    /// A move or rename: notes whose links or embeds of it were rewritten.
    pub links_updated: usize,
    pub links_failed: Vec<crate::api::wire::LinkFailure>,
    pub flow_back_error: Option<String>,
}

/// An attachment write's receipt as answered: the attachment's, or (a queued move or
/// delete, a replay of an answer stored rendered) the note receipt's form.
fn render(state: &State, receipt: &writes::Receipt) -> Result<Response, Error> {
    let writes::Subject::Attachment(facts) = &receipt.subject else {
        return Ok(crate::api::writes::respond(receipt, false));
    };
    let refs = crate::queries::attachments::references(state)
        .get(&facts.path)
        .copied()
        .unwrap_or(0);
    let (folder, file_name) = crate::vault::path::split_path(&facts.path);
    let wire = AttachmentReceipt {
        status: "applied".into(),
        committed_seq: receipt.committed_seq,
        unchanged: receipt.unchanged,
        attachment: Attachment {
            file_name: file_name.to_string(),
            path: facts.path.clone(),
            folder: folder.to_string(),
            size: facts.size,
            sha256: facts.sha256.clone(),
            content_type: facts.content_type.clone(),
            modified_at: facts.modified_at.clone(),
            referenced_by: refs,
        },
        links_updated: receipt.links_updated,
        links_failed: receipt
            .links_failed
            .iter()
            .map(|(slug, reason)| crate::api::wire::LinkFailure {
                slug: slug.clone(),
                reason: reason.clone(),
            })
            .collect(),
        flow_back_error: receipt
            .flow_back_error
            .as_deref()
            .map(crate::surface::envelope::in_vault_terms),
    };
    let status = if receipt.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(wire)).into_response())
}
