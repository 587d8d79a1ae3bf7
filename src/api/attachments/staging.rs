//! An upload on its way in: streamed to one of our temp files in the vault while it is
//! hashed and counted, then handed to the write pipeline.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::response::Response;
use sha2::Digest;
use tokio::io::AsyncWriteExt;

use super::render;
use crate::error::{Error, Reason};
use crate::state::State;
use crate::storage::blobs::BlobUpload;
use crate::surface::blocking;
use crate::vault::fsio;
use crate::vault::observe::{hex, SNIFF_BYTES};
use crate::writes::{self, Idempotency, Request};

/// A file being received: our temp file (a hosted vault's: an upload to its blob store,
/// and no temp file), its hash and size so far, its first bytes.
pub(super) struct Staged {
    pub(super) temp: std::path::PathBuf,
    sink: Sink,
    hasher: sha2::Sha256,
    size: u64,
    head: Vec<u8>,
}

impl Staged {
    pub(super) fn open(state: &State, folder: Option<&str>) -> Result<Self, Error> {
        if let Some(shared) = &state.shared {
            let blobs = shared.blobs.as_ref().ok_or_else(|| {
                Error::new(
                    Reason::BLOB_STORE_UNAVAILABLE,
                    "no blob store is configured",
                )
            })?;
            return Ok(Self {
                temp: std::path::PathBuf::new(),
                sink: Sink::Blob(blobs.begin(&state.vault_id)),
                hasher: sha2::Sha256::new(),
                size: 0,
                head: Vec::new(),
            });
        }
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
            sink: Sink::File(tokio::fs::File::from_std(file)),
            hasher: sha2::Sha256::new(),
            size: 0,
            head: Vec::new(),
        })
    }

    pub(super) async fn push(&mut self, chunk: Bytes, cap: u64) -> Result<(), Error> {
        self.size += chunk.len() as u64;
        if self.size > cap {
            return Err(too_large(cap));
        }
        if self.head.len() < SNIFF_BYTES {
            let take = (SNIFF_BYTES - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
        }
        self.hasher.update(&chunk);
        let file = match &mut self.sink {
            Sink::File(file) => file,
            Sink::Blob(upload) => return upload.write(chunk).await,
        };
        file.write_all(&chunk).await.map_err(|e| {
            let message = format!("the upload could not be stored: {e}");
            if crate::error::storage_full(&e) {
                Error::new(Reason::INSUFFICIENT_STORAGE, message)
            } else {
                Error::new(Reason::BLOB_STORE_UNAVAILABLE, message)
            }
        })
    }

    pub(super) async fn finish(self) -> Result<(std::path::PathBuf, String, u64, Vec<u8>), Error> {
        let failed =
            |e: std::io::Error| Error::io_write(&e, format!("the upload could not be stored: {e}"));
        let sha = hex(&self.hasher.finalize());
        match self.sink {
            Sink::File(mut file) => {
                file.flush().await.map_err(failed)?;
                file.sync_all().await.map_err(failed)?;
            }
            // The bytes become the blob of their sha256 (one object per distinct bytes).
            Sink::Blob(upload) => upload.finish(&sha).await?,
        }
        Ok((self.temp, sha, self.size, self.head))
    }
}

/// Where the bytes go: our temp file in the folder, or the blob store.
enum Sink {
    File(tokio::fs::File),
    Blob(Box<dyn BlobUpload>),
}

fn too_large(cap: u64) -> Error {
    Error::new(
        Reason::PAYLOAD_TOO_LARGE,
        format!("the upload is over the byte cap of {cap} bytes"),
    )
    .with_meta("max_upload_bytes", cap.to_string())
}

/// Removes the temp file unless it was handed on.
pub(super) struct TempGuard(pub(super) Option<std::path::PathBuf>);

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take().filter(|p| !p.as_os_str().is_empty()) {
            fsio::discard_temp(&p);
        }
    }
}

/// `Content-Length` past the cap (plus room for the multipart framing): refused before
/// a byte of the body is read.
pub(super) fn check_declared_length(
    headers: &HeaderMap,
    cap: u64,
    slack: u64,
) -> Result<(), Error> {
    let declared = headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > cap + slack) {
        return Err(too_large(cap));
    }
    Ok(())
}

/// A received upload, handed to the pipeline.
pub(super) struct Received {
    pub(super) temp: std::path::PathBuf,
    pub(super) path: String,
    pub(super) sha256: String,
    pub(super) size: u64,
    pub(super) content_type: String,
    pub(super) agent_id: String,
}

pub(super) async fn submit_upload(
    state: Arc<State>,
    key: String,
    route: &str,
    r: Received,
) -> Result<Response, Error> {
    // A hosted upload has no temp file: its bytes are the blob of its sha256.
    let staged = if r.temp.as_os_str().is_empty() {
        String::new()
    } else {
        r.temp
            .strip_prefix(&state.paths.root)
            .map_err(Error::internal_cause)?
            .to_string_lossy()
            .into_owned()
    };
    // What an older version bound the key to.
    let legacy = {
        let mut h = blake3::Hasher::new();
        for part in [route, &r.path, &r.sha256, &r.agent_id] {
            h.update(part.as_bytes());
            h.update(&[0]);
        }
        h.finalize().to_hex().to_string()
    };
    let request = Request::put_attachment(
        r.path,
        staged,
        r.sha256,
        r.size,
        r.content_type,
        Some(r.agent_id),
    )?;
    let temp = r.temp;
    let state2 = state.clone();
    let submitted = blocking(move || {
        let out = writes::submit(
            &state2,
            request,
            Idempotency {
                key: &key,
                legacy: Some(legacy),
            },
        );
        // A replay, or a refusal before the file step: the staged bytes are not needed.
        if !temp.as_os_str().is_empty() {
            fsio::discard_temp(&temp);
        }
        out
    })
    .await?;
    render(&state, &submitted)
}
