//! Search, grep, the tag rollup, property aggregation and the vault summary. Each handler
//! turns its parameters into a typed request and calls one function (`search`, `grep`,
//! `tags`, `aggregate`, `vault`) that MCP calls too, so both surfaces answer the same JSON.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::request::Parts;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::notes::blocking;
use crate::api::params::{self, PageTokens, Query};
use crate::api::wire::{Coverage, NoteHandle};
use crate::error::Error;
use crate::index::grep::{Case, Pattern};
use crate::queries::notes::{Order, NOTE_FILTER_FIELDS};
use crate::queries::search::{check_min_seq, parse_query, GrepRequest, SearchRequest};
use crate::state::State;

/// How long `min_seq` may wait for the index.
pub const MIN_SEQ_WAIT: Duration = Duration::from_secs(10);
/// How long a grep may search before it answers what it found.
pub const GREP_TIMEOUT: Duration = Duration::from_secs(10);
pub const SEARCH_PAGE_SIZE: (usize, usize) = (10, 100);
pub const GREP_PAGE_SIZE: (usize, usize) = (100, 1000);
pub const TAGS_PAGE_SIZE: (usize, usize) = (200, 1000);
/// Fields a search can be ordered by.
pub const SEARCH_ORDERS: &[&str] = &["score", "updated_at", "created_at", "title", "slug"];

/// Where a match was found in a note.
#[derive(Debug, Serialize, ToSchema)]
pub struct Snippet {
    /// The line the snippet comes from (1-based); null when it is the title.
    pub line: Option<usize>,
    /// At most 200 characters of that line, matches between `<mark>` and `</mark>`, `…`
    /// where it was cut.
    pub text: String,
}

/// An `f32` written as the `f64` with the same digits (`0.8712345`, not
/// `0.8712345361709595`), so that JSON built through `serde_json::Value` (MCP's
/// `structuredContent`) reads as `/v1` does.
fn f32_as_printed<S: serde::Serializer>(v: &f32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(v.to_string().parse().unwrap_or(f64::from(*v)))
}

/// One search result: the note handle plus why it matched. Never a body.
#[derive(Debug, Serialize, ToSchema)]
pub struct SearchResult {
    #[serde(flatten)]
    pub note: NoteHandle,
    /// BM25 relevance (higher is better).
    #[serde(serialize_with = "f32_as_printed")]
    pub score: f32,
    /// Where the words were found: `title`, `headings`, `tags`, `path`, `properties`,
    /// `body`.
    pub matched_fields: Vec<String>,
    /// The first 20 matching line numbers (1-based, as in the line-sliced read); the
    /// field list comes from the same lines.
    pub lines: Vec<usize>,
    pub snippet: Option<Snippet>,
}

/// `GET /v1/search`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SearchResponse {
    pub results: Vec<SearchResult>,
    /// Pass as `page_token` for the next page; null on the last page.
    pub next_page_token: Option<String>,
    pub coverage: Coverage,
}

/// The parameters of a search, as both surfaces take them (`GET /v1/search`, the MCP
/// `search` tool).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    /// What to find: words (all must match), `"a phrase"`, `prefix*`, `-excluded`,
    /// `a OR b`, and `title:` / `headings:` / `tags:` / `path:` / `properties:` / `body:`
    /// to search one field. Case and accents do not matter; CJK text works. 1..1000
    /// characters.
    #[schema(min_length = 1, max_length = 1000)]
    pub q: String,
    /// AIP-160 filter over the note fields of `list_notes` (e.g.
    /// `tags:project AND updated_at > "2026-01-01T00:00:00Z"`).
    pub filter: Option<String>,
    /// `score` (default, best first), or `updated_at`, `created_at`, `title`, `slug` with
    /// `asc` or `desc`.
    pub order_by: Option<String>,
    /// Results per page, 1..100 (default 10).
    #[schema(minimum = 1, maximum = 100)]
    pub page_size: Option<usize>,
    /// The `next_page_token` of the previous page; repeat the other parameters unchanged.
    pub page_token: Option<String>,
    /// Wait (up to 10 s) until the index reflects this `committed_seq` (from a write
    /// receipt), to find what was just written; `coverage.indexed_seq` says what was
    /// reached.
    #[schema(minimum = 0)]
    pub min_seq: Option<i64>,
}

