//! A warm start: a note whose file has the stamp (size, times, inode) the last full scan
//! saw comes from the scan cache without being read; the verify that follows reads every
//! file, keeps the bytes, records whatever differs (even a change the stamp does not
//! show) and starts the search index. After a stop that was not clean, what changed while
//! the daemon was stopped is read at the start itself; after a clean stop the start walks
//! nothing, reads answer what the files hold at once, and lists follow with the verify.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and the state dir"
)]

use crate::common;

use std::path::Path;

use common::{eventually, TestServer};
use notevault::vault::observe::{self, FileStamp};
use notevault::vault::scan_cache::{self, ScanCache};
use serde_json::Value;

async fn status(s: &TestServer) -> Value {
    s.get_json("/v1/index-status", 200).await
}

/// The verify is done and the index holds every change.
async fn settled(s: &TestServer) {
    eventually("the verify is done and the index is current", || async {
        let st = status(s).await;
        st["start_scan"]["verifying"] == false
            && st["indexed_seq"].as_i64() >= st["committed_seq"].as_i64()
            && st["indexed_seq"].as_i64() > Some(0)
    })
    .await;
}

async fn cache_written(state: &Path) {
    eventually("the scan cache is written", || async {
        state.join(scan_cache::FILE_NAME).is_file()
    })
    .await;
}

async fn search_slugs(s: &TestServer, q: &str) -> Vec<String> {
    s.get_json(&format!("/v1/search?q={q}"), 200).await["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["slug"].as_str().unwrap().to_string())
        .collect()
}

/// Replace `from` with `to` (the same length) in the file, and put its mtime back.
fn edit_same_size(path: &Path, from: &str, to: &str) {
    assert_eq!(from.len(), to.len());
    let before = std::fs::metadata(path).unwrap().modified().unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from} in {}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(before).unwrap();
}

/// What a stop that was not clean (a crash, `kill -9`) leaves: no mark of a clean stop.
fn forget_the_clean_stop(state: &Path) {
    use notevault::storage::metadata::Settings;
    let meta = notevault::meta::Meta::open(&state.join("meta.sqlite")).unwrap();
    assert!(
        meta.setting("stopped_cleanly")
            .unwrap()
            .is_some_and(|m| !m.is_empty()),
        "a clean stop leaves its mark"
    );
    meta.set_setting("stopped_cleanly", "").unwrap();
}

/// While stopped: a same-size edit with its mtime put back, a new note, a deleted one.
fn change_while_stopped(vault: &Path) {
    edit_same_size(&vault.join("recipes/sourdough.md"), "Weekend", "Snowday");
    std::fs::write(vault.join("new-note.md"), "# Brand new\nquokka sightings\n").unwrap();
    std::fs::remove_file(vault.join("scratchpad.md")).unwrap();
}

/// After a clean stop nothing is walked before serving: every note is recalled, a read
/// answers what its file holds now (the edit, the new note, the deleted one), and the
/// verify brings lists and search level with the folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_clean_stop_the_start_trusts_the_cache_and_the_verify_catches_up() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    cache_written(&s.state).await;
    settled(&s).await;
    let total = status(&s).await["notes"].as_u64().unwrap();
    let (dir, vault, state) = s.stop().await;
    change_while_stopped(&vault);

    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    let st = status(&s).await;
    assert_eq!(st["start_scan"]["notes_read"], 0, "nothing read: {st}");
    assert_eq!(st["start_scan"]["notes_recalled"], total, "{st}");
    let note = s.get_json("/v1/notes/recipes%2Fsourdough", 200).await;
    assert_eq!(note["title"], "Snowday Sourdough Loaf", "{note}");
    assert_eq!(
        s.get_json("/v1/notes/new-note", 200).await["title"],
        "Brand new"
    );
    s.get_error("/v1/notes/scratchpad", 404, "NOTE_NOT_FOUND")
        .await;
    settled(&s).await;
    let listed = s.get_json("/v1/notes?page_size=500", 200).await;
    let slugs: Vec<&str> = listed["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["slug"].as_str().unwrap())
        .collect();
    assert!(
        slugs.contains(&"new-note") && !slugs.contains(&"scratchpad"),
        "{slugs:?}"
    );
    assert_eq!(slugs.len() as u64, total, "one note in, one out");
    assert_eq!(search_slugs(&s, "quokka").await, ["new-note"]);
    assert_eq!(search_slugs(&s, "snowday").await, ["recipes/sourdough"]);
    let revs = s
        .get_json("/v1/notes/recipes%2Fsourdough:listRevisions", 200)
        .await;
    assert_eq!(revs["versions"][0]["actor"], "filesystem", "{revs}");
    // The mark was taken at the start: a crash of this daemon would leave none.
    {
        use notevault::storage::metadata::Settings;
        let meta = notevault::meta::Meta::open(&s.state.join("meta.sqlite")).unwrap();
        assert_eq!(
            meta.setting("stopped_cleanly").unwrap().as_deref(),
            Some("")
        );
    }
    let (_dir, _vault, state) = s.stop().await;
    forget_the_clean_stop(&state);
}

