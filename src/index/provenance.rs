//! Why a note matched: the fields its query terms were found in, the first line numbers,
//! and a short snippet with the matches marked. Found in the note's kept bytes, so line numbers
//! are those of the line-sliced read.
//!
//! Terms are found by their spelling (ASCII case-insensitive) at word boundaries, and
//! words of plain letters also by their word forms (a word whose English stem is the
//! query word's: `synced`, `syncing` for `sync`); a match the index made through accent
//! folding (`cafe` for `Café`) counts for the ranking but may have no line here.

use aho_corasick::{AhoCorasick, AhoCorasickKind, Input, MatchKind};

use super::tokenizer::{is_unspaced, stem, stem_is, tokens, without_letter_keys};
use crate::vault::markdown;
use crate::vault::note::Note;

/// Longest snippet, in characters (marks not counted).
pub const SNIPPET_CHARS: usize = 200;
/// Line numbers listed per hit.
pub const MAX_LINES: usize = 20;
pub const MARK_OPEN: &str = "<mark>";
pub const MARK_CLOSE: &str = "</mark>";

/// The ATX headings of a markdown body (text after the `#`s), outside fenced code.
pub fn headings(body: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut fence: Option<&str> = None;
    for line in body.lines() {
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if t.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if t.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        if let Some(text) = heading_text(line) {
            out.push(text);
        }
    }
    out
}

/// Longest lead, in bytes (cut at a character boundary).
pub const LEAD_BYTES: usize = 400;

/// The first paragraph of a markdown body: its first lines of text, after any headings,
/// blank lines, fenced code, tables and HTML comments, up to a blank line or a heading
/// (at most [`LEAD_BYTES`]). Command pages, reference pages and articles alike open with
/// a sentence of what they are about.
pub fn lead(body: &str) -> &str {
    let mut start: Option<usize> = None;
    let mut end = 0;
    let mut fence: Option<&str> = None;
    let mut comment = false;
    let mut offset = 0;
    for line in body.split_inclusive('\n') {
        let at = offset;
        offset += line.len();
        let t = line.trim();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if comment {
            comment = !t.contains("-->");
            continue;
        }
        let opens_block = t.starts_with("```")
            || t.starts_with("~~~")
            || t.starts_with("<!--")
            || t.starts_with('|')
            || heading_text(line.trim_end_matches(['\r', '\n'])).is_some();
        if start.is_some() && (t.is_empty() || opens_block) {
            break;
        }
        if t.starts_with("```") {
            fence = Some("```");
        } else if t.starts_with("~~~") {
            fence = Some("~~~");
        } else if t.starts_with("<!--") {
            comment = !t.contains("-->");
        } else if !t.is_empty() && !opens_block {
            start.get_or_insert(at);
            end = at + line.trim_end().len();
            if end - start.unwrap_or(at) >= LEAD_BYTES {
                break;
            }
        }
    }
    let Some(start) = start else {
        return "";
    };
    let mut end = end.min(start + LEAD_BYTES);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    &body[start..end]
}

