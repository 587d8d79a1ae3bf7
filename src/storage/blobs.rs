//! The attachment-bytes half of the storage seam, for a vault with no folder (hosted
//! mode): an object store, through Apache Arrow's `object_store` (S3 and the stores
//! speaking its protocol: MinIO, Garage, R2, `s3s-fs`).
//!
//! Bytes are content-addressed: `<prefix>/vaults/<vault_id>/blobs/<sha256>`, so a
//! rename, a move or a delete changes rows only, and the same bytes uploaded twice are
//! one object. An upload up to [`MULTIPART_ABOVE`] is one `PUT` to its sha256 once the
//! caller has hashed it; a larger one is a multipart upload, with a marker
//! `<prefix>/vaults/<vault_id>/uploads/<id>.multipart` naming it while it is under way (so
//! the parts of one cut off by a crash can be aborted). Its key is the blob itself when
//! the sha256 is known up front (the client declared it; the caller checks the bytes
//! against it before [`BlobUpload::finish`]), else `uploads/<id>`, copied to its sha256
//! at the end. An upload cut off is never a visible blob. An export archive goes straight
//! to `<prefix>/vaults/<vault_id>/exports/<name>`. [`BlobStore::inventory`] and
//! [`BlobStore::sweep`] serve the collector (`hosted::collect`).
//!
//! What a caller may count on: every failure is an `Error` with `BLOB_STORE_UNAVAILABLE`
//! (`Retry-After` when the store did not answer) naming what to fix, or
//! `ATTACHMENT_NOT_FOUND`; nothing waits on a dead store longer than a few seconds.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{
    ClientOptions, GetOptions, GetRange, MultipartId, ObjectStore, PutPayload, RetryConfig,
};

use crate::error::{Error, Reason, Result};

/// An upload larger than this goes up as a multipart upload, in parts of this size;
/// smaller ones are one `PUT` (held in memory until then, never more than this).
pub const MULTIPART_ABOVE: usize = 8 * 1024 * 1024;

/// Seconds an export archive is kept: its link's life (the default of presigned links,
/// 300 s) and a margin for a download begun just before the link expired.
pub const EXPORT_KEEP_SECS: u64 = 300 + 900;

/// Seconds a client waits before retrying when the store did not answer.
pub const RETRY_AFTER_SECONDS: u64 = 2;

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

/// An upload under way. Dropped unfinished, it is aborted.
pub trait BlobUpload: Send {
    /// Add the next bytes.
    fn write(&mut self, chunk: Bytes) -> BoxFuture<'_, Result<()>>;

    /// Finish: the bytes become the blob `sha256` (the hash of what was written, which
    /// the caller computed while streaming), or the export the upload was begun for.
    fn finish<'a>(self: Box<Self>, sha256: &'a str) -> BoxFuture<'a, Result<()>>;
}

