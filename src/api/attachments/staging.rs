//! An upload on its way in: streamed to one of our temp files in the vault while it is
//! hashed and counted, then handed to the write pipeline.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::response::Response;
use sha2::Digest;

use super::render;
use crate::error::{Error, Reason};
use crate::state::State;
use crate::storage::upload::HashedUpload;
use crate::surface::blocking;
use crate::vault::fsio;
use crate::vault::observe::{hex, SNIFF_BYTES};
use crate::writes::{self, Idempotency, Request};

/// A file being received: our temp file (a hosted vault's: an upload to its blob store,
/// and no temp file), its hash and size so far, its first bytes.
pub(super) struct Staged {
    pub(super) temp: std::path::PathBuf,
    sink: Sink,
    size: u64,
    head: Vec<u8>,
    /// The SHA-256 the client declared (`Content-Digest`), checked at the end.
    declared: Option<String>,
}

impl Staged {
    pub(super) fn open(
        state: &State,
        folder: Option<&str>,
        declared: Option<String>,
    ) -> Result<Self, Error> {
        if let Some(shared) = &state.shared {
            let blobs = shared.blobs.as_ref().ok_or_else(|| {
                Error::new(
                    Reason::BLOB_STORE_UNAVAILABLE,
                    "no blob store is configured",
                )
            })?;
            return Ok(Self {
                temp: std::path::PathBuf::new(),
                sink: Sink::Blob(HashedUpload::new(
                    blobs.begin(&state.vault_id, declared.as_deref()),
                )),
                size: 0,
                head: Vec::new(),
                declared,
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
            sink: Sink::File(TempWriter::start(file)),
            size: 0,
            head: Vec::new(),
            declared,
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
        match &mut self.sink {
            Sink::File(writer) => writer.push(chunk).await,
            Sink::Blob(upload) => upload.write(chunk).await,
        }
    }

    pub(super) async fn finish(self) -> Result<(std::path::PathBuf, String, u64, Vec<u8>), Error> {
        let declared = self.declared.as_deref();
        let sha = match self.sink {
            Sink::File(writer) => {
                let sha = hex(&writer.finish().await?);
                super::digest::check(declared, &sha)?;
                sha
            }
            // The bytes become the blob of their sha256 (one object per distinct bytes);
            // checked first, so bytes that are not what was declared never become one.
            Sink::Blob(upload) => {
                super::digest::check(declared, &upload.sha256())?;
                upload.finish().await?.sha256
            }
        };
        Ok((self.temp, sha, self.size, self.head))
    }
}

/// Where the bytes go: our temp file in the folder, or the blob store.
enum Sink {
    File(TempWriter),
    Blob(HashedUpload),
}

/// Bytes gathered before they go to the writer's thread: one `writev` of this much.
const BATCH_BYTES: usize = 1024 * 1024;
/// At most this many chunks in one `writev` (under the system's `IOV_MAX`).
const BATCH_CHUNKS: usize = 512;

/// The temp file written on a blocking thread of its own: the chunks that arrive are
/// gathered into batches of [`BATCH_BYTES`]; the thread hashes each (SHA-256) and writes
/// it with one `writev` while the next batch arrives, and starts the disk's writeback as
/// it goes, so the one fsync at the end waits for little. The bytes are hashed once and
/// never copied on our side.
struct TempWriter {
    batch: Vec<Bytes>,
    batched: usize,
    to_thread: Option<tokio::sync::mpsc::Sender<Job>>,
    thread: tokio::task::JoinHandle<Result<[u8; 32], Error>>,
}

enum Job {
    Write(Vec<Bytes>),
    /// Every batch was sent: fsync the file and answer its hash.
    Finish,
}

impl TempWriter {
    fn start(file: std::fs::File) -> Self {
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        Self {
            batch: Vec::new(),
            batched: 0,
            to_thread: Some(tx),
            thread: tokio::task::spawn_blocking(move || write_temp(file, rx)),
        }
    }

    async fn push(&mut self, chunk: Bytes) -> Result<(), Error> {
        // An empty chunk (an empty part) writes nothing: `writev` of it would answer 0.
        if chunk.is_empty() {
            return Ok(());
        }
        self.batched += chunk.len();
        self.batch.push(chunk);
        if self.batched >= BATCH_BYTES || self.batch.len() >= BATCH_CHUNKS {
            let batch = std::mem::take(&mut self.batch);
            self.batched = 0;
            self.send(Job::Write(batch)).await?;
        }
        Ok(())
    }

    async fn send(&mut self, job: Job) -> Result<(), Error> {
        let sent = match &self.to_thread {
            Some(tx) => tx.send(job).await.is_ok(),
            None => false,
        };
        if sent {
            return Ok(());
        }
        // The thread stopped on an error: that error is the answer.
        self.to_thread = None;
        match (&mut self.thread).await {
            Ok(Err(e)) => Err(e),
            _ => Err(Error::internal("the upload's writer stopped")),
        }
    }

    async fn finish(mut self) -> Result<[u8; 32], Error> {
        if !self.batch.is_empty() {
            let batch = std::mem::take(&mut self.batch);
            self.send(Job::Write(batch)).await?;
        }
        self.send(Job::Finish).await?;
        self.to_thread = None;
        match (&mut self.thread).await {
            Ok(done) => done,
            Err(_) => Err(Error::internal("the upload's writer failed")),
        }
    }
}

/// The writer's thread: each batch hashed and written; on `Finish`, the file fsynced.
/// A channel closed without `Finish` is an upload abandoned: nothing is synced.
fn write_temp(
    mut file: std::fs::File,
    mut jobs: tokio::sync::mpsc::Receiver<Job>,
) -> Result<[u8; 32], Error> {
    let stored = |e: std::io::Error| {
        let message = format!("the upload could not be stored: {e}");
        if crate::error::storage_full(&e) {
            Error::new(Reason::INSUFFICIENT_STORAGE, message)
        } else {
            Error::new(Reason::BLOB_STORE_UNAVAILABLE, message)
        }
    };
    let mut hasher = sha2::Sha256::new();
    let mut written = 0u64;
    while let Some(job) = jobs.blocking_recv() {
        match job {
            Job::Write(batch) => {
                for chunk in &batch {
                    hasher.update(chunk);
                }
                write_all_chunks(&mut file, &batch).map_err(stored)?;
                let len: usize = batch.iter().map(Bytes::len).sum();
                start_writeback(&file, written, len as u64);
                written += len as u64;
            }
            Job::Finish => {
                file.sync_all().map_err(|e| {
                    Error::io_write(&e, format!("the upload could not be stored: {e}"))
                })?;
                return Ok(hasher.finalize().into());
            }
        }
    }
    Err(Error::internal("the upload was abandoned"))
}

/// One `writev` for the batch (more when the kernel takes part of it).
fn write_all_chunks(file: &mut std::fs::File, chunks: &[Bytes]) -> std::io::Result<()> {
    use std::io::{IoSlice, Write};
    let mut slices: Vec<IoSlice<'_>> = chunks.iter().map(|c| IoSlice::new(c)).collect();
    let mut left = &mut slices[..];
    while !left.is_empty() {
        match file.write_vectored(left) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut left, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Ask the kernel to start writing these bytes to the disk now (Linux), so the fsync at
/// the end finds most of them there already; elsewhere the fsync does it all.
fn start_writeback(file: &std::fs::File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain syscall on an open descriptor we own; it reads no memory of ours.
        unsafe {
            libc::sync_file_range(
                file.as_raw_fd(),
                offset as libc::off64_t,
                len as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
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
