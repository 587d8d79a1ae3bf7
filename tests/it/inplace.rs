//! Editors that save in place (truncate the note, then write it) racing the watcher, API
//! reads and API edits: the zero-length moment between the two halves is never recorded
//! as a revision, while a note a person really empties is.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use common::{res_json, TestServer};
use serde_json::{json, Value};

/// In-place saves the editor makes in each test.
const SAVES: usize = 500;

/// How long the watcher may take to settle after the saves.
const SETTLE: Duration = Duration::from_secs(15);

/// `content_hash` of a zero-length file.
fn empty_hash() -> String {
    format!("blake3:{}", blake3::hash(b"").to_hex())
}

fn hash_of(path: &std::path::Path) -> String {
    format!(
        "blake3:{}",
        blake3::hash(&std::fs::read(path).unwrap()).to_hex()
    )
}

/// The editor: `SAVES` in-place saves of `path`, each new text: truncate, a short pause
/// (the window in which the note is empty), write, then a short gap before the next.
/// Answers how long each save left the note empty (an upper bound: from before the
/// truncate to after the write). On a loaded machine the editor itself can stall in that
/// window; one empty for `settle::QUIET` or longer is, by the daemon's rule, a person's
/// emptying and may be recorded.
fn in_place_saves(path: PathBuf) -> std::thread::JoinHandle<Vec<Duration>> {
    std::thread::spawn(move || {
        let mut windows = Vec::with_capacity(SAVES);
        for i in 0..SAVES {
            let started = std::time::Instant::now();
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            std::thread::sleep(Duration::from_millis(1));
            file.write_all(format!("# In place\n\nsave {i}\n").as_bytes())
                .unwrap();
            windows.push(started.elapsed());
            drop(file);
            // Now and then a longer gap, as a person pausing: room for API writes to land.
            let gap = if i % 25 == 24 { 25 } else { 2 };
            std::thread::sleep(Duration::from_millis(gap));
        }
        windows
    })
}

/// Assert the rule of `vault::settle`: an empty moment shorter than `QUIET` is never
/// recorded, so there are no more empty revisions than saves whose empty window reached
/// `QUIET` (0 unless the machine stalled the editor).
fn assert_no_empty_revision(revisions: &[Value], windows: &[Duration]) {
    let empty = empty_revisions(revisions);
    let long = windows
        .iter()
        .filter(|w| **w >= notevault::vault::settle::QUIET)
        .count();
    let longest = windows.iter().max().copied().unwrap_or_default();
    assert!(
        empty.len() <= long,
        "{} of {} revisions are the empty file, and only {long} saves left it empty for QUIET (longest {longest:?}): {:?}",
        empty.len(),
        revisions.len(),
        empty.first()
    );
}

async fn start(watch: bool) -> TestServer {
    let s = TestServer::start(None, |c| {
        c.watch = watch;
        c.rate_limit_read_per_minute = 0;
        c.rate_limit_write_per_minute = 0;
    })
    .await;
    let res = s
        .client
        .post(s.url("/v1/notes"))
        .header("Idempotency-Key", "create")
        .json(&json!({"slug": "inplace", "content": "# In place\n\nfirst\n"}))
        .send()
        .await
        .unwrap();
    res_json(res, 201, "create").await;
    s
}

/// Every revision of `note`, newest first, through all pages.
async fn all_revisions(s: &TestServer, note: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut path = format!("/v1/notes/{note}:listRevisions?page_size=500");
        if let Some(t) = &token {
            path.push_str(&format!("&page_token={t}"));
        }
        let page = s.get_json(&path, 200).await;
        out.extend(page["versions"].as_array().unwrap().iter().cloned());
        match page["next_page_token"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => return out,
        }
    }
}

fn empty_revisions(revisions: &[Value]) -> Vec<&Value> {
    let empty = empty_hash();
    revisions
        .iter()
        .filter(|r| r["content_hash"] == empty.as_str())
        .collect()
}

