//! GET /v1/search: relevance, phrases, prefixes, CJK, fields, filters, order, paging,
//! read-your-writes with `min_seq`, coverage, the index across restarts, bad input.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{Mode, TestServer};
use reqwest::Method;
use serde_json::{json, Value};

fn write(vault: &Path, rel: &str, text: &str) {
    let path = vault.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A small vault made for ranking questions.
fn corpus(vault: &Path) {
    write(
        vault,
        "gardening.md",
        "# Gardening\n\nSoil, seeds and patience.\n",
    );
    write(
        vault,
        "journal/week.md",
        &format!(
            "# A week\n\n{}\nOn Sunday I spent an hour gardening with the neighbours.\n{}",
            "Work, meetings, errands and cooking.\n".repeat(20),
            "More notes about the week.\n".repeat(10)
        ),
    );
    write(
        vault,
        "fox-a.md",
        "The quick brown fox jumps over the lazy dog.\n",
    );
    write(vault, "fox-b.md", "Brown is the dog; quick is the fox.\n");
    write(
        vault,
        "jp/会議.md",
        "---\ntags: [meeting]\n---\n今日は東京で会議がありました。\n",
    );
    write(vault, "zh/出差.md", "我们明天去北京开会。\n");
    write(vault, "ko/회의.md", "내일 서울에서 회의가 있습니다.\n");
    write(
        vault,
        "projects/solar.md",
        "---\ntitle: Solar panels\ntags: [project/active, energy]\nstatus: draft\nowner: Ada Lovelace\n---\nInverters and batteries.\n\n## Procurement\n\nAsk three suppliers.\n",
    );
    write(
        vault,
        "projects/wind.md",
        "---\ntags: [project/done, energy]\nstatus: done\n---\n# Wind turbine\nA turbine on the barn. #hashtag-not-a-tag\n",
    );
}

async fn start(mode: Mode) -> TestServer {
    let (dir, vault, state) = common::temp_vault(None);
    corpus(&vault);
    TestServer::start_in_as(mode, dir, vault, state, |c| {
        c.rate_limit_read_per_minute = 0
    })
    .await
}

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

async fn search(s: &TestServer, q: &str, extra: &str) -> Value {
    s.get_json(&format!("/v1/search?q={}{extra}", enc(q)), 200)
        .await
}

fn slugs(body: &Value) -> Vec<String> {
    body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["slug"].as_str().unwrap().to_string())
        .collect()
}

/// Wait until the index has caught up with every change recorded so far.
async fn settled(s: &TestServer) {
    settled_within(s, Duration::from_secs(20)).await;
}

/// [`settled`], waiting up to `limit`.
async fn settled_within(s: &TestServer, limit: Duration) {
    common::eventually_within(limit, "the index catches up", || async {
        let st = s.get_json("/v1/index-status", 200).await;
        st["indexed_seq"] == st["committed_seq"] && st["search_index"]["not_yet_indexed"] == 0
    })
    .await;
}

async fn a_title_match_outranks_a_body_mention_and_says_where_it_matched(mode: Mode) {
    let s = start(mode).await;
    settled(&s).await;
    let body = search(&s, "gardening", "").await;
    assert_eq!(slugs(&body), ["gardening", "journal/week"]);
    let top = &body["results"][0];
    assert!(
        top["matched_fields"]
            .as_array()
            .unwrap()
            .contains(&json!("title")),
        "{top}"
    );
    let second = &body["results"][1];
    assert_eq!(second["matched_fields"], json!(["body"]));
    assert_eq!(second["lines"], json!([24]));
    assert_eq!(second["snippet"]["line"], 24);
    assert_eq!(
        second["snippet"]["text"],
        "On Sunday I spent an hour <mark>gardening</mark> with the neighbours."
    );
    assert!(top["score"].as_f64().unwrap() > second["score"].as_f64().unwrap());
    for r in body["results"].as_array().unwrap() {
        assert!(
            r.get("content").is_none() && r.get("lines_text").is_none(),
            "never a body"
        );
        for field in [
            "note_id",
            "slug",
            "title",
            "status",
            "visibility",
            "version_id",
            "content_hash",
            "observed_at",
        ] {
            assert!(r[field].is_string(), "{field} in {r}");
        }
    }
}