/// Lexical search (BM25) over title (boosted most), headings, tags, path, frontmatter
/// properties and body, CJK included. Results are handles plus provenance; read a body
/// with `GET /v1/notes/{note}`.
#[utoipa::path(
    get,
    path = "/v1/search",
    tag = "Search",
    params(
        ("q" = String, Query, description = "Words (all must match), `\"a phrase\"`, `prefix*`, `-excluded`, `a OR b`, and `title:` / `headings:` / `tags:` / `path:` / `properties:` / `body:` to search one field. 1..1000 characters. `query` is accepted as another name.", min_length = 1),
        ("filter" = Option<String>, Query, description = "AIP-160 filter over the note fields of `GET /v1/notes` (e.g. `tags:project AND updated_at > 2026-01-01`)."),
        ("order_by" = Option<String>, Query, description = "`score` (default, best first), or `updated_at`, `created_at`, `title`, `slug` with `asc`/`desc`."),
        ("page_size" = Option<usize>, Query, description = "Results per page, 1..100 (default 10)."),
        ("page_token" = Option<String>, Query, description = "`next_page_token` of the previous page, with the same other parameters."),
        ("min_seq" = Option<i64>, Query, description = "Wait (up to 10 s) until the index reflects this `committed_seq` (from a write receipt), to read your own writes. `coverage.indexed_seq` says what was reached."),
        ("mode" = Option<String>, Query, description = "`lexical` (the only mode served)."),
    ),
    responses(
        (status = 200, description = "Results and coverage; zero results is a 200.", body = SearchResponse),
        (status = 400, description = "Empty, overlong or malformed query, bad filter, page token or parameter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn search_route(svc: Arc<State>, parts: Parts) -> ApiResult<Json<SearchResponse>> {
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
    if let Some(mode) = q.str("mode") {
        if mode != "lexical" {
            return Err(Error::invalid_field(
                "mode",
                "only `lexical` is served; hybrid search is not available",
            )
            .into());
        }
    }
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
    };
    Ok(Json(search(svc, params).await?))
}

/// The search every surface calls.
pub async fn search(svc: Arc<State>, p: SearchParams) -> Result<SearchResponse, Error> {
    let filter = params::filter_text(p.filter.as_deref(), NOTE_FILTER_FIELDS)?;
    let order = params::parse_order(p.order_by.as_deref(), SEARCH_ORDERS, Order::relevance())?;
    let page_size = params::page_size(p.page_size, SEARCH_PAGE_SIZE)?;
    let fingerprint = [
        ("route", "search"),
        ("q", p.q.as_str()),
        ("filter", p.filter.as_deref().unwrap_or("")),
        ("order_by", p.order_by.as_deref().unwrap_or("")),
    ];
    let tokens = PageTokens {
        key: &svc.token_key,
    };
    let offset = match &p.page_token {
        Some(t) => offset_of(&tokens.open(&fingerprint, t)?)?,
        None => 0,
    };
    let mut waited_out = None;
    if let Some(min) = p.min_seq {
        check_min_seq(min, svc.committed_seq())?;
        if !svc.index.wait_for(min, MIN_SEQ_WAIT).await {
            waited_out = Some(min);
        }
    }
    let req = SearchRequest {
        query: parse_query(&p.q)?,
        filter,
        order,
        offset,
        page_size,
    };
    let svc2 = svc.clone();
    // Light searches run here (see `SearchRequest::is_light`); the rest on the pool.
    let answer = if req.is_light() {
        crate::queries::search::search(&svc2, &req)?
    } else {
        blocking(move || crate::queries::search::search(&svc2, &req)).await?
    };
    let mut coverage = Coverage::from(&answer.coverage);
    if let Some(min) = waited_out {
        coverage.notes.push(format!(
            "the index had not reached min_seq {min} after {} s; results reflect indexed_seq {}",
            MIN_SEQ_WAIT.as_secs(),
            coverage.indexed_seq
        ));
    }
    Ok(SearchResponse {
        results: answer
            .hits
            .iter()
            .map(|h| SearchResult {
                note: NoteHandle::from(h.note.as_ref()),
                score: h.score,
                matched_fields: h.provenance.fields.iter().map(|f| f.to_string()).collect(),
                lines: h.provenance.lines.clone(),
                snippet: h.provenance.snippet.as_ref().map(|s| Snippet {
                    line: s.line,
                    text: s.text.clone(),
                }),
            })
            .collect(),
        next_page_token: answer
            .next_offset
            .map(|o| tokens.issue(&fingerprint, &o.to_string())),
        coverage,
    })
}

