use super::*;

fn matcher(terms: &[(&str, bool)]) -> Matcher {
    Matcher::new(terms.iter().map(|(t, p)| (t.to_string(), *p)).collect())
}

#[test]
fn lead_is_the_first_paragraph_after_headings_and_code() {
    assert_eq!(
        lead("# du\n\n> Disk usage: estimate space.\n> More information.\n\n- List sizes:\n"),
        "> Disk usage: estimate space.\n> More information."
    );
    assert_eq!(
        lead("# Get-Item\n\n## SYNOPSIS\n\nGets the item.\n\n## SYNTAX\n"),
        "Gets the item."
    );
    assert_eq!(
        lead("```\ncode\n```\n<!-- a\nb -->\n| a | b |\nText here\n## Next\nmore"),
        "Text here"
    );
    assert_eq!(lead("# Only a title\n"), "");
    let long = "é".repeat(LEAD_BYTES);
    assert!(lead(&long).len() <= LEAD_BYTES);
}

#[test]
fn headings_outside_code() {
    let body = "# One\ntext\n```\n# not a heading\n```\n## Two ##\n#hashtag\n    # indented code\n";
    assert_eq!(headings(body), ["One", "Two"]);
}

#[test]
fn words_match_at_boundaries_and_prefixes_extend() {
    let m = matcher(&[("road", false)]);
    assert_eq!(m.find(b"Road roadmap railroad road."), [(0, 4), (22, 26)]);
    let m = matcher(&[("road", true)]);
    assert_eq!(m.find(b"Road roadmap railroad").len(), 2);
    let m = matcher(&[("東京", false)]);
    assert_eq!(m.find("私は東京に".as_bytes()).len(), 1);
    // Accented letters are word characters: no match inside "éroad".
    let m = matcher(&[("road", false)]);
    assert_eq!(m.find("éroad road".as_bytes()).len(), 1);
    // Overlapping terms: the longest at the leftmost start.
    let m = matcher(&[("road", true), ("roadmap", false)]);
    assert_eq!(m.find(b"a roadmap"), [(2, 9)]);
    // The longest is not a word there; a shorter term at the same start is.
    assert_eq!(m.find(b"roadmaps"), [(0, 4)]);
    // Many terms, one scan: each found where it is a word, in order.
    let m = matcher(&[
        ("tar", false),
        ("gz", false),
        ("archive", false),
        ("x", false),
    ]);
    assert_eq!(
        m.find(b"Extract tar.gz: an ARCHIVE, a star, x"),
        [(8, 11), (12, 14), (19, 26), (36, 37)]
    );
}

#[test]
fn word_forms_match_whole_words_with_the_same_stem() {
    let m = matcher(&[("synced", false)]).with_stems(vec![("synced".into(), "sync".into())]);
    assert_eq!(
        m.find(b"Sync, synced, syncing, synchronize, resync."),
        [(0, 4), (6, 12), (14, 21)]
    );
    let m = matcher(&[("cursors", false)]).with_stems(vec![("cursors".into(), "cursor".into())]);
    assert!(m.text_matches("Multiple cursor"));
    assert!(!m.text_matches("Multiple cursory"));
}

#[test]
fn words_in_short_texts_fold_accents_when_bytes_miss() {
    let m = matcher(&[("cafe", false)]);
    assert!(m.text_matches("Cafe notes"));
    assert!(m.text_matches("Café notes"), "by the tokenizer's folding");
    assert!(!m.text_matches("Cafeteria notes"));
    let m = matcher(&[("東京", false)]);
    assert!(m.text_matches("私は東京に"));
}

#[test]
fn letter_keys_are_read_as_the_tokenizer_reads_them() {
    let text = "- E[x]tract a g[z]ipped archive [v]erbosely: `tar xzvf a[i]`";
    let m = matcher(&[("extract", false), ("verbosely", false)]);
    assert_eq!(m.find(text.as_bytes()), [(2, 11), (32, 43)]);
    assert_eq!(
        m.snippet(text),
        "- <mark>E[x]tract</mark> a g[z]ipped archive <mark>[v]erbosely</mark>: `tar xzvf a[i]`"
    );
    // A key's letter is no word of its own; an index in brackets is.
    assert!(matcher(&[("x", false)]).find(text.as_bytes()).is_empty());
    assert_eq!(matcher(&[("i", false)]).find(text.as_bytes()), [(57, 58)]);
    assert_eq!(matcher(&[("gzipped", false)]).find(b"g[z]ipped"), [(0, 9)]);
}

proptest::proptest! {
    /// Each match found in a text with letter keys is the term there, brackets aside
    /// (a word opening with a key starts at its `[`).
    #[test]
    fn matches_map_back_to_the_term_in_the_text(
        parts in proptest::collection::vec(
            proptest::sample::select(vec!["E[x]tract", "[e]xtract", "extr[a]ct", "extract", " ", "[x]", "a[i]", "x", "-", "é"]),
            0..12,
        ),
    ) {
        let text = parts.concat();
        for (s, e) in matcher(&[("extract", false)]).find(text.as_bytes()) {
            let found: String = text[s..e].chars().filter(|c| !"[]".contains(*c)).collect();
            proptest::prop_assert_eq!(found.to_lowercase(), "extract", "{:?} at {}..{}", text, s, e);
            proptest::prop_assert!(text[s..].starts_with(['e', 'E', '[']), "{:?} at {}", text, s);
        }
    }
}

proptest::proptest! {
    /// A few terms found one by one ([`Starts::Few`]) are found where the automaton
    /// finds them: the same matches, word forms and letter keys included.
    #[test]
    fn a_few_terms_are_found_where_the_automaton_finds_them(
        parts in proptest::collection::vec(
            proptest::sample::select(vec![
                "sync", "Synced", "SYNC", "ing", "re", "ab", "AB", "aB", "a", "b", " ", "-",
                "\n", ".", "[x]", "E[x]", "é", "É", "東京", "cursor", "s", "y",
            ]),
            0..40,
        ),
        terms in proptest::collection::vec(
            (proptest::sample::select(vec!["sync", "ab", "a", "b", "é", "東", "abab", "cursors", "re"]), proptest::bool::ANY),
            1..=3,
        ),
        forms in proptest::bool::ANY,
    ) {
        let text = parts.concat();
        let terms: Vec<(&str, bool)> = terms;
        let build = || {
            let m = matcher(&terms);
            if forms {
                m.with_stems(vec![("synced".into(), "sync".into())])
            } else {
                m
            }
        };
        let few = build();
        proptest::prop_assert!(matches!(few.starts(), Some(Starts::Few)));
        proptest::prop_assert_eq!(
            few.find(text.as_bytes()),
            build().by_automaton().find(text.as_bytes()),
            "{:?}",
            text
        );
    }
}

#[test]
fn snippets_mark_and_cut() {
    let m = matcher(&[("needle", false)]);
    assert_eq!(m.snippet("a Needle here"), "a <mark>Needle</mark> here");
    let long = format!("{} needle {}", "x".repeat(300), "y".repeat(300));
    let s = m.snippet(&long);
    assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
    assert!(s.contains("<mark>needle</mark>"));
    let plain = s.replace(MARK_OPEN, "").replace(MARK_CLOSE, "");
    assert!(
        plain.chars().count() <= SNIPPET_CHARS + 2,
        "{}",
        plain.chars().count()
    );
}
