//! `/v1/attachments`: list, download (by name, name and `sha256`, or path; `Range`,
//! `ETag`, `If-None-Match`), multipart upload, presigned links (GET reusable until
//! expiry, PUT once) and delete. Uploads stream to one of our temp files in the vault
//! while they are hashed and counted, then go through the write pipeline (idempotency,
//! policy, budget) which puts the file in place with `fsio` and records it.

use std::sync::Arc;

use crate::api::wire::Json;
use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use utoipa::ToSchema;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::notes::{blocking, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::api::params::{self, PageTokens, Query};
use crate::api::wire::ExcludedNote;
use crate::auth::{self, Need, Permission};
use crate::error::{Error, Reason};
use crate::state::State;
use crate::vault::attachments as domain;
use crate::vault::fsio;
use crate::vault::observe::{hex, SNIFF_BYTES};
use crate::writes::{self, Idempotency, Op, Request, Submitted};

/// An attachment: a file of the vault that is not a note.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Attachment {
    pub file_name: String,
    /// Vault-relative path.
    pub path: String,
    /// The folder holding it (`""`: the vault root).
    pub folder: String,
    pub size: u64,
    /// Lower-case hex SHA-256 of the bytes (also the download's `ETag`).
    pub sha256: String,
    /// Sniffed from the bytes, else from the extension.
    pub content_type: String,
    pub modified_at: String,
    /// How many notes embed or link it.
    pub referenced_by: usize,
}

impl Attachment {
    fn of(a: &domain::Attachment, referenced_by: usize) -> Self {
        Self {
            file_name: a.file_name().to_string(),
            path: a.path.clone(),
            folder: a.folder().to_string(),
            size: a.size,
            sha256: a.sha256.clone(),
            content_type: a.content_type.clone(),
            modified_at: crate::clock::timestamp(a.modified_at),
            referenced_by,
        }
    }
}

/// What an attachment listing covered.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttachmentCoverage {
    pub attachments_total: usize,
    pub attachments_matched: usize,
    pub attachments_returned: usize,
    pub truncated: bool,
    pub excluded_count: usize,
    pub excluded: Vec<ExcludedNote>,
    pub committed_seq: i64,
}

/// A page of attachments.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttachmentList {
    pub attachments: Vec<Attachment>,
    pub coverage: AttachmentCoverage,
    pub next_page_token: Option<String>,
}

/// What an attachment listing takes: `GET /v1/attachments` and the MCP
/// `list_attachments` tool.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListAttachmentsParams {
    /// AIP-160 filter over `folder`, `path`, `file_name`, `content_type`, `size`,
    /// `modified_at`, `referenced` and `sha256`, e.g. `content_type = "image/png" AND
    /// size > 1000`, `referenced = false`.
    pub filter: Option<String>,
    /// AIP-132 order: `path` (default), `file_name`, `size`, `modified_at` or
    /// `content_type`, with `asc` or `desc`.
    pub order_by: Option<String>,
    /// Attachments per page, 1..500 (default 50).
    #[schema(minimum = 1, maximum = 500)]
    pub page_size: Option<usize>,
    /// The `next_page_token` of the previous page; repeat the other parameters unchanged.
    pub page_token: Option<String>,
}

/// List attachments with coverage (both surfaces).
pub async fn list_attachments(
    state: Arc<State>,
    p: ListAttachmentsParams,
) -> Result<AttachmentList, Error> {
    let filter = params::filter_text(
        params::non_empty("filter", p.filter.as_deref())?,
        crate::queries::attachments::FILTER_FIELDS,
    )?;
    let order = params::parse_order(
        params::non_empty("order_by", p.order_by.as_deref())?,
        crate::queries::attachments::ORDER_FIELDS,
        crate::queries::notes::Order::asc("path"),
    )?;
    let page_size = params::in_range(
        "page_size",
        p.page_size,
        DEFAULT_PAGE_SIZE,
        1,
        MAX_PAGE_SIZE,
    )?;
    let filter_text = p.filter.clone().unwrap_or_default();
    let order_text = p.order_by.clone().unwrap_or_default();
    let fingerprint = [
        ("route", "attachments"),
        ("filter", filter_text.as_str()),
        ("order_by", order_text.as_str()),
    ];
    let tokens = PageTokens {
        key: &state.token_key,
    };
    let offset = match params::non_empty("page_token", p.page_token.as_deref())? {
        Some(t) => tokens.open_offset(&fingerprint, t)?,
        None => 0,
    };
    let state2 = state.clone();
    let page = blocking(move || {
        Ok(crate::queries::attachments::list(
            &state2,
            filter.as_ref(),
            (order.field.as_str(), order.desc),
            offset,
            page_size,
        ))
    })
    .await?;
    let next_page_token = page
        .next_offset
        .map(|o| tokens.issue(&fingerprint, &o.to_string()));
    Ok(AttachmentList {
        coverage: AttachmentCoverage {
            attachments_total: page.total,
            attachments_matched: page.matched,
            attachments_returned: page.items.len(),
            truncated: next_page_token.is_some(),
            excluded_count: page.excluded.len(),
            excluded: page
                .excluded
                .iter()
                .take(100)
                .map(ExcludedNote::from)
                .collect(),
            committed_seq: page.committed_seq,
        },
        attachments: page
            .items
            .iter()
            .map(|(a, refs)| Attachment::of(a, *refs))
            .collect(),
        next_page_token,
    })
}

