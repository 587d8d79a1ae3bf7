//! GET /v1/grep: line for line what `rg -n` finds in the markdown files, paging, freshness
//! and bad input.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use common::TestServer;
use serde_json::Value;

/// `(path, line, text)` of a match; text without its line ending, cut to 400 characters.
type Hit = (String, u64, String);

fn cut(text: &str) -> String {
    let text = text.trim_end_matches('\n').trim_end_matches('\r');
    text.chars().take(400).collect()
}

/// What `rg -n` finds: markdown files only, symlinks followed (as the daemon serves
/// links that stay inside the vault), hidden files searched but the folders the daemon
/// skips (`.obsidian/`, `.trash/`, `.git/`, its state dir) left out.
fn rg(bin: &Path, root: &Path, pattern: &str, flags: &[&str]) -> BTreeSet<Hit> {
    let out = Command::new(bin)
        .current_dir(root)
        .args([
            "--json",
            "-n",
            "-L",
            "--hidden",
            "--no-ignore",
            "-g",
            "*.md",
        ])
        .args([
            "-g",
            "!.obsidian",
            "-g",
            "!.trash",
            "-g",
            "!.git",
            "-g",
            "!.notevault",
        ])
        .args(flags)
        .arg("--")
        .arg(pattern)
        .arg(".")
        .output()
        .expect("rg runs");
    let mut hits = BTreeSet::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["type"] != "match" {
            continue;
        }
        let d = &v["data"];
        let text = |o: &Value| -> String {
            match o.get("text") {
                Some(t) => t.as_str().unwrap().to_string(),
                None => {
                    use base64::Engine;
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(o["bytes"].as_str().unwrap())
                        .unwrap();
                    String::from_utf8_lossy(&raw).into_owned()
                }
            }
        };
        let path = text(&d["path"]);
        let path = path.strip_prefix("./").unwrap_or(&path).to_string();
        hits.insert((
            path,
            d["line_number"].as_u64().unwrap(),
            cut(&text(&d["lines"])),
        ));
    }
    hits
}

/// Every page of a grep, as hits; also checks the paging invariants.
async fn grep_all(s: &TestServer, query: &str, page_size: usize) -> (BTreeSet<Hit>, Value) {
    let mut hits = BTreeSet::new();
    let mut token: Option<String> = None;
    let mut first_coverage = Value::Null;
    let mut pages = 0;
    loop {
        let mut path = format!("/v1/grep?{query}&page_size={page_size}");
        if let Some(t) = &token {
            path.push_str(&format!("&page_token={t}"));
        }
        let body = s.get_json(&path, 200).await;
        pages += 1;
        assert!(pages < 10_000, "paging does not end");
        if first_coverage.is_null() {
            first_coverage = body["coverage"].clone();
        }
        let mut on_page = 0;
        for r in body["results"].as_array().unwrap() {
            assert!(r.get("content").is_none(), "no bodies");
            let p = r["path"].as_str().unwrap().to_string();
            for l in r["lines"].as_array().unwrap() {
                let hit = (
                    p.clone(),
                    l["n"].as_u64().unwrap(),
                    l["text"].as_str().unwrap().to_string(),
                );
                assert!(hits.insert(hit.clone()), "{hit:?} twice");
                on_page += 1;
            }
        }
        assert_eq!(body["lines_returned"], on_page);
        assert!(on_page <= page_size);
        match body["next_page_token"].as_str() {
            Some(t) => {
                assert_eq!(on_page, page_size, "only a full page has a next page");
                token = Some(t.to_string());
            }
            None => break,
        }
    }
    (hits, first_coverage)
}

fn q(pattern: &str, extra: &str) -> String {
    let enc: String = form_urlencoded::byte_serialize(pattern.as_bytes()).collect();
    format!("pattern={enc}{extra}")
}

/// Patterns and their `rg` flags: literals, regexes, anchors, classes, case, words, Unicode.
const CASES: &[(&str, &str, &[&str])] = &[
    ("the", "", &[]),
    ("^#+ ", "", &[]),
    (r"[0-9]{4}-[0-9]{2}-[0-9]{2}", "", &[]),
    (r"\bnote\b", "&case=insensitive", &["-i"]),
    ("Note", "&case=smart", &["-S"]),
    ("note", "&case=smart", &["-S"]),
    ("a.b", "&literal=true", &["-F"]),
    ("(", "&literal=true", &["-F"]),
    ("tag", "&word=true", &["-w"]),
    (r"\.$", "", &[]),
    ("ノート", "", &[]),
    ("é", "", &[]),
    (r"\s+$", "", &[]),
    ("[[", "&literal=true", &["-F"]),
    ("zzzz-not-anywhere", "", &[]),
];

