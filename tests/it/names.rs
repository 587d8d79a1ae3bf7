//! Names: the API never writes a name that would reach the user's `.git`, display as
//! something else, or that history cannot keep; and a file with such a name put there by
//! hand never stops the history of the others.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::{git, res_json, TestServer};
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test]
async fn the_api_refuses_every_name_it_must_never_write() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let before = common::snapshot(&s.vault);
    let long = "a".repeat(256);
    let slugs = [
        ".GIT/x",
        ".Git/x",
        ".git/x",
        "git~1/x",
        "GIT~1/x",
        ".NOTEVAULT/x",
        ".Obsidian/x",
        ".Trash/x",
        "sub/new\nline",
        "tab\there",
        "del\u{7f}",
        "c1\u{85}",
        "invoice\u{202E}fdp.exe",
        "iso\u{2066}late",
        "mark\u{200F}",
        "..\u{200B}/x",
        "zero\u{200B}width",
        "\u{FF0E}\u{FF0E}/x",
        "\u{2025}/x",
        "\u{3000}/x",
        ".",
        "..",
        "a./x",
        "a /x",
        "x.",
        "x ",
        long.as_str(),
        // A leading `/` is absolute, never made relative (DESIGN invariant 6).
        "/tmp/escape",
        "//tmp/x",
    ];
    let creates = slugs.iter().map(|slug| {
        let what = format!("create {slug:?}");
        (
            what,
            Method::POST,
            "/v1/notes",
            json!({"slug": slug, "content": "x\n"}),
        )
    });
    // Moves, renames and PATCH folder go through the same rule.
    #[rustfmt::skip]
    let moves = [
        (Method::POST, "/v1/notes/Welcome:move", json!({"folder": ".GIT"})),
        (Method::POST, "/v1/notes/Welcome:move", json!({"folder": "git~1"})),
        (Method::POST, "/v1/notes/Welcome:rename", json!({"name": ".."})),
        (Method::POST, "/v1/notes/Welcome:rename", json!({"name": "."})),
        (Method::POST, "/v1/notes/Welcome:rename", json!({"name": "a\u{202E}b"})),
        (Method::PATCH, "/v1/notes/Welcome?update_mask=folder", json!({"folder": ".Obsidian"})),
        (Method::POST, "/v1/notes/Welcome:move", json!({"folder": "/tmp"})),
        (Method::POST, "/v1/notes", json!({"title": "x", "folder": "/tmp"})),
    ]
    .map(|(method, path, body)| (body.to_string(), method, path, body));
    let cases: Vec<_> = creates.chain(moves).collect();
    s.refuse_all(cases.iter().map(|(what, method, path, body)| {
        let body = Some(body.clone());
        (
            what.as_str(),
            method.clone(),
            *path,
            body,
            400,
            "UNSAFE_PATH",
        )
    }))
    .await;
    assert_eq!(
        common::snapshot(&s.vault),
        before,
        "nothing was written into the vault"
    );
    // A name that passes is still written.
    let res = s
        .write(
            Method::POST,
            "/v1/notes",
            "good",
            json!({"slug": "v1.2 notes/Zoë", "content": "ok\n"}),
        )
        .await;
    res_json(res, 201, "create a good name").await;
}

/// The history section of the index status.
async fn history_status(s: &TestServer) -> Value {
    s.get_json("/v1/index-status", 200).await["history"].clone()
}

