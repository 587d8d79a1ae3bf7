//! The key routes of private notes: `GET /v1/sync/e2ee`, `POST /v1/sync/e2ee:enable`
//! and `PUT /v1/sync/e2ee/keys`. The daemon stores wrapped keys only; a body is checked
//! field by field as the specification says, and no key material is ever echoed in an
//! error.

use std::sync::Arc;

use crate::api::wire::Json;
use axum::body::Bytes;
use axum::http::request::Parts;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::error::Error;
use crate::state::State;
use crate::surface::blocking;
use crate::sync::e2ee::{self, Hierarchy, Kdf, KeyState, Recovery};

/// The scrypt parameters of a wrap.
#[derive(Debug, Serialize, ToSchema)]
pub struct KdfWire {
    pub salt: String,
    #[serde(rename = "N")]
    pub n: u64,
    pub r: u64,
    pub p: u64,
}

/// The recovery wrap.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecoveryWire {
    pub salt: String,
    #[serde(rename = "wrappedDek")]
    pub wrapped_dek: String,
}

/// The key hierarchy.
#[derive(Debug, Serialize, ToSchema)]
pub struct HierarchyWire {
    #[serde(rename = "keyVersion")]
    pub key_version: u32,
    pub kdf: KdfWire,
    #[serde(rename = "wrappedDek")]
    pub wrapped_dek: String,
    pub recovery: Option<RecoveryWire>,
}

/// The wrapped-key state of private notes.
#[derive(Debug, Serialize, ToSchema)]
pub struct WrappedKeyState {
    pub enabled: bool,
    pub salt: Option<String>,
    #[serde(rename = "recoveryNotice")]
    pub recovery_notice: String,
    pub hierarchy: Option<HierarchyWire>,
}

impl From<KeyState> for WrappedKeyState {
    fn from(s: KeyState) -> Self {
        Self {
            enabled: s.enabled(),
            salt: s.salt().map(str::to_string),
            recovery_notice: s.recovery_notice().to_string(),
            hierarchy: s.hierarchy.map(|h| HierarchyWire {
                key_version: h.key_version,
                kdf: KdfWire {
                    salt: h.kdf.salt,
                    n: e2ee::SCRYPT_N,
                    r: e2ee::SCRYPT_R,
                    p: e2ee::SCRYPT_P,
                },
                wrapped_dek: h.wrapped_dek,
                recovery: h.recovery.map(|r| RecoveryWire {
                    salt: r.salt,
                    wrapped_dek: r.wrapped_dek,
                }),
            }),
        }
    }
}

/// The request body of the key routes (documentation; parsed by [`hierarchy_of`]).
#[derive(Debug, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct KeysRequest {
    /// 1..1000.
    #[serde(rename = "keyVersion")]
    #[schema(minimum = 1, maximum = 1000)]
    pub key_version: u32,
    pub kdf: KdfRequest,
    /// The data key wrapped under the passphrase's key, base64.
    #[serde(rename = "wrappedDek")]
    pub wrapped_dek: String,
    /// The recovery wrap; `null` clears it.
    #[schema(required = true)]
    pub recovery: Option<RecoveryRequest>,
}

/// The KDF of a key request: scrypt with the spec's constants.
#[derive(Debug, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct KdfRequest {
    #[schema(min_length = 1, max_length = 128)]
    pub salt: String,
    #[serde(rename = "N")]
    #[schema(minimum = 131072, maximum = 131072)]
    pub n: u64,
    #[schema(minimum = 8, maximum = 8)]
    pub r: u64,
    #[schema(minimum = 1, maximum = 1)]
    pub p: u64,
}

/// The recovery wrap of a key request.
#[derive(Debug, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct RecoveryRequest {
    #[schema(min_length = 1, max_length = 128)]
    pub salt: String,
    #[serde(rename = "wrappedDek")]
    pub wrapped_dek: String,
}

