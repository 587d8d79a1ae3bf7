//! `GET /v1/folders`: the folders of the notes, and empty ones near the top, with counts
//! and paging.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::{temp_vault, TestServer};

async fn nested() -> TestServer {
    let (dir, vault, state) = temp_vault(None);
    for (path, text) in [
        ("top.md", "# Top\n"),
        ("projects/x.md", "# X\n"),
        ("projects/2027/y.md", "# Y\n"),
        ("projects/2027/z.md", "# Z\n"),
        ("archive/old/deep/w.md", "# W\n"),
        ("empty/readme.txt", "not a note\n"),
    ] {
        let file = vault.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    TestServer::start_in(dir, vault, state, |c| c.watch = false).await
}

#[tokio::test]
async fn folders_come_from_the_notes_in_them() {
    let s = nested().await;
    let body = s.get_json("/v1/folders", 200).await;
    let rows: Vec<(String, Option<String>, u64, u64, u64)> = body["folders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["parent"].as_str().map(str::to_string),
                f["depth"].as_u64().unwrap(),
                f["notes"].as_u64().unwrap(),
                f["notes_total"].as_u64().unwrap(),
            )
        })
        .collect();
    let row = |p: &str, parent: Option<&str>, d, n, t| {
        (p.to_string(), parent.map(str::to_string), d, n, t)
    };
    assert_eq!(
        rows,
        [
            row("archive", None, 1, 0, 1),
            row("archive/old", Some("archive"), 2, 0, 1),
            row("archive/old/deep", Some("archive/old"), 3, 1, 1),
            // A folder without a note (an attachment only, or nothing) is a folder too.
            row("empty", None, 1, 0, 0),
            row("projects", None, 1, 1, 3),
            row("projects/2027", Some("projects"), 2, 2, 2),
        ]
    );
    assert_eq!(body["folders"][5]["name"], "2027");
    let cov = &body["coverage"];
    assert_eq!(cov["notes_total"], 5);
    assert_eq!(cov["notes_matched"], 4);
    assert_eq!(cov["truncated"], false);
    assert!(cov["notes"][0].as_str().unwrap().contains("top two levels"));
    assert!(body["next_page_token"].is_null());

    let body = s.get_json("/v1/folders?prefix=projects", 200).await;
    assert_eq!(body["folders"].as_array().unwrap().len(), 2);
    assert_eq!(body["coverage"]["notes_matched"], 3);
    let body = s.get_json("/v1/folders?prefix=projects/", 200).await;
    assert_eq!(body["folders"][0]["path"], "projects/2027");
    assert_eq!(body["coverage"]["notes_matched"], 2);
}

#[tokio::test]
async fn folders_page_with_tokens_bound_to_their_query() {
    let s = nested().await;
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let path = match &token {
            Some(t) => format!("/v1/folders?page_size=2&page_token={t}"),
            None => "/v1/folders?page_size=2".to_string(),
        };
        let body = s.get_json(&path, 200).await;
        for f in body["folders"].as_array().unwrap() {
            seen.push(f["path"].as_str().unwrap().to_string());
        }
        assert_eq!(
            body["coverage"]["truncated"],
            body["next_page_token"].is_string()
        );
        match body["next_page_token"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 6);
    let first = s.get_json("/v1/folders?page_size=1", 200).await;
    let t = first["next_page_token"].as_str().unwrap();
    s.get_error(
        &format!("/v1/folders?prefix=projects&page_token={t}"),
        400,
        "VALIDATION_FAILED",
    )
    .await;
    s.get_error("/v1/folders?page_size=0", 400, "VALIDATION_FAILED")
        .await;
    s.get_error("/v1/folders?depth=1", 400, "VALIDATION_FAILED")
        .await;
}
