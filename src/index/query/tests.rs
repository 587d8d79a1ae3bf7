use super::*;

#[test]
fn stop_words_are_sorted_for_binary_search() {
    let mut sorted = STOP_WORDS.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted, STOP_WORDS);
}

#[test]
fn light_queries_are_few_units_without_short_prefixes() {
    for (q, light) in [
        ("git", true),
        ("kube* \"pull request\" title:docker", true),
        ("a b c d e f g h", true),
        ("a1 b1 c1 d1 e1 f1 g1 h1 i1", false),
        ("kub*", true),
        ("ku*", false),
        ("k*", false),
        ("git OR k*", false),
        ("git -ab*", false),
    ] {
        assert_eq!(parse(q, Match::Any).unwrap().is_light(), light, "{q}");
    }
}

fn show(p: &Parsed) -> String {
    let alt = |a: &Vec<Unit>| {
        a.iter()
            .map(|u| {
                format!(
                    "{}{}{}",
                    u.field
                        .as_deref()
                        .map(|f| format!("{f}:"))
                        .unwrap_or_default(),
                    u.tokens.join("_"),
                    if u.prefix { "*" } else { "" }
                )
            })
            .collect::<Vec<_>>()
            .join("|")
    };
    let mut out: Vec<String> = p
        .required
        .iter()
        .map(|a| format!("+({})", alt(a)))
        .collect();
    out.extend(p.ranked.iter().map(|a| format!("({})", alt(a))));
    out.extend(p.excluded.iter().map(|a| format!("-({})", alt(a))));
    out.join(" ")
}

#[test]
fn grammar_table_all_words() {
    let cases: &[(&str, &str)] = &[
        ("roadmap", "+(roadmap)"),
        ("Roadmap 2027", "+(roadmap) +(2027)"),
        ("\"quarterly planning\"", "+(quarterly_planning)"),
        ("road*", "+(road*)"),
        ("\"big bad wo\"*", "+(big_bad_wo*)"),
        ("title:roadmap body", "+(title:roadmap) +(body)"),
        ("a OR b c", "+(a|b) +(c)"),
        ("a OR b OR c", "+(a|b|c)"),
        ("idea -draft", "+(idea) -(draft)"),
        ("idea NOT draft", "+(idea) -(draft)"),
        ("日本語", "+(日本_本語)"),
        ("東京", "+(東京)"),
        ("猫", "+(猫)"),
        ("猫 cat", "+(猫) +(cat)"),
        ("snake_case", "+(snake_case)"),
        ("C++ tips", "+(c) +(tips)"),
        ("tags:project/active", "+(tags:project_active)"),
        ("https://example.com", "+(https_example_com)"),
        ("how do I sync", "+(how) +(do) +(i) +(sync)"),
        // Regression: the keyword check sliced inside `ð` (schemathesis found it).
        ("öðÓ", "+(odo)"),
    ];
    for (input, want) in cases {
        let got = parse(input, Match::All).unwrap_or_else(|e| panic!("{input:?}: {e:?}"));
        assert_eq!(show(&got), *want, "{input:?}");
    }
}

#[test]
fn grammar_table_questions() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("roadmap", "(roadmap)", &[]),
        (
            "how do I embed a pdf in a note",
            "(embed) (pdf) (note)",
            &["how", "do", "i", "a", "in"],
        ),
        ("the", "(the)", &[]),
        ("the a of", "(the) (a) (of)", &[]),
        ("\"pull request\" review", "+(pull_request) (review)", &[]),
        ("title:docker compose", "+(title:docker) (compose)", &[]),
        ("kube* pods", "+(kube*) (pods)", &[]),
        (
            "+sync the files -draft",
            "+(sync) (files) -(draft)",
            &["the"],
        ),
        ("a OR b c", "(a|b) (c)", &[]),
        ("what's new", "(new)", &["\"what s\""]),
        ("sync - files", "(sync) (files)", &["-"]),
        ("sync + files ???", "(sync) (files)", &["+", "???"]),
        ("git git GIT", "(git)", &[]),
    ];
    for (input, want, ignored) in cases {
        let got = parse(input, Match::Any).unwrap_or_else(|e| panic!("{input:?}: {e:?}"));
        assert_eq!(show(&got), *want, "{input:?}");
        let got_ignored: Vec<&str> = got
            .reading
            .ignored
            .iter()
            .map(|i| i.text.as_str())
            .collect();
        assert_eq!(got_ignored, *ignored, "{input:?}");
    }
    let pairs = |q: &str| parse(q, Match::Any).unwrap().pairs;
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        pairs("free disk space of a folder"),
        [pair("free", "disk"), pair("disk", "space")]
    );
    assert!(pairs("\"disk space\" free").is_empty());
    assert!(parse("disk space", Match::All).unwrap().pairs.is_empty());
    let only_stop = parse("the a of", Match::Any).unwrap();
    assert!(only_stop.reading.remarks[0].contains("only stop words"));
    let unknown = parse("colour:red", Match::Any).unwrap();
    assert!(unknown.reading.remarks[0].contains("`colour:` is not a field"));
    assert!(parse("https://example.com 12:30", Match::Any)
        .unwrap()
        .reading
        .remarks
        .is_empty());
    let long = "word ".repeat(40);
    let long: String = (0..40).map(|i| format!("w{i} ")).collect::<String>() + &long;
    let p = parse(&long, Match::Any).unwrap();
    assert_eq!(p.ranked.len(), MAX_RANKED_CLAUSES);
    assert!(p
        .reading
        .ignored
        .iter()
        .all(|i| i.reason.starts_with("beyond")));
}

#[test]
fn errors_have_positions() {
    let cases: &[(&str, usize, &str)] = &[
        ("", 0, "empty"),
        ("   ", 0, "empty"),
        ("-draft", 0, "only excludes"),
        ("idea \"open", 5, "not closed"),
        ("a OR", 4, "OR needs"),
        ("a OR -b", 5, "OR cannot join"),
        ("???", 0, "no letters or digits"),
        ("- -", 0, "no letters or digits"),
    ];
    for (input, pos, msg) in cases {
        for mode in [Match::Any, Match::All] {
            let e = parse(input, mode).expect_err(input);
            assert_eq!(e.position, *pos, "{input:?}: {e:?}");
            assert!(e.message.contains(msg), "{input:?}: {e:?}");
        }
    }
    let long = "a ".repeat(MAX_QUERY_CHARS);
    assert!(parse(&long, Match::Any)
        .unwrap_err()
        .message
        .contains("longer"));
}
