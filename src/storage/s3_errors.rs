//! Failures of the S3 blob store in the reason table's terms: each a
//! `BLOB_STORE_UNAVAILABLE` naming what to fix (with `Retry-After` when the store did not
//! answer), or `ATTACHMENT_NOT_FOUND`; counted by kind for `/metrics`.

use crate::error::{Error, Reason};

/// Seconds a client waits before retrying when the store did not answer.
pub const RETRY_AFTER_SECONDS: u64 = 2;

/// An `object_store` failure in the reason table's terms, with a hint naming what to fix.
pub(super) fn blob_error(url: &str, e: object_store::Error) -> Error {
    let text = e.to_string();
    match e {
        object_store::Error::NotFound { .. } if !text.contains("NoSuchBucket") => {
            crate::telemetry::blob_error("missing");
            Error::new(
                Reason::ATTACHMENT_NOT_FOUND,
                "the attachment's bytes are not in the blob store",
            )
        }
        object_store::Error::Unauthenticated { .. }
        | object_store::Error::PermissionDenied { .. } => {
            crate::telemetry::blob_error("credentials");
            Error::new(
                Reason::BLOB_STORE_UNAVAILABLE,
                format!("the blob store {url} refused the credentials: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY ({text})"),
            )
        }
        _ => classify(url, &text),
    }
}

pub(super) fn classify(url: &str, text: &str) -> Error {
    if text.contains("NoSuchBucket") {
        crate::telemetry::blob_error("no_bucket");
        return Error::new(
            Reason::BLOB_STORE_UNAVAILABLE,
            format!("the bucket of {url} does not exist: create it, or fix blob_store"),
        );
    }
    if text.contains("InvalidAccessKeyId") || text.contains("SignatureDoesNotMatch") {
        crate::telemetry::blob_error("credentials");
        return Error::new(
            Reason::BLOB_STORE_UNAVAILABLE,
            format!("the blob store {url} refused the credentials: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
        );
    }
    crate::telemetry::blob_error("unreachable");
    Error::new(
        Reason::BLOB_STORE_UNAVAILABLE,
        format!("the blob store {url} cannot be reached: check AWS_ENDPOINT_URL and that the store is running ({text})"),
    )
    .with_retry_after(RETRY_AFTER_SECONDS)
}