/// A rename made while stopped keeps the note's id after a start that walked nothing,
/// whether the first read names the new path or the old id (the verify pairs the two
/// sides by content; a read that comes first waits for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_made_while_stopped_keeps_its_id_after_a_start_from_the_cache() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    cache_written(&s.state).await;
    settled(&s).await;
    let roadmap = s.get_json("/v1/notes/projects%2Froadmap", 200).await;
    let id = roadmap["note_id"].as_str().unwrap().to_string();
    let welcome = s.get_json("/v1/notes/Welcome", 200).await;
    let welcome_id = welcome["note_id"].as_str().unwrap().to_string();
    let (dir, vault, state) = s.stop().await;
    std::fs::rename(
        vault.join("projects/roadmap.md"),
        vault.join("projects/roadmap-2027.md"),
    )
    .unwrap();
    std::fs::rename(vault.join("Welcome.md"), vault.join("Hello.md")).unwrap();

    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    let moved = s.get_json("/v1/notes/projects%2Froadmap-2027", 200).await;
    assert_eq!(moved["note_id"], id.as_str(), "{moved}");
    let by_id = s.get_json(&format!("/v1/notes/{welcome_id}"), 200).await;
    assert_eq!(by_id["slug"], "Hello", "{by_id}");
    settled(&s).await;
    s.get_error("/v1/notes/projects%2Froadmap", 404, "NOTE_NOT_FOUND")
        .await;
}

/// After a stop that was not clean, the start walks the vault: unchanged notes are
/// recalled, what changed while stopped is read before serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_start_recalls_unchanged_notes_and_reads_the_changed_ones() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let first = status(&s).await;
    let total = first["notes"].as_u64().unwrap();
    assert_eq!(first["start_scan"]["notes_recalled"], 0, "{first}");
    assert_eq!(first["start_scan"]["notes_read"], total, "{first}");
    cache_written(&s.state).await;
    settled(&s).await;
    let (dir, vault, state) = s.stop().await;
    forget_the_clean_stop(&state);

    change_while_stopped(&vault);

    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    let st = status(&s).await;
    assert_eq!(st["notes"], total, "one note in, one out: {st}");
    assert_eq!(
        st["start_scan"]["notes_read"], 2,
        "only the edited and the new note are read: {st}"
    );
    assert_eq!(st["start_scan"]["notes_recalled"], total - 2, "{st}");
    // The edit is seen at once, recorded by the filesystem actor.
    let note = s.get_json("/v1/notes/recipes%2Fsourdough", 200).await;
    assert_eq!(note["title"], "Snowday Sourdough Loaf", "{note}");
    let revs = s
        .get_json("/v1/notes/recipes%2Fsourdough:listRevisions", 200)
        .await;
    assert_eq!(revs["versions"][0]["actor"], "filesystem", "{revs}");
    assert_eq!(
        s.get_json("/v1/notes/new-note", 200).await["title"],
        "Brand new"
    );
    s.get_error("/v1/notes/scratchpad", 404, "NOTE_NOT_FOUND")
        .await;
    // A search answers at once, lines included, for a note not read yet.
    let hit = s.get_json("/v1/search?q=roadmap", 200).await;
    let roadmap = hit["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["slug"] == "projects/roadmap")
        .unwrap_or_else(|| panic!("{hit}"))
        .clone();
    assert!(
        roadmap["snippet"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("<mark>roadmap</mark>"))
            && !roadmap["lines"].as_array().unwrap().is_empty(),
        "{roadmap}"
    );
    // Grep waits for the verify, so it sees every note.
    let grep = s.get_json("/v1/grep?pattern=Roadmap", 200).await;
    assert!(
        grep["results"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["slug"] == "projects/roadmap"),
        "{grep}"
    );
    assert_eq!(grep["coverage"]["truncated"], false, "{grep}");
    settled(&s).await;
    assert_eq!(search_slugs(&s, "quokka").await, ["new-note"]);
    assert_eq!(search_slugs(&s, "snowday").await, ["recipes/sourdough"]);
    assert!(!search_slugs(&s, "scratchpad")
        .await
        .contains(&"scratchpad".to_string()));
    // Reads of recalled notes answer the file's bytes.
    let on_disk = std::fs::read_to_string(s.vault.join("projects/roadmap.md")).unwrap();
    let raw = s.get_json("/v1/notes/projects%2Froadmap/raw", 200).await;
    assert_eq!(raw["content"], on_disk);
}

