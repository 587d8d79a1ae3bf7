//! Grep as every surface asks it: the lines `rg -n` finds, note by note. `GET /v1/grep`
//! turns its query string into [`GrepParams`] and the MCP `grep` tool its arguments;
//! both call [`grep`].

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::Error;
use crate::index::grep::{Case, Pattern};
use crate::queries::notes::NOTE_FILTER_FIELDS;
use crate::queries::search::GrepRequest;
use crate::state::State;
use crate::surface::blocking;
use crate::surface::params::{self, PageTokens};
use crate::surface::wire::{Coverage, NoteHandle};

/// How long a grep may search before it answers what it found.
pub const GREP_TIMEOUT: Duration = Duration::from_secs(10);
pub const GREP_PAGE_SIZE: (usize, usize) = (100, 1000);

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

/// The grep every surface calls.
pub async fn grep(state: Arc<State>, p: GrepParams) -> Result<GrepResponse, Error> {
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
        key: &state.token_key,
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
    let state2 = state.clone();
    let answer = blocking(move || crate::queries::search::grep(&state2, &req)).await?;
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
