//! grep: a literal or a regex over the current bytes of every searchable note, with
//! ripgrep's own matcher and searcher (`grep-regex`, `grep-searcher`) configured as `rg`
//! is by default, so the lines found are the lines `rg -n` finds: the `regex` crate's
//! syntax, one line at a time (a pattern cannot match a line break), `^`/`$` at line
//! boundaries, BOM sniffing, and a file stops at its first NUL byte.
//!
//! Two passes: every note is first asked whether it matches at all (in parallel; the
//! count is `notes_matched`; the caller keeps the answer for the next pages of the same
//! grep), then lines are collected from the cursor on until the page holds `page_size`
//! lines. Both stop at a deadline; what was not searched is reported.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::vault::note::Note;

/// Longest pattern, in characters.
pub const MAX_PATTERN_CHARS: usize = 1000;
/// Longest line text answered, in characters; longer lines are cut and flagged.
pub const MAX_LINE_CHARS: usize = 400;
/// The compiled regex may not exceed this (the `regex` crate's size limit).
pub const REGEX_SIZE_LIMIT: usize = 2 * 1024 * 1024;

/// Letter case handling, as `rg` has it (`-s`, `-i`, `-S`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    Sensitive,
    Insensitive,
    /// Insensitive unless the pattern has an upper-case letter.
    Smart,
}

/// What to look for.
#[derive(Debug, Clone)]
pub struct Pattern {
    pub pattern: String,
    /// The pattern is a literal string (`rg -F`).
    pub literal: bool,
    pub case: Case,
    /// Only whole words (`rg -w`).
    pub word: bool,
}

impl Pattern {
    /// Compile: an empty, overlong or invalid pattern, or one whose program is too large,
    /// is `VALIDATION_FAILED` on `pattern` with the regex engine's own explanation.
    pub fn compile(&self) -> Result<RegexMatcher> {
        if self.pattern.is_empty() {
            return Err(Error::invalid_field("pattern", "must not be empty"));
        }
        if self.pattern.chars().count() > MAX_PATTERN_CHARS {
            return Err(Error::invalid_field(
                "pattern",
                format!("must be at most {MAX_PATTERN_CHARS} characters"),
            ));
        }
        let mut b = RegexMatcherBuilder::new();
        b.line_terminator(Some(b'\n'))
            .fixed_strings(self.literal)
            .word(self.word)
            .case_insensitive(self.case == Case::Insensitive)
            .case_smart(self.case == Case::Smart)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(10 * REGEX_SIZE_LIMIT);
        b.build(&self.pattern).map_err(|e| {
            Error::invalid_field(
                "pattern",
                format!(
                    "is not a valid regex (the Rust `regex` crate's syntax; set literal=true to search the text as written): {}",
                    e.to_string().trim()
                ),
            )
        })
    }
}

/// One matching line.
#[derive(Debug, Clone, PartialEq)]
pub struct GrepLine {
    /// 1-based.
    pub n: usize,
    /// Without its line ending; lossily decoded; cut to [`MAX_LINE_CHARS`].
    pub text: String,
    pub truncated: bool,
}

/// A note's matching lines on this page.
#[derive(Debug, Clone)]
pub struct GrepFile {
    pub note: Arc<Note>,
    pub lines: Vec<GrepLine>,
}

/// A page of grep results.
#[derive(Debug, Clone, Default)]
pub struct GrepPage {
    pub files: Vec<GrepFile>,
    /// Where the next page starts: a note slug and the line after which to go on.
    pub next: Option<(String, usize)>,
    /// Notes with at least one matching line (all pages).
    pub notes_matched: usize,
    /// Notes searched before the deadline.
    pub notes_searched: usize,
    pub lines_returned: usize,
    /// The deadline stopped the search early.
    pub timed_out: bool,
}

fn searcher() -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .build()
}

/// Collects lines after a line number until a budget runs out.
struct Collect<'a> {
    after: usize,
    budget: usize,
    out: &'a mut Vec<GrepLine>,
    /// A further matching line exists beyond the budget.
    more: bool,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _: &Searcher,
        m: &SinkMatch<'_>,
    ) -> std::result::Result<bool, Self::Error> {
        let n = m.line_number().unwrap_or(0) as usize;
        if n <= self.after {
            return Ok(true);
        }
        if self.out.len() == self.budget {
            self.more = true;
            return Ok(false);
        }
        let raw = m.bytes();
        let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = String::from_utf8_lossy(raw);
        let (text, truncated) = match text.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => (text[..cut].to_string(), true),
            None => (text.into_owned(), false),
        };
        self.out.push(GrepLine { n, text, truncated });
        Ok(true)
    }
}

