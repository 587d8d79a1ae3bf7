//! Property-based fuzzing on stable Rust (proptest): the parsers (filters, search
//! queries, markdown, frontmatter edits, `Authorization` headers and tokens) and the
//! path-safety function get random and grammar-shaped input for a time budget each, and must keep
//! their promises: never panic, point inside the input when they refuse it, edit one
//! frontmatter key without changing another byte, never resolve a path outside the vault.
//!
//! `cargo test --test it fuzz::` runs each target for `NOTEVAULT_FUZZ_SECONDS` (default 6 s,
//! about a minute in all on two cores); the long run for people is in the README
//! (`NOTEVAULT_FUZZ_SECONDS=600 cargo test --release --test it fuzz:: -- --test-threads 1`).
//! A failure prints the shrunk input; it becomes a regression test below, named after
//! what broke, and the bug is fixed.

#![allow(
    clippy::disallowed_methods,
    reason = "tests build a vault with symlinks and read the fuzzing budget from the environment"
)]

use std::path::Path;
use std::time::{Duration, Instant};

use notevault::vault::frontmatter::{self, FmValue};
use notevault::vault::markdown;
use notevault::vault::path::VaultPaths;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

fn budget() -> Duration {
    let secs = std::env::var("NOTEVAULT_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(6.0);
    Duration::from_secs_f64(secs)
}

/// Run `test` on inputs of `strategy` in rounds of 256 fresh random cases until the
/// budget is spent (at least one round). A failure panics with the shrunk input.
fn fuzz<S: Strategy>(name: &str, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let deadline = Instant::now() + budget();
    let mut cases = 0u64;
    loop {
        let mut runner = TestRunner::new(Config {
            cases: 256,
            failure_persistence: None,
            ..Config::default()
        });
        if let Err(e) = runner.run(&strategy, &test) {
            panic!("{name}: {e}");
        }
        cases += 256;
        if Instant::now() >= deadline {
            break;
        }
    }
    eprintln!("{name}: {cases} cases");
}

/// Text made of `vocabulary` pieces (the grammar's own tokens, so the parser gets deep)
/// mixed with arbitrary characters.
fn shaped(vocabulary: &'static [&'static str], max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(vocabulary).prop_map(str::to_string),
            1 => any::<char>().prop_map(|c| c.to_string()),
            1 => "[ \t\n]{1,3}",
        ],
        0..max,
    )
    .prop_map(|parts| parts.concat())
}

const FILTER_TOKENS: &[&str] = &[
    "tags",
    "folder",
    "path",
    "title",
    "status",
    "visibility",
    "created_at",
    "updated_at",
    "frontmatter.",
    "frontmatter.due",
    "=",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    ":",
    "(",
    ")",
    "AND",
    "OR",
    "NOT",
    "-",
    "\"",
    "\"x y\"",
    "'a'",
    "*",
    "2026-01-01",
    "2026-01-01T00:00:00Z",
    "true",
    "false",
    "42",
    "-3.5",
    " ",
    ".",
    "\\",
    "\\\"",
    "é",
    "日本",
];

#[test]
fn fuzz_filter_parser() {
    fuzz("filter", shaped(FILTER_TOKENS, 40), |input| {
        match notevault::filter::parse(&input) {
            Ok(Some(expr)) => {
                // Evaluating against a record with no values must not panic either.
                let _ = expr.matches(&|_| notevault::filter::Value::Missing);
            }
            Ok(None) => prop_assert!(input.trim().is_empty(), "{input:?} parsed to nothing"),
            Err(e) => {
                prop_assert!(e.position <= input.len(), "{e:?} past the end of {input:?}");
                prop_assert!(
                    input.is_char_boundary(e.position),
                    "{e:?} inside a character of {input:?}"
                );
                prop_assert!(!e.message.is_empty());
            }
        }
        Ok(())
    });
}

const QUERY_TOKENS: &[&str] = &[
    "word",
    "notes",
    "the",
    "\"",
    "\"a phrase\"",
    "+",
    "-",
    "*",
    "pre*",
    "OR",
    "AND",
    "NOT",
    "title:",
    "tags:",
    "body:",
    "path:",
    "(",
    ")",
    ":",
    "?",
    "how do I",
    "é",
    "日本語",
    "'",
    "~",
    "^2",
    "\\",
    " ",
];

