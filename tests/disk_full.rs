//! A full disk is a clear state, not a crash (issue 40): on a small loop-mounted ext4
//! holding the vault and the state directory, filled to the last block, a write answers
//! 507 `INSUFFICIENT_STORAGE` (not 500 or 503), the daemon starts on the full file system
//! and serves reads and searches, and once space is freed the same write (same key) is
//! applied. Needs root and loop devices; elsewhere it says it skipped.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the operator: they fill and free a file system"
)]

use serde_json::{json, Value};

mod common;

use common::loopfs::{unsupported, LoopFs};

fn start(fs: &mut LoopFs) -> String {
    let daemon = common::spawn(
        &fs.mount.join("vault"),
        &fs.mount.join("state"),
        &[
            ("RATE_LIMIT_WRITE_PER_MINUTE", "0"),
            ("RATE_LIMIT_READ_PER_MINUTE", "0"),
        ],
    );
    fs.daemon = Some(daemon.child);
    daemon.base
}

async fn create(client: &reqwest::Client, base: &str, key: &str, slug: &str) -> (u16, Value) {
    let res = client
        .post(format!("{base}/v1/notes"))
        .header("Idempotency-Key", key)
        .json(
            &json!({"slug": slug, "content": format!("# {slug}\n\nzebracorn\n"), "agent_id": "t"}),
        )
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

async fn get(client: &reqwest::Client, url: String) -> (u16, Value) {
    let res = client.get(url).send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_insufficient_storage_and_recovers() {
    if let Some(why) = unsupported() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut fs = LoopFs::new(dir.path(), 48);
    let vault = fs.mount.join("vault");
    std::fs::create_dir_all(&vault).unwrap();
    for i in 0..20 {
        std::fs::write(
            vault.join(format!("seed{i}.md")),
            format!("# Seed {i}\n\nplatypus\n"),
        )
        .unwrap();
    }
    let client = reqwest::Client::new();
    let base = start(&mut fs);
    let (status, before) = create(&client, &base, "before", "before").await;
    assert_eq!(status, 201, "{before}");

    let filler = fs.fill("filler");
    let (status, refused) = create(&client, &base, "full-1", "during").await;
    common::assert_envelope(&refused, 507, "INSUFFICIENT_STORAGE");
    assert_eq!(status, 507);
    assert!(
        !vault.join("during.md").exists(),
        "a refused create leaves no file"
    );

    // The daemon starts on the full file system and serves reads and searches: after a
    // clean stop (SQLite removed its WAL index file, which it cannot make again) and
    // after a kill.
    fs.stop_daemon();
    let base = start(&mut fs);
    let (status, note) = get(&client, format!("{base}/v1/notes/before")).await;
    assert_eq!(status, 200, "{note}");
    fs.kill_daemon();
    let base = start(&mut fs);
    let (status, note) = get(&client, format!("{base}/v1/notes/seed3")).await;
    assert_eq!(status, 200, "{note}");
    let (status, note) = get(&client, format!("{base}/v1/notes/before")).await;
    assert_eq!(status, 200, "{note}");
    let (status, found) = get(&client, format!("{base}/v1/search?q=platypus")).await;
    assert_eq!(status, 200, "{found}");
    let (status, refused) = create(&client, &base, "full-1", "during").await;
    assert_eq!(status, 507, "{refused}");
    common::assert_envelope(&refused, 507, "INSUFFICIENT_STORAGE");

    // Space freed: the same write is applied, and search finds it once indexed.
    std::fs::remove_file(&filler).unwrap();
    let (status, receipt) = create(&client, &base, "full-1", "during").await;
    assert_eq!(status, 201, "{receipt}");
    let (status, note) = get(&client, format!("{base}/v1/notes/during")).await;
    assert_eq!(status, 200, "{note}");
    // Not yet asserted: search finding `before` and `during` once space is back (the
    // index writer does not recover from a failed commit; issue 40, part 4).
}