/// List the vault's attachments (every file that is not a note), with coverage.
#[utoipa::path(
    get,
    path = "/v1/attachments",
    operation_id = "list_attachments",
    tag = "Attachments",
    params(
        ("filter" = Option<String>, Query, description = "AIP-160 filter over `folder`, `path`, `file_name`, `content_type`, `size`, `modified_at`, `referenced`, `sha256`."),
        ("order_by" = Option<String>, Query, description = "`path` (default), `file_name`, `size`, `modified_at` or `content_type`, with `asc` or `desc`."),
        ("page_size" = Option<usize>, Query, description = "Attachments per page, 1..500 (default 50)."),
        ("page_token" = Option<String>, Query, description = "`next_page_token` of the previous page, with the same other parameters."),
    ),
    responses(
        (status = 200, description = "Attachments and coverage.", body = AttachmentList),
        (status = 400, description = "Bad parameter or filter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn list(state: Arc<State>, parts: Parts) -> ApiResult<Json<AttachmentList>> {
    let q = Query::parse(
        parts.uri.query(),
        &["filter", "order_by", "page_size", "page_token"],
    )?;
    let p = ListAttachmentsParams {
        filter: q.owned("filter"),
        order_by: q.owned("order_by"),
        page_size: q.opt_int("page_size", 1, MAX_PAGE_SIZE)?,
        page_token: q.owned("page_token"),
    };
    Ok(Json(list_attachments(state, p).await?))
}

/// The query parameters of a presigned link.
const PRESIGN_PARAMS: &[&str] = &["expires", "nonce", "signature"];

/// Download an attachment's bytes.
#[utoipa::path(
    get,
    path = "/v1/attachments/{file_name}",
    operation_id = "get_attachment",
    tag = "Attachments",
    params(
        ("file_name" = String, Path, description = "A file name found anywhere in the vault, or a vault-relative path (`projects/alpha/diagram.png`)."),
        ("sha256" = Option<String>, Query, description = "Pick one of several files of that name."),
        ("expires" = Option<i64>, Query, description = "Presigned link: its expiry (Unix seconds)."),
        ("signature" = Option<String>, Query, description = "Presigned link: its signature."),
    ),
    responses(
        (status = 200, description = "The bytes, with `Content-Type`, `Content-Length` and `ETag` (the sha256)."),
        (status = 206, description = "The `Range` asked for, with `Content-Range`."),
        (status = 304, description = "`If-None-Match` names the current bytes."),
        (status = 400, description = "Bad parameter (`sha256`, a presigned link's parameters).", body = ErrorEnvelope),
        (status = 401, description = "A tampered or expired presigned link (`AUTH_INVALID`).", body = ErrorEnvelope),
        (status = 404, description = "No such attachment.", body = ErrorEnvelope),
        (status = 409, description = "Several files of that name with different bytes (`ATTACHMENT_AMBIGUOUS`).", body = ErrorEnvelope),
        (status = 416, description = "The `Range` is past the end.", body = ErrorEnvelope),
    )
)]
pub async fn get(state: Arc<State>, name: String, parts: Parts) -> ApiResult<Response> {
    let mut allowed = vec!["sha256"];
    allowed.extend(PRESIGN_PARAMS);
    let q = Query::parse(parts.uri.query(), &allowed)?;
    let sha256 = q.non_empty("sha256")?.map(str::to_string);
    let state2 = state.clone();
    let a = blocking(move || crate::queries::attachments::find(&state2, &name, sha256.as_deref()))
        .await?;
    let etag = format!("\"{}\"", a.sha256);
    let mut base = crate::api::attachment_headers::apply(
        Response::builder()
            .header("etag", &etag)
            .header("accept-ranges", "bytes")
            .header("cache-control", "private, no-cache"),
        &a.content_type,
        a.file_name(),
    );
    if let Some(inm) = parts
        .headers
        .get("if-none-match")
        .and_then(|v| v.to_str().ok())
    {
        if inm
            .split(',')
            .map(str::trim)
            .any(|t| t == "*" || t.trim_start_matches("W/") == etag)
        {
            return Ok(base
                .status(StatusCode::NOT_MODIFIED)
                .body(Body::empty())
                .map_err(Error::internal)?);
        }
    }
    let size = a.size;
    let range = match parts.headers.get("range").and_then(|v| v.to_str().ok()) {
        Some(r) => parse_range(r, size)?,
        None => None,
    };
    let abs = state.paths.root.join(&a.path);
    let mut file = tokio::fs::File::open(&abs)
        .await
        .map_err(|e| Error::io(Reason::ATTACHMENT_NOT_FOUND, e))?;
    let (start, len, status) = match range {
        Some((start, end)) => {
            base = base.header("content-range", format!("bytes {start}-{end}/{size}"));
            (start, end - start + 1, StatusCode::PARTIAL_CONTENT)
        }
        None => (0, size, StatusCode::OK),
    };
    if start > 0 {
        file.seek(std::io::SeekFrom::Start(start))
            .await
            .map_err(Error::internal)?;
    }
    let body = Body::from_stream(chunks(file.take(len)));
    Ok(base
        .status(status)
        .header("content-type", &a.content_type)
        .header("content-length", len.to_string())
        .body(body)
        .map_err(Error::internal)?)
}