#[tokio::test]
async fn a_name_git_refuses_never_stops_history() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    common::wait_history(&s.svc).await;
    // An editor or a sync tool puts files with such names into the folder.
    std::fs::create_dir(s.vault.join(".GIT")).unwrap();
    std::fs::write(s.vault.join(".GIT/x.md"), "# In .GIT\n\nfirst\n").unwrap();
    std::fs::create_dir(s.vault.join("git~1")).unwrap();
    std::fs::write(s.vault.join("git~1/y.md"), "# In git~1\n").unwrap();
    std::fs::write(s.vault.join("new\nline.md"), "# A newline in the name\n").unwrap();
    common::eventually("the watcher takes the three files in", || async {
        let notes = s.get_json("/v1/notes?page_size=500", 200).await;
        let slugs: Vec<String> = notes["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["slug"].as_str().unwrap().to_string())
            .collect();
        [".GIT/x", "git~1/y", "new\nline"]
            .iter()
            .all(|want| slugs.iter().any(|s| s == want))
    })
    .await;

    // A later API write reaches history, with no flow-back error.
    let res = s
        .write(
            Method::POST,
            "/v1/notes",
            "after",
            json!({"slug": "after bad names", "content": "# After\n"}),
        )
        .await;
    let receipt = res_json(res, 201, "create after the bad names").await;
    assert_eq!(receipt["flow_back_error"], Value::Null, "{receipt}");
    common::wait_history(&s.svc).await;
    let log = git(&s.state, &["log", "--format=%s"]);
    assert!(log.contains("create after bad names"), "{log}");
    let tree = git(&s.state, &["ls-tree", "-r", "--name-only", "-z", "HEAD"]);
    let tree: Vec<&str> = tree.split('\0').collect();
    assert!(tree.contains(&"after bad names.md"));
    assert!(
        tree.contains(&"new\nline.md"),
        "git on Linux keeps a newline"
    );
    assert!(!tree.iter().any(|p| p.to_lowercase().starts_with(".git")));

    let history = history_status(&s).await;
    assert_eq!(history["backlog"], 0, "{history}");
    assert_eq!(history["last_error"], Value::Null, "{history}");
    let left_out: Vec<&str> = history["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    assert!(left_out.contains(&".GIT/x.md"), "{history}");
    assert!(left_out.contains(&"git~1/y.md"), "{history}");

    // The note is served, and its handle says its history is not kept.
    let note = s.get_json("/v1/notes/.GIT%2Fx", 200).await;
    let warnings = note["warnings"].to_string();
    assert!(warnings.contains("history.git cannot keep"), "{note}");

    // An API edit of it applies; the receipt says history left it out.
    let res = s
        .write(
            Method::POST,
            "/v1/notes/.GIT%2Fx:edit",
            "edit-bad",
            json!({"version_id": note["version_id"], "old_string": "first", "new_string": "second"}),
        )
        .await;
    let receipt = res_json(res, 200, "edit a note history cannot keep").await;
    assert!(
        receipt["flow_back_error"]
            .as_str()
            .is_some_and(|e| e.contains("left out of history")),
        "{receipt}"
    );
    assert_eq!(
        std::fs::read_to_string(s.vault.join(".GIT/x.md")).unwrap(),
        "# In .GIT\n\nsecond\n"
    );
    // A diff of its revisions says the bytes are not in history, never a wrong diff.
    let revisions = s.get_json("/v1/notes/.GIT%2Fx:listRevisions", 200).await;
    let first = revisions["versions"].as_array().unwrap().last().unwrap()["version_id"]
        .as_str()
        .unwrap()
        .to_string();
    let body = s
        .get_error(
            &format!("/v1/notes/.GIT%2Fx:diff?from={first}"),
            410,
            "REVISION_CONTENT_MISSING",
        )
        .await;
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("git cannot store"));
    // Still no backlog; git's own check of the repository is clean.
    common::wait_history(&s.svc).await;
    assert_eq!(history_status(&s).await["backlog"], 0);
    git(&s.state, &["fsck", "--strict", "--no-dangling"]);

    // What was left out is still reported after a restart.
    let (dir, vault, state) = s.stop().await;
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    let history = history_status(&s).await;
    assert!(
        history["left_out_total"].as_u64().unwrap() >= 3,
        "{history}"
    );
    assert!(history["left_out"].to_string().contains(".GIT/x.md"));
}
