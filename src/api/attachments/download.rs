//! Download: `GET /v1/attachments/{file_name}` with `Range`, `ETag` and
//! `If-None-Match`, the bytes streamed from the file (a hosted vault's: from its blob
//! store).

use std::sync::Arc;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::Response;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

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
        None => {
            let abs = state.paths.root.join(&a.path);
            let mut file = tokio::fs::File::open(&abs)
                .await
                .map_err(|e| Error::io(Reason::ATTACHMENT_NOT_FOUND, e))?;
            if start > 0 {
                file.seek(std::io::SeekFrom::Start(start))
                    .await
                    .map_err(Error::internal_cause)?;
            }
            Body::from_stream(chunks(file.take(len)))
        }
    };
    Ok(base
        .status(status)
        .header("content-type", &a.content_type)
        .header("content-length", len.to_string())
        .body(body)
        .map_err(Error::internal_cause)?)
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
