//! Concurrency: an editor rewriting a note while API edits run against it, duplicate
//! requests racing with the same key, replays after a restart, and a hosted vault's
//! idle close racing its reload.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{res_json, TestServer};
use serde_json::{json, Value};

async fn raw(s: &TestServer, note: &str) -> Value {
    s.get_json(&format!("/v1/notes/{note}/raw"), 200).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_editor_and_api_edits_never_lose_each_other() {
    let s = TestServer::start(Some("vault-example"), |c| c.rate_limit_write_per_minute = 0).await;
    let path = s.vault.join("race.md");
    std::fs::write(&path, "# Race\n\ncounter: 0\n").unwrap();

    // The editor: appends its own lines, saving in place and by rename (as vim does),
    // always from its own buffer, like an editor that does not reload.
    let stop = Arc::new(AtomicBool::new(false));
    let editor_stop = stop.clone();
    let editor_path = path.clone();
    let editor = std::thread::spawn(move || {
        let mut n = 0;
        while !editor_stop.load(Ordering::Relaxed) && n < 60 {
            n += 1;
            std::thread::sleep(Duration::from_millis(4));
            let current = std::fs::read_to_string(&editor_path).unwrap_or_default();
            let next = format!("{current}editor {n}\n");
            if n % 2 == 0 {
                std::fs::write(&editor_path, &next).unwrap();
            } else {
                let tmp = editor_path.with_file_name(".race.md.swp");
                std::fs::write(&tmp, &next).unwrap();
                std::fs::rename(&tmp, &editor_path).unwrap();
            }
        }
        n
    });

    let mut applied = Vec::new();
    let mut moved = 0;
    for i in 0..80 {
        let note = raw(&s, "race").await;
        let text = note["content"].as_str().unwrap();
        let Some(line) = text.lines().find(|l| l.starts_with("counter: ")) else {
            continue; // caught an in-place save half-written; read again
        };
        let n: u64 = line["counter: ".len()..].parse().unwrap();
        let res = s
            .client
            .post(s.url("/v1/notes/race:edit"))
            .header("Idempotency-Key", format!("race-{i}"))
            .json(&json!({"version_id": note["version_id"], "old_string": line, "new_string": format!("counter: {}", n + 1)}))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap();
        match status {
            200 => applied.push(body),
            409 => {
                assert_eq!(body["reason"], "VERSION_MOVED", "{body}");
                moved += 1;
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let last = editor.join().unwrap();
    // One more API edit after the editor stopped: it must build on the editor's text.
    let note = raw(&s, "race").await;
    let text = note["content"].as_str().unwrap().to_string();
    let line = text
        .lines()
        .find(|l| l.starts_with("counter: "))
        .unwrap()
        .to_string();
    let res = s
        .client
        .post(s.url("/v1/notes/race:edit"))
        .header("Idempotency-Key", "race-final")
        .json(&json!({"version_id": note["version_id"], "old_string": line, "new_string": "counter: final"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let final_text = std::fs::read_to_string(&path).unwrap();
    // The editor builds each save on the file as it finds it, so every line it ever
    // wrote must still be there: the daemon overwrote none of its saves.
    for k in 1..=last {
        assert!(
            final_text.contains(&format!("editor {k}\n")),
            "editor save {k} was lost: {final_text}"
        );
    }
    assert!(final_text.contains("counter: final"));
    assert!(!applied.is_empty(), "some API edits applied");
    eprintln!(
        "applied {} API edits, {moved} answered VERSION_MOVED, editor saved {last} times",
        applied.len()
    );
    // Every applied edit is a commit in history.
    common::wait_history(&s.svc).await;
    let log = common::git(&s.state, &["log", "--format=%B"]);
    for receipt in &applied {
        let v = receipt["version_id"].as_str().unwrap();
        assert!(
            log.contains(&format!("Notevault-Version: {v}")),
            "{v} in history"
        );
    }
    let leftovers: Vec<_> = std::fs::read_dir(&s.vault)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".notevault-tmp")
        })
        .collect();
    assert!(leftovers.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_duplicates_apply_once_and_replay() {
    let s = TestServer::start(Some("vault-example"), |c| c.rate_limit_write_per_minute = 0).await;
    let seq_before = s.svc.committed_seq();
    let body = json!({"slug": "dup", "content": "once\n"});
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let client = s.client.clone();
        let url = s.url("/v1/notes");
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let res = client
                .post(url)
                .header("Idempotency-Key", "same-key")
                .json(&body)
                .send()
                .await
                .unwrap();
            (res.status().as_u16(), res.text().await.unwrap())
        }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
    assert_eq!(answers[0].0, 201);
    assert_eq!(
        s.svc.committed_seq(),
        seq_before + 1,
        "applied exactly once"
    );
}

#[tokio::test]
async fn replays_survive_a_restart() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let body = json!({"slug": "kept", "content": "x\n"});
    let res = s
        .client
        .post(s.url("/v1/notes"))
        .header("Idempotency-Key", "restart-key")
        .json(&body)
        .send()
        .await
        .unwrap();
    let first = res_json(res, 201, "create").await;
    let (dir, vault, state) = s.stop().await;
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    let res = s
        .client
        .post(s.url("/v1/notes"))
        .header("Idempotency-Key", "restart-key")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res_json(res, 201, "replay").await, first);
    let res = s
        .client
        .post(s.url("/v1/notes"))
        .header("Idempotency-Key", "restart-key")
        .json(&json!({"slug": "other", "content": ""}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res_json(res, 422, "reuse").await["reason"],
        "IDEMPOTENCY_KEY_REUSED"
    );
    let note = s.get_json("/v1/notes/kept?limit=1", 200).await;
    assert_eq!(
        note["version_id"], first["version_id"],
        "the write's version survives the restart"
    );
}

/// A write that reaches the pipeline once the daemon is stopping (`Daemon::stop` set
/// `State::stopped`) answers 503 `SERVER_BUSY` and writes nothing: no file, no revision,
/// nothing for history to record after the stop.
#[tokio::test]
async fn a_write_after_the_stop_began_writes_nothing() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    common::wait_history(&s.svc).await;
    let seq = s.svc.committed_seq();
    s.svc.stopped.store(true, Ordering::SeqCst);
    let body = s
        .refused(
            "a create while stopping",
            reqwest::Method::POST,
            "/v1/notes",
            Some("late-1"),
            Some(json!({"title": "Late", "content": "# Late\n"})),
            503,
            "SERVER_BUSY",
        )
        .await;
    assert!(
        body["message"].as_str().unwrap().contains("stopping"),
        "{body}"
    );
    assert!(!s.vault.join("Late.md").exists());
    assert_eq!(s.svc.committed_seq(), seq);
    assert_eq!(s.svc.history.status().pending, 0);
}

/// Whether a read lease on `path` is refused because it is open for writing, on a
/// filesystem where the daemon takes that to mean a writer; else the test is skipped.
fn refused_for_a_writer(path: &std::path::Path) -> bool {
    use std::os::fd::AsRawFd;
    if !notevault::vault::fsio::watches_open_writers(path) {
        return false;
    }
    let probe = std::fs::File::open(path).unwrap();
    // SAFETY: `probe` is an open descriptor for the duration of the calls.
    let rc = unsafe { libc::fcntl(probe.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK) };
    let errno = std::io::Error::last_os_error().raw_os_error();
    if rc == 0 {
        // SAFETY: as above.
        unsafe { libc::fcntl(probe.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
    }
    rc != 0 && errno == Some(libc::EAGAIN)
}

/// A note another program has open for writing (an editor about to save it in place) is
/// not written under it: an edit, and a move with new content into a new folder, answer
/// `VERSION_MOVED` and leave the note where and as it was, and no folder made; once the
/// file is closed the same write applies.
#[tokio::test]
async fn a_note_open_for_writing_is_left_where_and_as_it_is() {
    let s = TestServer::start(Some("vault-example"), |c| c.rate_limit_write_per_minute = 0).await;
    let path = s.vault.join("scratchpad.md");
    let moved_to = s.vault.join("brand-new/scratchpad.md");
    let before = std::fs::read(&path).unwrap();
    let version = s.get_json("/v1/notes/scratchpad", 200).await["version_id"]
        .as_str()
        .unwrap()
        .to_string();
    let held = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    if !refused_for_a_writer(&path) {
        eprintln!("SKIPPED: no file leases here");
        return;
    }
    let notes = common::temp_list(&s.vault);
    let edit = json!({"version_id": version, "content": "# Scratchpad\n\nours\n"});
    let mv = json!({"version_id": version, "folder": "brand-new", "content": "# Moved\n"});
    for (what, mask, body, key) in [
        ("an edit", "content", &edit, "held-1"),
        ("a move with new content", "folder,content", &mv, "held-2"),
    ] {
        let err = s
            .refused(
                what,
                reqwest::Method::PATCH,
                &format!("/v1/notes/scratchpad?update_mask={mask}"),
                Some(key),
                Some(body.clone()),
                409,
                "VERSION_MOVED",
            )
            .await;
        let message = err["message"].as_str().unwrap();
        assert!(message.contains("open for writing"), "{what}: {err}");
        // The note is named by its path in the vault, not where the vault is.
        assert!(message.contains("scratchpad.md"), "{what}: {err}");
        assert!(
            !message.contains(&*s.vault.to_string_lossy()),
            "{what}: {err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before, "{what}");
        assert!(!moved_to.exists(), "{what}: the note stays where it was");
        assert!(
            !s.vault.join("brand-new").exists(),
            "{what}: no folder is left made"
        );
        assert_eq!(common::temp_list(&s.vault), notes, "{what}: no file added");
    }
    drop(held);
    let receipt = s
        .call(
            reqwest::Method::PATCH,
            "/v1/notes/scratchpad?update_mask=folder,content",
            Some("held-3"),
            Some(mv),
            200,
        )
        .await;
    assert_eq!(receipt["status"], "applied", "{receipt}");
    assert_eq!(std::fs::read(&moved_to).unwrap(), b"# Moved\n");
    assert!(!path.exists());
}

/// A hosted vault closed as idle while a request loads it again: the load waits for the
/// close to finish (its old index shuts down in the same cache folder), then serves. Here
/// the close is held inside its stop (this test holds the old vault's write lock, which
/// the stop takes before the index shuts down) while the load runs: before the load
/// waited for the close, it found the old index still holding the cache folder and
/// failed after 5 s ("another notevault process serves this vault").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_vault_loaded_while_its_idle_close_runs_waits_for_it() {
    use notevault::vaults::Directory;
    if !common::mode::hosted_available() {
        return;
    }
    let s = TestServer::start_as(common::Mode::Hosted, None, |c| c.vault_idle_seconds = 1).await;
    let res = s
        .write(
            reqwest::Method::POST,
            "/v1/notes",
            "k-idle",
            json!({"slug": "kept", "content": "# Kept\n\nwombat\n"}),
        )
        .await;
    let seq = res_json(res, 201, "create").await["committed_seq"]
        .as_i64()
        .unwrap();
    let (directory, id) = (s.hosted().directory.clone(), s.hosted().vault_id.clone());
    let open = move || {
        let (directory, id) = (directory.clone(), id.clone());
        tokio::task::spawn_blocking(move || directory.open(&id))
    };
    let old = open().await.unwrap().unwrap().unwrap();
    let held = old.lock();
    // `closed` is set as the close begins, after the vault left the open ones.
    common::eventually("the idle closer begins to close the vault", || async {
        old.closed()
    })
    .await;
    let mut reload = open();
    // Held until the load answers (it never does while the close waits here, once loads
    // wait for closes), at most a while past the 5 s a load waited for the old index.
    let early = tokio::time::timeout(Duration::from_secs(10), &mut reload).await;
    drop(held);
    let loaded = match early {
        Ok(answer) => answer,
        Err(_) => reload.await,
    };
    let new = loaded
        .unwrap()
        .expect("the vault loads once the close is done")
        .unwrap();
    assert!(!Arc::ptr_eq(&old, &new) && !new.closed());
    let hits = s
        .get_json(&format!("/v1/search?q=wombat&min_seq={seq}"), 200)
        .await;
    assert_eq!(hits["results"][0]["slug"], "kept", "{hits}");
}
