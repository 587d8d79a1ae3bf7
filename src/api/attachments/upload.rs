//! Uploads: multipart `POST /v1/attachments`, and the raw `PUT` a presigned link (or a
//! bearer) makes.

use std::sync::Arc;

use axum::body::Body;
use axum::http::request::Parts;
use axum::response::Response;
use futures::StreamExt;

use super::presigned::PRESIGN_PARAMS;
use super::staging::{check_declared_length, submit_upload, Received, Staged, TempGuard};
use super::target::{default_folder, media_type, target_path};
use super::AttachmentReceipt;
use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::error::{Error, Reason};
use crate::state::State;

/// Upload a file (multipart: a `file` part, optional `folder` and `agent_id` parts).
#[utoipa::path(
    post,
    path = "/v1/attachments",
    operation_id = "upload_attachment",
    tag = "Attachments",
    params(
        ("Idempotency-Key" = String, Header, description = "One value per distinct upload."),
    ),
    request_body(content_type = "multipart/form-data", description = "`file` (one file part; its part header `Content-Digest: sha-256=:<base64>:`, optional, is checked against the bytes), optional `folder` (vault-relative; default: Obsidian's attachment folder, else the root) and `agent_id`."),
    responses(
        (status = 201, description = "Stored and recorded.", body = AttachmentReceipt),
        (status = 200, description = "A replay, or the same bytes already at that path.", body = AttachmentReceipt),
        (status = 400, description = "No file part, two file parts, an unsafe name or folder, an empty file, a malformed part `Content-Digest` or bytes that do not match it.", body = ErrorEnvelope),
        (status = 409, description = "A file of that name exists (`NAME_COLLISION`).", body = ErrorEnvelope),
        (status = 413, description = "Over the byte cap.", body = ErrorEnvelope),
        (status = 415, description = "A type not allowed, or one the bytes contradict.", body = ErrorEnvelope),
        (status = 422, description = "The Idempotency-Key was used for another upload.", body = ErrorEnvelope),
        (status = 503, description = "`BLOB_STORE_UNAVAILABLE`: the vault folder is not writable, or (hosted) the blob store is not configured or did not answer (`Retry-After`).", body = ErrorEnvelope),
        (status = 507, description = "The disk is full (`INSUFFICIENT_STORAGE`).", body = ErrorEnvelope),
    )
)]
pub async fn upload(state: Arc<State>, parts: Parts, body: Body) -> ApiResult<Response> {
    let q = Query::parse(parts.uri.query(), &["agent_id", "folder"])?;
    let key = crate::api::writes::idempotency_key(&parts.headers)?;
    let cap = state.config.max_upload_bytes;
    check_declared_length(&parts.headers, cap, 64 * 1024)?;
    let content_type = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let boundary = multer::parse_boundary(content_type).map_err(|_| {
        Error::invalid_field(
            "Content-Type",
            "must be multipart/form-data with a boundary",
        )
    })?;
    let mut agent_id = q.owned("agent_id");
    let mut folder: Option<String> = q.owned("folder");
    let mut multipart = multer::Multipart::new(body.into_data_stream(), boundary);
    let mut guard = TempGuard(None);
    // File name, declared type, sha256, size, first bytes.
    type File = (String, Option<String>, String, u64, Vec<u8>);
    let mut received: Option<File> = None;
    let deadline = tokio::time::Instant::now()
        + state
            .config
            .body_read_timeout
            .max(std::time::Duration::from_secs(300));
    loop {
        let field = tokio::time::timeout_at(deadline, multipart.next_field())
            .await
            .map_err(|_| Error::new(Reason::REQUEST_TIMEOUT, "the upload did not arrive in time"))?
            .map_err(multipart_error)?;
        let Some(mut field) = field else { break };
        let name = field.name().unwrap_or("").to_string();
        match name.as_str() {
            "file" => {
                if received.is_some() {
                    return Err(Error::invalid_field("file", "send exactly one file part").into());
                }
                let file_name = field.file_name().unwrap_or("").to_string();
                let declared = field.content_type().map(|m| m.essence_str().to_string());
                let folder_now = folder.clone().unwrap_or_else(|| default_folder(&state));
                // The name and folder are checked before a byte is stored.
                target_path(&state, &folder_now, &file_name)?;
                // The part's own `Content-Digest` (the request's would cover the whole
                // multipart body).
                let digest = super::digest::declared_sha256(field.headers())?;
                let mut staged = Staged::open(&state, Some(&folder_now), digest)?;
                guard.0 = Some(staged.temp.clone());
                loop {
                    let chunk = tokio::time::timeout_at(deadline, field.chunk())
                        .await
                        .map_err(|_| {
                            Error::new(Reason::REQUEST_TIMEOUT, "the upload did not arrive in time")
                        })?
                        .map_err(multipart_error)?;
                    let Some(chunk) = chunk else { break };
                    staged.push(chunk, cap).await?;
                }
                let (_, sha, size, head) = staged.finish().await?;
                received = Some((file_name, declared, sha, size, head));
            }
            "folder" | "agent_id" => {
                let text = tokio::time::timeout_at(deadline, field.text())
                    .await
                    .map_err(|_| {
                        Error::new(Reason::REQUEST_TIMEOUT, "the upload did not arrive in time")
                    })?
                    .map_err(multipart_error)?;
                if name == "folder" {
                    if received.is_some() {
                        return Err(Error::invalid_field(
                            "folder",
                            "must come before the file part",
                        )
                        .into());
                    }
                    folder = Some(text);
                } else {
                    agent_id = Some(text);
                }
            }
            other => {
                return Err(Error::invalid_field(
                    other.to_string(),
                    "is not a part of an upload (`file`, `folder`, `agent_id`)",
                )
                .into())
            }
        }
    }
    let Some((file_name, declared, sha256, size, head)) = received else {
        return Err(Error::invalid_field("file", "the upload has no file part").into());
    };
    if size == 0 {
        return Err(
            Error::invalid_field("file", "is empty: an attachment has at least one byte").into(),
        );
    }
    let folder = folder.unwrap_or_else(|| default_folder(&state));
    let path = target_path(&state, &folder, &file_name)?;
    let content_type = media_type(&state, &head, &file_name, declared.as_deref())?;
    let agent_id = crate::api::writes::agent_id(agent_id)?;
    let temp = guard
        .0
        .take()
        .ok_or_else(|| Error::internal("the upload lost its temp file"))?;
    Ok(submit_upload(
        state,
        key,
        "POST /v1/attachments",
        Received {
            temp,
            path,
            sha256,
            size,
            content_type,
            agent_id,
        },
    )
    .await?)
}

