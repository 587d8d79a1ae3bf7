//! Names kept whole: dotted, slashed and versioned words (`.gitignore`, `libfoo.so.3`,
//! `v1.4.2`, `src/main.rs`) that the tokenizer splits into common words (`gitignore`,
//! `so` `3`, `main` `rs`). The `names` field holds each such word once more, whole, and a
//! query word of that shape also searches its whole form there: the split tokens still
//! match as a phrase, the whole name decides between notes that only share its parts.
//! Index and query read a word with the one function, [`whole`].

/// Longest whole name kept, in bytes (longer ones are paths of generated files, URLs
/// without a scheme, hashes: their parts still match).
pub const MAX_NAME_BYTES: usize = 64;

/// Characters that end a name: ASCII spaces and the punctuation around words in prose
/// and markdown (`(src/main.rs)`, `` `v1.4.2` ``, `file.txt:12`, `page.md#part`). All
/// ASCII, so a text is cut at byte boundaries ([`tokens`]); other characters are part of
/// a word, which is then no name.
fn is_break(c: char) -> bool {
    c.is_ascii_whitespace()
        || matches!(
            c,
            '(' | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '<'
                | '>'
                | '"'
                | '\''
                | '`'
                | ','
                | ';'
                | '|'
                | '='
                | ':'
                | '!'
                | '?'
                | '*'
                | '#'
                | '@'
                | '\\'
        )
}

/// The whole form of a query word: its first name, read as the text's are ([`tokens`]).
pub fn whole(word: &str) -> Option<String> {
    split(word).find_map(|(_, w)| name(w))
}

/// The whole form of a word without breaks, if it is a name: lower-cased, its leading
/// `/`, `./`, `../` and `~/` and its trailing punctuation left out, holding a `.` or `/`
/// between two letters or digits (or a leading `.` before one: `.gitignore`). Words of
/// other scripts, URLs and words over [`MAX_NAME_BYTES`] are not names.
fn name(mut w: &str) -> Option<String> {
    if w.contains("://") || !w.is_ascii() {
        return None;
    }
    loop {
        let before = w.len();
        for lead in ["../", "./", "~/", "/"] {
            w = w.strip_prefix(lead).unwrap_or(w);
        }
        if w.len() == before {
            break;
        }
    }
    let w = w.trim_end_matches(['.', '/', '-', '_']);
    if w.len() < 2 || w.len() > MAX_NAME_BYTES {
        return None;
    }
    let b = w.as_bytes();
    let alnum = |i: usize| b.get(i).is_some_and(u8::is_ascii_alphanumeric);
    let dotfile = b[0] == b'.' && alnum(1);
    let inner = (1..b.len()).any(|i| matches!(b[i], b'.' | b'/') && alnum(i - 1) && alnum(i + 1));
    (dotfile || inner).then(|| w.to_ascii_lowercase())
}

/// Every name of `text`, in order, as tokens of the `names` field (a position each): a
/// slashed name whole and each of its parts that is a name itself (`.github/ci.yml`,
/// `.github`, `ci.yml`).
pub fn tokens(text: &str) -> Vec<tantivy::tokenizer::Token> {
    let mut out = Vec::new();
    let mut push = |text: String, from: usize, to: usize| {
        let position = out.len();
        out.push(tantivy::tokenizer::Token {
            offset_from: from,
            offset_to: to,
            position,
            text,
            position_length: 1,
        });
    };
    // Only words with a `.` or `/` are names: the text is searched for those bytes, and
    // each run without ASCII spaces that holds one is split as [`split`] splits the whole
    // text (no word or URL it skips spans a space).
    let b = text.as_bytes();
    let mut next = 0;
    for at in memchr::memchr2_iter(b'.', b'/', b) {
        if at < next {
            continue;
        }
        let start = (0..at)
            .rev()
            .find(|&i| b[i].is_ascii_whitespace())
            .map_or(0, |i| i + 1);
        let end = (at..b.len())
            .find(|&i| b[i].is_ascii_whitespace())
            .unwrap_or(b.len());
        next = end;
        for (offset, word) in split(&text[start..end]) {
            if !word.bytes().any(|c| c == b'.' || c == b'/') {
                continue;
            }
            let Some(whole) = name(word) else {
                continue;
            };
            let (from, to) = (start + offset, start + offset + word.len());
            if whole.contains('/') {
                for part in whole.split('/').filter_map(name) {
                    push(part, from, to);
                }
            }
            push(whole, from, to);
        }
    }
    out
}

