//! Search as every surface asks it: lexical (BM25), optionally fused with the note
//! vectors of a local embedding model (`mode=hybrid`, see `index::embed`). `GET /v1/search`
//! turns its query string into [`SearchParams`] and the MCP `search` tool its arguments;
//! both call [`search`] and answer the same JSON.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::Error;
use crate::index::query::Match;
use crate::queries::notes::{Order, NOTE_FILTER_FIELDS};
use crate::queries::search::{check_min_seq, parse_query, Mode, SearchRequest};
use crate::state::State;
use crate::surface::blocking;
use crate::surface::params::{self, PageTokens};
use crate::surface::wire::{Coverage, NoteHandle};

/// How long `min_seq` may wait for the index.
pub const MIN_SEQ_WAIT: Duration = Duration::from_secs(10);
pub const SEARCH_PAGE_SIZE: (usize, usize) = (10, 100);

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
    /// Relevance, higher is better: BM25, or with `mode=hybrid` the fused score (the
    /// sum of 1 / (60 + rank) over the retrievers that found the note).
    #[serde(serialize_with = "f32_as_printed")]
    pub score: f32,
    /// Where the words were found: `title`, `headings`, `tags`, `path`, `properties`,
    /// `body`, and `links` (what the links pointing at the note say of it); empty for a
    /// note found by meaning only (`mode=hybrid`).
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
    pub query: QueryReading,
}

/// How `q` was read: what was searched, what was left out and why, so a client can
/// refine the query. Words are shown as searched (lower-cased, accents folded).
#[derive(Debug, Serialize, ToSchema)]
pub struct QueryReading {
    /// `any`: plain words rank results and at least one must match; `all`: every word
    /// must match.
    #[serde(rename = "match")]
    pub match_mode: String,
    /// Clauses every result matches: `+word`, `"phrases"`, `field:word`, `prefix*` (and
    /// every word with `match=all`).
    pub required: Vec<String>,
    /// Words that rank the results: a note with more of them ranks higher; when nothing is
    /// required, a result has at least one.
    pub ranked: Vec<String>,
    /// Clauses no result matches (`-word`, `NOT word`).
    pub excluded: Vec<String>,
    /// Words also searched by their word forms (English stem): `cursors` → `cursor`
    /// also finds `cursor`; exact forms rank first.
    pub stems: Vec<WordStem>,
    /// Parts of `q` not searched, and why (stop words, words in more than 20% of a large
    /// vault's notes when rarer words are asked, punctuation, a lone `-`, words beyond
    /// the first 24).
    pub ignored: Vec<IgnoredPart>,
}

/// A word and the stem it was also searched by.
#[derive(Debug, Serialize, ToSchema)]
pub struct WordStem {
    pub word: String,
    pub stem: String,
}

/// A part of the query that was not searched.
#[derive(Debug, Serialize, ToSchema)]
pub struct IgnoredPart {
    pub text: String,
    pub reason: String,
}

impl From<&crate::index::query::Parsed> for QueryReading {
    fn from(p: &crate::index::query::Parsed) -> Self {
        let show = |clauses: &[Vec<crate::index::query::Unit>]| {
            clauses
                .iter()
                .map(|alt| {
                    alt.iter()
                        .map(|u| u.display())
                        .collect::<Vec<_>>()
                        .join(" OR ")
                })
                .collect()
        };
        Self {
            match_mode: p.reading.mode.name().to_string(),
            required: show(&p.required),
            ranked: show(&p.ranked),
            excluded: show(&p.excluded),
            stems: p
                .stems()
                .into_iter()
                .map(|(word, stem)| WordStem { word, stem })
                .collect(),
            ignored: p
                .reading
                .ignored
                .iter()
                .map(|i| IgnoredPart {
                    text: i.text.clone(),
                    reason: i.reason.clone(),
                })
                .collect(),
        }
    }
}

