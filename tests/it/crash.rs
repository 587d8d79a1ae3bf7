//! kill -9 during a stream of concurrent writes: after a restart every receipt that was
//! received matches a file on disk and a commit in history, no file is torn, no temp file
//! is left, and replaying every key returns its original receipt.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::common;

const BIN: &str = env!("CARGO_BIN_EXE_notevault");

/// What a writer received: key, body sent, status, response text.
type Received = Arc<Mutex<Vec<(String, Value, u16, String)>>>;

fn start(vault: &Path, state: &Path) -> (common::Daemon, String) {
    start_with(vault, state, None)
}

/// Start the daemon; with `crash_at`, it aborts (as `kill -9` would) at that step of the
/// first write that reaches it.
fn start_with(vault: &Path, state: &Path, crash_at: Option<&str>) -> (common::Daemon, String) {
    let mut command = common::daemon::command(BIN, "127.0.0.1:0", vault, Some(state));
    if let Some(step) = crash_at {
        command.env("NOTEVAULT_TEST_CRASH_AT", step);
    }
    command
        .env("RATE_LIMIT_WRITE_PER_MINUTE", "0")
        .env("RATE_LIMIT_READ_PER_MINUTE", "0");
    let daemon = common::daemon::start(command).expect("the daemon serves");
    let base = daemon.base.clone();
    (daemon, base)
}

/// GET `url` and parse its JSON.
async fn get_json(client: &reqwest::Client, url: String) -> Value {
    client.get(url).send().await.unwrap().json().await.unwrap()
}

