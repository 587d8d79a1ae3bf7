//! kill -9 during a stream of concurrent writes: after a restart every receipt that was
//! received matches a file on disk and a commit in history, no file is torn, no temp file
//! is left, and replaying every key returns its original receipt.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_notevault");

/// What a writer received: key, body sent, status, response text.
type Received = Arc<Mutex<Vec<(String, Value, u16, String)>>>;

fn start(vault: &Path, state: &Path) -> (Child, String) {
    start_with(vault, state, None)
}

/// Start the daemon; with `crash_at`, it aborts (as `kill -9` would) at that step of the
/// first write that reaches it.
fn start_with(vault: &Path, state: &Path, crash_at: Option<&str>) -> (Child, String) {
    let mut command = Command::new(BIN);
    if let Some(step) = crash_at {
        command.env("NOTEVAULT_TEST_CRASH_AT", step);
    }
    let mut child = command
        .args([
            "serve",
            vault.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            state.to_str().unwrap(),
        ])
        .env("RATE_LIMIT_WRITE_PER_MINUTE", "0")
        .env("RATE_LIMIT_READ_PER_MINUTE", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the daemon prints its address")
            .unwrap();
        if let Some(rest) = line.split("on http://").nth(1) {
            break rest.trim().to_string();
        }
    };
    // Keep draining stderr so the daemon never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, format!("http://{addr}"))
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
    let (mut child, base) = start(&vault, &state);

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
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while received.lock().unwrap().len() < 20 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for w in writers {
        let _ = w.await;
    }
    let received = received.lock().unwrap().clone();
    assert!(
        received.len() >= 20,
        "only {} writes before the kill",
        received.len()
    );

    let (mut child, base) = start(&vault, &state);
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
    let log = String::from_utf8(
        Command::new("git")
            .arg("--git-dir")
            .arg(state.join("history.git"))
            .args(["log", "--format=%B"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
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
        let res = client
            .post(format!("{base}/v1/notes"))
            .header("Idempotency-Key", key)
            .json(body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), *status);
        assert_eq!(res.text().await.unwrap(), *text, "{key} replays");
    }
    // A retry of every write whose answer was lost gets a receipt: the change's, if it
    // landed (never NAME_COLLISION), else a fresh apply; either way applied once.
    let unanswered = unanswered.lock().unwrap().clone();
    for (key, body) in &unanswered {
        let res = client
            .post(format!("{base}/v1/notes"))
            .header("Idempotency-Key", key)
            .json(body)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let text = res.text().await.unwrap();
        assert_eq!(status, 201, "retry of {key}: {text}");
        let receipt: Value = serde_json::from_str(&text).unwrap();
        let slug = receipt["slug"].as_str().unwrap();
        assert_eq!(
            std::fs::read(vault.join(format!("{slug}.md"))).unwrap(),
            body["content"].as_str().unwrap().as_bytes()
        );
        let revisions: Value = client
            .get(format!(
                "{base}/v1/notes/{}:listRevisions",
                slug.replace('/', "%2F")
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
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
    child.kill().unwrap();
    child.wait().unwrap();
    let fsck = Command::new("git")
        .arg("--git-dir")
        .arg(state.join("history.git"))
        .args(["fsck"])
        .output()
        .unwrap();
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
}

/// One write of each kind, stopped (as `kill -9` would) at each step of the pipeline:
/// after a restart, a retry with the same key and body answers the receipt of the change
/// (never `VERSION_MOVED`, `NAME_COLLISION` or `NOTE_NOT_FOUND`), the change is applied
/// exactly once and recorded as the agent's write, and the receipt then replays byte for
/// byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_crash_at_any_step_gets_its_receipt() {
    let client = reqwest::Client::new();
    for step in [
        "before-file",
        "after-file",
        "after-history",
        "before-receipt",
    ] {
        for op in ["create", "edit", "patch", "move", "delete"] {
            let what = format!("{op} stopped at {step}");
            let dir = tempfile::tempdir().unwrap();
            let vault = dir.path().join("vault");
            let state = dir.path().join("state");
            std::fs::create_dir_all(vault.join("sub")).unwrap();
            std::fs::write(vault.join("a.md"), "# A\n\nalpha\n").unwrap();
            std::fs::write(vault.join("linker.md"), "see [[a]]\n").unwrap();
            std::fs::write(vault.join("sub/keep.md"), "# Keep\n").unwrap();

            let (mut child, base) = start_with(&vault, &state, Some(step));
            let note: Value = client
                .get(format!("{base}/v1/notes/a?limit=1"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let version = note["version_id"].as_str().unwrap().to_string();
            let (method, path, body, status) = match op {
                "create" => (
                    reqwest::Method::POST,
                    "/v1/notes".to_string(),
                    json!({"slug": "new", "content": "# New\n", "agent_id": "t"}),
                    201,
                ),
                "edit" => (
                    reqwest::Method::POST,
                    "/v1/notes/a:edit".to_string(),
                    json!({"version_id": version, "old_string": "alpha", "new_string": "beta", "agent_id": "t"}),
                    200,
                ),
                "patch" => (
                    reqwest::Method::PATCH,
                    "/v1/notes/a?update_mask=status".to_string(),
                    json!({"status": "done", "version_id": version, "agent_id": "t"}),
                    200,
                ),
                "move" => (
                    reqwest::Method::POST,
                    "/v1/notes/a:move".to_string(),
                    json!({"folder": "sub", "version_id": version, "agent_id": "t"}),
                    200,
                ),
                _ => (
                    reqwest::Method::DELETE,
                    format!("/v1/notes/a?version_id={version}&agent_id=t"),
                    json!({}),
                    200,
                ),
            };
            let send = || {
                client
                    .request(method.clone(), format!("{base}{path}"))
                    .header("Idempotency-Key", "the-write")
                    .json(&body)
                    .send()
            };
            if let Ok(res) = send().await {
                panic!("{what}: answered {}", res.text().await.unwrap());
            }
            assert!(
                !child.wait().unwrap().success(),
                "{what}: the daemon aborted"
            );

            let (mut child, base) = start(&vault, &state);
            let send = || {
                client
                    .request(method.clone(), format!("{base}{path}"))
                    .header("Idempotency-Key", "the-write")
                    .json(&body)
                    .send()
            };
            let res = send().await.unwrap();
            let got = res.status().as_u16();
            let text = res.text().await.unwrap();
            assert_eq!(got, status, "{what}: {text}");
            let receipt: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(receipt["status"], "applied", "{what}: {receipt}");
            // The replay is the same receipt, byte for byte.
            let again = send().await.unwrap();
            assert_eq!(again.status().as_u16(), status);
            assert_eq!(again.text().await.unwrap(), text, "{what}: replay");

            // Applied once, as the agent's write.
            let slug = receipt["slug"].as_str().unwrap().replace('/', "%2F");
            let revisions: Value = client
                .get(format!("{base}/v1/notes/{slug}:listRevisions"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
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
            let read = |rel: &str| std::fs::read_to_string(vault.join(rel)).ok();
            match op {
                "create" => assert_eq!(read("new.md").as_deref(), Some("# New\n")),
                "edit" => assert_eq!(read("a.md").as_deref(), Some("# A\n\nbeta\n")),
                "patch" => assert_eq!(
                    read("a.md").as_deref(),
                    Some("---\nstatus: done\n---\n# A\n\nalpha\n")
                ),
                "move" => {
                    assert_eq!(read("a.md"), None, "{what}");
                    assert_eq!(read("sub/a.md").as_deref(), Some("# A\n\nalpha\n"));
                    let links: Value = client
                        .get(format!("{base}/v1/notes/sub%2Fa:links"))
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap();
                    assert!(
                        links["backlinks"].to_string().contains("linker"),
                        "{what}: the link to the moved note still resolves: {links}"
                    );
                }
                _ => assert_eq!(read("a.md"), None, "{what}"),
            }
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}