/// Refuse any property of `obj` (at `at`) not in `allowed`.
fn only(obj: &serde_json::Map<String, Value>, at: &str, allowed: &[&str]) -> Result<(), Error> {
    if let Some(extra) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Error::invalid_field(
            format!("{at}{extra}"),
            format!(
                "is not a property of this object (allowed: {})",
                allowed.join(", ")
            ),
        ));
    }
    Ok(())
}

fn field<'a>(
    obj: &'a serde_json::Map<String, Value>,
    at: &str,
    name: &str,
) -> Result<&'a Value, Error> {
    obj.get(name)
        .ok_or_else(|| Error::invalid_field(format!("{at}{name}"), "is required"))
}

fn salt(v: &Value, name: &str) -> Result<String, Error> {
    let s = v
        .as_str()
        .ok_or_else(|| Error::invalid_field(name, "must be a string"))?;
    let n = s.chars().count();
    if !(1..=128).contains(&n) {
        return Err(Error::invalid_field(
            name,
            format!("must be 1 to 128 characters, got {n}"),
        ));
    }
    Ok(s.to_string())
}

/// A wrapped key: a string of standard base64 (never echoed in an error).
fn wrapped(v: &Value, name: &str) -> Result<String, Error> {
    let s = v
        .as_str()
        .ok_or_else(|| Error::invalid_field(name, "must be a string"))?;
    match STANDARD.decode(s) {
        Ok(bytes) if !bytes.is_empty() => Ok(s.to_string()),
        _ => Err(Error::invalid_field(
            name,
            "must be non-empty standard base64 (the wrapped key's ciphertext)",
        )),
    }
}

fn constant(v: &Value, name: &str, want: u64) -> Result<(), Error> {
    match v.as_f64() {
        Some(n) if n == want as f64 => Ok(()),
        Some(_) => Err(Error::invalid_field(name, format!("must be {want}"))),
        None => Err(Error::invalid_field(
            name,
            format!("must be the number {want}"),
        )),
    }
}

/// Validate a key body exactly as the spec says: no additional properties; all four
/// fields required; `keyVersion` 1..1000; `kdf.salt` 1..128 characters; `N`, `r`, `p`
/// the scrypt constants; `recovery` an object with both fields, or null. Each violation
/// names its field.
pub fn hierarchy_of(raw: &Value) -> Result<Hierarchy, Error> {
    let obj = raw
        .as_object()
        .ok_or_else(|| Error::invalid_field("body", "must be a JSON object"))?;
    only(obj, "", &["keyVersion", "kdf", "wrappedDek", "recovery"])?;
    let version = field(obj, "", "keyVersion")?;
    let key_version = match version.as_u64() {
        Some(v @ 1..=1000) => v as u32,
        _ if version.is_number() => {
            return Err(Error::invalid_field(
                "keyVersion",
                "must be an integer from 1 to 1000",
            ))
        }
        _ => return Err(Error::invalid_field("keyVersion", "must be an integer")),
    };
    let kdf = field(obj, "", "kdf")?
        .as_object()
        .ok_or_else(|| Error::invalid_field("kdf", "must be an object"))?;
    only(kdf, "kdf.", &["salt", "N", "r", "p"])?;
    let kdf_salt = salt(field(kdf, "kdf.", "salt")?, "kdf.salt")?;
    constant(field(kdf, "kdf.", "N")?, "kdf.N", e2ee::SCRYPT_N)?;
    constant(field(kdf, "kdf.", "r")?, "kdf.r", e2ee::SCRYPT_R)?;
    constant(field(kdf, "kdf.", "p")?, "kdf.p", e2ee::SCRYPT_P)?;
    let wrapped_dek = wrapped(field(obj, "", "wrappedDek")?, "wrappedDek")?;
    let recovery = match field(obj, "", "recovery")? {
        Value::Null => None,
        Value::Object(r) => {
            only(r, "recovery.", &["salt", "wrappedDek"])?;
            Some(Recovery {
                salt: salt(field(r, "recovery.", "salt")?, "recovery.salt")?,
                wrapped_dek: wrapped(field(r, "recovery.", "wrappedDek")?, "recovery.wrappedDek")?,
            })
        }
        _ => {
            return Err(Error::invalid_field(
                "recovery",
                "must be an object or null",
            ))
        }
    };
    Ok(Hierarchy {
        key_version,
        kdf: Kdf { salt: kdf_salt },
        wrapped_dek,
        recovery,
    })
}

