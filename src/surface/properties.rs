//! Notes grouped by a frontmatter property: `POST /v1/properties:aggregate` (a query sent
//! as POST, for its long filter) parses its body into [`AggregateRequest`] and the MCP
//! `aggregate_properties` tool its arguments; both call [`aggregate`].

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::Error;
use crate::queries::notes::NOTE_FILTER_FIELDS;
use crate::state::State;
use crate::surface::blocking;
use crate::surface::params;
use crate::surface::wire::Coverage;

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

/// The aggregation every surface calls.
pub async fn aggregate(
    state: Arc<State>,
    req: AggregateRequest,
) -> Result<PropertyAggregate, Error> {
    let filter = params::filter_text(req.filter.as_deref(), NOTE_FILTER_FIELDS)?;
    let limit = req.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(Error::invalid_field(
            "limit",
            format!("must be from 1 to 1000, got {limit}"),
        ));
    }
    let key = req.key.clone();
    let state2 = state.clone();
    let answer =
        blocking(move || crate::queries::rollups::aggregate(&state2, &key, filter.as_ref()))
            .await?;
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