/// A reader as a stream of chunks.
fn chunks<R: tokio::io::AsyncRead + Unpin + Send + 'static>(
    reader: R,
) -> impl futures::Stream<Item = std::io::Result<axum::body::Bytes>> + Send {
    futures::stream::unfold(Some(reader), |reader| async move {
        let mut reader = reader?;
        let mut buf = vec![0u8; 256 * 1024];
        match reader.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(axum::body::Bytes::from(buf)), Some(reader)))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}

/// One `bytes=` range, as `(first, last)` inclusive; `None` for a header we do not
/// honour (several ranges, another unit: the whole file is answered, as RFC 9110
/// allows); `RANGE_NOT_SATISFIABLE` past the end.
fn parse_range(header: &str, size: u64) -> Result<Option<(u64, u64)>, Error> {
    let Some(spec) = header.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Ok(None);
    };
    let unsatisfiable = || {
        Error::new(
            Reason::RANGE_NOT_SATISFIABLE,
            format!("the range {spec:?} is outside the attachment's {size} bytes"),
        )
        .with_meta("size", size.to_string())
    };
    let range = match (a.trim(), b.trim()) {
        ("", "") => return Ok(None),
        ("", n) => {
            let n: u64 = n.parse().map_err(|_| unsatisfiable())?;
            if n == 0 || size == 0 {
                return Err(unsatisfiable());
            }
            (size.saturating_sub(n), size - 1)
        }
        (s, "") => {
            let s: u64 = s.parse().map_err(|_| unsatisfiable())?;
            (s, size.saturating_sub(1))
        }
        (s, e) => {
            let s: u64 = s.parse().map_err(|_| unsatisfiable())?;
            let e: u64 = e.parse().map_err(|_| unsatisfiable())?;
            if e < s {
                return Err(unsatisfiable());
            }
            (s, e.min(size.saturating_sub(1)))
        }
    };
    if range.0 >= size {
        return Err(unsatisfiable());
    }
    Ok(Some(range))
}

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

fn render(state: &State, receipt: &writes::Receipt) -> Result<Response, Error> {
    let facts = receipt
        .attachment
        .as_ref()
        .ok_or_else(|| Error::internal("an attachment receipt without its attachment"))?;
    let refs = crate::queries::attachments::references(state)
        .get(&facts.path)
        .copied()
        .unwrap_or(0);
    let (folder, file_name) = facts
        .path
        .rsplit_once('/')
        .map_or(("", facts.path.as_str()), |(f, n)| (f, n));
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
            .map(crate::api::error::in_vault_terms),
    };
    let status = if receipt.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(wire)).into_response())
}

/// A file being received: our temp file, its hash and size so far, its first bytes.
struct Staged {
    temp: std::path::PathBuf,
    file: tokio::fs::File,
    hasher: sha2::Sha256,
    size: u64,
    head: Vec<u8>,
}