fn multipart_error(e: multer::Error) -> Error {
    match e {
        multer::Error::StreamReadFailed(inner) => Error::new(
            Reason::MALFORMED_REQUEST,
            format!("the upload body could not be read: {inner}"),
        ),
        other => Error::invalid_field("body", format!("is not a complete multipart body: {other}")),
    }
}

/// Put a file's bytes at a path with a presigned PUT link (or a bearer with
/// `notes.write` and an `Idempotency-Key`): the raw body is the file.
#[utoipa::path(
    put,
    path = "/v1/attachments/{file_name}",
    operation_id = "put_attachment",
    tag = "Attachments",
    params(
        ("file_name" = String, Path, description = "The vault-relative path the file is created at."),
        ("expires" = Option<i64>, Query, description = "Presigned link: its expiry (Unix seconds)."),
        ("nonce" = Option<String>, Query, description = "Presigned link: its one-time nonce."),
        ("signature" = Option<String>, Query, description = "Presigned link: its signature."),
        ("Content-Digest" = Option<String>, Header, description = "RFC 9530 `sha-256=:<base64>:`: the bytes are refused (nothing stored) unless they hash to it; a hosted vault stores a large upload straight under its content address."),
    ),
    request_body(content_type = "application/octet-stream", description = "The file's bytes."),
    responses(
        (status = 201, description = "Stored and recorded.", body = AttachmentReceipt),
        (status = 400, description = "Bad parameter, no `Idempotency-Key`, an empty body, a malformed `Content-Digest` or bytes that do not match it.", body = ErrorEnvelope),
        (status = 401, description = "A tampered, expired or used link.", body = ErrorEnvelope),
        (status = 409, description = "A file exists at that path.", body = ErrorEnvelope),
        (status = 413, description = "Over the byte cap.", body = ErrorEnvelope),
        (status = 415, description = "A type not allowed, or one the bytes contradict.", body = ErrorEnvelope),
    )
)]
pub async fn put(
    state: Arc<State>,
    path: String,
    parts: Parts,
    body: Body,
    presigned: Option<String>,
) -> ApiResult<Response> {
    let mut allowed = vec!["agent_id"];
    allowed.extend(PRESIGN_PARAMS);
    let q = Query::parse(parts.uri.query(), &allowed)?;
    let key = match presigned {
        Some(nonce) => format!("presigned-put:{nonce}"),
        None => crate::api::writes::idempotency_key(&parts.headers)?,
    };
    let cap = state.config.max_upload_bytes;
    check_declared_length(&parts.headers, cap, 0)?;
    let (folder, file_name) = crate::vault::path::split_path(&path);
    let path = target_path(&state, folder, file_name)?;
    let declared = super::digest::declared_sha256(&parts.headers)?;
    let mut staged = Staged::open(&state, Some(folder), declared)?;
    let mut guard = TempGuard(Some(staged.temp.clone()));
    let mut stream = body.into_data_stream();
    let deadline = tokio::time::Instant::now()
        + state
            .config
            .body_read_timeout
            .max(std::time::Duration::from_secs(300));
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .map_err(|_| {
                Error::new(Reason::REQUEST_TIMEOUT, "the upload did not arrive in time")
            })?;
        let Some(chunk) = next else { break };
        let chunk = chunk.map_err(|e| {
            Error::new(
                Reason::MALFORMED_REQUEST,
                format!("the upload body could not be read: {e}"),
            )
        })?;
        staged.push(chunk, cap).await?;
    }
    let (_, sha256, size, head) = staged.finish().await?;
    if size == 0 {
        return Err(
            Error::invalid_field("body", "is empty: an attachment has at least one byte").into(),
        );
    }
    let declared = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok());
    let content_type = media_type(&state, &head, file_name, declared)?;
    let agent_id =
        crate::api::writes::agent_id(q.owned("agent_id").or(Some("presigned-link".into())))?;
    let temp = guard
        .0
        .take()
        .ok_or_else(|| Error::internal("the upload lost its temp file"))?;
    Ok(submit_upload(
        state,
        key,
        "PUT /v1/attachments/{file_name}",
        Received {
            temp,
            path,
            sha256,
            size,
            content_type,
            agent_id,
        },
    )
    .await?)
}
