//! history.git: the first start records the vault, a later start records what changed
//! while the daemon was off, note ids survive restarts, and git's own tools agree.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::{git, TestServer};

#[tokio::test]
async fn bootstrap_restart_and_offline_changes() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    common::wait_history(&s.svc).await;
    let files = git(&s.state, &["ls-tree", "-r", "--name-only", "HEAD"]);
    let mut in_history: Vec<&str> = files.lines().collect();
    in_history.sort();
    let mut on_disk: Vec<String> = walk(&s.vault);
    on_disk.sort();
    assert_eq!(in_history, on_disk);
    let log = git(&s.state, &["log", "--format=%s%n%b"]);
    assert!(log.contains("Record the vault as found"));
    assert!(log.contains("Notevault-Actor: filesystem"));
    let welcome = s.get_json("/v1/notes/Welcome?limit=1", 200).await;
    let roadmap = s.get_json("/v1/notes/projects/roadmap?limit=1", 200).await;

    let (dir, vault, state) = s.stop().await;
    // While stopped: one edit, one delete, one new note, one rename.
    std::fs::write(vault.join("Welcome.md"), "# Welcome, edited offline\n").unwrap();
    std::fs::remove_file(vault.join("Inbox.md")).unwrap();
    std::fs::write(vault.join("new note.md"), "brand new\n").unwrap();
    std::fs::rename(
        vault.join("projects/roadmap.md"),
        vault.join("projects/roadmap-2027.md"),
    )
    .unwrap();

    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    // After a clean stop the start's verify records what changed while stopped.
    common::eventually("the start's verify is done", || async {
        s.get_json("/v1/index-status", 200).await["start_scan"]["verifying"] == false
    })
    .await;
    common::wait_history(&s.svc).await;
    let log = git(&s.state, &["log", "--format=%s"]);
    assert_eq!(
        log.lines().count(),
        2,
        "one commit for the offline changes: {log}"
    );
    assert!(log
        .lines()
        .next()
        .unwrap()
        .contains("while notevault was stopped"));
    let changed = git(&s.state, &["show", "--name-status", "--format=", "HEAD"]);
    assert!(changed.contains("Welcome.md"), "{changed}");
    assert!(changed.contains("Inbox.md"));
    assert!(changed.contains("new note.md"));
    assert!(changed.contains("roadmap-2027.md"));

    let again = s.get_json("/v1/notes/Welcome?limit=1", 200).await;
    assert_eq!(
        again["note_id"], welcome["note_id"],
        "note_id survives a restart"
    );
    assert_ne!(again["version_id"], welcome["version_id"]);
    let moved = s
        .get_json("/v1/notes/projects/roadmap-2027?limit=1", 200)
        .await;
    assert_eq!(
        moved["note_id"], roadmap["note_id"],
        "a rename keeps the note_id"
    );
    s.get_error("/v1/notes/Inbox", 404, "NOTE_NOT_FOUND").await;

    let fsck = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(s.state.join("history.git"))
        .args(["fsck", "--strict"])
        .output()
        .unwrap();
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
    assert!(
        fsck.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
    let (_dir, vault, state) = s.stop().await;

    // A third start with nothing changed adds no commit and keeps every version.
    let s = TestServer::start_in(_dir, vault, state, |_| {}).await;
    common::wait_history(&s.svc).await;
    assert_eq!(git(&s.state, &["log", "--format=%s"]).lines().count(), 2);
    assert_eq!(
        s.get_json("/v1/notes/Welcome?limit=1", 200).await["version_id"],
        again["version_id"]
    );
}

