//! Secrets and private plaintext never reach a hosted vault's database or an instance's
//! log: devices turn private notes on and sync through an instance, a personal access
//! token is made, and a full `pg_dump` of the database plus every line the instance logged
//! (at debug) hold none of the canary, the passphrases, the recovery key or a token.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the user and the operator: they write device folders and run binaries"
)]

use std::path::Path;

use crate::common::hosted::{cli, Hosted, TOKEN};
use crate::common::postgres;

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
    let mut instance = hosted.instance_with(&[("NOTEVAULT_LOG", "debug")]);
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

    // A standard note syncs through the database; a private one needs blob storage,
    // which a hosted vault does not reach yet: refused, and kept on the device.
    std::fs::write(laptop.join("shared.md"), "# Shared\n\nfrom the laptop\n").unwrap();
    let secret = format!("# Diary\n\nthe password is {canary}\n");
    std::fs::write(laptop.join("diary.private.md"), &secret).unwrap();
    let mut pushed = Vec::new();
    device(&["push"], &laptop, passphrase, false, &mut pushed);
    let pushed_text = String::from_utf8_lossy(&pushed).into_owned();
    assert!(
        pushed_text.contains("BLOB_STORE_UNAVAILABLE"),
        "{pushed_text}"
    );
    out.extend_from_slice(&pushed);
    assert_eq!(
        std::fs::read_to_string(laptop.join("diary.private.md")).unwrap(),
        secret
    );
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
}
