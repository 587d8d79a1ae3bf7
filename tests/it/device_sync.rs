//! Two devices converge without gaps, through the real binaries: a daemon (open local
//! mode) and devices run by `notevault device init|push|pull`. A private note changed
//! after a snapshot's cut reaches a device bootstrapping from that snapshot; an edit not
//! pushed yet survives a pull of two later versions of its note (a conflicted copy, never
//! an overwrite).

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the user and the operator: they write folders and run binaries"
)]

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

const PASSPHRASE: &str = "correct horse battery staple";

/// `notevault device <args> <dir>` as this file's devices run it.
fn device(args: &[&str], dir: &Path, ok: bool) -> String {
    common::device::device(args, dir, Some(PASSPHRASE), ok)
}

use common::device::user_files;

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// A daemon on a copy of `vault-example` and a first device `laptop` that turned private
/// notes on.
struct Setup {
    dir: tempfile::TempDir,
    vault: PathBuf,
    daemon: common::Daemon,
    laptop: PathBuf,
}

fn setup() -> Setup {
    let (dir, vault, state) = common::temp_vault(Some("vault-example"));
    let daemon = common::spawn(&vault, &state, &[]);
    let laptop = dir.path().join("laptop");
    device(
        &["init", "--server", &daemon.base, "--device-id", "laptop"],
        &laptop,
        true,
    );
    Setup {
        dir,
        vault,
        daemon,
        laptop,
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = self.daemon.child.kill();
        let _ = self.daemon.child.wait();
    }
}

/// A relay between a device and the daemon that serves the snapshot one entry a page
/// and runs `hook` once, after the first page was answered and before the second is
/// read: whatever `hook` does happens after the snapshot's cut. It keeps every snapshot
/// page it relayed.
struct Relay {
    upstream: String,
    hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    pages: Mutex<Vec<Value>>,
}

