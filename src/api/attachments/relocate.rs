//! Writes on an attachment already there: delete, move, rename.

use std::sync::Arc;

use axum::http::request::Parts;
use axum::response::Response;
use serde::Deserialize;
use utoipa::ToSchema;

use super::{render, AttachmentReceipt};
use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::error::Error;
use crate::state::State;
use crate::surface::blocking;
use crate::writes::{self, Idempotency, Request};

/// Remove an attachment (`Idempotency-Key`, `agent_id`; optional `sha256` that the
/// bytes must still have).
#[utoipa::path(
    delete,
    path = "/v1/attachments/{file_name}",
    operation_id = "delete_attachment",
    tag = "Attachments",
    params(
        ("file_name" = String, Path, description = "A file name found anywhere in the vault, or a vault-relative path."),
        ("sha256" = Option<String>, Query, description = "The bytes it must still have (and which of several files of that name)."),
        ("agent_id" = Option<String>, Query, description = "Who asks."),
        ("Idempotency-Key" = String, Header, description = "One value per distinct write."),
    ),
    responses(
        (status = 200, description = "Removed and recorded (history keeps its bytes).", body = AttachmentReceipt),
        (status = 400, description = "Bad parameter, no `Idempotency-Key`, an unsafe path.", body = ErrorEnvelope),
        (status = 404, description = "No such attachment.", body = ErrorEnvelope),
        (status = 409, description = "Ambiguous name, or the bytes changed.", body = ErrorEnvelope),
        (status = 422, description = "Idempotency-Key reused.", body = ErrorEnvelope),
    )
)]
pub async fn delete(state: Arc<State>, name: String, parts: Parts) -> ApiResult<Response> {
    let q = Query::parse(parts.uri.query(), &["sha256", "agent_id"])?;
    let key = crate::api::writes::idempotency_key(&parts.headers)?;
    let sha256 = q.non_empty("sha256")?.map(str::to_string);
    let agent_id = crate::api::writes::agent_id(q.owned("agent_id"))?;
    let state2 = state.clone();
    let submitted = blocking(move || {
        let call = serde_json::json!({
            "call": "delete_attachment", "name": name, "sha256": sha256, "agent_id": agent_id,
        });
        let find = || crate::queries::attachments::find(&state2, &name, sha256.as_deref());
        // What an older version bound the key to (what the name finds, when it still does).
        let legacy = find()
            .ok()
            .map(|a| legacy_hash(&["DELETE /v1/attachments", &a.path, &a.sha256, &agent_id]));
        let idem = Idempotency { key: &key, legacy };
        // The name is resolved only once the key is new: a replay finds its receipt even
        // when the attachment is gone.
        writes::submit_call(&state2, &call, idem, || {
            let a = find()?;
            Request::delete_attachment(a.path.clone(), Some(a.sha256.clone()), Some(agent_id))
        })
    })
    .await?;
    Ok(render(&state, &submitted)?)
}

/// `POST /v1/attachments/{file_name}:move` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveAttachment {
    /// The folder it moves into (`""` for the vault's top; made one level deep at most).
    pub folder: String,
    /// The bytes it must still have (and which of several files of that name).
    pub sha256: Option<String>,
    pub agent_id: Option<String>,
}

/// `POST /v1/attachments/{file_name}:rename` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameAttachment {
    /// Its new file name in the same folder (no `/`; not `.md`).
    pub name: String,
    pub sha256: Option<String>,
    pub agent_id: Option<String>,
}

/// Move an attachment into another folder; the links and embeds that name it are
/// rewritten.
#[utoipa::path(
    post,
    path = "/v1/attachments/{file_name}:move",
    operation_id = "move_attachment",
    tag = "Attachments",
    request_body = MoveAttachment,
    params(
        ("file_name" = String, Path, description = "A file name found anywhere in the vault, or a vault-relative path (`/` as `%2F`)."),
        ("Idempotency-Key" = String, Header, description = "One value per distinct write."),
    ),
    responses(
        (status = 200, description = "Moved and recorded; `links_updated` and `links_failed` report the rewrites.", body = AttachmentReceipt),
        (status = 202, description = "Queued for review (`pending_id`).", body = crate::api::wire::Receipt),
        (status = 400, description = "Bad body, no `Idempotency-Key`, an unsafe or note name.", body = ErrorEnvelope),
        (status = 404, description = "No such attachment.", body = ErrorEnvelope),
        (status = 409, description = "Ambiguous name, the target exists, or the bytes changed.", body = ErrorEnvelope),
        (status = 422, description = "Idempotency-Key reused.", body = ErrorEnvelope),
    )
)]
pub async fn move_(
    state: Arc<State>,
    name: String,
    parts: Parts,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let (_, req): (serde_json::Value, MoveAttachment) = crate::api::writes::parsed(&parts, &body)?;
    let folder = req.folder.trim_end_matches('/').to_string();
    relocate(
        state,
        name,
        parts,
        req.sha256,
        req.agent_id,
        serde_json::json!({ "folder": folder }),
        move |path: &str| {
            let file = crate::vault::path::file_name_of(path);
            Ok(if folder.is_empty() {
                file.to_string()
            } else {
                format!("{folder}/{file}")
            })
        },
    )
    .await
}

