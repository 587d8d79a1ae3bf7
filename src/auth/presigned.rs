//! Presigned attachment links as a credential: a keyed BLAKE3 signature over the method,
//! the attachment's path, the expiry and (for a PUT) a one-time nonce. The link is made
//! by the presign route; `http::authenticate` checks it like any bearer.

use crate::error::{Error, Reason};

/// The query parameters of a presigned link (`vault`: a hosted vault's links name it).
pub const PARAMS: &[&str] = &["vault", "expires", "nonce", "signature"];

/// The signature of a presigned link: keyed BLAKE3 over method, path, expiry and nonce.
pub fn signature(key: &[u8; 32], method: &str, path: &str, expires: i64, nonce: &str) -> String {
    let mut h = blake3::Hasher::new_keyed(key);
    for part in [method, path, &expires.to_string(), nonce] {
        h.update(part.as_bytes());
        h.update(&[0]);
    }
    h.finalize().to_hex().to_string()
}

/// A link's parts as its query carries them.
pub struct Link {
    signature: String,
    expires: Option<i64>,
    pub nonce: String,
}

impl Link {
    /// The link `query` carries; `None` without a `signature` (the bearer decides).
    pub fn from_query(query: Option<&str>) -> Option<Link> {
        if !query?.contains("signature") {
            return None;
        }
        let pairs: Vec<(String, String)> = form_urlencoded::parse(query?.as_bytes())
            .into_owned()
            .collect();
        let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        Some(Link {
            signature: get("signature")?,
            expires: get("expires").and_then(|e| e.parse().ok()),
            nonce: get("nonce").unwrap_or_default(),
        })
    }

    /// Whether the link was signed with `key` for `method` on `path` (constant time).
    /// A link without an expiry is refused first: `AUTH_INVALID`.
    pub fn signed_with(&self, key: &[u8; 32], method: &str, path: &str) -> Result<bool, Error> {
        let expires = self.expires.ok_or_else(|| invalid("it has no expiry"))?;
        let want = signature(key, method, path, expires, &self.nonce);
        Ok(bool::from(subtle::ConstantTimeEq::ct_eq(
            want.as_bytes(),
            self.signature.as_bytes(),
        )))
    }

    /// A signed link's remaining checks at `now`: not expired, and a PUT has a nonce.
    /// Spending the nonce is the caller's (it is the vault's store).
    pub fn check(&self, method: &str, now: i64) -> Result<(), Error> {
        let expires = self.expires.ok_or_else(|| invalid("it has no expiry"))?;
        if expires < now {
            return Err(invalid("it expired").with_meta("expired_at", expires.to_string()));
        }
        if method == "PUT" && self.nonce.is_empty() {
            return Err(invalid("a PUT link has a nonce"));
        }
        Ok(())
    }

    pub fn expires(&self) -> i64 {
        self.expires.unwrap_or_default()
    }
}

/// A refusal of a presigned link: `AUTH_INVALID`, saying why.
pub fn invalid(why: &str) -> Error {
    Error::new(
        Reason::AUTH_INVALID,
        format!("the presigned link is not valid: {why}"),
    )
}