fn offset_of(cursor: &str) -> Result<usize, Error> {
    cursor
        .parse()
        .map_err(|_| Error::invalid_field("page_token", "is not a page token of this route"))
}

/// One matching line.
#[derive(Debug, Serialize, ToSchema)]
pub struct GrepLine {
    /// 1-based line number.
    pub n: usize,
    /// The line without its line ending, cut to 400 characters.
    pub text: String,
    /// The line was longer than 400 characters.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// A note's matching lines on this page.
#[derive(Debug, Serialize, ToSchema)]
pub struct GrepResult {
    #[serde(flatten)]
    pub note: NoteHandle,
    pub lines: Vec<GrepLine>,
}

/// `GET /v1/grep`.
#[derive(Debug, Serialize, ToSchema)]
pub struct GrepResponse {
    /// Notes in slug order, each with its matching lines; a note may continue on the next page.
    pub results: Vec<GrepResult>,
    pub lines_returned: usize,
    pub next_page_token: Option<String>,
    /// `notes_matched` counts notes with at least one matching line, over all pages.
    pub coverage: Coverage,
}

/// The parameters of a grep (`GET /v1/grep`, the MCP `grep` tool).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepParams {
    /// A regex in the Rust `regex` crate's syntax, matched one line at a time as `rg`
    /// does (e.g. `TODO|FIXME`, `^## `); 1..1000 characters.
    #[schema(min_length = 1, max_length = 1000)]
    pub pattern: String,
    /// Match `pattern` as written, not as a regex (`rg -F`).
    pub literal: Option<bool>,
    /// `sensitive` (default), `insensitive` (`rg -i`) or `smart` (`rg -S`: insensitive
    /// unless the pattern has an upper-case letter).
    pub case: Option<String>,
    /// Only whole words (`rg -w`).
    pub word: Option<bool>,
    /// AIP-160 filter over the note fields of `list_notes`: grep only the notes it keeps.
    pub filter: Option<String>,
    /// Matching lines per page, 1..1000 (default 100).
    #[schema(minimum = 1, maximum = 1000)]
    pub page_size: Option<usize>,
    /// The `next_page_token` of the previous page; repeat the other parameters unchanged.
    pub page_token: Option<String>,
}

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
pub async fn grep_route(svc: Arc<State>, parts: Parts) -> ApiResult<Json<GrepResponse>> {
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
    Ok(Json(grep(svc, params).await?))
}

