//! The read surface over HTTP: listing, line-sliced reads, raw reads, note addressing.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::{Mode, TestServer};
use serde_json::Value;

async fn lists_every_note_with_coverage_and_pages_through_them(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let md_files = walk_md(&s.vault);
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let path = match &token {
            Some(t) => format!("/v1/notes?page_size=7&page_token={t}"),
            None => "/v1/notes?page_size=7".to_string(),
        };
        let body = s.get_json(&path, 200).await;
        let cov = &body["coverage"];
        assert_eq!(cov["notes_total"], md_files.len());
        assert_eq!(cov["notes_matched"], md_files.len());
        for n in body["notes"].as_array().unwrap() {
            assert!(
                n.get("lines").is_none() && n.get("content").is_none(),
                "handles only"
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
                assert!(n[field].is_string(), "{field} in {n}");
            }
            seen.push(n["path"].as_str().unwrap().to_string());
        }
        assert_eq!(cov["truncated"], body["next_page_token"].is_string());
        match body["next_page_token"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, md_files, "the listing equals the folder");
}

async fn prefix_listing_and_tokens_bound_to_their_query(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let body = s.get_json("/v1/notes?prefix=daily/&page_size=1", 200).await;
    let daily = walk_md(&s.vault)
        .into_iter()
        .filter(|p| p.starts_with("daily/"))
        .count();
    assert_eq!(body["coverage"]["notes_matched"], daily);
    assert!(body["notes"][0]["slug"]
        .as_str()
        .unwrap()
        .starts_with("daily/"));
    let token = body["next_page_token"].as_str().unwrap().to_string();
    let err = s
        .get_error(
            &format!("/v1/notes?prefix=projects/&page_token={token}"),
            400,
            "VALIDATION_FAILED",
        )
        .await;
    assert!(err["message"].as_str().unwrap().contains("page_token"));
    let mut forged = token.clone();
    forged.insert(0, 'x');
    s.get_error(
        &format!("/v1/notes?prefix=daily/&page_token={forged}"),
        400,
        "VALIDATION_FAILED",
    )
    .await;
}

async fn aip160_filters_on_the_listing(mode: Mode) {
    let s = TestServer::start_as(mode, Some("fixtures/edge"), |_| {}).await;
    let slugs = |v: &Value| -> Vec<String> {
        v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["slug"].as_str().unwrap().to_string())
            .collect()
    };
    let alpha = s.get_json("/v1/notes?filter=tags%3Aalpha", 200).await;
    assert_eq!(
        slugs(&alpha),
        [
            "tags-styles/block",
            "tags-styles/comma",
            "tags-styles/flow",
            "tags-styles/single"
        ]
    );
    assert_eq!(alpha["coverage"]["notes_matched"], 4);
    let nested = s.get_json("/v1/notes?filter=tags%3Aproject", 200).await;
    assert_eq!(slugs(&nested), ["tags-styles/nested"]);
    let draft = s
        .get_json(
            "/v1/notes?filter=status%20%3D%20draft%20AND%20folder%3Dtitle-rules",
            200,
        )
        .await;
    assert_eq!(slugs(&draft), ["title-rules/status"]);
    let not = s
        .get_json(
            "/v1/notes?filter=NOT%20tags%3Aalpha&prefix=tags-styles/",
            200,
        )
        .await;
    assert_eq!(slugs(&not), ["tags-styles/hashtags", "tags-styles/nested"]);
    let none = s
        .get_json("/v1/notes?filter=title%3D%22no%20such%20title%22", 200)
        .await;
    assert_eq!(none["notes"], serde_json::json!([]));
    assert_eq!(none["coverage"]["notes_matched"], 0);
    // A page token is bound to its filter.
    let page = s
        .get_json("/v1/notes?filter=tags%3Aalpha&page_size=1", 200)
        .await;
    let token = page["next_page_token"].as_str().unwrap();
    s.get_error(
        &format!("/v1/notes?filter=tags%3Abeta&page_size=1&page_token={token}"),
        400,
        "VALIDATION_FAILED",
    )
    .await;
    let next = s
        .get_json(
            &format!("/v1/notes?filter=tags%3Aalpha&page_size=1&page_token={token}"),
            200,
        )
        .await;
    assert_eq!(slugs(&next), ["tags-styles/comma"]);
}

