//! One upload to the S3 blob store (`S3Blobs`): held in memory up to
//! [`MULTIPART_ABOVE`] and sent as one `PUT` at the end; past that a multipart upload in
//! parts of that size, with a marker `uploads/<id>.multipart` naming it while it is under
//! way, so the collector can abort the parts of one a crash cut off. Dropped unfinished,
//! its multipart upload is aborted.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::FutureExt;
use object_store::aws::AmazonS3;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{MultipartId, ObjectStore, PutPayload};

use super::s3_errors::{blob_error, classify};
use super::upload::BlobUpload;
use crate::error::{Error, Result};

/// An upload larger than this goes up as a multipart upload, in parts of this size;
/// smaller ones are one `PUT` (held in memory until then, never more than this).
pub const MULTIPART_ABOVE: usize = 8 * 1024 * 1024;

pub(super) struct S3Upload {
    store: Arc<AmazonS3>,
    /// `uploads/<id>`: the marker's name, and a multipart upload's key unless the
    /// upload's blob was declared.
    staging: Path,
    /// `.../blobs/` (the sha256 is appended when known).
    blobs: Path,
    target: Option<Target>,
    url: String,
    bucket_seen: Arc<AtomicBool>,
    /// Bytes not sent yet: never more than [`MULTIPART_ABOVE`] plus a chunk.
    buffer: BytesMut,
    /// Past [`MULTIPART_ABOVE`]: the multipart upload, its parts in flight (in order)
    /// and those sent.
    multipart: Option<Multipart>,
    finished: bool,
}

/// What an upload becomes, when known up front.
pub(super) enum Target {
    /// The blob of a declared sha256: a multipart upload goes there directly.
    Declared(Path),
    /// An export archive: staged, then copied, as S3 dates an object a multipart upload
    /// completes by the upload's start, and an export is kept counting from its date.
    Export(Path),
}

struct Multipart {
    /// Where the parts go: a declared blob, else `staging`.
    key: Path,
    id: MultipartId,
    in_flight: VecDeque<tokio::task::JoinHandle<object_store::Result<PartId>>>,
    sent: Vec<PartId>,
}

/// Parts sent at once: two keep the link busy while one is acknowledged.
const PARTS_IN_FLIGHT: usize = 2;

impl S3Upload {
    pub(super) fn new(
        store: Arc<AmazonS3>,
        staging: Path,
        blobs: Path,
        target: Option<Target>,
        url: String,
        bucket_seen: Arc<AtomicBool>,
    ) -> Self {
        Self {
            store,
            staging,
            blobs,
            target,
            url,
            bucket_seen,
            buffer: BytesMut::new(),
            multipart: None,
            finished: false,
        }
    }

    /// Send `part` as the next part, starting the multipart upload (and leaving its
    /// marker, so a crash's parts can be aborted by the collector) on the first.
    async fn send(&mut self, part: Bytes) -> Result<()> {
        if self.multipart.is_none() {
            let key = match &self.target {
                Some(Target::Declared(blob)) => blob.clone(),
                _ => self.staging.clone(),
            };
            let id = self
                .store
                .create_multipart(&key)
                .await
                .map_err(|e| blob_error(&self.url, e))?;
            let named = if key == self.staging {
                id.clone()
            } else {
                format!("{id}\n{key}")
            };
            let marked = self
                .store
                .put(&marker(&self.staging), PutPayload::from(named))
                .await;
            if let Err(e) = marked {
                // No marker, so no collector would find it: abort it now.
                let _ = self.store.abort_multipart(&key, &id).await;
                return Err(blob_error(&self.url, e));
            }
            self.multipart = Some(Multipart {
                key,
                id,
                in_flight: VecDeque::new(),
                sent: Vec::new(),
            });
        }
        let Some(multipart) = self.multipart.as_mut() else {
            return Err(Error::internal("a multipart upload was not started"));
        };
        if multipart.in_flight.len() >= PARTS_IN_FLIGHT {
            let oldest = multipart.in_flight.pop_front();
            multipart.sent.push(joined(&self.url, oldest).await?);
        }
        let (store, path, id) = (
            self.store.clone(),
            multipart.key.clone(),
            multipart.id.clone(),
        );
        let index = multipart.sent.len() + multipart.in_flight.len();
        multipart.in_flight.push_back(tokio::spawn(async move {
            store.put_part(&path, &id, index, part.into()).await
        }));
        Ok(())
    }
}

/// The part id a part's task answered.
async fn joined(
    url: &str,
    task: Option<tokio::task::JoinHandle<object_store::Result<PartId>>>,
) -> Result<PartId> {
    let task = task.ok_or_else(|| Error::internal("no part in flight"))?;
    match task.await {
        Ok(part) => part.map_err(|e| blob_error(url, e)),
        Err(e) => Err(Error::internal(format!("a part upload ended: {e}"))),
    }
}

/// The object naming the multipart upload of `staging` while it is under way.
pub(super) fn marker(staging: &Path) -> Path {
    Path::from(format!("{}{MARKER}", staging.as_ref()))
}

pub(super) const MARKER: &str = ".multipart";

