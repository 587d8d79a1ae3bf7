//! One test body, two modes: [`TestServer`] serving a folder (local mode) or the same
//! folder imported into a hosted vault of a fresh PostgreSQL database (hosted mode), so
//! that an HTTP-level test runs against both without a second copy.
//!
//! Hosted mode runs in this process, as local mode does: what `serve --database` opens
//! (`daemon::hosted::Hosted`: a lobby and the vaults, on two pools) and `http::run_with`,
//! with the test's `tweak` applied to the one `Config` they share. The folder comes in
//! by `notevault import` after a local scan recorded its history, as a user brings one
//! in; the client sends the vault's static token on every request (a default header),
//! with what local mode's open access grants (write and review).

use std::path::PathBuf;
use std::sync::Arc;

use notevault::auth::{Permission, StaticToken, TokenKind};
use notevault::config::Config;
use notevault::daemon::hosted::{Hosted as Served, HostedVaults};
use notevault::hosted::{Database, Options};
use notevault::vaults::Directory;

use super::hosted::{cli_with, Hosted, TOKEN};
use super::postgres::{self, TestDb};
use super::TestServer;

/// Where a [`TestServer`] keeps its notes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A folder, the truth; history, SQLite and the index in its state dir.
    Local,
    /// A vault of a PostgreSQL database, reached with its bearer token.
    Hosted,
}

/// Whether hosted mode can run here: false only when PostgreSQL is missing and the
/// developer opted out (`NOTEVAULT_REQUIRE_TOOLS=0`), as `Hosted::new` skips.
pub fn hosted_available() -> bool {
    postgres::database().is_some()
}

/// `test_in_both_modes!(name, other (flavor = "multi_thread"), ...)`: for each
/// `async fn name(mode: Mode)` of the module, a `#[tokio::test]` in `mod local` and one in
/// `mod hosted` (skipped, saying so, where hosted mode cannot run).
#[macro_export]
macro_rules! test_in_both_modes {
    ($($name:ident $(($($flavor:tt)*))?),* $(,)?) => {
        mod local {
            $(
                #[tokio::test $(($($flavor)*))?]
                async fn $name() {
                    super::$name($crate::common::Mode::Local).await
                }
            )*
        }
        mod hosted {
            $(
                #[tokio::test $(($($flavor)*))?]
                async fn $name() {
                    if !$crate::common::mode::hosted_available() {
                        return;
                    }
                    super::$name($crate::common::Mode::Hosted).await
                }
            )*
        }
    };
}

/// What a hosted [`TestServer`] holds beyond the local one's fields.
pub struct HostedParts {
    pub directory: Arc<HostedVaults>,
    served: Option<Served>,
    /// The vault's id, as `vault create` printed it.
    pub vault_id: String,
    /// Taken by a restart, which serves it anew.
    pub db: Option<TestDb>,
    /// The S3 server holding the vault's attachment bytes (`None`: s3s-fs is missing and
    /// the developer opted out; attachments then answer `BLOB_STORE_UNAVAILABLE`).
    pub s3: Option<super::s3::S3Server>,
    _cache: tempfile::TempDir,
}

impl Drop for HostedParts {
    /// What `serve --database` does at its end: the vaults and the lobby stop (the
    /// `LISTEN` task too), before the database is dropped under them.
    fn drop(&mut self) {
        if let Some(served) = self.served.take() {
            served.stop();
        }
    }
}

/// The static token hosted tests send: local open mode's grants, for the one vault.
pub fn vault_token(vault_id: &str) -> StaticToken {
    StaticToken {
        token: TOKEN.to_string(),
        permissions: vec![Permission::NotesWrite, Permission::NotesReview],
        kind: TokenKind::default(),
        vault_id: Some(vault_id.to_string()),
    }
}

impl TestServer {
    /// [`TestServer::start`] in `mode`.
    pub async fn start_as(
        mode: Mode,
        source: Option<&str>,
        tweak: impl FnOnce(&mut Config),
    ) -> Self {
        let (dir, vault, state) = super::temp_vault(source);
        Self::start_in_as(mode, dir, vault, state, tweak).await
    }