impl Staged {
    fn open(state: &State, folder: Option<&str>) -> Result<Self, Error> {
        // In the target folder when it exists (the rename stays in one folder), else at
        // the vault root (no folder is made for an upload that may be refused).
        let dir = folder
            .filter(|f| !f.is_empty())
            .map(|f| state.paths.root.join(f))
            .filter(|d| d.is_dir())
            .unwrap_or_else(|| state.paths.root.clone());
        let (file, temp) = fsio::create_temp(&dir).map_err(|e| {
            let message =
                format!("the vault folder is not writable, so uploads cannot be stored: {e}");
            if crate::error::storage_full(&e) {
                Error::new(Reason::INSUFFICIENT_STORAGE, message)
            } else {
                Error::new(Reason::BLOB_STORE_UNAVAILABLE, message)
            }
        })?;
        Ok(Self {
            temp,
            file: tokio::fs::File::from_std(file),
            hasher: sha2::Sha256::new(),
            size: 0,
            head: Vec::new(),
        })
    }

    async fn push(&mut self, chunk: &[u8], cap: u64) -> Result<(), Error> {
        self.size += chunk.len() as u64;
        if self.size > cap {
            return Err(too_large(cap));
        }
        if self.head.len() < SNIFF_BYTES {
            let take = (SNIFF_BYTES - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
        }
        self.hasher.update(chunk);
        self.file.write_all(chunk).await.map_err(|e| {
            let message = format!("the upload could not be stored: {e}");
            if crate::error::storage_full(&e) {
                Error::new(Reason::INSUFFICIENT_STORAGE, message)
            } else {
                Error::new(Reason::BLOB_STORE_UNAVAILABLE, message)
            }
        })
    }

    async fn finish(mut self) -> Result<(std::path::PathBuf, String, u64, Vec<u8>), Error> {
        let failed =
            |e: std::io::Error| Error::io_write(&e, format!("the upload could not be stored: {e}"));
        self.file.flush().await.map_err(failed)?;
        self.file.sync_all().await.map_err(failed)?;
        let sha = hex(&self.hasher.finalize());
        Ok((self.temp, sha, self.size, self.head))
    }
}

fn too_large(cap: u64) -> Error {
    Error::new(
        Reason::PAYLOAD_TOO_LARGE,
        format!("the upload is over the byte cap of {cap} bytes"),
    )
    .with_meta("max_upload_bytes", cap.to_string())
}

/// Removes the temp file unless it was handed on.
struct TempGuard(Option<std::path::PathBuf>);

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            fsio::discard_temp(&p);
        }
    }
}

/// `Content-Length` past the cap (plus room for the multipart framing): refused before
/// a byte of the body is read.
fn check_declared_length(headers: &HeaderMap, cap: u64, slack: u64) -> Result<(), Error> {
    let declared = headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > cap + slack) {
        return Err(too_large(cap));
    }
    Ok(())
}

/// The folder an upload goes to when none is given: Obsidian's `attachmentFolderPath`
/// (`.obsidian/app.json`), read as a vault folder (`./x` has no note to be relative to
/// here, so it is `x`); the vault root otherwise.
fn default_folder(state: &State) -> String {
    let Ok(text) = std::fs::read_to_string(state.paths.root.join(".obsidian/app.json")) else {
        return String::new();
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return String::new();
    };
    let raw = v
        .get("attachmentFolderPath")
        .and_then(|f| f.as_str())
        .unwrap_or("");
    raw.trim_start_matches("./")
        .trim_matches('/')
        .trim()
        .to_string()
}

/// Check an upload's folder (`""`: the vault root) and file name, and join them.
fn target_path(state: &State, folder: &str, name: &str) -> Result<String, Error> {
    if name.is_empty() {
        return Err(Error::invalid_field("file", "has no file name"));
    }
    if name.contains('/') || name.contains('\\') || name.contains('\0') || name == ".." {
        return Err(Error::unsafe_path(format!(
            "the file name {name:?} is not a plain name"
        )));
    }
    if !crate::vault::path::is_attachment_name(name) {
        return Err(Error::invalid_field(
            "file",
            "a markdown file is a note: create it with `POST /v1/notes`",
        ));
    }
    let folder = folder.trim_end_matches('/');
    if !folder.is_empty() {
        let safe = state.paths.resolve_new(folder)?;
        if safe.abs.exists() && !safe.abs.is_dir() {
            return Err(Error::invalid_field("folder", "is a file, not a folder"));
        }
    }
    let path = if folder.is_empty() {
        name.to_string()
    } else {
        format!("{folder}/{name}")
    };
    let rel = state.paths.resolve_new(&path)?.rel;
    // The API makes folders one level deep, for attachments as for notes.
    crate::writes::folder_creatable(state, &rel)?;
    Ok(rel)
}

