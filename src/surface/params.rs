//! Parameters as every surface checks them: ranges, non-empty strings, AIP-160 filters,
//! AIP-132 orders, and AIP-158 page tokens. A query string and tool arguments reach the
//! same checks, so a bad value reads the same over `/v1` and MCP.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::error::{Error, Result};
use crate::queries::notes::Order;

/// `value` within `min..=max`, or `default` when absent: the one range check of every
/// surface (query parameters and tool arguments alike).
pub fn in_range(
    name: &str,
    value: Option<usize>,
    default: usize,
    min: usize,
    max: usize,
) -> Result<usize> {
    let Some(value) = value else {
        return Ok(default);
    };
    if !(min..=max).contains(&value) {
        return Err(Error::invalid_field(
            name,
            format!("must be from {min} to {max}, got {value}"),
        ));
    }
    Ok(value)
}

/// A string parameter that, when present, must not be empty.
pub fn non_empty<'a>(name: &str, value: Option<&'a str>) -> Result<Option<&'a str>> {
    match value {
        Some("") => Err(Error::invalid_field(name, "must be at least 1 character")),
        other => Ok(other),
    }
}

/// An AIP-160 filter given as text (absent: no filter), its fields checked against
/// `allowed`; `INVALID_FILTER` with the position on any mistake.
pub fn filter_text(raw: Option<&str>, allowed: &[&str]) -> Result<Option<crate::filter::Expr>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let invalid = |e: crate::filter::FilterError| {
        Error::new(
            crate::error::Reason::INVALID_FILTER,
            format!("filter: {} (at position {})", e.message, e.position),
        )
        .with_meta("position", e.position.to_string())
        .with_meta("filter", raw)
    };
    let expr = crate::filter::parse(raw).map_err(invalid)?;
    if let Some(e) = &expr {
        e.check_fields(allowed).map_err(invalid)?;
    }
    Ok(expr)
}

/// An AIP-132 order (`field`, `field asc` or `field desc`; one field; `score` alone means
/// best first) among `allowed`, or `default` when absent.
pub fn parse_order(raw: Option<&str>, allowed: &[&str], default: Order) -> Result<Order> {
    let Some(raw) = raw else {
        return Ok(default);
    };
    let words: Vec<&str> = raw.split_whitespace().collect();
    let hint = || {
        format!(
            "use one of {} followed by `asc` or `desc` (e.g. `{} desc`)",
            allowed
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", "),
            allowed.first().copied().unwrap_or("")
        )
    };
    let (field, desc) = match words.as_slice() {
        [f] => (*f, *f == "score"),
        [f, "asc"] => (*f, false),
        [f, "desc"] => (*f, true),
        _ => return Err(Error::invalid_field("order_by", hint())),
    };
    if !allowed.contains(&field) {
        return Err(Error::invalid_field(
            "order_by",
            format!("cannot order by `{field}`; {}", hint()),
        ));
    }
    Ok(Order {
        field: field.to_string(),
        desc,
    })
}

/// A `page_size` given as a number: `(default, max)` bounds it to 1..=max.
pub fn page_size(given: Option<usize>, (default, max): (usize, usize)) -> Result<usize> {
    match given {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(Error::invalid_field(
            "page_size",
            format!("must be from 1 to {max}, got {n}"),
        )),
    }
}

/// Tamper-evident, opaque page tokens: `base64url(payload).base64url(mac)`, where the
/// payload names the query it belongs to (a fingerprint of its parameters) and where the
/// next page starts, and the MAC is a keyed BLAKE3 hash under the vault's secret key.
pub struct PageTokens<'a> {
    pub key: &'a [u8; 32],
}

impl PageTokens<'_> {
    fn mac(&self, payload: &[u8]) -> [u8; 16] {
        let full = blake3::keyed_hash(self.key, payload);
        let mut out = [0u8; 16];
        out.copy_from_slice(&full.as_bytes()[..16]);
        out
    }

    fn fingerprint(query: &[(&str, &str)]) -> String {
        let mut hasher = blake3::Hasher::new();
        for (k, v) in query {
            hasher.update(k.as_bytes());
            hasher.update(&[0]);
            hasher.update(v.as_bytes());
            hasher.update(&[0]);
        }
        hasher.finalize().to_hex()[..16].to_string()
    }

    /// A token for the page after `cursor`, for the query named by `query` pairs.
    pub fn issue(&self, query: &[(&str, &str)], cursor: &str) -> String {
        let payload = format!("{}\n{}", Self::fingerprint(query), cursor);
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(payload.as_bytes()),
            URL_SAFE_NO_PAD.encode(self.mac(payload.as_bytes()))
        )
    }

    /// The cursor inside `token`, refusing forged tokens and tokens of another query.
    pub fn open(&self, query: &[(&str, &str)], token: &str) -> Result<String> {
        let forged = || {
            Error::invalid_field(
                "page_token",
                "is not a page token this server issued for this vault; drop it to start from the first page",
            )
        };
        let (payload_b64, mac_b64) = token.split_once('.').ok_or_else(forged)?;
        let payload = URL_SAFE_NO_PAD.decode(payload_b64).map_err(|_| forged())?;
        let mac = URL_SAFE_NO_PAD.decode(mac_b64).map_err(|_| forged())?;
        if mac.as_slice() != self.mac(&payload) {
            return Err(forged());
        }
        let payload = String::from_utf8(payload).map_err(|_| forged())?;
        let (fingerprint, cursor) = payload.split_once('\n').ok_or_else(forged)?;
        if fingerprint != Self::fingerprint(query) {
            return Err(Error::invalid_field(
                "page_token",
                "belongs to another query; repeat the parameters of the request that returned it, or drop it to start over",
            ));
        }
        Ok(cursor.to_string())
    }

    /// The offset inside `token`, for routes that page by position (search, tags).
    pub fn open_offset(&self, query: &[(&str, &str)], token: &str) -> Result<usize> {
        self.open(query, token)?
            .parse()
            .map_err(|_| Error::invalid_field("page_token", "is not a page token of this route"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Reason;

    #[test]
    fn tokens_round_trip_and_refuse_tampering_and_other_queries() {
        let key = [7u8; 32];
        let tokens = PageTokens { key: &key };
        let q = [("prefix", "projects/")];
        let t = tokens.issue(&q, "projects/b");
        assert_eq!(tokens.open(&q, &t).unwrap(), "projects/b");
        let mut tampered = t.clone().into_bytes();
        tampered[2] ^= 1;
        let tampered = String::from_utf8(tampered).unwrap();
        assert_eq!(
            tokens.open(&q, &tampered).unwrap_err().reason,
            Reason::VALIDATION_FAILED
        );
        let other = tokens.open(&[("prefix", "daily/")], &t).unwrap_err();
        assert!(other.message.contains("another query"), "{}", other.message);
        let other_key = PageTokens { key: &[8u8; 32] };
        assert!(other_key.open(&q, &t).is_err());
    }
}
