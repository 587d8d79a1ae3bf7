//! Configuration: one struct, built from layers in this order of precedence:
//! defaults < TOML file (`--config` or `NOTEVAULT_CONFIG`) < environment (`NOTEVAULT_*` and
//! the specification's own names) < command-line flags.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

pub use crate::auth::Secret;
use crate::auth::StaticToken;
pub use vaults::VaultEntry;

mod vaults;

/// The daemon's settings, after every layer was applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub vault: PathBuf,
    pub listen: SocketAddr,
    /// `None`: `<vault>/.notevault`.
    pub state_dir: Option<PathBuf>,
    /// Base of the `help` links of error envelopes (`{docs_url}/api/errors#reason`).
    pub docs_url: String,
    /// Requests per minute and client for `GET /v1/*` and `/mcp`; 0 disables.
    pub rate_limit_read_per_minute: u32,
    /// Requests per minute and client for POST, PATCH, PUT, DELETE under `/v1`; 0 disables.
    pub rate_limit_write_per_minute: u32,
    pub auth_required: bool,
    /// Static bearer tokens (TOML `[[static_tokens]]`, `NOTEVAULT_STATIC_TOKENS` as JSON).
    /// Any of them turns auth on.
    pub static_tokens: Vec<StaticToken>,
    /// The identity provider's API key (`IDP_API_KEY`), sent by the token proxy only.
    pub idp_api_key: Option<Secret>,
    /// The identity provider whose JWTs are accepted (`iss`); with it, the
    /// protected-resource metadata is served and challenges name it.
    pub auth_issuer: Option<String>,
    /// Where the issuer's signing keys (a JWK Set) are fetched.
    pub auth_jwks_url: Option<String>,
    /// A JWK Set file, for offline use instead of `auth_jwks_url`.
    pub auth_jwks_file: Option<PathBuf>,
    /// The `aud` a JWT must carry; `None`: not checked.
    pub auth_audience: Option<String>,
    /// The identity provider's organization that maps to this vault: a JWT whose
    /// `org_id` is this one is for this vault.
    pub org_id: Option<String>,
    /// The identity provider's token endpoint, where `POST /v1/auth/token` forwards grants.
    pub idp_token_url: Option<String>,
    /// The `client_id` the token proxy sends with each grant, if the provider needs one.
    pub idp_client_id: Option<String>,
    /// The identity provider's authorization endpoint: with it (and the issuer, the token
    /// endpoint and the API key) the web console offers a sign-in through the provider
    /// (authorization code with PKCE, the code exchanged by the token proxy's exchange).
    pub idp_authorize_url: Option<String>,
    /// The daemon's public base URL (`https://notes.example:4000`), for the metadata
    /// document and challenges; `None`: built from the request's `Host`.
    pub public_url: Option<String>,
    /// Serve a non-loopback address without auth and TLS.
    pub insecure_open: bool,
    /// The PEM certificate chain served over TLS (`--tls-cert`); with `tls_key`, the
    /// daemon serves HTTPS. Both or neither.
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of `tls_cert` (`--tls-key`: PKCS#8, RSA or SEC1, unencrypted).
    pub tls_key: Option<PathBuf>,
    /// Extra `Host` names accepted besides the loopback names.
    pub allowed_hosts: Vec<String>,
    /// Origins allowed to call the API from a browser (also sent as CORS headers).
    pub allowed_origins: Vec<String>,
    /// Watch the folder for external edits.
    pub watch: bool,
    /// Tests only (`NOTEVAULT_TEST_CRASH_AT`): a step of the write pipeline where the
    /// daemon aborts as `kill -9` would (`before-file`, `after-file`, `after-history`,
    /// `before-receipt`), so crash recovery can be tested at each step; `full:<step>`
    /// makes the write fail there as on a full disk instead.
    pub test_crash_at: Option<String>,
    /// A request head must arrive whole within this, counted from when the server starts
    /// waiting for it (also between two requests of a kept-alive connection).
    pub header_read_timeout: Duration,
    /// A request body must arrive whole within this, counted from its head.
    pub body_read_timeout: Duration,
    /// A connection on which no byte moves either way for this long is closed.
    pub idle_timeout: Duration,
    /// Connections served at once; past it a new connection is answered 503.
    pub max_connections: usize,
    /// Largest attachment upload, in bytes (`PAYLOAD_TOO_LARGE` past it).
    pub max_upload_bytes: u64,
    /// Media types an upload may have (`type/*` allows a whole family).
    pub upload_types: Vec<String>,
    /// Sync ops older than this many days that every live checkpoint has passed are
    /// compacted (the latest op per note and delete tombstones stay).
    pub sync_retention_days: u32,
    /// A local model2vec-style embedding model folder (`model.safetensors`,
    /// `tokenizer.json`, `config.json`) for `GET /v1/search?mode=hybrid`
    /// (`NOTEVAULT_EMBED_MODEL`, `embed_model`); `None`: search is lexical only. Nothing
    /// is ever downloaded.
    pub embed_model: Option<PathBuf>,
    /// Hosted mode's PostgreSQL (`database_url`, `NOTEVAULT_DATABASE_URL`, `--database`).
    pub database_url: Option<Secret>,
    /// Hosted mode's attachment bytes: `s3://BUCKET[/PREFIX]` (`blob_store`,
    /// `NOTEVAULT_BLOB_STORE`, `--blob-store`); `None`: attachments answer
    /// `BLOB_STORE_UNAVAILABLE`.
    pub blob_store: Option<String>,
    /// Where clients reach the blob store (`blob_public_endpoint`,
    /// `NOTEVAULT_BLOB_PUBLIC_ENDPOINT`, `--blob-public-endpoint`): presigned links are
    /// then the store's own; `None`: the instance's.
    pub blob_public_endpoint: Option<String>,
    /// The store's `AWS_*` environment (credentials, region, endpoint, `AWS_ALLOW_HTTP`).
    pub blob_settings: Vec<(String, Secret)>,
    /// Hosted mode: a vault no request asked for in this many seconds is closed (its
    /// catalog and index leave the instance's memory) (`vault_idle_seconds`).
    pub vault_idle_seconds: u64,
    /// Hosted mode: a blob-store object no row references (or an upload left unfinished)
    /// is collected once this many seconds old (`blob_grace_seconds`).
    pub blob_grace_seconds: u64,
    /// On SIGTERM or Ctrl-C, how long `/readyz` answers 503 `draining` while requests are
    /// still served, so a load balancer stops sending before the listener closes
    /// (`drain_seconds`, `NOTEVAULT_DRAIN_SECONDS`).
    pub drain_seconds: u64,
    /// A second listener serving only `GET /metrics`, without a credential, for a
    /// scraper on a private network (`metrics_listen`, `NOTEVAULT_METRICS_LISTEN`,
    /// `--metrics-listen`). Hosted mode serves `/metrics` there only.
    pub metrics_listen: Option<SocketAddr>,
    /// Who may approve or reject a pending write and change the write settings in open
    /// local mode (`review_decisions`, `NOTEVAULT_REVIEW_DECISIONS`): `anyone` (the spec's
    /// open-mode rule) or `signed_in` (a person signed in to the console, or a token with
    /// `notes.review`). With auth on, a decision needs `notes.review` either way.
    pub review_decisions: ReviewDecisions,
    /// Several vaults served by this daemon (`[[vaults]]`, `serve A B`), the default one
    /// first; empty: the one vault `vault`. See [`Config::vault_configs`].
    pub vaults: Vec<VaultEntry>,
}

