//! The reference device client (`notevault device init|pull|push|passphrase|rotate-key`): keeps a
//! folder in step with a daemon through the sync plane, and holds the keys of private
//! notes, which never leave it.
//!
//! Keys: the passphrase (or the recovery key) → scrypt (N 131072, r 8, p 1, a random
//! 16-byte salt) → a key-encryption key, which wraps a random 32-byte data key with
//! XChaCha20-Poly1305 (`wrappedDek` = base64 of nonce ‖ ciphertext, associated data
//! `notevault-dek v1`). The daemon stores only the salt and the wraps.
//!
//! Private notes: a device file `<name>.private.md` is the private note whose file on the
//! daemon is `<name>.nvpriv`, an envelope:
//!
//! ```text
//! notevault-private v1
//! key-version: 1
//! <base64 of nonce ‖ XChaCha20-Poly1305(data key, note bytes, aad = first line ‖ path)>
//! ```
//!
//! The device keeps what it last synced in `<folder>/.notevault-device/state.json`
//! (paths, ids, versions and hashes; never a key or a passphrase), and the ops it sent
//! that are not settled yet, each with its own Idempotency-Key, in `outbox.json` beside
//! it. Only an edit whose base moved on the daemon (`VERSION_MOVED`) is kept as a
//! conflicted copy (`<name> (conflict <device>).md`); any other refusal leaves the file
//! and the state as they were, and the next push sends the same op under the same key
//! (see `push`). A file renamed or moved on the device is pushed as a move (the note
//! keeps its id; the daemon rewrites the links to it), also when it was edited too (the
//! move, then the edit; see `moves`). An edit or a move whose base
//! moved only by another device's rename, move or edit of the other kind goes again on
//! the daemon's version instead of becoming a conflict (see `rebase`): a rename on one
//! device and an edit on another end as one note, id kept, at the new path, with the
//! edit. Attachments (every other file) are pushed and pulled too, their bytes sent
//! only when changed (see `attachments`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::sync::e2ee::{SCRYPT_N, SCRYPT_P, SCRYPT_R};
use crate::vault::{content_hash, PRIVATE_SUFFIX};

mod attachments;
mod crypto;
mod moves;
mod pull;
mod push;
mod rebase;
mod rotate;

pub use crypto::{decrypt_note, encrypt_note};
use crypto::{envelope_version, random, unwrap_ring, wrap, wrap_ring};
pub use push::{PushReport, Refusal};
pub use rotate::rotate_key;

const STATE_DIR: &str = ".notevault-device";
const LOCAL_PRIVATE: &str = ".private.md";

/// What the device last synced of one file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Synced {
    /// Where the daemon keeps it.
    pub server_path: String,
    pub note_id: Option<String>,
    /// The version the next push is based on: a `version_id`, or for a private note the
    /// file's `sha256:<hex>`.
    pub base: String,
    /// `blake3:<hex>` of the device's bytes when synced (a change since is an edit).
    pub local_hash: String,
    pub private: bool,
    pub attachment: bool,
}

/// The device's state file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DeviceState {
    pub server: String,
    pub device_id: String,
    /// The last seq applied (`None`: read the snapshot first).
    pub seq: Option<i64>,
    /// By device path.
    pub files: BTreeMap<String, Synced>,
}

/// One device: its folder, its state, a client for its daemon, and (when known) the
/// data key.
pub struct Device {
    pub root: PathBuf,
    pub state: DeviceState,
    token: Option<String>,
    http: reqwest::Client,
    dek: Option<[u8; 32]>,
    /// Every key the hierarchy wraps, newest first (more than one only while a rotation
    /// re-encrypts the notes), and the `keyVersion` of the first.
    ring: Vec<[u8; 32]>,
    ring_version: u64,
    /// Conflicted copies made in this run: (the file, its copy).
    pub kept: Vec<(String, String)>,
}

/// An error answer as a user reads it: status, reason, message and the daemon's hint.
fn refusal_text(status: u16, v: &Value) -> String {
    let mut text = format!(
        "{status} {}: {}",
        v["reason"].as_str().unwrap_or("?"),
        v["message"].as_str().unwrap_or("")
    );
    if let Some(hint) = v["hint"].as_str().filter(|h| !h.is_empty()) {
        text.push_str(&format!(" (hint: {hint})"));
    }
    text
}

/// The device path of a daemon path: `x.nvpriv` ↔ `x.private.md`.
fn local_of(server_path: &str, private: bool) -> String {
    match server_path.strip_suffix(PRIVATE_SUFFIX) {
        Some(stem) if private => format!("{stem}{LOCAL_PRIVATE}"),
        _ => server_path.to_string(),
    }
}

fn server_of(local: &str) -> (String, bool) {
    match local.strip_suffix(LOCAL_PRIVATE) {
        Some(stem) => (format!("{stem}{PRIVATE_SUFFIX}"), true),
        None => (local.to_string(), false),
    }
}