/// `POST /v1/notes` with `key`: the status and the text of the answer.
async fn create(client: &reqwest::Client, base: &str, key: &str, body: &Value) -> (u16, String) {
    let res = client
        .post(format!("{base}/v1/notes"))
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

fn body_for(writer: usize, i: usize) -> Value {
    json!({"slug": format!("crash/w{writer}-{i}"), "content": format!("# Writer {writer} note {i}\n\n{}\n", "payload line\n".repeat(i % 7 + 1)), "agent_id": format!("w{writer}")})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let vault = dir.path().join("vault");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&vault).unwrap();
    std::fs::write(vault.join("seed.md"), "# Seed\n").unwrap();
    let (mut daemon, base) = start(&vault, &state);

    let received: Received = Arc::default();
    // Sent, but no answer came back before the kill.
    let unanswered: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let client = reqwest::Client::new();
    let mut writers = Vec::new();
    for w in 0..8 {
        let client = client.clone();
        let base = base.clone();
        let received = received.clone();
        let unanswered = unanswered.clone();
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let key = format!("crash-{w}-{i}");
                let body = body_for(w, i);
                let answer = match client
                    .post(format!("{base}/v1/notes"))
                    .header("Idempotency-Key", &key)
                    .json(&body)
                    .send()
                    .await
                {
                    Ok(res) => {
                        let status = res.status().as_u16();
                        res.text().await.ok().map(|text| (status, text))
                    }
                    Err(_) => None,
                };
                match answer {
                    Some((status, text)) => {
                        received.lock().unwrap().push((key, body, status, text))
                    }
                    None => {
                        unanswered.lock().unwrap().push((key, body));
                        break;
                    }
                }
            }
        }));
    }
    // Kill once some writes were answered (however fast this machine is today), while
    // the others are under way.
    // (The count is asserted after the kill, so that a failure never leaves the daemon up.)
    common::poll_until(Duration::from_secs(60), || async {
        received.lock().unwrap().len() >= 20
    })
    .await;
    daemon.child.kill().unwrap(); // SIGKILL
    daemon.child.wait().unwrap();
    for w in writers {
        let _ = w.await;
    }
    let received = received.lock().unwrap().clone();
    assert!(
        received.len() >= 20,
        "only {} writes before the kill",
        received.len()
    );

    let (mut daemon, base) = start(&vault, &state);
    // No temp file is left, no file is torn.
    for entry in walkdir::WalkDir::new(&vault)
        .into_iter()
        .filter_map(Result::ok)
    {
        let name = entry.file_name().to_string_lossy();
        assert!(
            !name.starts_with(".notevault-tmp"),
            "left behind: {}",
            entry.path().display()
        );
    }
    let log = common::git(&state, &["log", "--format=%B"]);
    for (key, body, status, text) in &received {
        assert_eq!(*status, 201, "{key}: {text}");
        let receipt: Value = serde_json::from_str(text).unwrap();
        let slug = receipt["slug"].as_str().unwrap();
        let bytes = std::fs::read(vault.join(format!("{slug}.md")))
            .unwrap_or_else(|_| panic!("{slug} acknowledged but missing"));
        assert_eq!(
            bytes,
            body["content"].as_str().unwrap().as_bytes(),
            "{slug} is whole"
        );
        assert_eq!(
            receipt["content_hash"],
            format!("blake3:{}", blake3::hash(&bytes).to_hex())
        );
        let version = receipt["version_id"].as_str().unwrap();
        assert!(
            log.contains(&format!("Notevault-Version: {version}")),
            "{version} of {slug} is in history"
        );
        // The replay answers the original receipt, byte for byte.
        let (replayed, replay) = create(&client, &base, key, body).await;
        assert_eq!(replayed, *status);
        assert_eq!(replay, *text, "{key} replays");
    }
    // A retry of every write whose answer was lost gets a receipt: the change's, if it
    // landed (never NAME_COLLISION), else a fresh apply; either way applied once.
    let unanswered = unanswered.lock().unwrap().clone();
    for (key, body) in &unanswered {
        let (status, text) = create(&client, &base, key, body).await;
        assert_eq!(status, 201, "retry of {key}: {text}");
        let receipt: Value = serde_json::from_str(&text).unwrap();
        let slug = receipt["slug"].as_str().unwrap();
        assert_eq!(
            std::fs::read(vault.join(format!("{slug}.md"))).unwrap(),
            body["content"].as_str().unwrap().as_bytes()
        );
        let revisions: Value = get_json(
            &client,
            format!("{base}/v1/notes/{}:listRevisions", slug.replace('/', "%2F")),
        )
        .await;
        assert_eq!(
            revisions["versions"].as_array().unwrap().len(),
            1,
            "{slug} is created once, by its writer: {revisions}"
        );
        assert!(revisions["versions"][0]["actor"]
            .as_str()
            .unwrap()
            .starts_with("agent:"));
    }
    // Files written but not acknowledged are whole too (the old or the new, never torn).
    for entry in std::fs::read_dir(vault.join("crash"))
        .unwrap()
        .filter_map(Result::ok)
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let (w, i) = name
            .trim_start_matches('w')
            .trim_end_matches(".md")
            .split_once('-')
            .unwrap();
        let expected = body_for(w.parse().unwrap(), i.parse().unwrap());
        assert_eq!(
            std::fs::read_to_string(entry.path()).unwrap(),
            expected["content"].as_str().unwrap()
        );
    }
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    common::git(&state, &["fsck"]);
}

/// A step of the write pipeline at which `NOTEVAULT_TEST_CRASH_AT` stops the daemon.
const STEPS: [&str; 4] = [
    "before-file",
    "after-file",
    "after-history",
    "before-receipt",
];

/// One kind of write, made on a vault of `a.md` (`# A\n\nalpha\n`), `linker.md` (a link
/// to `a`) and `sub/keep.md`; its path and body get the version of `a.md` read first.
struct Op {
    name: &'static str,
    method: Method,
    path: fn(version: &str) -> String,
    body: fn(version: &str) -> Value,
    /// The status of its receipt.
    status: u16,
    /// Files and their text once it applied (`None`: absent).
    files: &'static [(&'static str, Option<&'static str>)],
}

#[rustfmt::skip]
const OPS: &[Op] = &[
    Op { name: "create", method: Method::POST, path: |_| "/v1/notes".into(), status: 201,
        body: |_| json!({"slug": "new", "content": "# New\n", "agent_id": "t"}),
        files: &[("new.md", Some("# New\n"))] },
    Op { name: "edit", method: Method::POST, path: |_| "/v1/notes/a:edit".into(), status: 200,
        body: |v| json!({"version_id": v, "old_string": "alpha", "new_string": "beta", "agent_id": "t"}),
        files: &[("a.md", Some("# A\n\nbeta\n"))] },
    Op { name: "patch", method: Method::PATCH, path: |_| "/v1/notes/a?update_mask=status".into(), status: 200,
        body: |v| json!({"status": "done", "version_id": v, "agent_id": "t"}),
        files: &[("a.md", Some("---\nstatus: done\n---\n# A\n\nalpha\n"))] },
    Op { name: "move", method: Method::POST, path: |_| "/v1/notes/a:move".into(), status: 200,
        body: |v| json!({"folder": "sub", "version_id": v, "agent_id": "t"}),
        files: &[("a.md", None), ("sub/a.md", Some("# A\n\nalpha\n"))] },
    Op { name: "delete", method: Method::DELETE, path: |v| format!("/v1/notes/a?version_id={v}&agent_id=t"), status: 200,
        body: |_| json!({}),
        files: &[("a.md", None)] },
];