/// The note's catalog entry from the listing (a listing reads no file, so only the
/// watcher can have brought it up to date).
async fn listed(s: &TestServer) -> Value {
    s.get_json("/v1/notes?page_size=10", 200).await["notes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["slug"] == "inplace")
        .cloned()
        .expect("the note is listed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_place_saves_racing_api_edits_record_no_empty_revision() {
    let s = start(true).await;
    let path = s.vault.join("inplace.md");
    let editor = in_place_saves(path.clone());

    // API writes racing the editor: edits built on a read of the note (version checked),
    // and PATCHes of its status (no version: they apply to whatever the note is then).
    let (mut applied, mut moved) = (0, 0);
    let mut k = 0;
    while !editor.is_finished() {
        k += 1;
        let res = if k % 2 == 0 {
            let note = s.get_json("/v1/notes/inplace/raw", 200).await;
            let text = note["content"].as_str().unwrap();
            let Some(first) = text.lines().find(|l| l.starts_with("# ")) else {
                continue; // a read kept catching saves half done; read again
            };
            s.client
                .post(s.url("/v1/notes/inplace:edit"))
                .header("Idempotency-Key", format!("write-{k}"))
                .json(&json!({
                    "version_id": note["version_id"],
                    "old_string": first,
                    "new_string": format!("# Edited by the API {k}"),
                }))
                .send()
                .await
                .unwrap()
        } else {
            s.client
                .patch(s.url("/v1/notes/inplace?update_mask=status"))
                .header("Idempotency-Key", format!("write-{k}"))
                .json(&json!({"status": format!("api-{k}")}))
                .send()
                .await
                .unwrap()
        };
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap();
        match status {
            200 => {
                // Built on the whole note, never on the empty middle of a save (a PATCH
                // answers the note; an edit built on it would not have found its line).
                if let Some(title) = body["note"]["title"].as_str() {
                    assert!(
                        title == "In place" || title.starts_with("Edited by the API"),
                        "write {k} was applied to a save half done: {body}"
                    );
                }
                applied += 1;
            }
            409 => {
                assert_eq!(body["reason"], "VERSION_MOVED", "{body}");
                moved += 1;
            }
            other => panic!("write {k} answered {other}: {body}"),
        }
    }
    let windows = editor.join().unwrap();
    // The watcher takes the editor's last save in.
    let last = hash_of(&path);
    // 500 saves queue up behind the watcher: a bound above common::PATIENCE.
    common::eventually_within(SETTLE, "the last save is recorded", || async {
        listed(&s).await["content_hash"] == last.as_str()
    })
    .await;

    let revisions = all_revisions(&s, "inplace").await;
    let from_disk = revisions
        .iter()
        .filter(|r| r["actor"] == "filesystem")
        .count();
    eprintln!(
        "{} revisions ({from_disk} from disk), {applied} API writes applied, {moved} VERSION_MOVED",
        revisions.len()
    );
    assert!(applied > 0, "some API writes applied");
    assert!(from_disk > 0, "the in-place saves were recorded");
    assert_no_empty_revision(&revisions, &windows);

    // A note a person really empties is recorded as empty.
    std::fs::File::create(&path).unwrap();
    common::eventually_within(SETTLE, "the emptying is recorded", || async {
        let newest = s
            .get_json("/v1/notes/inplace:listRevisions?page_size=1", 200)
            .await;
        newest["versions"][0]["content_hash"] == empty_hash().as_str()
    })
    .await;
    let newest = &all_revisions(&s, "inplace").await[0];
    assert_eq!(newest["actor"], "filesystem", "{newest}");
    assert_eq!(listed(&s).await["content_hash"], empty_hash().as_str());
}

/// Without the watcher every change is taken in when the note is read: reads that catch
/// an in-place save half done wait for it instead of recording the empty file.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_racing_in_place_saves_record_no_empty_revision() {
    let s = start(false).await;
    let path = s.vault.join("inplace.md");
    let editor = in_place_saves(path.clone());
    let mut reads = 0;
    while !editor.is_finished() {
        reads += 1;
        s.get_json("/v1/notes/inplace", 200).await;
    }
    let windows = editor.join().unwrap();
    let note = s.get_json("/v1/notes/inplace", 200).await;
    assert_eq!(
        note["lines"]["items"][2]["text"],
        format!("save {}", SAVES - 1)
    );

    let revisions = all_revisions(&s, "inplace").await;
    eprintln!("{reads} reads, {} revisions", revisions.len());
    assert!(revisions.len() > 2, "reads took the in-place saves in");
    assert_no_empty_revision(&revisions, &windows);

    // A note a person really empties is recorded by the next read.
    std::fs::File::create(&path).unwrap();
    let note = s.get_json("/v1/notes/inplace", 200).await;
    assert_eq!(note["content_hash"], empty_hash().as_str(), "{note}");
    let newest = &all_revisions(&s, "inplace").await[0];
    assert_eq!(newest["content_hash"], empty_hash().as_str(), "{newest}");
    assert_eq!(newest["actor"], "filesystem");
}