    /// [`TestServer::start_in`] in `mode`: hosted, the folder `vault` (its state in
    /// `state`) is imported into a new vault and served from the database; `vault` and
    /// `state` stay as they were imported, for a test to compare with.
    pub async fn start_in_as(
        mode: Mode,
        dir: tempfile::TempDir,
        vault: PathBuf,
        state: PathBuf,
        tweak: impl FnOnce(&mut Config),
    ) -> Self {
        match mode {
            Mode::Local => Self::start_in(dir, vault, state, tweak).await,
            Mode::Hosted => start_hosted(dir, vault, state, tweak).await,
        }
    }

    /// A client that sends no credential of its own (the harness's client sends the
    /// vault's token in hosted mode).
    pub fn anonymous(&self) -> reqwest::Client {
        reqwest::Client::new()
    }

    /// The hosted parts; panics in local mode.
    pub fn hosted(&self) -> &HostedParts {
        self.hosted.as_ref().expect("a hosted test server")
    }

    /// The S3 server of a hosted test server, to stop and resume it.
    pub fn s3_mut(&mut self) -> &mut super::s3::S3Server {
        let parts = self.hosted.as_mut().expect("a hosted test server");
        parts
            .s3
            .as_mut()
            .expect("s3s-fs serves the hosted vault's blobs")
    }

    /// Stop and serve the same vault again with `tweak`: local, a new daemon on the
    /// folder and its state; hosted, a new instance (an empty cache) on the database.
    pub async fn restart(self, tweak: impl FnOnce(&mut Config)) -> Self {
        match self.mode {
            Mode::Local => {
                let (dir, vault, state) = self.stop().await;
                Self::start_in(dir, vault, state, tweak).await
            }
            Mode::Hosted => {
                let mut this = self;
                let parts = this.hosted.as_mut().expect("a hosted test server");
                let (db, vault_id) = (parts.db.take().unwrap(), parts.vault_id.clone());
                let s3 = parts.s3.take();
                let (dir, vault, state) = this.stop().await;
                serve_hosted(dir, vault, state, db, vault_id, s3, tweak).await
            }
        }
    }

    /// The file of the note at `rel` (vault-relative, `.md`) as the server holds it:
    /// local, the folder's bytes; hosted, the database's (as `/raw` answers them, which
    /// local mode's tests show are the file's). `None`: there is no such note.
    pub async fn note_file(&self, rel: &str) -> Option<String> {
        match self.mode {
            Mode::Local => std::fs::read_to_string(self.vault.join(rel)).ok(),
            Mode::Hosted => {
                let slug = rel.strip_suffix(".md").expect("a note's path ends in .md");
                let res = self.get(&format!("/v1/notes/{}/raw", encode(slug))).await;
                match res.status().as_u16() {
                    404 => None,
                    200 => {
                        let body: serde_json::Value = res.json().await.unwrap();
                        assert_eq!(body["path"], rel, "{body}");
                        Some(body["content"].as_str().unwrap().to_string())
                    }
                    other => panic!("GET raw {rel}: {other}"),
                }
            }
        }
    }

    /// Whether the vault holds `rel`: local, the path exists in the folder; hosted, a note
    /// at `rel` (an `.md` path) or under it (a folder).
    pub async fn holds(&self, rel: &str) -> bool {
        match self.mode {
            Mode::Local => self.vault.join(rel).exists(),
            Mode::Hosted if rel.ends_with(".md") => self.note_file(rel).await.is_some(),
            Mode::Hosted => {
                let path = format!("/v1/notes?prefix={}/&page_size=1", encode(rel));
                let list = self.get_json(&path, 200).await;
                !list["notes"].as_array().unwrap().is_empty()
            }
        }
    }
}

/// `text` percent-encoded for a path or a query, `/` kept.
fn encode(text: &str) -> String {
    text.split('/')
        .map(|part| form_urlencoded::byte_serialize(part.as_bytes()).collect::<String>())
        .collect::<Vec<_>>()
        .join("/")
        .replace('+', "%20")
}

