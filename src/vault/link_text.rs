//! What links say of the notes they point at, as web search reads anchor text: for each
//! link of a note that resolves to another note, the sentence around it
//! (`Work in 25-minute blocks: [[Pomodoro|time-boxing]].`), alias and all. The search
//! index holds it as a field of the target (`links`), so a note that holds little more
//! than its title is found by what others say of it.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::vault::catalog::Catalog;
use crate::vault::graph::Graph;
use crate::vault::note::{Note, Visibility};

/// The most of a sentence kept on each side of a link, in bytes.
const AROUND: usize = 160;
/// The most link text a note is given (a note linked from thousands keeps the first).
pub const MAX_LINK_TEXT: usize = 8 * 1024;

/// What every note's links say: by target key, the text; by source key, each target's
/// key and a hash of what the source says of it.
#[derive(Default)]
pub struct AllLinkText {
    pub incoming: HashMap<u64, String>,
    pub outgoing: HashMap<u64, Vec<(u64, u64)>>,
}

/// A link that resolves to another note: that note's key, the link's line (1-based) and
/// its target as written.
type Resolved = (u64, usize, String);

/// The links of `from` that resolve to another note. Private notes say nothing (the index never
/// holds their text).
fn resolved(graph: &Graph<'_>, from: &Note) -> Vec<Resolved> {
    if from.visibility == Visibility::Private {
        return Vec::new();
    }
    from.links
        .iter()
        .filter(|link| !link.embed && !Graph::is_attachment(link))
        .filter_map(|link| {
            let target = graph.resolve(from, link)?;
            (target.note_id != from.note_id).then(|| (target.key(), link.line, link.target.clone()))
        })
        .collect()
}

/// The sentence around each of `links` (of [`resolved`]) in `from`'s text, with the
/// target's key, in the order written. Reads the note's bytes: no lock held.
fn sentences(from: &Note, links: Vec<Resolved>) -> Vec<(u64, String)> {
    if links.is_empty() {
        return Vec::new();
    }
    let Some(bytes) = from.searched_bytes() else {
        return Vec::new();
    };
    let bytes = bytes.bytes();
    let (text, _) = crate::vault::markdown::decode(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    links
        .into_iter()
        .filter_map(|(key, line, target)| {
            let line = lines.get(line.checked_sub(1)?)?;
            Some((key, as_read(around(line, &target))))
        })
        .collect()
}

/// The sentence of `line` around the first mention of `target`, at most [`AROUND`]
/// bytes each side.
fn around<'a>(line: &'a str, target: &str) -> &'a str {
    let at = line.find(target).unwrap_or(0);
    let end_of_link = at + target.len();
    let floor = |i: usize| {
        (0..=i)
            .rev()
            .find(|&j| line.is_char_boundary(j))
            .unwrap_or(0)
    };
    let ceil = |i: usize| {
        (i..=line.len())
            .find(|&j| line.is_char_boundary(j))
            .unwrap_or(line.len())
    };
    let lo = floor(at.saturating_sub(AROUND));
    let hi = ceil((end_of_link + AROUND).min(line.len()));
    let ends =
        |b: &[u8], i: usize| matches!(b[i], b'.' | b'!' | b'?') && b.get(i + 1) == Some(&b' ');
    let b = line.as_bytes();
    let start = (lo..at).rev().find(|&i| ends(b, i)).map_or(lo, |i| i + 2);
    let stop = (end_of_link..hi)
        .find(|&i| ends(b, i))
        .map_or(hi, |i| i + 1);
    line[ceil(start.min(at))..floor(stop.max(end_of_link.min(line.len())))].trim()
}

/// A sentence as a reader reads it: a wikilink by its alias (else its heading, else
/// nothing: its target is a note's name, the target's own or another's), a markdown link
/// by its text.
fn as_read(sentence: &str) -> String {
    let text =
        crate::vault::links::wikilink_re().replace_all(sentence, |c: &regex::Captures<'_>| {
            let rest = &c[2];
            match rest.split_once('|') {
                Some((_, alias)) => alias.to_string(),
                None => rest.trim_start_matches('#').to_string(),
            }
        });
    crate::vault::links::mdlink_re()
        .replace_all(&text, "]")
        .into_owned()
}