fn essence(t: &str) -> String {
    let t = t
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match t.as_str() {
        "image/jpg" => "image/jpeg".into(),
        _ => t,
    }
}

/// The upload's media type: the sniffed one, else the declared one, else the
/// extension's. A declared type the bytes contradict, or a type not allowed, is
/// `UNSUPPORTED_MEDIA_TYPE`.
fn media_type(
    state: &State,
    head: &[u8],
    name: &str,
    declared: Option<&str>,
) -> Result<String, Error> {
    let declared = declared
        .map(essence)
        .filter(|d| !d.is_empty() && d != "application/octet-stream");
    let sniffed = domain::sniffed(head);
    if let (Some(d), Some(s)) = (&declared, &sniffed) {
        if d != s {
            return Err(Error::new(
                Reason::UNSUPPORTED_MEDIA_TYPE,
                format!("the file was declared {d} but its bytes are {s}"),
            )
            .with_meta("declared", d.clone())
            .with_meta("sniffed", s.clone()));
        }
    }
    let effective = sniffed
        .or(declared)
        .unwrap_or_else(|| domain::by_extension(name));
    let allowed = state.config.upload_types.iter().any(|a| {
        let a = a.to_ascii_lowercase();
        match a.strip_suffix("/*") {
            Some(family) => effective.split('/').next() == Some(family),
            None => a == effective,
        }
    });
    if !allowed {
        return Err(Error::new(
            Reason::UNSUPPORTED_MEDIA_TYPE,
            format!("uploads of type {effective} are not allowed here"),
        )
        .with_meta("content_type", effective.clone())
        .with_meta("allowed", state.config.upload_types.join(" ")));
    }
    Ok(effective)
}

/// A received upload, handed to the pipeline.
struct Received {
    temp: std::path::PathBuf,
    path: String,
    sha256: String,
    size: u64,
    content_type: String,
    agent_id: String,
}

async fn submit_upload(
    state: Arc<State>,
    key: String,
    route: &str,
    r: Received,
) -> Result<Response, Error> {
    let staged = r
        .temp
        .strip_prefix(&state.paths.root)
        .map_err(Error::internal)?
        .to_string_lossy()
        .into_owned();
    let op_hash = {
        let mut h = blake3::Hasher::new();
        for part in [route, &r.path, &r.sha256, &r.agent_id] {
            h.update(part.as_bytes());
            h.update(&[0]);
        }
        h.finalize().to_hex().to_string()
    };
    let request = Request {
        op: Op::PutAttachment {
            path: r.path,
            staged,
            sha256: r.sha256,
            size: r.size,
            content_type: r.content_type,
        },
        agent_id: r.agent_id,
    };
    let temp = r.temp;
    let state2 = state.clone();
    let submitted = blocking(move || {
        let out = writes::submit(&state2, request, Idempotency { key: &key, op_hash });
        // A replay, or a refusal before the file step: the staged bytes are not needed.
        fsio::discard_temp(&temp);
        out
    })
    .await?;
    match submitted {
        Submitted::Receipt(receipt) => render(&state, &receipt),
        Submitted::Rendered(status, body) => Ok((
            StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            [("content-type", "application/json")],
            body,
        )
            .into_response()),
    }
}