#[tokio::test]
async fn the_users_own_git_folder_is_never_touched() {
    let (dir, vault, state) = common::temp_vault(Some("vault-example"));
    std::fs::create_dir(vault.join(".git")).unwrap();
    std::fs::write(vault.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(vault.join(".git/notes.md"), "not a note\n").unwrap();
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    common::wait_history(&s.svc).await;
    assert_eq!(std::fs::read_dir(s.vault.join(".git")).unwrap().count(), 2);
    // A listing prefix goes through the one path check: `.git` is not part of the notes.
    s.refused(
        "prefix .git",
        reqwest::Method::GET,
        "/v1/notes?prefix=.git",
        None,
        None,
        400,
        "UNSAFE_PATH",
    )
    .await;
    let list = s.get_json("/v1/notes?prefix=.gi", 200).await;
    assert_eq!(list["coverage"]["notes_matched"], 0);
}

/// Every file history holds: notes and attachments, outside the hidden folders.
fn walk(root: &std::path::Path) -> Vec<String> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            e.path()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// The first start records the vault as found, even when a write lands before the
/// history thread has written that first commit (it once re-read files late and
/// recorded the write's bytes as the "found" revision).
#[tokio::test]
async fn the_first_revision_holds_the_bytes_found_at_start() {
    let s = edit_right_after_first_start("as found\n", "as found", "written").await;
    let first = s.get_json("/v1/notes/zznote:listRevisions", 200).await["versions"][1]
        ["version_id"]
        .as_str()
        .unwrap()
        .to_string();
    let diff = s
        .get_json(&format!("/v1/notes/zznote:diff?from={first}"), 200)
        .await;
    let diff = diff["diff"].as_str().unwrap();
    assert!(
        diff.contains("-as found") && diff.contains("+written"),
        "{diff}"
    );
}

/// A note over 10 MiB has no bytes kept in memory, so the first commit reads it from
/// disk when that commit is written: a write to such a note waits for it.
#[tokio::test]
async fn a_note_too_large_to_keep_is_recorded_as_found_too() {
    let big = format!("as found\n{}", "a line of a large note\n".repeat(480_000));
    assert!(big.len() > 10 * 1024 * 1024);
    edit_right_after_first_start(&big, "as found", "written").await;
}

/// Start on a fresh vault of 48 MB of filler notes (their first commit takes a while)
/// and `zznote.md` holding `content` (named to sort last: a late read of it comes after
/// the edit), replace `old` with `new` at once, and check what history holds.
async fn edit_right_after_first_start(content: &str, old: &str, new: &str) -> TestServer {
    let (dir, vault, state) = common::temp_vault(None);
    for i in 0..3000 {
        let words = format!("filler {i} takes a while to compress. ").repeat(500);
        std::fs::write(vault.join(format!("filler {i}.md")), words).unwrap();
    }
    std::fs::write(vault.join("zznote.md"), content).unwrap();
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    // The listing, not a read: reading 10 MiB in a debug build outlasts the first commit.
    let list = s.get_json("/v1/notes?prefix=zznote", 200).await;
    let note = &list["notes"][0];
    let res = s
        .client
        .post(s.url("/v1/notes/zznote:edit"))
        .header("Idempotency-Key", "edit-early")
        .json(&serde_json::json!({
            "version_id": note["version_id"],
            "old_string": old,
            "new_string": new,
        }))
        .send()
        .await
        .unwrap();
    common::res_json(res, 200, "edit").await;
    common::wait_history(&s.svc).await;
    let root = git(&s.state, &["rev-list", "--max-parents=0", "HEAD"]);
    let found = git(&s.state, &["show", &format!("{}:zznote.md", root.trim())]);
    assert!(
        found == content,
        "the bootstrap commit holds the note as found"
    );
    let now = git(&s.state, &["show", "HEAD:zznote.md"]);
    assert!(now == content.replacen(old, new, 1), "the edit's commit");
    s
}

/// History that fell behind the revisions (a stall, or a stop before the commit of a
/// watcher batch was written) never answers a wrong diff: at the next start the vault is
/// recorded as found, a revision that is still the note's current version is read from
/// that commit, and one whose bytes never reached history answers an envelope that says
/// so; the loss is reported by `GET /v1/index-status` and survives further restarts.
#[tokio::test]
async fn revisions_history_never_got_answer_an_envelope_not_a_wrong_diff() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    common::wait_history(&s.svc).await;
    // Two edits by an editor: two watcher revisions, each with its own commit.
    for text in ["# Welcome\n\nedit one\n", "# Welcome\n\nedit two\n"] {
        std::fs::write(s.vault.join("Welcome.md"), text).unwrap();
        common::eventually("the watcher records the edit", || async {
            let versions = s.get_json("/v1/notes/Welcome:listRevisions", 200).await;
            versions["versions"][0]["content_hash"]
                == format!("blake3:{}", blake3::hash(text.as_bytes()).to_hex())
        })
        .await;
    }
    common::wait_history(&s.svc).await;
    let versions = s.get_json("/v1/notes/Welcome:listRevisions", 200).await["versions"].clone();
    let (two, one, found) = (
        versions[0]["version_id"].as_str().unwrap().to_string(),
        versions[1]["version_id"].as_str().unwrap().to_string(),
        versions[2]["version_id"].as_str().unwrap().to_string(),
    );
    let (dir, vault, state) = s.stop().await;
    // Those two commits never made it: history is two changes behind.
    git(&state, &["update-ref", "HEAD", "HEAD~2"]);

    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    common::wait_history(&s.svc).await;
    let subject = git(&s.state, &["log", "-1", "--format=%s"]);
    assert!(subject.contains("history was behind"), "{subject}");
    // The current version's bytes are in the commit of the vault as found.
    let diff = s
        .get_json(
            &format!("/v1/notes/Welcome:diff?from={found}&to={two}"),
            200,
        )
        .await;
    assert!(
        diff["diff"].as_str().unwrap().contains("+edit two"),
        "{diff}"
    );
    // The edit in between was never recorded: an envelope, not an empty or whole diff.
    for path in [
        format!("/v1/notes/Welcome:diff?from={one}"),
        format!("/v1/notes/Welcome:diff?from={found}&to={one}"),
    ] {
        s.get_error(&path, 410, "REVISION_CONTENT_MISSING").await;
    }
    let history = s.get_json("/v1/index-status", 200).await["history"].clone();
    assert_eq!(history["lost_revisions"], 1, "{history}");
    assert_eq!(history["backlog"], 0, "{history}");
    assert_eq!(
        history["head_seq"],
        s.get_json("/v1/index-status", 200).await["committed_seq"]
    );

    // Another start: nothing to catch up (no commit), the loss still reported, the
    // answers the same.
    let commits = git(&s.state, &["rev-list", "--count", "HEAD"]);
    let (dir, vault, state) = s.stop().await;
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    common::wait_history(&s.svc).await;
    assert_eq!(git(&s.state, &["rev-list", "--count", "HEAD"]), commits);
    let history = s.get_json("/v1/index-status", 200).await["history"].clone();
    assert_eq!(history["lost_revisions"], 1, "{history}");
    s.get_error(
        &format!("/v1/notes/Welcome:diff?from={one}"),
        410,
        "REVISION_CONTENT_MISSING",
    )
    .await;
    git(&s.state, &["fsck", "--strict", "--no-dangling"]);
}