async fn start_hosted(
    dir: tempfile::TempDir,
    vault: PathBuf,
    state: PathBuf,
    tweak: impl FnOnce(&mut Config),
) -> TestServer {
    // The folder's history recorded by a local scan, then imported as a user brings a
    // folder in.
    let scan = Config {
        vault: vault.clone(),
        state_dir: Some(state.clone()),
        watch: false,
        ..Config::default()
    };
    tokio::task::spawn_blocking(move || {
        notevault::daemon::open(scan)
            .expect("the folder is scanned")
            .stop()
    })
    .await
    .unwrap();
    let db = postgres::database().expect("PostgreSQL (hosted_available was checked)");
    let Hosted {
        db,
        vault: vault_id,
    } = Hosted::on(db);
    // The attachments go to the blob store the instance will read (when there is one).
    let s3 = super::s3::S3Server::start();
    let mut args = vec![
        "import",
        vault.to_str().unwrap(),
        "--vault",
        &vault_id,
        "--state-dir",
        state.to_str().unwrap(),
    ];
    let env = match &s3 {
        Some(s3) => s3.env("tests"),
        None => {
            args.push("--skip-attachments");
            Vec::new()
        }
    };
    let out = cli_with(&db.url, &args, &env);
    assert!(out.starts_with("imported "), "{out}");
    serve_hosted(dir, vault, state, db, vault_id, s3, tweak).await
}

/// A new instance, with an empty cache of its own, serving `vault_id` of `db`.
async fn serve_hosted(
    dir: tempfile::TempDir,
    vault: PathBuf,
    state: PathBuf,
    db: TestDb,
    vault_id: String,
    s3: Option<super::s3::S3Server>,
    tweak: impl FnOnce(&mut Config),
) -> TestServer {
    let cache = tempfile::tempdir().unwrap();
    let mut config = Config {
        vault: cache.path().join("unused"),
        state_dir: Some(cache.path().to_path_buf()),
        listen: "127.0.0.1:0".parse().unwrap(),
        database_url: Some(notevault::auth::Secret::new(db.url.clone())),
        static_tokens: vec![vault_token(&vault_id)],
        ..Config::default()
    };
    if let Some(s3) = &s3 {
        s3.configure(&mut config, "tests");
    }
    tweak(&mut config);
    // As `serve` makes it: auth is always on in hosted mode.
    config.auth_required = true;
    // A token for any vault the daemon serves is one for this vault here (`serve`
    // refuses a static token that names none).
    for token in &mut config.static_tokens {
        token.vault_id.get_or_insert_with(|| vault_id.clone());
    }
    // The harness's own client keeps its token beside a test's (its reads: `note_file`,
    // `holds`); a test's requests without it go through `anonymous`.
    if !config.static_tokens.iter().any(|t| t.token == TOKEN) {
        config.static_tokens.push(vault_token(&vault_id));
    }
    let pool = |max_connections| Options {
        max_connections,
        ..Options::default()
    };
    let stores = Database::open(&db.url, pool(8)).expect("the database opens");
    let keys = Database::open(&db.url, pool(8)).expect("the database opens");
    let (opened, at) = (config.clone(), cache.path().to_path_buf());
    let served = tokio::task::spawn_blocking(move || Served::open(&opened, stores, keys, &at))
        .await
        .unwrap()
        .expect("hosted mode opens");
    let directory = served.vaults.clone();
    let (opened, id) = (directory.clone(), vault_id.clone());
    let svc = tokio::task::spawn_blocking(move || opened.open(&id))
        .await
        .unwrap()
        .expect("the vault opens")
        .expect("the vault is served");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (directory_served, lobby_state) = (directory.clone(), served.lobby.state.clone());
    let task = tokio::spawn(async move {
        notevault::http::run_with(
            listener,
            notevault::vaults::Vaults::from(lobby_state),
            Some(directory_served as Arc<dyn Directory>),
            async {
                let _ = rx.await;
            },
        )
        .await
        .unwrap();
    });
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {TOKEN}").parse().unwrap(),
    );
    TestServer {
        base: format!("http://{addr}"),
        vault,
        state,
        svc,
        daemon: None,
        client: reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap(),
        mode: Mode::Hosted,
        hosted: Some(HostedParts {
            directory,
            served: Some(served),
            vault_id,
            db: Some(db),
            s3,
            _cache: cache,
        }),
        _dir: dir,
        shutdown: Some(tx),
        task: Some(task),
    }
}