/// Upload a file (multipart: a `file` part, optional `folder` and `agent_id` parts).
#[utoipa::path(
    post,
    path = "/v1/attachments",
    operation_id = "upload_attachment",
    tag = "Attachments",
    params(
        ("Idempotency-Key" = String, Header, description = "One value per distinct upload."),
    ),
    request_body(content_type = "multipart/form-data", description = "`file` (one file part), optional `folder` (vault-relative; default: Obsidian's attachment folder, else the root) and `agent_id`."),
    responses(
        (status = 201, description = "Stored and recorded.", body = AttachmentReceipt),
        (status = 200, description = "A replay, or the same bytes already at that path.", body = AttachmentReceipt),
        (status = 400, description = "No file part, two file parts, an unsafe name or folder, an empty file.", body = ErrorEnvelope),
        (status = 409, description = "A file of that name exists (`NAME_COLLISION`).", body = ErrorEnvelope),
        (status = 413, description = "Over the byte cap.", body = ErrorEnvelope),
        (status = 415, description = "A type not allowed, or one the bytes contradict.", body = ErrorEnvelope),
        (status = 422, description = "The Idempotency-Key was used for another upload.", body = ErrorEnvelope),
        (status = 503, description = "The vault folder is not writable (`BLOB_STORE_UNAVAILABLE`).", body = ErrorEnvelope),
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
                let mut staged = Staged::open(&state, Some(&folder_now))?;
                guard.0 = Some(staged.temp.clone());
                loop {
                    let chunk = tokio::time::timeout_at(deadline, field.chunk())
                        .await
                        .map_err(|_| {
                            Error::new(Reason::REQUEST_TIMEOUT, "the upload did not arrive in time")
                        })?
                        .map_err(multipart_error)?;
                    let Some(chunk) = chunk else { break };
                    staged.push(&chunk, cap).await?;
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
    ),
    request_body(content_type = "application/octet-stream", description = "The file's bytes."),
    responses(
        (status = 201, description = "Stored and recorded.", body = AttachmentReceipt),
        (status = 400, description = "Bad parameter, no `Idempotency-Key`, an empty body.", body = ErrorEnvelope),
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
    let (folder, file_name) = path.rsplit_once('/').unwrap_or(("", path.as_str()));
    let path = target_path(&state, folder, file_name)?;
    let mut staged = Staged::open(&state, Some(folder))?;
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
        staged.push(&chunk, cap).await?;
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
    )
)]
pub async fn delete(state: Arc<State>, name: String, parts: Parts) -> ApiResult<Response> {
    let q = Query::parse(parts.uri.query(), &["sha256", "agent_id"])?;
    let key = crate::api::writes::idempotency_key(&parts.headers)?;
    let sha256 = q.non_empty("sha256")?.map(str::to_string);
    let agent_id = crate::api::writes::agent_id(q.owned("agent_id"))?;
    let state2 = state.clone();
    let submitted = blocking(move || {
        let a = crate::queries::attachments::find(&state2, &name, sha256.as_deref())?;
        let op_hash = {
            let mut h = blake3::Hasher::new();
            for part in ["DELETE /v1/attachments", &a.path, &a.sha256, &agent_id] {
                h.update(part.as_bytes());
                h.update(&[0]);
            }
            h.finalize().to_hex().to_string()
        };
        writes::submit(
            &state2,
            Request {
                op: Op::DeleteAttachment {
                    path: a.path.clone(),
                    sha256: Some(a.sha256.clone()),
                },
                agent_id,
            },
            Idempotency { key: &key, op_hash },
        )
    })
    .await?;
    Ok(match submitted {
        Submitted::Receipt(receipt) => render(&state, &receipt)?,
        Submitted::Rendered(status, body) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            [("content-type", "application/json")],
            body,
        )
            .into_response(),
    })
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
        move |path: &str| {
            let file = path.rsplit('/').next().unwrap_or(path);
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
        move |path: &str| {
            Ok(match path.rsplit_once('/') {
                Some((folder, _)) => format!("{folder}/{new_name}"),
                None => new_name.clone(),
            })
        },
    )
    .await
}

/// Move or rename the attachment `name` names to the path `to` makes of its current one,
/// through the pipeline.
async fn relocate(
    state: Arc<State>,
    name: String,
    parts: Parts,
    sha256: Option<String>,
    agent_id: Option<String>,
    to: impl FnOnce(&str) -> Result<String, Error> + Send + 'static,
) -> ApiResult<Response> {
    let key = crate::api::writes::idempotency_key(&parts.headers)?;
    let agent_id = crate::api::writes::agent_id(agent_id)?;
    let state2 = state.clone();
    let submitted = blocking(move || {
        let a = crate::queries::attachments::find(&state2, &name, sha256.as_deref())?;
        let to = to(&a.path)?;
        let op_hash = {
            let mut h = blake3::Hasher::new();
            for part in ["MOVE /v1/attachments", &a.path, &a.sha256, &to, &agent_id] {
                h.update(part.as_bytes());
                h.update(&[0]);
            }
            h.finalize().to_hex().to_string()
        };
        writes::submit(
            &state2,
            Request {
                op: Op::MoveAttachment {
                    path: a.path.clone(),
                    to,
                    sha256: Some(a.sha256.clone()),
                },
                agent_id,
            },
            Idempotency { key: &key, op_hash },
        )
    })
    .await?;
    Ok(match submitted {
        Submitted::Receipt(receipt) if receipt.attachment.is_none() => {
            let (status, body) = crate::api::writes::render(&receipt, false);
            (
                StatusCode::from_u16(status).unwrap_or(StatusCode::ACCEPTED),
                [("content-type", "application/json")],
                body,
            )
                .into_response()
        }
        Submitted::Receipt(receipt) => render(&state, &receipt)?,
        Submitted::Rendered(status, body) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            [("content-type", "application/json")],
            body,
        )
            .into_response(),
    })
}

