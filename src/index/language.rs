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

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use crate::vault::note::Note;

/// The first hits of a ranking in which copies are put in the reader's order: a fixed
/// depth, so that every page of the answer sees the same order.
pub const READER_DEPTH: usize = 30;

/// The ISO 639-1 code of a language tag (`de`, `DE-at`, `pt_BR`, `zh-Hans`), if its
/// primary subtag is one.
pub(super) fn code(tag: &str) -> Option<&'static str> {
    // Most path segments are no tag: told at their third byte, before any lookup.
    let b = tag.as_bytes();
    if b.len() < 2 || (b.len() > 2 && b[2] != b'-' && b[2] != b'_') {
        return None;
    }
    let (primary, rest) = tag.split_at(2);
    let rest_ok = rest
        .split(['-', '_'])
        .skip(1)
        .all(|s| (2..=4).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric()));
    if !rest_ok || !primary.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    let i = |c: u8| usize::from(c.to_ascii_lowercase() - b'a');
    codes()[i(b[0]) * 26 + i(b[1])]
}

/// Every two-letter code, ISO 639-1 or not, read once from isolang: a path's segments
/// are looked up for every hit of a search.
fn codes() -> &'static [Option<&'static str>; 676] {
    static CODES: std::sync::OnceLock<[Option<&'static str>; 676]> = std::sync::OnceLock::new();
    CODES.get_or_init(|| {
        std::array::from_fn(|i| {
            let pair = [b'a' + (i / 26) as u8, b'a' + (i % 26) as u8];
            let code = std::str::from_utf8(&pair).ok()?;
            isolang::Language::from_639_1(code)?.to_639_1()
        })
    })
}

/// A frontmatter language (`de`, `de-AT`, `deu`, `German` is not read): its 639-1 code.
fn declared(note: &Note) -> Option<&'static str> {
    let map = note.frontmatter.as_deref()?;
    let v = ["lang", "language"].iter().find_map(|k| map.get(*k))?;
    let s = crate::vault::markdown::scalar_string(v)?;
    let s = s.trim();
    code(s).or_else(|| isolang::Language::from_639_3(&s.to_ascii_lowercase())?.to_639_1())
}

/// Where `slug` marks a language: the key without the marker and the code (a key is
/// built only for a marked path: every hit of a search is asked).
fn marked(slug: &str) -> Option<(String, &'static str)> {
    // One pass over the bytes: each segment as its `/` (or the end) is reached, with
    // its last `.`.
    let bytes = slug.as_bytes();
    let (mut start, mut dot) = (0, None);
    for end in 0..=bytes.len() {
        match bytes.get(end) {
            Some(b'.') => {
                dot = Some(end);
                continue;
            }
            Some(b'/') | None => {}
            Some(_) => continue,
        }
        let found = match code(&slug[start..end]) {
            Some(c) => Some(("*", c)),
            None => dot
                .filter(|&d| d > start)
                .and_then(|d| Some((&slug[start..d], code(&slug[d + 1..end])?))),
        };
        if let Some((rest, c)) = found {
            return Some(([&slug[..start], rest, &slug[end..]].concat(), c));
        }
        (start, dot) = (end + 1, None);
    }
    None
}

/// The language of a copy: a note whose path marks a language (only such notes make
/// copies of one page), its frontmatter's language if it says one, else its path's.
pub fn copy_language(note: &Note) -> Option<&'static str> {
    let (_, path) = marked(note.slug())?;
    Some(declared(note).unwrap_or(path))
}

/// The key of the group of a note's copies, and the language its path marks.
fn group_key(note: &Note) -> (Cow<'_, str>, Option<&'static str>) {
    match marked(note.slug()) {
        Some((key, c)) => (Cow::Owned(key), Some(c)),
        None => (Cow::Borrowed(note.slug()), None),
    }
}

/// The language of `text` (ISO 639-1) among `langs`, when whatlang can tell.
pub fn query_language(text: &str, langs: &[&'static str]) -> Option<&'static str> {
    // One word tells no language (and most searches are one word: not worth detecting).
    text.split_whitespace().nth(1)?;
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
    let notes: Vec<Arc<Note>> = hits.iter().map(|(n, _)| n.clone()).collect();
    // The hits' groups first (nothing allocated for an unmarked path), a language (the
    // frontmatter read) only for a group's members: every search with copies asks.
    let keys: Vec<(Cow<'_, str>, Option<&'static str>)> =
        notes.iter().map(|n| group_key(n)).collect();
    let mut by_key: HashMap<&str, Vec<usize>, foldhash::fast::RandomState> = HashMap::default();
    for (i, (key, _)) in keys.iter().enumerate() {
        by_key.entry(key.as_ref()).or_default().push(i);
    }
    let groups: Vec<Vec<(usize, Option<&'static str>)>> = by_key
        .into_values()
        .filter(|g| g.len() > 1)
        .map(|g| {
            g.into_iter()
                .map(|i| (i, declared(&notes[i]).or(keys[i].1)))
                .collect::<Vec<_>>()
        })
        .filter(|g| g.iter().any(|(_, l)| *l != g[0].1))
        .collect();
    if groups.is_empty() {
        return;
    }
    let mut langs: Vec<&'static str> = vec!["en"];
    for (_, l) in groups.iter().flatten() {
        if let Some(l) = l {
            if !langs.contains(l) {
                langs.push(l);
            }
        }
    }
    let reader = query_language(text, &langs);
    for group in groups {
        // The copy in the reader's language when there is one, else the source (the copy
        // whose path marks no language, whatever its frontmatter says).
        let has_reader = reader.is_some_and(|r| group.iter().any(|(_, l)| *l == Some(r)));
        let rank = |&(i, l): &(usize, Option<&'static str>)| match reader {
            Some(r) if has_reader => usize::from(l != Some(r)),
            _ => usize::from(keys[i].1.is_some()),
        };
        let mut order = group.clone();
        // Stable: copies of one rank keep the order the ranking gave them.
        order.sort_by_key(rank);
        for ((place, _), (from, _)) in group.iter().zip(&order) {
            hits[*place].0 = notes[*from].clone();
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
        assert_eq!(marked("a/b/c.d/e"), None);
        assert_eq!(marked("a/de-AT"), Some(("a/*".into(), "de")));
        assert_eq!(marked("a/b.fr/c"), Some(("a/b/c".into(), "fr")));
        assert_eq!(marked("a/x_y/c"), None);
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
