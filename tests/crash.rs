//! kill -9 during a stream of concurrent writes: after a restart every receipt that was
//! received matches a file on disk and a commit in history, no file is torn, no temp file
//! is left, and replaying every key returns its original receipt.

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
    let mut child = Command::new(BIN)
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
    let client = reqwest::Client::new();
    let mut writers = Vec::new();
    for w in 0..8 {
        let client = client.clone();
        let base = base.clone();
        let received = received.clone();
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let key = format!("crash-{w}-{i}");
                let body = body_for(w, i);
                let Ok(res) = client
                    .post(format!("{base}/v1/notes"))
                    .header("Idempotency-Key", &key)
                    .json(&body)
                    .send()
                    .await
                else {
                    break;
                };
                let status = res.status().as_u16();
                let Ok(text) = res.text().await else { break };
                received.lock().unwrap().push((key, body, status, text));
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for w in writers {
        let _ = w.await;
    }
    let received = received.lock().unwrap().clone();
    assert!(
        received.len() > 10,
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
