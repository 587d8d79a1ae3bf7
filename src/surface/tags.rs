//! The frontmatter tag rollup: `GET /v1/tags` turns its query string into [`TagsParams`]
//! and the MCP `list_tags` tool its arguments; both call [`tags`].

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::Error;
use crate::queries::notes::{Order, NOTE_FILTER_FIELDS};
use crate::state::State;
use crate::surface::blocking;
use crate::surface::params::{self, PageTokens};
use crate::surface::wire::Coverage;

pub const TAGS_PAGE_SIZE: (usize, usize) = (200, 1000);

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

/// The tag rollup every surface calls.
pub async fn tags(state: Arc<State>, p: TagsParams) -> Result<TagList, Error> {
    let filter = params::filter_text(p.filter.as_deref(), NOTE_FILTER_FIELDS)?;
    let order = params::parse_order(p.order_by.as_deref(), &["tag", "count"], Order::asc("tag"))?;
    let page_size = params::page_size(p.page_size, TAGS_PAGE_SIZE)?;
    let fingerprint = [
        ("route", "tags"),
        ("filter", p.filter.as_deref().unwrap_or("")),
        ("order_by", p.order_by.as_deref().unwrap_or("")),
    ];
    let tokens = PageTokens {
        key: &state.token_key,
    };
    let offset = match &p.page_token {
        Some(t) => tokens.open_offset(&fingerprint, t)?,
        None => 0,
    };
    let state2 = state.clone();
    let mut answer =
        blocking(move || Ok(crate::queries::rollups::tags(&state2, filter.as_ref()))).await?;
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