/// The grep every surface calls.
pub async fn grep(svc: Arc<State>, p: GrepParams) -> Result<GrepResponse, Error> {
    let case = match p.case.as_deref() {
        None | Some("sensitive") => Case::Sensitive,
        Some("insensitive") => Case::Insensitive,
        Some("smart") => Case::Smart,
        Some(other) => {
            return Err(Error::invalid_field(
                "case",
                format!("must be `sensitive`, `insensitive` or `smart`, got {other:?}"),
            ))
        }
    };
    let filter = params::filter_text(p.filter.as_deref(), NOTE_FILTER_FIELDS)?;
    let page_size = params::page_size(p.page_size, GREP_PAGE_SIZE)?;
    let pattern = Pattern {
        pattern: p.pattern.clone(),
        literal: p.literal.unwrap_or(false),
        case,
        word: p.word.unwrap_or(false),
    };
    pattern.compile()?;
    let flags = format!(
        "{}{}{:?}",
        pattern.literal as u8, pattern.word as u8, pattern.case
    );
    let fingerprint = [
        ("route", "grep"),
        ("pattern", p.pattern.as_str()),
        ("flags", flags.as_str()),
        ("filter", p.filter.as_deref().unwrap_or("")),
    ];
    let tokens = PageTokens {
        key: &svc.token_key,
    };
    let cursor = match &p.page_token {
        Some(t) => {
            let raw = tokens.open(&fingerprint, t)?;
            let (line, slug) = raw
                .split_once(':')
                .and_then(|(l, s)| Some((l.parse::<usize>().ok()?, s.to_string())))
                .ok_or_else(|| {
                    Error::invalid_field("page_token", "is not a page token of this route")
                })?;
            Some((slug, line))
        }
        None => None,
    };
    let req = GrepRequest {
        pattern,
        filter,
        cursor,
        page_size,
        timeout: GREP_TIMEOUT,
    };
    let svc2 = svc.clone();
    let answer = blocking(move || crate::queries::search::grep(&svc2, &req)).await?;
    Ok(GrepResponse {
        results: answer
            .page
            .files
            .iter()
            .map(|f| GrepResult {
                note: NoteHandle::from(f.note.as_ref()),
                lines: f
                    .lines
                    .iter()
                    .map(|l| GrepLine {
                        n: l.n,
                        text: l.text.clone(),
                        truncated: l.truncated,
                    })
                    .collect(),
            })
            .collect(),
        lines_returned: answer.page.lines_returned,
        next_page_token: answer
            .page
            .next
            .as_ref()
            .map(|(slug, line)| tokens.issue(&fingerprint, &format!("{line}:{slug}"))),
        coverage: Coverage::from(&answer.coverage),
    })
}

/// One tag of the rollup.
#[derive(Debug, Serialize, ToSchema)]
pub struct TagEntry {
    /// The tag as written in frontmatter; a parent of nested tags (`project` of
    /// `project/active`) is listed too.
    pub tag: String,
    /// Notes with this tag or a tag nested under it, each counted once.
    pub count: usize,
    /// Notes with exactly this tag.
    pub direct_count: usize,
}

/// `GET /v1/tags`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TagList {
    pub tags: Vec<TagEntry>,
    pub next_page_token: Option<String>,
    /// `notes_matched` is the notes the filter kept; `notes_returned` the tags on this page.
    pub coverage: Coverage,
}

/// The parameters of the tag rollup (`GET /v1/tags`, the MCP `list_tags` tool).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TagsParams {
    /// AIP-160 filter over the note fields of `list_notes`: count only the tags of the
    /// notes it keeps.
    pub filter: Option<String>,
    /// `tag` (default, ascending) or `count` (`count desc` for the most used first).
    pub order_by: Option<String>,
    /// Tags per page, 1..1000 (default 200).
    #[schema(minimum = 1, maximum = 1000)]
    pub page_size: Option<usize>,
    /// The `next_page_token` of the previous page; repeat the other parameters unchanged.
    pub page_token: Option<String>,
}