/// A conflicted copy's name beside `path` that nothing in `root` holds yet (an older
/// conflicted copy is never overwritten).
fn conflict_name(root: &Path, path: &str, device: &str) -> String {
    let (stem, ext) = match path.strip_suffix(LOCAL_PRIVATE) {
        Some(stem) => (stem, LOCAL_PRIVATE),
        None => path
            .rsplit_once('.')
            .map_or((path, ""), |(s, _)| (s, &path[s.len()..])),
    };
    let mut name = format!("{stem} (conflict {device}){ext}");
    let mut n = 2;
    while root.join(&name).symlink_metadata().is_ok() {
        name = format!("{stem} (conflict {device} {n}){ext}");
        n += 1;
    }
    name
}

#[allow(
    clippy::disallowed_methods,
    reason = "the device client writes its own folder, not a vault"
)]
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| anyhow!("{} has no folder", path.display()))?;
    std::fs::create_dir_all(dir)?;
    // A temp file beside it, then a rename: a crash leaves the old file or the new one,
    // never a torn one (the walk of the folder skips the hidden temp name).
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temp = dir.join(format!(".{name}.notevault-device-tmp"));
    std::fs::write(&temp, bytes)
        .and_then(|()| std::fs::File::open(&temp)?.sync_all())
        .and_then(|()| std::fs::rename(&temp, path))
        .with_context(|| format!("cannot write {}", path.display()))
}

#[allow(
    clippy::disallowed_methods,
    reason = "the device client changes its own folder, not a vault"
)]
fn rename_file(from: &Path, to: &Path) -> Result<()> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::rename(from, to).with_context(|| format!("cannot move {}", from.display()))
}

#[allow(
    clippy::disallowed_methods,
    reason = "the device client changes its own folder, not a vault"
)]
fn remove_file(path: &Path) {
    let _ = std::fs::remove_file(path);
}

impl Device {
    /// Open a device folder set up by `init`.
    pub fn open(root: &Path, token: Option<String>) -> Result<Self> {
        let file = root.join(STATE_DIR).join("state.json");
        let text = std::fs::read_to_string(&file).with_context(|| {
            format!(
                "{} is not a device folder (run `notevault device init`)",
                root.display()
            )
        })?;
        Ok(Self {
            root: root.to_path_buf(),
            state: serde_json::from_str(&text).context("the device state is unreadable")?,
            token,
            // No pooled connections: a request after a slow step (scrypt takes seconds on
            // a loaded machine) on a connection the daemon has closed as idle fails with
            // "connection closed before message completed".
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .context("cannot make an HTTP client")?,
            dek: None,
            ring: Vec::new(),
            ring_version: 0,
            kept: Vec::new(),
        })
    }

    fn save(&self) -> Result<()> {
        let json = serde_json::to_vec_pretty(&self.state)?;
        let file = self.root.join(STATE_DIR).join("state.json");
        // Unchanged state is not rewritten.
        if std::fs::read(&file).is_ok_and(|old| old == json) {
            return Ok(());
        }
        write_file(&file, &json)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.state.server.trim_end_matches('/'))
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        key: Option<&str>,
    ) -> Result<(u16, Value)> {
        let mut req = self.http.request(method, self.url(path));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.state.server))?;
        let status = res.status().as_u16();
        let body = res.json().await.unwrap_or(Value::Null);
        Ok((status, body))
    }

    async fn ok(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        key: Option<&str>,
    ) -> Result<Value> {
        match self.call(method.clone(), path, body, key).await? {
            (200..=299, v) => Ok(v),
            (status, v) => bail!("{method} {path}: {}", refusal_text(status, &v)),
        }
    }

    /// The wrapped-key state.
    async fn keys(&self) -> Result<Value> {
        self.ok(reqwest::Method::GET, "/v1/sync/e2ee", None, None)
            .await
    }

    /// Unwrap the data key with the passphrase (private notes on) or note that there is
    /// none (off).
    pub async fn unlock(&mut self, passphrase: Option<&str>) -> Result<()> {
        let state = self.keys().await?;
        let Some(h) = state["hierarchy"].as_object() else {
            return Ok(());
        };
        let passphrase = passphrase.ok_or_else(|| {
            anyhow!("private notes are on: give the passphrase (NOTEVAULT_PASSPHRASE)")
        })?;
        self.ring = unwrap_ring(
            passphrase,
            h["kdf"]["salt"].as_str().unwrap_or(""),
            h["wrappedDek"].as_str().unwrap_or(""),
        )?;
        self.dek = self.ring.first().copied();
        self.ring_version = h["keyVersion"].as_u64().unwrap_or(1);
        Ok(())
    }

    /// The key an envelope was sealed under, from the ring.
    fn key_for(&self, server_path: &str, envelope: &[u8]) -> Result<[u8; 32]> {
        if self.ring.is_empty() {
            bail!("a private note arrived: unlock with the passphrase");
        }
        let sealed = envelope_version(envelope).unwrap_or(1);
        if sealed > self.ring_version {
            bail!(
                "{server_path} is sealed with keyVersion {sealed}, newer than this device's \
                 keyVersion {}: run `notevault device pull` to read the new key hierarchy",
                self.ring_version
            );
        }
        let age = (self.ring_version - sealed) as usize;
        self.ring.get(age).copied().ok_or_else(|| {
            anyhow!(
                "{server_path} is sealed with keyVersion {sealed}, which the key hierarchy \
                 (keyVersion {}) no longer holds: a device that has it pushes it again",
                self.ring_version
            )
        })
    }

    async fn key_version(&self) -> Result<u64> {
        Ok(self.keys().await?["hierarchy"]["keyVersion"]
            .as_u64()
            .unwrap_or(1))
    }

    fn local_hash(&self, local: &str) -> Option<String> {
        std::fs::read(self.root.join(local))
            .ok()
            .map(|b| content_hash(&b))
    }
}