#[tokio::test]
async fn grep_equals_rg_line_for_line_on_the_fixtures() {
    // A missing rg fails the test (common::tools says how to get it), unless the
    // developer opted out with NOTEVAULT_REQUIRE_TOOLS=0.
    let Some(bin) = common::tools::rg() else {
        return;
    };
    for source in ["fixtures/edge", "vault-example"] {
        let s = TestServer::start(Some(source), |c| c.rate_limit_read_per_minute = 0).await;
        let excluded: BTreeSet<String> = s.get_json("/v1/notes", 200).await["coverage"]["excluded"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap().to_string())
            .collect();
        for (pattern, extra, flags) in CASES {
            let mut want = rg(&bin, &s.vault, pattern, flags);
            // The daemon never reads what leaves the vault (a symlink to ../outside).
            want.retain(|(p, _, _)| !excluded.contains(p));
            let (got, coverage) = grep_all(&s, &q(pattern, extra), 1000).await;
            assert_eq!(got, want, "{source}: pattern {pattern:?} {extra}");
            let files: BTreeSet<&str> = want.iter().map(|(p, _, _)| p.as_str()).collect();
            assert_eq!(
                coverage["notes_matched"],
                files.len(),
                "{source} {pattern:?}"
            );
        }
    }
}

#[tokio::test]
async fn grep_equals_rg_on_a_slice_of_the_real_corpus() {
    // The corpus is data beside the repository, not a tool: where it is absent the test
    // skips, as shared/corpora/README.md says.
    let Some((dir, vault, state)) = common::corpus_vault(&["til", "dendron-site"]) else {
        return;
    };
    let Some(bin) = common::tools::rg() else {
        return;
    };
    let s = TestServer::start_in(dir, vault, state, |c| c.rate_limit_read_per_minute = 0).await;
    let total = s.get_json("/v1/notes?page_size=1", 200).await["coverage"]["notes_total"]
        .as_u64()
        .unwrap();
    assert!(total > 2500, "the slice has {total} notes");
    for (pattern, extra, flags) in [
        ("git", "", &[][..]),
        (r"^\s*- \[[ x]\]", "", &[]),
        (r"https?://[^ )]+", "", &[]),
        ("Dendron", "&case=insensitive", &["-i"]),
        ("```", "&literal=true", &["-F"]),
    ] {
        let want = rg(&bin, &s.vault, pattern, flags);
        assert!(!want.is_empty(), "{pattern:?} finds something");
        let (got, _) = grep_all(&s, &q(pattern, extra), 1000).await;
        let extra: Vec<_> = got.difference(&want).take(5).collect();
        let missing: Vec<_> = want.difference(&got).take(5).collect();
        assert_eq!(
            got, want,
            "{pattern:?}: extra {extra:?} missing {missing:?}"
        );
    }
}

#[tokio::test]
async fn pages_of_one_line_add_up_to_the_whole() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let (all, cov) = grep_all(&s, &q("roadmap", ""), 1000).await;
    let (paged, _) = grep_all(&s, &q("roadmap", ""), 1).await;
    assert!(all.len() > 5);
    assert_eq!(all, paged);
    assert_eq!(cov["notes_total"], cov["notes_searched"]);
    assert_eq!(cov["notes"][0], "Private notes were not searched");
    // A token is bound to its query: another pattern, or other flags, refuse it.
    let body = s
        .get_json(&format!("/v1/grep?{}&page_size=1", q("roadmap", "")), 200)
        .await;
    let token = body["next_page_token"].as_str().unwrap();
    s.get_error(
        &format!("/v1/grep?{}&page_token={token}", q("planning", "")),
        400,
        "VALIDATION_FAILED",
    )
    .await;
    s.get_error(
        &format!(
            "/v1/grep?{}&page_token={token}",
            q("roadmap", "&case=insensitive")
        ),
        400,
        "VALIDATION_FAILED",
    )
    .await;
    let mut tampered = token.to_string().into_bytes();
    tampered[3] ^= 1;
    let tampered = String::from_utf8(tampered).unwrap();
    let e = s
        .get_error(
            &format!("/v1/grep?{}&page_token={tampered}", q("roadmap", "")),
            400,
            "VALIDATION_FAILED",
        )
        .await;
    assert!(e["message"].as_str().unwrap().contains("page_token"), "{e}");
}