/// Rename an attachment in its folder; the links and embeds that name it are rewritten.
#[utoipa::path(
    post,
    path = "/v1/attachments/{file_name}:rename",
    operation_id = "rename_attachment",
    tag = "Attachments",
    request_body = RenameAttachment,
    params(
        ("file_name" = String, Path, description = "A file name found anywhere in the vault, or a vault-relative path (`/` as `%2F`)."),
        ("Idempotency-Key" = String, Header, description = "One value per distinct write."),
    ),
    responses(
        (status = 200, description = "Renamed and recorded; `links_updated` and `links_failed` report the rewrites.", body = AttachmentReceipt),
        (status = 202, description = "Queued for review (`pending_id`).", body = crate::api::wire::Receipt),
        (status = 400, description = "Bad body, no `Idempotency-Key`, an unsafe or note name.", body = ErrorEnvelope),
        (status = 404, description = "No such attachment.", body = ErrorEnvelope),
        (status = 409, description = "Ambiguous name, the target exists, or the bytes changed.", body = ErrorEnvelope),
        (status = 422, description = "Idempotency-Key reused.", body = ErrorEnvelope),
    )
)]
pub async fn rename(
    state: Arc<State>,
    name: String,
    parts: Parts,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let (_, req): (serde_json::Value, RenameAttachment) =
        crate::api::writes::parsed(&parts, &body)?;
    if req.name.is_empty() || req.name.contains('/') {
        return Err(Error::invalid_field(
            "name",
            "is a file name, without `/`; move the attachment with `POST /v1/attachments/{file_name}:move`",
        )
        .into());
    }
    let new_name = req.name.clone();
    relocate(
        state,
        name,
        parts,
        req.sha256,
        req.agent_id,
        serde_json::json!({ "name": req.name }),
        move |path: &str| Ok(crate::vault::path::sibling(path, &new_name)),
    )
    .await
}

/// Move or rename the attachment `name` names to the path `to` makes of its current one,
/// through the pipeline; `target` is what the call asked for (its key binds to it).
async fn relocate(
    state: Arc<State>,
    name: String,
    parts: Parts,
    sha256: Option<String>,
    agent_id: Option<String>,
    target: serde_json::Value,
    to: impl Fn(&str) -> Result<String, Error> + Send + 'static,
) -> ApiResult<Response> {
    let key = crate::api::writes::idempotency_key(&parts.headers)?;
    let agent_id = crate::api::writes::agent_id(agent_id)?;
    let state2 = state.clone();
    let submitted = blocking(move || {
        let call = serde_json::json!({
            "call": "relocate_attachment", "name": name, "sha256": sha256,
            "agent_id": agent_id, "target": target,
        });
        let find = || crate::queries::attachments::find(&state2, &name, sha256.as_deref());
        // What an older version bound the key to (what the name finds, when it still does).
        let legacy = find().ok().and_then(|a| {
            let to = to(&a.path).ok()?;
            Some(legacy_hash(&[
                "MOVE /v1/attachments",
                &a.path,
                &a.sha256,
                &to,
                &agent_id,
            ]))
        });
        let idem = Idempotency { key: &key, legacy };
        writes::submit_call(&state2, &call, idem, || {
            let a = find()?;
            let to = to(&a.path)?;
            Request::move_attachment(a.path.clone(), to, Some(a.sha256.clone()), Some(agent_id))
        })
    })
    .await?;
    Ok(render(&state, &submitted)?)
}

/// The hash a version before request identities bound a key to: its parts, each ended
/// by a NUL.
fn legacy_hash(parts: &[&str]) -> String {
    let mut h = blake3::Hasher::new();
    for part in parts {
        h.update(part.as_bytes());
        h.update(&[0]);
    }
    h.finalize().to_hex().to_string()
}
