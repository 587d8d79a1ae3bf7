//! The reference device client (`notevault device init|pull|push|passphrase`): keeps a
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
//! (paths, ids, versions and hashes; never a key or a passphrase). An edit whose base
//! moved on the daemon is kept as a conflicted copy (`<name> (conflict <device>).md`),
//! never lost.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::sync::e2ee::{SCRYPT_N, SCRYPT_P, SCRYPT_R};
use crate::vault::{content_hash, PRIVATE_MAGIC, PRIVATE_SUFFIX};

const STATE_DIR: &str = ".notevault-device";
const DEK_AAD: &[u8] = b"notevault-dek v1";
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
}

fn random<const N: usize>() -> Result<[u8; N]> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| anyhow!("no randomness: {e}"))?;
    Ok(b)
}

/// The key-encryption key of a passphrase or a recovery key.
fn kek(secret: &str, salt: &str) -> Result<[u8; 32]> {
    let log_n = SCRYPT_N.trailing_zeros() as u8;
    let params = scrypt::Params::new(log_n, SCRYPT_R as u32, SCRYPT_P as u32, 32)
        .map_err(|e| anyhow!("scrypt parameters: {e}"))?;
    let mut out = [0u8; 32];
    scrypt::scrypt(secret.as_bytes(), salt.as_bytes(), &params, &mut out)
        .map_err(|e| anyhow!("scrypt: {e}"))?;
    Ok(out)
}

fn seal(key: &[u8; 32], aad: &[u8], plain: &[u8]) -> Result<Vec<u8>> {
    let nonce = random::<24>()?;
    let cipher = XChaCha20Poly1305::new(key.into());
    let sealed = cipher
        .encrypt(XNonce::from_slice(&nonce), Payload { msg: plain, aad })
        .map_err(|_| anyhow!("encryption failed"))?;
    Ok([nonce.as_slice(), &sealed].concat())
}

fn open(key: &[u8; 32], aad: &[u8], sealed: &[u8]) -> Result<Vec<u8>> {
    if sealed.len() < 24 {
        bail!("a sealed value is too short");
    }
    let (nonce, body) = sealed.split_at(24);
    XChaCha20Poly1305::new(key.into())
        .decrypt(XNonce::from_slice(nonce), Payload { msg: body, aad })
        .map_err(|_| anyhow!("decryption failed: wrong passphrase or key, or tampered data"))
}

/// Wrap the data key under a secret: `(salt, wrappedDek)`.
fn wrap(dek: &[u8; 32], secret: &str) -> Result<(String, String)> {
    let salt = STANDARD.encode(random::<16>()?);
    let wrapped = STANDARD.encode(seal(&kek(secret, &salt)?, DEK_AAD, dek)?);
    Ok((salt, wrapped))
}

fn unwrap_dek(secret: &str, salt: &str, wrapped: &str) -> Result<[u8; 32]> {
    let sealed = STANDARD
        .decode(wrapped)
        .context("wrappedDek is not base64")?;
    let dek = open(&kek(secret, salt)?, DEK_AAD, &sealed)?;
    dek.try_into()
        .map_err(|_| anyhow!("the data key is not 32 bytes"))
}

/// A private note's envelope for the daemon's file `server_path`.
pub fn encrypt_note(
    dek: &[u8; 32],
    key_version: u64,
    server_path: &str,
    plain: &[u8],
) -> Result<Vec<u8>> {
    let aad = [PRIVATE_MAGIC, server_path.as_bytes()].concat();
    let sealed = STANDARD.encode(seal(dek, &aad, plain)?);
    let mut out = PRIVATE_MAGIC.to_vec();
    out.extend_from_slice(format!("key-version: {key_version}\n{sealed}\n").as_bytes());
    Ok(out)
}

