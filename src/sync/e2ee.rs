//! The wrapped-key state of private notes: what a device sent (a KDF salt with the
//! spec's scrypt constants, the data key wrapped under the passphrase's key, an optional
//! recovery wrap). Ciphertext and public parameters only: the daemon never holds a
//! passphrase, a key-encryption key or the data key.
//!
//! The hierarchy is stored as JSON in `meta.sqlite` (table `e2ee_keys`), never in
//! history, the index or a log line.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Reason, Result};
use crate::state::State;

/// scrypt's cost `N`, `r` and `p`: the spec's constants.
pub const SCRYPT_N: u64 = 131_072;
pub const SCRYPT_R: u64 = 8;
pub const SCRYPT_P: u64 = 1;

/// The passphrase's KDF: scrypt with the constants above and this salt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kdf {
    pub salt: String,
}

/// The recovery wrap: the data key wrapped under a key derived from a recovery key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    pub salt: String,
    pub wrapped_dek: String,
}

/// The key hierarchy a device sent, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hierarchy {
    pub key_version: u32,
    pub kdf: Kdf,
    pub wrapped_dek: String,
    pub recovery: Option<Recovery>,
}

/// The state `GET /v1/sync/e2ee` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    pub hierarchy: Option<Hierarchy>,
}

impl KeyState {
    pub fn enabled(&self) -> bool {
        self.hierarchy.is_some()
    }

    /// The passphrase KDF's salt.
    pub fn salt(&self) -> Option<&str> {
        self.hierarchy.as_ref().map(|h| h.kdf.salt.as_str())
    }

    /// What a person should know about recovering private notes.
    pub fn recovery_notice(&self) -> &'static str {
        match &self.hierarchy {
            None => "Private notes are off. A device turns them on with `POST /v1/sync/e2ee:enable`; the passphrase never leaves the device.",
            Some(h) if h.recovery.is_none() => "Private notes are on without a recovery key: the daemon holds only ciphertext and the wrapped data key, so forgetting the passphrase loses every private note. Set a recovery key from a device.",
            Some(_) => "Private notes are on: the daemon holds only ciphertext and the wrapped data key. Keep the recovery key offline; with it a device re-wraps the data key under a new passphrase.",
        }
    }
}

/// The wrapped-key state.
pub fn key_state(state: &State) -> Result<KeyState> {
    let hierarchy = match state.meta.e2ee_hierarchy()? {
        Some(json) => Some(serde_json::from_str(&json).map_err(|e| {
            Error::new(
                Reason::STORAGE_UNAVAILABLE,
                format!("the stored key hierarchy cannot be read: {e}"),
            )
        })?),
        None => None,
    };
    Ok(KeyState { hierarchy })
}

fn stored(h: &Hierarchy) -> Result<String> {
    serde_json::to_string(h).map_err(|e| Error::internal(&e).with_cause(e))
}

/// Turn private notes on with the first wrap; `ALREADY_ENABLED` the second time. The
/// change is recorded (an `e2ee_key` op) under the write lock.
pub fn enable(state: &State, hierarchy: Hierarchy, actor: &str) -> Result<KeyState> {
    let _write = state.lock_to_record()?;
    if state.meta.e2ee_hierarchy()?.is_some() {
        return Err(Error::new(
            Reason::ALREADY_ENABLED,
            "private notes are already enabled for this vault",
        ));
    }
    crate::record::record_key(state, actor, hierarchy.key_version, &stored(&hierarchy)?)?;
    audit(state, &hierarchy, actor);
    key_state(state)
}

/// The audit row of a key change: its version and whether a recovery wrap is set (never
/// the salt or a wrapped key).
fn audit(state: &State, hierarchy: &Hierarchy, actor: &str) {
    let counts = [
        ("key_version", i64::from(hierarchy.key_version)),
        ("recovery", i64::from(hierarchy.recovery.is_some())),
    ];
    state.meta.note_audit(
        &crate::storage::rows::AuditEvent::new(
            crate::storage::rows::AuditKind::E2eeKeysChanged,
            actor,
        )
        .counts(&counts),
    );
}

/// Replace the passphrase wrap (and the recovery wrap: replaced by an object, cleared by
/// `None`). Before private notes are enabled, the first wrap enables them. Recorded as
/// an `e2ee_key` op, so devices see the key change in the log.
pub fn replace(state: &State, hierarchy: Hierarchy, actor: &str) -> Result<KeyState> {
    let _write = state.lock_to_record()?;
    crate::record::record_key(state, actor, hierarchy.key_version, &stored(&hierarchy)?)?;
    audit(state, &hierarchy, actor);
    key_state(state)
}