/// The upload id and key a marker's `text` names: the id alone (the key is `staging`,
/// beside the marker), or the id and, on the next line, a key under `own` (the vault's
/// folder). `None`: a key outside the vault, never touched.
pub(super) fn marker_names(text: &str, staging: &Path, own: &Path) -> Option<(String, Path)> {
    match text.split_once('\n') {
        None => Some((text.to_string(), staging.clone())),
        Some((id, key)) => {
            let key = Path::parse(key).ok()?;
            key.prefix_matches(own).then(|| (id.to_string(), key))
        }
    }
}

impl BlobUpload for S3Upload {
    fn write(&mut self, chunk: Bytes) -> BoxFuture<'_, Result<()>> {
        async move {
            if !self.bucket_seen.load(Ordering::Relaxed) {
                // A listing is refused with `NoSuchBucket` where a `PUT` may not be.
                self.store
                    .list_with_delimiter(Some(&self.blobs))
                    .await
                    .map_err(|e| match e {
                        // A listing finds no object as an empty list: only the bucket
                        // can be missing.
                        object_store::Error::NotFound { .. } => classify(&self.url, "NoSuchBucket"),
                        e => blob_error(&self.url, e),
                    })?;
                self.bucket_seen.store(true, Ordering::Relaxed);
            }
            if self.finished {
                return Err(Error::internal("an upload was written after it ended"));
            }
            self.buffer.extend_from_slice(&chunk);
            while self.buffer.len() > MULTIPART_ABOVE {
                let part = self.buffer.split_to(MULTIPART_ABOVE).freeze();
                self.send(part).await?;
            }
            Ok(())
        }
        .boxed()
    }

    fn finish<'a>(mut self: Box<Self>, sha256: &'a str) -> BoxFuture<'a, Result<()>> {
        async move {
            let blob = Path::from(format!("{}/{sha256}", self.blobs.as_ref()));
            let target = match &self.target {
                // A blob named up front holds exactly the bytes of its name: bytes of
                // another hash are never completed there (dropped, the upload aborts).
                Some(Target::Declared(declared)) if *declared != blob => {
                    return Err(Error::internal(format!(
                        "an upload declared as {declared} hashed to {sha256}"
                    )));
                }
                Some(Target::Export(export)) => export.clone(),
                Some(Target::Declared(_)) | None => blob,
            };
            let rest = std::mem::take(&mut self.buffer).freeze();
            let Some(_) = &self.multipart else {
                // Small: one `PUT` straight to its name, no staged copy.
                self.store
                    .put(&target, rest.into())
                    .await
                    .map_err(|e| blob_error(&self.url, e))?;
                self.finished = true;
                return Ok(());
            };
            if !rest.is_empty() {
                self.send(rest).await?;
            }
            let Some(multipart) = self.multipart.as_mut() else {
                return Err(Error::internal("a multipart upload was not started"));
            };
            while let Some(task) = multipart.in_flight.pop_front() {
                multipart.sent.push(joined(&self.url, Some(task)).await?);
            }
            let parts = std::mem::take(&mut multipart.sent);
            self.store
                .complete_multipart(&multipart.key, &multipart.id, parts)
                .await
                .map_err(|e| blob_error(&self.url, e))?;
            self.finished = true;
            if multipart.key == target {
                let _ = self.store.delete(&marker(&self.staging)).await;
                return Ok(());
            }
            let copied = self.store.copy(&self.staging, &target).await;
            // The staged object and the marker go either way; a copy that failed is
            // retried whole (and what is left, the collector takes).
            let _ = self.store.delete(&self.staging).await;
            let _ = self.store.delete(&marker(&self.staging)).await;
            copied.map_err(|e| blob_error(&self.url, e))
        }
        .boxed()
    }
}

impl Drop for S3Upload {
    fn drop(&mut self) {
        // Unfinished: abort the multipart upload, so its parts do not linger.
        let Some(multipart) = self.multipart.take().filter(|_| !self.finished) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (store, staging) = (self.store.clone(), self.staging.clone());
        runtime.spawn(async move {
            // Parts under way end first: one cancelled mid-body may still be written by
            // the store after the abort, and be left behind.
            for task in multipart.in_flight {
                let _ = task.await;
            }
            if store
                .abort_multipart(&multipart.key, &multipart.id)
                .await
                .is_ok()
            {
                let _ = store.delete(&marker(&staging)).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_names_its_staged_object_or_a_key_of_its_own_vault_only() {
        let staging = Path::from("p/vaults/v1/uploads/u1");
        let own = Path::from("p/vaults/v1");
        // The form written before uploads could go straight to their blob.
        assert_eq!(
            marker_names("id-1", &staging, &own),
            Some(("id-1".to_string(), staging.clone()))
        );
        assert_eq!(
            marker_names("id-2\np/vaults/v1/blobs/abc", &staging, &own),
            Some(("id-2".to_string(), Path::from("p/vaults/v1/blobs/abc")))
        );
        for foreign in [
            "id-3\np/vaults/v2/blobs/abc",
            "id-3\np/vaults/v10/blobs/abc",
            "id-3\nq/vaults/v1/blobs/abc",
            "id-3\np/vaults/v1/../v2/blobs/abc",
        ] {
            assert_eq!(marker_names(foreign, &staging, &own), None, "{foreign}");
        }
    }
}
