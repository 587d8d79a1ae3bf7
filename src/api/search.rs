//! `GET /v1/search`: its query string read into `surface::search::SearchParams`, then
//! the search the MCP `search` tool calls too.

use std::sync::Arc;

use axum::http::request::Parts;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::Query;
use crate::api::wire::Json;
use crate::error::Error;
use crate::state::State;
use crate::surface::search::{search, SearchParams, SearchResponse, SEARCH_PAGE_SIZE};

/// Lexical search (BM25) over title and aliases (boosted most), headings, tags, path,
/// frontmatter properties, body and what links to a note say of it, with English word
/// forms, CJK included; dotted names found whole; a page's copies in the reader's language
/// first. A question is
/// read as ranked words (see `match`); `query` in the answer says how it was read. Results are handles plus provenance; read a body
/// with `GET /v1/notes/{note}`.
#[utoipa::path(
    get,
    path = "/v1/search",
    tag = "Search",
    params(
        ("q" = String, Query, description = "A question or words, ranked (more matching words rank higher; stop words left out; word forms found), and for precision `\"a phrase\"`, `+required`, `-excluded`, `prefix*`, `a OR b`, and `title:` / `aliases:` / `headings:` / `lead:` / `tags:` / `path:` / `properties:` / `body:` / `links:` to search one field (those must match). 1..1000 characters. `query` is accepted as another name.", min_length = 1),
        ("match" = Option<String>, Query, description = "`any` (default: plain words ranked, at least one must match) or `all` (every word must match, stop words too). The answer's `query` says how `q` was read."),
        ("filter" = Option<String>, Query, description = "AIP-160 filter over the note fields of `GET /v1/notes` (e.g. `tags:project AND updated_at > 2026-01-01`)."),
        ("order_by" = Option<String>, Query, description = "`score` (default, best first), or `updated_at`, `created_at`, `title`, `slug` with `asc`/`desc`."),
        ("page_size" = Option<usize>, Query, description = "Results per page, 1..100 (default 10)."),
        ("page_token" = Option<String>, Query, description = "`next_page_token` of the previous page, with the same other parameters."),
        ("min_seq" = Option<i64>, Query, description = "Wait (up to 10 s) until the index reflects this `committed_seq` (from a write receipt), to read your own writes; in hybrid mode, until the note vectors do too. `coverage.indexed_seq` says what was reached."),
        ("mode" = Option<String>, Query, description = "`lexical` (default: BM25) or `hybrid`: BM25 and the nearest notes by meaning from the local embedding model the server was given (`NOTEVAULT_EMBED_MODEL`; nothing is downloaded), fused by score (each side's scores weighed by how far the keyword winner is ahead). `coverage.retrievers` says which retrievers ran and how many notes each covered; without a usable model the answer is lexical and `coverage` says why. Another value is `VALIDATION_FAILED`."),
    ),
    responses(
        (status = 200, description = "Results and coverage; zero results is a 200.", body = SearchResponse),
        (status = 400, description = "Empty, overlong or malformed query, bad filter, page token or parameter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn search_route(state: Arc<State>, parts: Parts) -> ApiResult<Json<SearchResponse>> {
    let q = Query::parse(
        parts.uri.query(),
        &[
            "q",
            "query",
            "filter",
            "order_by",
            "page_size",
            "page_token",
            "min_seq",
            "mode",
            "match",
        ],
    )?;
    let text = match (q.str("q"), q.str("query")) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid_field("query", "give `q` or `query`, not both").into())
        }
        (Some(t), None) | (None, Some(t)) => t.to_string(),
        (None, None) => {
            return Err(Error::invalid_field("q", "is required: the words to search for").into())
        }
    };
    let min_seq = match q.str("min_seq") {
        Some(raw) => Some(
            raw.trim()
                .parse::<i64>()
                .ok()
                .filter(|s| *s >= 0)
                .ok_or_else(|| {
                    Error::invalid_field(
                        "min_seq",
                        format!("must be a committed_seq (0 or more), got {raw:?}"),
                    )
                })?,
        ),
        None => None,
    };
    let page_size = q.opt_int("page_size", 1, SEARCH_PAGE_SIZE.1)?;
    let params = SearchParams {
        q: text,
        filter: q.non_empty("filter")?.map(str::to_string),
        order_by: q.non_empty("order_by")?.map(str::to_string),
        page_size,
        page_token: q.non_empty("page_token")?.map(str::to_string),
        min_seq,
        match_mode: q.non_empty("match")?.map(str::to_string),
        mode: q.non_empty("mode")?.map(str::to_string),
    };
    Ok(Json(search(state, params).await?))
}
