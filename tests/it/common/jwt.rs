//! Signing keys and JWTs for tests of identity-provider tokens: an ES256 key made per
//! test (rcgen), the RSA test key of `tests/idp/`, and their public JWKs.

use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A signing key and its public JWK.
pub struct SigningKey {
    pub kid: String,
    pub alg: Algorithm,
    pub encoding: EncodingKey,
    pub jwk: Value,
}

pub fn es256(kid: &str) -> SigningKey {
    let pair = rcgen::KeyPair::generate().unwrap();
    let raw = pair.public_key_raw();
    assert_eq!(raw.len(), 65, "an uncompressed P-256 point");
    SigningKey {
        kid: kid.into(),
        alg: Algorithm::ES256,
        encoding: EncodingKey::from_ec_der(&pair.serialize_der()),
        jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
                    "x": b64(&raw[1..33]), "y": b64(&raw[33..])}),
    }
}

/// The RSA test key of `tests/idp/` (made once with `openssl genrsa 2048`; a test key,
/// never used anywhere else).
pub fn rs256(kid: &str) -> SigningKey {
    let der = include_bytes!("../../idp/rsa-test-key.der");
    let n = include_str!("../../idp/rsa-test-key.n").trim();
    SigningKey {
        kid: kid.into(),
        alg: Algorithm::RS256,
        encoding: EncodingKey::from_rsa_der(der),
        jwk: json!({"kty": "RSA", "kid": kid, "alg": "RS256", "n": n, "e": "AQAB"}),
    }
}

pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

pub fn sign(key: &SigningKey, claims: &Value) -> String {
    let mut header = Header::new(key.alg);
    header.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&header, claims, &key.encoding).unwrap()
}
