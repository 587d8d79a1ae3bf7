//! The export archive as a streamed HTTP answer: `POST /v1/export` and the console's
//! export button send the same bytes, audited the same way.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{header, HeaderValue};
use axum::response::Response;

use crate::state::State;

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
    let name: String = crate::purge::vault_name(&state)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let date = chrono::Utc::now().format("%Y-%m-%d");
    let file = format!("notevault-{name}-{date}.tar.gz");
    tokio::task::spawn_blocking(move || {
        if history {
            // The history as recorded so far: commits still queued (the first start's
            // commit of the whole vault, say) are written first.
            state.history.flush(std::time::Duration::from_secs(60));
        }
        let mut writer = BodyWriter {
            tx: tx.clone(),
            buf: Vec::with_capacity(CHUNK),
        };
        let options = crate::export::Options { history };
        // A hosted vault's files are rows and blobs, not a folder.
        let written = match &state.shared {
            Some(shared) => (shared.export)(&options, &mut writer),
            None => crate::export::write_paths(&state.paths, &options, &mut writer),
        }
        .and_then(|manifest| writer.send().map(|()| manifest));
        match written {
            Ok(manifest) => {
                let counts = [
                    ("notes", manifest.notes as i64),
                    ("attachments", manifest.attachments as i64),
                    ("bytes", manifest.bytes as i64),
                    ("history", i64::from(history)),
                ];
                state.meta.note_audit(
                    &crate::storage::rows::AuditEvent::new(
                        crate::storage::rows::AuditKind::Exported,
                        actor,
                    )
                    .counts(&counts),
                );
            }
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
