//! The attachment-bytes half of the storage seam, for a vault with no folder (hosted
//! mode): an object store, through Apache Arrow's `object_store` (S3 and the stores
//! speaking its protocol: MinIO, Garage, R2, `s3s-fs`).
//!
//! Bytes are content-addressed: `<prefix>/vaults/<vault_id>/blobs/<sha256>`, so a
//! rename, a move or a delete changes rows only, and the same bytes uploaded twice are
//! one object. An upload is streamed under `<prefix>/vaults/<vault_id>/uploads/<id>`
//! (one `PUT` up to [`MULTIPART_ABOVE`], a multipart upload past it: an upload cut off
//! is never a visible object), then copied to its sha256 once the caller has hashed it.
//!
//! What a caller may count on: every failure is an `Error` with `BLOB_STORE_UNAVAILABLE`
//! (`Retry-After` when the store did not answer) naming what to fix, or
//! `ATTACHMENT_NOT_FOUND`; nothing waits on a dead store longer than a few seconds.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectStore, RetryConfig};

use crate::error::{Error, Reason, Result};

/// An upload larger than this goes up as a multipart upload, in parts of this size;
/// smaller ones are one `PUT` (held in memory until then, never more than this).
pub const MULTIPART_ABOVE: usize = 8 * 1024 * 1024;

/// Seconds a client waits before retrying when the store did not answer.
pub const RETRY_AFTER_SECONDS: u64 = 2;

/// A vault's attachment bytes.
pub trait BlobStore: Send + Sync {
    /// Start an upload for `vault`; its bytes are visible only once it is finished.
    fn begin(&self, vault: &str) -> Box<dyn BlobUpload>;

    /// The bytes of `sha256` (`range`: only those), streamed.
    fn get<'a>(
        &'a self,
        vault: &'a str,
        sha256: &'a str,
        range: Option<Range<u64>>,
    ) -> BoxFuture<'a, Result<BoxStream<'static, std::io::Result<Bytes>>>>;

    /// The size of the blob `sha256`, `None` when there is none.
    fn head<'a>(&'a self, vault: &'a str, sha256: &'a str) -> BoxFuture<'a, Result<Option<u64>>>;

    /// Remove the blob `sha256` (nothing there is no error).
    fn delete<'a>(&'a self, vault: &'a str, sha256: &'a str) -> BoxFuture<'a, Result<()>>;

    /// Where the store is, for messages (`s3://bucket/prefix`).
    fn describe(&self) -> String;
}

/// An upload under way. Dropped unfinished, it is aborted.
pub trait BlobUpload: Send {
    /// Add the next bytes.
    fn write(&mut self, chunk: Bytes) -> BoxFuture<'_, Result<()>>;

    /// Finish: the bytes become the blob `sha256` (the hash of what was written, which
    /// the caller computed while streaming).
    fn finish<'a>(self: Box<Self>, sha256: &'a str) -> BoxFuture<'a, Result<()>>;
}

/// A blob store on S3 (or a store speaking its protocol).
pub struct S3Blobs {
    store: Arc<dyn ObjectStore>,
    url: String,
    prefix: String,
    /// The bucket was seen to exist (checked before the first upload: some stores make
    /// a missing bucket on a `PUT` rather than refuse it).
    bucket_seen: Arc<AtomicBool>,
}