/// The parameters of a search, as both surfaces take them (`GET /v1/search`, the MCP
/// `search` tool).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    /// What to find: a question or words (ranked: more matching words rank higher, stop
    /// words left out, word forms found: `synced` finds `sync`), and for precision
    /// `"a phrase"`, `+required`, `-excluded`, `prefix*`, `a OR b`, and `title:` /
    /// `aliases:` / `headings:` / `lead:` / `tags:` / `path:` / `properties:` / `body:` /
    /// `links:` (what links to the note say) to search one field (those must match).
    /// Case and accents do not matter; CJK text works.
    /// 1..1000 characters. `query` is accepted as another name (what other notes servers
    /// call it).
    #[schema(min_length = 1, max_length = 1000)]
    #[serde(alias = "query")]
    pub q: String,
    /// `any` (default): plain words rank the results and at least one must match; `all`:
    /// every word must match (stop words too). The answer's `query` says how `q` was read.
    #[serde(rename = "match")]
    pub match_mode: Option<String>,
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
    /// reached. In hybrid mode, until the note vectors do too.
    #[schema(minimum = 0)]
    pub min_seq: Option<i64>,
    /// `lexical` (default: BM25) or `hybrid`: BM25 fused with the nearest notes by
    /// meaning (a local embedding model the server names in `NOTEVAULT_EMBED_MODEL`), so
    /// a question in other words than the note's finds it; `coverage.retrievers` says
    /// which retrievers ran (without a model, the answer is lexical and says why).
    pub mode: Option<String>,
}

/// The search every surface calls.
pub async fn search(state: Arc<State>, p: SearchParams) -> Result<SearchResponse, Error> {
    let filter = params::filter_text(p.filter.as_deref(), NOTE_FILTER_FIELDS)?;
    let order = params::parse_order(p.order_by.as_deref(), SEARCH_ORDERS, Order::relevance())?;
    let page_size = params::page_size(p.page_size, SEARCH_PAGE_SIZE)?;
    let mode = match p.match_mode.as_deref().map(str::trim) {
        None | Some("any") => Match::Any,
        Some("all") => Match::All,
        Some(other) => {
            return Err(Error::invalid_field(
                "match",
                format!("must be `any` or `all`, got {other:?}"),
            ))
        }
    };
    let retrieval = Mode::parse(p.mode.as_deref())?;
    let mut fingerprint = vec![
        ("route", "search"),
        ("q", p.q.as_str()),
        ("match", mode.name()),
        ("filter", p.filter.as_deref().unwrap_or("")),
        ("order_by", p.order_by.as_deref().unwrap_or("")),
    ];
    // Named only when not the default: a lexical search's tokens stay those it always had.
    if retrieval != Mode::Lexical {
        fingerprint.push(("mode", retrieval.name()));
    }
    let tokens = PageTokens {
        key: &state.token_key,
    };
    let offset = match &p.page_token {
        Some(t) => tokens.open_offset(&fingerprint, t)?,
        None => 0,
    };
    // The `min_seq` not reached in time, and whether only the note vectors fell short.
    let mut waited_out = None;
    if let Some(min) = p.min_seq {
        check_min_seq(min, state.committed_seq())?;
        let deadline = tokio::time::Instant::now() + MIN_SEQ_WAIT;
        if !crate::queries::status::wait_indexed(&state, min, MIN_SEQ_WAIT).await {
            waited_out = Some((min, false));
        } else if retrieval == Mode::Hybrid {
            // The note vectors are embedded beside the index: a hybrid search that waits
            // for its write waits for them too.
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if !state.index.vectors.wait_embedded(min, left).await {
                waited_out = Some((min, true));
            }
        }
    }
    let req = SearchRequest {
        query: parse_query(&p.q, mode)?,
        text: p.q.clone(),
        mode: retrieval,
        filter,
        order,
        offset,
        page_size,
    };
    let state2 = state.clone();
    // Light searches run here (see `SearchRequest::is_light`); the rest on the pool.
    let answer = if req.is_light() {
        crate::queries::search::search(&state2, &req)?
    } else {
        blocking(move || crate::queries::search::search(&state2, &req)).await?
    };
    let mut coverage = Coverage::from(&answer.coverage);
    let secs = MIN_SEQ_WAIT.as_secs();
    match waited_out {
        Some((min, false)) => coverage.notes.push(format!(
            "the index had not reached min_seq {min} after {secs} s; results reflect indexed_seq {}",
            coverage.indexed_seq
        )),
        Some((min, true)) => coverage.notes.push(format!(
            "the note vectors had not reached min_seq {min} after {secs} s; notes changed since are found by their words only"
        )),
        None => {}
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
        query: QueryReading::from(&answer.query),
    })
}
