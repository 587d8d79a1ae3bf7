//! A device push never loses or invents a change, through the real binaries: a daemon
//! (open local mode) and a device run by `notevault device init|push|pull`. Every refusal
//! but a concurrent edit (a spent write budget, the rate limit, a `read_only` policy, a
//! note deleted or created on the daemon meanwhile, the daemon killed in the middle of a
//! batch) leaves the device's files and its `state.json` byte for byte as they were, the
//! vault unchanged, and exits non-zero with the reason and a hint; the next push sends
//! the same ops under the same keys, so a queued op is queued once and a half-applied
//! batch is applied exactly once. A rename on the device is a move on the daemon.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the user and the operator: they write folders and run binaries"
)]

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// `notevault device <args> <dir>` as this file's devices run it.
fn device(args: &[&str], dir: &Path, ok: bool) -> String {
    common::device::device(args, dir, None, ok)
}

use common::device::user_files;

fn state_json(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join(".notevault-device/state.json")).unwrap()
}

fn outbox(dir: &Path) -> Option<Vec<u8>> {
    std::fs::read(dir.join(".notevault-device/outbox.json")).ok()
}

/// Everything a refusal must leave alone: the device's files, its state, the vault.
#[derive(Debug, PartialEq)]
struct Seen {
    files: BTreeMap<String, Vec<u8>>,
    state: Vec<u8>,
    vault: BTreeMap<String, (Vec<u8>, std::time::SystemTime)>,
}

fn seen(phone: &Path, vault: &Path) -> Seen {
    Seen {
        files: user_files(phone),
        state: state_json(phone),
        vault: common::snapshot(vault),
    }
}

/// A daemon on a copy of `vault-example` and a device `phone` that pulled it.
struct Setup {
    _dir: tempfile::TempDir,
    vault: PathBuf,
    daemon: common::Daemon,
    phone: PathBuf,
}

fn setup(env: &[(&str, &str)]) -> Setup {
    let (dir, vault, state) = common::temp_vault(Some("vault-example"));
    let daemon = common::spawn(&vault, &state, env);
    let phone = dir.path().join("phone");
    device(
        &["init", "--server", &daemon.base, "--device-id", "phone"],
        &phone,
        true,
    );
    Setup {
        _dir: dir,
        vault,
        daemon,
        phone,
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = self.daemon.child.kill();
        let _ = self.daemon.child.wait();
    }
}