/// Who takes review decisions in open local mode (see [`Config::review_decisions`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewDecisions {
    #[default]
    Anyone,
    SignedIn,
}

impl ReviewDecisions {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewDecisions::Anyone => "anyone",
            ReviewDecisions::SignedIn => "signed_in",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [ReviewDecisions::Anyone, ReviewDecisions::SignedIn]
            .into_iter()
            .find(|d| d.as_str() == s)
    }
}

/// The media types an upload may have unless configured: images, PDF, audio, video,
/// plain text and the common office formats.
pub fn default_upload_types() -> Vec<String> {
    [
        "image/*",
        "audio/*",
        "video/*",
        "application/pdf",
        "text/plain",
        "text/markdown",
        "text/csv",
        "application/msword",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.ms-excel",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.ms-powerpoint",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.oasis.opendocument.text",
        "application/vnd.oasis.opendocument.spreadsheet",
        "application/vnd.oasis.opendocument.presentation",
        "application/rtf",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

impl Default for Config {
    fn default() -> Self {
        Self {
            vault: PathBuf::from("."),
            listen: SocketAddr::from(([127, 0, 0, 1], 4000)),
            state_dir: None,
            docs_url: "https://notevault.dev/docs".into(),
            rate_limit_read_per_minute: 600,
            rate_limit_write_per_minute: 60,
            auth_required: false,
            static_tokens: Vec::new(),
            idp_api_key: None,
            auth_issuer: None,
            auth_jwks_url: None,
            auth_jwks_file: None,
            auth_audience: None,
            org_id: None,
            idp_token_url: None,
            idp_client_id: None,
            idp_authorize_url: None,
            public_url: None,
            insecure_open: false,
            tls_cert: None,
            tls_key: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            watch: true,
            test_crash_at: None,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_upload_bytes: 25 * 1024 * 1024,
            upload_types: default_upload_types(),
            sync_retention_days: 30,
            embed_model: None,
            database_url: None,
            blob_store: None,
            blob_public_endpoint: None,
            blob_settings: Vec::new(),
            vault_idle_seconds: 600,
            blob_grace_seconds: 24 * 3600,
            drain_seconds: 0,
            metrics_listen: None,
            review_decisions: ReviewDecisions::Anyone,
            vaults: Vec::new(),
        }
    }
}

/// One layer of settings: every field optional. The TOML file uses these names.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Layer {
    pub vault: Option<PathBuf>,
    pub listen: Option<SocketAddr>,
    pub state_dir: Option<PathBuf>,
    pub docs_url: Option<String>,
    pub rate_limit_read_per_minute: Option<u32>,
    pub rate_limit_write_per_minute: Option<u32>,
    pub auth_required: Option<bool>,
    pub static_tokens: Option<Vec<StaticToken>>,
    pub idp_api_key: Option<Secret>,
    pub auth_issuer: Option<String>,
    pub auth_jwks_url: Option<String>,
    pub auth_jwks_file: Option<PathBuf>,
    pub auth_audience: Option<String>,
    pub org_id: Option<String>,
    pub idp_token_url: Option<String>,
    pub idp_client_id: Option<String>,
    pub idp_authorize_url: Option<String>,
    pub public_url: Option<String>,
    pub insecure_open: Option<bool>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub allowed_hosts: Option<Vec<String>>,
    pub allowed_origins: Option<Vec<String>>,
    pub watch: Option<bool>,
    #[serde(skip)]
    pub test_crash_at: Option<String>,
    /// Seconds.
    pub header_read_timeout: Option<u64>,
    /// Seconds.
    pub body_read_timeout: Option<u64>,
    /// Seconds.
    pub idle_timeout: Option<u64>,
    pub max_connections: Option<usize>,
    pub max_upload_bytes: Option<u64>,
    pub upload_types: Option<Vec<String>>,
    pub sync_retention_days: Option<u32>,
    pub embed_model: Option<PathBuf>,
    pub database_url: Option<Secret>,
    pub blob_store: Option<String>,
    pub blob_public_endpoint: Option<String>,
    #[serde(skip)]
    pub blob_settings: Option<Vec<(String, Secret)>>,
    pub vault_idle_seconds: Option<u64>,
    pub blob_grace_seconds: Option<u64>,
    pub drain_seconds: Option<u64>,
    pub metrics_listen: Option<SocketAddr>,
    pub review_decisions: Option<ReviewDecisions>,
    pub vaults: Option<Vec<VaultEntry>>,
}

/// The standard environment of an S3 client that a blob store takes.
const BLOB_SETTINGS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT",
    "AWS_ALLOW_HTTP",
];

