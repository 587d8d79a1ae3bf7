//! Shared test harness: a real server on 127.0.0.1:0 over a temporary copy of a vault.
#![allow(dead_code)]
#![allow(
    clippy::disallowed_methods,
    reason = "the harness plays an editor and a crash: it writes and renames notes itself"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use notevault::config::Config;
use notevault::state::State;
use reqwest::Method;
use serde_json::Value;

pub mod daemon;
pub mod device;
pub mod fleet;
pub mod hosted;
pub mod idp;
pub mod jwt;
pub mod loopfs;
pub mod mode;
pub mod postgres;
pub mod s3;
pub mod tools;

pub use daemon::{Daemon, BIN};
pub use mode::Mode;

pub struct TestServer {
    pub base: String,
    pub vault: PathBuf,
    pub state: PathBuf,
    pub svc: Arc<State>,
    /// The daemon (its watcher); dropped with the server.
    pub daemon: Option<notevault::daemon::Daemon>,
    pub client: reqwest::Client,
    /// Local: `vault` is served. Hosted: `vault` and `state` are the folder as it was
    /// imported, `svc` the hosted vault's state (`mode.rs`).
    pub mode: Mode,
    hosted: Option<mode::HostedParts>,
    _dir: tempfile::TempDir,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// `notevault token create --name NAME [--scope S]...` for the vault: the token it printed.
pub fn create_pat(vault: &Path, state: &Path, name: &str, scopes: &[&str]) -> String {
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["token", "create", "--name", name]);
    for scope in scopes {
        cmd.args(["--scope", scope]);
    }
    let out = cmd
        .arg("--state-dir")
        .arg(state)
        .arg(vault)
        .env_remove("NOTEVAULT_CONFIG")
        .output()
        .unwrap();
    assert!(out.status.success(), "token create: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Copy a folder, keeping symlinks as symlinks.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        let ft = entry.file_type().unwrap();
        if ft.is_symlink() {
            let link = std::fs::read_link(entry.path()).unwrap();
            std::os::unix::fs::symlink(link, &target).unwrap();
        } else if ft.is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

pub fn repo_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A temp dir as [`temp_vault`] makes, its vault holding `folders` of the shared corpus
/// (`realvault/<folder>` of `../shared/corpora/realvault.tar.gz`, unpacked by `tar`).
/// `None` where the corpus is absent: it is data beside the repository, not a tool, so a
/// test on it skips there (shared/corpora/README.md), saying so; unless
/// `NOTEVAULT_REQUIRE_CORPUS=1` (CI, which has it) says a skip would hide a failure.
pub fn corpus_vault(folders: &[&str]) -> Option<(tempfile::TempDir, PathBuf, PathBuf)> {
    let tarball = repo_path("../shared/corpora/realvault.tar.gz");
    if !tarball.exists() {
        let why = format!(
            "{} is absent (the shared corpora live beside the repository)",
            tarball.display()
        );
        assert!(
            std::env::var_os("NOTEVAULT_REQUIRE_CORPUS").is_none_or(|v| v != "1"),
            "{why}, and NOTEVAULT_REQUIRE_CORPUS=1 forbids skipping"
        );
        eprintln!("skipped: {why}");
        return None;
    }
    let (dir, vault, state) = temp_vault(None);
    let ok = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&vault)
        .arg("--strip-components=1")
        .args(folders.iter().map(|f| format!("realvault/{f}")))
        .status()
        .unwrap()
        .success();
    assert!(ok, "tar extracts {folders:?} of the corpus");
    Some((dir, vault, state))
}

/// A temp dir holding `vault/` (a copy of `source`, or empty) and `state/`.
pub fn temp_vault(source: Option<&str>) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let vault = root.join("vault");
    match source {
        Some(src) => copy_tree(&repo_path(src), &vault),
        None => std::fs::create_dir_all(&vault).unwrap(),
    }
    // fixtures/edge/link-outside.md points at ../outside/secret.md: keep that true.
    if source == Some("fixtures/edge") {
        copy_tree(&repo_path("fixtures/outside"), &root.join("outside"));
    }
    (dir, vault.clone(), root.join("state"))
}

