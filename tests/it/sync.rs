//! The device sync plane on port 0: a device replays the snapshot and the ops after it
//! and its folder equals the vault byte for byte after a mixed workload (API writes,
//! renames with link rewrites, moves, deletes, a watcher edit, attachments); compaction
//! answers `SYNC_COMPACTED` and the hint's path (snapshot, then ops) recovers; every bad
//! input to the reads and the key routes gets its envelope and changes nothing.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the device: they write folders"
)]

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use common::{assert_envelope_for, detail, eventually, res_json, violated_field, Mode, TestServer};
use notevault::auth::{Permission, StaticToken, TokenKind};
use reqwest::Method;
use serde_json::{json, Value};

/// A device's folder, kept the way the ops say: note id → path.
struct Device {
    root: PathBuf,
    notes: HashMap<String, String>,
    seq: i64,
}

impl Device {
    fn new(root: PathBuf) -> Self {
        std::fs::create_dir_all(&root).unwrap();
        Self {
            root,
            notes: HashMap::new(),
            seq: 0,
        }
    }

    fn write(&self, rel: &str, bytes: &[u8]) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    fn remove(&self, rel: &str) {
        let _ = std::fs::remove_file(self.root.join(rel));
    }

    async fn attachment(&self, s: &TestServer, path: &str) {
        let res = s.get(&format!("/v1/attachments/{path}")).await;
        match res.status().as_u16() {
            200 => self.write(path, &res.bytes().await.unwrap()),
            // Gone since: a later op says so.
            404 => {}
            other => panic!("attachment {path}: {other}"),
        }
    }

    /// Read every page of the snapshot into an empty folder.
    async fn snapshot(&mut self, s: &TestServer, page_size: usize) {
        let mut token: Option<String> = None;
        let mut cut = None;
        loop {
            let mut path = format!("/v1/sync/snapshot?page_size={page_size}");
            if let Some(t) = &token {
                path.push_str(&format!("&page_token={t}"));
            }
            let page = s.get_json(&path, 200).await;
            let seq = page["seq"].as_i64().unwrap();
            assert_eq!(*cut.get_or_insert(seq), seq, "one cut for every page");
            assert!(page["entries"].as_array().unwrap().len() <= page_size);
            for e in page["entries"].as_array().unwrap() {
                let rel = e["path"].as_str().unwrap();
                match e["kind"].as_str().unwrap() {
                    "note" => {
                        let bytes = STANDARD
                            .decode(e["content_base64"].as_str().unwrap())
                            .unwrap();
                        self.write(rel, &bytes);
                        self.notes
                            .insert(e["note_id"].as_str().unwrap().into(), rel.into());
                    }
                    "attachment" => self.attachment(s, rel).await,
                    other => panic!("entry kind {other}"),
                }
            }
            match page["next_page_token"].as_str() {
                Some(t) => token = Some(t.to_string()),
                None => break,
            }
        }
        self.seq = cut.unwrap();
    }

    /// Read and apply every op after the device's seq, `page_size` at a time.
    async fn pull(&mut self, s: &TestServer, page_size: usize) -> usize {
        let mut applied = 0;
        loop {
            let page = s
                .get_json(
                    &format!("/v1/sync/ops?after_seq={}&page_size={page_size}", self.seq),
                    200,
                )
                .await;
            for op in page["ops"].as_array().unwrap() {
                self.apply(s, op).await;
                applied += 1;
            }
            self.seq = page["next_after_seq"].as_i64().unwrap();
            if !page["has_more"].as_bool().unwrap() {
                assert_eq!(self.seq, page["committed_seq"].as_i64().unwrap());
                return applied;
            }
        }
    }

    async fn apply(&mut self, s: &TestServer, op: &Value) {
        let path = op["path"].as_str().unwrap().to_string();
        match op["kind"].as_str().unwrap() {
            "upsert" | "move" => {
                let id = op["note_id"].as_str().unwrap().to_string();
                if let Some(old) = self.notes.get(&id).filter(|old| **old != path) {
                    let from = self.root.join(old);
                    if from.exists() {
                        std::fs::create_dir_all(self.root.join(&path).parent().unwrap()).unwrap();
                        std::fs::rename(from, self.root.join(&path)).unwrap();
                    }
                }
                match op["content_base64"].as_str() {
                    Some(b64) => self.write(&path, &STANDARD.decode(b64).unwrap()),
                    None => assert!(op["superseded"].as_bool().unwrap(), "{op}"),
                }
                self.notes.insert(id, path);
            }
            "delete" => {
                if let Some(old) = self.notes.remove(op["note_id"].as_str().unwrap()) {
                    self.remove(&old);
                }
            }
            "attachment_upsert" => self.attachment(s, &path).await,
            "attachment_delete" => self.remove(&path),
            other => panic!("op kind {other}"),
        }
    }
}

/// Every file of a folder (the daemon's state and the ignored folders left out), with
/// its bytes.
fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| {
            let name = e.file_name().to_string_lossy();
            e.depth() == 0 || ![".notevault", ".obsidian", ".git", ".trash"].contains(&&*name)
        })
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e
                .path()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .to_string();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

fn assert_same_folder(device: &Path, vault: &Path) {
    let (d, v) = (files(device), files(vault));
    let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&d), names(&v), "the same files");
    for (rel, bytes) in &v {
        assert!(d[rel] == *bytes, "{rel} differs");
    }
}