impl Layer {
    /// Read a TOML file.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].lines().count().max(1));
            let at = line.map(|l| format!(" line {l}:")).unwrap_or_default();
            format!("config file {}:{at} {}", path.display(), e.message().trim())
        })
    }

    /// Read the environment through `var` (a function so tests need not touch the process).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        // The spec's own names, also accepted with the NOTEVAULT_ prefix.
        let get = |name: &str| var(&format!("NOTEVAULT_{name}")).or_else(|| var(name));
        let own = |name: &str| var(&format!("NOTEVAULT_{name}"));
        Ok(Self {
            vault: own("VAULT").map(PathBuf::from),
            listen: parse_opt("NOTEVAULT_LISTEN", own("LISTEN"))?,
            state_dir: own("STATE_DIR").map(PathBuf::from),
            docs_url: own("DOCS_URL"),
            rate_limit_read_per_minute: parse_opt(
                "RATE_LIMIT_READ_PER_MINUTE",
                get("RATE_LIMIT_READ_PER_MINUTE"),
            )?,
            rate_limit_write_per_minute: parse_opt(
                "RATE_LIMIT_WRITE_PER_MINUTE",
                get("RATE_LIMIT_WRITE_PER_MINUTE"),
            )?,
            auth_required: get("AUTH_REQUIRED")
                .map(|v| parse_bool("AUTH_REQUIRED", &v))
                .transpose()?,
            static_tokens: own("STATIC_TOKENS")
                .map(|v| {
                    serde_json::from_str(&v).map_err(|e| {
                        format!("invalid value for NOTEVAULT_STATIC_TOKENS (a JSON list of {{\"token\", \"permissions\"}} objects): {e}")
                    })
                })
                .transpose()?,
            idp_api_key: get("IDP_API_KEY").map(Secret::new),
            auth_issuer: own("AUTH_ISSUER"),
            auth_jwks_url: own("AUTH_JWKS_URL"),
            auth_jwks_file: own("AUTH_JWKS_FILE").map(PathBuf::from),
            auth_audience: own("AUTH_AUDIENCE"),
            org_id: own("ORG_ID"),
            idp_token_url: own("IDP_TOKEN_URL"),
            idp_client_id: own("IDP_CLIENT_ID"),
            idp_authorize_url: own("IDP_AUTHORIZE_URL"),
            public_url: own("PUBLIC_URL"),
            insecure_open: own("INSECURE_OPEN")
                .map(|v| parse_bool("NOTEVAULT_INSECURE_OPEN", &v))
                .transpose()?,
            tls_cert: own("TLS_CERT").map(PathBuf::from),
            tls_key: own("TLS_KEY").map(PathBuf::from),
            allowed_hosts: own("ALLOWED_HOSTS").map(|v| split_list(&v)),
            allowed_origins: own("ALLOWED_ORIGINS").map(|v| split_list(&v)),
            watch: own("WATCH")
                .map(|v| parse_bool("NOTEVAULT_WATCH", &v))
                .transpose()?,
            test_crash_at: own("TEST_CRASH_AT"),
            header_read_timeout: parse_opt(
                "NOTEVAULT_HEADER_READ_TIMEOUT",
                own("HEADER_READ_TIMEOUT"),
            )?,
            body_read_timeout: parse_opt("NOTEVAULT_BODY_READ_TIMEOUT", own("BODY_READ_TIMEOUT"))?,
            idle_timeout: parse_opt("NOTEVAULT_IDLE_TIMEOUT", own("IDLE_TIMEOUT"))?,
            max_connections: parse_opt("NOTEVAULT_MAX_CONNECTIONS", own("MAX_CONNECTIONS"))?,
            max_upload_bytes: parse_opt("NOTEVAULT_MAX_UPLOAD_BYTES", own("MAX_UPLOAD_BYTES"))?,
            upload_types: own("UPLOAD_TYPES").map(|v| split_list(&v)),
            sync_retention_days: parse_opt(
                "NOTEVAULT_SYNC_RETENTION_DAYS",
                own("SYNC_RETENTION_DAYS"),
            )?,
            embed_model: own("EMBED_MODEL")
                .filter(|v| !v.trim().is_empty())
                .map(PathBuf::from),
            database_url: own("DATABASE_URL")
                .filter(|v| !v.trim().is_empty())
                .map(Secret::new),
            blob_store: own("BLOB_STORE").filter(|v| !v.trim().is_empty()),
            blob_public_endpoint: own("BLOB_PUBLIC_ENDPOINT").filter(|v| !v.trim().is_empty()),
            blob_settings: Some(
                BLOB_SETTINGS
                    .iter()
                    .filter_map(|k| Some((k.to_string(), Secret::new(var(k)?))))
                    .collect(),
            ),
            vault_idle_seconds: parse_opt(
                "NOTEVAULT_VAULT_IDLE_SECONDS",
                own("VAULT_IDLE_SECONDS"),
            )?,
            blob_grace_seconds: parse_opt(
                "NOTEVAULT_BLOB_GRACE_SECONDS",
                own("BLOB_GRACE_SECONDS"),
            )?,
            drain_seconds: parse_opt("NOTEVAULT_DRAIN_SECONDS", own("DRAIN_SECONDS"))?,
            metrics_listen: parse_opt("NOTEVAULT_METRICS_LISTEN", own("METRICS_LISTEN"))?,
            review_decisions: own("REVIEW_DECISIONS")
                .map(|v| {
                    ReviewDecisions::parse(v.trim()).ok_or_else(|| {
                        format!("invalid value for NOTEVAULT_REVIEW_DECISIONS: {v:?} (`anyone` or `signed_in`)")
                    })
                })
                .transpose()?,
            vaults: None,
        })
    }
}