/// Stops at the first match.
struct Any(bool);

impl Sink for Any {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _: &Searcher,
        _: &SinkMatch<'_>,
    ) -> std::result::Result<bool, Self::Error> {
        self.0 = true;
        Ok(false)
    }
}

/// Which notes match at all (pass 1), in the order given: searched in parallel until
/// `deadline`. Also how many were searched, and whether the deadline stopped it.
pub fn matching_notes(
    matcher: &RegexMatcher,
    notes: &[Arc<Note>],
    deadline: Instant,
) -> (Vec<Arc<Note>>, usize, bool) {
    let stop = AtomicBool::new(false);
    let searched = AtomicUsize::new(0);
    let matched: Vec<bool> = notes
        .par_iter()
        .map_init(searcher, |s, note| {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            if Instant::now() > deadline {
                stop.store(true, Ordering::Relaxed);
                return false;
            }
            searched.fetch_add(1, Ordering::Relaxed);
            let Some(bytes) = note.searched_bytes().map(|b| b.bytes()) else {
                return false;
            };
            let mut any = Any(false);
            let _ = s.search_slice(matcher, &bytes, &mut any);
            any.0
        })
        .collect();
    let notes = notes
        .iter()
        .zip(matched)
        .filter(|(_, m)| *m)
        .map(|(n, _)| n.clone())
        .collect();
    (
        notes,
        searched.load(Ordering::Relaxed),
        stop.load(Ordering::Relaxed),
    )
}

/// The page of at most `page_size` lines of `matched` (pass 2, in the order given)
/// starting after `cursor` (a slug and a line number).
pub fn lines_page(
    matcher: &RegexMatcher,
    matched: &[Arc<Note>],
    cursor: Option<(&str, usize)>,
    page_size: usize,
    deadline: Instant,
) -> GrepPage {
    let mut page = GrepPage {
        notes_matched: matched.len(),
        ..GrepPage::default()
    };
    let mut s = searcher();
    let start = match cursor {
        Some((slug, _)) => matched.partition_point(|n| n.slug() < slug),
        None => 0,
    };
    for note in &matched[start..] {
        if Instant::now() > deadline {
            page.timed_out = true;
            page.next = page
                .files
                .last()
                .map(|f| (f.note.slug().to_string(), f.lines.last().map_or(0, |l| l.n)));
            break;
        }
        let after = match cursor {
            Some((slug, line)) if slug == note.slug() => line,
            _ => 0,
        };
        let budget = page_size - page.lines_returned;
        if budget == 0 {
            let last = page.files.last().expect("a full page has lines");
            page.next = Some((
                last.note.slug().to_string(),
                last.lines.last().map_or(0, |l| l.n),
            ));
            break;
        }
        let mut lines = Vec::new();
        let mut sink = Collect {
            after,
            budget,
            out: &mut lines,
            more: false,
        };
        let bytes = note.searched_bytes().map(|b| b.bytes());
        let _ = s.search_slice(matcher, bytes.as_deref().unwrap_or_default(), &mut sink);
        let more = sink.more;
        page.lines_returned += lines.len();
        let last_line = lines.last().map(|l| l.n);
        if !lines.is_empty() {
            page.files.push(GrepFile {
                note: note.clone(),
                lines,
            });
        }
        if more {
            page.next = Some((note.slug().to_string(), last_line.unwrap_or(after)));
            break;
        }
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pat(p: &str) -> Pattern {
        Pattern {
            pattern: p.into(),
            literal: false,
            case: Case::Sensitive,
            word: false,
        }
    }

    #[test]
    fn bad_patterns_are_validation_errors() {
        for p in ["", "(unclosed", "a{99999999}"] {
            let e = pat(p).compile().unwrap_err();
            assert_eq!(e.reason, crate::error::Reason::VALIDATION_FAILED, "{p}");
        }
        // Too large once compiled.
        let e = pat(r"(\w{100}){100}").compile().unwrap_err();
        assert!(
            e.message.contains("size limit") || e.message.contains("exceeds"),
            "{}",
            e.message
        );
        // A line break can never match one line, as with rg.
        assert!(pat(r"a\nb").compile().is_err());
        assert!(Pattern {
            literal: true,
            ..pat("(unclosed")
        }
        .compile()
        .is_ok());
    }
}