/// What the MCP `attachment_link` tool takes: which attachment, and for how long.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachmentLinkParams {
    /// A file name found anywhere in the vault.
    pub file_name: Option<String>,
    /// A vault-relative path (instead of `file_name`).
    pub path: Option<String>,
    /// With `file_name`, which of several files of that name.
    pub sha256: Option<String>,
    /// Seconds, clamped to 10..86400 (default 300).
    pub expires_in: Option<i64>,
}

/// A presigned GET link to an attachment (the MCP `attachment_link` tool): the bytes stay
/// an HTTP download, for the agent or for a person it hands the link to.
pub async fn attachment_link(
    state: Arc<State>,
    p: AttachmentLinkParams,
    base: String,
) -> Result<PresignResponse, Error> {
    let req = PresignRequest {
        file_name: p.file_name,
        path: p.path,
        sha256: p.sha256,
        method: Some("GET".into()),
        expires_in: p.expires_in,
    };
    presign_link(state, req, base, false).await
}

/// A presigned link's request.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PresignRequest {
    /// A file name found anywhere in the vault (GET), or the name a PUT creates in the
    /// attachment folder.
    pub file_name: Option<String>,
    /// A vault-relative path (instead of `file_name`).
    pub path: Option<String>,
    /// With `file_name`, which of several files of that name (GET).
    pub sha256: Option<String>,
    /// `GET` (default; reusable until it expires) or `PUT` (once; needs `notes.write`).
    pub method: Option<String>,
    /// Seconds, clamped to 10..86400 (default 300).
    pub expires_in: Option<i64>,
}

/// A presigned link.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PresignResponse {
    pub url: String,
    pub method: String,
    pub expires_at: String,
    /// The vault-relative path the link reads or creates.
    pub path: String,
}

/// What a path segment of a link escapes.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'?')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'\\');

/// Shortest and longest life of a presigned link, and its default.
pub const PRESIGN_MIN_SECS: i64 = 10;
pub const PRESIGN_MAX_SECS: i64 = 24 * 3600;
pub const PRESIGN_DEFAULT_SECS: i64 = 300;

/// The signature of a presigned link: keyed BLAKE3 over method, path, expiry and nonce.
pub fn signature(key: &[u8; 32], method: &str, path: &str, expires: i64, nonce: &str) -> String {
    let mut h = blake3::Hasher::new_keyed(key);
    for part in [method, path, &expires.to_string(), nonce] {
        h.update(part.as_bytes());
        h.update(&[0]);
    }
    h.finalize().to_hex().to_string()
}

/// Make a presigned link (both surfaces). `can_write`: the caller holds `notes.write`.
pub async fn presign_link(
    state: Arc<State>,
    req: PresignRequest,
    base: String,
    can_write: bool,
) -> Result<PresignResponse, Error> {
    let method = req.method.as_deref().unwrap_or("GET").to_ascii_uppercase();
    if method != "GET" && method != "PUT" {
        return Err(Error::invalid_field("method", "must be GET or PUT"));
    }
    let ttl = req
        .expires_in
        .unwrap_or(PRESIGN_DEFAULT_SECS)
        .clamp(PRESIGN_MIN_SECS, PRESIGN_MAX_SECS);
    let name = match (&req.file_name, &req.path) {
        (Some(n), None) | (None, Some(n)) if !n.is_empty() => n.clone(),
        _ => {
            return Err(Error::invalid_field(
                "file_name",
                "give exactly one of `file_name` and `path`",
            ))
        }
    };
    let state2 = state.clone();
    let path = if method == "GET" {
        let sha = req.sha256.clone();
        blocking(move || crate::queries::attachments::find(&state2, &name, sha.as_deref()))
            .await?
            .path
            .clone()
    } else {
        if !can_write {
            return Err(Error::new(
                Reason::PERMISSION_MISSING,
                "a presigned PUT link needs the notes.write permission",
            )
            .with_meta("scope", "notes.write"));
        }
        let (folder, file) = match name.rsplit_once('/') {
            Some((f, n)) => (f.to_string(), n.to_string()),
            None => (default_folder(&state), name.clone()),
        };
        let path = target_path(&state, &folder, &file)?;
        if state.paths.root.join(&path).exists() {
            return Err(Error::new(
                Reason::NAME_COLLISION,
                format!("{path:?} already exists"),
            ));
        }
        path
    };
    let expires = chrono::Utc::now().timestamp() + ttl;
    let nonce = if method == "PUT" {
        uuid::Uuid::new_v4().simple().to_string()
    } else {
        String::new()
    };
    let sig = signature(&state.presign_key, &method, &path, expires, &nonce);
    let encoded: Vec<String> = path
        .split('/')
        .map(|p| percent_encoding::utf8_percent_encode(p, SEGMENT).to_string())
        .collect();
    let mut url = format!(
        "{base}/v1/attachments/{}?expires={expires}&signature={sig}",
        encoded.join("/")
    );
    if !nonce.is_empty() {
        url.push_str(&format!("&nonce={nonce}"));
    }
    Ok(PresignResponse {
        url,
        method,
        expires_at: crate::clock::timestamp(
            chrono::DateTime::from_timestamp(expires, 0).unwrap_or_default(),
        ),
        path,
    })
}