impl Config {
    /// The state directory: as configured, else `<vault>/.notevault` of the canonical
    /// vault path.
    pub fn state_dir_of_vault(&self) -> anyhow::Result<std::path::PathBuf> {
        if let Some(dir) = &self.state_dir {
            return Ok(dir.clone());
        }
        let root = self.vault.canonicalize().map_err(|e| {
            anyhow::anyhow!("vault folder {} is not usable: {e}", self.vault.display())
        })?;
        Ok(root.join(".notevault"))
    }

    /// Apply `layer` over `self`: every field the layer sets wins.
    pub fn apply(mut self, layer: Layer) -> Self {
        // One folder named at a higher layer wins over a list at a lower one; a list
        // names its default vault too.
        if layer.vault.is_some() {
            self.vaults.clear();
        }
        if let Some(first) = layer.vaults.as_ref().and_then(|v| v.first()) {
            self.vault = first.path.clone();
        }
        macro_rules! take {
            ($($field:ident),*) => { $(if let Some(v) = layer.$field { self.$field = v; })* };
        }
        take!(
            vaults,
            vault,
            listen,
            docs_url,
            rate_limit_read_per_minute,
            rate_limit_write_per_minute,
            auth_required,
            static_tokens,
            insecure_open,
            allowed_hosts,
            allowed_origins,
            watch,
            max_connections,
            max_upload_bytes,
            upload_types,
            sync_retention_days,
            vault_idle_seconds,
            blob_grace_seconds,
            drain_seconds,
            review_decisions
        );
        for (field, seconds) in [
            (&mut self.header_read_timeout, layer.header_read_timeout),
            (&mut self.body_read_timeout, layer.body_read_timeout),
            (&mut self.idle_timeout, layer.idle_timeout),
        ] {
            if let Some(s) = seconds {
                // 0 would close every connection at once: the least is one second.
                *field = Duration::from_secs(s.max(1));
            }
        }
        self.max_connections = self.max_connections.max(1);
        if layer.state_dir.is_some() {
            self.state_dir = layer.state_dir;
        }
        macro_rules! take_some {
            ($($field:ident),*) => { $(if layer.$field.is_some() { self.$field = layer.$field; })* };
        }
        take_some!(
            idp_api_key,
            auth_issuer,
            auth_jwks_url,
            auth_jwks_file,
            auth_audience,
            org_id,
            idp_token_url,
            idp_client_id,
            idp_authorize_url,
            public_url,
            tls_cert,
            tls_key,
            embed_model,
            database_url,
            blob_store,
            blob_public_endpoint,
            metrics_listen
        );
        if let Some(settings) = layer.blob_settings {
            self.blob_settings = settings;
        }
        if layer.test_crash_at.is_some() {
            self.test_crash_at = layer.test_crash_at;
        }
        self
    }

