//! A JSON answer of `/v1`; the shapes it carries are `surface::wire`'s, named here too
//! for the handlers.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub use crate::surface::wire::*;

/// A JSON answer (`application/json`). Serialized into one `Vec` that starts at
/// [`JSON_CAPACITY`]: axum's `Json` starts a `BytesMut` at 128 bytes and writes each of
/// serde_json's small pieces through its `BufMut` (5 % of a search's instructions, most of
/// a line-sliced read's serialization). A value that cannot be serialized answers the
/// envelope (`INTERNAL`, under the status a handler puts around it, as axum's answered its
/// text), never a bare text body.
pub struct Json<T>(pub T);

/// Where a JSON answer's buffer starts: a page of search results or of lines (~4-16 KiB)
/// then grows once or twice, not six times.
const JSON_CAPACITY: usize = 4096;

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        let mut body = Vec::with_capacity(JSON_CAPACITY);
        match serde_json::to_writer(&mut body, &self.0) {
            Ok(()) => (
                StatusCode::OK,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                body,
            )
                .into_response(),
            Err(e) => crate::surface::envelope::ApiError::from(crate::error::Error::internal(
                format!("the answer could not be serialized: {e}"),
            ))
            .into_response(),
        }
    }
}
