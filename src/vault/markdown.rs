//! Facts read from a note's bytes: frontmatter, title, status, tags.
//!
//! Reading is lossless and side-effect free: the bytes are decoded (lossily where they are
//! not UTF-8, and flagged), the frontmatter block is located and parsed with a YAML parser,
//! and nothing is ever re-serialised. Frontmatter `tags` are the note's tags in every YAML
//! style (flow list, block list, single string, comma- or space-separated string); body
//! `#hashtags` are not tags.

use std::borrow::Cow;
use std::ops::Range;

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag};
use serde_norway::{Mapping, Value};

/// What a note's bytes say about it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NoteFacts {
    /// Frontmatter `title`, else the first H1, else `None` (the caller falls back to the file name).
    pub title: Option<String>,
    /// Frontmatter `status`, if it is a scalar.
    pub status: Option<String>,
    /// Frontmatter `tags` (also `tag`), normalised: no leading `#`, trimmed, de-duplicated.
    pub tags: Vec<String>,
    /// The parsed frontmatter mapping; `None` when the note has none or it did not parse.
    pub frontmatter: Option<Mapping>,
    /// Why the frontmatter was treated as absent (broken YAML, not a mapping).
    pub frontmatter_error: Option<String>,
    /// The bytes were not valid UTF-8 and were decoded lossily.
    pub lossy_utf8: bool,
    /// Frontmatter `aliases` (also `alias`), in any of the tag styles.
    pub aliases: Vec<String>,
    /// Outgoing links with their lines.
    pub links: Vec<crate::vault::links::RawLink>,
}

/// Decode a note's bytes: UTF-8 when valid, lossily otherwise (`true` in the flag).
pub fn decode(bytes: &[u8]) -> (Cow<'_, str>, bool) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (Cow::Borrowed(text), false),
        Err(_) => (String::from_utf8_lossy(bytes), true),
    }
}

/// The frontmatter block of `text`: the byte range of the YAML between the fences, and the
/// byte offset where the body starts. A leading BOM is allowed before the opening fence.
pub fn frontmatter_span(text: &str) -> Option<(Range<usize>, usize)> {
    frontmatter_span_bytes(text.as_bytes())
}

/// [`frontmatter_span`] of raw bytes (the fences are ASCII, so the offsets are the same
/// whether or not the rest is valid UTF-8).
pub fn frontmatter_span_bytes(bytes: &[u8]) -> Option<(Range<usize>, usize)> {
    let start = if bytes.starts_with("\u{feff}".as_bytes()) {
        3
    } else {
        0
    };
    let rest = &bytes[start..];
    let first_len = if rest.starts_with(b"---\n") {
        4
    } else if rest.starts_with(b"---\r\n") {
        5
    } else {
        return None;
    };
    let yaml_start = start + first_len;
    let mut pos = yaml_start;
    for line in bytes[yaml_start..].split_inclusive(|b| *b == b'\n') {
        let end = line
            .iter()
            .rposition(|b| *b != b'\n' && *b != b'\r')
            .map_or(0, |i| i + 1);
        let bare = &line[..end];
        if bare == b"---" || bare == b"..." {
            return Some((yaml_start..pos, pos + line.len()));
        }
        pos += line.len();
    }
    None
}

/// Read every fact of a note from its bytes.
pub fn facts(bytes: &[u8]) -> NoteFacts {
    let (text, lossy_utf8) = decode(bytes);
    let mut out = NoteFacts {
        lossy_utf8,
        ..NoteFacts::default()
    };
    let mut body_start = 0;
    if let Some((yaml, body)) = frontmatter_span(&text) {
        body_start = body;
        match parse_frontmatter(&text[yaml]) {
            Ok(map) => {
                out.title = map
                    .get("title")
                    .and_then(scalar_string)
                    .filter(|t| !t.is_empty());
                out.status = map.get("status").and_then(scalar_string);
                out.tags = map
                    .get("tags")
                    .or_else(|| map.get("tag"))
                    .map(tags_from_value)
                    .unwrap_or_default();
                out.aliases = map
                    .get("aliases")
                    .or_else(|| map.get("alias"))
                    .map(aliases_from_value)
                    .unwrap_or_default();
                out.frontmatter = Some(map);
            }
            Err(why) => out.frontmatter_error = Some(why),
        }
    }
    if out.title.is_none() {
        out.title = first_h1(&text[body_start..]);
    }
    out.links = crate::vault::links::outgoing(&text);
    out
}

