//! Identity-provider JWTs: a token signed by the configured issuer (`auth_issuer`) with a
//! key of its JWK Set (`auth_jwks_url`, or `auth_jwks_file` offline) is a session
//! credential holding the permissions of its `permissions` claim.
//!
//! What is checked, in order: the header's `alg` is RS256 or ES256 (never `none`, never
//! an HMAC alg a public key could be abused for); the key is found by `kid` (a JWK Set of
//! one key also serves a token without `kid`) and fits the alg; the signature; `iss`
//! equals the issuer; `exp` (required) and `nbf` with [`LEEWAY`]; `aud` when
//! `auth_audience` is set; the vault: `vault_id` equal to this daemon's, or `org_id`
//! equal to the configured `org_id` (a token that names neither selects no vault and is
//! `VAULT_FORBIDDEN`, as the interface's "the token selects the vault" says).
//!
//! The keys are cached by `kid`. A token naming a `kid` the cache lacks makes one refetch,
//! at most once per [`REFETCH_EVERY`] (a stream of forged `kid`s cannot make the daemon
//! hammer the provider), and one at a time (the requests that arrive meanwhile wait for
//! it). A fetch is bounded by [`FETCH_TIMEOUT`] and [`MAX_JWKS_BYTES`]: a provider that
//! hangs answers the request `AUTH_UNAVAILABLE` (503) rather than holding it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use parking_lot::RwLock;
use serde::Deserialize;

use crate::auth::{Credential, Permission};
use crate::error::{Error, Reason, Result};

/// Clock skew allowed on `exp` and `nbf`.
pub const LEEWAY: u64 = 30;
/// The longest a JWK Set fetch may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The least time between two fetches of the JWK Set.
pub const REFETCH_EVERY: Duration = Duration::from_secs(30);
/// The largest JWK Set read.
pub const MAX_JWKS_BYTES: usize = 1 << 20;

/// Where the keys come from.
#[derive(Debug, Clone)]
pub enum KeySource {
    /// `auth_jwks_url`.
    Url(String),
    /// `auth_jwks_file`, for offline use.
    File(PathBuf),
}

/// One usable key of the set.
struct Key {
    alg: Algorithm,
    key: DecodingKey,
}

#[derive(Default)]
struct Keys {
    by_kid: HashMap<String, Key>,
    /// Keys without a `kid`, for a token without one when the set has one key only.
    unnamed: Vec<Key>,
    fetched_at: Option<Instant>,
    /// Why the last fetch failed, while no fetch has succeeded since.
    failed: Option<String>,
}

impl Keys {
    fn total(&self) -> usize {
        self.by_kid.len() + self.unnamed.len()
    }

    fn find(&self, kid: Option<&str>) -> Option<&Key> {
        match kid {
            Some(kid) => self.by_kid.get(kid),
            None if self.total() == 1 => self.by_kid.values().chain(&self.unnamed).next(),
            None => None,
        }
    }
}

/// The verifier of one issuer's tokens.
pub struct Verifier {
    issuer: String,
    audience: Option<String>,
    org_id: Option<String>,
    source: KeySource,
    keys: RwLock<Keys>,
    /// The least time between two fetches ([`REFETCH_EVERY`]).
    refetch_every: Duration,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
}

/// A token's claims after its signature, issuer, audience and times were checked.
#[derive(Debug)]
pub struct Checked(Claims);

impl Checked {
    /// The `vault_id` and `org_id` it names.
    pub fn vault(&self) -> (Option<&str>, Option<&str>) {
        (self.0.vault_id.as_deref(), self.0.org_id.as_deref())
    }
}

/// The claims read from a verified token.
#[derive(Debug, Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    permissions: Option<PermissionsClaim>,
    #[serde(default)]
    vault_id: Option<String>,
    #[serde(default)]
    org_id: Option<String>,
}

/// `permissions`: a list of names, or one space-separated string.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PermissionsClaim {
    List(Vec<String>),
    Spaced(String),
}

