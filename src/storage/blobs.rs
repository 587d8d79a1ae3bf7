//! The attachment-bytes half of the storage seam, for a vault with no folder (hosted
//! mode): an object store, through Apache Arrow's `object_store` (S3 and the stores
//! speaking its protocol: MinIO, Garage, R2, `s3s-fs`).
//!
//! Bytes are content-addressed: `<prefix>/vaults/<vault_id>/blobs/<sha256>`, so a
//! rename, a move or a delete changes rows only, and the same bytes uploaded twice are
//! one object. An upload up to [`MULTIPART_ABOVE`] is one `PUT` to its sha256 once the
//! caller has hashed it; a larger one is a multipart upload ([`super::s3_upload`]), with
//! a marker `<prefix>/vaults/<vault_id>/uploads/<id>.multipart` naming it while it is
//! under way (so the parts of one cut off by a crash can be aborted). Its key is the blob
//! itself when the sha256 is known up front (the client declared it; the caller checks
//! the bytes against it before [`BlobUpload::finish`]), else `uploads/<id>`, copied to its
//! sha256 at the end. An upload cut off is never a visible blob. An export archive goes up
//! the same way to `<prefix>/vaults/<vault_id>/exports/<name>` (staged, then copied). [`BlobStore::inventory`] and
//! [`BlobStore::sweep`] serve the collector (`hosted::collect`).
//!
//! What a caller may count on: every failure is an `Error` with `BLOB_STORE_UNAVAILABLE`
//! (`Retry-After` when the store did not answer) naming what to fix, or
//! `ATTACHMENT_NOT_FOUND`; nothing waits on a dead store longer than a few seconds.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::multipart::MultipartStore;
use object_store::path::Path;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectStore, RetryConfig};

pub use super::s3_errors::RETRY_AFTER_SECONDS;
use super::s3_errors::{blob_error, classify};
pub use super::s3_upload::MULTIPART_ABOVE;
use super::s3_upload::{marker_names, S3Upload, Target, MARKER};
pub use super::upload::BlobUpload;
use crate::error::{Error, Reason, Result};

/// Seconds an export archive is kept: its link's life (the default of presigned links,
/// 300 s) and a margin for a download begun just before the link expired.
pub const EXPORT_KEEP_SECS: u64 = 300 + 900;

/// A vault's attachment bytes.
pub trait BlobStore: Send + Sync {
    /// Start an upload for `vault`; its bytes are visible only once it is finished.
    /// `declared`: the sha256 (hex) its bytes are said to have; it can only be finished
    /// as that blob.
    fn begin(&self, vault: &str, declared: Option<&str>) -> Box<dyn BlobUpload>;

    /// Start an upload of the export archive `name` of `vault` (`exports/<name>`): the
    /// same machinery as [`begin`](Self::begin), its object named up front (`finish`'s
    /// sha256 is not its name).
    fn begin_export(&self, vault: &str, name: &str) -> Box<dyn BlobUpload>;

    /// The bytes of the export `name` (`range`: only those), streamed.
    fn get_export<'a>(
        &'a self,
        vault: &'a str,
        name: &'a str,
        range: Option<Range<u64>>,
    ) -> BoxFuture<'a, Result<BoxStream<'static, std::io::Result<Bytes>>>>;

    /// The size of the export `name`, `None` when there is none.
    fn head_export<'a>(
        &'a self,
        vault: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>>>;

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

    /// Whether the store answers, takes the credentials and has the bucket (one listing
    /// of an empty prefix), for `/readyz`.
    fn check(&self) -> BoxFuture<'_, Result<()>>;

    /// The vaults with objects in the store.
    fn vaults(&self) -> BoxFuture<'_, Result<Vec<String>>>;

    /// Every object of `vault`: its blobs and what uploads left.
    fn inventory<'a>(&'a self, vault: &'a str) -> BoxFuture<'a, Result<Vec<Stored>>>;

    /// Remove `item` if it was last written before `before` (checked again now: the same
    /// bytes uploaded since renew a blob); an unfinished multipart upload is aborted.
    /// Whether it was removed.
    fn sweep<'a>(
        &'a self,
        vault: &'a str,
        item: &'a Stored,
        before: DateTime<Utc>,
    ) -> BoxFuture<'a, Result<bool>>;
}

