//! Links the object store serves itself (`blob_public_endpoint`): SigV4 presigned URLs,
//! signed with `aws-sigv4` (the AWS SDK's signer) for the public endpoint, so an
//! attachment's bytes go between the client and the store and never through an instance.
//!
//! A GET link names the blob of one sha256 (or one export archive) and signs the
//! `response-content-type` and `response-content-disposition` the store answers with. A PUT link names a fresh
//! staging key (`<prefix>/vaults/<vault>/uploads/presigned-<id>`, never a blob) and
//! signs `content-length`, `content-type` and `x-amz-checksum-sha256`, so the store
//! refuses a body of another size, type or hash. Its [`Pending`] row says what the
//! object becomes once it is there: checked (size and the store's own checksum), copied
//! to its sha256 by the store, recorded, and the staging object removed.
//!
//! What a caller may count on: every failure is an `Error` with `BLOB_STORE_UNAVAILABLE`
//! naming what to fix; nothing waits on a dead store longer than a few seconds.

use std::time::{Duration, SystemTime};

use aws_sigv4::http_request::{
    sign, PercentEncodingMode, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
    UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use base64::Engine;
use futures::future::BoxFuture;

use crate::error::{Error, Reason, Result};
use crate::storage::blobs::{S3Settings, RETRY_AFTER_SECONDS};

/// A PUT link taken to the store: what the staging object becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The link's id (its staging key's, and its write's `Idempotency-Key`).
    pub id: String,
    pub path: String,
    /// Lower-case hex.
    pub sha256: String,
    pub size: u64,
    pub content_type: String,
    pub agent_id: String,
    /// Unix seconds: the link's expiry.
    pub expires_at: i64,
}

/// The pending PUT links of each vault (hosted: PostgreSQL's `presigned_uploads`).
pub trait PendingUploads: Send + Sync {
    fn add(&self, vault: &str, pending: &Pending) -> Result<()>;
    fn list(&self, vault: &str) -> Result<Vec<Pending>>;
    fn remove(&self, vault: &str, id: &str) -> Result<()>;
}

/// A staging object as the store holds it.
#[derive(Debug)]
pub struct Staged {
    pub size: u64,
    /// The store's `x-amz-checksum-sha256` (base64), when it kept one.
    pub sha256_base64: Option<String>,
}

/// A store's answer to one request of this instance.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// How this instance sends a signed request to the store (hosted: an HTTP client);
/// `Err`: the store did not answer, and why.
pub trait Transport: Send + Sync {
    fn send<'a>(
        &'a self,
        method: &'a str,
        url: String,
        headers: &'a [(&'static str, String)],
    ) -> BoxFuture<'a, std::result::Result<Answer, String>>;
}

/// After its expiry, how long a PUT link's row waits for an upload that started in time.
pub const PUT_GRACE_SECS: i64 = 300;

/// The signer of a store's links, and the pending PUT links' rows.
pub struct StoreLinks {
    /// Where clients reach the store (`blob_public_endpoint`), no trailing `/`.
    public: String,
    /// Where this instance reaches it (`AWS_ENDPOINT_URL`), no trailing `/`.
    internal: String,
    bucket: String,
    prefix: String,
    access_key: String,
    secret_key: String,
    session_token: Option<String>,
    region: String,
    url: String,
    transport: Box<dyn Transport>,
    pub pending: Box<dyn PendingUploads>,
}

/// What a key's segment escapes: all but S3's unreserved characters.
const UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, UNRESERVED).to_string()
}