/// Make a presigned link to read (GET) or create (PUT) an attachment without a bearer.
#[utoipa::path(
    post,
    path = "/v1/attachments:presign",
    operation_id = "presign_attachment",
    tag = "Attachments",
    request_body = PresignRequest,
    responses(
        (status = 200, description = "The link and its expiry.", body = PresignResponse),
        (status = 400, description = "Bad body.", body = ErrorEnvelope),
        (status = 403, description = "A PUT link without `notes.write`.", body = ErrorEnvelope),
        (status = 404, description = "No such attachment (GET).", body = ErrorEnvelope),
        (status = 409, description = "Ambiguous name (GET), or the path exists (PUT).", body = ErrorEnvelope),
    )
)]
pub async fn presign(
    state: Arc<State>,
    parts: Parts,
    bytes: axum::body::Bytes,
) -> ApiResult<Json<PresignResponse>> {
    let raw = crate::api::writes::json_value(&parts.headers, &bytes)?;
    let req: PresignRequest = crate::api::writes::parse_as(&raw)?;
    let credential = crate::api::credential(&parts.extensions)?;
    let can_write = auth::require(credential, Need::Permission(Permission::NotesWrite)).is_ok();
    let base = crate::api::oauth::public_base(&state.config, &parts.headers);
    Ok(Json(presign_link(state, req, base, can_write).await?))
}

/// A presigned request's check, in place of the bearer: `Ok(None)` when the request
/// carries no signature (the bearer decides), `Ok(Some(nonce))` for a good link (the
/// nonce of a PUT, spent now), else `AUTH_INVALID`.
pub fn verify_presigned(
    state: &State,
    method: &str,
    path: &str,
    query: Option<&str>,
) -> Result<Option<String>, Error> {
    let Some(query) = query else { return Ok(None) };
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let Some(sig) = get("signature") else {
        return Ok(None);
    };
    let invalid = |why: &str| {
        Error::new(
            Reason::AUTH_INVALID,
            format!("the presigned link is not valid: {why}"),
        )
    };
    let expires: i64 = get("expires")
        .and_then(|e| e.parse().ok())
        .ok_or_else(|| invalid("it has no expiry"))?;
    let nonce = get("nonce").unwrap_or("");
    let want = signature(&state.presign_key, method, path, expires, nonce);
    if !bool::from(subtle::ConstantTimeEq::ct_eq(
        want.as_bytes(),
        sig.as_bytes(),
    )) {
        return Err(invalid("its signature does not match"));
    }
    let now = chrono::Utc::now().timestamp();
    if expires < now {
        return Err(invalid("it expired").with_meta("expired_at", expires.to_string()));
    }
    if method == "PUT" {
        if nonce.is_empty() {
            return Err(invalid("a PUT link has a nonce"));
        }
        if !state.meta.use_nonce(nonce, expires, now)? {
            return Err(invalid("a PUT link works once, and this one was used"));
        }
        return Ok(Some(nonce.to_string()));
    }
    Ok(Some(String::new()))
}

/// Vary on nothing a shared cache could confuse: a presigned answer is private.
pub fn private(mut r: Response) -> Response {
    r.headers_mut().insert(
        "cache-control",
        HeaderValue::from_static("private, no-store"),
    );
    r
}