async fn line_sliced_reads_follow_the_design(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let file = std::fs::read_to_string(s.vault.join("projects/roadmap.md")).unwrap();
    let lines: Vec<&str> = file.lines().collect();
    let body = s
        .get_json("/v1/notes/projects%2Froadmap?offset=10&limit=5", 200)
        .await;
    let l = &body["lines"];
    assert_eq!(l["offset"], 10);
    assert_eq!(l["limit"], 5);
    assert_eq!(l["total"], lines.len());
    assert_eq!(l["next_offset"], 15);
    let items = l["items"].as_array().unwrap();
    assert_eq!(items.len(), 5);
    for (i, item) in items.iter().enumerate() {
        assert_eq!(item["n"], 10 + i);
        assert_eq!(item["text"], lines[9 + i]);
    }
    // The last slice ends with next_offset null.
    let last = s
        .get_json(
            &format!(
                "/v1/notes/projects/roadmap?offset={}&limit=2000",
                lines.len()
            ),
            200,
        )
        .await;
    assert_eq!(last["lines"]["next_offset"], Value::Null);
    assert_eq!(last["lines"]["items"].as_array().unwrap().len(), 1);
    // Default limit is 200.
    let d = s.get_json("/v1/notes/projects/roadmap", 200).await;
    assert_eq!(d["lines"]["limit"], 200);
    assert_eq!(d["title"], "Projects roadmap 2027");
}

async fn a_note_is_addressed_by_id_slug_raw_or_encoded_slash_spaces_and_unicode(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let by_slug = s.get_json("/v1/notes/projects/roadmap?limit=1", 200).await;
    let id = by_slug["note_id"].as_str().unwrap();
    let by_id = s.get_json(&format!("/v1/notes/{id}?limit=1"), 200).await;
    assert_eq!(by_id["slug"], "projects/roadmap");
    let encoded = s
        .get_json("/v1/notes/projects%2Froadmap?limit=1", 200)
        .await;
    assert_eq!(encoded["note_id"], by_slug["note_id"]);
    let spaced = s
        .get_json("/v1/notes/reading/Thinking%20in%20Systems?limit=1", 200)
        .await;
    assert_eq!(spaced["path"], "reading/Thinking in Systems.md");
    let unicode = s.get_json("/v1/notes/people%2FZo%C3%AB?limit=1", 200).await;
    assert_eq!(unicode["slug"], "people/Zoë");
}

async fn raw_returns_the_whole_file(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let body = s.get_json("/v1/notes/Welcome/raw", 200).await;
    let file = std::fs::read_to_string(s.vault.join("Welcome.md")).unwrap();
    assert_eq!(body["content"], file);
    assert_eq!(body["path"], "Welcome.md");
    assert_eq!(body["slug"], "Welcome");
    let hash = format!("blake3:{}", blake3::hash(file.as_bytes()).to_hex());
    assert_eq!(body["content_hash"], hash);
    let read = s.get_json("/v1/notes/Welcome?limit=1", 200).await;
    assert_eq!(read["version_id"], body["version_id"]);
}

#[tokio::test]
async fn an_edit_made_beside_the_daemon_is_read_as_a_new_version() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let before = s.get_json("/v1/notes/Inbox?limit=1", 200).await;
    std::fs::write(s.vault.join("Inbox.md"), "# Changed outside\n").unwrap();
    let after = s.get_json("/v1/notes/Inbox?limit=5", 200).await;
    assert_eq!(after["note_id"], before["note_id"]);
    assert_ne!(after["version_id"], before["version_id"]);
    assert_eq!(after["title"], "Changed outside");
    assert_eq!(after["lines"]["items"][0]["text"], "# Changed outside");
    // A file created beside the daemon is readable at once.
    std::fs::write(s.vault.join("fresh.md"), "hello\n").unwrap();
    let fresh = s.get_json("/v1/notes/fresh", 200).await;
    assert_eq!(fresh["lines"]["total"], 1);
}

async fn openapi_is_served_without_auth_and_head_works(mode: Mode) {
    let s = TestServer::start_as(mode, None, |_| {}).await;
    // Without a token, also where the harness's client sends one (hosted mode).
    let res = reqwest::get(s.url("/openapi.json")).await.unwrap();
    let doc = common::res_json(res, 200, "GET /openapi.json").await;
    assert_eq!(doc["info"]["version"], "0.1.0");
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let head = s.client.head(s.url("/v1/notes")).send().await.unwrap();
    assert_eq!(head.status(), 200);
}