/// The settings of an S3 store beside its URL: what `AmazonS3Builder::from_env` reads
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`,
/// `AWS_ALLOW_HTTP`), as `(key, value)` pairs handed over by `config`.
pub type S3Settings = Vec<(String, String)>;

impl S3Blobs {
    /// The store at `url` (`s3://bucket/prefix`). Path-style requests (self-hosted
    /// stores have no per-bucket host names); short timeouts and one retry, so a dead
    /// store is a quick `BLOB_STORE_UNAVAILABLE`.
    pub fn open(url: &str, settings: &S3Settings) -> Result<Self> {
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| unconfigured(url, "it is not s3://BUCKET[/PREFIX]"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(unconfigured(url, "it names no bucket"));
        }
        let prefix = prefix.trim_matches('/').to_string();
        let mut builder = AmazonS3Builder::new();
        for (key, value) in settings {
            let Ok(key) = key.to_ascii_lowercase().parse() else {
                continue;
            };
            builder = builder.with_config(key, value);
        }
        let allow_http = settings
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("AWS_ALLOW_HTTP") && v.trim() == "true");
        let store = builder
            .with_bucket_name(bucket)
            .with_virtual_hosted_style_request(false)
            .with_client_options(
                ClientOptions::new()
                    .with_allow_http(allow_http)
                    .with_connect_timeout(Duration::from_secs(1))
                    .with_timeout(Duration::from_secs(30)),
            )
            .with_retry(RetryConfig {
                backoff: object_store::BackoffConfig {
                    init_backoff: Duration::from_millis(50),
                    max_backoff: Duration::from_millis(200),
                    base: 2.0,
                },
                max_retries: 1,
                retry_timeout: Duration::from_secs(2),
            })
            .build()
            .map_err(|e| unconfigured(url, &e.to_string()))?;
        Ok(Self {
            store: Arc::new(store),
            url: url.to_string(),
            prefix,
            bucket_seen: Arc::new(AtomicBool::new(false)),
        })
    }

    fn path(&self, vault: &str, kind: &str, name: &str) -> Path {
        let rel = format!("vaults/{vault}/{kind}/{name}");
        if self.prefix.is_empty() {
            Path::from(rel)
        } else {
            Path::from(format!("{}/{rel}", self.prefix))
        }
    }
}

impl BlobStore for S3Blobs {
    fn begin(&self, vault: &str) -> Box<dyn BlobUpload> {
        let staging = self.path(vault, "uploads", &uuid::Uuid::now_v7().to_string());
        let blobs = self.path(vault, "blobs", "");
        Box::new(S3Upload {
            writer: Some(BufWriter::with_capacity(
                self.store.clone(),
                staging.clone(),
                MULTIPART_ABOVE,
            )),
            store: self.store.clone(),
            staging,
            blobs,
            url: self.url.clone(),
            bucket_seen: self.bucket_seen.clone(),
        })
    }

    fn get<'a>(
        &'a self,
        vault: &'a str,
        sha256: &'a str,
        range: Option<Range<u64>>,
    ) -> BoxFuture<'a, Result<BoxStream<'static, std::io::Result<Bytes>>>> {
        async move {
            let options = GetOptions {
                range: range.map(GetRange::Bounded),
                ..GetOptions::default()
            };
            let got = self
                .store
                .get_opts(&self.path(vault, "blobs", sha256), options)
                .await
                .map_err(|e| blob_error(&self.url, e))?;
            let url = self.url.clone();
            Ok(got
                .into_stream()
                .map_err(move |e| std::io::Error::other(blob_error(&url, e).message))
                .boxed())
        }
        .boxed()
    }

    fn head<'a>(&'a self, vault: &'a str, sha256: &'a str) -> BoxFuture<'a, Result<Option<u64>>> {
        async move {
            match self.store.head(&self.path(vault, "blobs", sha256)).await {
                Ok(meta) => Ok(Some(meta.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(blob_error(&self.url, e)),
            }
        }
        .boxed()
    }

    fn delete<'a>(&'a self, vault: &'a str, sha256: &'a str) -> BoxFuture<'a, Result<()>> {
        async move {
            match self.store.delete(&self.path(vault, "blobs", sha256)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(blob_error(&self.url, e)),
            }
        }
        .boxed()
    }

    fn describe(&self) -> String {
        self.url.clone()
    }
}

