//! What a request brings, read the same way by every surface: a body under a byte cap
//! and a deadline, and JSON arguments parsed into typed parameters, a misfit naming its
//! field (`VALIDATION_FAILED`).

use axum::body::Body;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Reason};

/// Read a request body of at most `limit` bytes within `timeout` (a body that trickles
/// in would hold its connection and task forever).
pub async fn read_body(
    body: Body,
    limit: usize,
    timeout: std::time::Duration,
) -> Result<axum::body::Bytes, Error> {
    // A declared length over the cap is refused before a byte is read, not after the
    // client has sent (or stalled on) what it declared.
    if axum::body::HttpBody::size_hint(&body).lower() > limit as u64 {
        return Err(Error::new(
            Reason::PAYLOAD_TOO_LARGE,
            format!("the request body is over {limit} bytes"),
        )
        .with_meta("limit", limit.to_string()));
    }
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) if is_length_limit(&e) => Err(Error::new(
            Reason::PAYLOAD_TOO_LARGE,
            format!("the request body is over {limit} bytes"),
        )
        .with_meta("limit", limit.to_string())),
        Ok(Err(e)) => Err(Error::new(
            Reason::MALFORMED_REQUEST,
            format!("the request body could not be read: {e}"),
        )),
        Err(_) => Err(Error::new(
            Reason::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} s",
                timeout.as_secs()
            ),
        )),
    }
}

fn is_length_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = err.source();
    }
    false
}

/// `raw` as `T`: a field that is unknown, missing or of the wrong type is
/// `VALIDATION_FAILED` naming it (its path inside the JSON).
pub fn parse_as<T: DeserializeOwned>(raw: &Value) -> Result<T, Error> {
    serde_path_to_error::deserialize(raw).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde names an unknown or missing field inside its message.
        let field = if path == "." {
            inner
                .split('`')
                .nth(1)
                .map(str::to_string)
                .unwrap_or_else(|| "body".to_string())
        } else {
            path
        };
        Error::invalid_field(field, inner)
    })
}