/// One write of each kind, stopped (as `kill -9` would) at each step of the pipeline:
/// after a restart, a retry with the same key and body answers the receipt of the change
/// (never `VERSION_MOVED`, `NAME_COLLISION` or `NOTE_NOT_FOUND`), the change is applied
/// exactly once and recorded as the agent's write, and the receipt then replays byte for
/// byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_crash_at_any_step_gets_its_receipt() {
    let client = reqwest::Client::new();
    for step in STEPS {
        for op in OPS {
            let what = format!("{} stopped at {step}", op.name);
            let dir = tempfile::tempdir().unwrap();
            let vault = dir.path().join("vault");
            let state = dir.path().join("state");
            std::fs::create_dir_all(vault.join("sub")).unwrap();
            std::fs::write(vault.join("a.md"), "# A\n\nalpha\n").unwrap();
            std::fs::write(vault.join("linker.md"), "see [[a]]\n").unwrap();
            std::fs::write(vault.join("sub/keep.md"), "# Keep\n").unwrap();

            let (mut daemon, base) = start_with(&vault, &state, Some(step));
            let note: Value = get_json(&client, format!("{base}/v1/notes/a?limit=1")).await;
            let version = note["version_id"].as_str().unwrap();
            let (path, body, status) = ((op.path)(version), (op.body)(version), op.status);
            let send = |base: &str| {
                client
                    .request(op.method.clone(), format!("{base}{path}"))
                    .header("Idempotency-Key", "the-write")
                    .json(&body)
                    .send()
            };
            if let Ok(res) = send(&base).await {
                panic!("{what}: answered {}", res.text().await.unwrap());
            }
            assert!(
                !daemon.child.wait().unwrap().success(),
                "{what}: the daemon aborted"
            );

            let (mut daemon, base) = start(&vault, &state);
            let res = send(&base).await.unwrap();
            let got = res.status().as_u16();
            let text = res.text().await.unwrap();
            assert_eq!(got, status, "{what}: {text}");
            let receipt: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(receipt["status"], "applied", "{what}: {receipt}");
            // The replay is the same receipt, byte for byte.
            let again = send(&base).await.unwrap();
            assert_eq!(again.status().as_u16(), status);
            assert_eq!(again.text().await.unwrap(), text, "{what}: replay");

            // Applied once, as the agent's write.
            let slug = receipt["slug"].as_str().unwrap().replace('/', "%2F");
            let revisions: Value =
                get_json(&client, format!("{base}/v1/notes/{slug}:listRevisions")).await;
            let by_agent: Vec<&Value> = revisions["versions"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["actor"] == "agent:t")
                .collect();
            assert_eq!(by_agent.len(), 1, "{what}: {revisions}");
            assert_eq!(by_agent[0]["version_id"], receipt["version_id"], "{what}");
            assert!(
                revisions["versions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|r| r["actor"] != "filesystem" || r["kind"] == "create"),
                "{what}: the change is not taken for an editor's: {revisions}"
            );
            for (rel, text) in op.files {
                let got = std::fs::read_to_string(vault.join(rel)).ok();
                assert_eq!(got.as_deref(), *text, "{what}: {rel}");
            }
            if op.name == "move" {
                let links: Value =
                    get_json(&client, format!("{base}/v1/notes/sub%2Fa:links")).await;
                assert!(
                    links["backlinks"].to_string().contains("linker"),
                    "{what}: the link to the moved note still resolves: {links}"
                );
            }
            daemon.child.kill().unwrap();
            daemon.child.wait().unwrap();
        }
    }
}

