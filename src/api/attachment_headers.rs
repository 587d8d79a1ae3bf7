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

/// Whether a browser may show `content_type` inline: raster images, audio, video and
/// plain text, which cannot run script. SVG, HTML, XML, PDF and everything unknown are
/// downloaded instead.
pub fn inline(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "image/png"
            | "image/jpeg"
            | "image/gif"
            | "image/webp"
            | "image/avif"
            | "image/bmp"
            | "image/x-icon"
            | "image/vnd.microsoft.icon"
            | "text/plain"
    ) || (essence.starts_with("audio/") || essence.starts_with("video/"))
        && !essence.contains("xml")
}

/// `builder` with the shield headers and the `Content-Disposition` for `file_name`.
pub fn apply(builder: Builder, content_type: &str, file_name: &str) -> Builder {
    let disposition = if inline(content_type) {
        "inline"
    } else {
        "attachment"
    };
    builder
        .header("content-security-policy", CSP)
        .header("x-content-type-options", "nosniff")
        .header("cross-origin-resource-policy", "same-origin")
        .header(
            "content-disposition",
            format!(
                "{disposition}; filename*=UTF-8''{}",
                percent_encoding::utf8_percent_encode(
                    file_name,
                    percent_encoding::NON_ALPHANUMERIC
                )
            ),
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
