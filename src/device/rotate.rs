//! `notevault device rotate-key`: a new data key (`keyVersion` + 1), every private note
//! sealed again under it and pushed, then the old key dropped from the hierarchy.
//!
//! No private note is unreadable at any step, whatever interrupts the rotation:
//! 1. The hierarchy is replaced by a ring of the new key and every older one still in
//!    use, wrapped together (`wrappedDek` seals them all; see `crypto::wrap_ring`), under
//!    the passphrase and, when one is set, the recovery key. A device reading it can open
//!    notes sealed under either version.
//! 2. Every private note the device has synced is sealed under the new key and pushed
//!    (a device's upsert on its base, like any push). The daemon refuses, from then on,
//!    a private note sealed under an older key, with the hint to pull.
//! 3. Only when every note went: the hierarchy wraps the new key alone. Before that, a
//!    failure leaves both keys recorded, and `rotate-key` again resumes (it pulls first,
//!    then seals the notes again). A pull right after step 1 brings any note another
//!    device sealed under the old key before the daemon began refusing that key.

use anyhow::{anyhow, bail, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};

use super::crypto::{encrypt_note, random, unwrap_ring, wrap_ring};
use super::{refusal_text, Device};
use crate::sync::e2ee::{SCRYPT_N, SCRYPT_P, SCRYPT_R};

/// What a rotation did.
#[derive(Debug, Default)]
pub struct Rotated {
    pub key_version: u64,
    /// Private notes sealed again under the new key.
    pub sealed: usize,
}

impl Device {
    /// Replace the hierarchy with `ring` at `version`, wrapped under the passphrase and
    /// (when the vault has one) the recovery key.
    async fn put_ring(
        &self,
        version: u64,
        ring: &[[u8; 32]],
        passphrase: &str,
        recovery_key: Option<&str>,
    ) -> Result<()> {
        let (salt, wrapped) = wrap_ring(ring, passphrase)?;
        let recovery = match recovery_key {
            Some(key) => {
                let (rsalt, rwrapped) = wrap_ring(ring, key)?;
                json!({"salt": rsalt, "wrappedDek": rwrapped})
            }
            None => Value::Null,
        };
        let body = json!({"keyVersion": version,
                          "kdf": {"salt": salt, "N": SCRYPT_N, "r": SCRYPT_R, "p": SCRYPT_P},
                          "wrappedDek": wrapped, "recovery": recovery});
        self.ok(reqwest::Method::PUT, "/v1/sync/e2ee/keys", Some(body), None)
            .await?;
        Ok(())
    }

    /// Seal every synced private note under the current key and push it; answers how
    /// many went and what stopped the others.
    async fn seal_again(&mut self) -> Result<(usize, Vec<String>)> {
        let dek = self
            .dek
            .ok_or_else(|| anyhow!("private notes are locked"))?;
        let mut ops = Vec::new();
        let mut stopped = Vec::new();
        for (local, s) in &self.state.files {
            if !s.private {
                continue;
            }
            if self.local_hash(local).as_deref() != Some(s.local_hash.as_str()) {
                stopped.push(format!(
                    "{local}: changed or removed here and not pushed yet (push it first)"
                ));
                continue;
            }
            let bytes = std::fs::read(self.root.join(local))?;
            let envelope = encrypt_note(&dek, self.ring_version, &s.server_path, &bytes)?;
            ops.push((
                local.clone(),
                json!({"kind": "upsert", "visibility": "private", "path": s.server_path,
                       "base_version_id": s.base, "content_base64": STANDARD.encode(envelope),
                       "idempotency_key": format!("device-rotate-{}", uuid::Uuid::now_v7())}),
            ));
        }
        let mut sealed = 0;
        for chunk in ops.chunks(super::push::BATCH) {
            let body = json!({"device_id": self.state.device_id,
                              "ops": chunk.iter().map(|(_, op)| op).collect::<Vec<_>>()});
            let key = format!("rotate-{}", uuid::Uuid::now_v7());
            let answer = self
                .ok(
                    reqwest::Method::POST,
                    "/v1/sync/ops",
                    Some(body),
                    Some(&key),
                )
                .await?;
            let results = answer["results"].as_array().cloned().unwrap_or_default();
            if results.len() != chunk.len() {
                bail!(
                    "the daemon answered {} results for {} ops; every note stays readable \
                     (both keys are kept): run `notevault device rotate-key` again",
                    results.len(),
                    chunk.len()
                );
            }
            for ((local, _), r) in chunk.iter().zip(&results) {
                if r["status"] == "applied" {
                    let hash = r["receipt"]["content_hash"].as_str().unwrap_or_default();
                    if let Some(s) = self.state.files.get_mut(local) {
                        s.base = hash.to_string();
                    }
                    sealed += 1;
                } else {
                    let status = r["error"]["statusCode"].as_u64().unwrap_or(0) as u16;
                    stopped.push(format!("{local}: {}", refusal_text(status, &r["error"])));
                }
            }
            self.save()?;
        }
        Ok((sealed, stopped))
    }
}

/// `notevault device rotate-key`.
pub async fn rotate_key(
    root: &std::path::Path,
    token: Option<String>,
    passphrase: Option<&str>,
    recovery_key: Option<&str>,
) -> Result<Rotated> {
    let passphrase = passphrase
        .ok_or_else(|| anyhow!("give the passphrase (NOTEVAULT_PASSPHRASE) to rotate the key"))?;
    let mut device = Device::open(root, token)?;
    device.unlock(Some(passphrase)).await?;
    if device.ring.is_empty() {
        bail!("private notes are not enabled: nothing to rotate");
    }
    let keys = device.keys().await?;
    let h = &keys["hierarchy"];
    // A recovery wrap the rotation cannot renew would open only the old key: refused.
    if let Some(rsalt) = h["recovery"]["salt"].as_str() {
        let key = recovery_key.ok_or_else(|| {
            anyhow!(
                "this vault has a recovery key: give it (NOTEVAULT_RECOVERY_KEY) so that it \
                 opens the new data key too"
            )
        })?;
        let theirs = unwrap_ring(
            key,
            rsalt,
            h["recovery"]["wrappedDek"].as_str().unwrap_or(""),
        )?;
        if theirs.first() != device.ring.first() {
            bail!("the recovery key does not open the vault's current data key");
        }
    }
    let recovery_key = recovery_key.filter(|_| !h["recovery"].is_null());
    // Everything the daemon has, first: the notes sealed again are the current ones.
    device.pull().await?;
    if device.ring.len() == 1 {
        let version = device.ring_version + 1;
        if version > 1000 {
            bail!("keyVersion is at its limit (1000)");
        }
        let mut ring = vec![random::<32>()?];
        ring.extend(device.ring.iter().copied());
        device
            .put_ring(version, &ring, passphrase, recovery_key)
            .await?;
        device.dek = Some(ring[0]);
        device.ring = ring;
        device.ring_version = version;
        // From here the daemon refuses a note sealed under the old key; one another device
        // pushed since the pull above comes now, and is sealed again with the rest.
        device.pull().await?;
    }
    let (sealed, stopped) = device.seal_again().await?;
    if !stopped.is_empty() {
        bail!(
            "the rotation to keyVersion {} is not finished: {}; every note stays readable \
             (both keys are kept): fix what is said, then run `notevault device rotate-key` again",
            device.ring_version,
            stopped.join("; ")
        );
    }
    let current = [device.ring[0]];
    device
        .put_ring(device.ring_version, &current, passphrase, recovery_key)
        .await?;
    device.pull().await?;
    Ok(Rotated {
        key_version: device.ring_version,
        sealed,
    })
}
