//! A storage failure under load (issue 40): the vault and the state directory on a small
//! loop-mounted ext4 (`errors=remount-ro`), writers creating and editing notes, then the
//! file system aborted through `/sys/fs/ext4/<dev>/trigger_fs_error` (what was not synced
//! is lost, as in a power cut), the daemon killed, the file system checked (`e2fsck -fy`)
//! and mounted again, the daemon started again: every acknowledged version is readable
//! (its `:diff` answers 200), `git fsck` of history.git is clean and a new write gets a
//! new history commit. Needs root, loop devices, mkfs.ext4, e2fsck and git; elsewhere it
//! says it skipped.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the operator: they make, mount and check a file system"
)]

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::common;

use common::loopfs::{run, unsupported, LoopFs};

/// One acknowledged write: the note, the version its receipt names, the bytes it wrote.
#[derive(Clone, Debug)]
struct Acked {
    slug: String,
    version: String,
    content: String,
}

async fn send(
    client: &reqwest::Client,
    req: reqwest::RequestBuilder,
    key: &str,
    body: &Value,
) -> Option<Value> {
    let _ = client;
    let res = req
        .header("Idempotency-Key", key)
        .json(body)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok()?;
    if !res.status().is_success() {
        return None;
    }
    res.json().await.ok()
}

/// A writer: creates a note, edits it three times, and again, until `stop`; each answer
/// received is recorded; it ends at the first write that is not acknowledged.
async fn writer(base: String, w: usize, stop: Arc<AtomicBool>, acked: Arc<Mutex<Vec<Acked>>>) {
    let client = reqwest::Client::new();
    for n in 0.. {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let slug = format!("load/w{w}-{n}");
        let mut content = format!("# Writer {w} note {n}\n\nrev 0\n");
        let body = json!({"slug": slug, "content": content, "agent_id": format!("w{w}")});
        let req = client.post(format!("{base}/v1/notes"));
        let Some(receipt) = send(&client, req, &format!("c-{w}-{n}"), &body).await else {
            return;
        };
        let mut version = receipt["version_id"].as_str().unwrap().to_string();
        acked.lock().unwrap().push(Acked {
            slug: slug.clone(),
            version: version.clone(),
            content: content.clone(),
        });
        for k in 0..3 {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let body = json!({"version_id": version, "old_string": format!("rev {k}\n"), "new_string": format!("rev {}\n", k + 1), "agent_id": format!("w{w}")});
            let req = client.post(format!("{base}/v1/notes/{}:edit", slug.replace('/', "%2F")));
            let Some(receipt) = send(&client, req, &format!("e-{w}-{n}-{k}"), &body).await else {
                return;
            };
            version = receipt["version_id"].as_str().unwrap().to_string();
            content = content.replace(&format!("rev {k}\n"), &format!("rev {}\n", k + 1));
            acked.lock().unwrap().push(Acked {
                slug: slug.clone(),
                version: version.clone(),
                content: content.clone(),
            });
        }
    }
}

fn start(fs: &mut LoopFs, vault: &Path, state: &Path) -> String {
    let daemon = common::spawn(
        vault,
        state,
        &[
            ("RATE_LIMIT_WRITE_PER_MINUTE", "0"),
            ("RATE_LIMIT_READ_PER_MINUTE", "0"),
        ],
    );
    let base = daemon.base.clone();
    fs.daemon = Some(daemon);
    base
}

/// The history part of `GET /v1/index-status`.
async fn history_status(client: &reqwest::Client, base: &str) -> Value {
    let status: Value = client
        .get(format!("{base}/v1/index-status"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    status["history"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn history_survives_a_file_system_abort_under_load() {
    if let Some(why) = unsupported() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut fs = LoopFs::new(dir.path(), 128);
    let vault = fs.mount.join("vault");
    let state = fs.mount.join("state");
    std::fs::create_dir_all(&vault).unwrap();
    std::fs::write(vault.join("seed.md"), "# Seed\n").unwrap();
    let base = start(&mut fs, &vault, &state);
    let client = reqwest::Client::new();

    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
    let writers: Vec<_> = (0..4)
        .map(|w| tokio::spawn(writer(base.clone(), w, stop.clone(), acked.clone())))
        .collect();
    // Abort once writes are acknowledged and others are under way.
    assert!(
        common::poll_until(Duration::from_secs(60), || async {
            acked.lock().unwrap().len() >= 40
        })
        .await,
        "writes are acknowledged"
    );
    fs.trigger_error();
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    fs.kill_daemon();
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();

    fs.unmount();
    let (_, out) = run("e2fsck", &["-fy", &fs.device]);
    let code = Command::new("e2fsck")
        .args(["-fn", &fs.device])
        .status()
        .unwrap()
        .code();
    assert_eq!(
        code,
        Some(0),
        "the file system is clean after e2fsck -fy: {out}"
    );
    fs.mount();
    let base = start(&mut fs, &vault, &state);
    assert!(
        common::poll_until(Duration::from_secs(60), || async {
            let h = history_status(&client, &base).await;
            h["pending"] == 0 && h["backlog"] == 0 && h["head"].is_string()
        })
        .await,
        "history settles after the restart"
    );

    // Every acknowledged version is readable from history.
    for a in &acked {
        let note = a.slug.replace('/', "%2F");
        let res = client
            .get(format!(
                "{base}/v1/notes/{note}:diff?from={}&to={}",
                a.version, a.version
            ))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let body = res.text().await.unwrap();
        assert_eq!(status, 200, "{a:?}: {body}");
        let current = std::fs::read_to_string(vault.join(format!("{}.md", a.slug))).unwrap();
        if current == a.content {
            let diff: Value = client
                .get(format!("{base}/v1/notes/{note}:diff?from={}", a.version))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(diff["diff"], "", "{a:?}: history holds its bytes");
        }
    }
    let (ok, out) = run(
        "git",
        &[
            "--git-dir",
            state.join("history.git").to_str().unwrap(),
            "fsck",
            "--no-dangling",
        ],
    );
    assert!(ok, "git fsck: {out}");
    // History goes on: a new write gets a new commit, which HEAD names.
    let before = history_status(&client, &base).await;
    let receipt = send(
        &client,
        client.post(format!("{base}/v1/notes")),
        "after-the-fault",
        &json!({"slug": "after", "content": "# After\n", "agent_id": "t"}),
    )
    .await
    .expect("a write after the restart is applied");
    let after = history_status(&client, &base).await;
    assert_ne!(after["head"], before["head"], "{after}");
    let log = common::git(&state, &["log", "-1", "--format=%B"]);
    assert!(
        log.contains(receipt["version_id"].as_str().unwrap()),
        "{log}"
    );
    eprintln!(
        "{} acknowledged writes survived; history after the restart: {after}",
        acked.len()
    );
}
