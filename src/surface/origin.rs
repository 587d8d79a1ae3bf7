//! Where this daemon is reached, as the links it hands out (presigned links, sign-in
//! links, OAuth metadata) name it.

use axum::http::HeaderMap;

use crate::config::Config;

/// The daemon's public base URL: `public_url` when configured, else the scheme it serves
/// and the request's `Host` (which the Host guard has checked).
pub fn public_base(config: &Config, headers: &HeaderMap) -> String {
    if let Some(url) = &config.public_url {
        return url.trim_end_matches('/').to_string();
    }
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    format!("{}://{host}", config.scheme())
}