#[tokio::test]
async fn grep_sees_writes_at_once_and_honours_filters() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let res = s
        .client
        .post(s.url("/v1/notes"))
        .header("Idempotency-Key", "grep-fresh-1")
        .json(&serde_json::json!({"slug": "inbox/fresh", "content": "# Fresh\nquux-marker here\n"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let body = s
        .get_json(&format!("/v1/grep?{}", q("quux-marker", "")), 200)
        .await;
    assert_eq!(body["results"][0]["slug"], "inbox/fresh");
    assert_eq!(body["results"][0]["lines"][0]["n"], 2);
    // The filter narrows the notes searched.
    let body = s
        .get_json(
            &format!(
                "/v1/grep?{}&filter=folder%20%3D%20%22daily%22",
                q("roadmap", "")
            ),
            200,
        )
        .await;
    for r in body["results"].as_array().unwrap() {
        assert!(r["slug"].as_str().unwrap().starts_with("daily/"), "{r}");
    }
    // An external edit is there as soon as the watcher has it (or a read catches it).
    std::fs::write(s.vault.join("inbox/fresh.md"), "# Fresh\nchanged-marker\n").unwrap();
    common::eventually("the edit becomes greppable", || async {
        let body = s
            .get_json(&format!("/v1/grep?{}", q("changed-marker", "")), 200)
            .await;
        body["results"].as_array().unwrap().len() == 1
    })
    .await;
}

#[tokio::test]
async fn bad_patterns_and_parameters_are_clear_errors() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let before = common::snapshot(&s.vault);
    let long = format!("/v1/grep?pattern={}", "a".repeat(1001));
    // (path, reason, the field named; "" for none)
    #[rustfmt::skip]
    let cases = [
        ("/v1/grep", "VALIDATION_FAILED", "pattern"),
        ("/v1/grep?pattern=", "VALIDATION_FAILED", "pattern"),
        ("/v1/grep?pattern=(unclosed", "VALIDATION_FAILED", "pattern"),
        ("/v1/grep?pattern=a%5Cnb", "VALIDATION_FAILED", "pattern"),
        ("/v1/grep?pattern=(%5Cw%7B100%7D)%7B100%7D", "VALIDATION_FAILED", "pattern"),
        ("/v1/grep?pattern=x&case=upper", "VALIDATION_FAILED", "case"),
        ("/v1/grep?pattern=x&literal=yes", "VALIDATION_FAILED", "literal"),
        ("/v1/grep?pattern=x&page_size=0", "VALIDATION_FAILED", "page_size"),
        ("/v1/grep?pattern=x&page_size=1001", "VALIDATION_FAILED", "page_size"),
        ("/v1/grep?pattern=x&page_token=garbage", "VALIDATION_FAILED", "page_token"),
        ("/v1/grep?pattern=x&nope=1", "VALIDATION_FAILED", "nope"),
        ("/v1/grep?pattern=x&filter=nope%3D1", "INVALID_FILTER", ""),
        (long.as_str(), "VALIDATION_FAILED", ""),
    ];
    for (path, reason, field) in cases {
        let e = s.get_error(path, 400, reason).await;
        if !field.is_empty() {
            assert_eq!(common::violated_field(&e), field, "{path}: {e}");
        }
    }
    // Zero matches is an answer, with coverage.
    let body = s.get_json("/v1/grep?pattern=zzzz-nothing", 200).await;
    assert_eq!(body["results"].as_array().unwrap().len(), 0);
    assert_eq!(body["coverage"]["notes_matched"], 0);
    assert!(body["coverage"]["notes_searched"].as_u64().unwrap() > 0);
    assert_eq!(common::snapshot(&s.vault), before, "nothing written");
}

/// A grep that runs out of time answers what it found, says how much it searched and
/// that it stopped, and is not cached: the next request searches again, in full. (The
/// route's bound is 10 s; the domain call takes the bound as a parameter.)
#[tokio::test]
async fn a_grep_out_of_time_says_how_far_it_got() {
    use notevault::index::grep::{Case, Pattern};
    use notevault::queries::search::{grep, GrepRequest};
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let request = |timeout| GrepRequest {
        pattern: Pattern {
            pattern: "the".into(),
            literal: true,
            case: Case::Insensitive,
            word: false,
        },
        filter: None,
        cursor: None,
        page_size: 1000,
        timeout,
    };
    let stopped = grep(&s.svc, &request(std::time::Duration::ZERO)).unwrap();
    let total = stopped.coverage.total;
    assert!(total > 10, "{total}");
    assert!(stopped.coverage.truncated);
    assert!(stopped.coverage.searched < total);
    assert!(
        stopped
            .coverage
            .remarks
            .iter()
            .any(|r| r.starts_with("grep stopped after 0 ms")
                && r.contains(&format!("{} of", stopped.coverage.searched))),
        "{:?}",
        stopped.coverage.remarks
    );
    let full = grep(&s.svc, &request(std::time::Duration::from_secs(10))).unwrap();
    assert!(!full.coverage.truncated);
    assert!(full.coverage.remarks.iter().all(|r| !r.contains("stopped")));
    assert!(full.page.files.len() > stopped.page.files.len());
}