fn heading_text(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let t = &line[indent..];
    let hashes = t.len() - t.trim_start_matches('#').len();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &t[hashes..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    Some(rest.trim().trim_end_matches('#').trim_end())
}

/// What a request looks for, built once per request (cheaply: a page holds few notes).
pub struct Matcher {
    terms: Vec<(String, bool)>,
    finders: Vec<TermFinder>,
    /// How the finders' bytes are found (ASCII case-insensitive): a note's bytes are
    /// scanned as far as the matches wanted, for all the terms at once. Chosen on first
    /// use, once every finder is in.
    starts: std::sync::OnceLock<Option<Starts>>,
    /// Stems whose word forms count as matches.
    stems: Vec<String>,
}

/// Finds one term at word boundaries: ASCII letters in either case, other bytes as they
/// are (the automaton finds the bytes; [`TermFinder::accepts`] the boundaries and forms).
struct TermFinder {
    bytes: Vec<u8>,
    prefix: bool,
    /// The term starts / ends with a character of an unspaced script: no word boundary
    /// is needed on that side.
    open_start: bool,
    open_end: bool,
    /// Finds word forms: `bytes` is the start they share with the stem, and a match is the
    /// whole ASCII word there when its stem is this one.
    stem: Option<String>,
}

impl TermFinder {
    fn new(term: &str, prefix: bool) -> Self {
        Self {
            bytes: term.as_bytes().to_vec(),
            prefix,
            open_start: term.chars().next().is_some_and(is_unspaced),
            open_end: term.chars().last().is_some_and(is_unspaced),
            stem: None,
        }
    }

    /// A finder of the words whose stem is `stem` (`word` is one of them); `None` when
    /// they share fewer than 3 leading letters.
    fn forms(word: &str, stem: &str) -> Option<Self> {
        let lead = word
            .bytes()
            .zip(stem.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        (lead >= 3).then(|| Self {
            stem: Some(stem.to_string()),
            prefix: true,
            ..Self::new(&word[..lead], true)
        })
    }

    /// Where the match of this finder's bytes at `start..end` ends, if it is one (at word
    /// boundaries; for word forms, the whole word, of the wanted stem).
    fn accepts(&self, text: &[u8], start: usize, end: usize) -> Option<usize> {
        let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric() || is_unspaced(c));
        if !(self.open_start || boundary(char_before(text, start))) {
            return None;
        }
        if let Some(want) = &self.stem {
            let len = text[end..]
                .iter()
                .take_while(|b| b.is_ascii_alphabetic())
                .count();
            let word_end = end + len;
            if !boundary(char_after(text, word_end)) || word_end - start > 40 {
                return None;
            }
            // The word is ASCII letters (the finder's and the ones after), at most 40:
            // lower-cased on the stack, its stem looked up without a copy.
            let mut buf = [0u8; 40];
            let word = &mut buf[..word_end - start];
            word.copy_from_slice(&text[start..word_end]);
            word.make_ascii_lowercase();
            let word = std::str::from_utf8(word).ok()?;
            return stem_is(word, want).then_some(word_end);
        }
        (self.prefix || self.open_end || boundary(char_after(text, end))).then_some(end)
    }
}

/// Up to this many finders are looked for one by one ([`Starts::Few`]).
const FEW: usize = 4;

/// How the next place where some finder's bytes start is found.
enum Starts {
    /// Each finder by `memchr` on its first byte (in both cases), the leftmost taken:
    /// nothing to build, where an automaton costs more to build for a request (most ask
    /// one or two words) than the scans it serves.
    Few,
    /// Every finder's bytes in one Aho-Corasick automaton (pattern `i` is finder `i`).
    Automaton(AhoCorasick),
}

/// What a scan knows of where one finder's bytes start next ([`Starts::Few`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Not looked for yet.
    Unknown,
    /// They start here: the first place at or after where the look began.
    At(usize),
    /// They do not start from where the look began up to here (looked no further: the
    /// scan only needs to know whether they come before the leftmost start found);
    /// `usize::MAX`: nowhere.
    NotBefore(usize),
}

/// Where `pattern` (not empty) starts in `text` at or after `from` and before `before`,
/// ASCII letters in either case, other bytes as they are.
fn find_from(text: &[u8], pattern: &[u8], from: usize, before: usize) -> Next {
    let (lower, upper) = (
        pattern[0].to_ascii_lowercase(),
        pattern[0].to_ascii_uppercase(),
    );
    // Past the last place the pattern fits, it starts nowhere.
    let fits = (text.len() + 1).saturating_sub(pattern.len());
    let end = fits.min(before);
    let mut at = from;
    while at < end {
        let window = &text[at..end];
        let found = if lower == upper {
            memchr::memchr(lower, window)
        } else {
            memchr::memchr2(lower, upper, window)
        };
        let Some(i) = found else {
            break;
        };
        let start = at + i;
        if text[start..start + pattern.len()].eq_ignore_ascii_case(pattern) {
            return Next::At(start);
        }
        at = start + 1;
    }
    Next::NotBefore(if end == fits { usize::MAX } else { end })
}

/// The matches of a [`Matcher`] in a text, leftmost first: [`Starts`] finds where some
/// term's bytes start, then the longest accepted match there is taken (or the search goes
/// on one byte further: `sync` in `resync` is not a word).
/// The ranges are of the text searched; with `left_out`, that text is a note's text
/// without the brackets of its letter keys ([`Searched`]), and the ranges are mapped back
/// to it.
struct Matches<'a> {
    matcher: &'a Matcher,
    text: &'a [u8],
    left_out: Option<&'a [usize]>,
    at: usize,
    /// With [`Starts::Few`]: what is known of where each finder's bytes start next (from
    /// a look that began at or before `at`: `At` is still the next while not before
    /// `at`; `NotBefore` still says they are not in what is left of the span looked at).
    next: [Next; FEW],
}