/// Set or clear the immutable flag of the file at `path` (`FS_IOC_SETFLAGS`); false where
/// that cannot be done (no privilege, a filesystem without it).
#[cfg(target_os = "linux")]
fn immutable(path: &Path, on: bool) -> bool {
    use std::os::fd::AsRawFd;
    const FS_IMMUTABLE_FL: libc::c_long = 0x10;
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut flags: libc::c_long = 0;
    // SAFETY: the descriptor is open; `flags` is a valid out/in pointer for the calls.
    unsafe {
        if libc::ioctl(file.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) != 0 {
            return false;
        }
        flags = if on {
            flags | FS_IMMUTABLE_FL
        } else {
            flags & !FS_IMMUTABLE_FL
        };
        libc::ioctl(file.as_raw_fd(), libc::FS_IOC_SETFLAGS, &flags) == 0
    }
}

/// A write's leftover the start cannot clear (here an immutable file; a read-only vault
/// alike): the note's path may hold the write's refused bytes, so the write is not taken
/// as landed and its retry gets no receipt for it.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_leftover_cannot_be_cleared_is_never_answered_as_landed() {
    let client = reqwest::Client::new();
    let dir = tempfile::tempdir().unwrap();
    let (vault, state) = (dir.path().join("vault"), dir.path().join("state"));
    std::fs::create_dir_all(&vault).unwrap();
    let path = vault.join("a.md");
    std::fs::write(&path, "# A\n\nalpha\n").unwrap();
    let (mut daemon, base) = start_with(&vault, &state, Some("after-file"));
    let note: Value = get_json(&client, format!("{base}/v1/notes/a?limit=1")).await;
    let version = note["version_id"].as_str().unwrap().to_string();
    let body = json!({"version_id": version, "old_string": "alpha", "new_string": "beta", "agent_id": "t"});
    let send = |base: &str| {
        client
            .post(format!("{base}/v1/notes/a:edit"))
            .header("Idempotency-Key", "the-write")
            .json(&body)
            .send()
    };
    assert!(send(&base).await.is_err(), "the daemon aborted");
    daemon.child.wait().unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# A\n\nbeta\n");

    // As if the crash had come inside the exchange, over an editor's save: its file under
    // the temp name, the write's file at the path, marked.
    if !common::crash_after_the_exchange(
        &path,
        "# A\n\nthe editor's save\n",
        "# A\n\nbeta\n",
        "# A\n\nalpha\n",
    ) {
        eprintln!(
            "SKIPPED: {} keeps no user extended attributes",
            vault.display()
        );
        return;
    }
    let temp = path.with_file_name(".notevault-tmp-m0194d3a5c0de7000a000000000000001-a.md");
    if !immutable(&temp, true) {
        eprintln!("SKIPPED: cannot make a file immutable here");
        return;
    }
    let (mut daemon, base) = start(&vault, &state);
    let res = send(&base).await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    immutable(&temp, false);
    assert_eq!(
        status, 409,
        "no receipt for a write that may not have landed: {text}"
    );
    assert!(text.contains("VERSION_MOVED"), "{text}");
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    // Once it can be cleared, the editor's save is put back.
    let (mut daemon, _) = start(&vault, &state);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "# A\n\nthe editor's save\n"
    );
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
}

/// One folder operation, made on a vault of `sub/a.md`, `dest/keep.md` and `linker.md`
/// (a link to `sub/a`): its route, body and status, and the note inside afterwards.
struct FolderOp {
    name: &'static str,
    path: &'static str,
    body: Value,
    status: u16,
    /// The folder's path in the receipt, and where `a.md` is afterwards (`None`: no
    /// note moves).
    folder: &'static str,
    note: Option<&'static str>,
    /// Folders that exist afterwards, and those that do not.
    there: &'static [&'static str],
    gone: &'static [&'static str],
}

