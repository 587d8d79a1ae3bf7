//! Secrets and private plaintext never reach a hosted vault's database, blob store or an
//! instance's log: devices turn private notes on and sync a private note through an
//! instance (its ciphertext in the blob store), a personal access token is made, and a
//! full `pg_dump` of the database, every object of the store, plus every line the
//! instance logged (at debug) hold none of the canary, the passphrases, the recovery key
//! or a token.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the user and the operator: they write device folders and run binaries"
)]

use std::path::Path;

use crate::common::hosted::{cli, Hosted, TOKEN};
use crate::common::postgres;
use crate::common::s3::S3Server;

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// `notevault device ARGS DIR` with the vault's token and `passphrase`: its stdout.
fn device(args: &[&str], dir: &Path, passphrase: &str, ok: bool, out: &mut Vec<u8>) -> String {
    let env = [("NOTEVAULT_PASSPHRASE", passphrase)];
    crate::common::device::device_as(TOKEN, args, dir, &env, ok, out)
}

/// Whether a `pg_dump` holds `text`: as text, or as a `bytea` column's hex.
fn dumped(dump: &[u8], text: &str) -> bool {
    let hex: String = text.bytes().map(|b| format!("{b:02x}")).collect();
    contains(dump, text) || contains(dump, &hex)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_or_private_plaintext_reaches_the_database_or_the_logs() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let Some(mut s3) = S3Server::start() else {
        return;
    };
    let store = s3.env("private");
    let mut env: Vec<(&str, &str)> = store
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    env.push(("NOTEVAULT_LOG", "debug"));
    let mut instance = hosted.instance_with(&env);
    let base = instance.daemon.base.clone();
    let dir = tempfile::tempdir().unwrap();
    let (laptop, phone) = (dir.path().join("laptop"), dir.path().join("phone"));
    let canary = format!("CANARY-{}", uuid::Uuid::new_v4().simple());
    let passphrase = "correct horse battery staple";
    let mut out = Vec::new();

    // Private notes turned on: the wrapped keys go to the database.
    let said = device(
        &[
            "init",
            "--server",
            &base,
            "--device-id",
            "laptop",
            "--recovery",
        ],
        &laptop,
        passphrase,
        true,
        &mut out,
    );
    let recovery = said
        .split("keep it offline): ")
        .nth(1)
        .expect("the recovery key is printed")
        .lines()
        .next()
        .unwrap()
        .trim()
        .to_string();

    // A standard note syncs through the database, a private one's ciphertext through
    // the blob store.
    std::fs::write(laptop.join("shared.md"), "# Shared\n\nfrom the laptop\n").unwrap();
    let secret = format!("# Diary\n\nthe password is {canary}\n");
    std::fs::write(laptop.join("diary.private.md"), &secret).unwrap();
    device(&["push"], &laptop, passphrase, true, &mut out);
    let shared = instance.get("/v1/notes/shared", 200).await;
    assert!(
        shared["lines"].to_string().contains("from the laptop"),
        "{shared}"
    );

    // A second device unlocks with the passphrase the database keeps wrapped keys for.
    device(
        &["init", "--server", &base, "--device-id", "phone"],
        &phone,
        passphrase,
        true,
        &mut out,
    );
    assert_eq!(
        std::fs::read_to_string(phone.join("shared.md")).unwrap(),
        "# Shared\n\nfrom the laptop\n"
    );
    assert_eq!(
        std::fs::read_to_string(phone.join("diary.private.md")).unwrap(),
        secret,
        "the phone decrypts what the laptop wrote"
    );
    // The phone changes it; the laptop pulls the change.
    let changed = format!("{secret}and a second line\n");
    std::fs::write(phone.join("diary.private.md"), &changed).unwrap();
    device(&["push"], &phone, passphrase, true, &mut out);
    device(&["pull"], &laptop, passphrase, true, &mut out);
    assert_eq!(
        std::fs::read_to_string(laptop.join("diary.private.md")).unwrap(),
        changed
    );
    let listed = instance.get("/v1/notes?page_size=100", 200).await;
    assert!(listed.to_string().contains("diary.nvpriv"), "{listed}");
    // A private note deleted on one device leaves the other.
    std::fs::write(laptop.join("gone.private.md"), "# Gone soon\n").unwrap();
    device(&["push"], &laptop, passphrase, true, &mut out);
    device(&["pull"], &phone, passphrase, true, &mut out);
    assert!(phone.join("gone.private.md").exists());
    std::fs::remove_file(laptop.join("gone.private.md")).unwrap();
    device(&["push"], &laptop, passphrase, true, &mut out);
    device(&["pull"], &phone, passphrase, true, &mut out);
    assert!(!phone.join("gone.private.md").exists());

    // An instance without a blob store refuses a private note, and keeps nothing.
    let bare = hosted.instance();
    // A real envelope: the ciphertext the instance serves to devices.
    let ops = instance
        .get("/v1/sync/ops?after_seq=0&page_size=500", 200)
        .await;
    let envelope = ops["ops"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|o| o["path"] == "diary.nvpriv")
        .and_then(|o| o["content_base64"].as_str())
        .expect("the private op carries its ciphertext")
        .to_string();
    let res = reqwest::Client::new()
        .post(bare.url("/v1/sync/ops"))
        .bearer_auth(TOKEN)
        .header("Idempotency-Key", "bare-private")
        .json(&serde_json::json!({"device_id": "bare", "ops": [
            {"kind": "upsert", "path": "other.nvpriv", "visibility": "private", "content_base64": envelope}
        ]}))
        .send()
        .await
        .unwrap();
    let pushed = res.text().await.unwrap();
    assert!(pushed.contains("BLOB_STORE_UNAVAILABLE"), "{pushed}");

    // The store down: a private note is refused alone, the note beside it goes in; the
    // retry with the same key (no per-op keys) applies the private note and replays the
    // note, never writing it twice.
    s3.stop();
    let push = |key: &'static str, ops: serde_json::Value| {
        reqwest::Client::new()
            .post(instance.url("/v1/sync/ops"))
            .bearer_auth(TOKEN)
            .header("Idempotency-Key", key)
            .json(&serde_json::json!({"device_id": "mixed", "ops": ops}))
            .send()
    };
    let mixed = serde_json::json!([
        {"kind": "upsert", "path": "later.nvpriv", "visibility": "private", "content_base64": envelope},
        {"kind": "upsert", "path": "beside.md", "content_base64": "IyBCZXNpZGUK"}
    ]);
    let first: serde_json::Value = push("mixed", mixed.clone())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        first["results"][0]["error"]["reason"], "BLOB_STORE_UNAVAILABLE",
        "{first}"
    );
    assert_eq!(first["results"][1]["status"], "applied", "{first}");
    // Only private notes, the store down: the whole push is a 503 to retry.
    let res = push("only-private", serde_json::json!([mixed[0].clone()]))
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    assert!(res.headers().contains_key("retry-after"));
    s3.resume();
    let again: serde_json::Value = push("mixed", mixed).await.unwrap().json().await.unwrap();
    assert_eq!(again["results"][0]["status"], "applied", "{again}");
    assert_eq!(
        again["results"][1]["receipt"], first["results"][1]["receipt"],
        "{again}"
    );
    let revisions = instance.get("/v1/notes/beside:listRevisions", 200).await;
    assert_eq!(
        revisions["versions"].as_array().unwrap().len(),
        1,
        "{revisions}"
    );

    // A personal access token, made for the vault.
    let pat = cli(
        &hosted.db.url,
        &[
            "token",
            "create",
            "--name",
            "ci",
            "--scope",
            "notes.write",
            "team",
        ],
    )
    .trim()
    .to_string();
    let res = reqwest::Client::new()
        .get(instance.url("/v1/notes/shared"))
        .bearer_auth(&pat)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    let dump = postgres::dump(&hosted.db.url);
    assert!(contains(&dump, "e2ee_keys"), "the dump holds the tables");
    assert!(dumped(&dump, "from the laptop"), "the dump holds the notes");
    let _ = instance.daemon.child.kill();
    let _ = instance.daemon.child.wait();
    let logs = instance.daemon.whole_log().join("\n").into_bytes();
    assert!(contains(&logs, "DEBUG"), "the instance logged at debug");
    for (what, secret) in [
        ("the canary", canary.as_str()),
        ("the passphrase", passphrase),
        ("the recovery key", recovery.as_str()),
        ("the static token", TOKEN),
        ("the personal access token", pat.as_str()),
    ] {
        assert!(!dumped(&dump, secret), "the database dump holds {what}");
        assert!(!contains(&logs, secret), "the instance's log holds {what}");
    }
    assert!(
        !contains(&out, &canary),
        "a client's output holds the canary"
    );
    let objects = s3.objects();
    assert!(!objects.is_empty(), "the ciphertext is in the store");
    for object in objects {
        let bytes = std::fs::read(s3.bucket().join(&object)).unwrap();
        assert!(
            !contains(&bytes, &canary),
            "the store's {object} holds the canary"
        );
    }
}
