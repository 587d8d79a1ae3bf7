//! Folder writes over HTTP: create, `:rename`, `:move`, `:delete` (empty, or with
//! `trash_notes`), each a history commit; link rewrites to the notes of a moved folder;
//! the review policy; every refusal with its envelope and nothing touched.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::{git, res_json, snapshot, TestServer};
use reqwest::Method;
use serde_json::{json, Value};

async fn post(s: &TestServer, path: &str, key: &str, body: Value, status: u16) -> Value {
    let res = s.write(Method::POST, path, key, body).await;
    res_json(res, status, path).await
}

/// The newest history commit's message.
fn last_commit(s: &TestServer) -> String {
    git(&s.state, &["log", "-1", "--format=%B"])
}

async fn server() -> TestServer {
    TestServer::start(Some("vault-example"), |c| c.watch = false).await
}

#[tokio::test]
async fn a_folder_is_created_once_and_recorded() {
    let s = server().await;
    let body = json!({"path": "projects/alpha", "agent_id": "planner"});
    let made = post(&s, "/v1/folders", "mk-alpha", body.clone(), 201).await;
    assert_eq!(made["status"], "applied");
    assert_eq!(made["path"], "projects/alpha");
    assert_eq!(made["notes"], 0);
    assert!(s.vault.join("projects/alpha").is_dir());
    let message = last_commit(&s);
    assert!(
        message.contains("Notevault-Folder: create projects/alpha"),
        "{message}"
    );
    // A retry replays the receipt; the folder is listed though it holds no note.
    let again = post(&s, "/v1/folders", "mk-alpha", body, 201).await;
    assert_eq!(again, made);
    let list = s.get_json("/v1/folders?prefix=projects/", 200).await;
    let paths: Vec<&str> = list["folders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["projects/alpha"]);
    // A top-level one too.
    post(
        &s,
        "/v1/folders",
        "mk-top",
        json!({"path": "inbox-2027/"}),
        201,
    )
    .await;
    assert!(s.vault.join("inbox-2027").is_dir());
}

#[tokio::test]
async fn bad_folder_writes_are_refused_and_touch_nothing() {
    let s = server().await;
    let before = snapshot(&s.vault);
    #[rustfmt::skip]
    let cases = vec![
        ("too deep", "/v1/folders", json!({"path": "projects/alpha/beta"}), 400, "VALIDATION_FAILED"),
        ("the vault itself", "/v1/folders", json!({"path": "/"}), 400, "VALIDATION_FAILED"),
        ("an empty path", "/v1/folders", json!({"path": ""}), 400, "VALIDATION_FAILED"),
        ("an unknown field", "/v1/folders", json!({"path": "x", "mode": 7}), 400, "VALIDATION_FAILED"),
        ("absolute", "/v1/folders", json!({"path": "/tmp/x"}), 400, "UNSAFE_PATH"),
        ("traversal", "/v1/folders", json!({"path": "../outside"}), 400, "UNSAFE_PATH"),
        ("the git folder", "/v1/folders", json!({"path": ".git"}), 400, "UNSAFE_PATH"),
        ("a backslash", "/v1/folders", json!({"path": "a\\b"}), 400, "UNSAFE_PATH"),
        ("a NUL", "/v1/folders", json!({"path": "a\u{0}b"}), 400, "UNSAFE_PATH"),
        ("exists", "/v1/folders", json!({"path": "projects"}), 409, "NAME_COLLISION"),
        ("a note's file name", "/v1/folders", json!({"path": "Welcome.md"}), 409, "NAME_COLLISION"),
        ("no parent", "/v1/folders", json!({"path": "nowhere/x"}), 404, "FOLDER_NOT_FOUND"),
        ("rename a missing folder", "/v1/folders:rename", json!({"path": "nowhere", "name": "x"}), 404, "FOLDER_NOT_FOUND"),
        ("rename onto another", "/v1/folders:rename", json!({"path": "recipes", "name": "daily"}), 409, "NAME_COLLISION"),
        ("a name with a slash", "/v1/folders:rename", json!({"path": "recipes", "name": "a/b"}), 400, "VALIDATION_FAILED"),
        ("rename into the trash", "/v1/folders:rename", json!({"path": "recipes", "name": ".trash"}), 400, "UNSAFE_PATH"),
        ("move into itself", "/v1/folders:move", json!({"path": "recipes", "folder": "recipes"}), 400, "VALIDATION_FAILED"),
        ("move a note as a folder", "/v1/folders:move", json!({"path": "Welcome.md", "folder": "daily"}), 404, "FOLDER_NOT_FOUND"),
        ("move out of the vault", "/v1/folders:move", json!({"path": "recipes", "folder": "../x"}), 400, "UNSAFE_PATH"),
        ("delete a folder with notes", "/v1/folders:delete", json!({"path": "recipes"}), 400, "VALIDATION_FAILED"),
        ("delete a missing folder", "/v1/folders:delete", json!({"path": "nowhere"}), 404, "FOLDER_NOT_FOUND"),
        ("delete the state dir", "/v1/folders:delete", json!({"path": ".notevault", "trash_notes": true}), 400, "UNSAFE_PATH"),
    ];
    let answers = s
        .refuse_all(cases.iter().map(|(what, path, body, status, reason)| {
            (
                *what,
                Method::POST,
                *path,
                Some(body.clone()),
                *status,
                *reason,
            )
        }))
        .await;
    // The field of a validation failure is named.
    assert_eq!(common::violated_field(&answers[0]), "path");
    assert_eq!(common::violated_field(&answers[19]), "trash_notes");
    // Without an Idempotency-Key nothing is done either.
    s.refused(
        "no key",
        Method::POST,
        "/v1/folders",
        None,
        Some(json!({"path": "fresh"})),
        400,
        "IDEMPOTENCY_KEY_MISSING",
    )
    .await;
    assert_eq!(snapshot(&s.vault), before, "nothing was touched");
}

#[tokio::test]
async fn renaming_a_folder_moves_its_notes_and_rewrites_links_to_them() {
    let s = server().await;
    let roadmap = s.get_json("/v1/notes/projects%2Froadmap", 200).await;
    // Links to notes of the folder, from outside it and from inside it.
    std::fs::write(
        s.vault.join("links-out.md"),
        "See [[projects/roadmap]], [the shed](projects/Garden%20shed.md) and [[home-network]].\n",
    )
    .unwrap();
    std::fs::write(
        s.vault.join("projects/index.md"),
        "Inside: [[projects/roadmap|the roadmap]].\n",
    )
    .unwrap();
    // Let the daemon see them (no watcher here: a read records an external edit).
    s.get_json("/v1/notes/links-out", 200).await;
    s.get_json("/v1/notes/projects%2Findex", 200).await;

    let renamed = post(
        &s,
        "/v1/folders:rename",
        "rename-projects",
        json!({"path": "projects", "name": "work"}),
        200,
    )
    .await;
    assert_eq!(renamed["path"], "work");
    assert_eq!(renamed["from_path"], "projects");
    assert_eq!(renamed["notes"], 4);
    // links-out.md (two links), projects/index.md, and the vault's own links to them.
    assert!(renamed["links_updated"].as_u64().unwrap() >= 3, "{renamed}");
    assert_eq!(renamed["links_failed"], json!([]));
    assert!(!s.vault.join("projects").exists());
    assert!(s.vault.join("work/roadmap.md").is_file());
    let message = git(&s.state, &["log", "--format=%B"]);
    assert!(
        message.contains("Notevault-Folder: move projects -> work"),
        "{message}"
    );

    // The note kept its id, and its history shows the move.
    let moved = s.get_json("/v1/notes/work%2Froadmap", 200).await;
    assert_eq!(moved["note_id"], roadmap["note_id"]);
    let revisions = s
        .get_json("/v1/notes/work%2Froadmap:listRevisions", 200)
        .await;
    assert_eq!(revisions["versions"][0]["kind"], "move", "{revisions}");
    s.get_error("/v1/notes/projects%2Froadmap", 404, "NOTE_NOT_FOUND")
        .await;
    let outside = std::fs::read_to_string(s.vault.join("links-out.md")).unwrap();
    assert_eq!(
        outside,
        "See [[work/roadmap]], [the shed](work/Garden%20shed.md) and [[home-network]].\n"
    );
    let inside = std::fs::read_to_string(s.vault.join("work/index.md")).unwrap();
    assert_eq!(inside, "Inside: [[work/roadmap|the roadmap]].\n");

    // `:move` into another folder.
    let moved = post(
        &s,
        "/v1/folders:move",
        "move-work",
        json!({"path": "work", "folder": "reading"}),
        200,
    )
    .await;
    assert_eq!(moved["path"], "reading/work");
    assert!(s.vault.join("reading/work/roadmap.md").is_file());
    s.get_json("/v1/notes/reading%2Fwork%2Froadmap", 200).await;
}

#[tokio::test]
async fn deleting_a_folder_trashes_its_notes_only_when_asked() {
    let s = server().await;
    post(&s, "/v1/folders", "mk-empty", json!({"path": "empty"}), 201).await;
    let gone = post(
        &s,
        "/v1/folders:delete",
        "rm-empty",
        json!({"path": "empty"}),
        200,
    )
    .await;
    assert_eq!(gone["notes"], 0);
    assert_eq!(gone["trashed_to"], Value::Null);
    assert!(!s.vault.join("empty").exists());
    assert!(last_commit(&s).contains("Notevault-Folder: delete empty"));

    let trashed = post(
        &s,
        "/v1/folders:delete",
        "rm-recipes",
        json!({"path": "recipes", "trash_notes": true}),
        200,
    )
    .await;
    assert_eq!(trashed["notes"], 3);
    assert_eq!(trashed["trashed_to"], ".trash/recipes");
    assert!(!s.vault.join("recipes").exists());
    assert!(s.vault.join(".trash/recipes/sourdough.md").is_file());
    s.get_error("/v1/notes/recipes%2Fsourdough", 404, "NOTE_NOT_FOUND")
        .await;
    let message = last_commit(&s);
    assert!(
        message.contains("Notevault-Folder: delete recipes -> .trash/recipes"),
        "{message}"
    );
    // The deleted notes' history is still there.
    let revisions = s
        .get_json("/v1/notes/recipes%2Fsourdough:listRevisions", 200)
        .await;
    assert_eq!(revisions["versions"][0]["kind"], "delete", "{revisions}");
}

#[tokio::test]
async fn folder_moves_and_deletes_wait_for_review_when_the_policy_says_so() {
    let s = server().await;
    let res = s
        .client
        .patch(s.url("/v1/vault/write-settings?update_mask=write_policy"))
        .json(&json!({"write_policy": "review_destructive"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // Creating is not destructive: applied.
    post(&s, "/v1/folders", "mk", json!({"path": "later"}), 201).await;
    let queued = post(
        &s,
        "/v1/folders:rename",
        "rename-daily",
        json!({"path": "daily", "name": "journal"}),
        202,
    )
    .await;
    assert_eq!(queued["status"], "queued");
    assert!(s.vault.join("daily").is_dir(), "nothing moved yet");
    let id = queued["pending_id"].as_str().unwrap().to_string();
    let pending = s.get_json(&format!("/v1/writes/{id}"), 200).await;
    assert_eq!(pending["kind"], "folder_move");
    let diff = pending["diff"].as_str().unwrap();
    assert!(diff.contains("move folder daily -> journal"), "{diff}");
    assert!(
        diff.contains("daily/2026-11-21.md -> journal/2026-11-21.md"),
        "{diff}"
    );
    let decided = s
        .call(
            Method::POST,
            &format!("/v1/writes/{id}:approve"),
            None,
            None,
            200,
        )
        .await;
    assert_eq!(decided["status"], "applied", "{decided}");
    assert!(s.vault.join("journal/2026-11-21.md").is_file());
    assert!(!s.vault.join("daily").exists());
}

/// With the live watcher on, the folder's own rename is not recorded a second time when
/// the watcher sees it: each moved note has one `move` revision.
#[tokio::test]
async fn the_watcher_does_not_record_a_folder_move_twice() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    post(
        &s,
        "/v1/folders:rename",
        "rename-recipes",
        json!({"path": "recipes", "name": "cooking"}),
        200,
    )
    .await;
    // The watcher handles events in order: once a later external edit is visible, the
    // rename's events were handled.
    std::fs::write(s.vault.join("sentinel.md"), "# Sentinel\n").unwrap();
    // (A list answers from what was recorded; a read by slug would look at the disk.)
    common::eventually("the watcher records the sentinel", || async {
        let list = s.get_json("/v1/notes?prefix=sentinel", 200).await;
        list["notes"].as_array().is_some_and(|n| n.len() == 1)
    })
    .await;
    for note in ["cooking%2Fsourdough", "cooking%2Fchana-masala"] {
        let revisions = s
            .get_json(&format!("/v1/notes/{note}:listRevisions"), 200)
            .await;
        let kinds: Vec<&str> = revisions["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["move", "create"], "{note}");
    }
}

/// A folder's attachments move with it: the list shows them at the new place (no
/// watcher here to catch up), with the same bytes, and history has them there.
#[tokio::test]
async fn a_moved_folder_carries_its_attachments() {
    let s = server().await;
    let before = s.get_json("/v1/attachments", 200).await;
    let old = before["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["path"] == "attachments/diagram.png")
        .cloned()
        .unwrap_or_else(|| panic!("{before}"));
    post(
        &s,
        "/v1/folders:rename",
        "rename-attachments",
        json!({"path": "attachments", "name": "media"}),
        200,
    )
    .await;
    let after = s.get_json("/v1/attachments", 200).await;
    let paths: Vec<&str> = after["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"media/diagram.png"), "{paths:?}");
    assert!(!paths.contains(&"attachments/diagram.png"), "{paths:?}");
    let moved = s.get("/v1/attachments/media%2Fdiagram.png").await;
    assert_eq!(moved.status(), 200);
    assert_eq!(
        moved.headers()["etag"].to_str().unwrap().trim_matches('"'),
        old["sha256"].as_str().unwrap()
    );
    let tree = git(&s.state, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(tree.lines().any(|l| l == "media/diagram.png"), "{tree}");
    assert!(
        !tree.lines().any(|l| l == "attachments/diagram.png"),
        "{tree}"
    );
}