/// A folder move, rename, delete and create stopped at each step of the pipeline: after
/// a restart the retry with the same key answers the operation's receipt (not
/// `FOLDER_NOT_FOUND` or `NAME_COLLISION`), the receipt replays byte for byte, and the
/// folder is where it should be, moved exactly once (one revision of the note inside, by
/// the agent, none taken for an editor's change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_operation_retried_after_a_crash_at_any_step_gets_its_receipt() {
    let client = reqwest::Client::new();
    let ops = [
        FolderOp {
            name: "move",
            path: "/v1/folders:move",
            body: json!({"path": "sub", "folder": "dest", "agent_id": "t"}),
            status: 200,
            folder: "dest/sub",
            note: Some("dest/sub/a.md"),
            there: &["dest/sub"],
            gone: &["sub"],
        },
        FolderOp {
            name: "rename",
            path: "/v1/folders:rename",
            body: json!({"path": "sub", "name": "renamed", "agent_id": "t"}),
            status: 200,
            folder: "renamed",
            note: Some("renamed/a.md"),
            there: &["renamed"],
            gone: &["sub"],
        },
        FolderOp {
            name: "delete",
            path: "/v1/folders:delete",
            body: json!({"path": "sub", "trash_notes": true, "agent_id": "t"}),
            status: 200,
            folder: "sub",
            note: Some(".trash/sub/a.md"),
            there: &[".trash/sub"],
            gone: &["sub", ".trash/sub 2"],
        },
        FolderOp {
            name: "create",
            path: "/v1/folders",
            body: json!({"path": "made", "agent_id": "t"}),
            status: 201,
            folder: "made",
            note: None,
            there: &["made", "sub"],
            gone: &[],
        },
    ];
    for step in STEPS {
        for op in &ops {
            let what = format!("folder {} stopped at {step}", op.name);
            let dir = tempfile::tempdir().unwrap();
            let vault = dir.path().join("vault");
            let state = dir.path().join("state");
            std::fs::create_dir_all(vault.join("sub")).unwrap();
            std::fs::create_dir_all(vault.join("dest")).unwrap();
            std::fs::write(vault.join("sub/a.md"), "# A\n\nalpha\n").unwrap();
            std::fs::write(vault.join("dest/keep.md"), "# Keep\n").unwrap();
            std::fs::write(vault.join("linker.md"), "see [[sub/a]]\n").unwrap();

            let (mut daemon, base) = start_with(&vault, &state, Some(step));
            let send = |base: &str| {
                client
                    .post(format!("{base}{}", op.path))
                    .header("Idempotency-Key", "the-folder-write")
                    .json(&op.body)
                    .send()
            };
            if let Ok(res) = send(&base).await {
                panic!("{what}: answered {}", res.text().await.unwrap());
            }
            assert!(
                !daemon.child.wait().unwrap().success(),
                "{what}: the daemon aborted"
            );

            let (mut daemon, base) = start(&vault, &state);
            let res = send(&base).await.unwrap();
            let got = res.status().as_u16();
            let text = res.text().await.unwrap();
            assert_eq!(got, op.status, "{what}: {text}");
            let receipt: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(receipt["status"], "applied", "{what}: {receipt}");
            assert_eq!(receipt["path"], op.folder, "{what}: {receipt}");
            assert_eq!(
                receipt["notes"],
                u64::from(op.note.is_some()),
                "{what}: {receipt}"
            );
            let again = send(&base).await.unwrap();
            assert_eq!(again.status().as_u16(), op.status);
            assert_eq!(again.text().await.unwrap(), text, "{what}: replay");

            for rel in op.there {
                assert!(vault.join(rel).is_dir(), "{what}: {rel} is there");
            }
            for rel in op.gone {
                assert!(!vault.join(rel).exists(), "{what}: {rel} is gone");
            }
            let Some(note) = op.note else {
                daemon.child.kill().unwrap();
                daemon.child.wait().unwrap();
                continue;
            };
            assert_eq!(
                std::fs::read_to_string(vault.join(note)).unwrap(),
                "# A\n\nalpha\n",
                "{what}"
            );
            // Moved or deleted once, as the agent's operation.
            let slug = note
                .trim_start_matches(".trash/")
                .trim_end_matches(".md")
                .replace('/', "%2F");
            let revisions: Value =
                get_json(&client, format!("{base}/v1/notes/{slug}:listRevisions")).await;
            let versions = revisions["versions"].as_array().unwrap();
            let by_agent = versions.iter().filter(|r| r["actor"] == "agent:t").count();
            assert_eq!(by_agent, 1, "{what}: {revisions}");
            assert!(
                versions
                    .iter()
                    .all(|r| r["actor"] != "filesystem" || r["kind"] == "create"),
                "{what}: the change is not taken for an editor's: {revisions}"
            );
            if op.name != "delete" {
                let linker = std::fs::read_to_string(vault.join("linker.md")).unwrap();
                let target = note.trim_end_matches(".md");
                assert!(
                    linker.contains(target),
                    "{what}: the link follows: {linker}"
                );
            }
            daemon.child.kill().unwrap();
            daemon.child.wait().unwrap();
        }
    }
}

