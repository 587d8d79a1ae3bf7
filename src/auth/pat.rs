//! Personal access tokens: the format and the keyed hash. A token is `nvp_`, 32 base62
//! characters from the system's random source (about 190 bits), and 6 base62 characters
//! of the CRC-32 of what precedes them, so a secret scanner tells a token from noise
//! without asking the daemon (and the daemon refuses a mistyped one without a lookup).
//! `nvp_` and the next 8 characters are its public prefix: shown by `token list`, used to
//! find its row, allowed in a log line. The metadata store keeps only the BLAKE3 keyed
//! hash of a token, compared in constant time.

use subtle::ConstantTimeEq;

/// What every personal access token starts with.
pub const PREFIX: &str = "nvp_";
const RANDOM_CHARS: usize = 32;
const CHECK_CHARS: usize = 6;
/// The length of a token.
pub const LEN: usize = PREFIX.len() + RANDOM_CHARS + CHECK_CHARS;
/// The length of its public prefix (`nvp_` and 8 characters).
pub const PUBLIC_LEN: usize = PREFIX.len() + 8;

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A new token.
pub fn generate() -> Result<String, String> {
    let mut token = String::with_capacity(LEN);
    token.push_str(PREFIX);
    let mut bytes = [0u8; 64];
    while token.len() < PREFIX.len() + RANDOM_CHARS {
        getrandom::fill(&mut bytes).map_err(|e| format!("no random source: {e}"))?;
        // 248 = 4 × 62: rejecting the bytes above keeps every character equally likely.
        for b in bytes.iter().filter(|&&b| b < 248) {
            if token.len() == PREFIX.len() + RANDOM_CHARS {
                break;
            }
            token.push(BASE62[usize::from(b % 62)] as char);
        }
    }
    let check = checksum(&token);
    token.push_str(&check);
    Ok(token)
}

/// The 6 base62 characters of the CRC-32 of `body`.
fn checksum(body: &str) -> String {
    let mut n = u64::from(crc32fast::hash(body.as_bytes()));
    let mut out = [b'0'; CHECK_CHARS];
    for slot in out.iter_mut().rev() {
        *slot = BASE62[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `token` has the shape of a personal access token (it starts with `nvp_`).
pub fn looks_like(token: &str) -> bool {
    token.starts_with(PREFIX)
}

/// Whether `token` is a well-formed personal access token: its length, its characters
/// and its checksum.
pub fn well_formed(token: &str) -> bool {
    token.len() == LEN
        && token.starts_with(PREFIX)
        && token[PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric())
        && checksum(&token[..LEN - CHECK_CHARS]) == token[LEN - CHECK_CHARS..]
}

/// The public prefix of a well-formed token (of any other string, as much of its first
/// `PUBLIC_LEN` bytes as ends on a character boundary: a malformed token may hold a
/// multi-byte character there; found by tests/it/fuzz.rs).
pub fn public_prefix(token: &str) -> &str {
    let mut end = PUBLIC_LEN.min(token.len());
    while !token.is_char_boundary(end) {
        end -= 1;
    }
    &token[..end]
}

/// The keyed hash the metadata store keeps, as hex.
pub fn hash(key: &[u8; 32], token: &str) -> String {
    blake3::keyed_hash(key, token.as_bytes())
        .to_hex()
        .to_string()
}

/// Whether `token` is the one whose hash is `stored` (hex), in constant time.
pub fn matches(key: &[u8; 32], token: &str, stored: &str) -> bool {
    let Ok(stored) = blake3::Hash::from_hex(stored) else {
        return false;
    };
    let presented = blake3::keyed_hash(key, token.as_bytes());
    bool::from(presented.as_bytes()[..].ct_eq(&stored.as_bytes()[..]))
}

/// `30d`, `12h`, `90m`, `2w`, `3600s`: a lifetime.
pub fn parse_lifetime(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| {
        format!("invalid lifetime {text:?}: use a number and s, m, h, d or w (30d)")
    })?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => {
            return Err(format!(
                "invalid lifetime {text:?}: use a number and s, m, h, d or w (30d)"
            ))
        }
    };
    if n == 0 {
        return Err(format!("invalid lifetime {text:?}: it must be more than 0"));
    }
    n.checked_mul(seconds)
        .filter(|s| *s <= 100 * 365 * 86_400)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("invalid lifetime {text:?}: at most 100 years"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_checksummed_and_recognised() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), LEN);
        assert!(looks_like(&a) && well_formed(&a), "{a}");
        assert_eq!(public_prefix(&a), &a[..12]);
        // One character changed: the checksum no longer matches.
        let mut bad = a.clone().into_bytes();
        bad[10] = if bad[10] == b'a' { b'b' } else { b'a' };
        assert!(!well_formed(std::str::from_utf8(&bad).unwrap()));
        assert!(!well_formed(&a[..LEN - 1]));
        assert!(!well_formed("nvp_"));
        let key = [7u8; 32];
        let stored = hash(&key, &a);
        assert!(matches(&key, &a, &stored));
        assert!(!matches(&key, &b, &stored));
        assert!(!matches(&[8u8; 32], &a, &stored));
        assert!(!stored.contains(&a[4..]));
    }

    #[test]
    fn lifetimes() {
        assert_eq!(parse_lifetime("30d").unwrap().as_secs(), 30 * 86_400);
        assert_eq!(parse_lifetime("12h").unwrap().as_secs(), 12 * 3600);
        assert_eq!(parse_lifetime("2w").unwrap().as_secs(), 14 * 86_400);
        for bad in ["", "d", "30", "30x", "0d", "-1d", "999999999999w"] {
            assert!(parse_lifetime(bad).is_err(), "{bad}");
        }
    }
}
