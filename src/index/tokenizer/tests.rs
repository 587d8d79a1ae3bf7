use super::*;

fn texts(text: &str) -> Vec<String> {
    tokens(text).into_iter().map(|(t, _)| t).collect()
}

#[test]
fn a_letter_key_in_brackets_stays_in_its_word() {
    assert_eq!(
        texts("- E[x]tract a g[z]ipped archive [v]erbosely, [c]reate and [dr]y-run"),
        [
            "extract",
            "a",
            "gzipped",
            "archive",
            "verbosely",
            "create",
            "and",
            "dry",
            "run"
        ]
    );
    // Not a letter key: a checkbox, links, an index, four letters, a digit, the end.
    assert_eq!(
        texts("[x] done [[Note]] [a](b) arr[i] list[abcd]ef v[2]x ends[s]"),
        [
            "x", "done", "note", "a", "b", "arr", "i", "list", "abcd", "ef", "v", "2", "x", "ends",
            "s"
        ]
    );
    // The word's offsets span the brackets.
    let mut a = analyzer();
    let mut stream = a.token_stream("to E[x]tract");
    assert!(stream.advance() && stream.advance());
    let t = stream.token();
    assert_eq!(
        (t.text.as_str(), t.offset_from, t.offset_to),
        ("extract", 3, 12)
    );
}

/// The words of `text` split at every character that is not a letter or digit, with
/// no rule for brackets: how provenance's byte matcher sees a text.
fn plain_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && w.len() < MAX_TOKEN_BYTES)
        .map(|w| w.to_lowercase().replace('é', "e"))
        .collect()
}

proptest::proptest! {
    /// Provenance matches words in a text without its keys' brackets: the words the
    /// tokenizer reads in the text itself.
    #[test]
    fn a_text_without_its_keys_brackets_has_the_same_words(
        chars in proptest::collection::vec(
            proptest::sample::select(vec!['[', ']', 'a', 'B', 'z', '1', ' ', '-', 'é', '\n']),
            0..40,
        ),
    ) {
        let text: String = chars.into_iter().collect();
        let keyless = without_letter_keys(text.as_bytes())
            .map(|(t, _)| String::from_utf8(t).unwrap())
            .unwrap_or_else(|| text.clone());
        proptest::prop_assert_eq!(plain_words(&keyless), texts(&text), "{:?} / {:?}", text, keyless);
    }
}

/// Every `(text, offsets, position)` the analyzer gives for `text`.
fn all_tokens(analyzer: &mut TextAnalyzer, text: &str) -> Vec<(String, usize, usize, usize)> {
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        let t = stream.token();
        out.push((t.text.clone(), t.offset_from, t.offset_to, t.position));
    }
    out
}

proptest::proptest! {
    /// In a text of spaced scripts without letter keys, the one-pass tokenizer gives
    /// exactly what tantivy's split at every character that is not a letter or digit,
    /// followed by its filters (drop long words, lower-case, fold to ASCII), gives:
    /// words, offsets and positions.
    #[test]
    fn words_are_what_tantivys_filters_make_of_them(
        pieces in proptest::collection::vec(
            proptest::sample::select(vec![
                "a", "Z", "7", " ", "-", "[", "]", "\n", "é", "É", "İ", "ß", "Ω", "ﬁ", "Ａ",
                "٣", "\u{301}", "Ⅻ", "ǅ", "aaaaaaaaaaaaaaaaaaa", "ééééééééé", "_",
            ]),
            0..30,
        ),
    ) {
        let text: String = pieces.concat();
        proptest::prop_assume!(without_letter_keys(text.as_bytes()).is_none());
        let mut reference = TextAnalyzer::builder(tantivy::tokenizer::SimpleTokenizer::default())
            .filter(tantivy::tokenizer::RemoveLongFilter::limit(MAX_TOKEN_BYTES))
            .filter(LowerCaser)
            .filter(AsciiFoldingFilter)
            .build();
        proptest::prop_assert_eq!(
            all_tokens(&mut analyzer(), &text),
            all_tokens(&mut reference, &text),
            "{:?}", text
        );
    }
}