/// A first start of a vault of many notes writes their blobs as one pack (not a loose
/// object per note); git reads every note back from it and `git fsck` finds nothing.
#[tokio::test]
async fn a_large_first_start_is_one_pack_that_git_reads() {
    let (dir, vault, state) = common::temp_vault(None);
    let mut expected = Vec::new();
    for i in 0..600 {
        let rel = format!("folder-{}/note {i}.md", i % 7);
        // Some notes share their bytes: the pack holds them once.
        let body = if i % 50 == 0 {
            "# the same\n".to_string()
        } else {
            format!("# Note {i}\n\n{}\n", "words ".repeat(i % 90))
        };
        std::fs::create_dir_all(vault.join(&rel).parent().unwrap()).unwrap();
        std::fs::write(vault.join(&rel), &body).unwrap();
        expected.push((rel, body));
    }
    // An attachment (read from its file, not kept in memory) is written as a loose
    // object beside the pack, so large files are never all held in memory at once.
    let photo: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::create_dir_all(vault.join("files")).unwrap();
    std::fs::write(vault.join("files/photo.png"), &photo).unwrap();
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    common::wait_history(&s.svc).await;
    let photo_id = std::process::Command::new("git")
        .args(["hash-object"])
        .arg(s.vault.join("files/photo.png"))
        .output()
        .unwrap();
    let photo_id = String::from_utf8(photo_id.stdout).unwrap();
    assert_eq!(
        git(&s.state, &["rev-parse", "HEAD:files/photo.png"]).trim(),
        photo_id.trim()
    );
    let packs: Vec<String> = std::fs::read_dir(s.state.join("history.git/objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        packs.iter().filter(|n| n.ends_with(".pack")).count(),
        1,
        "{packs:?}"
    );
    assert_eq!(
        packs.iter().filter(|n| n.ends_with(".idx")).count(),
        1,
        "{packs:?}"
    );
    assert!(
        packs.iter().all(|n| n.starts_with("pack-")),
        "no temporary file is left: {packs:?}"
    );
    // The loose objects are the trees and the commit only.
    let counted = git(&s.state, &["count-objects", "-v"]);
    let loose: usize = counted
        .lines()
        .find_map(|l| l.strip_prefix("count: "))
        .unwrap()
        .parse()
        .unwrap();
    // Trees, the commit and the attachment; the pack holds the 589 distinct notes.
    assert!(loose <= 11, "{counted}");
    assert!(counted.contains("in-pack: 589\n"), "{counted}");
    let fsck = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(s.state.join("history.git"))
        .args(["fsck", "--full", "--strict"])
        .output()
        .unwrap();
    assert!(
        fsck.status.success() && fsck.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
    let listed = git(&s.state, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert_eq!(listed.lines().count(), expected.len() + 1);
    for (rel, body) in expected.iter().step_by(37) {
        assert_eq!(&git(&s.state, &["show", &format!("HEAD:{rel}")]), body);
    }
    // The API's reads of history find the packed bytes too: a diff against the version
    // found at start.
    let (rel, _) = &expected[123];
    let slug = rel.trim_end_matches(".md");
    let note = s.get_json(&format!("/v1/notes/{slug}?limit=1"), 200).await;
    let found = note["version_id"].as_str().unwrap().to_string();
    let res = s
        .client
        .post(s.url(&format!("/v1/notes/{slug}:edit")))
        .header("Idempotency-Key", "edit-packed")
        .json(&serde_json::json!({
            "version_id": found,
            "old_string": "# Note 123",
            "new_string": "# Note one two three",
        }))
        .send()
        .await
        .unwrap();
    common::res_json(res, 200, "edit").await;
    let diff = s
        .get_json(&format!("/v1/notes/{slug}:diff?from={found}"), 200)
        .await;
    let diff = diff["diff"].as_str().unwrap();
    assert!(
        diff.contains("-# Note 123") && diff.contains("+# Note one two three"),
        "{diff}"
    );
}

/// The commit of `history.git` whose `Notevault-Seq` covers `seq`, reachable from HEAD
/// (`None`: no such commit yet), and the seqs it covers.
fn commit_of_seq(state: &std::path::Path, seq: i64) -> Option<(String, i64, i64)> {
    let log = git(
        state,
        &[
            "log",
            "--format=%H %(trailers:key=Notevault-Seq,valueonly,separator=%x2C)",
            "HEAD",
        ],
    );
    log.lines().find_map(|line| {
        let (id, range) = line.split_once(' ')?;
        let (lo, hi) = range
            .trim()
            .split_once('-')
            .unwrap_or((range.trim(), range.trim()));
        let (lo, hi) = (lo.parse::<i64>().ok()?, hi.parse::<i64>().ok()?);
        (lo <= seq && seq <= hi).then(|| (id.to_string(), lo, hi))
    })
}

/// Right when a receipt arrives: the commit carrying its seq is reachable from HEAD and
/// holds the note's bytes as written.
async fn assert_in_history(
    state: &std::path::Path,
    receipt: &serde_json::Value,
    path: &str,
    bytes: &str,
) {
    let seq = receipt["committed_seq"].as_i64().expect("a seq");
    let (state, path, bytes) = (state.to_path_buf(), path.to_string(), bytes.to_string());
    tokio::task::spawn_blocking(move || {
        let (commit, _, _) = commit_of_seq(&state, seq)
            .unwrap_or_else(|| panic!("no commit reachable from HEAD carries seq {seq} ({path})"));
        assert_eq!(
            git(&state, &["show", &format!("{commit}:{path}")]),
            bytes,
            "{path} at seq {seq}"
        );
    })
    .await
    .unwrap();
}

/// A receipt never leaves before its change is in `history.git`: eight writers create
/// and edit their own notes at once (so their writes share group commits), and the git
/// CLI reads `history.git` as each receipt arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_receipt_leaves_only_once_its_change_is_in_history() {
    let s =
        std::sync::Arc::new(TestServer::start(None, |c| c.rate_limit_write_per_minute = 0).await);
    common::wait_history(&s.svc).await;
    let mut writers = Vec::new();
    for w in 0..8 {
        let s = s.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..3 {
                let slug = format!("w{w}/n{i}");
                let path = format!("{slug}.md");
                let first = format!("# Writer {w} note {i}\n\nfirst\n");
                let receipt = s
                    .call(
                        reqwest::Method::POST,
                        "/v1/notes",
                        Some(&format!("c-{w}-{i}")),
                        Some(serde_json::json!({"slug": slug, "content": first})),
                        201,
                    )
                    .await;
                assert_in_history(&s.state, &receipt, &path, &first).await;
                let receipt = s
                    .call(
                        reqwest::Method::POST,
                        &format!("/v1/notes/w{w}%2Fn{i}:edit"),
                        Some(&format!("e-{w}-{i}")),
                        Some(serde_json::json!({
                            "version_id": receipt["version_id"],
                            "old_string": "first",
                            "new_string": "second",
                        })),
                        200,
                    )
                    .await;
                assert_in_history(&s.state, &receipt, &path, &first.replace("first", "second"))
                    .await;
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
}

/// Writes that arrive while the write lock is held are applied as one group: one history
/// commit carries them all, each keeps its own seq and version, and a write of the group
/// that fails (a name taken, a stale version) gets its own answer without failing the
/// others.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_that_arrive_together_share_one_commit_and_keep_their_own_answers() {
    let s = std::sync::Arc::new(TestServer::start(None, |_| {}).await);
    let taken = s
        .call(
            reqwest::Method::POST,
            "/v1/notes",
            Some("taken"),
            Some(serde_json::json!({"slug": "taken", "content": "# Taken\n"})),
            201,
        )
        .await;
    common::wait_history(&s.svc).await;
    let heads_before = git(&s.state, &["rev-list", "--count", "HEAD"]);

    // Play a leader at work until all ten writes are queued behind it, then step down
    // as a leader does (the waiting threads are woken with the queue held).
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let svc = s.svc.clone();
    let holder = tokio::task::spawn_blocking(move || {
        let queue = &svc.write_queue;
        let leading = queue.lead.lock();
        held_tx.send(()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while queue.jobs.lock().len() < 10 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let jobs = queue.jobs.lock();
        let queued = jobs.len();
        drop(leading);
        queue.changed.notify_all();
        drop(jobs);
        queued
    });
    held_rx.recv().unwrap();
    let mut writes = Vec::new();
    for i in 0..8 {
        let s = s.clone();
        writes.push(tokio::spawn(async move {
            let content = format!("# Grouped {i}\n");
            let receipt = s
                .call(
                    reqwest::Method::POST,
                    "/v1/notes",
                    Some(&format!("g{i}")),
                    Some(serde_json::json!({"slug": format!("g{i}"), "content": content})),
                    201,
                )
                .await;
            assert_in_history(&s.state, &receipt, &format!("g{i}.md"), &content).await;
            receipt
        }));
    }
    let collide = {
        let s = s.clone();
        tokio::spawn(async move {
            s.refused(
                "a create of a name taken, in a group",
                reqwest::Method::POST,
                "/v1/notes",
                Some("collide"),
                Some(serde_json::json!({"slug": "taken", "content": "other\n"})),
                409,
                "NAME_COLLISION",
            )
            .await
        })
    };
    let stale = {
        let s = s.clone();
        tokio::spawn(async move {
            s.refused(
                "an edit of a stale version, in a group",
                reqwest::Method::POST,
                "/v1/notes/taken:edit",
                Some("stale"),
                Some(serde_json::json!({
                    "version_id": "0190aaaa-0000-7000-8000-000000000000",
                    "old_string": "Taken",
                    "new_string": "Edited",
                })),
                409,
                "VERSION_MOVED",
            )
            .await
        })
    };
    assert_eq!(
        holder.await.unwrap(),
        10,
        "all ten writes queued behind the lock"
    );
    let mut receipts = Vec::new();
    for w in writes {
        receipts.push(w.await.unwrap());
    }
    collide.await.unwrap();
    stale.await.unwrap();

    let mut seqs: Vec<i64> = receipts
        .iter()
        .map(|r| r["committed_seq"].as_i64().unwrap())
        .collect();
    seqs.sort();
    let first = taken["committed_seq"].as_i64().unwrap() + 1;
    assert_eq!(seqs, (first..first + 8).collect::<Vec<_>>(), "a seq each");
    let mut versions: Vec<&str> = receipts
        .iter()
        .map(|r| r["version_id"].as_str().unwrap())
        .collect();
    versions.sort();
    versions.dedup();
    assert_eq!(versions.len(), 8, "a version each");
    let (commit, lo, hi) = commit_of_seq(&s.state, first).unwrap();
    assert_eq!((lo, hi), (first, first + 7), "one commit carries the eight");
    assert_eq!(git(&s.state, &["rev-parse", "HEAD"]).trim(), commit);
    let heads_after = git(&s.state, &["rev-list", "--count", "HEAD"]);
    assert_eq!(
        heads_after.trim().parse::<u64>().unwrap(),
        heads_before.trim().parse::<u64>().unwrap() + 1
    );
    // Each keeps its own revision, and its own op in the sync log.
    for r in &receipts {
        let slug = r["slug"].as_str().unwrap();
        let revisions = s
            .get_json(&format!("/v1/notes/{slug}:listRevisions"), 200)
            .await;
        let listed = revisions.to_string();
        assert!(
            listed.contains(r["version_id"].as_str().unwrap()),
            "{listed}"
        );
    }
    let ops = s
        .get_json(&format!("/v1/sync/ops?after_seq={}", first - 1), 200)
        .await;
    let listed = ops.to_string();
    for r in &receipts {
        assert!(
            listed.contains(r["version_id"].as_str().unwrap()),
            "{listed}"
        );
    }
    // The stale edit and the taken name changed nothing.
    assert_eq!(
        std::fs::read_to_string(s.vault.join("taken.md")).unwrap(),
        "# Taken\n"
    );
}
