//! Narrowing a listing before its filter runs: the notes an AIP-160 filter *may* match,
//! found through the catalog's maps instead of a pass over every note.
//!
//! A restriction on `tags` (`:` or `=`) looks up the tag map; `folder =`, `path =` and
//! `slug =` (exact, or a prefix with a trailing `*`) become a range of the slug-ordered
//! map. `AND` keeps the narrowest of its parts, `OR` the union when every part narrows,
//! `NOT` and every other field narrow nothing. The candidates are a superset: the caller
//! still evaluates the whole filter on each, so an answer is the same as a full pass.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use crate::filter::{Cmp, Expr};
use crate::vault::catalog::Catalog;
use crate::vault::note::Note;

/// Notes by slug.
type Set<'a> = BTreeMap<&'a str, &'a Arc<Note>>;

/// The notes a listing walks: every note, or the candidates a filter narrowed to.
pub struct Scope<'a> {
    catalog: &'a Catalog,
    candidates: Option<Set<'a>>,
}

impl<'a> Scope<'a> {
    /// Notes in slug order whose slug starts with `prefix`, strictly after `after` when
    /// given, that may match.
    pub fn walk<'s>(
        &'s self,
        prefix: &'a str,
        after: Option<&'a str>,
    ) -> Box<dyn Iterator<Item = &'a Arc<Note>> + 's> {
        // Start at the prefix, or after `after` when that comes later.
        let lower = match after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        // End before the first slug past the prefix: counting a range then reads no
        // slug (each would be a cache miss).
        let end = past(prefix);
        if let (Bound::Excluded(a), Some(e)) = (lower, &end) {
            if a >= e.as_str() {
                return Box::new(std::iter::empty());
            }
        }
        let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let under = move |n: &&'a Arc<Note>| n.slug().starts_with(prefix);
        match &self.candidates {
            None if end.is_some() => Box::new(self.catalog.range((lower, upper))),
            None => Box::new(self.catalog.range((lower, upper)).take_while(under)),
            Some(set) => Box::new(
                set.range::<&str, _>((lower, Bound::Unbounded))
                    .map(|(_, n)| *n)
                    .take_while(under),
            ),
        }
    }
}

/// The least string above every string that starts with `prefix` (`None` when there is
/// none to name, or the prefix is empty).
fn past(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        // The next scalar value (skipping the surrogate gap).
        let next = match last as u32 {
            0xD7FF => Some('\u{E000}'),
            n => char::from_u32(n + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// `prefix` with up to `n` bytes cut from its end (at a character boundary).
fn shorter(prefix: &str, n: usize) -> &str {
    let mut end = prefix.len().saturating_sub(n);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    &prefix[..end]
}

impl Catalog {
    /// The notes `filter` may match (every note when there is no filter or it cannot be
    /// narrowed).
    pub fn scope<'a>(&'a self, filter: Option<&Expr>) -> Scope<'a> {
        Scope {
            catalog: self,
            candidates: filter.and_then(|f| self.candidates(f)),
        }
    }

    fn candidates<'a>(&'a self, expr: &Expr) -> Option<Set<'a>> {
        match expr {
            Expr::And(parts) => parts
                .iter()
                .filter_map(|p| self.candidates(p))
                .min_by_key(BTreeMap::len),
            Expr::Or(parts) => {
                let mut union = Set::new();
                for part in parts {
                    union.append(&mut self.candidates(part)?);
                }
                Some(union)
            }
            Expr::Not(_) => None,
            Expr::Restriction {
                field, cmp, value, ..
            } => self.restriction(field, *cmp, value),
        }
    }

    fn restriction<'a>(&'a self, field: &str, cmp: Cmp, value: &str) -> Option<Set<'a>> {
        match (field, cmp) {
            ("tags", Cmp::Has | Cmp::Eq) => {
                // A tag matches when it is the value (or starts with it, for `value*`),
                // and for `:` also when it is a child tag (`value/...`).
                let mut prefixes = Vec::new();
                let mut exact = None;
                match value.strip_suffix('*') {
                    Some(p) => prefixes.push(p.to_string()),
                    None => {
                        exact = Some(value);
                        if cmp == Cmp::Has {
                            prefixes.push(format!("{value}/"));
                        }
                    }
                }
                let tags = self.tag_table();
                let mut slugs: Vec<&String> = exact
                    .and_then(|t| tags.get(t))
                    .into_iter()
                    .flatten()
                    .collect();
                for p in &prefixes {
                    slugs.extend(
                        tags.range::<str, _>((Bound::Included(p.as_str()), Bound::Unbounded))
                            .take_while(|(t, _)| t.starts_with(p.as_str()))
                            .flat_map(|(_, s)| s),
                    );
                }
                Some(
                    slugs
                        .into_iter()
                        .filter_map(|s| self.get(s).map(|n| (n.slug(), n)))
                        .collect(),
                )
            }
            ("folder", Cmp::Eq) => {
                // The notes of a folder (and, as a superset, of its subfolders); the
                // root folder (`""`) is not narrowed.
                let prefix = match value.strip_suffix('*') {
                    Some(p) => p.to_string(),
                    None if value.is_empty() => return None,
                    None => format!("{value}/"),
                };
                self.slug_range(&prefix)
            }
            ("slug" | "path", Cmp::Eq) => {
                let cut = if field == "path" { ".md".len() } else { 0 };
                match value.strip_suffix('*') {
                    // `path` is the slug plus `.md`: a path prefix is a slug prefix once
                    // the part that may be `.md` is cut off.
                    Some(p) => self.slug_range(shorter(p, cut)),
                    None => {
                        let slug = if field == "path" {
                            value.strip_suffix(".md")
                        } else {
                            Some(value)
                        };
                        Some(
                            slug.and_then(|s| self.get(s))
                                .map(|n| (n.slug(), n))
                                .into_iter()
                                .collect(),
                        )
                    }
                }
            }
            _ => None,
        }
    }

    /// The notes whose slug starts with `prefix` (`None` for the empty prefix: all).
    fn slug_range<'a>(&'a self, prefix: &str) -> Option<Set<'a>> {
        if prefix.is_empty() {
            return None;
        }
        Some(self.iter_prefix(prefix).map(|n| (n.slug(), n)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::past;

    #[test]
    fn past_a_prefix() {
        assert_eq!(past("ab").as_deref(), Some("ac"));
        assert_eq!(past("tldr/").as_deref(), Some("tldr0"));
        assert_eq!(past("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
        assert_eq!(past("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(past(""), None);
        assert_eq!(past("\u{10FFFF}"), None);
    }
}
