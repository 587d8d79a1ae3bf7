//! A real S3 server for the tests of hosted attachments: `s3s-fs` (crates.io, pinned
//! [`VERSION`]), an S3 protocol server over a folder, checking SigV4 with one access
//! key. Never an in-process mock.
//!
//! The binary is `NOTEVAULT_S3S_FS`, else `s3s-fs` on PATH or in `~/.cargo/bin`; missing,
//! the first test that asks installs it (`cargo install --locked`, once, under a file
//! lock), as `.ci/run` does. `NOTEVAULT_REQUIRE_TOOLS=0` skips instead.
//!
//! [`S3Server::start`] runs one on a free loopback port over a temp folder with the
//! bucket [`BUCKET`]; it is stopped when dropped, and [`S3Server::stop`] /
//! [`S3Server::resume`] stop and start it again on the same port for fault tests.

#![allow(
    clippy::disallowed_methods,
    reason = "the harness reads its settings from the environment"
)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use notevault::auth::Secret;
use notevault::config::Config;

pub const VERSION: &str = "0.14.1";
pub const BUCKET: &str = "notevault-test";
pub const ACCESS_KEY: &str = "notevault-access";
pub const SECRET_KEY: &str = "notevault-secret-key";

fn opted_out() -> bool {
    std::env::var_os("NOTEVAULT_REQUIRE_TOOLS").is_some_and(|v| v == "0")
}

/// The `s3s-fs` binary, installed when missing. `None`: missing and opted out.
pub fn binary() -> Option<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("NOTEVAULT_S3S_FS") {
            return Ok(PathBuf::from(p));
        }
        let cargo_bin = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
            .unwrap_or_default()
            .join("bin/s3s-fs");
        let right = |p: &std::path::Path| {
            Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(VERSION))
        };
        for candidate in [PathBuf::from("s3s-fs"), cargo_bin.clone()] {
            if right(&candidate) {
                return Ok(candidate);
            }
        }
        if opted_out() {
            return Err("not installed".into());
        }
        // Two test binaries at once install it once.
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
        let lock =
            std::fs::File::create(root.join("notevault-s3s-fs.lock")).map_err(|e| e.to_string())?;
        lock.lock().map_err(|e| e.to_string())?;
        if right(&cargo_bin) {
            return Ok(cargo_bin);
        }
        eprintln!("installing s3s-fs {VERSION} (once; a few minutes)");
        let out = Command::new("cargo")
            .args(["install", "--locked", "s3s-fs", "--version", VERSION])
            .args(["--features", "binary"])
            .output()
            .map_err(|e| format!("cargo install did not run: {e}"))?;
        if !out.status.success() || !right(&cargo_bin) {
            return Err(format!(
                "cargo install s3s-fs failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(cargo_bin)
    });
    match found {
        Ok(p) => Some(p.clone()),
        Err(why) if opted_out() => {
            eprintln!(
                "skipped: s3s-fs is missing ({why}); NOTEVAULT_REQUIRE_TOOLS=0 skips its tests"
            );
            None
        }
        Err(why) => panic!(
            "s3s-fs {VERSION} is missing: {why}\n`.ci/run` installs it (cargo install --locked \
             s3s-fs --version {VERSION} --features binary); NOTEVAULT_REQUIRE_TOOLS=0 skips \
             the tests that need it."
        ),
    }
}

/// One `s3s-fs` on loopback over a temp folder.
pub struct S3Server {
    bin: PathBuf,
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Option<Child>,
}

impl S3Server {
    /// Started, with the bucket [`BUCKET`]. `None`: s3s-fs is missing and opted out.
    pub fn start() -> Option<Self> {
        let bin = binary()?;
        let dir = tempfile::tempdir().unwrap();
        // A bucket of s3s-fs is a folder of its root.
        std::fs::create_dir(dir.path().join(BUCKET)).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = Self {
            bin,
            dir,
            port,
            child: None,
        };
        server.resume();
        Some(server)
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Start it again (after [`stop`](Self::stop)), on the same port and folder.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "s3s-fs is running already");
        let child = Command::new(&self.bin)
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("s3s-fs starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "s3s-fs did not listen in time");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stop it (the port refuses connections until [`resume`](Self::resume)).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Point `config` at this server's bucket (`prefix` under it).
    pub fn configure(&self, config: &mut Config, prefix: &str) {
        self.configure_with(config, &format!("s3://{BUCKET}/{prefix}"), SECRET_KEY);
    }

    /// The environment that points a command at this server's bucket (`prefix` under
    /// it), as an operator sets it.
    pub fn env(&self, prefix: &str) -> Vec<(String, String)> {
        vec![
            (
                "NOTEVAULT_BLOB_STORE".into(),
                format!("s3://{BUCKET}/{prefix}"),
            ),
            ("AWS_ACCESS_KEY_ID".into(), ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY".into(), SECRET_KEY.into()),
            ("AWS_REGION".into(), "us-east-1".into()),
            ("AWS_ENDPOINT_URL".into(), self.endpoint()),
            ("AWS_ALLOW_HTTP".into(), "true".into()),
        ]
    }

    /// Point `config` at `url` of this server, signing with `secret`.
    pub fn configure_with(&self, config: &mut Config, url: &str, secret: &str) {
        config.blob_store = Some(url.to_string());
        config.blob_settings = [
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
            ("AWS_SECRET_ACCESS_KEY", secret),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ENDPOINT_URL", &self.endpoint()),
            ("AWS_ALLOW_HTTP", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Secret::new(v)))
        .collect();
    }

    /// The bucket's folder: an object `a/b` is the file `a/b` under it.
    pub fn bucket(&self) -> PathBuf {
        self.dir.path().join(BUCKET)
    }

    /// The objects stored under the bucket (relative paths), for a test to look at what
    /// is visible.
    pub fn objects(&self) -> Vec<String> {
        fn walk(dir: &std::path::Path, base: &std::path::Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, base, out);
                } else {
                    out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
                }
            }
        }
        let base = self.bucket();
        let mut out = Vec::new();
        walk(&base, &base, &mut out);
        out.sort();
        out
    }
}

impl S3Server {
    /// Parts of multipart uploads not completed nor aborted (s3s-fs keeps them at its
    /// root as `.upload_id-<id>.part-<n>`).
    pub fn pending_parts(&self) -> Vec<String> {
        std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".upload_id-"))
            .collect()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
