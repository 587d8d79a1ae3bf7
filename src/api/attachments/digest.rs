//! An upload's `Content-Digest` (RFC 9530): the SHA-256 the client says its bytes have.
//! Checked against the bytes received in both modes (a mismatch stores nothing); in a
//! hosted vault it also names the blob up front, so a large upload goes straight to its
//! content address instead of a staged object copied there at the end.

use axum::http::HeaderMap;

use crate::error::Error;

/// The header, as a field name in errors.
const FIELD: &str = "Content-Digest";

/// The declared SHA-256 (lowercase hex) of `headers`' `Content-Digest`, if it has a
/// `sha-256` member. Other algorithms are ignored (RFC 9530 lets a recipient skip what it
/// does not check); a malformed field or a `sha-256` that is not 32 bytes is refused.
pub(super) fn declared_sha256(headers: &HeaderMap) -> Result<Option<String>, Error> {
    let mut values = Vec::new();
    for value in headers.get_all(FIELD) {
        let text = value.to_str().map_err(|_| {
            Error::invalid_field(
                FIELD,
                "is not visible ASCII; send `sha-256=:<base64 of the 32-byte hash>:`",
            )
        })?;
        // An empty field line adds no member.
        if !text.trim().is_empty() {
            values.push(text);
        }
    }
    if values.is_empty() {
        return Ok(None);
    }
    // Several field lines are one comma-separated dictionary (RFC 9651 §4.2).
    let joined = values.join(", ");
    let dict = sfv::Parser::new(&joined).parse::<sfv::Dictionary>().map_err(|e| {
        Error::invalid_field(
            FIELD,
            format!("is not a structured-field dictionary ({e}); send `sha-256=:<base64 of the 32-byte hash>:`"),
        )
    })?;
    let Some(member) = dict.get("sha-256") else {
        return Ok(None);
    };
    let bytes = match member {
        sfv::ListEntry::Item(sfv::Item {
            bare_item: sfv::BareItem::ByteSequence(bytes),
            ..
        }) => bytes,
        _ => {
            return Err(Error::invalid_field(
                FIELD,
                "has a `sha-256` that is not a byte sequence; send `sha-256=:<base64>:`",
            ))
        }
    };
    if bytes.len() != 32 {
        return Err(Error::invalid_field(
            FIELD,
            format!(
                "has a `sha-256` of {} bytes; a SHA-256 is 32 bytes",
                bytes.len()
            ),
        ));
    }
    Ok(Some(crate::vault::observe::hex(bytes)))
}

/// Refuse bytes that are not what the client declared: nothing of them is kept.
pub(super) fn check(declared: Option<&str>, received: &str) -> Result<(), Error> {
    match declared {
        Some(declared) if declared != received => Err(Error::invalid_field(
            FIELD,
            format!("declares sha-256 {declared}, but the bytes received hash to {received}: nothing was stored; send the whole file again (through a presigned link: with a new link from POST /v1/attachments:presign), or without Content-Digest"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(FIELD, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn a_sha256_member_is_read_among_others_and_other_algorithms_alone_are_ignored() {
        // RFC 9530's example: the SHA-256 of `{"hello": "world"}`.
        let want = "X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=";
        let hex = crate::vault::observe::sha256_hex(b"{\"hello\": \"world\"}");
        for values in [
            vec![format!("sha-256=:{want}:")],
            vec![format!("sha-512=:AAAA:, sha-256=:{want}:")],
            vec!["sha-512=:AAAA:".to_string(), format!("sha-256=:{want}:")],
            vec![String::new(), format!("sha-256=:{want}:")],
        ] {
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            assert_eq!(
                declared_sha256(&headers(&values)).unwrap().as_deref(),
                Some(hex.as_str()),
                "{values:?}"
            );
        }
        assert_eq!(declared_sha256(&headers(&[])).unwrap(), None);
        assert_eq!(
            declared_sha256(&headers(&["sha-512=:AAAA:"])).unwrap(),
            None
        );
    }

    #[test]
    fn a_malformed_digest_is_refused_naming_the_header() {
        for bad in [
            "sha-256=abc",
            "sha-256=:AAAA:",
            "sha-256=:not base64!:",
            "sha-256",
            "=:AAAA:",
        ] {
            let err = declared_sha256(&headers(&[bad])).unwrap_err();
            assert_eq!(err.reason, crate::error::Reason::VALIDATION_FAILED, "{bad}");
            assert_eq!(err.field_violations[0].field, FIELD, "{bad}");
        }
        let err = check(Some("aa"), "bb").unwrap_err();
        assert!(
            err.message.contains("nothing was stored"),
            "{}",
            err.message
        );
        assert!(check(Some("aa"), "aa").is_ok() && check(None, "bb").is_ok());
    }
}
