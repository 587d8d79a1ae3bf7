//! The tag and property rollups of the notes a filter selects, with their coverage.

use super::notes::select;
use super::search::scope_coverage;
use crate::error::{Error, Result};
use crate::filter::Expr;
use crate::index::coverage::CoverageFacts;
use crate::index::rollup::{Aggregate, TagCount};
use crate::state::State;

#[derive(Debug, Clone)]
pub struct TagsAnswer {
    pub tags: Vec<TagCount>,
    pub coverage: CoverageFacts,
}

#[derive(Debug, Clone)]
pub struct AggregateAnswer {
    pub key: String,
    pub aggregate: Aggregate,
    pub coverage: CoverageFacts,
}

/// The frontmatter tag rollup of the notes matching `filter`.
pub fn tags(state: &State, filter: Option<&Expr>) -> TagsAnswer {
    let notes = select(state, filter);
    let tags = crate::index::rollup::tags(notes.iter().map(|n| n.as_ref()));
    let mut coverage = scope_coverage(state, None);
    coverage.searched = coverage.total;
    coverage.matched = notes.len();
    coverage.returned = tags.len();
    coverage.remarks =
        vec!["Counts are of frontmatter tags; body #hashtags are not tags".to_string()];
    TagsAnswer { tags, coverage }
}

/// Notes matching `filter` grouped by the frontmatter property `key`.
pub fn aggregate(state: &State, key: &str, filter: Option<&Expr>) -> Result<AggregateAnswer> {
    if key.trim().is_empty() {
        return Err(Error::invalid_field(
            "key",
            "must name a frontmatter property",
        ));
    }
    let notes = select(state, filter);
    let aggregate = crate::index::rollup::aggregate(key, notes.iter().map(|n| n.as_ref()));
    let mut coverage = scope_coverage(state, None);
    coverage.searched = coverage.total;
    coverage.matched = notes.len();
    coverage.returned = aggregate.groups.len();
    coverage.remarks = Vec::new();
    Ok(AggregateAnswer {
        key: key.to_string(),
        aggregate,
        coverage,
    })
}