/// A cache that claims a file's new stamp for its old bytes (what a change the stamp
/// cannot show looks like to the start): the note is recalled as the old version, and
/// the verify reads the file, records the new one and indexes it. Without a watcher.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verify_records_a_change_the_stamp_did_not_show() {
    let s = TestServer::start(Some("vault-example"), |c| c.watch = false).await;
    cache_written(&s.state).await;
    settled(&s).await;
    let before = s.get_json("/v1/notes/projects%2Froadmap", 200).await;
    let (dir, vault, state) = s.stop().await;

    let path = vault.join("projects/roadmap.md");
    let old = observe::observe(&vault, "projects/roadmap.md").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}\nwombat migration plan\n")).unwrap();
    let stale = observe::Observed {
        stamp: Some(FileStamp::at(&path).unwrap()),
        ..old
    };
    ScanCache::save(&state, [&stale]).unwrap();

    let s = TestServer::start_in(dir, vault, state, |c| c.watch = false).await;
    let st = status(&s).await;
    assert_eq!(st["start_scan"]["notes_recalled"], 1, "{st}");
    settled(&s).await;
    let after = s.get_json("/v1/notes/projects%2Froadmap", 200).await;
    assert_ne!(after["version_id"], before["version_id"], "{after}");
    let revs = s
        .get_json("/v1/notes/projects%2Froadmap:listRevisions", 200)
        .await;
    assert_eq!(revs["versions"][0]["actor"], "filesystem", "{revs}");
    assert_eq!(search_slugs(&s, "wombat").await, ["projects/roadmap"]);
    common::wait_history(&s.svc).await;
    let blob = common::git(&s.state, &["show", "HEAD:projects/roadmap.md"]);
    assert!(blob.contains("wombat migration plan"), "{blob}");
}

/// A damaged cache is ignored: every note is read, and it is written anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_cache_is_ignored_and_rewritten() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    cache_written(&s.state).await;
    settled(&s).await;
    let total = status(&s).await["notes"].clone();
    let (dir, vault, state) = s.stop().await;
    let cache = state.join(scan_cache::FILE_NAME);
    let mut bytes = std::fs::read(&cache).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&cache, &bytes).unwrap();

    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    let st = status(&s).await;
    assert_eq!(st["start_scan"]["notes_recalled"], 0, "{st}");
    assert_eq!(st["start_scan"]["notes_read"], total, "{st}");
    settled(&s).await;
    eventually("the cache is written anew", || async {
        std::fs::read(&cache).is_ok_and(|now| now != bytes)
    })
    .await;
    let (dir, vault, state) = s.stop().await;
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    assert_eq!(status(&s).await["start_scan"]["notes_recalled"], total);
}

/// A cache entry whose stamp is the file's but whose hash is older than the store's (the
/// file was saved twice within one tick of the clock after the cache was written): the
/// file is read at the start, and the note is what the file holds, not what the cache
/// remembered. Nothing is recorded: the store already has that version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_hash_the_store_does_not_hold_is_read_again() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    settled(&s).await;
    let (dir, vault, state) = s.stop().await;
    let path = vault.join("projects/roadmap.md");
    let old = observe::observe(&vault, "projects/roadmap.md").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replacen("Projects roadmap 2027", "Projects roadmap 2028", 1),
    )
    .unwrap();

    // The store takes in the new version.
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    settled(&s).await;
    let recorded = s.get_json("/v1/notes/projects%2Froadmap", 200).await;
    assert_eq!(recorded["title"], "Projects roadmap 2028", "{recorded}");
    let revisions = s
        .get_json("/v1/notes/projects%2Froadmap:listRevisions", 200)
        .await["versions"]
        .as_array()
        .unwrap()
        .len();
    let (dir, vault, state) = s.stop().await;
    let stale = observe::Observed {
        stamp: Some(FileStamp::at(&path).unwrap()),
        ..old
    };
    ScanCache::save(&state, [&stale]).unwrap();

    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    let st = status(&s).await;
    assert_eq!(st["start_scan"]["notes_recalled"], 0, "{st}");
    let note = s.get_json("/v1/notes/projects%2Froadmap", 200).await;
    assert_eq!(note["title"], "Projects roadmap 2028", "{note}");
    assert_eq!(note["version_id"], recorded["version_id"]);
    settled(&s).await;
    let listed = s.get_json("/v1/notes?page_size=100", 200).await;
    let roadmap = listed["notes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["slug"] == "projects/roadmap")
        .unwrap()
        .clone();
    assert_eq!(roadmap["title"], "Projects roadmap 2028", "{roadmap}");
    let now = s
        .get_json("/v1/notes/projects%2Froadmap:listRevisions", 200)
        .await["versions"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(now, revisions, "nothing new is recorded");
}

/// The names in `vault` beside the state dir.
fn names(vault: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(vault)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".notevault")
        .collect();
    names.sort();
    names
}