/// Call the daemon's API: status and JSON body.
async fn api(base: &str, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .header("Idempotency-Key", uuid::Uuid::new_v4().to_string());
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn settings(base: &str, mask: &str, body: Value) {
    let path = format!("/v1/vault/write-settings?update_mask={mask}");
    let (status, answer) = api(base, reqwest::Method::PATCH, &path, Some(body)).await;
    assert_eq!(status, 200, "{answer}");
}

async fn pending(base: &str) -> Vec<Value> {
    let (status, list) = api(
        base,
        reqwest::Method::GET,
        "/v1/writes?status=pending",
        None,
    )
    .await;
    assert_eq!(status, 200, "{list}");
    list["writes"].as_array().unwrap().clone()
}

/// No conflicted copy anywhere, on the device or in the vault.
fn no_conflict_copies(phone: &Path, vault: &Path) {
    for (rel, _) in user_files(phone).into_iter().chain(
        common::snapshot(vault)
            .into_iter()
            .map(|(rel, (bytes, _))| (rel, bytes)),
    ) {
        assert!(!rel.contains("(conflict"), "{rel}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_write_budget_keeps_the_edit_and_the_state_then_applies_it_once() {
    let s = setup(&[("RATE_LIMIT_WRITE_PER_MINUTE", "0")]);
    let base = s.daemon.base.clone();
    settings(&base, "write_budget", json!({"write_budget": 1})).await;
    // The budget's one write goes to an edit of Welcome.
    std::fs::write(
        s.phone.join("Welcome.md"),
        "# Welcome\n\nedited on the phone\n",
    )
    .unwrap();
    device(&["push"], &s.phone, true);
    let inbox = "# Inbox\n\n- [ ] call the plumber (phone)\n";
    std::fs::write(s.phone.join("Inbox.md"), inbox).unwrap();
    let before = seen(&s.phone, &s.vault);

    // Refused twice: nothing moves, the reason and the hint are said, the key is kept.
    let said = device(&["push"], &s.phone, false);
    assert!(
        said.contains("Inbox.md: not pushed: 429 WRITE_BUDGET_EXCEEDED"),
        "{said}"
    );
    assert!(said.contains("hint: "), "{said}");
    assert!(said.contains("0 kept as conflicted copies"), "{said}");
    assert_eq!(seen(&s.phone, &s.vault), before);
    let kept = outbox(&s.phone).expect("the op waits in the outbox");
    device(&["push"], &s.phone, false);
    assert_eq!(seen(&s.phone, &s.vault), before);
    assert_eq!(outbox(&s.phone), Some(kept));

    // With budget again, the same op applies: the note is edited, not deleted.
    settings(&base, "write_budget", json!({"write_budget": 0})).await;
    let said = device(&["push"], &s.phone, true);
    assert!(said.contains("pushed 1 changes"), "{said}");
    assert_eq!(
        std::fs::read_to_string(s.vault.join("Inbox.md")).unwrap(),
        inbox
    );
    assert!(!s.vault.join(".trash/Inbox.md").exists());
    no_conflict_copies(&s.phone, &s.vault);
    assert_eq!(outbox(&s.phone), None);
    let said = device(&["push"], &s.phone, true);
    assert!(said.contains("pushed 0 changes"), "{said}");
    assert_eq!(
        std::fs::read_to_string(s.vault.join("Inbox.md")).unwrap(),
        inbox
    );
    let (_, revisions) = api(
        &base,
        reqwest::Method::GET,
        "/v1/notes/Inbox:listRevisions",
        None,
    )
    .await;
    let actors: Vec<&str> = revisions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["actor"].as_str())
        .filter(|a| a.contains("phone"))
        .collect();
    assert_eq!(actors.len(), 1, "one revision by the phone: {revisions}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limit_keeps_the_edit_and_the_state() {
    // One write a minute: the init's checkpoint spends it.
    let s = setup(&[("RATE_LIMIT_WRITE_PER_MINUTE", "1")]);
    std::fs::write(s.phone.join("Inbox.md"), "# Inbox\n\nrate limited\n").unwrap();
    let before = seen(&s.phone, &s.vault);
    let said = device(&["push"], &s.phone, false);
    assert!(said.contains("429 RATE_LIMITED"), "{said}");
    assert!(said.contains("hint: "), "{said}");
    assert_eq!(seen(&s.phone, &s.vault), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_policy_changes_nothing_and_a_queued_push_is_queued_once() {
    let s = setup(&[("RATE_LIMIT_WRITE_PER_MINUTE", "0")]);
    let base = s.daemon.base.clone();
    std::fs::remove_file(s.phone.join("scratchpad.md")).unwrap();
    let before = seen(&s.phone, &s.vault);

    // read_only: refused, nothing moves.
    settings(&base, "write_policy", json!({"write_policy": "read_only"})).await;
    let said = device(&["push"], &s.phone, false);
    assert!(
        said.contains("scratchpad.md: not pushed: 422 WRITE_REFUSED"),
        "{said}"
    );
    assert_eq!(seen(&s.phone, &s.vault), before);

    // review_destructive: the delete is queued (pending, not applied), once over two
    // pushes.
    settings(
        &base,
        "write_policy",
        json!({"write_policy": "review_destructive"}),
    )
    .await;
    for _ in 0..2 {
        let said = device(&["push"], &s.phone, false);
        assert!(said.contains("scratchpad.md: queued for review"), "{said}");
        assert!(said.contains("pushed 0 changes"), "{said}");
        assert!(said.contains("1 pending review"), "{said}");
        assert_eq!(seen(&s.phone, &s.vault), before);
    }
    let delete = pending(&base).await;
    assert_eq!(delete.len(), 1, "{delete:?}");

    // review: the edit is queued too; the delete is not queued again.
    let inbox = "# Inbox\n\nwaiting for review\n";
    std::fs::write(s.phone.join("Inbox.md"), inbox).unwrap();
    let before = seen(&s.phone, &s.vault);
    settings(&base, "write_policy", json!({"write_policy": "review"})).await;
    let said = device(&["push"], &s.phone, false);
    assert!(
        said.contains("Inbox.md: queued for review as pending write"),
        "{said}"
    );
    assert!(said.contains("2 pending review"), "{said}");
    assert_eq!(seen(&s.phone, &s.vault), before);
    let queued = pending(&base).await;
    assert_eq!(queued.len(), 2, "{queued:?}");
    assert!(queued.contains(&delete[0]), "{queued:?}");
    let kept = outbox(&s.phone);
    let said = device(&["push"], &s.phone, false);
    assert!(said.contains("2 pending review"), "{said}");
    assert_eq!(seen(&s.phone, &s.vault), before);
    assert_eq!(outbox(&s.phone), kept);
    assert_eq!(pending(&base).await, queued, "no second pending write");

    // Approved: the next push settles both (the pull brings them) and queues nothing.
    for w in &queued {
        let path = format!("/v1/writes/{}:approve", w["id"].as_str().unwrap());
        let (status, answer) = api(&base, reqwest::Method::POST, &path, None).await;
        assert_eq!(status, 200, "{answer}");
    }
    let said = device(&["push"], &s.phone, true);
    assert!(said.contains("pushed 2 changes"), "{said}");
    assert!(said.contains("0 pending review"), "{said}");
    assert_eq!(
        std::fs::read_to_string(s.vault.join("Inbox.md")).unwrap(),
        inbox
    );
    assert!(!s.vault.join("scratchpad.md").exists());
    assert!(s.vault.join(".trash/scratchpad.md").exists());
    assert_eq!(
        std::fs::read_to_string(s.phone.join("Inbox.md")).unwrap(),
        inbox
    );
    assert!(!s.phone.join("scratchpad.md").exists());
    no_conflict_copies(&s.phone, &s.vault);
    assert_eq!(outbox(&s.phone), None);
    let said = device(&["push"], &s.phone, true);
    assert!(said.contains("pushed 0 changes"), "{said}");
    assert!(pending(&base).await.is_empty());

    // Rejected: said so, and the same op is not queued again.
    std::fs::write(s.phone.join("Welcome.md"), "# Welcome\n\nnot wanted\n").unwrap();
    device(&["push"], &s.phone, false);
    let queued = pending(&base).await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    let path = format!("/v1/writes/{}:reject", queued[0]["id"].as_str().unwrap());
    let (status, answer) = api(&base, reqwest::Method::POST, &path, None).await;
    assert_eq!(status, 200, "{answer}");
    let before = seen(&s.phone, &s.vault);
    let said = device(&["push"], &s.phone, false);
    assert!(
        said.contains("Welcome.md: not pushed: a reviewer rejected it"),
        "{said}"
    );
    assert_eq!(seen(&s.phone, &s.vault), before);
    assert!(pending(&base).await.is_empty(), "not queued again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_meeting_a_delete_or_a_new_note_on_the_daemon_are_refused_then_kept_as_copies() {
    let s = setup(&[("RATE_LIMIT_WRITE_PER_MINUTE", "0")]);
    let base = s.daemon.base.clone();
    // The phone edits the roadmap and writes a new note `ideas`; meanwhile the daemon
    // deletes the roadmap and gets another `ideas`.
    let edit = "# Roadmap\n\nthe phone's plan\n";
    std::fs::write(s.phone.join("projects/roadmap.md"), edit).unwrap();
    let ideas = "# Ideas\n\nfrom the phone\n";
    std::fs::write(s.phone.join("ideas.md"), ideas).unwrap();
    let (status, answer) = api(
        &base,
        reqwest::Method::DELETE,
        "/v1/notes/projects%2Froadmap?agent_id=desk",
        None,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let theirs = "# Ideas\n\nfrom the desk\n";
    let body = json!({"slug": "ideas", "content": theirs, "agent_id": "desk"});
    let (status, answer) = api(&base, reqwest::Method::POST, "/v1/notes", Some(body)).await;
    assert_eq!(status, 201, "{answer}");
    let before = seen(&s.phone, &s.vault);
    let said = device(&["push"], &s.phone, false);
    assert!(
        said.contains("projects/roadmap.md: not pushed: 404 NOTE_NOT_FOUND"),
        "{said}"
    );
    assert!(
        said.contains("ideas.md: not pushed: 409 NAME_COLLISION"),
        "{said}"
    );
    assert!(said.contains("notevault device pull"), "{said}");
    assert_eq!(seen(&s.phone, &s.vault), before);

    // The pull keeps both as copies (the daemon's `ideas` beside the phone's), which the
    // next push creates.
    device(&["pull"], &s.phone, true);
    let copy = "projects/roadmap (conflict phone).md";
    assert!(!s.phone.join("projects/roadmap.md").exists());
    assert_eq!(std::fs::read_to_string(s.phone.join(copy)).unwrap(), edit);
    let ideas_copy = "ideas (conflict phone).md";
    assert_eq!(
        std::fs::read_to_string(s.phone.join("ideas.md")).unwrap(),
        theirs
    );
    assert_eq!(
        std::fs::read_to_string(s.phone.join(ideas_copy)).unwrap(),
        ideas
    );
    device(&["push"], &s.phone, true);
    assert_eq!(std::fs::read_to_string(s.vault.join(copy)).unwrap(), edit);
    assert_eq!(
        std::fs::read_to_string(s.vault.join(ideas_copy)).unwrap(),
        ideas
    );
    assert_eq!(
        std::fs::read_to_string(s.vault.join("ideas.md")).unwrap(),
        theirs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_mid_batch_leaves_the_device_as_it_was_and_the_retry_applies_once() {
    let (dir, vault, state) = common::temp_vault(Some("vault-example"));
    let mut daemon = common::spawn(&vault, &state, &[("RATE_LIMIT_WRITE_PER_MINUTE", "0")]);
    let listen = daemon.base.trim_start_matches("http://").to_string();
    let phone = dir.path().join("phone");
    device(
        &["init", "--server", &daemon.base, "--device-id", "phone"],
        &phone,
        true,
    );
    let new = ["a.md", "b.md", "c.md"];
    for name in new {
        std::fs::write(phone.join(name), format!("# {name}\n\nfrom the phone\n")).unwrap();
    }
    std::fs::write(
        phone.join("Inbox.md"),
        "# Inbox\n\nedited before the crash\n",
    )
    .unwrap();
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();

    // The second op's write stops the daemon before its receipt is stored.
    let mut daemon = common::spawn_on(
        &listen,
        &vault,
        &state,
        &[
            ("RATE_LIMIT_WRITE_PER_MINUTE", "0"),
            ("NOTEVAULT_TEST_CRASH_AT", "before-receipt#2"),
        ],
    );
    let before = (user_files(&phone), state_json(&phone));
    let said = device(&["push"], &phone, false);
    assert!(said.contains("push again"), "{said}");
    assert!(
        !daemon.child.wait().unwrap().success(),
        "the daemon stopped"
    );
    assert_eq!((user_files(&phone), state_json(&phone)), before);

    // Restarted: the retry sends the same keys; each change lands once.
    let mut daemon = common::spawn_on(
        &listen,
        &vault,
        &state,
        &[("RATE_LIMIT_WRITE_PER_MINUTE", "0")],
    );
    let said = device(&["push"], &phone, true);
    assert!(said.contains("pushed 4 changes"), "{said}");
    for name in new {
        let path = format!("/v1/notes/{}:listRevisions", name.trim_end_matches(".md"));
        let (status, revisions) = api(&daemon.base, reqwest::Method::GET, &path, None).await;
        assert_eq!(status, 200, "{revisions}");
        assert_eq!(
            revisions["versions"].as_array().unwrap().len(),
            1,
            "{name}: {revisions}"
        );
        assert_eq!(
            std::fs::read(vault.join(name)).unwrap(),
            std::fs::read(phone.join(name)).unwrap()
        );
    }
    assert_eq!(
        std::fs::read_to_string(vault.join("Inbox.md")).unwrap(),
        "# Inbox\n\nedited before the crash\n"
    );
    let names: Vec<String> = common::snapshot(&vault).into_keys().collect();
    assert_eq!(
        names
            .iter()
            .filter(|n| n.ends_with(".md") && !n.contains('/'))
            .count(),
        6,
        "Inbox, Welcome, scratchpad and the three new notes, once each: {names:?}"
    );
    no_conflict_copies(&phone, &vault);
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();
}

/// The `.md` files of a folder (`.trash/` and hidden folders left out), with their bytes.
fn md_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "md"))
        .map(|e| {
            let rel = e.path().strip_prefix(root).unwrap().to_string_lossy();
            (rel.into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_and_a_move_on_a_device_keep_the_note_and_rewrite_its_links() {
    let s = setup(&[("RATE_LIMIT_WRITE_PER_MINUTE", "0")]);
    let base = s.daemon.base.clone();
    let laptop = s.phone.with_file_name("laptop");
    device(
        &["init", "--server", &base, "--device-id", "laptop"],
        &laptop,
        true,
    );
    let id = |slug: &'static str| {
        let base = base.clone();
        async move {
            let (status, note) = api(
                &base,
                reqwest::Method::GET,
                &format!("/v1/notes/{slug}"),
                None,
            )
            .await;
            assert_eq!(status, 200, "{slug}: {note}");
            note["note_id"].as_str().unwrap().to_string()
        }
    };
    let (roadmap, sourdough) = (
        id("projects%2Froadmap").await,
        id("recipes%2Fsourdough").await,
    );

    // A rename in its folder, and a move to another folder under a new name.
    std::fs::rename(
        s.phone.join("projects/roadmap.md"),
        s.phone.join("projects/plan.md"),
    )
    .unwrap();
    std::fs::rename(
        s.phone.join("recipes/sourdough.md"),
        s.phone.join("projects/bread.md"),
    )
    .unwrap();
    let said = device(&["push"], &s.phone, true);
    assert!(said.contains("0 refused"), "{said}");

    // The daemon moved the notes (same ids), deleted nothing, rewrote the links.
    assert_eq!(id("projects%2Fplan").await, roadmap);
    assert_eq!(id("projects%2Fbread").await, sourdough);
    for gone in [
        "projects/roadmap.md",
        "recipes/sourdough.md",
        "projects/sourdough.md",
    ] {
        assert!(!s.vault.join(gone).exists(), "{gone}");
    }
    assert!(!s.vault.join(".trash").exists(), "nothing was deleted");
    let list = std::fs::read_to_string(s.vault.join("reading/reading-list.md")).unwrap();
    assert!(
        list.contains("[[plan]]") && !list.contains("[[roadmap]]"),
        "{list}"
    );
    no_conflict_copies(&s.phone, &s.vault);

    // The device has the rewritten links; another device pulls the same folder.
    assert_eq!(md_files(&s.phone), md_files(&s.vault));
    device(&["pull"], &laptop, true);
    assert_eq!(md_files(&laptop), md_files(&s.vault));
    let said = device(&["push"], &s.phone, true);
    assert!(said.contains("pushed 0 changes"), "{said}");
}