/// An object of a vault in the store, as the collector sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub kind: StoredKind,
    /// Its name under the vault's folder of its kind.
    pub name: String,
    pub modified: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredKind {
    /// The bytes of the sha256 `name`.
    Blob,
    /// A multipart upload's result not yet copied to its sha256.
    Staged,
    /// The marker of a multipart upload under way (its id inside, then its key when that
    /// is not the staged object beside the marker).
    Multipart,
    /// An export archive (`exports/<name>`): no row names it; it goes once its link
    /// cannot be used any more.
    Export,
}

/// A blob store on S3 (or a store speaking its protocol).
pub struct S3Blobs {
    store: Arc<AmazonS3>,
    url: String,
    prefix: String,
    /// The bucket was seen to exist (checked by a listing before the first upload, as
    /// some stores make a missing bucket on a `PUT` rather than refuse it, and by the
    /// first readiness check; later checks only ask whether the store answers).
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
        self.path_of(&format!("vaults/{vault}/{kind}/{name}"))
    }

    /// An upload to the blob of its sha256, or to `target`.
    fn upload(&self, vault: &str, target: Option<Target>) -> Box<dyn BlobUpload> {
        Box::new(S3Upload::new(
            self.store.clone(),
            self.path(vault, "uploads", &uuid::Uuid::now_v7().to_string()),
            self.path(vault, "blobs", ""),
            target,
            self.url.clone(),
            self.bucket_seen.clone(),
        ))
    }

    fn get_at(
        &self,
        path: Path,
        range: Option<Range<u64>>,
    ) -> BoxFuture<'_, Result<BoxStream<'static, std::io::Result<Bytes>>>> {
        async move {
            let options = GetOptions {
                range: range.map(GetRange::Bounded),
                ..GetOptions::default()
            };
            let got = self
                .store
                .get_opts(&path, options)
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

    fn head_at(&self, path: Path) -> BoxFuture<'_, Result<Option<u64>>> {
        async move {
            match self.store.head(&path).await {
                Ok(meta) => Ok(Some(meta.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(blob_error(&self.url, e)),
            }
        }
        .boxed()
    }

    fn path_of(&self, rel: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(rel)
        } else {
            Path::from(format!("{}/{rel}", self.prefix))
        }
    }
}

impl BlobStore for S3Blobs {
    fn begin(&self, vault: &str, declared: Option<&str>) -> Box<dyn BlobUpload> {
        let declared = declared.map(|sha| Target::Declared(self.path(vault, "blobs", sha)));
        self.upload(vault, declared)
    }

    fn begin_export(&self, vault: &str, name: &str) -> Box<dyn BlobUpload> {
        self.upload(
            vault,
            Some(Target::Export(self.path(vault, "exports", name))),
        )
    }

    fn get<'a>(
        &'a self,
        vault: &'a str,
        sha256: &'a str,
        range: Option<Range<u64>>,
    ) -> BoxFuture<'a, Result<BoxStream<'static, std::io::Result<Bytes>>>> {
        self.get_at(self.path(vault, "blobs", sha256), range)
    }

    fn head<'a>(&'a self, vault: &'a str, sha256: &'a str) -> BoxFuture<'a, Result<Option<u64>>> {
        self.head_at(self.path(vault, "blobs", sha256))
    }

    fn get_export<'a>(
        &'a self,
        vault: &'a str,
        name: &'a str,
        range: Option<Range<u64>>,
    ) -> BoxFuture<'a, Result<BoxStream<'static, std::io::Result<Bytes>>>> {
        self.get_at(self.path(vault, "exports", name), range)
    }

    fn head_export<'a>(
        &'a self,
        vault: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>>> {
        self.head_at(self.path(vault, "exports", name))
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

    fn check(&self) -> BoxFuture<'_, Result<()>> {
        async move {
            // Once the bucket is known to exist, a `HEAD` of a key that need not exist
            // says the store answers: a listing costs a store over a folder (`s3s-fs`) a
            // walk of the whole bucket.
            if self.bucket_seen.load(Ordering::Relaxed) {
                return match self.store.head(&self.path_of("probe")).await {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(blob_error(&self.url, e)),
                };
            }
            let probe = self.path_of("probe/");
            match self.store.list(Some(&probe)).next().await {
                None | Some(Ok(_)) => {
                    self.bucket_seen.store(true, Ordering::Relaxed);
                    Ok(())
                }
                // A listing finds no object as an empty list: only the bucket can be
                // missing.
                Some(Err(object_store::Error::NotFound { .. })) => {
                    Err(classify(&self.url, "NoSuchBucket"))
                }
                Some(Err(e)) => Err(blob_error(&self.url, e)),
            }
        }
        .boxed()
    }

    fn vaults(&self) -> BoxFuture<'_, Result<Vec<String>>> {
        async move {
            let root = self.path_of("vaults");
            let listed = self
                .store
                .list_with_delimiter(Some(&root))
                .await
                .map_err(|e| blob_error(&self.url, e))?;
            Ok(listed
                .common_prefixes
                .iter()
                .filter_map(|p| p.filename().map(String::from))
                .collect())
        }
        .boxed()
    }

    fn inventory<'a>(&'a self, vault: &'a str) -> BoxFuture<'a, Result<Vec<Stored>>> {
        async move {
            let mut found = Vec::new();
            for dir in ["blobs", "uploads", "exports"] {
                let prefix = self.path(vault, dir, "");
                let mut listing = self.store.list(Some(&prefix));
                while let Some(meta) = listing.next().await {
                    let meta = meta.map_err(|e| blob_error(&self.url, e))?;
                    let Some(name) = meta.location.filename().map(String::from) else {
                        continue;
                    };
                    let kind = match (dir, name.ends_with(MARKER)) {
                        ("blobs", _) => StoredKind::Blob,
                        ("exports", _) => StoredKind::Export,
                        (_, true) => StoredKind::Multipart,
                        (_, false) => StoredKind::Staged,
                    };
                    found.push(Stored {
                        kind,
                        name,
                        modified: meta.last_modified,
                    });
                }
            }
            Ok(found)
        }
        .boxed()
    }

    fn sweep<'a>(
        &'a self,
        vault: &'a str,
        item: &'a Stored,
        before: DateTime<Utc>,
    ) -> BoxFuture<'a, Result<bool>> {
        async move {
            let dir = match item.kind {
                StoredKind::Blob => "blobs",
                StoredKind::Export => "exports",
                StoredKind::Staged | StoredKind::Multipart => "uploads",
            };
            let path = self.path(vault, dir, &item.name);
            let meta = match self.store.head(&path).await {
                Ok(meta) => meta,
                Err(object_store::Error::NotFound { .. }) => return Ok(false),
                Err(e) => return Err(blob_error(&self.url, e)),
            };
            if meta.last_modified >= before {
                return Ok(false);
            }
            if item.kind == StoredKind::Multipart {
                let text = self
                    .store
                    .get(&path)
                    .await
                    .map_err(|e| blob_error(&self.url, e))?
                    .bytes()
                    .await
                    .map_err(|e| blob_error(&self.url, e))?;
                let text = String::from_utf8_lossy(&text).into_owned();
                let staging = self.path(vault, dir, item.name.trim_end_matches(MARKER));
                let own = self.path_of(&format!("vaults/{vault}"));
                let Some((id, key)) = marker_names(&text, &staging, &own) else {
                    tracing::warn!(marker = %path, "a multipart marker names a key outside its vault: left alone");
                    return Ok(false);
                };
                match self.store.abort_multipart(&key, &id).await {
                    // Finished or aborted already: nothing of it is left to abort.
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(blob_error(&self.url, e)),
                }
            }
            match self.store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(true),
                Err(e) => Err(blob_error(&self.url, e)),
            }
        }
        .boxed()
    }
}

fn unconfigured(url: &str, why: &str) -> Error {
    Error::new(
        Reason::BLOB_STORE_UNAVAILABLE,
        format!("the blob store {url:?} cannot be used: {why}; set blob_store (NOTEVAULT_BLOB_STORE, --blob-store) to s3://BUCKET[/PREFIX]"),
    )
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