/// The wrapped-key state of private notes.
#[utoipa::path(
    get,
    path = "/v1/sync/e2ee",
    tag = "Sync",
    responses(
        (status = 200, description = "The wrapped-key state.", body = WrappedKeyState),
        (status = 400, description = "A bad parameter.", body = ErrorEnvelope),
        (status = 401, description = "No or an invalid credential.", body = ErrorEnvelope),
        (status = 403, description = "The credential may not read this vault.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 503, description = "Storage unavailable.", body = ErrorEnvelope),
    )
)]
pub async fn e2ee_route(state: Arc<State>, parts: Parts) -> ApiResult<Json<WrappedKeyState>> {
    Query::parse(parts.uri.query(), &[])?;
    let s = blocking(move || e2ee::key_state(&state)).await?;
    Ok(Json(s.into()))
}

/// Turn private notes on with the first wrap of the data key.
#[utoipa::path(
    post,
    path = "/v1/sync/e2ee:enable",
    tag = "Sync",
    request_body = KeysRequest,
    responses(
        (status = 200, description = "Enabled: the wrapped-key state.", body = WrappedKeyState),
        (status = 400, description = "`VALIDATION_FAILED` naming the field.", body = ErrorEnvelope),
        (status = 401, description = "No or an invalid credential.", body = ErrorEnvelope),
        (status = 403, description = "`CREDENTIAL_FORBIDDEN` for a personal access token, or `PERMISSION_MISSING`: `notes.write` or `notes.review` missing.", body = ErrorEnvelope),
        (status = 409, description = "`ALREADY_ENABLED`.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 503, description = "Storage unavailable.", body = ErrorEnvelope),
    )
)]
pub async fn enable_route(
    state: Arc<State>,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Json<WrappedKeyState>> {
    Query::parse(parts.uri.query(), &[])?;
    let raw = crate::api::writes::json_value(&parts.headers, &body)?;
    let h = hierarchy_of(&raw)?;
    let s = blocking(move || e2ee::enable(&state, h, "api")).await?;
    Ok(Json(s.into()))
}

/// Replace the passphrase wrap of the vault data key; the recovery wrap is replaced by an
/// object and cleared by null.
#[utoipa::path(
    put,
    path = "/v1/sync/e2ee/keys",
    tag = "Sync",
    request_body = KeysRequest,
    responses(
        (status = 200, description = "The wrapped-key state.", body = WrappedKeyState),
        (status = 400, description = "`VALIDATION_FAILED` naming the field.", body = ErrorEnvelope),
        (status = 401, description = "No or an invalid credential.", body = ErrorEnvelope),
        (status = 403, description = "`CREDENTIAL_FORBIDDEN` for a personal access token, or `PERMISSION_MISSING`: `notes.write` or `notes.review` missing.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited (`Retry-After`).", body = ErrorEnvelope),
        (status = 503, description = "Storage unavailable.", body = ErrorEnvelope),
    )
)]
pub async fn keys_route(
    state: Arc<State>,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Json<WrappedKeyState>> {
    Query::parse(parts.uri.query(), &[])?;
    let raw = crate::api::writes::json_value(&parts.headers, &body)?;
    let h = hierarchy_of(&raw)?;
    let s = blocking(move || e2ee::replace(&state, h, "api")).await?;
    Ok(Json(s.into()))
}