/// A verified token: its credential, and the subject the rate limits key on.
#[derive(Debug)]
pub struct Verified {
    pub credential: Credential,
    pub subject: String,
}

/// Whether `token` has the shape of a JWS in compact form: three base64url segments, the
/// first a JSON object (`eyJ`).
pub fn looks_like(token: &str) -> bool {
    let mut parts = token.split('.');
    let shaped = parts.by_ref().take(3).all(|p| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    shaped && parts.next().is_none() && token.starts_with("eyJ") && token.matches('.').count() == 2
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(Reason::AUTH_INVALID, message)
}

impl Verifier {
    /// The verifier of `issuer`'s tokens, its keys from `source`, checking `aud` when
    /// `audience` is given, mapping `org_id` to this vault (see `Config::jwt_verifier`).
    pub fn new(
        issuer: String,
        source: KeySource,
        audience: Option<String>,
        org_id: Option<String>,
    ) -> Self {
        Self {
            issuer,
            audience,
            org_id,
            source,
            keys: RwLock::default(),
            refetch_every: REFETCH_EVERY,
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The same verifier with another least time between two fetches (tests of a key
    /// rotation).
    pub fn with_refetch_every(mut self, every: Duration) -> Self {
        self.refetch_every = every;
        self
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Verify `token` for the vault `vault_id`. Refusals are `AUTH_INVALID` (the token is
    /// not good: its message says why, never the token), `VAULT_FORBIDDEN` (good, for
    /// another vault) or `AUTH_UNAVAILABLE` (the issuer's keys cannot be had now).
    pub async fn verify(&self, token: &str, vault_id: &str) -> Result<Verified> {
        let org_id = self.org_id.as_deref();
        self.verify_among(token, &[(vault_id, org_id)])
            .await
            .map(|(verified, _)| verified)
    }

    /// Verify `token` for one of several vaults, each `(vault_id, org_id)`: the vault
    /// its `vault_id` claim names, or for a token that names none the vault its `org_id`
    /// maps to; with the index of that vault. Refusals as [`Self::verify`]'s.
    pub async fn verify_among(
        &self,
        token: &str,
        vaults: &[(&str, Option<&str>)],
    ) -> Result<(Verified, usize)> {
        let claims = self.checked(token).await?;
        self.granted(claims, vaults)
    }

    /// `token`'s claims once its signature, issuer, audience and times hold: hosted mode
    /// opens only the vaults a good token names, then grants it one of them
    /// ([`Self::grant`]) without checking the signature again.
    pub async fn check(&self, token: &str) -> Result<Checked> {
        self.checked(token).await.map(Checked)
    }

    /// What a token [`Self::check`] passed grants, in which of `vaults`.
    pub fn grant(
        &self,
        checked: Checked,
        vaults: &[(&str, Option<&str>)],
    ) -> Result<(Verified, usize)> {
        self.granted(checked.0, vaults)
    }

    /// The claims of `token` once its signature, issuer, audience and times are checked.
    async fn checked(&self, token: &str) -> Result<Claims> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| invalid("the JWT's header is not valid (or its alg is not supported)"))?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(invalid(format!(
                "the JWT is signed with {:?}; only RS256 and ES256 are accepted",
                header.alg
            )));
        }
        let kid = header.kid.as_deref();
        if self.keys.read().find(kid).is_none() {
            self.refresh(kid).await?;
        }
        let keys = self.keys.read();
        let Some(key) = keys.find(kid) else {
            return Err(invalid(match kid {
                Some(_) => "the JWT is signed with a key its issuer does not publish",
                None => "the JWT names no key (`kid`) and the issuer publishes several",
            }));
        };
        if key.alg != header.alg {
            return Err(invalid(format!(
                "the JWT's alg {:?} does not fit its key ({:?})",
                header.alg, key.alg
            )));
        }
        let mut validation = Validation::new(key.alg);
        validation.leeway = LEEWAY;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.issuer]);
        // jsonwebtoken checks `aud` only when the token has one: a configured audience
        // makes the claim required too, so a token minted for no audience is refused.
        match &self.audience {
            Some(aud) => {
                validation.set_audience(&[aud]);
                validation.set_required_spec_claims(&["exp", "iss", "aud"]);
            }
            None => {
                validation.validate_aud = false;
                validation.set_required_spec_claims(&["exp", "iss"]);
            }
        }
        let data = jsonwebtoken::decode::<Claims>(token, &key.key, &validation)
            .map_err(|e| invalid(refusal(&e)))?;
        Ok(data.claims)
    }

    /// What checked `claims` grant, and in which of `vaults` (see [`Self::verify_among`]).
    fn granted(
        &self,
        claims: Claims,
        vaults: &[(&str, Option<&str>)],
    ) -> Result<(Verified, usize)> {
        // A token that names a vault is for that vault alone; `org_id` selects a vault only
        // for a token that names none.
        let vault = match (&claims.vault_id, &claims.org_id) {
            (Some(named), _) => vaults.iter().position(|(id, _)| id == named),
            (None, Some(org)) => vaults.iter().position(|(_, o)| *o == Some(org.as_str())),
            (None, None) => None,
        };
        let Some(vault) = vault else {
            return Err(Error::new(
                Reason::VAULT_FORBIDDEN,
                match (&claims.vault_id, &claims.org_id) {
                    (None, None) => "the JWT names no vault_id or org_id, so it selects no vault",
                    _ => "the JWT is for another vault than the one this daemon serves",
                },
            ));
        };
        let permissions = match claims.permissions {
            Some(PermissionsClaim::List(names)) => names,
            Some(PermissionsClaim::Spaced(names)) => {
                names.split_whitespace().map(str::to_string).collect()
            }
            None => Vec::new(),
        };
        let mut granted: Vec<Permission> = Vec::new();
        for p in permissions.iter().filter_map(|n| Permission::from_name(n)) {
            if !granted.contains(&p) {
                granted.push(p);
            }
        }
        Ok((
            Verified {
                credential: Credential::Token {
                    permissions: granted,
                },
                subject: claims.sub.unwrap_or_default(),
            },
            vault,
        ))
    }

    /// Fetch the keys again, unless a fetch ran within [`REFETCH_EVERY`]; one fetch at a
    /// time. An error only when no key at all is known and the fetch failed
    /// (`AUTH_UNAVAILABLE`); otherwise the caller looks up the key again.
    async fn refresh(&self, kid: Option<&str>) -> Result<()> {
        let _one = self.fetching.lock().await;
        {
            let keys = self.keys.read();
            // Another request fetched while this one waited.
            if keys.find(kid).is_some() {
                return Ok(());
            }
            let recent = keys
                .fetched_at
                .is_some_and(|at| at.elapsed() < self.refetch_every);
            if recent {
                return match &keys.failed {
                    Some(why) if keys.total() == 0 => Err(unavailable(why, self.refetch_every)),
                    _ => Ok(()),
                };
            }
        }
        let fetched = self.fetch().await;
        let mut keys = self.keys.write();
        keys.fetched_at = Some(Instant::now());
        match fetched {
            Ok(fresh) => {
                *keys = Keys {
                    fetched_at: keys.fetched_at,
                    ..fresh
                };
                Ok(())
            }
            Err(why) => {
                tracing::warn!(issuer = %self.issuer, error = %why, "cannot fetch the issuer's signing keys");
                keys.failed = Some(why.clone());
                if keys.total() == 0 {
                    Err(unavailable(&why, self.refetch_every))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Read the JWK Set from its source.
    async fn fetch(&self) -> std::result::Result<Keys, String> {
        let bytes = match &self.source {
            KeySource::File(path) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || std::fs::read(&path))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| format!("cannot read auth_jwks_file: {e}"))?
            }
            KeySource::Url(url) => {
                tokio::time::timeout(FETCH_TIMEOUT, super::idp::get_bounded(url, MAX_JWKS_BYTES))
                    .await
                    .map_err(|_| {
                        format!(
                            "the JWK Set did not arrive within {} s",
                            FETCH_TIMEOUT.as_secs()
                        )
                    })??
            }
        };
        parse_set(&bytes)
    }
}

fn unavailable(why: &str, retry: Duration) -> Error {
    Error::new(
        Reason::AUTH_UNAVAILABLE,
        format!("the identity provider's signing keys are not available: {why}"),
    )
    .with_retry_after(retry.as_secs().max(1))
}

/// Why `decode` refused a token, for the envelope: the kind only, never the token.
fn refusal(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::ExpiredSignature => "the JWT has expired".into(),
        K::ImmatureSignature => "the JWT is not valid yet (nbf)".into(),
        K::InvalidIssuer => "the JWT is from another issuer".into(),
        K::InvalidAudience => "the JWT is for another audience".into(),
        K::InvalidSignature => "the JWT's signature does not verify".into(),
        K::MissingRequiredClaim(claim) => format!("the JWT lacks the `{claim}` claim"),
        K::InvalidAlgorithm => "the JWT's alg does not fit its key".into(),
        _ => "the JWT is malformed".into(),
    }
}

/// The usable keys of a JWK Set: RSA keys (RS256) and P-256 keys (ES256), each with its
/// `alg` when the set names one (a key named for another alg is skipped). Keys of other
/// kinds, or that do not parse, are skipped; a set with no usable key is an error.
fn parse_set(bytes: &[u8]) -> std::result::Result<Keys, String> {
    #[derive(Deserialize)]
    struct Set {
        keys: Vec<serde_json::Value>,
    }
    let set: Set =
        serde_json::from_slice(bytes).map_err(|e| format!("the JWK Set is not valid JSON: {e}"))?;
    let mut keys = Keys::default();
    for value in set.keys {
        let Ok(jwk) = serde_json::from_value::<Jwk>(value) else {
            continue;
        };
        let alg = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => {
                Algorithm::ES256
            }
            _ => continue,
        };
        if let Some(named) = jwk.common.key_algorithm {
            if format!("{named:?}") != format!("{alg:?}") {
                continue;
            }
        }
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        let key = Key { alg, key };
        match jwk.common.key_id {
            Some(kid) => {
                keys.by_kid.insert(kid, key);
            }
            None => keys.unnamed.push(key),
        }
    }
    if keys.total() == 0 {
        return Err("the JWK Set holds no RS256 or ES256 key".into());
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_compact_jws_looks_like_a_jwt() {
        for yes in ["eyJhbGc.eyJzdWI.c2ln", "eyJ.e30.-_x"] {
            assert!(looks_like(yes), "{yes}");
        }
        for no in [
            "nvp_abc",
            "eyJhbGc.eyJzdWI",
            "eyJhbGc.eyJzdWI.c2ln.more",
            "eyJhbGc..c2ln",
            "abc.def.ghi",
            "eyJ+.e30.x",
        ] {
            assert!(!looks_like(no), "{no}");
        }
    }

    #[test]
    fn a_set_keeps_rs256_and_es256_keys_and_skips_the_rest() {
        let set = br#"{"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "EC", "crv": "P-256", "kid": "ec",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "EC", "crv": "P-256", "kid": "ec-named-rs", "alg": "RS256",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "weird"}
        ]}"#;
        let keys = parse_set(set).unwrap();
        assert_eq!(keys.total(), 1);
        assert!(keys.find(Some("ec")).is_some());
        assert!(
            keys.find(None).is_some(),
            "one key serves a token without kid"
        );
        assert!(keys.find(Some("hmac")).is_none());
        assert!(parse_set(br#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#).is_err());
        assert!(parse_set(b"not json").is_err());
    }
}
