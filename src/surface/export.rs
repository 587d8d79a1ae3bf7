//! The export archive: `POST /v1/export` and the console's export button send the same
//! bytes, audited the same way. Streamed as the answer; or, for a hosted vault with a blob
//! store, written whole to the store (`exports/<uuid>.tar.gz`) and handed out as a link
//! (the store's own with `blob_public_endpoint`, else the instance's, which any instance
//! serves).

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Reason};
use crate::state::State;
use crate::storage::blobs::EXPORT_KEEP_SECS;
use crate::storage::upload::{HashedUpload, Uploaded};
use crate::surface::attachments::PRESIGN_DEFAULT_SECS;

// A link outlives no archive: the collector keeps one its link's life and a margin.
const _: () = assert!(EXPORT_KEEP_SECS as i64 >= PRESIGN_DEFAULT_SECS + 600);

/// A `Write` that hands what is written, in chunks of 64 KiB, to a response body being
/// sent (the archive is written on a blocking thread while it streams). A client that
/// went away ends the writing (`BrokenPipe`).
struct BodyWriter {
    tx: tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
    buf: Vec<u8>,
}

const CHUNK: usize = 64 * 1024;

impl BodyWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away")
        })
    }
}

impl std::io::Write for BodyWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

/// The export as a streamed response: `application/gzip`, a dated file name, written by
/// `export::write_paths` on a blocking thread. `actor` is who asked (for the audit row,
/// appended once the archive is whole). An error while writing cuts the body (the client
/// sees a broken transfer, never a truncated archive passed off as whole).
pub fn export_response(state: Arc<State>, history: bool, actor: &'static str) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(4);
    let file = file_name(&state, chrono::Utc::now());
    tokio::task::spawn_blocking(move || {
        let mut writer = BodyWriter {
            tx: tx.clone(),
            buf: Vec::with_capacity(CHUNK),
        };
        match write_archive(&state, history, &mut writer) {
            Ok(manifest) => audit(&state, &manifest, history, actor),
            Err(e) => {
                tracing::warn!(error = %e, "an export was cut");
                let _ = tx.blocking_send(Err(e));
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let mut response = Response::new(axum::body::Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/gzip"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{file}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    response
}

/// The archive's file name: `notevault-<vault>-<date>.tar.gz`, the date `at`'s (UTC).
pub fn file_name(state: &State, at: chrono::DateTime<chrono::Utc>) -> String {
    let name: String = crate::purge::vault_name(state)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("notevault-{name}-{}.tar.gz", at.format("%Y-%m-%d"))
}

/// The archive written to `writer` (flushed), on a blocking thread.
fn write_archive(
    state: &State,
    history: bool,
    writer: &mut BodyWriter,
) -> std::io::Result<crate::export::Manifest> {
    if history {
        // The history as recorded so far: commits still queued (the first start's
        // commit of the whole vault, say) are written first.
        state.history.flush(std::time::Duration::from_secs(60));
    }
    let options = crate::export::Options { history };
    // A hosted vault's files are rows and blobs, not a folder.
    match &state.shared {
        Some(shared) => (shared.export)(&options, &mut *writer),
        None => crate::export::write_paths(&state.paths, &options, &mut *writer),
    }
    .and_then(|manifest| writer.send().map(|()| manifest))
}

/// The `Exported` audit row of a whole archive.
fn audit(state: &State, manifest: &crate::export::Manifest, history: bool, actor: &str) {
    let counts = [
        ("notes", manifest.notes as i64),
        ("attachments", manifest.attachments as i64),
        ("bytes", manifest.bytes as i64),
        ("history", i64::from(history)),
    ];
    state.meta.note_audit(
        &crate::storage::rows::AuditEvent::new(crate::storage::rows::AuditKind::Exported, actor)
            .counts(&counts),
    );
}

/// An export written to the blob store, and the link that reads it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ExportLink {
    /// Where to GET the archive: the blob store's SigV4 link (`blob_public_endpoint`
    /// set), else this service's own signed link (any instance serves it).
    pub url: String,
    /// Always `GET`.
    pub method: String,
    /// RFC 3339: the link's expiry.
    pub expires_at: String,
    /// The archive's bytes.
    pub size: u64,
    /// SHA-256 (hex) of the archive.
    pub sha256: String,
    /// `notevault-<vault>-<date>.tar.gz`.
    pub name: String,
}

/// What an export answers: the archive streamed, or (a hosted vault with a blob store)
/// a link to it in the store.
pub enum Exported {
    Streamed(Response),
    Stored(ExportLink),
}

/// The export of `state` for `actor`; `base`: this service's public URL (for its own
/// links). A hosted vault with a blob store has its archive written whole to the store
/// before the answer: a store fault is `BLOB_STORE_UNAVAILABLE` (`Retry-After`), its
/// upload aborted, no audit row.
pub async fn export(
    state: Arc<State>,
    history: bool,
    actor: &'static str,
    base: String,
) -> Result<Exported, Error> {
    let Some(blobs) = state.shared.as_ref().and_then(|s| s.blobs.clone()) else {
        return Ok(Exported::Streamed(export_response(state, history, actor)));
    };
    let made = uuid::Uuid::now_v7();
    let object = format!("{made}.tar.gz");
    let mut upload = HashedUpload::new(blobs.begin_export(&state.vault_id, &object));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(4);
    let state2 = state.clone();
    let writing = tokio::task::spawn_blocking(move || {
        let mut writer = BodyWriter {
            tx,
            buf: Vec::with_capacity(CHUNK),
        };
        write_archive(&state2, history, &mut writer)
    });
    while let Some(Ok(chunk)) = rx.recv().await {
        if let Err(e) = upload.write(chunk).await {
            // The writer sees the channel closed and stops; the upload, dropped, aborts.
            drop(rx);
            let _ = writing.await;
            return Err(e);
        }
    }
    let manifest = writing
        .await
        .map_err(|e| Error::internal(format!("the export stopped: {e}")))?
        .map_err(export_error)?;
    let Uploaded { sha256, size } = upload.finish().await?;
    let state2 = state.clone();
    crate::surface::blocking(move || {
        audit(&state2, &manifest, history, actor);
        Ok(())
    })
    .await?;
    let name = file_name(&state, chrono::Utc::now());
    let expires = chrono::Utc::now().timestamp() + PRESIGN_DEFAULT_SECS;
    let links = state.shared.as_ref().and_then(|s| s.links.clone());
    let url = match links {
        Some(links) => links.export_url(
            &state.vault_id,
            &object,
            std::time::Duration::from_secs(PRESIGN_DEFAULT_SECS as u64),
            &format!("attachment; filename=\"{name}\""),
        )?,
        None => {
            let signed = link_path(&object);
            let sig =
                crate::auth::presigned::signature(&state.presign_key, "GET", &signed, expires, "");
            format!(
                "{base}{signed}?vault={}&expires={expires}&signature={sig}",
                state.vault_id
            )
        }
    };
    Ok(Exported::Stored(ExportLink {
        url,
        method: "GET".into(),
        expires_at: crate::clock::timestamp(
            chrono::DateTime::from_timestamp(expires, 0).unwrap_or_default(),
        ),
        size,
        sha256,
        name,
    }))
}

/// The path of the instance's link to the export `object`, which its signature covers:
/// it starts with `/`, so no attachment's path (always vault-relative) signs the same.
pub fn link_path(object: &str) -> String {
    format!("/v1/exports/{object}")
}

/// A failure of the archive's writing as the reason table says: the store's or the
/// database's own error when it carried one, else `BLOB_STORE_UNAVAILABLE` (what the
/// writing reads and writes beside the database is the store).
fn export_error(e: std::io::Error) -> Error {
    match e.get_ref().and_then(|i| i.downcast_ref::<Error>()) {
        Some(inner) => inner.clone(),
        None => Error::new(
            Reason::BLOB_STORE_UNAVAILABLE,
            format!("the export could not be written to the blob store: {e}"),
        )
        .with_retry_after(crate::storage::blobs::RETRY_AFTER_SECONDS),
    }
}
