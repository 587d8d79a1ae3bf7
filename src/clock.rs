//! Time as every surface answers it. At the bottom of the stack: anything may use it.

use chrono::{DateTime, SecondsFormat, Utc};

/// RFC 3339 with milliseconds, UTC.
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A timestamp as stored (RFC 3339); `now` for one that does not parse.
pub fn parse_or_now(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|_| Utc::now())
}