async fn relay(
    axum::extract::State(r): axum::extract::State<Arc<Relay>>,
    req: axum::extract::Request,
) -> axum::response::Response {
    let path = req.uri().path().to_string();
    let mut query = req.uri().query().unwrap_or_default().to_string();
    if path == "/v1/sync/snapshot" {
        query = query.replace("page_size=200", "page_size=1");
        if query.contains("page_token=") {
            let hook = r.hook.lock().unwrap().take();
            if let Some(hook) = hook {
                tokio::task::spawn_blocking(hook).await.unwrap();
            }
        }
    }
    let mut out = reqwest::Client::new().request(
        req.method().clone(),
        format!("{}{path}?{query}", r.upstream),
    );
    for name in ["authorization", "idempotency-key", "content-type"] {
        if let Some(v) = req.headers().get(name) {
            out = out.header(name, v.as_bytes());
        }
    }
    let body = axum::body::to_bytes(req.into_body(), usize::MAX)
        .await
        .unwrap();
    let res = out.body(body).send().await.unwrap();
    let status = res.status().as_u16();
    let kind = res.headers().get("content-type").cloned();
    let bytes = res.bytes().await.unwrap();
    if path == "/v1/sync/snapshot" {
        r.pages
            .lock()
            .unwrap()
            .push(serde_json::from_slice(&bytes).unwrap());
    }
    let mut answer = axum::response::Response::new(axum::body::Body::from(bytes));
    *answer.status_mut() = axum::http::StatusCode::from_u16(status).unwrap();
    if let Some(kind) = kind {
        answer.headers_mut().insert("content-type", kind);
    }
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_note_changed_after_the_snapshot_cut_reaches_a_new_device() {
    let s = setup();
    // Last in path order: on a page after the cut's first one.
    std::fs::create_dir_all(s.laptop.join("zz")).unwrap();
    std::fs::write(s.laptop.join("zz/secret.private.md"), "# Secret\n\nfirst\n").unwrap();
    device(&["push"], &s.laptop, true);

    let edited = "# Secret\n\nfirst\nchanged after the cut\n";
    let laptop = s.laptop.clone();
    let r = Arc::new(Relay {
        upstream: s.daemon.base.clone(),
        hook: Mutex::new(Some(Box::new(move || {
            std::fs::write(laptop.join("zz/secret.private.md"), edited).unwrap();
            device(&["push"], &laptop, true);
        }))),
        pages: Mutex::new(Vec::new()),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let via = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new().fallback(relay).with_state(r.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let phone = s.dir.path().join("phone");
    let dir = phone.clone();
    let via2 = via.clone();
    tokio::task::spawn_blocking(move || {
        device(
            &["init", "--server", &via2, "--device-id", "phone"],
            &dir,
            true,
        )
    })
    .await
    .unwrap();
    assert!(
        r.hook.lock().unwrap().is_none(),
        "the change ran after the cut"
    );
    assert_eq!(read(&phone, "zz/secret.private.md"), edited);

    // The snapshot page that held the note carried the file's ciphertext as it is now.
    let now = std::fs::read(s.vault.join("zz/secret.nvpriv")).unwrap();
    let pages = r.pages.lock().unwrap().clone();
    let cut = pages[0]["seq"].clone();
    let entry = pages
        .iter()
        .flat_map(|p| p["entries"].as_array().unwrap().clone())
        .find(|e| e["path"] == "zz/secret.nvpriv")
        .expect("the snapshot holds the private note");
    use base64::Engine;
    let carried = base64::engine::general_purpose::STANDARD
        .decode(
            entry["content_base64"]
                .as_str()
                .expect("ciphertext carried"),
        )
        .unwrap();
    assert_eq!(carried, now, "{entry}");
    assert!(
        pages.iter().all(|p| p["seq"] == cut),
        "one cut for every page"
    );
    assert_eq!(user_files(&s.laptop), user_files(&phone));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpushed_edit_survives_a_pull_of_two_later_versions() {
    let s = setup();
    let phone = s.dir.path().join("phone");
    device(
        &["init", "--server", &s.daemon.base, "--device-id", "phone"],
        &phone,
        true,
    );
    // The laptop pushes two versions; the phone edits the same note meanwhile.
    for text in ["# Inbox\n\nlaptop one\n", "# Inbox\n\nlaptop two\n"] {
        std::fs::write(s.laptop.join("Inbox.md"), text).unwrap();
        device(&["push"], &s.laptop, true);
    }
    std::fs::write(phone.join("Inbox.md"), "# Inbox\n\nphone's edit\n").unwrap();
    // The first op is superseded (no bytes), the second carries the laptop's.
    device(&["pull"], &phone, true);
    assert_eq!(read(&phone, "Inbox.md"), "# Inbox\n\nlaptop two\n");
    assert_eq!(
        read(&phone, "Inbox (conflict phone).md"),
        "# Inbox\n\nphone's edit\n"
    );
    device(&["push"], &phone, true);
    device(&["pull"], &s.laptop, true);
    assert_eq!(user_files(&s.laptop), user_files(&phone));
}

async fn note_id(base: &str, slug: &str) -> String {
    let v: Value = reqwest::get(format!("{base}/v1/notes/{slug}?limit=1"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["note_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{slug}: {v}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_and_an_edit_on_two_devices_converge_on_one_note() {
    let s = setup();
    let base = s.daemon.base.clone();
    std::fs::write(s.laptop.join("Note.md"), "# Note\n\nbody\n").unwrap();
    std::fs::write(s.laptop.join("Other.md"), "# Other\n\nbody\n").unwrap();
    std::fs::write(s.laptop.join("Linker.md"), "see [[Note]] and [[Other]]\n").unwrap();
    device(&["push"], &s.laptop, true);
    let phone = s.dir.path().join("phone");
    device(
        &["init", "--server", &base, "--device-id", "phone"],
        &phone,
        true,
    );
    let (note, other) = (note_id(&base, "Note").await, note_id(&base, "Other").await);

    // The rename goes first, the edit (on the old name) second.
    std::fs::rename(s.laptop.join("Note.md"), s.laptop.join("Renamed.md")).unwrap();
    device(&["push"], &s.laptop, true);
    std::fs::write(phone.join("Note.md"), "# Note\n\nbody\nphone's edit\n").unwrap();
    device(&["push"], &phone, true);
    // The edit goes first, the rename (of the old version) second.
    std::fs::write(phone.join("Other.md"), "# Other\n\nbody\nphone's edit\n").unwrap();
    device(&["push"], &phone, true);
    std::fs::rename(s.laptop.join("Other.md"), s.laptop.join("Other2.md")).unwrap();
    device(&["push"], &s.laptop, true);
    device(&["pull"], &phone, true);

    let files = user_files(&phone);
    assert!(
        user_files(&s.laptop) == files,
        "{:?}",
        user_files(&s.laptop).keys()
    );
    assert!(
        !files
            .keys()
            .any(|f| f.contains("conflict") || f == "Note.md" || f == "Other.md"),
        "{:?}",
        files.keys()
    );
    for (slug, id) in [("Renamed", &note), ("Other2", &other)] {
        let path = format!("{slug}.md");
        assert!(read(&phone, &path).ends_with("phone's edit\n"), "{path}");
        assert_eq!(read(&s.vault, &path), read(&phone, &path));
        assert_eq!(&note_id(&base, slug).await, id, "{slug} keeps its id");
    }
    assert_eq!(
        read(&s.vault, "Linker.md"),
        "see [[Renamed]] and [[Other2]]\n"
    );
    assert_eq!(read(&phone, "Linker.md"), read(&s.vault, "Linker.md"));
}

/// A 1x1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];

async fn committed_seq(base: &str) -> i64 {
    let v: Value = reqwest::get(format!("{base}/v1/sync/ops?after_seq=0&page_size=1"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["committed_seq"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attachment_added_then_deleted_on_one_device_follows_on_the_other() {
    let s = setup();
    let base = s.daemon.base.clone();
    let phone = s.dir.path().join("phone");
    device(
        &["init", "--server", &base, "--device-id", "phone"],
        &phone,
        true,
    );
    std::fs::write(s.laptop.join("attachments/dot.png"), PNG).unwrap();
    std::fs::write(s.laptop.join("Pic.md"), "![[dot.png]]\n").unwrap();
    device(&["push"], &s.laptop, true);
    assert_eq!(
        std::fs::read(s.vault.join("attachments/dot.png")).unwrap(),
        PNG
    );

    // Unchanged bytes are not sent again: a push with nothing changed records nothing.
    let seq = committed_seq(&base).await;
    device(&["push"], &s.laptop, true);
    assert_eq!(committed_seq(&base).await, seq);

    device(&["pull"], &phone, true);
    assert_eq!(
        std::fs::read(phone.join("attachments/dot.png")).unwrap(),
        PNG
    );
    assert!(user_files(&s.laptop) == user_files(&phone));

    // Changed bytes replace the daemon's; then a delete goes the same way.
    let mut changed = PNG.to_vec();
    changed.extend_from_slice(b"trailing bytes after IEND");
    std::fs::write(phone.join("attachments/dot.png"), &changed).unwrap();
    device(&["push"], &phone, true);
    assert_eq!(
        std::fs::read(s.vault.join("attachments/dot.png")).unwrap(),
        changed
    );
    device(&["pull"], &s.laptop, true);
    assert_eq!(
        std::fs::read(s.laptop.join("attachments/dot.png")).unwrap(),
        changed
    );

    std::fs::remove_file(s.laptop.join("attachments/dot.png")).unwrap();
    device(&["push"], &s.laptop, true);
    assert!(!s.vault.join("attachments/dot.png").exists());
    device(&["pull"], &phone, true);
    assert!(!phone.join("attachments/dot.png").exists());
    let files = user_files(&phone);
    assert!(user_files(&s.laptop) == files, "{:?}", files.keys());
    assert!(
        !files.keys().any(|f| f.contains("conflict")),
        "{:?}",
        files.keys()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_and_a_move_of_one_note_in_one_push_keep_its_id_and_the_edit() {
    let s = setup();
    let base = s.daemon.base.clone();
    let body = "# Plan\n\nfirst line\nsecond line\nthird line\n";
    std::fs::write(s.laptop.join("Plan.md"), body).unwrap();
    std::fs::write(s.laptop.join("Index.md"), "see [[Plan]]\n").unwrap();
    device(&["push"], &s.laptop, true);
    let id = note_id(&base, "Plan").await;

    // Moved into a folder under a new name, and edited, before one push.
    let edited = format!("{body}a fourth line\n");
    std::fs::remove_file(s.laptop.join("Plan.md")).unwrap();
    std::fs::write(s.laptop.join("projects/Roadmap 2.md"), &edited).unwrap();
    let said = device(&["push"], &s.laptop, true);
    let vault = user_files(&s.vault);
    assert!(
        vault.contains_key("projects/Roadmap 2.md"),
        "{said} {:?}",
        vault.keys()
    );
    assert_eq!(note_id(&base, "projects%2FRoadmap%202").await, id);
    assert_eq!(read(&s.vault, "projects/Roadmap 2.md"), edited);
    assert!(!s.vault.join("Plan.md").exists());
    assert_eq!(read(&s.vault, "Index.md"), "see [[Roadmap 2]]\n");
    let phone = s.dir.path().join("phone");
    device(
        &["init", "--server", &base, "--device-id", "phone"],
        &phone,
        true,
    );
    let files = user_files(&phone);
    assert!(user_files(&s.laptop) == files, "{:?}", files.keys());
    assert!(
        !files.keys().any(|f| f.contains("conflict")),
        "{:?}",
        files.keys()
    );
}

fn key_version_of(envelope: &[u8]) -> String {
    String::from_utf8_lossy(envelope)
        .lines()
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_seals_every_private_note_again_and_a_halfway_stop_loses_none() {
    let s = setup();
    let base = s.daemon.base.clone();
    std::fs::create_dir_all(s.laptop.join("zz")).unwrap();
    let notes = [
        ("diary.private.md", "diary.nvpriv", "# Diary\n\nday one\n"),
        (
            "zz/secret.private.md",
            "zz/secret.nvpriv",
            "# Secret\n\nsecond\n",
        ),
    ];
    for (local, _, text) in notes {
        std::fs::write(s.laptop.join(local), text).unwrap();
    }
    device(&["push"], &s.laptop, true);
    let phone = s.dir.path().join("phone");
    device(
        &["init", "--server", &base, "--device-id", "phone"],
        &phone,
        true,
    );
    let old_envelope = std::fs::read(s.vault.join("diary.nvpriv")).unwrap();
    assert_eq!(key_version_of(&old_envelope), "key-version: 1");

    // Stopped halfway: an edit not pushed yet on the laptop keeps one note on the old
    // key; the other is sealed again; both keys stay, the phone reads both.
    std::fs::write(s.laptop.join("diary.private.md"), "# Diary\n\nday two\n").unwrap();
    let said = device(&["rotate-key"], &s.laptop, false);
    assert!(
        said.contains("not finished") && said.contains("push it first"),
        "{said}"
    );
    let now = |server: &str| key_version_of(&std::fs::read(s.vault.join(server)).unwrap());
    assert_eq!(now("zz/secret.nvpriv"), "key-version: 2");
    assert_eq!(now("diary.nvpriv"), "key-version: 1");
    device(&["pull"], &phone, true);
    assert_eq!(read(&phone, "zz/secret.private.md"), notes[1].2);
    assert_eq!(read(&phone, "diary.private.md"), notes[0].2);

    // Pushed, then the rotation again: every note on keyVersion 2, the old key gone.
    device(&["push"], &s.laptop, true);
    device(&["rotate-key"], &s.laptop, true);
    assert_eq!(now("zz/secret.nvpriv"), "key-version: 2");
    assert_eq!(now("diary.nvpriv"), "key-version: 2");
    let keys: Value = reqwest::get(format!("{base}/v1/sync/e2ee"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(keys["hierarchy"]["keyVersion"], 2, "{keys}");
    device(&["pull"], &phone, true);
    assert_eq!(read(&phone, "diary.private.md"), "# Diary\n\nday two\n");
    assert_eq!(read(&phone, "zz/secret.private.md"), notes[1].2);
    assert!(user_files(&s.laptop) == user_files(&phone));

    // A note sealed under the old key is refused, with the reason and what to do.
    let current = format!(
        "sha256:{}",
        sha256_hex(&std::fs::read(s.vault.join("diary.nvpriv")).unwrap())
    );
    use base64::Engine;
    let res = reqwest::Client::new()
        .post(format!("{base}/v1/sync/ops"))
        .header("Idempotency-Key", "stale-device-1")
        .json(&serde_json::json!({"device_id": "stale", "ops": [{
            "kind": "upsert", "visibility": "private", "path": "diary.nvpriv",
            "base_version_id": current,
            "content_base64": base64::engine::general_purpose::STANDARD.encode(&old_envelope)}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["reason"], "VALIDATION_FAILED", "{err}");
    assert!(
        !err["hint"].as_str().unwrap_or_default().is_empty(),
        "{err}"
    );
    assert!(err.to_string().contains("notevault device pull"), "{err}");
    assert_eq!(now("diary.nvpriv"), "key-version: 2");
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