impl StoreLinks {
    /// The links of the store at `url` (`s3://bucket/prefix`) for clients reaching it at
    /// `public` (an `http(s)://host[:port]` URL), with the store's `AWS_*` `settings`.
    pub fn open(
        url: &str,
        public: &str,
        settings: &S3Settings,
        transport: Box<dyn Transport>,
        pending: Box<dyn PendingUploads>,
    ) -> Result<Self> {
        let setting = |names: &[&str]| {
            settings
                .iter()
                .find(|(k, v)| names.iter().any(|n| k.eq_ignore_ascii_case(n)) && !v.is_empty())
                .map(|(_, v)| v.clone())
        };
        let rest = url.strip_prefix("s3://").unwrap_or(url);
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let public = public.trim().trim_end_matches('/').to_string();
        let host = public
            .strip_prefix("http://")
            .or_else(|| public.strip_prefix("https://"))
            .unwrap_or("");
        if host.is_empty() || host.contains(['/', '?', '#', '@', ' ']) {
            return Err(Error::new(
                Reason::BLOB_STORE_UNAVAILABLE,
                format!("blob_public_endpoint {public:?} is not an http(s)://HOST[:PORT] URL: fix blob_public_endpoint (NOTEVAULT_BLOB_PUBLIC_ENDPOINT, --blob-public-endpoint)"),
            ));
        }
        let region = setting(&["AWS_REGION", "AWS_DEFAULT_REGION"]).unwrap_or("us-east-1".into());
        let internal = setting(&["AWS_ENDPOINT_URL", "AWS_ENDPOINT"])
            .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"))
            .trim_end_matches('/')
            .to_string();
        let missing = || {
            Error::new(
                Reason::BLOB_STORE_UNAVAILABLE,
                "presigned links of the blob store need AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            )
        };
        Ok(Self {
            public,
            internal,
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
            access_key: setting(&["AWS_ACCESS_KEY_ID"]).ok_or_else(missing)?,
            secret_key: setting(&["AWS_SECRET_ACCESS_KEY"]).ok_or_else(missing)?,
            session_token: setting(&["AWS_SESSION_TOKEN"]),
            region,
            url: url.to_string(),
            transport,
            pending,
        })
    }

    /// The object key of `name` under the vault's `kind` (`blobs`, `uploads`), as
    /// `storage::blobs` lays them out.
    fn key(&self, vault: &str, kind: &str, name: &str) -> String {
        let rel = format!("vaults/{vault}/{kind}/{name}");
        if self.prefix.is_empty() {
            rel
        } else {
            format!("{}/{rel}", self.prefix)
        }
    }

    fn staging(&self, vault: &str, id: &str) -> String {
        self.key(vault, "uploads", &format!("presigned-{id}"))
    }

    /// A GET link to the blob `sha256`, answered with `content_type` and `disposition`.
    pub fn get_url(
        &self,
        vault: &str,
        sha256: &str,
        ttl: Duration,
        content_type: &str,
        disposition: &str,
    ) -> Result<String> {
        let query = [
            ("response-content-disposition", disposition.to_string()),
            ("response-content-type", content_type.to_string()),
        ];
        self.presign(
            "GET",
            &self.public,
            &self.key(vault, "blobs", sha256),
            &query,
            &[],
            ttl,
        )
    }

    /// A GET link to the export archive `name` (`exports/<name>`), answered as
    /// `application/gzip` with `disposition`.
    pub fn export_url(
        &self,
        vault: &str,
        name: &str,
        ttl: Duration,
        disposition: &str,
    ) -> Result<String> {
        let query = [
            ("response-content-disposition", disposition.to_string()),
            ("response-content-type", "application/gzip".to_string()),
        ];
        let key = self.key(vault, "exports", name);
        self.presign("GET", &self.public, &key, &query, &[], ttl)
    }

    /// A PUT link for the staging object of `pending`, and the headers its request
    /// must send as signed.
    pub fn put_url(
        &self,
        vault: &str,
        pending: &Pending,
        ttl: Duration,
    ) -> Result<(String, Vec<(&'static str, String)>)> {
        let headers = vec![
            ("content-length", pending.size.to_string()),
            ("content-type", pending.content_type.clone()),
            ("x-amz-checksum-sha256", sha256_base64(&pending.sha256)?),
        ];
        let url = self.presign(
            "PUT",
            &self.public,
            &self.staging(vault, &pending.id),
            &[],
            &headers,
            ttl,
        )?;
        Ok((url, headers))
    }

    /// The staging object of link `id`, `None` when nothing was put there.
    pub async fn staged(&self, vault: &str, id: &str) -> Result<Option<Staged>> {
        let headers = [("x-amz-checksum-mode", "ENABLED".to_string())];
        let answer = self
            .call("HEAD", &self.staging(vault, id), &headers)
            .await?;
        if answer.status == 404 {
            return Ok(None);
        }
        let answer = self.refused(answer)?;
        let header = |name: &str| {
            answer
                .headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        Ok(Some(Staged {
            size: header("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or_default(),
            sha256_base64: header("x-amz-checksum-sha256"),
        }))
    }

    /// Have the store copy the staging object of link `id` to the blob `sha256`.
    pub async fn adopt(&self, vault: &str, id: &str, sha256: &str) -> Result<()> {
        let source = format!("/{}/{}", self.bucket, self.staging(vault, id));
        let source: Vec<String> = source.split('/').map(enc).collect();
        let headers = [("x-amz-copy-source", source.join("/"))];
        let answer = self
            .call("PUT", &self.key(vault, "blobs", sha256), &headers)
            .await?;
        self.refused(answer).map(drop)
    }

    /// Remove the staging object of link `id` (nothing there is no error).
    pub async fn discard(&self, vault: &str, id: &str) -> Result<()> {
        let answer = self.call("DELETE", &self.staging(vault, id), &[]).await?;
        if answer.status == 404 {
            return Ok(());
        }
        self.refused(answer).map(drop)
    }

    /// A request of this instance to the store, signed like a link of a minute.
    async fn call(
        &self,
        method: &str,
        key: &str,
        headers: &[(&'static str, String)],
    ) -> Result<Answer> {
        let url = self.presign(
            method,
            &self.internal,
            key,
            &[],
            headers,
            Duration::from_secs(60),
        )?;
        self.transport
            .send(method, url, headers)
            .await
            .map_err(|why| {
                Error::new(
                    Reason::BLOB_STORE_UNAVAILABLE,
                    format!(
                        "the blob store {} cannot be reached: check AWS_ENDPOINT_URL and that the store is running ({why})",
                        self.url
                    ),
                )
                .with_retry_after(RETRY_AFTER_SECONDS)
            })
    }

    /// `answer` when the store did what was asked, else its refusal as an `Error`.
    fn refused(&self, answer: Answer) -> Result<Answer> {
        if (200..300).contains(&answer.status) {
            return Ok(answer);
        }
        let mut e = Error::new(
            Reason::BLOB_STORE_UNAVAILABLE,
            format!(
                "the blob store {} answered {}: {}",
                self.url, answer.status, answer.body
            ),
        );
        if answer.status >= 500 {
            e = e.with_retry_after(RETRY_AFTER_SECONDS);
        }
        Err(e)
    }

    /// A SigV4 presigned URL (path-style) for `method` on `key` at `endpoint`, with the
    /// extra `query` signed and `headers` signed (the request must send them as given).
    fn presign(
        &self,
        method: &str,
        endpoint: &str,
        key: &str,
        query: &[(&str, String)],
        headers: &[(&'static str, String)],
        ttl: Duration,
    ) -> Result<String> {
        let path: Vec<String> = key.split('/').map(enc).collect();
        let mut url = format!("{endpoint}/{}/{}", enc(&self.bucket), path.join("/"));
        for (i, (name, value)) in query.iter().enumerate() {
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(&format!("{}={}", enc(name), enc(value)));
        }
        let identity = aws_credential_types::Credentials::new(
            &self.access_key,
            &self.secret_key,
            self.session_token.clone(),
            None,
            "notevault",
        )
        .into();
        let mut settings = SigningSettings::default();
        settings.signature_location = SignatureLocation::QueryParams;
        settings.expires_in = Some(ttl);
        // S3's rules: the path is encoded once and never normalized.
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        let signing_failed = |e: &dyn std::fmt::Display| {
            Error::internal(format!("a link of the blob store could not be signed: {e}"))
        };
        let params: aws_sigv4::http_request::SigningParams<'_> = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("s3")
            .time(SystemTime::now())
            .settings(settings)
            .build()
            .map_err(|e| signing_failed(&e))?
            .into();
        let request = SignableRequest::new(
            method,
            url.clone(),
            headers.iter().map(|(k, v)| (*k, v.as_str())),
            SignableBody::UnsignedPayload,
        )
        .map_err(|e| signing_failed(&e))?;
        let (instructions, _) = sign(request, &params)
            .map_err(|e| signing_failed(&e))?
            .into_parts();
        for (name, value) in instructions.params() {
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(&format!("{}={}", enc(name), enc(value)));
        }
        Ok(url)
    }
}

/// The base64 of a lower-case hex SHA-256 (what `x-amz-checksum-sha256` carries).
pub fn sha256_base64(hex: &str) -> Result<String> {
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    match bytes {
        Some(b) if b.len() == 32 && hex.len() == 64 => {
            Ok(base64::engine::general_purpose::STANDARD.encode(b))
        }
        _ => Err(Error::invalid_field(
            "sha256",
            "must be the 64 hex digits of the file's SHA-256",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoRows;
    impl PendingUploads for NoRows {
        fn add(&self, _: &str, _: &Pending) -> Result<()> {
            Ok(())
        }
        fn list(&self, _: &str) -> Result<Vec<Pending>> {
            Ok(Vec::new())
        }
        fn remove(&self, _: &str, _: &str) -> Result<()> {
            Ok(())
        }
    }

    struct NoStore;
    impl Transport for NoStore {
        fn send<'a>(
            &'a self,
            _: &'a str,
            _: String,
            _: &'a [(&'static str, String)],
        ) -> BoxFuture<'a, std::result::Result<Answer, String>> {
            Box::pin(async { Err("no store in unit tests".to_string()) })
        }
    }

    fn links() -> StoreLinks {
        let settings = vec![
            ("AWS_ACCESS_KEY_ID".to_string(), "nv".to_string()),
            ("AWS_SECRET_ACCESS_KEY".to_string(), "secret".to_string()),
            (
                "AWS_ENDPOINT_URL".to_string(),
                "http://10.0.0.1:9000".to_string(),
            ),
        ];
        StoreLinks::open(
            "s3://bucket/pre",
            "https://files.example.com/",
            &settings,
            Box::new(NoStore),
            Box::new(NoRows),
        )
        .unwrap()
    }

    #[test]
    fn a_get_link_names_the_public_host_the_blob_and_the_answer() {
        let url = links()
            .get_url(
                "v1",
                "ab",
                Duration::from_secs(60),
                "image/png",
                "inline; filename*=UTF-8''a%20b.png",
            )
            .unwrap();
        assert!(
            url.starts_with("https://files.example.com/bucket/pre/vaults/v1/blobs/ab?response-content-disposition=inline%3B%20filename%2A%3DUTF-8%27%27a%2520b.png&response-content-type=image%2Fpng&X-Amz-Algorithm=AWS4-HMAC-SHA256"),
            "{url}"
        );
        assert!(url.contains("X-Amz-Expires=60"), "{url}");
        assert!(url.contains("X-Amz-Signature="), "{url}");
    }

    #[test]
    fn a_put_link_signs_size_type_and_checksum() {
        let pending = Pending {
            id: "x1".into(),
            path: "a.png".into(),
            sha256: "00".repeat(32),
            size: 5,
            content_type: "image/png".into(),
            agent_id: "me".into(),
            expires_at: 0,
        };
        let (url, headers) = links()
            .put_url("v1", &pending, Duration::from_secs(10))
            .unwrap();
        assert!(
            url.starts_with("https://files.example.com/bucket/pre/vaults/v1/uploads/presigned-x1?")
        );
        assert!(
            url.contains(
                "X-Amz-SignedHeaders=content-length%3Bcontent-type%3Bhost%3Bx-amz-checksum-sha256"
            ),
            "{url}"
        );
        assert_eq!(headers[2].1, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
        assert!(sha256_base64("zz").is_err());
    }
}
