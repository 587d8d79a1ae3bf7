//! Console sessions: the secrets (a one-time sign-in code, a session id, a CSRF token),
//! the cookie that carries a session, and the credential a session is. The metadata store
//! keeps only [`digest`]s of the code and the session id (`meta::console`).
//!
//! A sign-in code lives [`CODE_LIFETIME`] and signs in once; a session lives
//! [`SESSION_LIFETIME`] from sign-in, or until sign-out. The cookie is `HttpOnly`,
//! `SameSite=Strict`, `Path=/`; under TLS it is `Secure` and named with the `__Host-`
//! prefix, so no other site on the host can set it.

use std::time::Duration;

use base64::Engine;
use subtle::ConstantTimeEq;

use super::{Credential, Permission};

/// How long a sign-in link works.
pub const CODE_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// How long a session lasts after sign-in.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// The session cookie's name: `__Host-` prefixed under TLS (the browser then insists on
/// `Secure`, `Path=/` and no `Domain`).
pub fn cookie_name(tls: bool) -> &'static str {
    if tls {
        "__Host-notevault_session"
    } else {
        "notevault_session"
    }
}

/// A new secret: 32 bytes of the system's random source, base64url without padding (43
/// characters).
pub fn new_secret() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no random source: {e}"))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// Whether `text` could be a secret of [`new_secret`] (checked before any lookup).
pub fn well_formed(text: &str) -> bool {
    text.len() == 43
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// What the store keeps of a secret: its BLAKE3 digest, hex.
pub fn digest(secret: &str) -> String {
    blake3::hash(secret.as_bytes()).to_hex().to_string()
}

/// Whether a presented CSRF token is the session's (constant time).
pub fn csrf_matches(presented: &str, stored: &str) -> bool {
    presented.len() == stored.len() && bool::from(presented.as_bytes().ct_eq(stored.as_bytes()))
}

/// The value of cookie `name` among a request's `Cookie` headers (RFC 6265 section 5.4:
/// `name=value` pairs separated by `; `). The first one wins.
pub fn cookie<'a>(headers: impl IntoIterator<Item = &'a [u8]>, name: &str) -> Option<&'a str> {
    headers
        .into_iter()
        .filter_map(|h| std::str::from_utf8(h).ok())
        .flat_map(|h| h.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim_matches('"'))
}

/// The `Set-Cookie` value that carries `secret` (or, with `None`, ends the cookie).
pub fn set_cookie(secret: Option<&str>, tls: bool) -> String {
    let name = cookie_name(tls);
    let secure = if tls { "; Secure" } else { "" };
    match secret {
        Some(s) => format!(
            "{name}={s}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
            SESSION_LIFETIME.as_secs()
        ),
        None => format!("{name}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}"),
    }
}

/// The credential of a signed-in console session: a session with every permission.
pub fn credential() -> Credential {
    Credential::Token {
        permissions: vec![Permission::NotesWrite, Permission::NotesReview],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_fresh_and_well_formed() {
        let a = new_secret().unwrap();
        let b = new_secret().unwrap();
        assert_ne!(a, b);
        assert!(well_formed(&a), "{a}");
        assert!(!well_formed("short"));
        assert!(!well_formed(&format!("{}!", &a[..42])));
        assert_eq!(digest(&a).len(), 64);
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let headers: [&[u8]; 2] = [b"a=1; notevault_session=xyz", b"b=2"];
        assert_eq!(cookie(headers, "notevault_session"), Some("xyz"));
        assert_eq!(cookie(headers, "b"), Some("2"));
        assert_eq!(cookie(headers, "nope"), None);
        let set = set_cookie(Some("s"), true);
        assert!(set.starts_with("__Host-notevault_session=s; Path=/; HttpOnly; SameSite=Strict"));
        assert!(set.ends_with("; Secure"));
        assert!(!set_cookie(Some("s"), false).contains("Secure"));
    }

    #[test]
    fn csrf_compares_whole_tokens() {
        assert!(csrf_matches("abc", "abc"));
        assert!(!csrf_matches("abd", "abc"));
        assert!(!csrf_matches("ab", "abc"));
        assert!(!csrf_matches("", "abc"));
    }
}