async fn phrases_prefixes_exclusions_alternatives_and_fields(mode: Mode) {
    let s = start(mode).await;
    settled(&s).await;
    // Both notes have the words; only one has them in this order.
    let mut both = slugs(&search(&s, "quick brown", "").await);
    both.sort();
    assert_eq!(both, ["fox-a", "fox-b"]);
    assert_eq!(slugs(&search(&s, "\"quick brown\"", "").await), ["fox-a"]);
    assert_eq!(slugs(&search(&s, "garden*", "").await).len(), 2);
    assert_eq!(slugs(&search(&s, "fox -lazy", "").await), ["fox-b"]);
    let mut alt = slugs(&search(&s, "turbine OR inverters", "").await);
    alt.sort();
    assert_eq!(alt, ["projects/solar", "projects/wind"]);
    // Fields: headings, tags, frontmatter properties, path.
    assert_eq!(
        slugs(&search(&s, "headings:procurement", "").await),
        ["projects/solar"]
    );
    assert!(slugs(&search(&s, "body:procurement", "").await) == ["projects/solar"]);
    assert_eq!(
        slugs(&search(&s, "properties:lovelace", "").await),
        ["projects/solar"]
    );
    let energy = search(&s, "tags:energy", "").await;
    assert_eq!(energy["coverage"]["notes_matched"], 2);
    assert_eq!(
        slugs(&search(&s, "path:journal", "").await),
        ["journal/week"]
    );
    // A body #hashtag is text, not a tag.
    assert!(slugs(&search(&s, "tags:hashtag", "").await).is_empty());
    // Zero hits is an answer with coverage.
    let none = search(&s, "xylophone", "").await;
    assert_eq!(none["results"], json!([]));
    assert_eq!(none["coverage"]["notes_matched"], 0);
    assert_eq!(
        none["coverage"]["notes"][0],
        "Private notes were not searched"
    );
}

async fn words_inside_sentences_without_spaces_are_found(mode: Mode) {
    let s = start(mode).await;
    settled(&s).await;
    assert_eq!(slugs(&search(&s, "東京", "").await), ["jp/会議"]);
    assert_eq!(slugs(&search(&s, "会議", "").await), ["jp/会議"]);
    assert_eq!(slugs(&search(&s, "北京", "").await), ["zh/出差"]);
    assert_eq!(slugs(&search(&s, "서울에서", "").await), ["ko/회의"]);
    // Characters of the sentence that are not adjacent are not a word.
    assert!(slugs(&search(&s, "京会", "").await).is_empty());
    assert!(slugs(&search(&s, "京都", "").await).is_empty());
    let hit = &search(&s, "東京", "").await["results"][0];
    assert_eq!(hit["lines"], json!([4]));
    assert_eq!(
        hit["snippet"]["text"],
        "今日は<mark>東京</mark>で会議がありました。"
    );
}

async fn filters_orders_and_pages(mode: Mode) {
    let s = start(mode).await;
    settled(&s).await;
    let body = search(&s, "energy", &format!("&filter={}", enc("status = draft"))).await;
    assert_eq!(slugs(&body), ["projects/solar"]);
    assert_eq!(body["coverage"]["notes_matched"], 1);
    let body = search(
        &s,
        "energy",
        &format!(
            "&filter={}",
            enc("folder = \"projects\" AND tags:project/done")
        ),
    )
    .await;
    assert_eq!(slugs(&body), ["projects/wind"]);
    let body = search(&s, "energy", "&order_by=slug%20desc").await;
    assert_eq!(slugs(&body), ["projects/wind", "projects/solar"]);
    // Paging one at a time gives every result once, in the order of one page.
    let all = slugs(&search(&s, "the", "&page_size=100").await);
    assert!(all.len() >= 3);
    let mut paged = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let extra = match &token {
            Some(t) => format!("&page_size=1&page_token={t}"),
            None => "&page_size=1".to_string(),
        };
        let body = search(&s, "the", &extra).await;
        paged.extend(slugs(&body));
        assert_eq!(body["coverage"]["notes_matched"], all.len());
        match body["next_page_token"].as_str() {
            Some(t) => {
                assert_eq!(body["coverage"]["truncated"], true);
                token = Some(t.to_string());
            }
            None => break,
        }
    }
    assert_eq!(paged, all);
}

