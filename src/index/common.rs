//! Which ranked words of a question are too common to search: a word in more than
//! [`COMMON_SHARE`] of the notes (and at least [`COMMON_MIN`]) is left out when the query
//! has rarer ranked words. Such words decide little (BM25 gives them little weight) and
//! walking their postings was most of the cost of a question: the `the`-like words of a
//! vault (`file`, `command`, `using` in a corpus of command pages).
//!
//! In a vault holding pages in several languages (`index::language`), a word is common
//! only when it is common among the notes of the vault's main language too (the source
//! copies, whose path marks no language, or the largest language's copies): a product's
//! name or a command that every translation repeats is in many notes only because each
//! page is there many times, and it may be the word that tells the reader's page apart.
//! There the share alone decides (the vault-wide count already passed [`COMMON_MIN`]):
//! a main language of 1,800 pages in a vault of 10,000 notes still leaves its `the`s out.
//! A word common in the vault but not in its main language counts as rare, and may leave
//! the others out. A question in another language keeps its words (they are rare in the
//! main one): it costs the walk of their postings, never a word that decides.
//! Those counts are kept per segment (a segment's postings never change; like
//! `doc_freq`, they count notes deleted since), so a common word is counted once, not at
//! every search.
//!
//! Invariant: only ranked words are ever left out, never all of them, and what was left
//! out is in `reading.ignored` and `frequent`.

use std::collections::HashMap;

use parking_lot::Mutex;
use tantivy::index::SegmentId;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocSet, Searcher, SegmentReader, Term, TERMINATED};

use super::schema::MARKED;
use super::{query, SearchIndex};

/// A ranked word in more than this share of the notes is left out of a question with
/// rarer words ...
pub const COMMON_SHARE: f64 = 0.20;
/// ... and in more than this many notes (a small vault keeps every word).
pub const COMMON_MIN: u64 = 2_000;

/// Counts kept before the cache drops those of segments gone.
const KEPT_COUNTS: usize = 4_096;

/// The notes a word's share is judged among when the vault holds copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Group {
    /// The copies in this language.
    Lang(&'static str),
    /// The notes whose path marks no language (the source copies).
    Source,
}

/// A group and how many notes it has.
type GroupSize = (Group, u64);

impl Group {
    fn describe(self, size: u64) -> String {
        match self {
            Group::Lang(l) => format!("the {size} notes in `{l}`, the vault's largest language"),
            Group::Source => format!("the {size} notes whose path marks no language"),
        }
    }
}

/// How many notes of a [`Group`] hold a term, per segment; and the group of the last
/// searcher generation seen.
#[derive(Default)]
pub(crate) struct GroupCounts {
    counts: Mutex<HashMap<(SegmentId, Group, Term), u64>>,
    group: Mutex<Option<(u64, Option<GroupSize>)>>,
}

impl GroupCounts {
    /// How many notes of `group` on disk hold `term` (`copies`: the field of languages).
    fn count(&self, searcher: &Searcher, copies: Field, group: Group, term: &Term) -> u64 {
        let mut total = 0;
        for seg in searcher.segment_readers() {
            let key = (seg.segment_id(), group, term.clone());
            if let Some(n) = self.counts.lock().get(&key) {
                total += n;
                continue;
            }
            let n = in_group(seg, copies, group, term).unwrap_or(0);
            let mut map = self.counts.lock();
            if map.len() >= KEPT_COUNTS {
                let live: Vec<SegmentId> = searcher
                    .segment_readers()
                    .iter()
                    .map(SegmentReader::segment_id)
                    .collect();
                map.retain(|(s, _, _), _| live.contains(s));
                if map.len() >= KEPT_COUNTS {
                    map.clear();
                }
            }
            map.insert(key, n);
            total += n;
        }
        total
    }
}

/// The notes of `seg` in `group` that hold `term` (deleted ones too, as `doc_freq`).
fn in_group(seg: &SegmentReader, copies: Field, group: Group, term: &Term) -> tantivy::Result<u64> {
    match group {
        Group::Lang(l) => both(seg, term, &Term::from_field_text(copies, l)),
        Group::Source => {
            let all = u64::from(seg.inverted_index(term.field())?.doc_freq(term)?);
            let marked = Term::from_field_text(copies, MARKED);
            Ok(all.saturating_sub(both(seg, term, &marked)?))
        }
    }
}