impl Matches<'_> {
    /// Where some finder's bytes start next, at or after `at`.
    fn next_start(&mut self, starts: &Starts) -> Option<usize> {
        match starts {
            Starts::Automaton(automaton) => {
                let input = Input::new(self.text).span(self.at..self.text.len());
                Some(automaton.find(input)?.start())
            }
            Starts::Few => {
                debug_assert!(self.matcher.finders.len() <= FEW);
                // The leftmost start found so far: a finder is looked for only before it,
                // so a term a note lacks costs a scan only as far as the others' matches
                // (and the scan of a note stops after its first lines with a match).
                let mut first = usize::MAX;
                for (finder, next) in self.matcher.finders.iter().zip(&mut self.next) {
                    match *next {
                        Next::At(start) if start >= self.at => {
                            first = first.min(start);
                            continue;
                        }
                        // Not before the leftmost found: it cannot come first.
                        Next::NotBefore(end) if end >= first => continue,
                        _ => {}
                    }
                    *next = find_from(self.text, &finder.bytes, self.at, first);
                    if let Next::At(start) = *next {
                        first = first.min(start);
                    }
                }
                (first != usize::MAX).then_some(first)
            }
        }
    }
}

/// The index in the original text of byte `i` of the text without the bytes at
/// `left_out` (sorted original indexes), and whether a byte was left out right before it.
fn original(left_out: &[usize], i: usize) -> (usize, bool) {
    // The `j`th byte left out sat right before byte `left_out[j] - j` of the shorter text
    // (a sequence that never falls): count those at or before `i`.
    let before = |j: usize| left_out[j] - j;
    let (mut lo, mut hi) = (0, left_out.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if before(mid) <= i {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    (i + lo, lo > 0 && before(lo - 1) == i)
}

impl Iterator for Matches<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        let starts = self.matcher.starts()?;
        while self.at < self.text.len() {
            let start = self.next_start(starts)?;
            match self.matcher.accepted_at(self.text, start) {
                Some(end) => {
                    self.at = end;
                    return Some(match self.left_out {
                        Some(left_out) => {
                            // A word that opens with a key (`[v]erbosely`) starts at its
                            // `[`: the only byte left out right before a word's start.
                            let (from, opens) = original(left_out, start);
                            (from - usize::from(opens), original(left_out, end - 1).0 + 1)
                        }
                        None => (start, end),
                    });
                }
                None => self.at = start + 1,
            }
        }
        None
    }
}

/// A text as matches are looked for in it: as it is, or, when it has letter keys
/// (`E[x]tract`), without their brackets, as the tokenizer reads it, so that `extract`
/// is found there and `x` is not.
struct Searched<'a> {
    text: &'a [u8],
    keyless: Option<(Vec<u8>, Vec<usize>)>,
}

/// Texts up to this size are read without their keys' brackets: finding the keys scans
/// the whole text, where a scan for matches may stop after the first lines. Command
/// summaries, the pages that use keys, are far smaller.
const KEYS_UP_TO: usize = 256 * 1024;

impl<'a> Searched<'a> {
    fn new(text: &'a [u8]) -> Self {
        Self {
            text,
            keyless: (text.len() <= KEYS_UP_TO)
                .then(|| without_letter_keys(text))
                .flatten(),
        }
    }

    fn matches<'m>(&'m self, matcher: &'m Matcher) -> Matches<'m> {
        let (text, left_out) = match &self.keyless {
            Some((text, left_out)) => (&text[..], Some(&left_out[..])),
            None => (self.text, None),
        };
        Matches {
            matcher,
            text,
            left_out,
            at: 0,
            next: [Next::Unknown; FEW],
        }
    }
}

/// A snippet: the line it comes from and its text with matches marked.
#[derive(Debug, Clone, PartialEq)]
pub struct Snippet {
    pub line: Option<usize>,
    pub text: String,
}

/// Why one note matched.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Provenance {
    /// `title`, `headings`, `tags`, `path`, `properties`, `body`, in that order (and
    /// `links`, which the search adds: the index knows what links to a note say).
    pub fields: Vec<&'static str>,
    /// The first [`MAX_LINES`] matching line numbers (1-based).
    pub lines: Vec<usize>,
    pub snippet: Option<Snippet>,
}