/// The note inside an envelope.
pub fn decrypt_note(dek: &[u8; 32], server_path: &str, envelope: &[u8]) -> Result<Vec<u8>> {
    let rest = envelope
        .strip_prefix(PRIVATE_MAGIC)
        .ok_or_else(|| anyhow!("{server_path} is not a private-note envelope"))?;
    let text = std::str::from_utf8(rest).context("envelope is not text")?;
    let sealed = text
        .lines()
        .nth(1)
        .ok_or_else(|| anyhow!("{server_path}: envelope without ciphertext"))?;
    let aad = [PRIVATE_MAGIC, server_path.as_bytes()].concat();
    open(
        dek,
        &aad,
        &STANDARD
            .decode(sealed.trim())
            .context("ciphertext is not base64")?,
    )
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

fn conflict_name(path: &str, device: &str) -> String {
    let (stem, ext) = match path.strip_suffix(LOCAL_PRIVATE) {
        Some(stem) => (stem, LOCAL_PRIVATE),
        None => path
            .rsplit_once('.')
            .map_or((path, ""), |(s, _)| (s, &path[s.len()..])),
    };
    format!("{stem} (conflict {device}){ext}")
}

#[allow(
    clippy::disallowed_methods,
    reason = "the device client writes its own folder, not a vault"
)]
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
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
            http: reqwest::Client::new(),
            dek: None,
        })
    }

    fn save(&self) -> Result<()> {
        let json = serde_json::to_vec_pretty(&self.state)?;
        write_file(&self.root.join(STATE_DIR).join("state.json"), &json)
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
            (status, v) => bail!(
                "{method} {path}: {status} {}: {}",
                v["reason"].as_str().unwrap_or("?"),
                v["message"].as_str().unwrap_or("")
            ),
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
        self.dek = Some(unwrap_dek(
            passphrase,
            h["kdf"]["salt"].as_str().unwrap_or(""),
            h["wrappedDek"].as_str().unwrap_or(""),
        )?);
        Ok(())
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

    /// Before a pulled change replaces or removes `local`: an edit not pushed yet is
    /// kept as a conflicted copy.
    fn keep_unpushed(&self, local: &str) -> Result<()> {
        let Some(synced) = self.state.files.get(local) else {
            return Ok(());
        };
        match self.local_hash(local) {
            Some(now) if now != synced.local_hash => {
                let copy = conflict_name(local, &self.state.device_id);
                rename_file(&self.root.join(local), &self.root.join(copy))
            }
            _ => Ok(()),
        }
    }

    fn track(
        &mut self,
        local: &str,
        server_path: &str,
        note_id: Option<String>,
        base: String,
        private: bool,
        attachment: bool,
    ) {
        let local_hash = self.local_hash(local).unwrap_or_default();
        self.state.files.insert(
            local.to_string(),
            Synced {
                server_path: server_path.to_string(),
                note_id,
                base,
                local_hash,
                private,
                attachment,
            },
        );
    }

    fn by_note(&self, note_id: &str) -> Option<String> {
        self.state
            .files
            .iter()
            .find(|(_, s)| s.note_id.as_deref() == Some(note_id))
            .map(|(p, _)| p.clone())
    }

    /// Put one note (standard or private) or attachment as the daemon has it.
    async fn put(&mut self, e: &Value) -> Result<()> {
        let server_path = e["path"].as_str().unwrap_or_default().to_string();
        let private = e["visibility"] == "private";
        let note_id = e["note_id"].as_str().map(str::to_string);
        let local = local_of(&server_path, private);
        let hash = e["content_hash"].as_str().unwrap_or_default().to_string();
        let is_note = note_id.is_some() || private;
        // A note moved: its file follows.
        if let Some(old) = note_id.as_deref().and_then(|id| self.by_note(id)) {
            if old != local {
                self.keep_unpushed(&old)?;
                let from = self.root.join(&old);
                if from.exists() {
                    rename_file(&from, &self.root.join(&local))?;
                }
                self.state.files.remove(&old);
            }
        }
        let bytes = match e["content_base64"].as_str() {
            Some(b64) => Some(STANDARD.decode(b64).context("content is not base64")?),
            None if !is_note => {
                let res = self
                    .http
                    .get(self.url(&format!("/v1/attachments/{server_path}")))
                    .bearer_auth(self.token.clone().unwrap_or_default())
                    .send()
                    .await?;
                if res.status().as_u16() == 404 {
                    return Ok(());
                }
                Some(res.bytes().await?.to_vec())
            }
            None => None,
        };
        if let Some(bytes) = bytes {
            let plain = if private {
                let dek = self
                    .dek
                    .ok_or_else(|| anyhow!("a private note arrived: unlock with the passphrase"))?;
                decrypt_note(&dek, &server_path, &bytes)?
            } else {
                bytes
            };
            if self.local_hash(&local) != Some(content_hash(&plain)) {
                self.keep_unpushed(&local)?;
                write_file(&self.root.join(&local), &plain)?;
            }
        }
        let base = match (&note_id, e["version_id"].as_str()) {
            (Some(_), Some(v)) => v.to_string(),
            _ => hash,
        };
        self.track(&local, &server_path, note_id, base, private, !is_note);
        Ok(())
    }

    fn forget(&mut self, local: &str) -> Result<()> {
        self.keep_unpushed(local)?;
        remove_file(&self.root.join(local));
        self.state.files.remove(local);
        Ok(())
    }

    async fn apply(&mut self, op: &Value) -> Result<()> {
        let server_path = op["path"].as_str().unwrap_or_default();
        let private = op["visibility"] == "private";
        match op["kind"].as_str().unwrap_or_default() {
            "upsert" | "move" | "attachment_upsert" => self.put(op).await,
            "delete" => {
                let local = match op["note_id"].as_str() {
                    Some(id) => self.by_note(id),
                    None => Some(local_of(server_path, private)),
                };
                match local {
                    Some(local) => self.forget(&local),
                    None => Ok(()),
                }
            }
            "attachment_delete" => self.forget(server_path),
            _ => Ok(()),
        }
    }

    async fn snapshot(&mut self) -> Result<()> {
        let mut token: Option<String> = None;
        let mut seen = std::collections::BTreeSet::new();
        let seq = loop {
            let path = match &token {
                Some(t) => format!("/v1/sync/snapshot?page_size=200&page_token={t}"),
                None => "/v1/sync/snapshot?page_size=200".to_string(),
            };
            let page = self.ok(reqwest::Method::GET, &path, None, None).await?;
            for e in page["entries"].as_array().cloned().unwrap_or_default() {
                let private = e["visibility"] == "private";
                seen.insert(local_of(e["path"].as_str().unwrap_or_default(), private));
                self.put(&e).await?;
            }
            match page["next_page_token"].as_str() {
                Some(t) => token = Some(t.to_string()),
                None => break page["seq"].as_i64().unwrap_or(0),
            }
        };
        // What the device tracked and the daemon no longer has.
        let gone: Vec<String> = self
            .state
            .files
            .keys()
            .filter(|p| !seen.contains(*p))
            .cloned()
            .collect();
        for local in gone {
            self.forget(&local)?;
        }
        self.state.seq = Some(seq);
        Ok(())
    }

    /// Bring the folder up to the daemon: the snapshot first (or again after
    /// compaction), then the ops after the device's seq. Answers how many ops applied.
    pub async fn pull(&mut self) -> Result<usize> {
        if self.state.seq.is_none() {
            self.snapshot().await?;
            self.save()?;
        }
        let mut applied = 0;
        loop {
            let after = self.state.seq.unwrap_or(0);
            let path = format!("/v1/sync/ops?after_seq={after}&page_size=200");
            let page = match self.call(reqwest::Method::GET, &path, None, None).await? {
                (200, page) => page,
                (410, _) => {
                    // Compacted past the device: the snapshot, then ops after it.
                    self.snapshot().await?;
                    self.save()?;
                    continue;
                }
                (status, v) => bail!("GET {path}: {status} {}", v["reason"]),
            };
            for op in page["ops"].as_array().cloned().unwrap_or_default() {
                self.apply(&op).await?;
                applied += 1;
            }
            self.state.seq = page["next_after_seq"].as_i64();
            self.save()?;
            if page["has_more"] != true {
                break;
            }
        }
        let seq = self.state.seq.unwrap_or(0);
        let device = self.state.device_id.clone();
        self.ok(
            reqwest::Method::POST,
            "/v1/sync/checkpoint",
            Some(json!({"device_id": device, "seq": seq})),
            Some(&format!("checkpoint-{device}-{seq}")),
        )
        .await?;
        Ok(applied)
    }

    /// Every note file of the folder (device paths), its own state left out.
    fn local_notes(&self) -> Vec<String> {
        walkdir::WalkDir::new(&self.root)
            .into_iter()
            .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'))
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
            .filter_map(|e| {
                let rel = e
                    .path()
                    .strip_prefix(&self.root)
                    .ok()?
                    .to_string_lossy()
                    .replace('\\', "/");
                rel.ends_with(".md").then_some(rel)
            })
            .collect()
    }

    /// Push the folder's changes since the last sync (new, edited and deleted notes;
    /// private notes encrypted), then pull. Answers `(applied, conflicts)`.
    pub async fn push(&mut self) -> Result<(usize, usize)> {
        let version = self.key_version().await?;
        let mut ops = Vec::new();
        let mut locals = Vec::new();
        let present = self.local_notes();
        for local in &present {
            let bytes = std::fs::read(self.root.join(local))?;
            let synced = self.state.files.get(local).cloned();
            if synced
                .as_ref()
                .is_some_and(|s| s.local_hash == content_hash(&bytes))
            {
                continue;
            }
            let (server_path, private) = server_of(local);
            let mut op = if private {
                let dek = self
                    .dek
                    .ok_or_else(|| anyhow!("{local} is private: private notes are not enabled (run `notevault device init`)"))?;
                let envelope = encrypt_note(&dek, version, &server_path, &bytes)?;
                json!({"kind": "upsert", "visibility": "private", "path": server_path,
                       "content_base64": STANDARD.encode(envelope)})
            } else {
                json!({"kind": "upsert", "path": server_path, "content_base64": STANDARD.encode(&bytes)})
            };
            if let Some(s) = &synced {
                op["base_version_id"] = json!(s.base);
                if !private {
                    op["note_id"] = json!(s.note_id);
                }
            }
            ops.push(op);
            locals.push(local.clone());
        }
        for (local, s) in &self.state.files {
            if !s.attachment && !present.contains(local) {
                let mut op =
                    json!({"kind": "delete", "path": s.server_path, "base_version_id": s.base});
                if s.private {
                    op["visibility"] = json!("private");
                } else {
                    op["note_id"] = json!(s.note_id);
                }
                ops.push(op);
                locals.push(local.clone());
            }
        }
        let (mut applied, mut conflicts) = (0, 0);
        for (chunk, names) in ops.chunks(500).zip(locals.chunks(500)) {
            let key = format!("push-{}", uuid::Uuid::now_v7());
            let device = self.state.device_id.clone();
            let answer = self
                .ok(
                    reqwest::Method::POST,
                    "/v1/sync/ops",
                    Some(json!({"device_id": device, "ops": chunk})),
                    Some(&key),
                )
                .await?;
            for (result, local) in answer["results"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .zip(names)
            {
                if result["status"] == "applied" {
                    applied += 1;
                    let r = &result["receipt"];
                    let (server_path, private) = server_of(local);
                    if r["version_id"].as_str().is_some_and(|v| !v.is_empty()) {
                        let id = r["note_id"].as_str().map(str::to_string);
                        let base = r["version_id"].as_str().unwrap_or_default().to_string();
                        self.track(local, &server_path, id, base, false, false);
                    } else if present.contains(local) {
                        let base = r["content_hash"].as_str().unwrap_or_default().to_string();
                        self.track(local, &server_path, None, base, private, false);
                    } else {
                        self.state.files.remove(local);
                    }
                } else {
                    // The daemon's note moved on (or the name is taken): keep this edit
                    // as a conflicted copy; the pull brings the daemon's version back.
                    conflicts += 1;
                    let from = self.root.join(local);
                    if from.exists() {
                        let copy = conflict_name(local, &self.state.device_id);
                        rename_file(&from, &self.root.join(copy))?;
                    }
                    if let Some(s) = self.state.files.get_mut(local) {
                        s.local_hash = String::new();
                    }
                }
            }
        }
        self.save()?;
        self.pull().await?;
        Ok((applied, conflicts))
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
    let dek = match (recovery_key, old) {
        (Some(key), _) => unwrap_dek(
            key,
            h["recovery"]["salt"]
                .as_str()
                .ok_or_else(|| anyhow!("no recovery key is set"))?,
            h["recovery"]["wrappedDek"].as_str().unwrap_or(""),
        )?,
        (None, Some(old)) => unwrap_dek(
            old,
            h["kdf"]["salt"].as_str().unwrap_or(""),
            h["wrappedDek"].as_str().unwrap_or(""),
        )?,
        (None, None) => {
            bail!("give the current passphrase (NOTEVAULT_PASSPHRASE) or --recovery-key")
        }
    };
    let (salt, wrapped) = wrap(&dek, new)?;
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
) -> Result<(usize, usize)> {
    let mut device = Device::open(root, token)?;
    device.unlock(passphrase).await?;
    device.push().await
}
