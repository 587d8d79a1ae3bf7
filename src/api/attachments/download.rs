//! Download: `GET /v1/attachments/{file_name}` with `Range`, `ETag` and
//! `If-None-Match`, the bytes streamed from the file (a hosted vault's: from its blob
//! store).

use std::io::{Read, Seek};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::Response;
use futures::StreamExt;

use super::presigned::PRESIGN_PARAMS;
use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::error::{Error, Reason};
use crate::state::State;
use crate::surface::blocking;

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
                .map_err(Error::internal_cause)?);
        }
    }
    let size = a.size;
    let range = match parts.headers.get("range").and_then(|v| v.to_str().ok()) {
        Some(r) => parse_range(r, size)?,
        None => None,
    };
    let (start, len, status) = match range {
        Some((start, end)) => {
            base = base.header("content-range", format!("bytes {start}-{end}/{size}"));
            (start, end - start + 1, StatusCode::PARTIAL_CONTENT)
        }
        None => (0, size, StatusCode::OK),
    };
    let body = match state.shared.as_ref().and_then(|s| s.blobs.clone()) {
        // A hosted vault's bytes: the blob of their sha256, the range asked of the store.
        Some(blobs) => {
            let asked = range.map(|_| start..start + len);
            Body::from_stream(blobs.get(&state.vault_id, &a.sha256, asked).await?)
        }
        None => local_body(state.paths.root.join(&a.path), start, len).await?,
    };
    Ok(base
        .status(status)
        .header("content-type", &a.content_type)
        .header("content-length", len.to_string())
        .body(body)
        .map_err(Error::internal_cause)?)
}

/// Bytes read from a file at a time: large reads, few blocking-pool hops, and each
/// handed to hyper as it is (no copy on our side).
const READ_BYTES: usize = 2 * 1024 * 1024;

/// `len` bytes of the file at `abs` from `start`: read whole at once when they fit in
/// one read, else streamed by a blocking thread of their own that reads the next chunk
/// while hyper sends the last (two chunks in flight at most). Not a memory map: an
/// editor truncating the file meanwhile would kill the daemon (`SIGBUS`); not
/// `sendfile`: hyper writes from buffers only.
async fn local_body(abs: std::path::PathBuf, start: u64, len: u64) -> Result<Body, Error> {
    let first = len.min(READ_BYTES as u64);
    let (file, head) = blocking(move || {
        let mut file =
            std::fs::File::open(&abs).map_err(|e| Error::io(Reason::ATTACHMENT_NOT_FOUND, e))?;
        if start > 0 {
            file.seek(std::io::SeekFrom::Start(start))
                .map_err(Error::internal_cause)?;
        }
        let head = read_chunk(&mut file, first).map_err(Error::internal_cause)?;
        Ok((file, head))
    })
    .await?;
    if len <= first || (head.len() as u64) < first {
        return Ok(Body::from(head));
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(2);
    let mut left = len - first;
    tokio::task::spawn_blocking(move || {
        let mut file = file;
        while left > 0 {
            match read_chunk(&mut file, left.min(READ_BYTES as u64)) {
                // Shorter than it was listed (an editor truncated it): the body ends short.
                Ok(b) if b.is_empty() => break,
                Ok(b) => {
                    left -= b.len() as u64;
                    // The client went away: nothing more to read.
                    if tx.blocking_send(Ok(b)).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    break;
                }
            }
        }
    });
    let rest = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    Ok(Body::from_stream(
        futures::stream::once(async move { Ok(head) }).chain(rest),
    ))
}

/// Up to `n` bytes from the file's position (fewer at its end), in one buffer.
fn read_chunk(file: &mut std::fs::File, n: u64) -> std::io::Result<Bytes> {
    let mut buf = Vec::with_capacity(n as usize);
    file.take(n).read_to_end(&mut buf)?;
    Ok(Bytes::from(buf))
}

/// One `bytes=` range, as `(first, last)` inclusive; `None` for a header we do not
/// honour (several ranges, another unit: the whole file is answered, as RFC 9110
/// allows); `RANGE_NOT_SATISFIABLE` past the end.
pub(super) fn parse_range(header: &str, size: u64) -> Result<Option<(u64, u64)>, Error> {
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