impl TestServer {
    /// Serve a copy of `source` (a folder of the repository) with `tweak` applied to the config.
    pub async fn start(source: Option<&str>, tweak: impl FnOnce(&mut Config)) -> Self {
        let (dir, vault, state) = temp_vault(source);
        Self::start_in(dir, vault, state, tweak).await
    }

    pub async fn start_in(
        dir: tempfile::TempDir,
        vault: PathBuf,
        state: PathBuf,
        tweak: impl FnOnce(&mut Config),
    ) -> Self {
        let mut config = Config {
            vault: vault.clone(),
            state_dir: Some(state.clone()),
            listen: "127.0.0.1:0".parse().unwrap(),
            ..Config::default()
        };
        tweak(&mut config);
        let daemon = tokio::task::spawn_blocking(move || notevault::daemon::open(config))
            .await
            .unwrap()
            .expect("daemon opens");
        let svc = daemon.state.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task_svc = svc.clone();
        let task = tokio::spawn(async move {
            notevault::http::run(listener, task_svc, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        Self {
            base: format!("http://{addr}"),
            vault,
            state,
            svc,
            daemon: Some(daemon),
            client: reqwest::Client::new(),
            mode: Mode::Local,
            hosted: None,
            _dir: dir,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// Stop serving and hand back the folders, for a restart on the same state: once it
    /// returns, nothing of this daemon writes the vault or the state dir (the watcher, a
    /// rescan, the index writer and the history writer have stopped, having written
    /// what they held).
    pub async fn stop(self) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let TestServer {
            _dir,
            vault,
            state,
            svc,
            daemon,
            shutdown,
            task,
            hosted,
            ..
        } = self;
        if let Some(tx) = shutdown {
            let _ = tx.send(());
        }
        if let Some(task) = task {
            task.await.unwrap();
        }
        if let Some(hosted) = hosted {
            tokio::task::spawn_blocking(move || drop(hosted))
                .await
                .unwrap();
        }
        if let Some(daemon) = daemon {
            tokio::task::spawn_blocking(move || daemon.stop())
                .await
                .unwrap();
        }
        assert_eq!(
            svc.history.status().pending,
            0,
            "history wrote what was queued before the stop"
        );
        (_dir, vault, state)
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    /// Send a write with an `Idempotency-Key` and a JSON body.
    pub async fn write(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        body: Value,
    ) -> reqwest::Response {
        self.client
            .request(method, self.url(path))
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// Send `method path`, with an `Idempotency-Key` and a JSON body when given.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> reqwest::Response {
        let mut req = self.client.request(method, self.url(path));
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        req.send().await.unwrap()
    }

    /// [`Self::send`], asserting the status; the JSON answer.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
        status: u16,
    ) -> Value {
        let what = format!("{method} {path}");
        res_json(self.send(method, path, key, body).await, status, &what).await
    }

    /// [`Self::send`], asserting the error envelope of `reason` with `status`; `what`
    /// names the case in every assertion message.
    #[allow(clippy::too_many_arguments)]
    pub async fn refused(
        &self,
        what: &str,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
        status: u16,
        reason: &str,
    ) -> Value {
        let what = format!("{what} ({method} {path})");
        let res = self.send(method, path, key, body).await;
        let request_id = res
            .headers()
            .get("x-request-id")
            .map(|v| v.to_str().unwrap().to_string());
        let body = res_json(res, status, &what).await;
        assert_envelope_for(&what, &body, status, reason);
        assert_eq!(
            request_id.as_deref(),
            body["requestId"].as_str(),
            "{what}: X-Request-Id equals requestId"
        );
        body
    }

    /// GET and parse JSON, asserting the status.
    pub async fn get_json(&self, path: &str, status: u16) -> Value {
        let res = self.get(path).await;
        assert_eq!(res.status().as_u16(), status, "GET {path}");
        res.json().await.unwrap()
    }

    /// A table of writes that must be refused, `(what, method, path, body, status,
    /// reason)`: each is sent with an `Idempotency-Key` of its own and answers the
    /// envelope of its reason, or the assertion names it. The answers, in order.
    pub async fn refuse_all<'a, P: AsRef<str>>(
        &self,
        cases: impl IntoIterator<Item = (&'a str, Method, P, Option<Value>, u16, &'a str)>,
    ) -> Vec<Value> {
        static NEXT_KEY: AtomicU64 = AtomicU64::new(0);
        let mut answers = Vec::new();
        for (what, method, path, body, status, reason) in cases {
            let key = format!("refused-{}", NEXT_KEY.fetch_add(1, Ordering::Relaxed));
            let path = path.as_ref();
            let answer = self
                .refused(what, method, path, Some(&key), body, status, reason)
                .await;
            answers.push(answer);
        }
        answers
    }

    /// GET expecting an error envelope with `reason`.
    pub async fn get_error(&self, path: &str, status: u16, reason: &str) -> Value {
        self.refused(path, Method::GET, path, None, None, status, reason)
            .await
    }
}

pub async fn res_json(res: reqwest::Response, status: u16, what: &str) -> Value {
    let got = res.status().as_u16();
    let text = res.text().await.unwrap();
    assert_eq!(got, status, "{what}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {text}"))
}

/// Every field of the spec's error envelope, with the right reason.
pub fn assert_envelope(body: &Value, status: u16, reason: &str) {
    assert_envelope_for("", body, status, reason);
}

/// [`assert_envelope`], naming the case `what` in its messages.
pub fn assert_envelope_for(what: &str, body: &Value, status: u16, reason: &str) {
    assert_eq!(body["reason"], reason, "{what}: {body}");
    assert_eq!(body["statusCode"], status, "{what}: {body}");
    for field in ["error", "message", "requestId", "hint", "help"] {
        assert!(
            body[field].as_str().is_some_and(|s| !s.is_empty()),
            "{what}: {field} missing in {body}"
        );
    }
    assert!(
        body["help"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/api/errors#{}", reason.to_lowercase())),
        "{what}: {body}"
    );
    let details = body["details"].as_array().expect("details");
    assert!(
        details.iter().all(|d| d["@type"].is_string()),
        "{what}: {body}"
    );
    assert!(
        details
            .iter()
            .any(|d| d["@type"].as_str().unwrap().ends_with("ErrorInfo") && d["reason"] == reason),
        "{what}: {body}"
    );
}

/// The first detail of `body` whose `@type` ends with `kind` (`BadRequest`, `ErrorInfo`,
/// `RetryInfo`).
pub fn detail<'a>(body: &'a Value, kind: &str) -> &'a Value {
    body["details"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["@type"].as_str().unwrap().ends_with(kind))
        .unwrap_or_else(|| panic!("no {kind} detail in {body}"))
}

/// The field the first violation of a `BadRequest` detail names.
pub fn violated_field(body: &Value) -> &Value {
    &detail(body, "BadRequest")["fieldViolations"][0]["field"]
}

/// How long [`eventually`] waits: a bound on something that must happen, never a measure
/// of speed.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Poll until `check` holds, or fail with `what` after [`PATIENCE`].
pub async fn eventually<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    eventually_within(PATIENCE, what, check).await
}