/// The documents of `seg` holding both `a` and `b`: the rarer's postings, each sought in
/// the other's.
fn both(seg: &SegmentReader, a: &Term, b: &Term) -> tantivy::Result<u64> {
    let postings = |t: &Term| -> tantivy::Result<_> {
        Ok(seg
            .inverted_index(t.field())?
            .read_postings(t, IndexRecordOption::Basic)?)
    };
    let (Some(mut a), Some(mut b)) = (postings(a)?, postings(b)?) else {
        return Ok(0);
    };
    if b.doc_freq() < a.doc_freq() {
        std::mem::swap(&mut a, &mut b);
    }
    let mut n = 0;
    let mut doc = a.doc();
    while doc != TERMINATED {
        // `seek` only moves forward: `b` may already be past `doc`.
        let found = if b.doc() < doc { b.seek(doc) } else { b.doc() };
        if found == TERMINATED {
            break;
        }
        if found == doc {
            n += 1;
            doc = a.advance();
        } else {
            doc = a.seek(found);
        }
    }
    Ok(n)
}

impl SearchIndex {
    /// `parsed` as it will be searched: ranked words too common to decide are left out
    /// when the query has rarer ranked words (see the module's doc).
    pub fn prepare(&self, parsed: &query::Parsed) -> query::Parsed {
        let mut out = parsed.clone();
        self.known_names(&mut out);
        if out.ranked.len() < 2 {
            return out;
        }
        let searcher = self.reader.searcher();
        let docs = searcher.num_docs();
        let threshold = over(docs);
        if docs <= threshold {
            return out;
        }
        let everywhere: Vec<u64> = out
            .ranked
            .iter()
            .map(|alt| self.notes_of(alt, &|t| searcher.doc_freq(t).unwrap_or(0)))
            .collect();
        if everywhere.iter().all(|n| *n <= threshold) {
            return out;
        }
        // When the vault holds copies, only the words common among the notes of its main
        // language too are left out.
        let group = self.reading_group(&searcher);
        let common: Vec<Option<String>> = out
            .ranked
            .iter()
            .zip(&everywhere)
            .map(|(alt, &n)| {
                if n <= threshold {
                    return None;
                }
                let everywhere = format!("in {n} of {docs} notes");
                let Some((group, size)) = group else {
                    return Some(everywhere);
                };
                let copies = self.fields.copies;
                let among = self.notes_of(alt, &|t| {
                    self.group_counts.count(&searcher, copies, group, t)
                });
                (among as f64 > size as f64 * COMMON_SHARE)
                    .then(|| format!("{everywhere}, {among} of {}", group.describe(size)))
            })
            .collect();
        if common.iter().all(Option::is_none) || common.iter().all(Option::is_some) {
            return out;
        }
        let ranked = std::mem::take(&mut out.ranked);
        for (alt, common) in ranked.into_iter().zip(common) {
            let Some(how) = common else {
                out.ranked.push(alt);
                continue;
            };
            out.reading.ignored.push(query::Ignored {
                text: alt
                    .iter()
                    .map(query::Unit::display)
                    .collect::<Vec<_>>()
                    .join(" OR "),
                reason: format!(
                    "very common: {how} (more than {:.0}%); rarer words decide",
                    COMMON_SHARE * 100.0
                ),
            });
            out.frequent.push(alt);
        }
        let frequent: Vec<&str> = out
            .frequent
            .iter()
            .flat_map(|alt| alt.iter().flat_map(|u| u.tokens.iter().map(String::as_str)))
            .collect();
        out.pairs
            .retain(|(a, b)| !frequent.contains(&a.as_str()) && !frequent.contains(&b.as_str()));
        out
    }

    /// How many notes hold one of the choices `alt` (the largest choice's count), each
    /// term counted by `count`.
    fn notes_of(&self, alt: &[query::Unit], count: &dyn Fn(&Term) -> u64) -> u64 {
        let f = &self.fields;
        let body = |text: &str| count(&Term::from_field_text(f.body, text));
        alt.iter()
            .map(|u| {
                // A name found whole is as rare as its whole form (`.github`, whose
                // `github` may be everywhere). `known_names` kept only names some note
                // holds: none of them here (in the overlay only, or not in the group)
                // is rare, not unknown.
                if let Some(w) = u.whole.as_deref() {
                    return count(&Term::from_field_text(f.names, w));
                }
                match (u.tokens.as_slice(), u.prefix) {
                    // A word's notes are those of any of its forms: those of its stem as
                    // a token or as a marked form, counted as their sum (an upper bound of
                    // the union, without walking postings).
                    ([t], false) => {
                        let stem = super::tokenizer::stem(t);
                        body(&stem) + body(&super::tokenizer::form_term(&stem))
                    }
                    _ => body(&u.tokens[0]),
                }
            })
            .max()
            .unwrap_or(0)
    }