async fn upload(s: &TestServer, key: &str, name: &str, folder: &str, bytes: &[u8]) {
    let boundary = "XsyncBoundaryX";
    let mut body = Vec::new();
    if !folder.is_empty() {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"folder\"\r\n\r\n{folder}\r\n").as_bytes(),
        );
    }
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: image/png\r\n\r\n").as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let res = s
        .client
        .post(s.url("/v1/attachments"))
        .header("Idempotency-Key", key)
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    res_json(res, 201, "upload").await;
}

fn png(tag: u8) -> Vec<u8> {
    let mut v =
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89".to_vec();
    v.extend_from_slice(&[tag; 64]);
    v
}

async fn version(s: &TestServer, slug: &str) -> String {
    s.get_json(&format!("/v1/notes/{slug}?limit=1"), 200).await["version_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Ops of every kind, from every source: API creates (CRLF kept), edits, a rename that
/// rewrites links in other notes, a move, a delete, a rollback, an editor's save seen by
/// the watcher, uploads, an attachment deleted, a folder moved with its notes.
async fn mixed_workload(s: &TestServer) {
    let call = |key: &str, method: Method, path: &str, body: Option<Value>, status: u16| {
        let (key, path) = (key.to_string(), path.to_string());
        async move { s.call(method, &path, Some(&key), body, status).await }
    };
    call(
        "c1",
        Method::POST,
        "/v1/notes",
        Some(json!({"slug": "sync/crlf", "content": "# CRLF\r\nline one\r\n", "agent_id": "t"})),
        201,
    )
    .await;
    call(
        "c2",
        Method::POST,
        "/v1/notes",
        Some(json!({"slug": "sync/gone", "content": "to delete\n", "agent_id": "t"})),
        201,
    )
    .await;
    let v = version(s, "sync/crlf").await;
    call("e1", Method::POST, "/v1/notes/sync%2Fcrlf:edit", Some(json!({"version_id": v, "old_string": "line one", "new_string": "line 1", "agent_id": "t"})), 200).await;
    // A rename that rewrites the links to it in other notes (each its own revision).
    call(
        "r1",
        Method::POST,
        "/v1/notes/projects%2Froadmap:rename",
        Some(json!({"name": "plan-2027", "agent_id": "t"})),
        200,
    )
    .await;
    call(
        "m1",
        Method::POST,
        "/v1/notes/sync%2Fcrlf:move",
        Some(json!({"folder": "archive", "agent_id": "t"})),
        200,
    )
    .await;
    call(
        "d1",
        Method::DELETE,
        "/v1/notes/sync%2Fgone?agent_id=t",
        None,
        200,
    )
    .await;
    // An editor's save, seen by the watcher.
    std::fs::write(s.vault.join("Inbox.md"), "# Inbox\n\nedited in an editor\n").unwrap();
    std::fs::write(s.vault.join("from-editor.md"), "made by an editor\n").unwrap();
    eventually("the watcher records the editor's files", || async {
        let page = s
            .get_json("/v1/sync/ops?after_seq=0&page_size=500", 200)
            .await;
        let paths: Vec<String> = page["ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["path"].as_str().unwrap().to_string())
            .collect();
        let last_inbox = page["ops"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|o| o["path"] == "Inbox.md")
            .cloned();
        paths.contains(&"from-editor.md".to_string())
            && last_inbox.is_some_and(|o| o["actor"] == "filesystem")
    })
    .await;
    upload(s, "u1", "pic.png", "sync", &png(1)).await;
    upload(s, "u2", "doomed.png", "", &png(2)).await;
    call(
        "ad1",
        Method::DELETE,
        "/v1/attachments/doomed.png?agent_id=t",
        None,
        200,
    )
    .await;
    // An attachment copied in by hand.
    std::fs::write(s.vault.join("by-hand.png"), png(3)).unwrap();
    eventually("the watcher records the copied attachment", || async {
        let page = s
            .get_json("/v1/sync/ops?after_seq=0&page_size=500", 200)
            .await;
        page["ops"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["path"] == "by-hand.png")
    })
    .await;
    // A folder moved with its notes.
    call(
        "f1",
        Method::POST,
        "/v1/folders:move",
        Some(json!({"path": "recipes", "folder": "archive", "agent_id": "t"})),
        200,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_replaying_snapshot_and_ops_equals_the_vault_byte_for_byte() {
    let s = TestServer::start(Some("vault-example"), |c| {
        c.rate_limit_read_per_minute = 0;
        c.rate_limit_write_per_minute = 0;
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    // Device A reads the snapshot before the workload, then only ops.
    let mut a = Device::new(dir.path().join("a"));
    a.snapshot(&s, 4).await;
    assert_same_folder(&a.root, &s.vault);
    mixed_workload(&s).await;
    let applied = a.pull(&s, 3).await;
    assert!(applied >= 10, "{applied} ops");
    assert_same_folder(&a.root, &s.vault);

    // Every kind of op was seen, each at its own seq, in order.
    let page = s
        .get_json("/v1/sync/ops?after_seq=0&page_size=500", 200)
        .await;
    let ops = page["ops"].as_array().unwrap();
    let kinds: std::collections::BTreeSet<&str> =
        ops.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    for kind in [
        "upsert",
        "move",
        "delete",
        "attachment_upsert",
        "attachment_delete",
    ] {
        assert!(kinds.contains(kind), "no {kind} op in {kinds:?}");
    }
    let seqs: Vec<i64> = ops.iter().map(|o| o["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "ordered by seq");
    assert_eq!(
        *seqs.last().unwrap(),
        page["committed_seq"].as_i64().unwrap()
    );
    // Every revision has its op, with its version.
    let crlf = s
        .get_json("/v1/notes/archive%2Fcrlf:listRevisions", 200)
        .await;
    for rev in crlf["versions"].as_array().unwrap() {
        assert!(
            ops.iter().any(|o| o["version_id"] == rev["version_id"]),
            "no op for revision {rev}"
        );
    }
    let moved = ops
        .iter()
        .find(|o| o["kind"] == "move" && o["path"] == "archive/crlf.md")
        .unwrap();
    assert_eq!(moved["from_path"], "sync/crlf.md");
    assert_eq!(moved["slug"], "archive/crlf");
    assert_eq!(moved["visibility"], "standard");

    // Device B starts later: snapshot (small pages) then ops; the same folder.
    let mut b = Device::new(dir.path().join("b"));
    b.snapshot(&s, 2).await;
    assert_eq!(b.pull(&s, 50).await, 0);
    assert_same_folder(&b.root, &s.vault);

    // A cut holds while the vault moves on between pages: the pages answer the state at
    // the first page's seq, and the ops after it bring the rest.
    let first = s.get_json("/v1/sync/snapshot?page_size=1", 200).await;
    let token = first["next_page_token"].as_str().unwrap().to_string();
    s.call(
        Method::POST,
        "/v1/notes",
        Some("late"),
        Some(json!({"slug": "aaa-late", "content": "late\n", "agent_id": "t"})),
        201,
    )
    .await;
    let v = version(&s, "Welcome").await;
    let welcome_before = std::fs::read(s.vault.join("Welcome.md")).unwrap();
    s.call(
        Method::PATCH,
        "/v1/notes/Welcome?update_mask=content",
        Some("late2"),
        Some(json!({"content": "rewritten\n", "version_id": v, "agent_id": "t"})),
        200,
    )
    .await;
    let mut seen = first["entries"].as_array().unwrap().clone();
    let mut token = Some(token);
    while let Some(t) = token {
        let page = s
            .get_json(
                &format!("/v1/sync/snapshot?page_size=50&page_token={t}"),
                200,
            )
            .await;
        assert_eq!(page["seq"], first["seq"]);
        seen.extend(page["entries"].as_array().unwrap().iter().cloned());
        token = page["next_page_token"].as_str().map(str::to_string);
    }
    assert!(
        seen.iter().all(|e| e["path"] != "aaa-late.md"),
        "a note made after the cut is not in it"
    );
    let welcome = seen.iter().find(|e| e["path"] == "Welcome.md").unwrap();
    assert_eq!(
        STANDARD
            .decode(welcome["content_base64"].as_str().unwrap())
            .unwrap(),
        welcome_before,
        "the note as it was at the cut, from history"
    );
    a.pull(&s, 100).await;
    assert_same_folder(&a.root, &s.vault);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_answers_sync_compacted_and_the_snapshot_then_ops_recover() {
    let s = TestServer::start(Some("vault-example"), |c| {
        c.rate_limit_read_per_minute = 0;
        c.rate_limit_write_per_minute = 0;
        c.sync_retention_days = 0;
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut old = Device::new(dir.path().join("old"));
    old.snapshot(&s, 100).await;
    let start = old.seq;
    for i in 0..4 {
        let v = version(&s, "scratchpad").await;
        s.call(
            Method::PATCH,
            "/v1/notes/scratchpad?update_mask=content",
            Some(&format!("p{i}")),
            Some(json!({"content": format!("take {i}\n"), "version_id": v, "agent_id": "t"})),
            200,
        )
        .await;
    }
    s.call(
        Method::POST,
        "/v1/notes",
        Some("t1"),
        Some(json!({"slug": "tomb", "content": "x\n", "agent_id": "t"})),
        201,
    )
    .await;
    s.call(
        Method::DELETE,
        "/v1/notes/tomb?agent_id=t",
        Some("t2"),
        None,
        200,
    )
    .await;
    // A live device's checkpoint holds compaction back to what it applied.
    let held = start + 2;
    let cp = s
        .call(
            Method::POST,
            "/v1/sync/checkpoint",
            Some("cp1"),
            Some(json!({"device_id": "laptop", "seq": held})),
            200,
        )
        .await;
    assert_eq!(cp["seq"], held);
    let done = s
        .call(Method::POST, "/v1/sync:compact", Some("k1"), None, 200)
        .await;
    assert_eq!(done["compacted_through_seq"], held);
    assert!(done["dropped"].as_u64().unwrap() >= 1, "{done}");
    // Reading after the horizon works; before it is SYNC_COMPACTED with the horizon.
    s.get_json(&format!("/v1/sync/ops?after_seq={held}"), 200)
        .await;
    let err = s
        .get_error(
            &format!("/v1/sync/ops?after_seq={start}"),
            410,
            "SYNC_COMPACTED",
        )
        .await;
    assert_eq!(
        detail(&err, "ErrorInfo")["metadata"]["compacted_through_seq"],
        held.to_string()
    );
    assert!(err["hint"]
        .as_str()
        .unwrap()
        .contains("GET /v1/sync/snapshot"));

    // The checkpoint moves on; every op past the retention is compacted but the latest
    // of each note and the tombstones.
    let now = s
        .get_json(&format!("/v1/sync/ops?after_seq={held}&page_size=500"), 200)
        .await["committed_seq"]
        .as_i64()
        .unwrap();
    s.call(
        Method::POST,
        "/v1/sync/checkpoint",
        Some("cp2"),
        Some(json!({"device_id": "laptop", "seq": now})),
        200,
    )
    .await;
    let done = s
        .call(Method::POST, "/v1/sync:compact", Some("k2"), None, 200)
        .await;
    assert_eq!(done["compacted_through_seq"], now);
    let kept = s
        .get_json(&format!("/v1/sync/ops?after_seq={now}"), 200)
        .await;
    assert_eq!(kept["ops"].as_array().unwrap().len(), 0);
    assert_eq!(kept["compacted_through_seq"], now);

    // The old device follows the hint: snapshot, then ops after the horizon.
    let err = s
        .get_error(
            &format!("/v1/sync/ops?after_seq={}", old.seq),
            410,
            "SYNC_COMPACTED",
        )
        .await;
    let horizon: i64 = detail(&err, "ErrorInfo")["metadata"]["compacted_through_seq"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    std::fs::remove_dir_all(&old.root).unwrap();
    let mut fresh = Device::new(old.root.clone());
    fresh.snapshot(&s, 7).await;
    assert!(fresh.seq >= horizon);
    fresh.pull(&s, 5).await;
    assert_same_folder(&fresh.root, &s.vault);

    // A compaction while a snapshot is paged ends that snapshot: its cut could miss
    // notes; the hint is to start it again.
    let first = s.get_json("/v1/sync/snapshot?page_size=1", 200).await;
    let token = first["next_page_token"].as_str().unwrap().to_string();
    s.call(
        Method::POST,
        "/v1/notes",
        Some("t3"),
        Some(json!({"slug": "later", "content": "x\n", "agent_id": "t"})),
        201,
    )
    .await;
    fresh.pull(&s, 5).await;
    let latest = s
        .get_json(&format!("/v1/sync/ops?after_seq={now}"), 200)
        .await["committed_seq"]
        .as_i64()
        .unwrap();
    s.call(
        Method::POST,
        "/v1/sync/checkpoint",
        Some("cp3"),
        Some(json!({"device_id": "laptop", "seq": latest})),
        200,
    )
    .await;
    let done = s
        .call(Method::POST, "/v1/sync:compact", Some("k3"), None, 200)
        .await;
    assert_eq!(done["compacted_through_seq"], latest);
    let err = s
        .get_error(
            &format!("/v1/sync/snapshot?page_token={token}"),
            400,
            "VALIDATION_FAILED",
        )
        .await;
    assert_eq!(violated_field(&err), "page_token");
    assert_same_folder(&fresh.root, &s.vault);
}

async fn bad_reads_and_checkpoints_get_their_envelope(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |c| {
        c.rate_limit_read_per_minute = 0;
        c.rate_limit_write_per_minute = 0;
    })
    .await;
    let committed = s
        .get_json("/v1/sync/ops?after_seq=0&page_size=1", 200)
        .await["committed_seq"]
        .as_i64()
        .unwrap();
    for (path, field) in [
        ("/v1/sync/ops", "after_seq"),
        ("/v1/sync/ops?after_seq=-1", "after_seq"),
        ("/v1/sync/ops?after_seq=abc", "after_seq"),
        ("/v1/sync/ops?after_seq=1.5", "after_seq"),
        (
            &*format!("/v1/sync/ops?after_seq={}", committed + 1),
            "after_seq",
        ),
        ("/v1/sync/ops?after_seq=0&page_size=0", "page_size"),
        ("/v1/sync/ops?after_seq=0&page_size=501", "page_size"),
        ("/v1/sync/ops?after_seq=0&nope=1", "nope"),
        ("/v1/sync/snapshot?page_token=forged.token", "page_token"),
        ("/v1/sync/snapshot?page_size=x", "page_size"),
    ] {
        let body = s.get_error(path, 400, "VALIDATION_FAILED").await;
        assert_eq!(violated_field(&body), field, "{path}: {body}");
    }
    let cases = [
        ("no device", json!({"seq": 1}), "device_id"),
        (
            "an empty device",
            json!({"device_id": "", "seq": 1}),
            "device_id",
        ),
        (
            "a negative seq",
            json!({"device_id": "d", "seq": -1}),
            "seq",
        ),
        (
            "a seq beyond",
            json!({"device_id": "d", "seq": committed + 1}),
            "seq",
        ),
        ("a string seq", json!({"device_id": "d", "seq": "1"}), "seq"),
        (
            "an extra field",
            json!({"device_id": "d", "seq": 1, "x": 1}),
            "x",
        ),
    ];
    for (what, body, field) in cases {
        let answer = s
            .refused(
                what,
                Method::POST,
                "/v1/sync/checkpoint",
                None,
                Some(body),
                400,
                "VALIDATION_FAILED",
            )
            .await;
        assert_eq!(violated_field(&answer), field, "{what}: {answer}");
    }
    // The daemon keeps serving.
    s.get_json("/v1/sync/ops?after_seq=0", 200).await;
}

fn keys(version: u64) -> Value {
    json!({
        "keyVersion": version,
        "kdf": {"salt": "c2FsdHNhbHRzYWx0c2FsdA==", "N": 131072, "r": 8, "p": 1},
        "wrappedDek": STANDARD.encode([7u8; 72]),
        "recovery": {"salt": "cmVjb3Zlcnlz", "wrappedDek": STANDARD.encode([9u8; 72])},
    })
}

/// A token with what the key routes need: `notes.write` and `notes.review`.
fn token(token: &str, kind: TokenKind) -> StaticToken {
    StaticToken {
        token: token.into(),
        permissions: vec![Permission::NotesWrite, Permission::NotesReview],
        kind,
        vault_id: None,
    }
}

async fn the_key_routes_validate_every_field_refuse_a_pat_and_enable_once(mode: Mode) {
    let s = TestServer::start_as(mode, None, |c| {
        c.rate_limit_read_per_minute = 0;
        c.rate_limit_write_per_minute = 0;
        c.static_tokens = vec![
            token("session-token", TokenKind::Session),
            token("pat-token", TokenKind::Pat),
            StaticToken {
                permissions: vec![Permission::NotesWrite],
                ..token("writer-token", TokenKind::Session)
            },
        ];
    })
    .await;
    let send = |method: Method, path: &str, bearer: &str, body: Value| {
        s.client
            .request(method, s.url(path))
            .bearer_auth(bearer)
            .json(&body)
            .send()
    };
    let get = || async {
        let res = s
            .client
            .get(s.url("/v1/sync/e2ee"))
            .bearer_auth("pat-token")
            .send()
            .await
            .unwrap();
        res_json(res, 200, "GET /v1/sync/e2ee").await
    };
    let off = get().await;
    assert_eq!(off["enabled"], false);
    assert_eq!(off["salt"], Value::Null);
    assert_eq!(off["hierarchy"], Value::Null);
    assert!(off["recoveryNotice"].is_string());

    // A personal access token may not call the key routes.
    for (method, path) in [
        (Method::POST, "/v1/sync/e2ee:enable"),
        (Method::PUT, "/v1/sync/e2ee/keys"),
    ] {
        let res = send(method.clone(), path, "pat-token", keys(1))
            .await
            .unwrap();
        let body = res_json(res, 403, path).await;
        assert_envelope_for(path, &body, 403, "CREDENTIAL_FORBIDDEN");
        // Nor a session that may write but not review (an agent's token): a key change
        // can lock every device out of the private notes.
        let res = send(method.clone(), path, "writer-token", keys(1))
            .await
            .unwrap();
        let body = res_json(res, 403, path).await;
        assert_envelope_for(path, &body, 403, "PERMISSION_MISSING");
        assert_eq!(
            detail(&body, "ErrorInfo")["metadata"]["scope"],
            "notes.review"
        );
    }
    assert_eq!(get().await, off);

    let res = send(
        Method::POST,
        "/v1/sync/e2ee:enable",
        "session-token",
        keys(1),
    )
    .await
    .unwrap();
    let on = res_json(res, 200, "enable").await;
    assert_eq!(on["enabled"], true);
    // The vault summary tells the truth about it.
    let res = s
        .client
        .get(s.url("/v1/vault"))
        .bearer_auth("pat-token")
        .send()
        .await
        .unwrap();
    assert_eq!(res_json(res, 200, "vault").await["e2ee"]["enabled"], true);
    assert_eq!(on["salt"], "c2FsdHNhbHRzYWx0c2FsdA==");
    assert_eq!(on["hierarchy"], keys(1));
    assert_eq!(get().await, on);
    let res = send(
        Method::POST,
        "/v1/sync/e2ee:enable",
        "session-token",
        keys(2),
    )
    .await
    .unwrap();
    let body = res_json(res, 409, "enable again").await;
    assert_envelope_for("enable again", &body, 409, "ALREADY_ENABLED");
    assert_eq!(get().await, on);

    // Every field violated one at a time: VALIDATION_FAILED naming it, nothing changed.
    let with = |f: &dyn Fn(&mut Value)| {
        let mut v = keys(2);
        f(&mut v);
        v
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        ("not an object", json!([1]), "body"),
        (
            "an extra property",
            with(&|v| v["extra"] = json!(1)),
            "extra",
        ),
        (
            "no keyVersion",
            with(&|v| {
                v.as_object_mut().unwrap().remove("keyVersion");
            }),
            "keyVersion",
        ),
        (
            "no kdf",
            with(&|v| {
                v.as_object_mut().unwrap().remove("kdf");
            }),
            "kdf",
        ),
        (
            "no wrappedDek",
            with(&|v| {
                v.as_object_mut().unwrap().remove("wrappedDek");
            }),
            "wrappedDek",
        ),
        (
            "no recovery",
            with(&|v| {
                v.as_object_mut().unwrap().remove("recovery");
            }),
            "recovery",
        ),
        (
            "keyVersion 0",
            with(&|v| v["keyVersion"] = json!(0)),
            "keyVersion",
        ),
        (
            "keyVersion 1001",
            with(&|v| v["keyVersion"] = json!(1001)),
            "keyVersion",
        ),
        (
            "keyVersion 1.5",
            with(&|v| v["keyVersion"] = json!(1.5)),
            "keyVersion",
        ),
        (
            "keyVersion a string",
            with(&|v| v["keyVersion"] = json!("2")),
            "keyVersion",
        ),
        ("kdf a string", with(&|v| v["kdf"] = json!("scrypt")), "kdf"),
        ("kdf extra", with(&|v| v["kdf"]["x"] = json!(1)), "kdf.x"),
        (
            "salt of 0 chars",
            with(&|v| v["kdf"]["salt"] = json!("")),
            "kdf.salt",
        ),
        (
            "salt of 129 chars",
            with(&|v| v["kdf"]["salt"] = json!("s".repeat(129))),
            "kdf.salt",
        ),
        (
            "salt a number",
            with(&|v| v["kdf"]["salt"] = json!(5)),
            "kdf.salt",
        ),
        (
            "no salt",
            with(&|v| {
                v["kdf"].as_object_mut().unwrap().remove("salt");
            }),
            "kdf.salt",
        ),
        (
            "N not 131072",
            with(&|v| v["kdf"]["N"] = json!(16384)),
            "kdf.N",
        ),
        (
            "N a string",
            with(&|v| v["kdf"]["N"] = json!("131072")),
            "kdf.N",
        ),
        (
            "no N",
            with(&|v| {
                v["kdf"].as_object_mut().unwrap().remove("N");
            }),
            "kdf.N",
        ),
        ("r not 8", with(&|v| v["kdf"]["r"] = json!(16)), "kdf.r"),
        ("p not 1", with(&|v| v["kdf"]["p"] = json!(2)), "kdf.p"),
        (
            "wrappedDek a number",
            with(&|v| v["wrappedDek"] = json!(1)),
            "wrappedDek",
        ),
        (
            "wrappedDek not base64",
            with(&|v| v["wrappedDek"] = json!("not base64!")),
            "wrappedDek",
        ),
        (
            "recovery a string",
            with(&|v| v["recovery"] = json!("x")),
            "recovery",
        ),
        (
            "recovery with one field",
            with(&|v| v["recovery"] = json!({"salt": "abc"})),
            "recovery.wrappedDek",
        ),
        (
            "recovery without salt",
            with(&|v| v["recovery"] = json!({"wrappedDek": "AAAA"})),
            "recovery.salt",
        ),
        (
            "recovery extra",
            with(&|v| v["recovery"]["x"] = json!(1)),
            "recovery.x",
        ),
        (
            "recovery salt of 129",
            with(&|v| v["recovery"]["salt"] = json!("s".repeat(129))),
            "recovery.salt",
        ),
        (
            "recovery wrappedDek not base64",
            with(&|v| v["recovery"]["wrappedDek"] = json!("%%%")),
            "recovery.wrappedDek",
        ),
    ];
    for (what, body, field) in cases {
        let res = send(Method::PUT, "/v1/sync/e2ee/keys", "session-token", body)
            .await
            .unwrap();
        let answer = res_json(res, 400, what).await;
        assert_envelope_for(what, &answer, 400, "VALIDATION_FAILED");
        assert_eq!(violated_field(&answer), field, "{what}: {answer}");
        // No secret comes back in an error.
        assert!(
            !answer.to_string().contains(&STANDARD.encode([7u8; 72])),
            "{what}"
        );
        assert_eq!(get().await, on, "{what}: nothing changed");
    }

    // A rotation: a new version; null clears the recovery wrap.
    let mut next = keys(2);
    next["recovery"] = Value::Null;
    let res = send(
        Method::PUT,
        "/v1/sync/e2ee/keys",
        "session-token",
        next.clone(),
    )
    .await
    .unwrap();
    let rotated = res_json(res, 200, "rotate").await;
    assert_eq!(rotated["hierarchy"], next);
    assert_eq!(get().await, rotated);
    assert_ne!(rotated["recoveryNotice"], on["recoveryNotice"]);

    // Each key change is an `e2ee_key` op in the log (never the key itself), at its own
    // seq; a refused one recorded nothing.
    let res = s
        .client
        .get(s.url("/v1/sync/ops?after_seq=0&page_size=500"))
        .bearer_auth("pat-token")
        .send()
        .await
        .unwrap();
    let ops = res_json(res, 200, "ops").await;
    let keys: Vec<&Value> = ops["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == "e2ee_key")
        .collect();
    assert_eq!(keys.len(), 2, "{ops}");
    assert_eq!(keys[0]["version_id"], "1");
    assert_eq!(keys[1]["version_id"], "2");
    assert_eq!(keys[1]["seq"], ops["committed_seq"]);
    assert!(!ops.to_string().contains(&STANDARD.encode([7u8; 72])));
}

async fn push(s: &TestServer, key: &str, body: Value, status: u16) -> Value {
    s.call(Method::POST, "/v1/sync/ops", Some(key), Some(body), status)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_devices_push_conflicting_edits_one_wins_the_other_keeps_a_conflicted_copy() {
    let s = TestServer::start(Some("vault-example"), |c| {
        c.rate_limit_read_per_minute = 0;
        c.rate_limit_write_per_minute = 0;
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (mut a, mut b) = (
        Device::new(dir.path().join("a")),
        Device::new(dir.path().join("b")),
    );
    a.snapshot(&s, 100).await;
    b.snapshot(&s, 100).await;
    let base = version(&s, "Welcome").await;
    let id = s.get_json("/v1/notes/Welcome?limit=1", 200).await["note_id"]
        .as_str()
        .unwrap()
        .to_string();
    let edit = |text: &str, base: &str| {
        json!({"kind": "upsert", "note_id": id, "path": "Welcome.md", "base_version_id": base,
               "content_base64": STANDARD.encode(text)})
    };
    // Both edit Welcome from the same base, offline; A pushes first and wins.
    let a_text = "# Welcome\n\nedited on the laptop\n";
    let b_text = "# Welcome\n\nedited on the phone\n";
    let won = push(
        &s,
        "a-1",
        json!({"device_id": "laptop", "ops": [edit(a_text, &base)]}),
        200,
    )
    .await;
    assert_eq!(won["results"][0]["status"], "applied", "{won}");
    assert_eq!(won["results"][0]["receipt"]["slug"], "Welcome");
    let before = s
        .get_json("/v1/sync/ops?after_seq=0&page_size=1", 200)
        .await["committed_seq"]
        .clone();
    let lost = push(
        &s,
        "b-1",
        json!({"device_id": "phone", "ops": [edit(b_text, &base)]}),
        200,
    )
    .await;
    assert_eq!(lost["results"][0]["status"], "failed", "{lost}");
    assert_eq!(lost["results"][0]["error"]["reason"], "VERSION_MOVED");
    assert_eq!(
        lost["committed_seq"], before,
        "a refused op records nothing"
    );
    assert_eq!(
        std::fs::read_to_string(s.vault.join("Welcome.md")).unwrap(),
        a_text
    );
    // B keeps its edit as a conflicted copy, pushed as a new note.
    let copy = push(&s, "b-2", json!({"device_id": "phone", "ops": [
        {"kind": "upsert", "path": "Welcome (conflict phone).md", "content_base64": STANDARD.encode(b_text)}
    ]}), 200).await;
    assert_eq!(copy["results"][0]["status"], "applied", "{copy}");
    // A retry of a batch replays it: nothing new is recorded.
    let seq = s
        .get_json("/v1/sync/ops?after_seq=0&page_size=1", 200)
        .await["committed_seq"]
        .clone();
    let again = push(&s, "b-2", json!({"device_id": "phone", "ops": [
        {"kind": "upsert", "path": "Welcome (conflict phone).md", "content_base64": STANDARD.encode(b_text)}
    ]}), 200).await;
    assert_eq!(again["results"], copy["results"]);
    assert_eq!(again["committed_seq"], seq);
    // Both devices pull and converge on the vault; neither edit is lost.
    a.pull(&s, 10).await;
    b.pull(&s, 10).await;
    assert_same_folder(&a.root, &s.vault);
    assert_same_folder(&b.root, &s.vault);
    assert_eq!(
        std::fs::read_to_string(b.root.join("Welcome (conflict phone).md")).unwrap(),
        b_text
    );
    // The ops name the devices as actors.
    let ops = s
        .get_json("/v1/sync/ops?after_seq=0&page_size=500", 200)
        .await;
    assert!(ops["ops"]
        .as_array()
        .unwrap()
        .iter()
        .any(|o| o["actor"] == "agent:device:laptop"));

    // A move, a rename and a delete, each with its base; a stale base changes nothing.
    let v = version(&s, "scratchpad").await;
    let r = push(&s, "a-2", json!({"device_id": "laptop", "ops": [
        {"kind": "move", "path": "scratchpad.md", "to_path": "archive/scratchpad.md", "base_version_id": v},
        {"kind": "delete", "path": "Inbox.md", "base_version_id": base},
    ]}), 200).await;
    assert_eq!(r["results"][0]["status"], "applied", "{r}");
    assert_eq!(r["results"][1]["error"]["reason"], "VERSION_MOVED", "{r}");
    assert!(s.vault.join("archive/scratchpad.md").exists());
    assert!(s.vault.join("Inbox.md").exists());
    a.pull(&s, 10).await;
    assert_same_folder(&a.root, &s.vault);
}

async fn a_bad_push_is_refused_whole_and_records_nothing(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |c| {
        c.rate_limit_read_per_minute = 0;
        c.rate_limit_write_per_minute = 0;
    })
    .await;
    let v = version(&s, "Welcome").await;
    let seq = || async {
        s.get_json("/v1/sync/ops?after_seq=0&page_size=1", 200)
            .await["committed_seq"]
            .clone()
    };
    let before = seq().await;
    let files_before = files(&s.vault);
    let up = |path: &str, text: &str| json!({"kind": "upsert", "path": path, "content_base64": STANDARD.encode(text)});
    let cases: Vec<(&str, Value, &str)> = vec![
        ("no device", json!({"ops": [up("n.md", "x")]}), "device_id"),
        ("no ops", json!({"device_id": "d", "ops": []}), "ops"),
        (
            "a duplicate op",
            json!({"device_id": "d", "ops": [up("n.md", "x"), up("n.md", "x")]}),
            "ops[1]",
        ),
        (
            "an op on a note another deletes",
            json!({"device_id": "d", "ops": [
                {"kind": "delete", "path": "Welcome.md", "base_version_id": v},
                {"kind": "upsert", "path": "Welcome.md", "base_version_id": v, "content_base64": STANDARD.encode("x")},
            ]}),
            "ops[1]",
        ),
        (
            "content not base64",
            json!({"device_id": "d", "ops": [{"kind": "upsert", "path": "n.md", "content_base64": "%%%"}]}),
            "ops[0].content_base64",
        ),
        (
            "content not UTF-8",
            json!({"device_id": "d", "ops": [{"kind": "upsert", "path": "n.md", "content_base64": STANDARD.encode([0xff, 0xfe])}]}),
            "ops[0].content_base64",
        ),
        (
            "an unknown kind",
            json!({"device_id": "d", "ops": [{"kind": "frob", "path": "n.md"}]}),
            "ops[0].kind",
        ),
        (
            "a delete without base",
            json!({"device_id": "d", "ops": [{"kind": "delete", "path": "Welcome.md"}]}),
            "ops[0].base_version_id",
        ),
        (
            "a move without to_path",
            json!({"device_id": "d", "ops": [{"kind": "move", "path": "Welcome.md", "base_version_id": v}]}),
            "ops[0].to_path",
        ),
        (
            "a move of folder and name",
            json!({"device_id": "d", "ops": [{"kind": "move", "path": "Welcome.md", "to_path": "a/b.md", "base_version_id": v}]}),
            "ops[0].to_path",
        ),
        (
            "a private op on a note's path",
            json!({"device_id": "d", "ops": [{"kind": "upsert", "path": "n.md", "content_base64": "eA==", "visibility": "private"}]}),
            "ops[0].path",
        ),
        (
            "plaintext pushed as private",
            json!({"device_id": "d", "ops": [{"kind": "upsert", "path": "n.nvpriv", "content_base64": STANDARD.encode("my secret"), "visibility": "private"}]}),
            "ops[0].content_base64",
        ),
        (
            "an unknown visibility",
            json!({"device_id": "d", "ops": [{"kind": "upsert", "path": "n.md", "content_base64": "eA==", "visibility": "secret"}]}),
            "ops[0].visibility",
        ),
        (
            "an extra field",
            json!({"device_id": "d", "ops": [up("n.md", "x")], "x": 1}),
            "x",
        ),
        (
            "a path that is no note",
            json!({"device_id": "d", "ops": [up("n.txt", "x")]}),
            "ops[0].path",
        ),
    ];
    for (i, (what, body, field)) in cases.into_iter().enumerate() {
        let answer = s
            .refused(
                what,
                Method::POST,
                "/v1/sync/ops",
                Some(&format!("bad-{i}")),
                Some(body),
                400,
                "VALIDATION_FAILED",
            )
            .await;
        assert_eq!(violated_field(&answer), field, "{what}: {answer}");
    }
    s.refused(
        "no key",
        Method::POST,
        "/v1/sync/ops",
        None,
        Some(json!({"device_id": "d", "ops": [up("n.md", "x")]})),
        400,
        "IDEMPOTENCY_KEY_MISSING",
    )
    .await;
    // A 100 MB batch is refused at the byte cap, before it is read whole.
    let huge = "A".repeat(100 * 1024 * 1024);
    let res = s
        .client
        .post(s.url("/v1/sync/ops"))
        .header("Idempotency-Key", "huge")
        .header("Content-Type", "application/json")
        .body(format!("{{\"device_id\": \"d\", \"ops\": [{{\"kind\": \"upsert\", \"path\": \"n.md\", \"content_base64\": \"{huge}\"}}]}}"))
        .send()
        .await;
    if let Ok(res) = res {
        let body = res_json(res, 413, "a 100 MB batch").await;
        assert_envelope_for("a 100 MB batch", &body, 413, "PAYLOAD_TOO_LARGE");
    }
    assert_eq!(seq().await, before, "nothing recorded");
    assert!(files(&s.vault) == files_before, "nothing changed on disk");
    s.get_json("/v1/sync/ops?after_seq=0", 200).await;
}

/// A key change takes a seq of its own: after a restart the next change takes the seq
/// after it (no seq is used twice), and history is not found behind.
async fn a_key_change_keeps_its_seq_across_a_restart(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    s.call(
        Method::POST,
        "/v1/sync/e2ee:enable",
        None,
        Some(keys(1)),
        200,
    )
    .await;
    let key_seq = s
        .get_json("/v1/sync/ops?after_seq=0&page_size=1", 200)
        .await["committed_seq"]
        .as_i64()
        .unwrap();
    let s = s.restart(|_| {}).await;
    let after = s
        .get_json("/v1/sync/ops?after_seq=0&page_size=1", 200)
        .await;
    assert_eq!(
        after["committed_seq"], key_seq,
        "nothing recorded again at start"
    );
    let r = s
        .call(
            Method::POST,
            "/v1/notes",
            Some("n1"),
            Some(json!({"slug": "after-restart", "content": "x\n", "agent_id": "t"})),
            201,
        )
        .await;
    assert_eq!(r["committed_seq"], key_seq + 1);
    let ops = s
        .get_json(&format!("/v1/sync/ops?after_seq={}", key_seq - 1), 200)
        .await;
    let kinds: Vec<&str> = ops["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["e2ee_key", "upsert"]);
    let state = s.get_json("/v1/sync/e2ee", 200).await;
    assert_eq!(state["hierarchy"], keys(1));
}

crate::test_in_both_modes!(
    bad_reads_and_checkpoints_get_their_envelope,
    a_bad_push_is_refused_whole_and_records_nothing,
    a_key_change_keeps_its_seq_across_a_restart,
    the_key_routes_validate_every_field_refuse_a_pat_and_enable_once,
);
