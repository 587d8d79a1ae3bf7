//! Rollups over the catalog: the frontmatter tag tree with counts, and notes grouped by a
//! frontmatter property. Body `#hashtags` are not tags and are never counted.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_norway::Value;

use crate::vault::markdown::scalar_string;
use crate::vault::note::Note;

/// One tag of the rollup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagCount {
    pub tag: String,
    /// Notes tagged with it or with a tag nested under it (`a` counts `a/b`), once each.
    pub count: usize,
    /// Notes tagged with exactly this tag.
    pub direct: usize,
}

/// Every tag and every parent of a nested tag, in tag order.
pub fn tags<'a>(notes: impl Iterator<Item = &'a Note>) -> Vec<TagCount> {
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for note in notes {
        let mut seen: Vec<&str> = Vec::new();
        for tag in &note.tags {
            let tag = tag.trim_matches('/');
            if tag.is_empty() {
                continue;
            }
            counts.entry(tag.to_string()).or_default().1 += 1;
            for (i, _) in tag
                .match_indices('/')
                .chain(std::iter::once((tag.len(), "")))
            {
                let prefix = &tag[..i];
                if !prefix.is_empty() && !seen.contains(&prefix) {
                    seen.push(prefix);
                    counts.entry(prefix.to_string()).or_default().0 += 1;
                }
            }
        }
    }
    counts
        .into_iter()
        .map(|(tag, (count, direct))| TagCount { tag, count, direct })
        .collect()
}

/// One value of a property and the notes that have it.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub value: String,
    pub count: usize,
}

/// Notes grouped by a frontmatter property.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Aggregate {
    /// By count (descending), then value.
    pub groups: Vec<Group>,
    /// Notes that have the key.
    pub with_key: usize,
    /// Notes without it.
    pub without_key: usize,
    /// Smallest and largest numeric value.
    pub number_range: Option<(f64, f64)>,
    /// Earliest and latest date or timestamp value.
    pub date_range: Option<(DateTime<Utc>, DateTime<Utc>)>,
}

/// Group `notes` by the frontmatter property `key`. A list counts each of its items;
/// nested mappings count as one group `{…}`.
pub fn aggregate<'a>(key: &str, notes: impl Iterator<Item = &'a Note>) -> Aggregate {
    let mut out = Aggregate::default();
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    let mut numbers: Option<(f64, f64)> = None;
    let mut dates: Option<(DateTime<Utc>, DateTime<Utc>)> = None;
    for note in notes {
        let Some(value) = note.frontmatter.as_ref().and_then(|m| m.get(key)) else {
            out.without_key += 1;
            continue;
        };
        out.with_key += 1;
        let items: Vec<&Value> = match value {
            Value::Sequence(items) => items.iter().collect(),
            other => vec![other],
        };
        let mut seen: Vec<String> = Vec::new();
        for item in items {
            if let Value::Number(n) = item {
                if let Some(f) = n.as_f64() {
                    numbers = Some(numbers.map_or((f, f), |(lo, hi)| (lo.min(f), hi.max(f))));
                }
            }
            let text = match item {
                Value::Mapping(_) => "{…}".to_string(),
                Value::Null => "null".to_string(),
                other => scalar_string(other).unwrap_or_default(),
            };
            if !matches!(item, Value::Number(_)) {
                if let Some(t) = crate::filter::parse_time(&text) {
                    dates = Some(dates.map_or((t, t), |(lo, hi)| (lo.min(t), hi.max(t))));
                }
            }
            if !seen.contains(&text) {
                *groups.entry(text.clone()).or_default() += 1;
                seen.push(text);
            }
        }
    }
    let mut groups: Vec<Group> = groups
        .into_iter()
        .map(|(value, count)| Group { value, count })
        .collect();
    groups.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.value.cmp(&b.value)));
    out.groups = groups;
    out.number_range = numbers;
    out.date_range = dates;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(tags: &[&str], fm: &str) -> Note {
        let text = format!("---\n{fm}\n---\nbody #hashtag\n");
        let facts = crate::vault::markdown::facts(text.as_bytes());
        let mut n = crate::vault::catalog::note_from(
            crate::vault::observe::Observed {
                rel: "n.md".into(),
                size: 0,
                mtime: std::time::SystemTime::UNIX_EPOCH,
                created: std::time::SystemTime::UNIX_EPOCH,
                content_hash: String::new(),
                facts,
                content: None,
                stamp: None,
            },
            "id".into(),
            "v".into(),
            Utc::now(),
            Utc::now(),
        );
        if !tags.is_empty() {
            n.tags = tags.iter().map(|t| t.to_string()).collect();
        }
        n
    }

    #[test]
    fn nested_tags_roll_up_once_per_note_and_hashtags_do_not_count() {
        let notes = [
            note(&["project/active", "project/active/x"], "a: 1"),
            note(&["project/done"], "a: 1"),
            note(&["idea"], "a: 1"),
            note(&[], "a: 1"),
        ];
        let got = tags(notes.iter());
        let find = |t: &str| got.iter().find(|c| c.tag == t).cloned();
        assert_eq!(find("project").map(|c| (c.count, c.direct)), Some((2, 0)));
        assert_eq!(
            find("project/active").map(|c| (c.count, c.direct)),
            Some((1, 1))
        );
        assert_eq!(
            find("project/active/x").map(|c| (c.count, c.direct)),
            Some((1, 1))
        );
        assert_eq!(find("idea").map(|c| (c.count, c.direct)), Some((1, 1)));
        assert!(find("hashtag").is_none());
    }

    #[test]
    fn properties_group_with_ranges() {
        let notes = [
            note(&[], "rating: 4\ndue: 2026-01-05\nkind: [book, paper]"),
            note(&[], "rating: 2\ndue: 2027-03-01\nkind: book"),
            note(&[], "other: x"),
        ];
        let a = aggregate("rating", notes.iter());
        assert_eq!((a.with_key, a.without_key), (2, 1));
        assert_eq!(a.number_range, Some((2.0, 4.0)));
        let k = aggregate("kind", notes.iter());
        assert_eq!(
            k.groups,
            [
                Group {
                    value: "book".into(),
                    count: 2
                },
                Group {
                    value: "paper".into(),
                    count: 1
                }
            ]
        );
        let d = aggregate("due", notes.iter());
        let (lo, hi) = d.date_range.expect("dates");
        assert_eq!(lo.format("%Y-%m-%d").to_string(), "2026-01-05");
        assert_eq!(hi.format("%Y-%m-%d").to_string(), "2027-03-01");
    }
}