impl Matcher {
    /// `terms`: lower-cased tokens, `true` for a prefix.
    pub fn new(terms: Vec<(String, bool)>) -> Self {
        let finders = terms.iter().map(|(t, p)| TermFinder::new(t, *p)).collect();
        Self {
            terms,
            finders,
            starts: std::sync::OnceLock::new(),
            stems: Vec::new(),
        }
    }

    /// Also find the word forms of `(word, stem)` pairs (see `Parsed::stem_terms`).
    pub fn with_stems(mut self, stems: Vec<(String, String)>) -> Self {
        for (word, s) in &stems {
            if let Some(f) = TermFinder::forms(word, s) {
                self.finders.push(f);
            }
        }
        self.stems = stems.into_iter().map(|(_, s)| s).collect();
        self.starts = std::sync::OnceLock::new();
        self
    }

    /// How the finders' bytes are found: one by one when there are few, else by an
    /// automaton; `None` when a finder is empty (never: tokens have at least one
    /// character). Chosen once per search, after [`Matcher::with_stems`] added the word
    /// forms.
    fn starts(&self) -> Option<&Starts> {
        self.starts
            .get_or_init(|| {
                if self.finders.iter().any(|f| f.bytes.is_empty()) {
                    None
                } else if self.finders.len() <= FEW {
                    Some(Starts::Few)
                } else {
                    self.automaton().map(Starts::Automaton)
                }
            })
            .as_ref()
    }