struct S3Upload {
    writer: Option<BufWriter>,
    store: Arc<dyn ObjectStore>,
    staging: Path,
    /// `.../blobs/` (the sha256 is appended when known).
    blobs: Path,
    url: String,
    bucket_seen: Arc<AtomicBool>,
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
            let writer = self
                .writer
                .as_mut()
                .ok_or_else(|| Error::internal("an upload was written after it ended"))?;
            writer
                .put(chunk)
                .await
                .map_err(|e| blob_error(&self.url, e))
        }
        .boxed()
    }

    fn finish<'a>(mut self: Box<Self>, sha256: &'a str) -> BoxFuture<'a, Result<()>> {
        async move {
            let mut writer = self
                .writer
                .take()
                .ok_or_else(|| Error::internal("an upload was finished twice"))?;
            tokio::io::AsyncWriteExt::shutdown(&mut writer)
                .await
                .map_err(|e| io_blob_error(&self.url, e))?;
            let target = Path::from(format!("{}/{sha256}", self.blobs.as_ref()));
            let copied = self.store.copy(&self.staging, &target).await;
            // The staged object goes either way; a copy that failed is retried whole.
            let _ = self.store.delete(&self.staging).await;
            copied.map_err(|e| blob_error(&self.url, e))
        }
        .boxed()
    }
}

impl Drop for S3Upload {
    fn drop(&mut self) {
        // Unfinished: abort the multipart upload, so its parts do not linger.
        if let (Some(mut writer), Ok(runtime)) =
            (self.writer.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(async move {
                let _ = writer.abort().await;
            });
        }
    }
}

fn unconfigured(url: &str, why: &str) -> Error {
    Error::new(
        Reason::BLOB_STORE_UNAVAILABLE,
        format!("the blob store {url:?} cannot be used: {why}; set blob_store (NOTEVAULT_BLOB_STORE, --blob-store) to s3://BUCKET[/PREFIX]"),
    )
}

/// An `object_store` failure in the reason table's terms, with a hint naming what to fix.
fn blob_error(url: &str, e: object_store::Error) -> Error {
    let text = e.to_string();
    match e {
        object_store::Error::NotFound { .. } if !text.contains("NoSuchBucket") => Error::new(
            Reason::ATTACHMENT_NOT_FOUND,
            "the attachment's bytes are not in the blob store",
        ),
        object_store::Error::Unauthenticated { .. } | object_store::Error::PermissionDenied { .. } => {
            Error::new(
                Reason::BLOB_STORE_UNAVAILABLE,
                format!("the blob store {url} refused the credentials: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY ({text})"),
            )
        }
        _ => classify(url, &text),
    }
}

fn io_blob_error(url: &str, e: std::io::Error) -> Error {
    let text = e.to_string();
    if text.contains("403") || text.contains("401") || text.contains("AccessDenied") {
        return Error::new(
            Reason::BLOB_STORE_UNAVAILABLE,
            format!("the blob store {url} refused the credentials: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY ({text})"),
        );
    }
    classify(url, &text)
}

fn classify(url: &str, text: &str) -> Error {
    if text.contains("NoSuchBucket") {
        return Error::new(
            Reason::BLOB_STORE_UNAVAILABLE,
            format!("the bucket of {url} does not exist: create it, or fix blob_store"),
        );
    }
    if text.contains("InvalidAccessKeyId") || text.contains("SignatureDoesNotMatch") {
        return Error::new(
            Reason::BLOB_STORE_UNAVAILABLE,
            format!("the blob store {url} refused the credentials: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
        );
    }
    Error::new(
        Reason::BLOB_STORE_UNAVAILABLE,
        format!("the blob store {url} cannot be reached: check AWS_ENDPOINT_URL and that the store is running ({text})"),
    )
    .with_retry_after(RETRY_AFTER_SECONDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_that_is_not_s3_is_refused_naming_the_setting() {
        for url in ["http://bucket/x", "s3://", "bucket"] {
            let Err(e) = S3Blobs::open(url, &Vec::new()) else {
                panic!("{url} was taken");
            };
            assert_eq!(e.reason, Reason::BLOB_STORE_UNAVAILABLE);
            assert!(e.message.contains("blob_store"), "{}", e.message);
        }
        let store = S3Blobs::open("s3://bucket/a/b/", &Vec::new()).unwrap();
        assert_eq!(
            store.path("v1", "blobs", "abc").as_ref(),
            "a/b/vaults/v1/blobs/abc"
        );
    }
}
