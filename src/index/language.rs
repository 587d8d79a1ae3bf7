//! The reader's language first: in a vault holding a page in several languages
//! (`en/guide.md` and `de/guide.md`, tldr's `pages/tar.md` and `pages.de/tar.md`, Hugo's
//! `guide.md` and `guide.de.md`), a search answered by several copies of one page ranks
//! the copy in the query's language first, else the unmarked (source) copy.
//!
//! A note's language is its frontmatter `lang` (or `language`), else a marker in its path:
//! a segment that is a language tag (`de`, `pt-br`, `zh_Hans`) or ends in one after a dot
//! (`pages.de`, `guide.de`). Its copies are the notes whose path is the same without
//! that marker. The query's language is detected by whatlang among the languages of the
//! copies found (and English); a query too short or too mixed to tell leaves the source
//! copy first. Only the order of the copies among themselves changes: they take the
//! places (and the scores) the group held, every other hit keeps its place.

use std::collections::HashMap;
use std::sync::Arc;

use crate::vault::note::Note;

/// The first hits of a ranking in which copies are put in the reader's order: a fixed
/// depth, so that every page of the answer sees the same order.
pub const READER_DEPTH: usize = 30;

/// A note's place among its copies: the path without its language marker, and its
/// language (ISO 639-1), `None` for an unmarked (source) copy.
#[derive(Debug, PartialEq)]
pub struct Copy {
    pub key: String,
    pub lang: Option<&'static str>,
    /// The path marks the language: not the source copy.
    pub marked: bool,
}

/// The ISO 639-1 code of a language tag (`de`, `DE-at`, `pt_BR`, `zh-Hans`), if its
/// primary subtag is one.
fn code(tag: &str) -> Option<&'static str> {
    let primary = tag.split(['-', '_']).next()?;
    let rest_ok = tag[primary.len()..]
        .split(['-', '_'])
        .skip(1)
        .all(|s| (2..=4).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric()));
    if primary.len() != 2 || !rest_ok {
        return None;
    }
    isolang::Language::from_639_1(&primary.to_ascii_lowercase())?.to_639_1()
}

/// A frontmatter language (`de`, `de-AT`, `deu`, `German` is not read): its 639-1 code.
fn declared(note: &Note) -> Option<&'static str> {
    let map = note.frontmatter.as_deref()?;
    let v = ["lang", "language"].iter().find_map(|k| map.get(*k))?;
    let s = crate::vault::markdown::scalar_string(v)?;
    let s = s.trim();
    code(s).or_else(|| isolang::Language::from_639_3(&s.to_ascii_lowercase())?.to_639_1())
}

/// Where `slug` marks a language: the key without the marker and the code.
fn marked(slug: &str) -> Option<(String, &'static str)> {
    let segments: Vec<&str> = slug.split('/').collect();
    for (i, seg) in segments.iter().enumerate() {
        let (rest, found) = match code(seg) {
            Some(c) => ("*", c),
            None => match seg.rsplit_once('.') {
                Some((stem, tag)) if !stem.is_empty() => match code(tag) {
                    Some(c) => (stem, c),
                    None => continue,
                },
                _ => continue,
            },
        };
        let mut key = segments.clone();
        key[i] = rest;
        return Some((key.join("/"), found));
    }
    None
}

/// Whether a note's path marks a language: only such notes make copies of one page.
pub fn has_marker(note: &Note) -> bool {
    marked(note.slug()).is_some()
}

/// A note's [`Copy`].
pub fn copy_of(note: &Note) -> Copy {
    let slug = note.slug();
    let (key, from_path) = match marked(slug) {
        Some((key, c)) => (key, Some(c)),
        None => (slug.to_string(), None),
    };
    Copy {
        key,
        lang: declared(note).or(from_path),
        marked: from_path.is_some(),
    }
}