/// [`eventually`] with another bound, for a caller that waits on something slower.
pub async fn eventually_within<F, Fut>(limit: Duration, what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    assert!(
        poll_until(limit, check).await,
        "timed out after {limit:?} waiting for: {what}"
    );
}

/// Poll `check` every 20 ms until it holds (true) or `limit` has passed (false): the one
/// polling loop of the tests, for a caller that must act before it fails (stop a child
/// process, say).
pub async fn poll_until<F, Fut>(limit: Duration, check: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    loop {
        if check().await {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Wait until the history thread has nothing pending.
pub async fn wait_history(svc: &State) {
    eventually("history settles", || async {
        svc.history.status().pending == 0
    })
    .await;
}

/// Run the git CLI on `history.git`.
pub fn git(state: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "core.quotePath=false"])
        .arg("--git-dir")
        .arg(state.join("history.git"))
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every `.md` file under `root` (vault-relative), skipping dot folders.
pub fn temp_list(root: &Path) -> Vec<String> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.file_name().to_string_lossy().ends_with(".md"))
        .map(|e| {
            e.path()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// Every file under `root` (state dir and symlinks excluded) with its bytes and mtime, to
/// prove that nothing changed.
pub fn snapshot(
    root: &Path,
) -> std::collections::BTreeMap<String, (Vec<u8>, std::time::SystemTime)> {
    let mut out = std::collections::BTreeMap::new();
    for entry in walkdir::WalkDir::new(root).follow_links(false) {
        let entry = entry.unwrap();
        let rel = entry
            .path()
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel.starts_with(".notevault") || !entry.file_type().is_file() {
            continue;
        }
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        out.insert(
            rel,
            (
                std::fs::read(entry.path()).unwrap(),
                meta.modified().unwrap(),
            ),
        );
    }
    out
}

/// The daemon as a user runs it, on `vault` with its state in `state` and `env` set:
/// its address, read from the line it prints, and its stderr ([`Daemon::rest`]).
pub fn spawn(vault: &Path, state: &Path, env: &[(&str, &str)]) -> Daemon {
    spawn_on("127.0.0.1:0", vault, state, env)
}

/// [`spawn`] listening on `listen` (a restart on the address a client knows).
pub fn spawn_on(listen: &str, vault: &Path, state: &Path, env: &[(&str, &str)]) -> Daemon {
    let mut command = daemon::command(BIN, listen, vault, Some(state));
    command.envs(env.iter().copied());
    daemon::start(command).expect("the daemon serves")
}

/// A loopback address nothing listens on while the returned socket lives: bound, never
/// listening, so a connection is refused, and no other test (a thread of this process or
/// a daemon it spawned) can be handed the port meanwhile, as a port bound and let go can.
pub fn closed_port() -> (tokio::net::TcpSocket, std::net::SocketAddr) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    (socket, addr)
}

pub fn blake3_of(bytes: &str) -> String {
    format!("blake3:{}", blake3::hash(bytes.as_bytes()).to_hex())
}

/// Leave the state a crash right after an API write's exchange leaves (as `fsio` makes
/// it: the exchange keeps inodes and their attributes, so the mark is on our file, at the
/// note's path): `ours` at `path`, marked, and the note as it was, `swapped_out`, under the
/// temp file's name; the write expected `expected`. False where the vault keeps no user
/// extended attributes.
pub fn crash_after_the_exchange(
    path: &Path,
    swapped_out: &str,
    ours: &str,
    expected: &str,
) -> bool {
    let temp = path.with_file_name(".notevault-tmp-m0194d3a5c0de7000a000000000000001-a.md");
    std::fs::rename(path, &temp).unwrap();
    std::fs::write(&temp, swapped_out).unwrap();
    std::fs::write(path, ours).unwrap();
    let value = format!(
        "{}\n{}\n{}\n{}",
        temp.file_name().unwrap().to_str().unwrap(),
        blake3_of(expected),
        blake3_of(ours),
        path.file_name().unwrap().to_str().unwrap()
    );
    let at = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: NUL-terminated path and attribute name, a value that lives across the call.
    let rc = unsafe {
        libc::setxattr(
            at.as_ptr(),
            c"user.notevault.temp".as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    rc == 0
}

/// The `name=value` of the cookie `name` that `res` sets, if it sets one.
pub fn cookie_of(res: &reqwest::Response, name: &str) -> Option<String> {
    res.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap().to_string())
}