/// Arguments of a tool that takes none.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// The frontmatter tag rollup with counts, nested tags rolled up into their parents.
/// Body `#hashtags` are not tags.
#[utoipa::path(
    get,
    path = "/v1/tags",
    tag = "Search",
    params(
        ("filter" = Option<String>, Query, description = "AIP-160 filter: count only the tags of the notes it keeps."),
        ("order_by" = Option<String>, Query, description = "`tag` (default, ascending) or `count` (`count desc` for the most used first)."),
        ("page_size" = Option<usize>, Query, description = "Tags per page, 1..1000 (default 200)."),
        ("page_token" = Option<String>, Query, description = "`next_page_token` of the previous page, with the same other parameters."),
    ),
    responses(
        (status = 200, description = "Tags with counts, and coverage.", body = TagList),
        (status = 400, description = "Bad filter, order or page token.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn tags_route(svc: Arc<State>, parts: Parts) -> ApiResult<Json<TagList>> {
    let q = Query::parse(
        parts.uri.query(),
        &["filter", "order_by", "page_size", "page_token"],
    )?;
    let page_size = q.opt_int("page_size", 1, TAGS_PAGE_SIZE.1)?;
    let params = TagsParams {
        filter: q.non_empty("filter")?.map(str::to_string),
        order_by: q.non_empty("order_by")?.map(str::to_string),
        page_size,
        page_token: q.non_empty("page_token")?.map(str::to_string),
    };
    Ok(Json(tags(svc, params).await?))
}

/// The tag rollup every surface calls.
pub async fn tags(svc: Arc<State>, p: TagsParams) -> Result<TagList, Error> {
    let filter = params::filter_text(p.filter.as_deref(), NOTE_FILTER_FIELDS)?;
    let order = params::parse_order(p.order_by.as_deref(), &["tag", "count"], Order::asc("tag"))?;
    let page_size = params::page_size(p.page_size, TAGS_PAGE_SIZE)?;
    let fingerprint = [
        ("route", "tags"),
        ("filter", p.filter.as_deref().unwrap_or("")),
        ("order_by", p.order_by.as_deref().unwrap_or("")),
    ];
    let tokens = PageTokens {
        key: &svc.token_key,
    };
    let offset = match &p.page_token {
        Some(t) => offset_of(&tokens.open(&fingerprint, t)?)?,
        None => 0,
    };
    let svc2 = svc.clone();
    let mut answer =
        blocking(move || Ok(crate::queries::search::tags(&svc2, filter.as_ref()))).await?;
    if order.field == "count" {
        answer
            .tags
            .sort_by(|a, b| a.count.cmp(&b.count).then_with(|| b.tag.cmp(&a.tag)));
    }
    if order.desc {
        answer.tags.reverse();
    }
    let total = answer.tags.len();
    let page: Vec<TagEntry> = answer
        .tags
        .iter()
        .skip(offset)
        .take(page_size)
        .map(|t| TagEntry {
            tag: t.tag.clone(),
            count: t.count,
            direct_count: t.direct,
        })
        .collect();
    let end = offset + page.len();
    let mut coverage = Coverage::from(&answer.coverage);
    coverage.notes_returned = page.len();
    coverage.truncated = end < total;
    Ok(TagList {
        next_page_token: (end < total).then(|| tokens.issue(&fingerprint, &end.to_string())),
        tags: page,
        coverage,
    })
}

/// `POST /v1/properties:aggregate` request.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AggregateRequest {
    /// The top-level frontmatter key to group by (e.g. `status`, `rating`).
    pub key: String,
    /// AIP-160 filter over the note fields of `GET /v1/notes`.
    pub filter: Option<String>,
    /// Groups to return, 1..1000 (default 100), most frequent first.
    pub limit: Option<usize>,
}

/// One value of the property.
#[derive(Debug, Serialize, ToSchema)]
pub struct PropertyGroup {
    /// The value as text (each item of a list counts on its own).
    pub value: String,
    pub count: usize,
}

/// A range of values.
#[derive(Debug, Serialize, ToSchema)]
pub struct Range<T> {
    pub min: T,
    pub max: T,
}

/// `POST /v1/properties:aggregate` response.
#[derive(Debug, Serialize, ToSchema)]
pub struct PropertyAggregate {
    pub key: String,
    /// Most frequent first.
    pub groups: Vec<PropertyGroup>,
    /// Notes (under the filter) that have the key, and that do not.
    pub notes_with_key: usize,
    pub notes_without_key: usize,
    /// Smallest and largest numeric value; null when none is a number.
    #[schema(value_type = Option<Object>)]
    pub numbers: Option<Range<f64>>,
    /// Earliest and latest date or timestamp (RFC 3339); null when none is a date.
    #[schema(value_type = Option<Object>)]
    pub dates: Option<Range<String>>,
    /// `truncated` when more groups exist than `limit`.
    pub coverage: Coverage,
}