async fn min_seq_reads_your_own_writes_and_every_change_reaches_the_index(mode: Mode) {
    let s = start(mode).await;
    // Each write, then a search with its receipt's committed_seq: the index has it.
    let create =
        json!({"slug": "inbox/new", "content": "# New\nflibbertigibbet\n", "agent_id": "t"});
    let rename = json!({"name": "renamed"});
    #[rustfmt::skip]
    let writes = [
        (Method::POST, "/v1/notes", Some(create), 201, vec!["inbox/new"]),
        // Rename: found under the new slug, not the old.
        (Method::POST, "/v1/notes/inbox%2Fnew:rename", Some(rename), 200, vec!["inbox/renamed"]),
        // Delete: gone.
        (Method::DELETE, "/v1/notes/inbox%2Frenamed", None, 200, vec![]),
    ];
    for (i, (method, path, body, status, want)) in writes.into_iter().enumerate() {
        let key = format!("k{}", i + 1);
        let receipt = s.call(method, path, Some(&key), body, status).await;
        let seq = receipt["committed_seq"].as_i64().unwrap();
        let found = search(&s, "flibbertigibbet", &format!("&min_seq={seq}")).await;
        assert_eq!(slugs(&found), want, "{path}");
        assert!(
            found["coverage"]["indexed_seq"].as_i64().unwrap() >= seq,
            "{path}"
        );
    }
    // Writes in a row are made searchable together (at most every 50 ms): a search
    // with the last receipt's seq finds every one of them, and so, once the index has
    // caught up, does one without.
    for burst in ["min_seq", "caught up"] {
        let mut seq = 0;
        for i in 0..25 {
            let key = format!("{}-{i}", burst.replace(' ', "-"));
            let body = json!({"slug": format!("burst/{key}"), "content": "snollygoster\n", "agent_id": "t"});
            let receipt = s
                .call(Method::POST, "/v1/notes", Some(&key), Some(body), 201)
                .await;
            seq = receipt["committed_seq"].as_i64().unwrap();
        }
        let found = if burst == "min_seq" {
            search(&s, "snollygoster", &format!("&min_seq={seq}&page_size=100")).await
        } else {
            common::eventually("the burst reaches the index", || async {
                let st = s.get_json("/v1/index-status", 200).await;
                st["indexed_seq"].as_i64().unwrap() >= seq
            })
            .await;
            search(&s, "snollygoster", "&page_size=100").await
        };
        let want = if burst == "min_seq" { 25 } else { 50 };
        assert_eq!(slugs(&found).len(), want, "{burst}: {found}");
    }
    // An editor's change on disk reaches the index through the watcher (hosted mode has
    // no folder, so no editor).
    let local = s.mode == Mode::Local;
    if local {
        write(
            &s.vault,
            "fox-b.md",
            "Nothing about animals; only quasar.\n",
        );
        common::eventually_within(
            Duration::from_secs(20),
            "the external edit becomes searchable",
            || async { slugs(&search(&s, "quasar", "").await) == ["fox-b"] },
        )
        .await;
        settled(&s).await;
        assert_eq!(
            slugs(&search(&s, "\"quick is the fox\"", "").await),
            Vec::<String>::new()
        );
    }
    // Once writes pause, the in-memory changes go to the index on disk; answers stay the
    // same. (Hosted mode's index on disk is a cache of the database, written a minute
    // after writes pause: `index::writer::tests`.)
    if local {
        let before = s.get_json("/v1/index-status", 200).await["search_index"]["commits"]
            .as_u64()
            .unwrap();
        common::eventually("the overlay goes to disk", || async {
            let st = s.get_json("/v1/index-status", 200).await;
            st["search_index"]["commits"].as_u64().unwrap() > before
        })
        .await;
        assert_eq!(slugs(&search(&s, "quasar", "").await), ["fox-b"]);
    }
    assert!(slugs(&search(&s, "flibbertigibbet", "").await).is_empty());
    assert_eq!(slugs(&search(&s, "lazy", "").await), ["fox-a"]);
}