/// The words of `text` between breaks, with their byte offsets; URLs (`scheme://...`,
/// to the next space or closing bracket) are passed over.
fn split(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut rest = text;
    let mut at = 0;
    std::iter::from_fn(move || loop {
        let start = rest.find(|c: char| !is_break(c))?;
        let len = rest[start..].find(is_break).unwrap_or(rest.len() - start);
        let word = &rest[start..start + len];
        let from = at + start;
        let after = &rest[start + len..];
        if after.starts_with("://") {
            let url = after
                .find(|c: char| {
                    c.is_whitespace() || matches!(c, ')' | ']' | '>' | '"' | '\'' | '`')
                })
                .unwrap_or(after.len());
            rest = &after[url..];
            at = from + len + url;
            continue;
        }
        rest = after;
        at = from + len;
        return Some((from, word));
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kept_whole_and_words_are_not() {
        for (word, want) in [
            (".gitignore", Some(".gitignore")),
            ("libfoo.so.3", Some("libfoo.so.3")),
            ("v1.4.2", Some("v1.4.2")),
            ("src/main.rs", Some("src/main.rs")),
            ("`~/.config/nvim`.", Some(".config/nvim")),
            ("/etc/hosts,", Some("etc/hosts")),
            ("../notes/Plan.md", Some("notes/plan.md")),
            ("(package.json)", Some("package.json")),
            ("Node.js", Some("node.js")),
            ("word", None),
            ("end.", None),
            ("well-known", None),
            ("...", None),
            ("https://example.com/a", None),
            ("café.md", None),
            ("a/", None),
        ] {
            assert_eq!(whole(word).as_deref(), want, "{word}");
        }
        let long = format!("{}.rs", "a".repeat(MAX_NAME_BYTES));
        assert_eq!(whole(&long), None);
    }

    #[test]
    fn the_names_of_a_text_in_order() {
        let text = "Add `node_modules/` to .gitignore, then see [the guide](docs/setup.md#top)\nor <https://example.com/a.html> and libfoo.so.3 (v1.4.2).";
        let names: Vec<String> = tokens(text).into_iter().map(|t| t.text).collect();
        assert_eq!(
            names,
            [
                ".gitignore",
                "setup.md",
                "docs/setup.md",
                "libfoo.so.3",
                "v1.4.2"
            ]
        );
        let t = &tokens(text)[0];
        assert_eq!(&text[t.offset_from..t.offset_to], ".gitignore");
    }

    /// The names of a text as the plain reading finds them: every word of [`split`].
    fn by_split(text: &str) -> Vec<(String, usize)> {
        let mut out = Vec::new();
        for (at, word) in split(text) {
            if let Some(whole) = name(word) {
                if whole.contains('/') {
                    out.extend(whole.split('/').filter_map(name).map(|p| (p, at)));
                }
                out.push((whole, at));
            }
        }
        out
    }

    #[test]
    fn the_byte_search_finds_what_a_split_of_the_text_finds() {
        for text in [
            "(https://a.com/x)c.d and e.f",
            "see <https://example.com/a.html>, then ./b/c.md.",
            "x://y.z w.v\tq.r\u{a0}s.t",
            "café.md naïve/x.y end. Start.Here e.g. v1.2.3-rc.1",
            "a.b/c.d/.e `f.g`:12 [t](u/v.md#w) ~/.x/y",
            "...//..  /. ./ ",
            "",
        ] {
            let got: Vec<(String, usize)> = tokens(text)
                .into_iter()
                .map(|t| (t.text, t.offset_from))
                .collect();
            assert_eq!(got, by_split(text), "{text:?}");
        }
    }
}
