//! The E2EE loop end to end, through the real binaries: a daemon (every log on, auth
//! required) and two devices run by `notevault device init|push|pull|passphrase`. A
//! plaintext canary written only inside a private note on one device arrives decrypted
//! on the other, and is found nowhere else: not in the vault, not in the state directory
//! (the metadata store, the index, every object of `history.git` decompressed by git),
//! not in the daemon's logs, not in any answer or client output. Concurrent edits of a
//! standard note leave a conflicted copy, never a lost edit; the recovery key sets a new
//! passphrase.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the user and the operator: they write folders and run binaries"
)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_notevault");
const TOKEN: &str = "device-session-token-Q8w2E5r7";

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// `notevault device ...` with this file's token: see [`common::device::device_as`].
fn device(args: &[&str], dir: &Path, env: &[(&str, &str)], ok: bool, out: &mut Vec<u8>) -> String {
    common::device::device_as(TOKEN, args, dir, env, ok, out)
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The notes of a folder (`.md`, its hidden folders left out), with their bytes.
fn notes(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "md"))
        .map(|e| {
            (
                e.path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path().to_path_buf(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_e2ee_loop_keeps_private_plaintext_on_the_devices() {
    let (dir, vault, state) = common::temp_vault(Some("vault-example"));
    let config = dir.path().join("notevault.toml");
    std::fs::write(
        &config,
        format!("[[static_tokens]]\ntoken = \"{TOKEN}\"\npermissions = [\"notes.write\", \"notes.review\"]\n"),
    )
    .unwrap();
    let mut command = common::daemon::command(BIN, "127.0.0.1:0", &vault, Some(&state));
    command
        .arg("--config")
        .arg(&config)
        .env("NOTEVAULT_LOG", "debug")
        .env("AUTH_REQUIRED", "true");
    // Its stderr is read on a thread until it ends (`Daemon::whole_log`).
    let mut daemon = common::daemon::start(command).expect("the daemon serves");
    let base = daemon.base.clone();
    let canary = format!("CANARY-{}", uuid::Uuid::new_v4().simple());
    let (pw1, pw2) = ("correct horse battery staple", "a new passphrase for 2027");
    let mut out = Vec::new();
    let (a, b) = (dir.path().join("laptop"), dir.path().join("phone"));

    // The first device turns private notes on, with a recovery key shown once.
    let said = device(
        &[
            "init",
            "--server",
            &base,
            "--device-id",
            "laptop",
            "--recovery",
        ],
        &a,
        &[("NOTEVAULT_PASSPHRASE", pw1)],
        true,
        &mut out,
    );
    let recovery = said
        .split("keep it offline): ")
        .nth(1)
        .expect("the recovery key is printed")
        .trim()
        .to_string();
    assert_eq!(read(&a, "Welcome.md"), read(&vault, "Welcome.md"));

    // A private note (the canary only in it) and a standard note, pushed.
    std::fs::create_dir_all(a.join("journal")).unwrap();
    let secret = format!("# Diary\n\nthe password is {canary}\n");
    std::fs::write(a.join("journal/diary.private.md"), &secret).unwrap();
    std::fs::write(a.join("shared.md"), "# Shared\n\nfrom the laptop\n").unwrap();
    device(
        &["push"],
        &a,
        &[("NOTEVAULT_PASSPHRASE", pw1)],
        true,
        &mut out,
    );
    let envelope = std::fs::read(vault.join("journal/diary.nvpriv")).unwrap();
    assert!(envelope.starts_with(b"notevault-private v1\n"));
    assert!(!contains(&envelope, &canary));
    assert_eq!(read(&vault, "shared.md"), "# Shared\n\nfrom the laptop\n");

    // The second device unlocks with the passphrase and reads the note decrypted.
    device(
        &["init", "--server", &base, "--device-id", "phone"],
        &b,
        &[("NOTEVAULT_PASSPHRASE", pw1)],
        true,
        &mut out,
    );
    assert_eq!(read(&b, "journal/diary.private.md"), secret);
    assert_eq!(notes(&a), notes(&b));

    // Reads and search answer no plaintext; coverage says private notes were skipped.
    let client = reqwest::Client::new();
    let mut answers = String::new();
    for path in [
        format!("/v1/search?q={canary}"),
        format!("/v1/grep?pattern={canary}"),
        "/v1/search?q=password".to_string(),
        "/v1/notes?page_size=500".to_string(),
        "/v1/tags".to_string(),
        "/v1/vault".to_string(),
        "/v1/sync/ops?after_seq=0&page_size=500".to_string(),
        "/v1/sync/snapshot?page_size=500".to_string(),
        "/v1/sync/e2ee".to_string(),
        "/v1/attachments/journal%2Fdiary.nvpriv".to_string(),
        "/v1/attachments?page_size=500".to_string(),
    ] {
        let res = client
            .get(format!("{base}{path}"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success(), "{path}: {}", res.status());
        answers.push_str(&res.text().await.unwrap());
    }
    let search: serde_json::Value = client
        .get(format!("{base}/v1/search?q=password"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        search["coverage"]["excluded_by_reason"]["private"], 1,
        "{search}"
    );
    let listed = client
        .get(format!("{base}/v1/attachments?page_size=500"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !listed.contains("diary.nvpriv"),
        "attachment listings leave private notes out"
    );
    // Listings show the private note's handle: the file's name for a title (its own
    // title is inside the ciphertext), no content.
    for path in [
        "/v1/notes?page_size=500",
        "/v1/notes?filter=visibility%20%3D%20private",
        "/v1/notes?prefix=journal%2F&order_by=updated_at%20desc",
    ] {
        let text = client
            .get(format!("{base}{path}"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let list: serde_json::Value = serde_json::from_str(&text).unwrap();
        let private: Vec<&serde_json::Value> = list["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["visibility"] == "private")
            .collect();
        assert_eq!(private.len(), 1, "{path}: {list}");
        let h = private[0];
        assert_eq!(h["slug"], "journal/diary", "{h}");
        assert_eq!(h["path"], "journal/diary.nvpriv", "{h}");
        assert_eq!(h["title"], "diary", "{h}");
        assert!(
            h.get("content").is_none() && h.get("lines").is_none(),
            "{h}"
        );
        assert!(
            !text.contains("Diary"),
            "{path}: the plaintext title leaked"
        );
        answers.push_str(&text);
    }
    // A read of the private note answers its handle, no lines.
    let res = client
        .get(format!("{base}/v1/notes/journal%2Fdiary"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let text = res.text().await.unwrap();
    let handle: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(handle["visibility"], "private", "{handle}");
    assert_eq!(handle["path"], "journal/diary.nvpriv");
    assert_eq!(handle["lines"]["total"], 0);
    answers.push_str(&text);
    assert!(search["coverage"]["notes"]
        .to_string()
        .contains("Private notes were not searched"));
    assert!(
        !contains(answers.as_bytes(), &canary),
        "an answer carries the canary"
    );

    // The phone edits the private note; the laptop pulls the edit.
    let edited = format!("{secret}and a second line\n");
    std::fs::write(b.join("journal/diary.private.md"), &edited).unwrap();
    device(
        &["push"],
        &b,
        &[("NOTEVAULT_PASSPHRASE", pw1)],
        true,
        &mut out,
    );
    device(
        &["pull"],
        &a,
        &[("NOTEVAULT_PASSPHRASE", pw1)],
        true,
        &mut out,
    );
    assert_eq!(read(&a, "journal/diary.private.md"), edited);

    // Both edit the standard note offline: the laptop wins, the phone keeps a
    // conflicted copy; after a pull both folders are the same and no edit is lost.
    std::fs::write(a.join("shared.md"), "# Shared\n\nlaptop's edit\n").unwrap();
    std::fs::write(b.join("shared.md"), "# Shared\n\nphone's edit\n").unwrap();
    device(
        &["push"],
        &a,
        &[("NOTEVAULT_PASSPHRASE", pw1)],
        true,
        &mut out,
    );
    device(
        &["push"],
        &b,
        &[("NOTEVAULT_PASSPHRASE", pw1)],
        true,
        &mut out,
    );
    assert_eq!(read(&b, "shared.md"), "# Shared\n\nlaptop's edit\n");
    assert_eq!(
        read(&b, "shared (conflict phone).md"),
        "# Shared\n\nphone's edit\n"
    );
    device(
        &["push"],
        &b,
        &[("NOTEVAULT_PASSPHRASE", pw1)],
        true,
        &mut out,
    );
    device(
        &["pull"],
        &a,
        &[("NOTEVAULT_PASSPHRASE", pw1)],
        true,
        &mut out,
    );
    assert_eq!(notes(&a), notes(&b));
    assert_eq!(
        read(&vault, "shared (conflict phone).md"),
        "# Shared\n\nphone's edit\n"
    );

    // The recovery key sets a new passphrase; the old one no longer unlocks.
    device(
        &["passphrase"],
        &b,
        &[
            ("NOTEVAULT_RECOVERY_KEY", &recovery),
            ("NOTEVAULT_NEW_PASSPHRASE", pw2),
        ],
        true,
        &mut out,
    );
    device(
        &["pull"],
        &a,
        &[("NOTEVAULT_PASSPHRASE", pw1)],
        false,
        &mut out,
    );
    device(
        &["pull"],
        &a,
        &[("NOTEVAULT_PASSPHRASE", pw2)],
        true,
        &mut out,
    );
    assert_eq!(read(&a, "journal/diary.private.md"), edited);

    // The canary is nowhere but on the devices.
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();
    let logs = daemon.whole_log().join("\n").into_bytes();
    assert!(!logs.is_empty());
    assert!(
        !contains(&logs, &canary),
        "the daemon's logs carry the canary"
    );
    assert!(
        !contains(&out, &canary),
        "a client's output carries the canary"
    );
    for (path, bytes) in files(&vault).into_iter().chain(files(&state)) {
        assert!(
            !contains(&bytes, &canary),
            "{} holds the canary",
            path.display()
        );
    }
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .arg("--git-dir")
            .arg(state.join("history.git"))
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}");
        o.stdout
    };
    let objects = git(&["cat-file", "--batch-all-objects", "--batch"]);
    assert!(
        contains(&objects, "notevault-private v1"),
        "history holds the ciphertext"
    );
    assert!(!contains(&objects, &canary), "history.git holds the canary");
}

/// README's "Private notes" set-up block, run as written (`notevault` is this build,
/// `~` a scratch home, the daemon one started as README's "Set up" does: open local mode
/// on the example vault): the phone reads the laptop's private note, and the daemon's
/// folder and state hold no plaintext of it.
#[test]
fn the_readme_private_notes_setup_works_as_written() {
    let readme = std::fs::read_to_string(common::repo_path("README.md")).unwrap();
    let section = readme
        .split("\n### Private notes\n")
        .nth(1)
        .expect("README has a Private notes section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("the section's sh block");
    let (_dir, vault, state) = common::temp_vault(Some("vault-example"));
    let home = tempfile::tempdir().unwrap();
    let mut daemon = common::spawn(&vault, &state, &[]);
    let script = block
        .lines()
        .map(|line| match line.strip_prefix("notevault ") {
            Some(rest) => format!("'{BIN}' {rest}"),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        .replace("http://127.0.0.1:4000", &daemon.base);
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .env("HOME", home.path())
        .current_dir(home.path())
        .env_remove("NOTEVAULT_TOKEN")
        .env_remove("NOTEVAULT_PASSPHRASE")
        .env_remove("NOTEVAULT_CONFIG")
        .output()
        .unwrap();
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "README's block failed:\n{script}\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.ends_with("Only on my devices.\n"), "{stdout}");
    assert_eq!(
        read(&home.path().join("Notes-phone"), "diary.private.md"),
        "Only on my devices.\n"
    );
    for (path, bytes) in files(&vault).into_iter().chain(files(&state)) {
        assert!(
            !contains(&bytes, "Only on my devices"),
            "plaintext in {path:?}"
        );
    }
    assert!(vault.join("diary.nvpriv").exists());
}
