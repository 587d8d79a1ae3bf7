//! `GET /v1/grep`: its query string read into `surface::grep::GrepParams`, then the grep
//! the MCP `grep` tool calls too.

use std::sync::Arc;

use axum::http::request::Parts;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::api::wire::Json;
use crate::error::Error;
use crate::state::State;
use crate::surface::grep::{grep, GrepParams, GrepResponse, GREP_PAGE_SIZE};

/// Lines matching a regex (the Rust `regex` crate's syntax) or a literal in the current
/// content of every non-private note: the lines `rg -n` finds in the markdown files.
#[utoipa::path(
    get,
    path = "/v1/grep",
    tag = "Search",
    params(
        ("pattern" = String, Query, description = "A regex in the Rust `regex` crate's syntax (https://docs.rs/regex/#syntax), matched one line at a time as `rg` does; 1..1000 characters.", min_length = 1),
        ("literal" = Option<bool>, Query, description = "Search the pattern as written, not as a regex (`rg -F`)."),
        ("case" = Option<String>, Query, description = "`sensitive` (default), `insensitive` (`rg -i`) or `smart` (`rg -S`: insensitive unless the pattern has an upper-case letter)."),
        ("word" = Option<bool>, Query, description = "Only whole words (`rg -w`)."),
        ("filter" = Option<String>, Query, description = "AIP-160 filter over the note fields of `GET /v1/notes`."),
        ("page_size" = Option<usize>, Query, description = "Matching lines per page, 1..1000 (default 100)."),
        ("page_token" = Option<String>, Query, description = "`next_page_token` of the previous page, with the same other parameters."),
    ),
    responses(
        (status = 200, description = "Matching lines by note, and coverage; zero matches is a 200.", body = GrepResponse),
        (status = 400, description = "Empty, overlong, invalid or too large pattern; bad filter, page token or parameter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn grep_route(state: Arc<State>, parts: Parts) -> ApiResult<Json<GrepResponse>> {
    let q = Query::parse(
        parts.uri.query(),
        &[
            "pattern",
            "literal",
            "case",
            "word",
            "filter",
            "page_size",
            "page_token",
        ],
    )?;
    let page_size = q.opt_int("page_size", 1, GREP_PAGE_SIZE.1)?;
    let params = GrepParams {
        pattern: q
            .str("pattern")
            .ok_or_else(|| {
                Error::invalid_field("pattern", "is required: the regex or text to find")
            })?
            .to_string(),
        literal: Some(q.bool("literal", false)?),
        case: q.str("case").map(str::to_string),
        word: Some(q.bool("word", false)?),
        filter: q.non_empty("filter")?.map(str::to_string),
        page_size,
        page_token: q.non_empty("page_token")?.map(str::to_string),
    };
    Ok(Json(grep(state, params).await?))
}