/// `notevault device init`: make the folder a device of `server`; with a passphrase,
/// turn private notes on (the first device) or unlock them (a later one). A recovery
/// key, when asked for, is made and answered (show it once). Then pull.
pub async fn init(
    root: &Path,
    server: &str,
    device_id: &str,
    token: Option<String>,
    passphrase: Option<&str>,
    recovery: bool,
) -> Result<Option<String>> {
    let state = DeviceState {
        server: server.to_string(),
        device_id: device_id.to_string(),
        ..Default::default()
    };
    write_file(
        &root.join(STATE_DIR).join("state.json"),
        &serde_json::to_vec_pretty(&state)?,
    )?;
    let mut device = Device::open(root, token)?;
    let keys = device.keys().await?;
    let mut recovery_key = None;
    if let (false, Some(passphrase)) = (keys["enabled"] == true, passphrase) {
        let dek = random::<32>()?;
        let (salt, wrapped) = wrap(&dek, passphrase)?;
        let recovery_wrap = if recovery {
            let key = STANDARD.encode(random::<32>()?);
            let (rsalt, rwrapped) = wrap(&dek, &key)?;
            recovery_key = Some(key);
            json!({"salt": rsalt, "wrappedDek": rwrapped})
        } else {
            Value::Null
        };
        let body = json!({"keyVersion": 1, "kdf": {"salt": salt, "N": SCRYPT_N, "r": SCRYPT_R, "p": SCRYPT_P},
                          "wrappedDek": wrapped, "recovery": recovery_wrap});
        device
            .ok(
                reqwest::Method::POST,
                "/v1/sync/e2ee:enable",
                Some(body),
                None,
            )
            .await?;
    }
    device.unlock(passphrase).await?;
    device.pull().await?;
    Ok(recovery_key)
}

/// `notevault device passphrase`: unwrap the data key with the old passphrase (or the
/// recovery key) and wrap it under the new one (the recovery wrap is kept). The data
/// key does not change, so `keyVersion` stays.
pub async fn passphrase(
    root: &Path,
    token: Option<String>,
    old: Option<&str>,
    recovery_key: Option<&str>,
    new: &str,
) -> Result<()> {
    let device = Device::open(root, token)?;
    let keys = device.keys().await?;
    let h = keys["hierarchy"]
        .as_object()
        .ok_or_else(|| anyhow!("private notes are not enabled"))?;
    let ring = match (recovery_key, old) {
        (Some(key), _) => unwrap_ring(
            key,
            h["recovery"]["salt"]
                .as_str()
                .ok_or_else(|| anyhow!("no recovery key is set"))?,
            h["recovery"]["wrappedDek"].as_str().unwrap_or(""),
        )?,
        (None, Some(old)) => unwrap_ring(
            old,
            h["kdf"]["salt"].as_str().unwrap_or(""),
            h["wrappedDek"].as_str().unwrap_or(""),
        )?,
        (None, None) => {
            bail!("give the current passphrase (NOTEVAULT_PASSPHRASE) or --recovery-key")
        }
    };
    // The whole ring: a rotation under way keeps every key it still needs.
    let (salt, wrapped) = wrap_ring(&ring, new)?;
    let body = json!({"keyVersion": h["keyVersion"], "kdf": {"salt": salt, "N": SCRYPT_N, "r": SCRYPT_R, "p": SCRYPT_P},
                      "wrappedDek": wrapped, "recovery": h["recovery"]});
    device
        .ok(reqwest::Method::PUT, "/v1/sync/e2ee/keys", Some(body), None)
        .await?;
    Ok(())
}

/// `notevault device pull`.
pub async fn pull(root: &Path, token: Option<String>, passphrase: Option<&str>) -> Result<usize> {
    let mut device = Device::open(root, token)?;
    device.unlock(passphrase).await?;
    device.pull().await
}

/// `notevault device push`.
pub async fn push(
    root: &Path,
    token: Option<String>,
    passphrase: Option<&str>,
) -> Result<PushReport> {
    let mut device = Device::open(root, token)?;
    device.unlock(passphrase).await?;
    device.push().await
}
