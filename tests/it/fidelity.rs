//! The folder belongs to the user: scanning and reading leave every byte and mtime as it
//! was, and the edge cases of `fixtures/edge` are served as documented.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::TestServer;

#[tokio::test]
async fn scanning_and_reading_every_note_changes_no_byte_and_no_mtime() {
    let (dir, vault, _) = common::temp_vault(Some("fixtures/edge"));
    let before = common::snapshot(&vault);
    // The state dir defaults to <vault>/.notevault here, as for a user.
    let s = TestServer::start_in(dir, vault.clone(), vault.join(".notevault"), |_| {}).await;
    let list = s.get_json("/v1/notes?page_size=500", 200).await;
    for note in list["notes"].as_array().unwrap() {
        let id = note["note_id"].as_str().unwrap();
        for _ in 0..3 {
            s.get_json(&format!("/v1/notes/{id}?limit=2000"), 200).await;
            s.get_json(&format!("/v1/notes/{id}/raw"), 200).await;
        }
    }
    common::wait_history(&s.svc).await;
    assert_eq!(common::snapshot(&vault), before);
}

#[tokio::test]
async fn edge_cases_are_listed_readable_and_flagged() {
    let s = TestServer::start(Some("fixtures/edge"), |_| {}).await;
    let list = s.get_json("/v1/notes?page_size=500", 200).await;
    let slugs: Vec<&str> = list["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["slug"].as_str().unwrap())
        .collect();
    for expected in [
        "crlf",
        "bom",
        "empty",
        "frontmatter-only",
        "broken-yaml",
        "latin1",
        "big",
        "deep/a/b/c/deep note",
        "unicode/日本語のノート",
        "link-inside",
    ] {
        assert!(slugs.contains(&expected), "{expected} listed in {slugs:?}");
    }
    for ignored in ["notes", ".obsidian/workspace", ".trash/old", "link-outside"] {
        assert!(!slugs.contains(&ignored), "{ignored} must not be listed");
    }
    let excluded = list["coverage"]["excluded"].as_array().unwrap();
    assert!(
        excluded.iter().any(|e| e["path"] == "link-outside.md"),
        "{excluded:?}"
    );

    let broken = s.get_json("/v1/notes/broken-yaml?limit=1", 200).await;
    assert_eq!(broken["title"], "Broken YAML");
    assert!(broken["warnings"][0]
        .as_str()
        .unwrap()
        .contains("frontmatter"));
    assert_eq!(broken["tags"], serde_json::json!([]));

    let latin = s.get_json("/v1/notes/latin1", 200).await;
    assert!(latin["warnings"][0].as_str().unwrap().contains("UTF-8"));
    let raw = s.get_json("/v1/notes/latin1/raw", 200).await;
    assert!(raw["content"].as_str().unwrap().contains('\u{fffd}'));

    let crlf = s.get_json("/v1/notes/crlf?limit=3", 200).await;
    assert!(crlf["lines"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| !l["text"].as_str().unwrap().contains('\r')));
    assert_eq!(
        s.get_json("/v1/notes/bom?limit=1", 200).await["title"],
        "BOM note"
    );

    let empty = s.get_json("/v1/notes/empty", 200).await;
    assert_eq!(empty["lines"]["total"], 0);
    assert_eq!(empty["lines"]["next_offset"], serde_json::Value::Null);
    assert_eq!(empty["title"], "empty");

    let big = s.get_json("/v1/notes/big?offset=49990&limit=20", 200).await;
    assert_eq!(big["lines"]["total"], 50000);
    assert_eq!(big["lines"]["items"].as_array().unwrap().len(), 11);
    assert_eq!(
        big["lines"]["items"][10]["text"],
        "line 50000 of the big note"
    );

    let deep = s
        .get_json("/v1/notes/deep%2Fa%2Fb%2Fc%2Fdeep%20note?limit=1", 200)
        .await;
    assert_eq!(deep["path"], "deep/a/b/c/deep note.md");
    let jp = s.get_json("/v1/notes/unicode/%E6%97%A5%E6%9C%AC%E8%AA%9E%E3%81%AE%E3%83%8E%E3%83%BC%E3%83%88?limit=1", 200).await;
    assert_eq!(jp["slug"], "unicode/日本語のノート");

    let fm = s
        .get_json("/v1/notes/title-rules%2Ffm-title?limit=1", 200)
        .await;
    assert_eq!(fm["title"], "From Frontmatter");
    assert_eq!(
        s.get_json("/v1/notes/title-rules/h1-title?limit=1", 200)
            .await["title"],
        "From Heading"
    );
    assert_eq!(
        s.get_json("/v1/notes/title-rules/no-title?limit=1", 200)
            .await["title"],
        "no-title"
    );
    assert_eq!(
        s.get_json("/v1/notes/title-rules/status?limit=1", 200)
            .await["status"],
        "draft"
    );
}

#[tokio::test]
async fn frontmatter_tags_in_every_style_and_hashtags_are_not_tags() {
    let s = TestServer::start(Some("fixtures/edge"), |_| {}).await;
    let tags = |v: &serde_json::Value| -> Vec<String> {
        v["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        tags(&s.get_json("/v1/notes/tags-styles/flow?limit=1", 200).await),
        ["alpha", "beta"]
    );
    assert_eq!(
        tags(&s.get_json("/v1/notes/tags-styles/block?limit=1", 200).await),
        ["alpha", "gamma"]
    );
    assert_eq!(
        tags(
            &s.get_json("/v1/notes/tags-styles/single?limit=1", 200)
                .await
        ),
        ["alpha"]
    );
    assert_eq!(
        tags(&s.get_json("/v1/notes/tags-styles/comma?limit=1", 200).await),
        ["alpha", "delta"]
    );
    assert!(tags(
        &s.get_json("/v1/notes/tags-styles/hashtags?limit=1", 200)
            .await
    )
    .is_empty());
    assert_eq!(
        tags(
            &s.get_json("/v1/notes/tags-styles/nested?limit=1", 200)
                .await
        ),
        ["project/active", "project/done"]
    );
}