#[test]
fn fuzz_search_query_parser() {
    use notevault::index::query::{parse, Match};
    fuzz("query", shaped(QUERY_TOKENS, 30), |input| {
        for mode in [Match::Any, Match::All] {
            match parse(&input, mode) {
                Ok(parsed) => {
                    let _ = parsed.highlight_terms();
                    let _ = parsed.stem_terms();
                }
                Err(e) => {
                    prop_assert!(e.position <= input.len(), "{e:?} past the end of {input:?}");
                    prop_assert!(
                        input.is_char_boundary(e.position),
                        "{e:?} inside a character"
                    );
                }
            }
        }
        Ok(())
    });
}

#[test]
fn fuzz_markdown_facts() {
    const MD: &[&str] = &[
        "---\n",
        "---\r\n",
        "title: T\n",
        "tags: [a, b]\n",
        "tags:\n  - x\n",
        "status: done\n",
        "aliases: [A]\n",
        "# Heading\n",
        "## Sub\n",
        "[[Note]]",
        "[[a/b|alias]]",
        "![[img.png]]",
        "[x](other.md)",
        "[y](../up.md)",
        "```\n",
        "`code`",
        "#tag",
        "\n",
        "\r\n",
        "\u{feff}",
        ": :",
        "- ",
        "{",
        "}",
        "|",
        "\t",
        "é",
    ];
    let input = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..600),
        shaped(MD, 40).prop_map(String::into_bytes),
    ];
    fuzz("markdown", input, |bytes| {
        let facts = markdown::facts(&bytes);
        prop_assert_eq!(facts.lossy_utf8, std::str::from_utf8(&bytes).is_err());
        for tag in &facts.tags {
            prop_assert!(!tag.starts_with('#') && tag.trim() == tag, "tag {tag:?}");
        }
        let (text, _) = markdown::decode(&bytes);
        let lines = markdown::lines(&text).count();
        for link in &facts.links {
            prop_assert!(
                link.line >= 1 && link.line <= lines.max(1),
                "{link:?} of {lines} lines"
            );
        }
        prop_assert_eq!(
            markdown::facts(&bytes),
            facts,
            "facts are a function of the bytes"
        );
        Ok(())
    });
}

/// A frontmatter block built key by key, so the test knows each key's lines.
#[derive(Debug, Clone)]
struct Block {
    eol: &'static str,
    /// `(key, its lines without line endings)`, in order; comment lines have no key.
    entries: Vec<(Option<String>, Vec<String>)>,
    body: String,
}

impl Block {
    fn text(&self) -> String {
        let mut out = format!("---{}", self.eol);
        for (_, lines) in &self.entries {
            for line in lines {
                out.push_str(line);
                out.push_str(self.eol);
            }
        }
        out.push_str("---");
        out.push_str(self.eol);
        out.push_str(&self.body);
        out
    }
}

fn block() -> impl Strategy<Value = Block> {
    let scalar = "[a-zA-Z0-9 _.-]{0,12}";
    let entry = prop_oneof![
        ("[a-z]{1,6}", scalar, prop::bool::ANY).prop_map(|(k, v, quoted)| {
            let line = if quoted {
                format!("{k}: \"{v}\"")
            } else {
                format!("{k}: {v}")
            };
            (Some(k), vec![line])
        }),
        ("[a-z]{1,6}", prop::collection::vec("[a-z0-9]{1,6}", 1..4)).prop_map(|(k, items)| {
            let mut lines = vec![format!("{k}:")];
            lines.extend(items.iter().map(|i| format!("  - {i}")));
            (Some(k), lines)
        }),
        ("[a-z]{1,6}", prop::collection::vec("[a-z0-9]{1,6}", 0..4)).prop_map(|(k, items)| (
            Some(k.clone()),
            vec![format!("{k}: [{}]", items.join(", "))]
        )),
        "# [a-z :]{0,12}".prop_map(|c| (None, vec![c])),
    ];
    (
        prop::bool::ANY,
        prop::collection::vec(entry, 0..6),
        "[a-z #\\[\\]\n:-]{0,60}",
    )
        .prop_map(|(crlf, entries, body)| {
            // One entry per key: YAML would refuse (or pick one of) duplicate keys.
            let mut seen = std::collections::HashSet::new();
            let entries = entries
                .into_iter()
                .filter(|(k, _)| k.as_ref().is_none_or(|k| seen.insert(k.clone())))
                .collect();
            Block {
                eol: if crlf { "\r\n" } else { "\n" },
                entries,
                body,
            }
        })
}