async fn a_first_start_leaves_one_segment_and_every_note_searchable(mode: Mode) {
    let (dir, vault, state) = common::temp_vault(None);
    // Fewer than the large start-up writer's threshold: one writer thread, one segment
    // (the merge of several: `index::writer::tests`).
    for i in 0..600 {
        write(
            &vault,
            &format!("many/n{i}.md"),
            &format!("# Note {i}\nplentiful words number{i}\n"),
        );
    }
    let s = TestServer::start_in_as(mode, dir, vault, state, |c| {
        c.rate_limit_read_per_minute = 0
    })
    .await;
    // (Before any write: the overlay's flush to disk adds a segment again.)
    // `merging` stays true until the merge is done: then there is one segment.
    common::eventually("the index's segments are merged", || async {
        let st = s.get_json("/v1/index-status", 200).await;
        st["search_index"]["merging"] == false && st["search_index"]["not_yet_indexed"] == 0
    })
    .await;
    let st = s.get_json("/v1/index-status", 200).await;
    assert_eq!(st["search_index"]["segments"], 1, "{st}");
    let body = json!({"slug": "many/late", "content": "plentiful latecomer\n", "agent_id": "t"});
    let receipt = s
        .call(Method::POST, "/v1/notes", Some("late"), Some(body), 201)
        .await;
    let seq = receipt["committed_seq"].as_i64().unwrap();
    let found = search(&s, "latecomer", &format!("&min_seq={seq}")).await;
    assert_eq!(slugs(&found), ["many/late"]);
    assert_eq!(slugs(&search(&s, "number599", "").await), ["many/n599"]);
    let all = search(&s, "plentiful", "&page_size=1").await;
    assert_eq!(all["coverage"]["notes_matched"], 601, "{all}");
}

async fn coverage_counts_match_the_folder(mode: Mode) {
    let (dir, vault, state) = common::temp_vault(Some("fixtures/edge"));
    let s = TestServer::start_in_as(mode, dir, vault, state, |_| {}).await;
    settled(&s).await;
    let files = common::temp_list(&s.vault).len();
    let body = search(&s, "title", "").await;
    let cov = &body["coverage"];
    // Every markdown file outside the skipped folders, plus the symlink that stays inside.
    assert_eq!(
        cov["notes_total"].as_u64().unwrap() as usize,
        files + 1,
        "{cov}"
    );
    assert_eq!(cov["notes_searched"], cov["notes_total"]);
    assert_eq!(
        cov["excluded_by_reason"]["unreadable"],
        cov["excluded_count"]
    );
    let excluded: Vec<&str> = cov["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    if s.mode == Mode::Local {
        // A symlink leaving the folder; hosted mode has no folder (nothing was imported).
        assert!(excluded.contains(&"link-outside.md"), "{cov}");
    }
    assert_eq!(cov["indexed_seq"], cov["committed_seq"]);
    assert_eq!(cov["excluded_by_reason"]["private"], 0);
}

/// One start of the daemon on the state of the one before: what happens to its files
/// while it is stopped, then what the index status and a few searches answer.
struct Start {
    name: &'static str,
    meanwhile: fn(vault: &Path, state: &Path),
    /// `search_index.rebuilt` names this reason (`None`: the index was reused).
    rebuilt: Option<&'static str>,
    /// Counters of `search_index` and their values.
    counts: &'static [(&'static str, u64)],
    /// Queries and the slugs they find.
    finds: &'static [(&'static str, &'static [&'static str])],
}

const STARTS: &[Start] = &[
    Start {
        name: "the first start builds the index",
        meanwhile: |_, _| {},
        rebuilt: Some("no index yet"),
        counts: &[("synced_notes", 9)],
        finds: &[],
    },
    Start {
        name: "a plain restart reuses it and syncs only the note edited while stopped",
        meanwhile: |vault, _| write(vault, "fox-a.md", "The slow red fox.\n"),
        rebuilt: None,
        counts: &[("synced_notes", 1)],
        finds: &[("slow red", &["fox-a"]), ("lazy", &[])],
    },
    Start {
        name: "a corrupt index is rebuilt",
        meanwhile: |_, state| std::fs::write(state.join("index/meta.json"), "{ not json").unwrap(),
        rebuilt: Some("corrupt"),
        counts: &[],
        finds: &[("slow red", &["fox-a"])],
    },
    Start {
        name: "an index of an older schema version is rebuilt",
        meanwhile: |_, state| {
            std::fs::write(state.join("index/notevault-schema-version"), "0").unwrap()
        },
        rebuilt: Some("schema version 0"),
        counts: &[("documents", 9)],
        finds: &[],
    },
    Start {
        name: "a missing index is rebuilt",
        meanwhile: |_, state| std::fs::remove_dir_all(state.join("index")).unwrap(),
        rebuilt: Some("no index yet"),
        counts: &[],
        finds: &[("turbine", &["projects/wind"])],
    },
];

