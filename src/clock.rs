//! Time as every surface answers it. At the bottom of the stack: anything may use it.

use chrono::{DateTime, SecondsFormat, Utc};

/// RFC 3339 with milliseconds, UTC.
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}