/// An approval whose write landed, stopped (as `kill -9` would) before its decision was
/// recorded: after a restart the retried approval is decided `applied` with the write's
/// receipt, the note written once, never `rejected` for colliding with itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_retried_after_a_crash_before_its_decision_is_applied_once() {
    let client = reqwest::Client::new();
    let dir = tempfile::tempdir().unwrap();
    let vault = dir.path().join("vault");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&vault).unwrap();
    std::fs::write(vault.join("a.md"), "# A\n").unwrap();
    let (mut daemon, base) = start_with(&vault, &state, Some("before-decision"));
    let set = client
        .patch(format!(
            "{base}/v1/vault/write-settings?update_mask=write_policy"
        ))
        .json(&json!({"write_policy": "review"}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    let queued = client
        .post(format!("{base}/v1/notes"))
        .header("Idempotency-Key", "queued")
        .json(&json!({"slug": "new", "content": "# New\n", "agent_id": "t"}))
        .send()
        .await
        .unwrap();
    let queued: Value = common::res_json(queued, 202, "queued").await;
    let id = queued["pending_id"].as_str().unwrap().to_string();
    let approve = format!("/v1/writes/{id}:approve");
    let res = client.post(format!("{base}{approve}")).send().await;
    assert!(res.is_err(), "answered before the crash point: {res:?}");
    assert!(
        !daemon.child.wait().unwrap().success(),
        "the daemon aborted"
    );
    assert_eq!(
        std::fs::read_to_string(vault.join("new.md")).unwrap(),
        "# New\n",
        "the write landed before the crash"
    );

    let (mut daemon, base) = start(&vault, &state);
    let res = client
        .post(format!("{base}{approve}"))
        .send()
        .await
        .unwrap();
    let decided: Value = common::res_json(res, 200, "the retried approval").await;
    assert_eq!(decided["status"], "applied", "{decided}");
    assert!(decided["error"].is_null(), "{decided}");
    let revisions: Value = get_json(&client, format!("{base}/v1/notes/new:listRevisions")).await;
    let by_agent = revisions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["actor"] == "agent:t")
        .count();
    assert_eq!(by_agent, 1, "written once: {revisions}");
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
}

/// An attachment upload stopped (as `kill -9` would) right before its answer: the retry
/// with the same key answers the original receipt (`201`, created), not an "unchanged"
/// one, and it replays byte for byte. (Its receipt is kept in the transaction that
/// records its row.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_retried_after_a_crash_gets_its_original_receipt() {
    let client = reqwest::Client::new();
    let dir = tempfile::tempdir().unwrap();
    let (vault, state) = (dir.path().join("vault"), dir.path().join("state"));
    std::fs::create_dir_all(&vault).unwrap();
    std::fs::write(vault.join("a.md"), "# A\n").unwrap();
    let bytes = crate::attachments_blobs::png(3, 200);
    let upload = |base: String| {
        client
            .put(format!("{base}/v1/attachments/pic.png"))
            .header("Idempotency-Key", "the-upload")
            .header("Content-Type", "image/png")
            .body(bytes.clone())
            .send()
    };
    let (mut daemon, base) = start_with(&vault, &state, Some("before-receipt"));
    assert!(upload(base).await.is_err(), "answered before the crash");
    assert!(!daemon.child.wait().unwrap().success());
    assert_eq!(std::fs::read(vault.join("pic.png")).unwrap(), bytes);

    let (mut daemon, base) = start(&vault, &state);
    let again = || async {
        let res = upload(base.clone()).await.unwrap();
        (res.status().as_u16(), res.text().await.unwrap())
    };
    let (status, first) = again().await;
    assert_eq!(status, 201, "{first}");
    assert!(first.contains("\"unchanged\":false"), "{first}");
    assert_eq!(again().await, (201, first), "a replay");
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
}