#[tokio::test]
async fn the_index_is_reused_synced_and_rebuilt_when_broken() {
    let (dir, vault, state) = common::temp_vault(None);
    corpus(&vault);
    let mut folders = Some((dir, vault, state));
    let mut running: Option<TestServer> = None;
    for start in STARTS {
        let (dir, vault, state) = match running.take() {
            Some(s) => s.stop().await,
            None => folders.take().unwrap(),
        };
        (start.meanwhile)(&vault, &state);
        let s = TestServer::start_in(dir, vault, state, |c| c.rate_limit_read_per_minute = 0).await;
        settled(&s).await;
        let name = start.name;
        let status = s.get_json("/v1/index-status", 200).await;
        let st = &status["search_index"];
        match start.rebuilt {
            None => assert_eq!(st["rebuilt"], Value::Null, "{name}: {st}"),
            Some(why) => assert!(
                st["rebuilt"].as_str().is_some_and(|r| r.contains(why)),
                "{name}: {st}"
            ),
        }
        for (counter, value) in start.counts {
            assert_eq!(st[counter], *value, "{name}: {counter} in {st}");
        }
        for (query, want) in start.finds {
            assert_eq!(
                slugs(&search(&s, query, "").await),
                *want,
                "{name}: {query}"
            );
        }
        running = Some(s);
    }
}

async fn bad_queries_and_parameters_are_clear_errors(mode: Mode) {
    let s = start(mode).await;
    let before = common::snapshot(&s.vault);
    let long = "a ".repeat(600);
    for (path, field) in [
        ("/v1/search".to_string(), "q"),
        ("/v1/search?q=".to_string(), "q"),
        ("/v1/search?q=%20%20".to_string(), "q"),
        (format!("/v1/search?q={}", enc(&long)), "q"),
        ("/v1/search?q=%22open".to_string(), "q"),
        ("/v1/search?q=-only".to_string(), "q"),
        ("/v1/search?q=a&query=b".to_string(), "query"),
        ("/v1/search?q=a&page_size=0".to_string(), "page_size"),
        ("/v1/search?q=a&page_size=101".to_string(), "page_size"),
        ("/v1/search?q=a&page_size=x".to_string(), "page_size"),
        ("/v1/search?q=a&page_token=nope".to_string(), "page_token"),
        ("/v1/search?q=a&min_seq=-1".to_string(), "min_seq"),
        ("/v1/search?q=a&min_seq=999999".to_string(), "min_seq"),
        ("/v1/search?q=a&mode=semantic".to_string(), "mode"),
        ("/v1/search?q=a&order_by=color".to_string(), "order_by"),
        (
            "/v1/search?q=a&order_by=score%20sideways".to_string(),
            "order_by",
        ),
        ("/v1/search?q=a&bogus=1".to_string(), "bogus"),
    ] {
        let e = s.get_error(&path, 400, "VALIDATION_FAILED").await;
        assert_eq!(common::violated_field(&e), field, "{path}: {e}");
    }
    // The query's own mistakes say where they are.
    for (path, reason, says) in [
        (
            "/v1/search?q=idea%20%22open".to_string(),
            "VALIDATION_FAILED",
            "position 5",
        ),
        (
            format!("/v1/search?q=a&filter={}", enc("tags:x AND (")),
            "INVALID_FILTER",
            "position",
        ),
        (
            format!("/v1/search?q=a&filter={}", enc("colour = red")),
            "INVALID_FILTER",
            "",
        ),
    ] {
        let e = s.get_error(&path, 400, reason).await;
        assert!(e["message"].as_str().unwrap().contains(says), "{path}: {e}");
    }
    // A token of another query, or a tampered one, is refused.
    settled(&s).await;
    let body = search(&s, "the", "&page_size=1").await;
    let token = body["next_page_token"].as_str().unwrap().to_string();
    let e = s
        .get_error(
            &format!("/v1/search?q=fox&page_size=1&page_token={token}"),
            400,
            "VALIDATION_FAILED",
        )
        .await;
    assert!(
        e["message"].as_str().unwrap().contains("another query"),
        "{e}"
    );
    let mut t = token.into_bytes();
    let last = t.len() - 2;
    t[last] = if t[last] == b'A' { b'B' } else { b'A' };
    let t = String::from_utf8(t).unwrap();
    s.get_error(
        &format!("/v1/search?q=the&page_size=1&page_token={t}"),
        400,
        "VALIDATION_FAILED",
    )
    .await;
    assert_eq!(
        common::snapshot(&s.vault),
        before,
        "a search never writes the vault"
    );
}