#[test]
fn unspaced_characters_are_their_own_lower_case_and_folding() {
    // The tokenizer takes unigrams and bigrams of unspaced scripts as they are.
    let mut fold = fold_analyzer();
    let mut checked = 0;
    for c in (0x0E00..=0x3134F)
        .filter_map(char::from_u32)
        .filter(|&c| is_unspaced(c))
    {
        let text = c.to_string();
        let mut stream = fold.token_stream(&text);
        assert!(stream.advance());
        assert_eq!(stream.token().text, text, "U+{:04X}", c as u32);
        checked += 1;
    }
    assert!(checked > 100_000, "{checked}");
}

#[test]
fn leaving_brackets_out_makes_no_new_key() {
    // The first `[a]` is no key (a `[` follows it); leaving the second's brackets out
    // must not make it one.
    assert_eq!(texts("[a][a]a"), ["a", "aa"]);
    let (keyless, _) = without_letter_keys(b"[a][a]a").unwrap();
    assert_eq!(
        plain_words(std::str::from_utf8(&keyless).unwrap()),
        ["a", "aa"]
    );
    // A word longer than a token may be is no word either way.
    let long = format!("[a]{}", "é".repeat(20));
    let (keyless, _) = without_letter_keys(long.as_bytes()).unwrap();
    assert!(texts(&long).is_empty());
    assert!(plain_words(std::str::from_utf8(&keyless).unwrap()).is_empty());
}

#[test]
fn words_are_split_lowercased_and_folded() {
    assert_eq!(
        texts("Hello, Café-au-lait snake_case x2"),
        ["hello", "cafe", "au", "lait", "snake", "case", "x2"]
    );
    let long = "a".repeat(MAX_TOKEN_BYTES + 1);
    assert_eq!(texts(&format!("keep {long} this")), ["keep", "this"]);
}

#[test]
fn unspaced_scripts_give_unigrams_and_bigrams_at_consecutive_positions() {
    assert_eq!(
        tokens("日本語のノート"),
        [
            ("日".into(), 0),
            ("日本".into(), 0),
            ("本".into(), 1),
            ("本語".into(), 1),
            ("語".into(), 2),
            ("語の".into(), 2),
            ("の".into(), 3),
            ("のノ".into(), 3),
            ("ノ".into(), 4),
            ("ノー".into(), 4),
            ("ー".into(), 5),
            ("ート".into(), 5),
            ("ト".into(), 6),
        ]
    );
    // Mixed scripts: the run ends at a Latin word, positions keep counting.
    assert_eq!(
        tokens("東京 is big"),
        [
            ("東".into(), 0),
            ("東京".into(), 0),
            ("京".into(), 1),
            ("is".into(), 2),
            ("big".into(), 3),
        ]
    );
    assert_eq!(texts("abc漢字def"), ["abc", "漢", "漢字", "字", "def"]);
}

#[test]
fn stems_only_plain_english_words() {
    for (word, want) in [
        ("cursors", "cursor"),
        ("synced", "sync"),
        ("syncing", "sync"),
        ("running", "run"),
        ("ipv6", "ipv6"),
        ("go", "go"),
        ("日本", "日本"),
        ("файлы", "файлы"),
    ] {
        assert_eq!(stem(word), want, "{word}");
    }
    let mut a = forms_analyzer();
    let mut stream = a.token_stream("Synced Cursors, café sync 東京");
    let mut got = Vec::new();
    while stream.advance() {
        let t = stream.token();
        got.push((t.text.clone(), t.position));
    }
    let want: Vec<(String, usize)> = [
        ("synced", 0),
        ("~sync", 0),
        ("cursors", 1),
        ("~cursor", 1),
        ("cafe", 2),
        ("sync", 3),
        ("東", 4),
        ("東京", 4),
        ("京", 5),
    ]
    .iter()
    .map(|(t, p)| (t.to_string(), *p))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn a_note_in_another_language_is_not_stemmed() {
    let fm = |yaml: &str| serde_norway::from_str::<serde_norway::Mapping>(yaml).unwrap();
    assert!(stems_english(None));
    assert!(stems_english(Some(&fm("title: x"))));
    assert!(stems_english(Some(&fm("lang: en-GB"))));
    assert!(!stems_english(Some(&fm("lang: fr"))));
    assert!(!stems_english(Some(&fm("language: Deutsch"))));
}
