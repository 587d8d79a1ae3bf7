//! The headers an attachment is served with, so that no uploaded file can run in the
//! daemon's origin: an SVG or HTML file opened from a link would otherwise run its script
//! with the signed-in person's cookie (and approve an agent's own writes).
//!
//! Every answer carries `Content-Security-Policy: sandbox; default-src 'none'` (a
//! document rendered anyway gets a unique origin, no script, no subresource) and
//! `nosniff`; only types a browser shows as plain media are `inline`, every other type is
//! `attachment` (downloaded, never rendered as a document).

use axum::http::response::Builder;

/// The policy of every attachment answer, presigned links included.
pub const CSP: &str = "sandbox; default-src 'none'; frame-ancestors 'none'";

// Whether a browser may show a type inline: shared with the blob store's links.
pub use crate::surface::attachments::inline;

/// `builder` with the shield headers and the `Content-Disposition` for `file_name`.
pub fn apply(builder: Builder, content_type: &str, file_name: &str) -> Builder {
    builder
        .header("content-security-policy", CSP)
        .header("x-content-type-options", "nosniff")
        .header("cross-origin-resource-policy", "same-origin")
        .header(
            "content-disposition",
            crate::surface::attachments::disposition(content_type, file_name),
        )
}

#[cfg(test)]
mod tests {
    use super::inline;

    #[test]
    fn only_plain_media_is_shown_inline() {
        for t in [
            "image/png",
            "IMAGE/JPEG",
            "image/gif",
            "image/webp",
            "audio/mpeg",
            "video/mp4",
            "text/plain; charset=utf-8",
        ] {
            assert!(inline(t), "{t}");
        }
        for t in [
            "image/svg+xml",
            "text/html",
            "application/xhtml+xml",
            "text/xml",
            "application/xml",
            "application/pdf",
            "text/javascript",
            "application/octet-stream",
            "multipart/x-mixed-replace",
            "video/vnd.mpeg.dash.mpd+xml",
            "",
        ] {
            assert!(!inline(t), "{t}");
        }
    }
}
