//! Hosted mode as a user runs it: a database migrated and a vault created with the
//! CLI, then `notevault serve --database URL` instances on it, each with a cache of its
//! own, reached with a static token that names the vault.

use std::process::Command;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::daemon::{self, Daemon};
use super::postgres::{self, TestDb};
use super::BIN;

/// The static token of the tests' vault.
pub const TOKEN: &str = "hosted-test-token-0123456789abcdef";

/// A migrated database holding one vault.
pub struct Hosted {
    pub db: TestDb,
    /// The vault's id, as `vault create` printed it.
    pub vault: String,
}

/// `notevault ARGS --database URL`, which must succeed: its stdout.
pub fn cli(url: &str, args: &[&str]) -> String {
    cli_with(url, args, &[])
}

/// [`cli`] with more environment (`env`).
pub fn cli_with(url: &str, args: &[&str], env: &[(String, String)]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .args(["--database", url])
        .env_remove("NOTEVAULT_CONFIG")
        .env_remove("NOTEVAULT_DATABASE_URL")
        .env_remove("NOTEVAULT_BLOB_STORE")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Hosted {
    /// `None` when PostgreSQL is missing and the developer opted out.
    pub fn new() -> Option<Self> {
        Some(Self::on(postgres::database()?))
    }

    /// A vault in the database `db` (of a cluster a test stops and starts).
    pub fn on(db: TestDb) -> Self {
        cli(&db.url, &["db", "migrate"]);
        let vault = cli(&db.url, &["vault", "create", "team"])
            .trim()
            .to_string();
        Self { db, vault }
    }

    /// The static tokens every instance knows: `TOKEN` for the vault (writes and
    /// reviews), and one naming a vault the database does not hold.
    fn tokens(&self) -> String {
        serde_json::json!([
            {"token": TOKEN, "vault_id": self.vault, "permissions": ["notes.write", "notes.review"]},
            {"token": "hosted-test-token-of-no-vault-0123", "vault_id": uuid_nobody()},
        ])
        .to_string()
    }

    /// A new instance on the database, with an empty cache of its own.
    pub fn instance(&self) -> Instance {
        self.instance_with(&[])
    }

    /// [`Self::instance`] with more environment.
    pub fn instance_with(&self, env: &[(&str, &str)]) -> Instance {
        let cache = tempfile::tempdir().unwrap();
        let dir = cache.path().to_path_buf();
        self.start(cache, &dir, env)
    }

    /// An instance run from a folder of its own with `--state-dir cache`, a relative path
    /// (as a service's working directory makes it).
    pub fn instance_relative(&self) -> Instance {
        let folder = tempfile::tempdir().unwrap();
        let mut command = daemon::serve(BIN);
        command.current_dir(folder.path());
        self.start_command(command, folder, std::path::Path::new("cache"), &[])
    }

    fn start(
        &self,
        cache: tempfile::TempDir,
        dir: &std::path::Path,
        env: &[(&str, &str)],
    ) -> Instance {
        self.start_command(daemon::serve(BIN), cache, dir, env)
    }

    /// An instance that connects to the database with another URL (another role).
    pub fn instance_at(&self, url: &str) -> Instance {
        let cache = tempfile::tempdir().unwrap();
        let dir = cache.path().to_path_buf();
        let mut command = daemon::serve(BIN);
        command.args(["--database", url]);
        self.start_command(command, cache, &dir, &[])
    }

    fn start_command(
        &self,
        mut command: Command,
        cache: tempfile::TempDir,
        dir: &std::path::Path,
        env: &[(&str, &str)],
    ) -> Instance {
        if !command.get_args().any(|a| a == "--database") {
            command.args(["--database", &self.db.url]);
        }
        command
            .args(["--listen", "127.0.0.1:0"])
            .arg("--state-dir")
            .arg(dir)
            .env_remove("NOTEVAULT_DATABASE_URL")
            .env("NOTEVAULT_STATIC_TOKENS", self.tokens())
            .envs(env.iter().copied());
        let daemon = daemon::start(command).expect("the hosted instance serves");
        Instance {
            daemon,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            _cache: cache,
        }
    }
}

fn uuid_nobody() -> &'static str {
    "01000000-0000-7000-8000-000000000000"
}

/// The token naming a vault that does not exist.
pub const NO_VAULT_TOKEN: &str = "hosted-test-token-of-no-vault-0123";

/// One serving instance.
pub struct Instance {
    pub daemon: Daemon,
    client: reqwest::Client,
    _cache: tempfile::TempDir,
}

impl Instance {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.daemon.base)
    }

    /// `method path` with the vault's token, an `Idempotency-Key` and a JSON body when
    /// given.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> reqwest::Response {
        self.try_send(method, path, key, body).await.unwrap()
    }

    /// [`Self::send`], which may fail to get an answer (an instance killed meanwhile).
    pub async fn try_send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> reqwest::Result<reqwest::Response> {
        let mut req = self
            .client
            .request(method, self.url(path))
            .bearer_auth(TOKEN);
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        req.send().await
    }

    /// [`Self::send`], answered with `status`: its JSON body.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
        status: u16,
    ) -> Value {
        let what = format!("{method} {path}");
        let res = self.send(method, path, key, body).await;
        super::res_json(res, status, &what).await
    }

    pub async fn get(&self, path: &str, status: u16) -> Value {
        self.call(Method::GET, path, None, None, status).await
    }
}