/// Group the notes a filter keeps by a frontmatter property, with counts (and min/max
/// for numbers and dates). A query, not a write: no `Idempotency-Key`, read rate limit.
#[utoipa::path(
    post,
    path = "/v1/properties:aggregate",
    tag = "Search",
    request_body = AggregateRequest,
    responses(
        (status = 200, description = "The groups and coverage.", body = PropertyAggregate),
        (status = 400, description = "Bad body or filter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn aggregate_route(
    svc: Arc<State>,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Json<PropertyAggregate>> {
    Query::parse(parts.uri.query(), &[])?;
    let raw = crate::api::writes::json_value(&parts.headers, &body)?;
    let req: AggregateRequest = crate::api::writes::parse_as(&raw)?;
    Ok(Json(aggregate(svc, req).await?))
}

/// The aggregation every surface calls.
pub async fn aggregate(svc: Arc<State>, req: AggregateRequest) -> Result<PropertyAggregate, Error> {
    let filter = params::filter_text(req.filter.as_deref(), NOTE_FILTER_FIELDS)?;
    let limit = req.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(Error::invalid_field(
            "limit",
            format!("must be from 1 to 1000, got {limit}"),
        ));
    }
    let key = req.key.clone();
    let svc2 = svc.clone();
    let answer =
        blocking(move || crate::queries::search::aggregate(&svc2, &key, filter.as_ref())).await?;
    let a = &answer.aggregate;
    let mut coverage = Coverage::from(&answer.coverage);
    coverage.truncated = a.groups.len() > limit;
    coverage.notes_returned = a.groups.len().min(limit);
    Ok(PropertyAggregate {
        key: answer.key.clone(),
        groups: a
            .groups
            .iter()
            .take(limit)
            .map(|g| PropertyGroup {
                value: g.value.clone(),
                count: g.count,
            })
            .collect(),
        notes_with_key: a.with_key,
        notes_without_key: a.without_key,
        numbers: a.number_range.map(|(min, max)| Range { min, max }),
        dates: a.date_range.map(|(min, max)| Range {
            min: crate::clock::timestamp(min),
            max: crate::clock::timestamp(max),
        }),
        coverage,
    })
}

/// A status and its count.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatusCount {
    pub status: String,
    pub count: usize,
}

/// Private-notes (E2EE) state.
#[derive(Debug, Serialize, ToSchema)]
pub struct E2eeState {
    pub enabled: bool,
}

/// `GET /v1/vault`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VaultSummary {
    /// The vault folder on this machine.
    pub root: String,
    pub notes: usize,
    /// Files left out (unreadable, symlinks leaving the vault).
    pub excluded: usize,
    pub private_notes: usize,
    pub folders: usize,
    /// Distinct frontmatter tags.
    pub tags: usize,
    /// Bytes of all notes.
    pub bytes: u64,
    /// Notes by `status`.
    pub statuses: Vec<StatusCount>,
    pub write_policy: String,
    pub write_budget: u32,
    pub e2ee: E2eeState,
    pub committed_seq: i64,
    /// The change the search index reflects.
    pub indexed_seq: i64,
}

/// A summary of the vault: counts, size, write settings, private-notes state, freshness.
#[utoipa::path(
    get,
    path = "/v1/vault",
    tag = "Search",
    responses(
        (status = 200, description = "The summary.", body = VaultSummary),
        (status = 400, description = "Bad parameter.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn vault_route(svc: Arc<State>, parts: Parts) -> ApiResult<Json<VaultSummary>> {
    Query::parse(parts.uri.query(), &[])?;
    Ok(Json(vault(svc).await?))
}

/// The summary every surface calls.
pub async fn vault(svc: Arc<State>) -> Result<VaultSummary, Error> {
    let s = blocking(move || crate::queries::search::summary(&svc)).await?;
    Ok(VaultSummary {
        root: s.root,
        notes: s.notes,
        excluded: s.excluded,
        private_notes: s.private,
        folders: s.folders,
        tags: s.tags,
        bytes: s.bytes,
        statuses: s
            .statuses
            .into_iter()
            .map(|(status, count)| StatusCount { status, count })
            .collect(),
        write_policy: s.settings.policy.as_str().to_string(),
        write_budget: s.settings.budget,
        e2ee: E2eeState { enabled: false },
        committed_seq: s.committed_seq,
        indexed_seq: s.indexed_seq,
    })
}