/// The lines of `text`'s frontmatter that do not belong to `key` (its `key:` line and the
/// indented lines under it), with their line endings, and the body.
fn other_bytes(text: &str, key: &str) -> (Vec<String>, String) {
    let body_start = frontmatter::body_range(text).start;
    let mut lines = Vec::new();
    let mut in_key = false;
    for line in text[..body_start].split_inclusive('\n') {
        let bare = line.trim_end_matches(['\r', '\n']);
        // The key as written, or quoted (a new `on` is written `"on":`: YAML 1.1 reads a
        // bare `on` as a boolean).
        if [
            format!("{key}:"),
            format!("\"{key}\":"),
            format!("'{key}':"),
        ]
        .iter()
        .any(|k| bare.starts_with(k.as_str()))
        {
            in_key = true;
            continue;
        }
        if in_key && (bare.starts_with(' ') || bare.starts_with('\t')) {
            continue;
        }
        in_key = false;
        lines.push(line.to_string());
    }
    (lines, text[body_start..].to_string())
}

#[test]
fn fuzz_frontmatter_edits_touch_only_their_key() {
    let value = prop_oneof![
        "[a-zA-Z0-9 _.:#'\"-]{0,16}".prop_map(FmValue::Scalar),
        prop::sample::select(&["1", "-2.5", "true", "false"][..])
            .prop_map(|s| FmValue::Plain(s.into())),
        prop::collection::vec("[a-z0-9 #-]{1,8}", 0..4).prop_map(FmValue::List),
    ];
    let case = (block(), "[a-z]{1,6}", value, prop::bool::ANY);
    fuzz("frontmatter", case, |(block, key, value, remove)| {
        let text = block.text();
        let before = markdown::facts(text.as_bytes());
        let result = if remove {
            frontmatter::remove_key(&text, &key)
        } else {
            frontmatter::set_key(&text, &key, &value)
        };
        let Ok(out) = result else {
            // Refusing is allowed (it writes nothing); the test is about what it writes.
            return Ok(());
        };
        prop_assert_eq!(
            other_bytes(&out, &key),
            other_bytes(&text, &key),
            "an edit of {:?} changed other bytes:\n{:?}\n->\n{:?}",
            key,
            text,
            out
        );
        let after = markdown::facts(out.as_bytes());
        if let (Some(b), Some(a)) = (&before.frontmatter, &after.frontmatter) {
            for (k, v) in b {
                if k.as_str() != Some(key.as_str()) {
                    prop_assert_eq!(a.get(k), Some(v), "key {:?} changed", k);
                }
            }
        }
        if remove {
            prop_assert!(after
                .frontmatter
                .is_none_or(|m| !m.contains_key(key.as_str())));
        }
        Ok(())
    });
}

#[test]
fn fuzz_path_resolution_stays_inside_the_vault() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "secret").unwrap();
    let vault = tempfile::tempdir().unwrap();
    let root = vault.path().canonicalize().unwrap();
    let state = root.join(".notevault");
    std::fs::create_dir_all(state.join("history.git")).unwrap();
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join("inside.md"), "x").unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.md"), root.join("sub/leak.md")).unwrap();
    std::os::unix::fs::symlink(&state, root.join("st")).unwrap();
    std::os::unix::fs::symlink("..", root.join("sub/up")).unwrap();
    std::os::unix::fs::symlink("../..", root.join("sub/deeper/upup")).unwrap();
    std::os::unix::fs::symlink("inside.md", root.join("ok-link.md")).unwrap();
    let paths = VaultPaths::new(root.clone(), state.clone());
    const PARTS: &[&str] = &[
        "..",
        ".",
        "sub",
        "deeper",
        "out",
        "st",
        "up",
        "upup",
        "inside.md",
        "secret.md",
        "leak.md",
        "ok-link.md",
        "new.md",
        ".git",
        ".GIT",
        ".notevault",
        ".NoteVault",
        "history.git",
        "\u{ff0e}\u{ff0e}",
        "\u{2025}",
        "%2e%2e",
        "a b",
        "x\\..",
        "\0",
        "",
        " ",
        "é",
    ];
    let input = (
        prop::bool::ANY,
        prop::collection::vec(prop::sample::select(PARTS), 1..6),
    )
        .prop_map(|(absolute, parts)| {
            let joined = parts.join("/");
            if absolute {
                format!("/{joined}")
            } else {
                joined
            }
        });
    fuzz("paths", input, |rel| {
        for (resolved, new) in [
            (paths.resolve(&rel), false),
            (paths.resolve_new(&rel), true),
        ] {
            let Ok(safe) = resolved else { continue };
            prop_assert!(safe.abs.starts_with(&root), "{rel:?} -> {:?}", safe.abs);
            prop_assert!(!safe.abs.starts_with(&state), "{rel:?} -> the state dir");
            // Where it really lands: the deepest existing ancestor, symlinks followed.
            let mut existing: &Path = &safe.abs;
            let real = loop {
                match existing.canonicalize() {
                    Ok(c) => break c,
                    Err(_) => existing = existing.parent().unwrap(),
                }
            };
            prop_assert!(
                real.starts_with(&root),
                "{rel:?} lands at {real:?}, outside the vault"
            );
            prop_assert!(!real.starts_with(&state), "{rel:?} lands in the state dir");
            prop_assert!(
                !safe
                    .rel
                    .split('/')
                    .any(|c| c == ".." || c == "." || c.is_empty()),
                "{rel:?} kept a dot component"
            );
            if new {
                prop_assert!(notevault::vault::path::name_problem(&rel).is_none());
            }
        }
        Ok(())
    });
}