async fn tags_roll_up_frontmatter_tags_only(mode: Mode) {
    let s = start(mode).await;
    let body = s.get_json("/v1/tags", 200).await;
    let tags: Vec<(String, u64, u64)> = body["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tag"].as_str().unwrap().to_string(),
                t["count"].as_u64().unwrap(),
                t["direct_count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tags,
        [
            ("energy".to_string(), 2, 2),
            ("meeting".to_string(), 1, 1),
            ("project".to_string(), 2, 0),
            ("project/active".to_string(), 1, 1),
            ("project/done".to_string(), 1, 1),
        ]
    );
    assert_eq!(body["coverage"]["notes_matched"], 9);
    let body = s
        .get_json("/v1/tags?order_by=count%20desc&page_size=2", 200)
        .await;
    assert_eq!(body["tags"][0]["tag"], "energy");
    assert_eq!(body["tags"][1]["tag"], "project");
    let token = body["next_page_token"].as_str().unwrap();
    let next = s
        .get_json(
            &format!("/v1/tags?order_by=count%20desc&page_size=2&page_token={token}"),
            200,
        )
        .await;
    assert_eq!(next["tags"][0]["tag"], "meeting");
    let body = s
        .get_json(&format!("/v1/tags?filter={}", enc("status = done")), 200)
        .await;
    assert_eq!(body["tags"].as_array().unwrap().len(), 3, "{body}");
    s.get_error("/v1/tags?order_by=size", 400, "VALIDATION_FAILED")
        .await;
    s.get_error("/v1/tags?page_size=1001", 400, "VALIDATION_FAILED")
        .await;

    // The fixture with every tag style, and hashtags in the body.
    let edge = TestServer::start_as(mode, Some("fixtures/edge"), |_| {}).await;
    let body = edge.get_json("/v1/tags?page_size=1000", 200).await;
    let names: Vec<&str> = body["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tag"].as_str().unwrap())
        .collect();
    let hashtags = std::fs::read_to_string(edge.vault.join("tags-styles/hashtags.md")).unwrap();
    for word in hashtags
        .split_whitespace()
        .filter_map(|w| w.strip_prefix('#'))
    {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric());
        if !word.is_empty() {
            assert!(
                !names.contains(&word),
                "hashtag {word} counted as a tag: {names:?}"
            );
        }
    }
}

async fn properties_aggregate_and_vault_summary(mode: Mode) {
    let s = start(mode).await;
    let post = |body: Value| {
        s.client
            .post(s.url("/v1/properties:aggregate"))
            .json(&body)
            .send()
    };
    let res = post(json!({"key": "status"})).await.unwrap();
    let body = common::res_json(res, 200, "aggregate").await;
    assert_eq!(
        body["groups"],
        json!([{"value": "done", "count": 1}, {"value": "draft", "count": 1}])
    );
    assert_eq!(body["notes_with_key"], 2);
    assert_eq!(body["notes_without_key"], 7);
    let res = post(json!({"key": "tags", "filter": "folder = \"projects\""}))
        .await
        .unwrap();
    let body = common::res_json(res, 200, "aggregate tags").await;
    assert_eq!(body["groups"][0], json!({"value": "energy", "count": 2}));
    for bad in [
        json!({}),
        json!({"key": ""}),
        json!({"key": "a", "limit": 0}),
        json!({"key": "a", "nope": 1}),
    ] {
        let res = post(bad.clone()).await.unwrap();
        let e = common::res_json(res, 400, "bad aggregate").await;
        common::assert_envelope(&e, 400, "VALIDATION_FAILED");
    }
    let res = post(json!({"key": "a", "filter": "nope = 1"}))
        .await
        .unwrap();
    common::assert_envelope(
        &common::res_json(res, 400, "bad filter").await,
        400,
        "INVALID_FILTER",
    );

    let v = s.get_json("/v1/vault", 200).await;
    assert_eq!(v["notes"], 9);
    assert_eq!(v["tags"], 4);
    assert_eq!(v["folders"], 5);
    assert_eq!(v["write_policy"], "auto_apply");
    assert_eq!(v["e2ee"]["enabled"], false);
    let bytes: u64 = common::snapshot(&s.vault)
        .values()
        .map(|(b, _)| b.len() as u64)
        .sum();
    assert_eq!(v["bytes"], bytes);
}

