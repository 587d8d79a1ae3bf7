//! The device's keys and private-note envelopes (see the module above for the scheme):
//! everything that touches a secret, so nothing else in the client does.

use anyhow::{anyhow, bail, Context, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use crate::sync::e2ee::{SCRYPT_N, SCRYPT_P, SCRYPT_R};
use crate::vault::PRIVATE_MAGIC;

const DEK_AAD: &[u8] = b"notevault-dek v1";

pub(super) fn random<const N: usize>() -> Result<[u8; N]> {
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
pub(super) fn wrap(dek: &[u8; 32], secret: &str) -> Result<(String, String)> {
    wrap_ring(&[*dek], secret)
}

/// Wrap a key ring under a secret: the current data key first, then (while a rotation
/// re-encrypts the notes) the keys of the versions before it, newest first.
pub(super) fn wrap_ring(ring: &[[u8; 32]], secret: &str) -> Result<(String, String)> {
    let salt = STANDARD.encode(random::<16>()?);
    let wrapped = STANDARD.encode(seal(&kek(secret, &salt)?, DEK_AAD, &ring.concat())?);
    Ok((salt, wrapped))
}

/// The key ring a `wrappedDek` holds (one key but during a rotation).
pub(super) fn unwrap_ring(secret: &str, salt: &str, wrapped: &str) -> Result<Vec<[u8; 32]>> {
    let sealed = STANDARD
        .decode(wrapped)
        .context("wrappedDek is not base64")?;
    let keys = open(&kek(secret, salt)?, DEK_AAD, &sealed)?;
    if keys.is_empty() || keys.len() % 32 != 0 {
        bail!("the wrapped data key is not a whole number of 32-byte keys");
    }
    Ok(keys
        .chunks_exact(32)
        .map(|k| k.try_into().unwrap_or([0; 32]))
        .collect())
}

/// The `key-version` an envelope was sealed under.
pub fn envelope_version(envelope: &[u8]) -> Option<u64> {
    let rest = envelope.strip_prefix(PRIVATE_MAGIC)?;
    let line = std::str::from_utf8(rest).ok()?.lines().next()?;
    line.strip_prefix("key-version: ")?.trim().parse().ok()
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