fn aliases_from_value(value: &Value) -> Vec<String> {
    match value {
        Value::Sequence(items) => items
            .iter()
            .filter_map(scalar_string)
            .filter(|s| !s.is_empty())
            .collect(),
        other => scalar_string(other)
            .map(|s| {
                s.split(',')
                    .map(|a| a.trim().to_string())
                    .filter(|a| !a.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn parse_frontmatter(yaml: &str) -> Result<Mapping, String> {
    if yaml.trim().is_empty() {
        return Ok(Mapping::new());
    }
    match serde_norway::from_str::<Value>(yaml) {
        Ok(Value::Mapping(map)) => Ok(map),
        Ok(Value::Null) => Ok(Mapping::new()),
        Ok(_) => Err("frontmatter is not a mapping of keys to values".to_string()),
        Err(err) => Err(format!("frontmatter is not valid YAML: {err}")),
    }
}

/// A scalar frontmatter value as text (strings, numbers, booleans).
pub fn scalar_string(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Tagged(tagged) => scalar_string(&tagged.value),
        _ => None,
    }
}

fn tags_from_value(value: &Value) -> Vec<String> {
    let mut raw = Vec::new();
    match value {
        Value::Sequence(items) => {
            for item in items {
                if let Some(s) = scalar_string(item) {
                    raw.push(s);
                }
            }
        }
        other => {
            if let Some(s) = scalar_string(other) {
                raw.extend(
                    s.split(|c: char| c == ',' || c.is_whitespace())
                        .map(str::to_string),
                );
            }
        }
    }
    let mut tags: Vec<String> = Vec::with_capacity(raw.len());
    for tag in raw {
        let tag = tag.trim().trim_start_matches('#').trim();
        if !tag.is_empty() && !tags.iter().any(|t| t == tag) {
            tags.push(tag.to_string());
        }
    }
    tags
}

fn first_h1(body: &str) -> Option<String> {
    let mut in_h1 = false;
    let mut title = String::new();
    for event in Parser::new(body) {
        match event {
            Event::Start(Tag::Heading {
                level: HeadingLevel::H1,
                ..
            }) => in_h1 = true,
            Event::End(pulldown_cmark::TagEnd::Heading(HeadingLevel::H1)) => {
                let title = title.trim().to_string();
                return (!title.is_empty()).then_some(title);
            }
            Event::Text(t) | Event::Code(t) if in_h1 => title.push_str(&t),
            _ => {}
        }
    }
    None
}

/// The lines of a note as an editor numbers them: split on `\n`, with a trailing `\r`
/// removed; a final newline does not start another line.
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    let trimmed = text.strip_suffix('\n').unwrap_or(text);
    let empty = text.is_empty();
    trimmed
        .split('\n')
        .filter(move |_| !empty)
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(src: &str) -> Vec<String> {
        facts(src.as_bytes()).tags
    }

    #[test]
    fn tags_in_every_yaml_style() {
        assert_eq!(tags("---\ntags: [a, b]\n---\n"), ["a", "b"]);
        assert_eq!(tags("---\ntags:\n  - a\n  - '#b'\n---\n"), ["a", "b"]);
        assert_eq!(tags("---\ntags: a\n---\n"), ["a"]);
        assert_eq!(tags("---\ntags: \"a, b,c\"\n---\n"), ["a", "b", "c"]);
        assert_eq!(tags("---\ntags: a b\n---\n"), ["a", "b"]);
        assert_eq!(tags("---\ntags: [x/y, x/y]\n---\n"), ["x/y"]);
        assert_eq!(tags("no frontmatter #hashtag\n"), Vec::<String>::new());
    }

    #[test]
    fn title_rule() {
        let t = |s: &str| facts(s.as_bytes()).title;
        assert_eq!(
            t("---\ntitle: Front\n---\n# Heading\n").as_deref(),
            Some("Front")
        );
        assert_eq!(
            t("intro\n\n# Heading *one*\n").as_deref(),
            Some("Heading one")
        );
        assert_eq!(t("```\n# not a heading\n```\n").as_deref(), None);
        assert_eq!(t("## only h2\n").as_deref(), None);
    }

    #[test]
    fn broken_yaml_is_reported_and_the_body_still_gives_a_title() {
        let f = facts(b"---\ntags: [unclosed\n  bad: indent\n---\n# Broken\n");
        assert!(f.frontmatter.is_none());
        assert!(f.frontmatter_error.is_some());
        assert_eq!(f.title.as_deref(), Some("Broken"));
    }

    #[test]
    fn crlf_and_bom_frontmatter() {
        let f = facts(b"\xEF\xBB\xBF---\r\ntitle: BOM\r\ntags: [x]\r\n---\r\nbody\r\n");
        assert_eq!(f.title.as_deref(), Some("BOM"));
        assert_eq!(f.tags, ["x"]);
    }

    #[test]
    fn non_utf8_is_flagged() {
        let f = facts(b"# caf\xe9\n");
        assert!(f.lossy_utf8);
        assert_eq!(f.title.as_deref(), Some("caf\u{fffd}"));
    }

    #[test]
    fn line_splitting() {
        assert_eq!(lines("").count(), 0);
        assert_eq!(lines("a").collect::<Vec<_>>(), ["a"]);
        assert_eq!(lines("a\r\nb\n").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(lines("a\n\n").collect::<Vec<_>>(), ["a", ""]);
    }
}