/// The language of `text` (ISO 639-1) among `langs`, when whatlang can tell.
pub fn query_language(text: &str, langs: &[&'static str]) -> Option<&'static str> {
    let allow: Vec<whatlang::Lang> = langs
        .iter()
        .filter_map(|c| {
            let three = isolang::Language::from_639_1(c)?.to_639_3();
            whatlang::Lang::from_code(three)
        })
        .collect();
    if allow.len() < 2 {
        return None;
    }
    let info = whatlang::Detector::with_allowlist(allow).detect(text)?;
    if info.confidence() < MIN_CONFIDENCE {
        return None;
    }
    isolang::Language::from_639_3(info.lang().code())?.to_639_1()
}

/// Below this confidence a query's language is not taken as known (whatlang's scale: 0
/// to 1): one or two words (`tar`, `extract archive`) stay below it, and the source copy
/// comes first.
const MIN_CONFIDENCE: f64 = 0.2;

/// Put the copies of a page among `hits` in the reader's order (see the module's doc):
/// `text` is the query as written.
pub fn reader_first(hits: &mut [(Arc<Note>, f32)], text: &str) {
    if hits.len() < 2 {
        return;
    }
    let copies: Vec<Copy> = hits.iter().map(|(n, _)| copy_of(n)).collect();
    let mut groups: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, c) in copies.iter().enumerate() {
        groups.entry(c.key.as_str()).or_default().push(i);
    }
    let groups: Vec<Vec<usize>> = groups
        .into_values()
        .filter(|g| g.len() > 1 && g.iter().any(|&i| copies[i].lang != copies[g[0]].lang))
        .collect();
    if groups.is_empty() {
        return;
    }
    let mut langs: Vec<&'static str> = vec!["en"];
    for g in &groups {
        for &i in g {
            if let Some(l) = copies[i].lang {
                if !langs.contains(&l) {
                    langs.push(l);
                }
            }
        }
    }
    let reader = query_language(text, &langs);
    for places in groups {
        // The copy in the reader's language when there is one, else the source (the copy
        // whose path marks no language, whatever its frontmatter says).
        let rank = |i: &usize| match reader {
            Some(r) if places.iter().any(|&j| copies[j].lang == Some(r)) => {
                usize::from(copies[*i].lang != Some(r))
            }
            _ => usize::from(copies[*i].marked),
        };
        let mut order = places.clone();
        // Stable: copies of one rank keep the order the ranking gave them.
        order.sort_by_key(rank);
        let notes: Vec<Arc<Note>> = order.iter().map(|&i| hits[i].0.clone()).collect();
        for (&place, note) in places.iter().zip(notes) {
            hits[place].0 = note;
        }
    }
}

/// The page at `offset` of `hits` (the ranking from its `from`th hit on, `from` 0 or
/// `offset`), the copies of a page among the first [`READER_DEPTH`] first put in the
/// order of the reader of `text` (`None`: the vault has no copies).
pub fn reader_page(
    hits: &mut Vec<(Arc<Note>, f32)>,
    from: usize,
    offset: usize,
    page_size: usize,
    text: Option<&str>,
) -> Vec<(Arc<Note>, f32)> {
    if let (0, Some(text)) = (from, text) {
        let head = hits.len().min(READER_DEPTH);
        reader_first(&mut hits[..head], text);
    }
    hits.drain(..).skip(offset - from).take(page_size).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_markers_in_paths() {
        assert_eq!(
            marked("en/guide/setup"),
            Some(("*/guide/setup".into(), "en"))
        );
        assert_eq!(
            marked("pages.de/common/tar"),
            Some(("pages/common/tar".into(), "de"))
        );
        assert_eq!(
            marked("docs/setup.pt-br"),
            Some(("docs/setup".into(), "pt"))
        );
        assert_eq!(marked("zh_Hans/intro"), Some(("*/intro".into(), "zh")));
        assert_eq!(marked("pages/common/tar"), None);
        assert_eq!(marked("notes/v1.2"), None);
        assert_eq!(marked("xx/guide"), None);
    }

    #[test]
    fn the_query_language_among_the_copies() {
        let langs = ["en", "de", "nl", "da"];
        assert_eq!(
            query_language("how do I extract a compressed archive", &langs),
            Some("en")
        );
        assert_eq!(
            query_language("wie entpacke ich ein komprimiertes Archiv", &langs),
            Some("de")
        );
        assert_eq!(query_language("tar", &langs), None);
        assert_eq!(query_language("extract archive", &langs), None);
        assert_eq!(query_language("how do I", &["en"]), None);
    }
}