/// Every `.md` file of the folder as the daemon should list it.
pub fn walk_md(root: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(root).into_iter().filter_entry(|e| {
        let n = e.file_name().to_string_lossy();
        !(e.depth() > 0 && [".notevault", ".git", ".obsidian", ".trash"].contains(&n.as_ref()))
    }) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() && entry.file_name().to_string_lossy().ends_with(".md") {
            out.push(
                entry
                    .path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    out.sort();
    out
}

async fn listing_orders_by_title_and_dates_and_pages_in_that_order(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |c| {
        c.rate_limit_read_per_minute = 0
    })
    .await;
    let all = s
        .get_json("/v1/notes?order_by=title%20desc&page_size=500", 200)
        .await;
    let titles: Vec<String> = all["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["title"].as_str().unwrap().to_lowercase())
        .collect();
    let mut sorted = titles.clone();
    sorted.sort();
    sorted.reverse();
    assert_eq!(titles, sorted);
    // Paging keeps the order, and a token is bound to it.
    let mut paged = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let path = match &token {
            Some(t) => format!("/v1/notes?order_by=title%20desc&page_size=5&page_token={t}"),
            None => "/v1/notes?order_by=title%20desc&page_size=5".to_string(),
        };
        let body = s.get_json(&path, 200).await;
        paged.extend(
            body["notes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["title"].as_str().unwrap().to_lowercase()),
        );
        match body["next_page_token"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
    }
    assert_eq!(paged, titles);
    let first = s
        .get_json("/v1/notes?order_by=updated_at&page_size=2", 200)
        .await;
    let t = first["next_page_token"].as_str().unwrap();
    s.get_error(
        &format!("/v1/notes?order_by=title&page_size=2&page_token={t}"),
        400,
        "VALIDATION_FAILED",
    )
    .await;
}

/// A read answers the kept bytes of a note only while its file's stamp (size, times,
/// inode) is the one its version was read with: a save in place of the same size, its
/// modification time put back, is still read as a new version (its change time moved),
/// with the watcher off so the read itself must catch it.
#[tokio::test]
async fn a_same_size_save_with_its_mtime_put_back_is_read_as_a_new_version() {
    let s = TestServer::start(Some("vault-example"), |c| c.watch = false).await;
    let path = s.vault.join("Inbox.md");
    let before = s.get_json("/v1/notes/Inbox?limit=500", 200).await;
    let again = s.get_json("/v1/notes/Inbox?limit=500", 200).await;
    assert_eq!(again, before, "an unchanged note reads the same");
    let old = std::fs::read(&path).unwrap();
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    let mut new = old.clone();
    let at = new.iter().position(|b| b.is_ascii_lowercase()).unwrap();
    new[at] = new[at].to_ascii_uppercase();
    {
        use std::io::{Seek, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.write_all(&new).unwrap();
        f.set_modified(mtime).unwrap();
    }
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), old.len() as u64);
    let after = s.get_json("/v1/notes/Inbox?limit=500", 200).await;
    assert_eq!(after["note_id"], before["note_id"]);
    assert_ne!(after["version_id"], before["version_id"]);
    let text: Vec<&str> = after["lines"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        text.join("\n").trim_end(),
        String::from_utf8(new).unwrap().trim_end()
    );
}

/// A read answers kept bytes after one `stat` of the note's path, without the path checks
/// a file read takes: a folder swapped for a symlink to a folder outside the vault, with a
/// file of the same name there, must not be answered from either. The stat sees another
/// file, so the read takes the checked path and refuses it; the outside file's lines never
/// reach the answer.
#[tokio::test]
async fn a_folder_swapped_for_a_symlink_outside_is_not_read_through() {
    let s = TestServer::start(Some("vault-example"), |c| c.watch = false).await;
    let folder = s.vault.join("people");
    let (note, slug) = ("marcus.md", "people/marcus");
    let before = s.get_json(&format!("/v1/notes/{slug}"), 200).await;
    assert!(!before["lines"]["items"].as_array().unwrap().is_empty());

    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join(note), "OUTSIDE SECRET\n").unwrap();
    let moved = s.vault.parent().unwrap().join("people-moved-away");
    std::fs::rename(&folder, &moved).unwrap();
    std::os::unix::fs::symlink(outside.path(), &folder).unwrap();

    let res = s.get(&format!("/v1/notes/{slug}")).await;
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap();
    assert!(
        !body.to_string().contains("OUTSIDE SECRET"),
        "the outside file was answered: {body}"
    );
    assert!(
        status == 400 || status == 404,
        "expected UNSAFE_PATH or NOTE_NOT_FOUND, got {status}: {body}"
    );
    let reason = body["reason"].as_str().unwrap();
    assert!(
        reason == "UNSAFE_PATH" || reason == "NOTE_NOT_FOUND",
        "{body}"
    );
}

crate::test_in_both_modes!(
    lists_every_note_with_coverage_and_pages_through_them,
    prefix_listing_and_tokens_bound_to_their_query,
    aip160_filters_on_the_listing,
    line_sliced_reads_follow_the_design,
    a_note_is_addressed_by_id_slug_raw_or_encoded_slash_spaces_and_unicode,
    raw_returns_the_whole_file,
    openapi_is_served_without_auth_and_head_works,
    listing_orders_by_title_and_dates_and_pages_in_that_order,
);