    /// The notes a word's share is judged among, and how many there are: `None` in a
    /// vault without copies (all of them). The source copies (no language in their
    /// path), or the copies in one language when it has more notes (`en/` and `de/`).
    /// Not the query's language: whatlang misreads short questions (`list files`), and
    /// detecting it cost more than the search it would spare. Kept per searcher
    /// generation: the languages' counts change only when the index does.
    fn reading_group(&self, searcher: &Searcher) -> Option<GroupSize> {
        let generation = searcher.generation().generation_id();
        if let Some((seen, group)) = *self.group_counts.group.lock() {
            if seen == generation {
                return group;
            }
        }
        let group = self.main_language(searcher);
        *self.group_counts.group.lock() = Some((generation, group));
        group
    }

    /// [`reading_group`](Self::reading_group), counted afresh.
    fn main_language(&self, searcher: &Searcher) -> Option<GroupSize> {
        let copies = |t: &str| Term::from_field_text(self.fields.copies, t);
        let marked = searcher.doc_freq(&copies(MARKED)).unwrap_or(0);
        if marked == 0 {
            return None;
        }
        // Notes deleted since a merge counted everywhere, as `doc_freq` counts them.
        let all: u64 = searcher
            .segment_readers()
            .iter()
            .map(|s| u64::from(s.max_doc()))
            .sum();
        let mut group = (Group::Source, all.saturating_sub(marked));
        let mut seen: Vec<&'static str> = Vec::new();
        for seg in searcher.segment_readers() {
            let Ok(index) = seg.inverted_index(self.fields.copies) else {
                continue;
            };
            let Ok(mut terms) = index.terms().stream() else {
                continue;
            };
            while terms.advance() {
                let lang = std::str::from_utf8(terms.key())
                    .ok()
                    .and_then(super::language::code);
                let Some(lang) = lang.filter(|l| !seen.contains(l)) else {
                    continue;
                };
                seen.push(lang);
                let n = searcher.doc_freq(&copies(lang)).unwrap_or(0);
                if n > group.1 {
                    group = (Group::Lang(lang), n);
                }
            }
        }
        Some(group)
    }
}

/// The count above which a word is common in a vault of `notes` notes.
fn over(notes: u64) -> u64 {
    ((notes as f64 * COMMON_SHARE) as u64).max(COMMON_MIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::writer::tests::{note, until};

    /// A vault whose every page is under a language folder (`en/`, `de/`, …): the largest
    /// language is the main one. `quillstack` is in 2,050 of 3,740 notes through its
    /// pages' translations, in 410 of the 2,100 English ones (under a fifth): kept.
    /// `widget` is in 520 English pages and their copies: a fifth of the English notes,
    /// left out, though fewer than 2,000 of them. `guide`, in every English page, too.
    #[test]
    fn the_largest_language_is_the_main_one_when_every_path_marks_one() {
        let state = tempfile::tempdir().unwrap();
        let vault = tempfile::tempdir().unwrap();
        let langs = ["de", "fr", "nl", "da"];
        for lang in langs.iter().chain(&["en"]) {
            #[allow(clippy::disallowed_methods, reason = "a test's own temp folder")]
            std::fs::create_dir(vault.path().join(lang)).unwrap();
        }
        let mut notes = Vec::new();
        for i in 0..2_100 {
            let product = if i < 410 { "Quillstack" } else { "" };
            let widget = if i < 520 { "widget" } else { "" };
            let rel = format!("en/p{i}.md");
            let text = format!("# Page {i}\n\nA guide to {product} {widget} topic{i}.\n");
            notes.push(note(vault.path(), &rel, &rel, &text));
            for lang in langs.iter().filter(|_| i < 520) {
                let rel = format!("{lang}/p{i}.md");
                let text = format!("# {i}\n\n{product} {widget} topic{i}.\n");
                notes.push(note(vault.path(), &rel, &rel, &text));
            }
        }
        assert_eq!(notes.len(), 4_180);
        let index = SearchIndex::open(state.path()).unwrap();
        index.start(notes, 1);
        until("the start-up sync", || index.state().synced_notes.is_some());

        let parsed = query::parse("quillstack widget guide", query::Match::Any).unwrap();
        let prepared = index.prepare(&parsed);
        let words = |alts: &[Vec<query::Unit>]| -> Vec<String> {
            alts.iter().flatten().map(query::Unit::display).collect()
        };
        assert_eq!(words(&prepared.ranked), ["quillstack"]);
        assert_eq!(words(&prepared.frequent), ["widget", "guide"]);
        let reasons: Vec<&str> = prepared
            .reading
            .ignored
            .iter()
            .map(|i| i.reason.as_str())
            .collect();
        assert!(
            reasons[0].contains("in 2600 of 4180 notes, 520 of the 2100 notes in `en`"),
            "{reasons:?}"
        );
        assert!(
            reasons[1].contains("in 2100 of 4180 notes, 2100 of the 2100 notes in `en`"),
            "{reasons:?}"
        );
        // Cached: the same answer again.
        assert_eq!(index.prepare(&parsed), prepared);
    }
}