    /// The automaton over the finders' bytes (pattern `i` is finder `i`).
    fn automaton(&self) -> Option<AhoCorasick> {
        AhoCorasick::builder()
            // Built for every search and used on a page of notes: a contiguous NFA builds
            // far quicker than the DFA chosen by default for a few patterns, and the
            // prefilter does most of the scanning either way.
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostFirst)
            .build(self.finders.iter().map(|f| &f.bytes))
            .ok()
    }

    /// This matcher with its finders' bytes found by the automaton, however few.
    #[cfg(test)]
    fn by_automaton(mut self) -> Self {
        let automaton = self.automaton().map(Starts::Automaton);
        self.starts = std::sync::OnceLock::from(automaton);
        self
    }

    fn token_matches(&self, token: &str) -> bool {
        self.terms.iter().any(|(t, prefix)| {
            if *prefix {
                token.starts_with(t.as_str())
            } else {
                token == t
            }
        }) || (!self.stems.is_empty() && self.stems.iter().any(|s| *s == stem(token)))
    }

    /// Whether a term is a word of `text`. The byte finder answers first; the tokenizer
    /// (which also folds accents, `cafe` for `Café`) only for non-ASCII text it missed.
    fn text_matches(&self, text: &str) -> bool {
        Searched::new(text.as_bytes())
            .matches(self)
            .next()
            .is_some()
            || (!text.is_ascii() && tokens(text).iter().any(|(t, _)| self.token_matches(t)))
    }

    /// The longest accepted match of any finder starting at `start`.
    fn accepted_at(&self, text: &[u8], start: usize) -> Option<usize> {
        self.finders
            .iter()
            .filter_map(|f| {
                let end = start + f.bytes.len();
                let here = text.get(start..end)?.eq_ignore_ascii_case(&f.bytes);
                here.then(|| f.accepts(text, start, end)).flatten()
            })
            .max()
    }

    /// Byte ranges of the terms in `text` at word boundaries, leftmost first, the longest
    /// where matches overlap (letter keys read as the tokenizer reads them).
    #[cfg(test)]
    fn find(&self, text: &[u8]) -> Vec<(usize, usize)> {
        Searched::new(text).matches(self).collect()
    }

    /// The provenance of `note`.
    pub fn provenance(&self, note: &Note) -> Provenance {
        let mut out = Provenance::default();
        let mut fields: Vec<&'static str> = Vec::new();
        if self.text_matches(&note.title) {
            fields.push("title");
        }
        let mut body_line: Option<(usize, std::ops::Range<usize>)> = None;
        let mut fm_line: Option<(usize, std::ops::Range<usize>)> = None;
        let mut in_headings = false;
        let mut in_body = false;
        let mut in_props = false;
        let kept = note.content.as_ref().map(|b| b.bytes());
        let bytes: &[u8] = kept.as_deref().unwrap_or_default();
        let body_start = markdown::frontmatter_span_bytes(bytes).map_or(0, |(_, b)| b);
        let mut line_no = 1;
        let mut counted_to = 0;
        let mut last_line = 0;
        // Bytes, not text: a note's bytes are searched as they are (but for the brackets
        // of letter keys), lazily, so that once enough is seen the rest is not scanned.
        let searched = Searched::new(bytes);
        for (start, _) in searched.matches(self) {
            line_no += memchr::memchr_iter(b'\n', &bytes[counted_to..start]).count();
            counted_to = start;
            if line_no == last_line {
                continue;
            }
            if out.lines.len() == MAX_LINES {
                // Enough to point at; the rest of the note is not scanned.
                break;
            }
            last_line = line_no;
            out.lines.push(line_no);
            let line_start = memchr::memrchr(b'\n', &bytes[..start]).map_or(0, |i| i + 1);
            let line_end =
                memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
            if start < body_start {
                in_props = true;
                fm_line.get_or_insert((line_no, line_start..line_end));
            } else {
                if body_line.is_none() || !(in_headings && in_body) {
                    let line = String::from_utf8_lossy(&bytes[line_start..line_end]);
                    if heading_text(&line).is_some() {
                        in_headings = true;
                    } else {
                        in_body = true;
                    }
                }
                body_line.get_or_insert((line_no, line_start..line_end));
            }
        }
        if in_headings {
            fields.push("headings");
        }
        if note.tags.iter().any(|t| self.text_matches(t)) {
            fields.push("tags");
        }
        if self.text_matches(note.slug()) {
            fields.push("path");
        }
        if in_props {
            fields.push("properties");
        }
        if in_body {
            fields.push("body");
        }
        out.fields = fields;
        out.snippet = Some(match body_line.or(fm_line) {
            Some((n, range)) => {
                let line = String::from_utf8_lossy(&bytes[range]);
                Snippet {
                    line: Some(n),
                    text: self.snippet(line.trim_end_matches('\r')),
                }
            }
            None => Snippet {
                line: None,
                text: self.snippet(&note.title),
            },
        });
        out
    }

    /// `line` cut to [`SNIPPET_CHARS`] around its first match, matches marked.
    pub fn snippet(&self, line: &str) -> String {
        let matches: Vec<(usize, usize)> = Searched::new(line.as_bytes())
            .matches(self)
            .filter(|(s, e)| line.is_char_boundary(*s) && line.is_char_boundary(*e))
            .collect();
        let total = line.chars().count();
        let (from, to) = if total <= SNIPPET_CHARS {
            (0, line.len())
        } else {
            let first = matches.first().map_or(0, |m| m.0);
            let lead = line[..first].chars().count().min(SNIPPET_CHARS / 3);
            let from = line[..first]
                .char_indices()
                .rev()
                .nth(lead.saturating_sub(1))
                .map_or(first, |(i, _)| i);
            let from = if lead == 0 { first } else { from };
            let to = line[from..]
                .char_indices()
                .nth(SNIPPET_CHARS)
                .map_or(line.len(), |(i, _)| from + i);
            (from, to)
        };
        let mut out = String::with_capacity(to - from + 32);
        if from > 0 {
            out.push('…');
        }
        let mut at = from;
        for (s, e) in matches {
            if s < from || e > to {
                continue;
            }
            out.push_str(&line[at..s]);
            out.push_str(MARK_OPEN);
            out.push_str(&line[s..e]);
            out.push_str(MARK_CLOSE);
            at = e;
        }
        out.push_str(&line[at..to]);
        if to < line.len() {
            out.push('…');
        }
        out
    }
}

/// The character ending just before byte `i`, if the bytes there are UTF-8.
fn char_before(bytes: &[u8], i: usize) -> Option<char> {
    match i.checked_sub(1).map(|j| bytes[j]) {
        None => return None,
        Some(b) if b.is_ascii() => return Some(b as char),
        Some(_) => {}
    }
    (2..=4.min(i)).find_map(|n| {
        std::str::from_utf8(&bytes[i - n..i])
            .ok()
            .and_then(|s| s.chars().next_back())
    })
}

/// The character starting at byte `i`, if the bytes there are UTF-8.
fn char_after(bytes: &[u8], i: usize) -> Option<char> {
    if let Some(b) = bytes.get(i).filter(|b| b.is_ascii()) {
        return Some(*b as char);
    }
    let end = (i + 4).min(bytes.len());
    (i + 1..=end).find_map(|e| {
        std::str::from_utf8(&bytes[i..e])
            .ok()
            .and_then(|s| s.chars().next())
    })
}

#[cfg(test)]
mod tests;