const TOKEN_PARTS: &[&str] = &[
    "Bearer",
    "bearer",
    "BEARER",
    "Basic",
    " ",
    "  ",
    "\t",
    "nvp_",
    "abcdefgh",
    "0123456789",
    "nvp_abcdefgh0123456789abcdefghijklmnopqrstuv",
    "é",
    "日",
    "\"",
    ",",
    "=",
    "\u{7f}",
    "\0",
    "\r\n",
];

#[test]
fn fuzz_token_parsing() {
    use notevault::auth::{self, pat, Presented};
    let header = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..80),
        shaped(TOKEN_PARTS, 12).prop_map(String::into_bytes),
    ];
    fuzz("tokens", header, |bytes| {
        if let Presented::Bearer(token) = auth::presented(&[bytes.as_slice()]) {
            prop_assert!(
                !token.is_empty() && !token.contains(' '),
                "bearer {token:?}"
            );
            prop_assert!(
                token.bytes().all(|b| b.is_ascii_graphic()),
                "bearer {token:?}"
            );
        }
        if let Ok(text) = std::str::from_utf8(&bytes) {
            for token in [text, text.trim()] {
                let _ = pat::well_formed(token);
                let prefix = pat::public_prefix(token);
                prop_assert!(token.starts_with(prefix));
                prop_assert!(auth::public_prefix(token).len() <= 12);
                if let Ok(lifetime) = pat::parse_lifetime(token) {
                    prop_assert!(lifetime.as_secs() > 0);
                }
            }
        }
        Ok(())
    });
}

// Regressions found by the targets above, named after what broke.

/// `a/./b` and `up/.` passed `VaultPaths::resolve`: `Path::components` drops a `.` that
/// is not first, so the check never saw it (the file resolved inside the vault, but under
/// a second name for the same note).
#[test]
fn interior_dot_component_is_unsafe() {
    let vault = tempfile::tempdir().unwrap();
    let root = vault.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("a")).unwrap();
    std::fs::write(root.join("a/b.md"), "x").unwrap();
    let paths = VaultPaths::new(root.clone(), root.join(".notevault"));
    for rel in ["a/./b.md", "a/.", "up/.", "a/b.md/."] {
        let err = paths.resolve(rel).expect_err(rel);
        assert_eq!(err.reason, notevault::error::Reason::UNSAFE_PATH, "{rel}");
    }
    assert!(paths.resolve("a/b.md").is_ok());
}

/// `pat::public_prefix` sliced its first 12 bytes whatever they held: a string with a
/// multi-byte character across byte 12 (`nvp_abcdefgé…`) panicked. (`auth::presented`
/// refuses such a bearer before it gets there; the CLI and logs call it too.)
#[test]
fn pat_public_prefix_of_a_multibyte_string() {
    use notevault::auth::pat;
    assert_eq!(pat::public_prefix("nvp_abcdefg\u{e9}xyz"), "nvp_abcdefg");
    assert_eq!(pat::public_prefix("0123456789-\u{e9}0123"), "0123456789-");
    assert_eq!(pat::public_prefix("nvp_abcdefgh1234"), "nvp_abcdefgh");
    assert_eq!(pat::public_prefix("nvp"), "nvp");
}
