//! Query strings as `/v1` reads them; the checks of their values (ranges, filters,
//! orders, page tokens) are `surface::params`, shared with the MCP tools.
//!
//! Query strings are parsed by hand (form-urlencoded) so that every bad value is a
//! `VALIDATION_FAILED` naming its field, and unknown parameters are refused rather than
//! silently ignored.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::queries::notes::Order;
pub use crate::surface::params::{
    filter_text, in_range, non_empty, page_size, parse_order, PageTokens,
};

/// A request's query parameters.
pub struct Query {
    values: HashMap<String, String>,
}

impl Query {
    /// Parse `uri`'s query, accepting only `allowed` names.
    pub fn parse(query: Option<&str>, allowed: &[&str]) -> Result<Self> {
        let mut values = HashMap::new();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (key, value) = (form_decode(key, key)?, form_decode(key, value)?);
            if !allowed.contains(&key.as_str()) {
                let known = if allowed.is_empty() {
                    "this route takes no query parameters".to_string()
                } else {
                    format!("known parameters: {}", allowed.join(", "))
                };
                return Err(Error::invalid_field(
                    key.as_str(),
                    format!("unknown query parameter; {known}"),
                ));
            }
            if values.insert(key.clone(), value).is_some() {
                return Err(Error::invalid_field(key.as_str(), "given more than once"));
            }
        }
        Ok(Self { values })
    }

    pub fn str(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// A string parameter that, when present, must not be empty.
    pub fn non_empty(&self, name: &str) -> Result<Option<&str>> {
        non_empty(name, self.str(name))
    }

    /// A boolean parameter (`true` or `false`), or `default` when absent.
    pub fn bool(&self, name: &str, default: bool) -> Result<bool> {
        match self.str(name) {
            None => Ok(default),
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(other) => Err(Error::invalid_field(
                name,
                format!("must be `true` or `false`, got {other:?}"),
            )),
        }
    }

    /// A string parameter, owned.
    pub fn owned(&self, name: &str) -> Option<String> {
        self.str(name).map(str::to_string)
    }

    /// An integer parameter, parsed; the range (`min..=max`, checked by [`in_range`])
    /// is named in the message of a value that is not an integer.
    pub fn opt_int(&self, name: &str, min: usize, max: usize) -> Result<Option<usize>> {
        let Some(raw) = self.str(name) else {
            return Ok(None);
        };
        raw.trim().parse().map(Some).map_err(|_| {
            Error::invalid_field(
                name,
                format!("must be an integer from {min} to {max}, got {raw:?}"),
            )
        })
    }

    /// An integer parameter within `min..=max`, or `default` when absent.
    pub fn int(&self, name: &str, default: usize, min: usize, max: usize) -> Result<usize> {
        in_range(name, self.opt_int(name, min, max)?, default, min, max)
    }
}

/// Parse an AIP-160 `filter` parameter and check its fields; `INVALID_FILTER` with the
/// position on any mistake.
pub fn filter(q: &Query, allowed: &[&str]) -> Result<Option<crate::filter::Expr>> {
    filter_text(q.non_empty("filter")?, allowed)
}

/// Parse an AIP-132 `order_by` parameter: see [`parse_order`].
pub fn order_by(q: &Query, allowed: &[&str], default: Order) -> Result<Order> {
    parse_order(q.non_empty("order_by")?, allowed, default)
}

/// One `application/x-www-form-urlencoded` part (`+` is a space), decoded; bytes that
/// are not UTF-8 once decoded are refused (a lossy decoding would search for, or filter
/// by, something the client never sent).
fn form_decode(key: &str, raw: &str) -> Result<String> {
    let spaced = raw.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8()
        .map(|v| v.into_owned())
        .map_err(|_| {
            let key = percent_encoding::percent_decode_str(key).decode_utf8_lossy();
            Error::invalid_field(
                key.as_ref(),
                "is not UTF-8 once percent-decoded; send UTF-8 text, percent-encoded",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_checked() {
        let q = Query::parse(Some("limit=0&offset=x"), &["limit", "offset"]).unwrap();
        assert!(q
            .int("limit", 200, 1, 2000)
            .unwrap_err()
            .message
            .contains("limit"));
        assert!(q.int("offset", 1, 1, usize::MAX).is_err());
        assert!(Query::parse(Some("nope=1"), &["limit"]).is_err());
        assert!(Query::parse(Some("limit=1&limit=2"), &["limit"]).is_err());
    }
}