/// A blob store on S3 (or a store speaking its protocol).
pub struct S3Blobs {
    store: Arc<AmazonS3>,
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
        self.path_of(&format!("vaults/{vault}/{kind}/{name}"))
    }

    /// An upload to the blob of its sha256 (`target` `None`), or to `target`, which a
    /// multipart upload then goes to directly.
    fn upload(&self, vault: &str, target: Option<Path>) -> Box<dyn BlobUpload> {
        let staging = self.path(vault, "uploads", &uuid::Uuid::now_v7().to_string());
        let blobs = self.path(vault, "blobs", "");
        Box::new(S3Upload {
            store: self.store.clone(),
            staging,
            blobs,
            target,
            url: self.url.clone(),
            bucket_seen: self.bucket_seen.clone(),
            buffer: BytesMut::new(),
            multipart: None,
            finished: false,
        })
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
        self.upload(vault, declared.map(|sha| self.path(vault, "blobs", sha)))
    }

    fn begin_export(&self, vault: &str, name: &str) -> Box<dyn BlobUpload> {
        self.upload(vault, Some(self.path(vault, "exports", name)))
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
            let probe = self.path_of("probe/");
            match self.store.list(Some(&probe)).next().await {
                None | Some(Ok(_)) => Ok(()),
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
                // A key of another vault's (or outside the prefix) is never touched.
                let own = self.path_of(&format!("vaults/{vault}"));
                let (id, key) = match text.split_once('\n') {
                    Some((id, key)) if Path::from(key).prefix_matches(&own) => {
                        (id, Path::from(key))
                    }
                    Some((id, _)) => (id, staging),
                    None => (text.as_str(), staging),
                };
                match self.store.abort_multipart(&key, &id.to_string()).await {
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

struct S3Upload {
    store: Arc<AmazonS3>,
    /// `uploads/<id>`: the marker's name, and a multipart upload's key when there is no
    /// `target`.
    staging: Path,
    /// `.../blobs/` (the sha256 is appended when known).
    blobs: Path,
    /// Where the bytes go, when known up front (an export archive, a declared sha256's
    /// blob): a multipart upload goes there directly.
    target: Option<Path>,
    url: String,
    bucket_seen: Arc<AtomicBool>,
    /// Bytes not sent yet: never more than [`MULTIPART_ABOVE`] plus a chunk.
    buffer: BytesMut,
    /// Past [`MULTIPART_ABOVE`]: the multipart upload, its parts in flight (in order)
    /// and those sent.
    multipart: Option<Multipart>,
    finished: bool,
}

struct Multipart {
    /// Where the parts go: `target`, else `staging`.
    key: Path,
    id: MultipartId,
    in_flight: VecDeque<tokio::task::JoinHandle<object_store::Result<PartId>>>,
    sent: Vec<PartId>,
}

/// Parts sent at once: two keep the link busy while one is acknowledged.
const PARTS_IN_FLIGHT: usize = 2;

impl S3Upload {
    /// Send `part` as the next part, starting the multipart upload (and leaving its
    /// marker, so a crash's parts can be aborted by the collector) on the first.
    async fn send(&mut self, part: Bytes) -> Result<()> {
        if self.multipart.is_none() {
            let key = self.target.clone().unwrap_or_else(|| self.staging.clone());
            let id = self
                .store
                .create_multipart(&key)
                .await
                .map_err(|e| blob_error(&self.url, e))?;
            let named = match &self.target {
                Some(target) => format!("{id}\n{target}"),
                None => id.clone(),
            };
            self.store
                .put(&marker(&self.staging), PutPayload::from(named))
                .await
                .map_err(|e| blob_error(&self.url, e))?;
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
fn marker(staging: &Path) -> Path {
    Path::from(format!("{}{MARKER}", staging.as_ref()))
}

const MARKER: &str = ".multipart";

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
                Some(target) if target.prefix_matches(&self.blobs) => {
                    if *target != blob {
                        return Err(Error::internal(format!(
                            "an upload declared as {target} hashed to {sha256}"
                        )));
                    }
                    target.clone()
                }
                Some(target) => target.clone(),
                None => blob,
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
            for task in multipart.in_flight {
                task.abort();
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
        object_store::Error::NotFound { .. } if !text.contains("NoSuchBucket") => {
            crate::telemetry::blob_error("missing");
            Error::new(
                Reason::ATTACHMENT_NOT_FOUND,
                "the attachment's bytes are not in the blob store",
            )
        }
        object_store::Error::Unauthenticated { .. }
        | object_store::Error::PermissionDenied { .. } => {
            crate::telemetry::blob_error("credentials");
            Error::new(
                Reason::BLOB_STORE_UNAVAILABLE,
                format!("the blob store {url} refused the credentials: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY ({text})"),
            )
        }
        _ => classify(url, &text),
    }
}

fn classify(url: &str, text: &str) -> Error {
    if text.contains("NoSuchBucket") {
        crate::telemetry::blob_error("no_bucket");
        return Error::new(
            Reason::BLOB_STORE_UNAVAILABLE,
            format!("the bucket of {url} does not exist: create it, or fix blob_store"),
        );
    }
    if text.contains("InvalidAccessKeyId") || text.contains("SignatureDoesNotMatch") {
        crate::telemetry::blob_error("credentials");
        return Error::new(
            Reason::BLOB_STORE_UNAVAILABLE,
            format!("the blob store {url} refused the credentials: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
        );
    }
    crate::telemetry::blob_error("unreachable");
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