    /// defaults < file < environment < flags.
    pub fn load(
        file: Option<&Path>,
        var: impl Fn(&str) -> Option<String>,
        flags: Layer,
    ) -> Result<Self, String> {
        let mut config = Config::default();
        if let Some(path) = file {
            config = config.apply(Layer::from_file(path)?);
        }
        config = config.apply(Layer::from_env(var)?);
        let config = config.apply(flags);
        config.check_static_tokens()?;
        config.check_identity_provider()?;
        config.check_tls()?;
        Ok(config)
    }

    /// The verifier of the identity provider's JWTs this configuration names; `None`
    /// without an issuer (or its keys).
    pub fn jwt_verifier(&self) -> Option<crate::auth::jwt::Verifier> {
        use crate::auth::jwt::{KeySource, Verifier};
        let keys = match (&self.auth_jwks_url, &self.auth_jwks_file) {
            (Some(url), _) => KeySource::Url(url.clone()),
            (None, Some(file)) => KeySource::File(file.clone()),
            (None, None) => return None,
        };
        Some(Verifier::new(
            self.auth_issuer.clone()?,
            keys,
            self.auth_audience.clone(),
            self.org_id.clone(),
        ))
    }

    /// The identity provider the token proxy forwards grants to.
    pub fn identity_provider(&self) -> crate::auth::idp::Provider<'_> {
        crate::auth::idp::Provider {
            token_url: self.idp_token_url.as_deref(),
            api_key: self.idp_api_key.as_ref(),
            client_id: self.idp_client_id.as_deref(),
            org_id: self.org_id.as_deref(),
        }
    }

    /// The scheme this daemon serves.
    pub fn scheme(&self) -> &'static str {
        if self.tls_configured() {
            "https"
        } else {
            "http"
        }
    }

    /// Whether requests need a credential: `AUTH_REQUIRED`, or any static token. (Open
    /// local mode otherwise.)
    pub fn auth_configured(&self) -> bool {
        self.auth_required || !self.static_tokens.is_empty()
    }

    /// Whether the daemon serves HTTPS (`tls_cert` and `tls_key`; `load` refuses one
    /// without the other). What needs "TLS on" asks this: HSTS, the printed URL, the
    /// non-loopback rule, and (the console issue's) `Secure` cookie attribute.
    pub fn tls_configured(&self) -> bool {
        self.tls_cert.is_some() && self.tls_key.is_some()
    }

    /// A certificate without its key, or a key without its certificate, is a mistake,
    /// never plain HTTP. (The files are read and checked when serving starts.)
    fn check_tls(&self) -> Result<(), String> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), None) => Err(format!(
                "tls_cert ({}) is set without tls_key: give both --tls-cert FILE and --tls-key FILE (or NOTEVAULT_TLS_CERT and NOTEVAULT_TLS_KEY, or tls_cert and tls_key in the config file), or neither",
                cert.display()
            )),
            (None, Some(key)) => Err(format!(
                "tls_key ({}) is set without tls_cert: give both --tls-cert FILE and --tls-key FILE (or NOTEVAULT_TLS_CERT and NOTEVAULT_TLS_KEY, or tls_cert and tls_key in the config file), or neither",
                key.display()
            )),
            _ => Ok(()),
        }
    }

    /// An issuer needs its keys (`auth_jwks_url` or `auth_jwks_file`, not both); URLs must
    /// be `http(s)://`; the public URL has no path.
    fn check_identity_provider(&self) -> Result<(), String> {
        let keys = (self.auth_jwks_url.is_some(), self.auth_jwks_file.is_some());
        match (&self.auth_issuer, keys) {
            (Some(_), (false, false)) => {
                return Err("auth_issuer is set without its keys: set auth_jwks_url (or auth_jwks_file for offline use)".into())
            }
            (_, (true, true)) => {
                return Err("set auth_jwks_url or auth_jwks_file, not both".into())
            }
            (None, (true, _) | (_, true)) => {
                return Err("auth_jwks_url / auth_jwks_file need auth_issuer: set the issuer whose keys they are".into())
            }
            _ => {}
        }
        for (name, url) in [
            ("auth_jwks_url", &self.auth_jwks_url),
            ("idp_token_url", &self.idp_token_url),
            ("idp_authorize_url", &self.idp_authorize_url),
            ("public_url", &self.public_url),
        ] {
            if let Some(url) = url {
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    return Err(format!(
                        "{name} must be an http:// or https:// URL, not {url:?}"
                    ));
                }
            }
        }
        for (name, value) in [
            ("auth_issuer", &self.auth_issuer),
            ("auth_audience", &self.auth_audience),
            ("org_id", &self.org_id),
            ("idp_client_id", &self.idp_client_id),
        ] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(format!("{name} is empty"));
            }
        }
        Ok(())
    }

    /// Every static token must be one a request can send (visible ASCII, at most 4096
    /// bytes) and name it once. The error names the entry, never the token.
    fn check_static_tokens(&self) -> Result<(), String> {
        for (i, entry) in self.static_tokens.iter().enumerate() {
            if let Some(problem) = crate::auth::token_problem(&entry.token) {
                return Err(format!("static_tokens[{i}]: {problem}"));
            }
            if self.static_tokens[..i]
                .iter()
                .any(|e| e.token == entry.token)
            {
                return Err(format!(
                    "static_tokens[{i}]: the same token is configured twice"
                ));
            }
            if entry.vault_id.as_deref().is_some_and(str::is_empty) {
                return Err(format!("static_tokens[{i}]: vault_id is empty"));
            }
        }
        Ok(())
    }
}

fn parse_opt<T: std::str::FromStr>(name: &str, value: Option<String>) -> Result<Option<T>, String>
where
    T::Err: std::fmt::Display,
{
    value
        .map(|v| {
            v.trim()
                .parse()
                .map_err(|e| format!("invalid value {v:?} for {name}: {e}"))
        })
        .transpose()
}

fn parse_bool(name: &str, value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        other => Err(format!(
            "invalid value {other:?} for {name}: use true or false"
        )),
    }
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests write fixture files")]
mod tests;
