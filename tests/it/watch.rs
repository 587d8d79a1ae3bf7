//! The live folder: external edits by every editor save pattern reach the listing, the
//! revisions and the history without any read, and keep their note ids.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::eventually;

use common::TestServer;
use reqwest::Method;
use serde_json::{json, Value};

/// The listing, without reading any note (reads would take changes in themselves).
async fn listing(s: &TestServer) -> Vec<Value> {
    s.get_json("/v1/notes?page_size=500", 200).await["notes"]
        .as_array()
        .unwrap()
        .clone()
}

async fn handle(s: &TestServer, slug: &str) -> Option<Value> {
    listing(s).await.into_iter().find(|n| n["slug"] == slug)
}

fn on_disk(s: &TestServer) -> Vec<String> {
    let mut v = common::temp_list(&s.vault);
    v.sort();
    v
}

async fn listed_paths(s: &TestServer) -> Vec<String> {
    let mut v: Vec<String> = listing(s)
        .await
        .iter()
        .map(|n| n["path"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_editor_save_pattern_is_one_modification() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let before = handle(&s, "Inbox").await.unwrap();
    let id = before["note_id"].clone();
    let path = s.vault.join("Inbox.md");

    // In place (VS Code).
    std::fs::write(&path, "# In place\n").unwrap();
    eventually("in-place save", || async {
        handle(&s, "Inbox").await.unwrap()["title"] == "In place"
    })
    .await;
    // Write a temp file, rename it over the note (vim, Obsidian, sync tools), with vim's
    // swap and probe files around it.
    std::fs::write(s.vault.join(".Inbox.md.swp"), "swap").unwrap();
    std::fs::write(s.vault.join("4913"), "").unwrap();
    std::fs::write(s.vault.join("Inbox.md~"), "backup").unwrap();
    std::fs::write(s.vault.join(".Inbox.md.tmp"), "# By rename\n").unwrap();
    std::fs::rename(s.vault.join(".Inbox.md.tmp"), &path).unwrap();
    eventually("rename save", || async {
        handle(&s, "Inbox").await.unwrap()["title"] == "By rename"
    })
    .await;
    // Delete, then create.
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, "# Recreated\n").unwrap();
    eventually("delete then create", || async {
        handle(&s, "Inbox")
            .await
            .is_some_and(|n| n["title"] == "Recreated")
    })
    .await;
    let after = handle(&s, "Inbox").await.unwrap();
    assert_eq!(
        after["note_id"], id,
        "the note keeps its id through every save"
    );
    for ignored in [".Inbox.md", "4913", "Inbox.md~"] {
        assert!(listing(&s).await.iter().all(|n| n["path"] != ignored));
    }
    // The revisions say filesystem, and history has the commits.
    let revs = s.get_json("/v1/notes/Inbox:listRevisions", 200).await;
    assert!(revs["versions"].as_array().unwrap().len() >= 3);
    assert_eq!(revs["versions"][0]["actor"], "filesystem");
    common::wait_history(&s.svc).await;
    let log = common::git(&s.state, &["log", "--format=%s"]);
    assert!(log.contains("Record external edits"), "{log}");
    let blob = common::git(&s.state, &["show", "HEAD:Inbox.md"]);
    assert_eq!(blob, "# Recreated\n");
}

/// An editor's delete, then create, whose halves reach two batches (a loaded machine
/// delivers the create after the delete was recorded): still the same note, updated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_then_create_seen_apart_keeps_the_note() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let id = handle(&s, "Inbox").await.unwrap()["note_id"].clone();
    let path = s.vault.join("Inbox.md");
    std::fs::remove_file(&path).unwrap();
    eventually("the delete is recorded", || async {
        handle(&s, "Inbox").await.is_none()
    })
    .await;
    std::fs::write(&path, "# Written anew\n").unwrap();
    eventually("the create is recorded", || async {
        handle(&s, "Inbox").await.is_some()
    })
    .await;
    let after = handle(&s, "Inbox").await.unwrap();
    assert_eq!(after["note_id"], id, "the note keeps its id");
    assert_eq!(after["title"], "Written anew");
    let revs = s.get_json("/v1/notes/Inbox:listRevisions", 200).await;
    let versions = revs["versions"].as_array().unwrap();
    assert!(
        versions.len() >= 3,
        "created, deleted, written anew: {revs}"
    );
    // A new file at another path with other bytes is a new note.
    std::fs::remove_file(&path).unwrap();
    std::fs::write(s.vault.join("Elsewhere.md"), "# Elsewhere\n").unwrap();
    eventually("the new note is listed", || async {
        handle(&s, "Elsewhere").await.is_some() && handle(&s, "Inbox").await.is_none()
    })
    .await;
    assert_ne!(handle(&s, "Elsewhere").await.unwrap()["note_id"], id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renames_of_notes_and_folders_keep_ids() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let ids: Vec<(String, Value)> = listing(&s)
        .await
        .into_iter()
        .filter(|n| n["slug"].as_str().unwrap().starts_with("recipes/"))
        .map(|n| {
            (
                n["slug"]
                    .as_str()
                    .unwrap()
                    .replacen("recipes/", "cooking/", 1),
                n["note_id"].clone(),
            )
        })
        .collect();
    assert!(!ids.is_empty());
    std::fs::rename(s.vault.join("recipes"), s.vault.join("cooking")).unwrap();
    eventually("folder rename", || async {
        listed_paths(&s).await == on_disk(&s)
    })
    .await;
    for (slug, id) in &ids {
        let got = handle(&s, slug).await.unwrap()["note_id"].clone();
        if got != *id {
            let revs = s
                .get_json(
                    &format!("/v1/notes/{}:listRevisions", got.as_str().unwrap()),
                    200,
                )
                .await;
            panic!("{slug}: {got} != {id}; revisions {revs}");
        }
    }
    let welcome = handle(&s, "Welcome").await.unwrap();
    std::fs::rename(s.vault.join("Welcome.md"), s.vault.join("Start here.md")).unwrap();
    eventually("note rename", || async {
        handle(&s, "Start here").await.is_some()
    })
    .await;
    assert_eq!(
        handle(&s, "Start here").await.unwrap()["note_id"],
        welcome["note_id"]
    );
    assert!(handle(&s, "Welcome").await.is_none());
    // A removed folder removes its notes.
    std::fs::remove_dir_all(s.vault.join("cooking")).unwrap();
    eventually("folder removal", || async {
        listed_paths(&s).await == on_disk(&s)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_new_and_edited_files_misses_nothing() {
    let s = TestServer::start(Some("vault-example"), |c| c.rate_limit_read_per_minute = 0).await;
    std::fs::create_dir(s.vault.join("burst")).unwrap();
    for i in 0..400 {
        std::fs::write(
            s.vault.join(format!("burst/n{i}.md")),
            format!("# Note {i}\n"),
        )
        .unwrap();
    }
    for round in 0..3 {
        for i in (0..400).step_by(7) {
            std::fs::write(
                s.vault.join(format!("burst/n{i}.md")),
                format!("# Note {i} round {round}\n"),
            )
            .unwrap();
        }
    }
    eventually("burst listed", || async {
        listed_paths(&s).await == on_disk(&s)
    })
    .await;
    eventually("last edits seen", || async {
        handle(&s, "burst/n399").await.is_some()
            && handle(&s, "burst/n7")
                .await
                .is_some_and(|n| n["title"] == "Note 7 round 2")
    })
    .await;
    // Settles with every listed note's hash equal to its file.
    eventually("every hash equals its file", || async {
        listing(&s).await.iter().all(|n| {
            let bytes = std::fs::read(s.vault.join(n["path"].as_str().unwrap())).unwrap();
            n["content_hash"] == format!("blake3:{}", blake3::hash(&bytes).to_hex())
        })
    })
    .await;
}

/// The watcher's part of `GET /v1/index-status`, once the watch is up (it is set up
/// beside serving, after the start-up scan).
async fn watcher(s: &TestServer) -> Value {
    eventually("the watch is set up", || async {
        s.get_json("/v1/index-status", 200).await["watcher"]["state"] == "watching"
    })
    .await;
    s.get_json("/v1/index-status", 200).await["watcher"].clone()
}

/// Wait until the watcher has processed every file event made so far: it counted a batch
/// past `before` (the value of `watcher.batches` read before the events), and an editor's
/// save made now, of a new note `slug`, has been recorded. inotify hands the watcher its
/// events in order, so by then every earlier event has been taken in too, even when a
/// write's events (a temp file, its fsync, the rename) reached two batches.
async fn watcher_caught_up(s: &TestServer, before: &Value, slug: &str) {
    let before = before["batches"].as_u64().unwrap();
    std::fs::write(s.vault.join(format!("{slug}.md")), "# Marker\n").unwrap();
    eventually("the watcher takes in the events and the marker", || async {
        let batches = s.get_json("/v1/index-status", 200).await["watcher"]["batches"]
            .as_u64()
            .unwrap();
        batches > before && handle(s, slug).await.is_some()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_writes_are_not_taken_back_in_as_external_edits() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let before = watcher(&s).await;
    let body = json!({"slug": "mine", "content": "x\n"});
    let res = s.write(Method::POST, "/v1/notes", "w1", body).await;
    assert_eq!(res.status(), 201);
    let seq = s.svc.committed_seq();
    watcher_caught_up(&s, &before, "marker").await;
    assert_eq!(
        s.svc.committed_seq(),
        seq + 1,
        "the watcher saw its own write and recorded nothing (only the marker)"
    );
    let revs = s.get_json("/v1/notes/mine:listRevisions", 200).await;
    assert_eq!(revs["versions"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_graph_follows_the_folder() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let links = s.get_json("/v1/notes/projects%2Froadmap:links", 200).await;
    let backlinks: Vec<&str> = links["backlinks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["note"]["slug"].as_str().unwrap())
        .collect();
    assert!(backlinks.contains(&"daily/2026-11-20"), "{backlinks:?}");
    assert!(
        backlinks.contains(&"Welcome"),
        "an aliased [[roadmap|...]] link counts"
    );
    let daily = links["backlinks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["note"]["slug"] == "daily/2026-11-20")
        .unwrap();
    let text = std::fs::read_to_string(s.vault.join("daily/2026-11-20.md")).unwrap();
    for line in daily["lines"].as_array().unwrap() {
        let l = text
            .lines()
            .nth(line.as_u64().unwrap() as usize - 1)
            .unwrap();
        assert!(l.contains("roadmap"), "line {line}: {l}");
    }
    assert!(
        links.get("lines").is_none() && links["note"].get("content").is_none(),
        "handles only"
    );
    // Unresolved links are reported; the example vault has two on purpose.
    let welcome = s
        .get_json("/v1/notes/projects%2Fhome-network:links", 200)
        .await;
    assert!(welcome["outgoing"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["note"]["slug"] == "projects/roadmap"));

    // An external edit adds a link; the graph follows without a read of that note.
    std::fs::write(
        s.vault.join("new-linker.md"),
        "See [[roadmap]] and [[Nowhere at all]].\n",
    )
    .unwrap();
    eventually("backlink from a new note", || async {
        s.get_json("/v1/notes/projects%2Froadmap:links", 200).await["backlinks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["note"]["slug"] == "new-linker")
    })
    .await;
    let nl = s.get_json("/v1/notes/new-linker:links", 200).await;
    assert_eq!(nl["unresolved"][0]["target"], "Nowhere at all");
    assert_eq!(nl["unresolved"][0]["line"], 1);

    // Filter fields.
    let to = s
        .get_json(
            "/v1/notes?filter=links_to%3Aprojects%2Froadmap&page_size=500",
            200,
        )
        .await;
    let slugs: Vec<&str> = to["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["slug"].as_str().unwrap())
        .collect();
    assert!(
        slugs.contains(&"new-linker") && slugs.contains(&"Welcome"),
        "{slugs:?}"
    );
    let from = s
        .get_json("/v1/notes?filter=linked_from%3Anew-linker", 200)
        .await;
    assert_eq!(from["notes"][0]["slug"], "projects/roadmap");
    let orphans = s
        .get_json("/v1/notes?filter=orphan%3Dtrue&page_size=500", 200)
        .await;
    let orphan_slugs: Vec<&str> = orphans["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["slug"].as_str().unwrap())
        .collect();
    assert!(
        orphan_slugs.contains(&"new-linker") && !orphan_slugs.contains(&"projects/roadmap"),
        "{orphan_slugs:?}"
    );
}

/// Regression: the watcher read a note before an API write and reconciled it after,
/// recording the stale bytes as a new version, so the next chained edit answered a
/// spurious `VERSION_MOVED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_api_edits_are_never_undone_by_the_watcher() {
    let s = TestServer::start(None, |c| c.rate_limit_write_per_minute = 0).await;
    let before = watcher(&s).await;
    let body = json!({"slug": "counter", "content": "counter 0\n"});
    let res = s.write(Method::POST, "/v1/notes", "c", body).await;
    let mut version = res.json::<Value>().await.unwrap()["version_id"]
        .as_str()
        .unwrap()
        .to_string();
    for i in 1..300 {
        let body = json!({"version_id": version, "old_string": format!("counter {}", i - 1), "new_string": format!("counter {i}")});
        let res = s
            .write(
                Method::POST,
                "/v1/notes/counter:edit",
                &format!("e{i}"),
                body,
            )
            .await;
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap();
        assert_eq!(status, 200, "edit {i}: {body}");
        version = body["version_id"].as_str().unwrap().to_string();
    }
    watcher_caught_up(&s, &before, "marker").await;
    let note = s.get_json("/v1/notes/counter", 200).await;
    assert_eq!(
        note["version_id"],
        version.as_str(),
        "no stale filesystem revision after the last edit"
    );
    assert_eq!(note["lines"]["items"][0]["text"], "counter 299");
}

/// A folder moved inside the vault, holding a symlinked note (pointing inside the vault),
/// lists that note at its new path, as the start-up walk does: the watcher walks a moved
/// folder by the same rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_folder_keeps_its_symlinked_note() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let before = s.vault.join("before");
    std::fs::create_dir_all(&before).unwrap();
    std::fs::write(before.join("plain.md"), "# Plain\n").unwrap();
    std::os::unix::fs::symlink(s.vault.join("Welcome.md"), before.join("linked.md")).unwrap();
    eventually("the folder's notes listed", || async {
        handle(&s, "before/plain").await.is_some() && handle(&s, "before/linked").await.is_some()
    })
    .await;
    std::fs::rename(&before, s.vault.join("moved")).unwrap();
    eventually(
        "the moved folder's notes listed at their new paths",
        || async {
            handle(&s, "moved/plain").await.is_some() && handle(&s, "moved/linked").await.is_some()
        },
    )
    .await;
    assert!(handle(&s, "before/linked").await.is_none());
    assert_eq!(
        handle(&s, "moved/linked").await.unwrap()["path"],
        "moved/linked.md"
    );
}