fn hash_of(texts: &[&str]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    texts.hash(&mut h);
    h.finish()
}

/// Add `text` to a target's link text, within [`MAX_LINK_TEXT`].
fn append(into: &mut String, text: &str) {
    if into.len() + text.len() < MAX_LINK_TEXT {
        into.push_str(text);
        into.push('\n');
    }
}

/// What the links of the notes linking to `target` say of it.
pub fn incoming(catalog: &RwLock<Catalog>, target: &Note) -> String {
    let key = target.key();
    let sources: Vec<(Arc<Note>, Vec<Resolved>)> = {
        let catalog = catalog.read();
        let graph = Graph::build(&catalog);
        catalog
            .link_tables()
            .may_link_to(target)
            .into_iter()
            .map(|n| {
                let mut links = resolved(&graph, n);
                links.retain(|(k, _, _)| *k == key);
                (n.clone(), links)
            })
            .filter(|(_, links)| !links.is_empty())
            .collect()
    };
    let mut out = String::new();
    for (source, links) in sources {
        for (_, text) in sentences(&source, links) {
            append(&mut out, &text);
        }
    }
    out
}

/// The notes `from` links to, each with a hash of what it says of them, by key.
pub fn outgoing(catalog: &RwLock<Catalog>, from: &Note) -> Vec<(u64, u64)> {
    let links = resolved(&Graph::build(&catalog.read()), from);
    group(sentences(from, links))
}

fn group(mut sentences: Vec<(u64, String)>) -> Vec<(u64, u64)> {
    // Stable: each target's sentences stay in the order written (a note may link to
    // tens of thousands of notes: no search per target).
    sentences.sort_by_key(|(key, _)| *key);
    // By key, one entry each: sorted as `relink` needs it.
    sentences
        .chunk_by(|a, b| a.0 == b.0)
        .map(|run| {
            let texts: Vec<&str> = run.iter().map(|(_, t)| t.as_str()).collect();
            (run[0].0, hash_of(&texts))
        })
        .collect()
}

/// What every note of the catalog says of the notes it links to. The catalog is read a
/// slice of notes at a time, and the notes' texts outside the lock, on every core.
pub fn all(catalog: &RwLock<Catalog>) -> AllLinkText {
    use rayon::prelude::*;
    let notes: Vec<Arc<Note>> = catalog
        .read()
        .iter()
        .filter(|n| !n.links.is_empty())
        .cloned()
        .collect();
    let mut all = AllLinkText::default();
    for slice in notes.chunks(1024) {
        let links: Vec<Vec<Resolved>> = {
            let catalog = catalog.read();
            let graph = Graph::build(&catalog);
            slice.iter().map(|n| resolved(&graph, n)).collect()
        };
        let said: Vec<(u64, Vec<(u64, String)>)> = slice
            .par_iter()
            .zip(links)
            .map(|(n, links)| (n.key(), sentences(n, links)))
            .collect();
        for (source, said) in said {
            if said.is_empty() {
                continue;
            }
            for (key, text) in &said {
                append(all.incoming.entry(*key).or_default(), text);
            }
            all.outgoing.insert(source, group(said));
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sentence_around_a_link() {
        let line = "We plan the week on Monday. Work in 25-minute blocks: [[Pomodoro|time-boxing]] with breaks. Then review.";
        assert_eq!(
            around(line, "Pomodoro"),
            "Work in 25-minute blocks: [[Pomodoro|time-boxing]] with breaks."
        );
        assert_eq!(around("- [[Pomodoro]]", "Pomodoro"), "- [[Pomodoro]]");
        assert_eq!(
            as_read("See also [[reading]] and [[tools/Timer#Setup|the timer]]; [notes](a/b.md#x)."),
            "See also  and the timer; [notes]."
        );
        let long = format!("{} [[x]] {}", "é".repeat(200), "ü".repeat(200));
        let got = around(&long, "x");
        assert!(
            got.len() <= 2 * AROUND + 8 && got.contains("[[x]]"),
            "{got}"
        );
    }
}