/// A crash right after an API write swapped its file in for the note's (before it checked
/// what it swapped out), here over an editor's save made just before: the start puts the
/// note back and records the editor's save; nothing of the refused write stays. Crashed
/// so again, and the note saved after the crash: that save stays, and the one the write
/// swapped out is kept beside it as a note of its own.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_note_swapped_out_by_an_interrupted_write_is_back_after_a_start() {
    let (dir, vault, state) = common::temp_vault(None);
    let path = vault.join("a.md");
    std::fs::write(&path, "# A\nversion one\n").unwrap();
    let s = TestServer::start_in(dir, vault.clone(), state, |c| c.watch = false).await;
    settled(&s).await;
    let (dir, vault, state) = s.stop().await;

    let refused = "# A\nthe API write, never acknowledged\n";
    if !common::crash_after_the_exchange(
        &path,
        "# A\nthe editor's save\n",
        refused,
        "# A\nversion one\n",
    ) {
        eprintln!(
            "SKIPPED: {} keeps no user extended attributes",
            vault.display()
        );
        return;
    }
    forget_the_clean_stop(&state);
    let s = TestServer::start_in(dir, vault.clone(), state, |c| c.watch = false).await;
    settled(&s).await;
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "# A\nthe editor's save\n"
    );
    assert_eq!(names(&vault), ["a.md"], "no temp file is left");
    let served = s.get_json("/v1/notes/a", 200).await.to_string();
    assert!(
        served.contains("the editor's save") && !served.contains("never acknowledged"),
        "{served}"
    );
    assert_eq!(search_slugs(&s, "editor").await, ["a"]);
    assert_eq!(search_slugs(&s, "acknowledged").await, Vec::<String>::new());
    common::wait_history(&s.svc).await;
    let blob = common::git(&s.state, &["show", "HEAD:a.md"]);
    assert_eq!(blob, "# A\nthe editor's save\n");
    let (dir, vault, state) = s.stop().await;

    assert!(common::crash_after_the_exchange(
        &path,
        "# A\nthe second editor save\n",
        refused,
        "# A\nthe editor's save\n"
    ));
    std::fs::write(&path, "# A\nsaved again after the crash\n").unwrap();
    forget_the_clean_stop(&state);
    let s = TestServer::start_in(dir, vault.clone(), state, |c| c.watch = false).await;
    settled(&s).await;
    assert_eq!(names(&vault), ["a (recovered).md", "a.md"]);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "# A\nsaved again after the crash\n"
    );
    let served = s
        .get_json("/v1/notes/a%20(recovered)", 200)
        .await
        .to_string();
    assert!(served.contains("the second editor save"), "{served}");
    assert_eq!(search_slugs(&s, "second").await, ["a (recovered)"]);
    common::wait_history(&s.svc).await;
    let blob = common::git(&s.state, &["show", "HEAD:a (recovered).md"]);
    assert_eq!(blob, "# A\nthe second editor save\n");
}

/// `git status` of `vault` made a git repository: what git would take in.
fn git_untracked(vault: &Path) -> String {
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .arg("-C")
            .arg(vault)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}");
        String::from_utf8(o.stdout).unwrap()
    };
    git(&["init", "-q"]);
    git(&["status", "--porcelain", "--untracked-files=all"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_directory_the_daemon_makes_is_ignored_by_git() {
    // The default place, inside the vault: made with a `.gitignore` of `*`.
    let s = TestServer::start(Some("vault-example"), |c| c.state_dir = None).await;
    let (dir, vault, state) = s.stop().await;
    let ignore = vault.join(".notevault/.gitignore");
    assert_eq!(std::fs::read_to_string(&ignore).unwrap(), "*\n");
    let status = git_untracked(&vault);
    assert!(status.contains("Welcome.md"), "{status}");
    assert!(!status.contains(".notevault"), "{status}");

    // A `.gitignore` the user changed is never rewritten.
    std::fs::write(&ignore, "# mine\n*\n").unwrap();
    let s = TestServer::start_in(dir, vault, state, |c| c.state_dir = None).await;
    let (_dir, vault, _) = s.stop().await;
    assert_eq!(
        std::fs::read_to_string(vault.join(".notevault/.gitignore")).unwrap(),
        "# mine\n*\n"
    );

    // A `--state-dir` made by the daemon gets one; a folder that was there gets none.
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let (_dir, _, state) = s.stop().await;
    assert_eq!(
        std::fs::read_to_string(state.join(".gitignore")).unwrap(),
        "*\n"
    );
    let (dir, vault, state) = common::temp_vault(Some("vault-example"));
    std::fs::create_dir_all(&state).unwrap();
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    let (_dir, _, state) = s.stop().await;
    assert!(!state.join(".gitignore").exists());
}