async fn a_note_too_large_to_search_is_listed_readable_and_reported(mode: Mode) {
    let (dir, vault, state) = common::temp_vault(None);
    write(&vault, "small.md", "# Small\nneedle here\n");
    let big = format!("# Big\nneedle\n{}", "filler line of text\n".repeat(600_000));
    assert!(big.len() > 10 * 1024 * 1024);
    write(&vault, "big.md", &big);
    let s = TestServer::start_in_as(mode, dir, vault, state, |_| {}).await;
    settled(&s).await;
    for path in ["/v1/search?q=needle", "/v1/grep?pattern=needle"] {
        let body = s.get_json(path, 200).await;
        let cov = &body["coverage"];
        assert_eq!(
            body["results"].as_array().unwrap().len(),
            1,
            "{path}: {body}"
        );
        assert_eq!(body["results"][0]["slug"], "small");
        assert_eq!(cov["notes_total"], 2);
        assert_eq!(cov["notes_searched"], 1, "{path}: {cov}");
        assert_eq!(cov["excluded_by_reason"]["too_large"], 1);
        assert_eq!(cov["excluded"][0]["path"], "big.md");
        assert!(cov["excluded"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("too large"));
    }
    // Still a note: listed and readable by lines.
    let list = s.get_json("/v1/notes", 200).await;
    assert_eq!(list["coverage"]["notes_total"], 2);
    let read = s.get_json("/v1/notes/big?limit=2", 200).await;
    assert_eq!(read["lines"]["items"][1]["text"], "needle");
}

/// Paging through a real documentation set gives each result once, in the order of one
/// long page: a note's score does not depend on the page size. (The ranking used to be a
/// pruned top-k whose sum of a note's field scores came out in another order than the
/// full one's, so near-equal notes swapped between a page of 3 and a page of 6: paging
/// `module` here showed one note twice and skipped another.) Skipped where the shared
/// corpus is absent, as `tests/it/grep.rs` does.
async fn paging_through_near_equal_scores_repeats_and_skips_nothing(mode: Mode) {
    let Some((dir, vault, state)) = common::corpus_vault(&["PowerShell-Docs"]) else {
        return;
    };
    let s = TestServer::start_in_as(mode, dir, vault, state, |c| {
        c.rate_limit_read_per_minute = 0
    })
    .await;
    // 3,112 notes, 39 MB, indexed by a debug build beside the other tests: ~4 s alone.
    settled_within(&s, Duration::from_secs(180)).await;
    for q in ["parameter", "process", "module", "object"] {
        let whole = search(&s, q, "&page_size=45").await;
        let want = slugs(&whole);
        assert_eq!(
            want.len(),
            45,
            "{q}: {} notes match",
            whole["coverage"]["notes_matched"]
        );
        let mut paged = Vec::new();
        let mut token: Option<String> = None;
        while paged.len() < want.len() {
            let extra = match &token {
                Some(t) => format!("&page_size=3&page_token={t}"),
                None => "&page_size=3".to_string(),
            };
            let body = search(&s, q, &extra).await;
            paged.extend(slugs(&body));
            token = Some(body["next_page_token"].as_str().unwrap().to_string());
        }
        assert_eq!(paged, want, "{q}: pages of 3 against one page of 45");
    }
}

crate::test_in_both_modes!(
    a_title_match_outranks_a_body_mention_and_says_where_it_matched,
    phrases_prefixes_exclusions_alternatives_and_fields,
    words_inside_sentences_without_spaces_are_found,
    filters_orders_and_pages,
    min_seq_reads_your_own_writes_and_every_change_reaches_the_index,
    a_first_start_leaves_one_segment_and_every_note_searchable,
    coverage_counts_match_the_folder,
    bad_queries_and_parameters_are_clear_errors,
    tags_roll_up_frontmatter_tags_only,
    properties_aggregate_and_vault_summary,
    a_note_too_large_to_search_is_listed_readable_and_reported,
    paging_through_near_equal_scores_repeats_and_skips_nothing,
);
