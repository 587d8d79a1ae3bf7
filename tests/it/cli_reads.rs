//! `notevault search`, `read`, `ls` and `status` with a vault named last: against the
//! daemon serving it (found through its state directory) and against a folder no daemon
//! serves (read directly, nothing written into it), with the same answers.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor: they write the vault"
)]

use std::path::Path;
use std::process::Command;

use crate::common;

const BIN: &str = env!("CARGO_BIN_EXE_notevault");

/// `(success, stdout, stderr)` of the binary with `args`, no configuring environment.
fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("NOTEVAULT_CONFIG")
        .env_remove("NOTEVAULT_TOKEN")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(args: &[&str]) -> String {
    let (ok, out, err) = run(args);
    assert!(ok, "{args:?}: {err}");
    out
}

fn vault() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let v = dir.path();
    std::fs::write(
        v.join("alpha.md"),
        "# Alpha\nfirst line\nthe zeppelin lands here\nlast line\n",
    )
    .unwrap();
    std::fs::create_dir(v.join("projects")).unwrap();
    std::fs::write(
        v.join("projects/roadmap.md"),
        "# Roadmap\nship the zeppelin in spring\n",
    )
    .unwrap();
    std::fs::write(
        v.join("projects/notes.md"),
        "# Project notes\nnothing yet\n",
    )
    .unwrap();
    dir
}

/// The four reads of `v`, as a person and as a script sees them; the same whether a
/// daemon answers or the folder is read.
fn reads_answer(v: &str) {
    assert_eq!(
        ok(&["ls", v]),
        "alpha\tAlpha\nprojects/notes\tProject notes\nprojects/roadmap\tRoadmap\n"
    );
    assert_eq!(
        ok(&["ls", v, "--prefix", "projects/"]),
        "projects/notes\tProject notes\nprojects/roadmap\tRoadmap\n"
    );
    let listed: serde_json::Value = serde_json::from_str(&ok(&["ls", v, "--json"])).unwrap();
    assert_eq!(listed["notes"].as_array().unwrap().len(), 3, "{listed}");
    assert_eq!(listed["notes"][0]["path"], "alpha.md");

    assert_eq!(
        ok(&["read", "alpha", v, "--lines", "2:3"]),
        "first line\nthe zeppelin lands here\n"
    );
    assert_eq!(ok(&["read", "alpha", v, "--lines", "4:"]), "last line\n");
    assert_eq!(
        ok(&["read", "projects/roadmap", v]),
        "# Roadmap\nship the zeppelin in spring\n"
    );
    let read: serde_json::Value =
        serde_json::from_str(&ok(&["read", "alpha", v, "--lines", ":2", "--json"])).unwrap();
    assert_eq!(read["slug"], "alpha");
    assert_eq!(read["lines"]["items"][1]["text"], "first line");
    assert_eq!(read["lines"]["total"], 4);

    let found = ok(&["search", "zeppelin", v]);
    assert!(
        found.contains("alpha  Alpha\n    3: the zeppelin lands here\n"),
        "{found}"
    );
    assert!(found.contains("projects/roadmap  Roadmap\n"), "{found}");
    let found: serde_json::Value =
        serde_json::from_str(&ok(&["search", "zeppelin", v, "--json", "-n", "1"])).unwrap();
    assert_eq!(found["results"].as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found["coverage"]["notes_matched"], 2);
    assert_eq!(
        ok(&["search", "nowhere-to-be-found", v]),
        "no note matches \"nowhere-to-be-found\"\n"
    );

    // A refusal is one line with its reason, and a failure status.
    let (fine, _, err) = run(&["read", "no/such/note", v]);
    assert!(!fine);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("notevault: NOTE_NOT_FOUND: "), "{err}");
    let (fine, _, err) = run(&["read", "alpha", v, "--lines", "3:2"]);
    assert!(!fine && err.contains("--lines takes A:B"), "{err}");
}

#[test]
fn reads_a_folder_no_daemon_serves_without_writing_into_it() {
    let dir = vault();
    let v = dir.path().to_str().unwrap();
    let before = common::snapshot(dir.path());
    reads_answer(v);
    let status = ok(&["status", v]);
    assert!(status.starts_with("daemon     none serves "), "{status}");
    assert!(status.contains("vault      3 notes in"), "{status}");
    let status: serde_json::Value = serde_json::from_str(&ok(&["status", v, "--json"])).unwrap();
    assert_eq!(status["url"], serde_json::Value::Null);
    assert_eq!(status["vault"]["notes"], 3);
    assert_eq!(
        common::snapshot(dir.path()),
        before,
        "the folder is as it was"
    );
    assert!(
        !dir.path().join(".notevault").exists(),
        "no state directory made in the vault"
    );
}

#[test]
fn reads_ask_the_daemon_serving_the_vault() {
    let dir = vault();
    let v = dir.path().to_str().unwrap();
    let command = common::daemon::command(BIN, "127.0.0.1:0", dir.path(), None);
    let daemon = common::daemon::start(command).expect("the daemon serves");
    wait_indexed(dir.path());
    reads_answer(v);
    // The status says who answered.
    let status = ok(&["status", v]);
    assert!(
        status.starts_with(&format!("daemon     {}: vault ", daemon.base)),
        "{status}"
    );
    let status: serde_json::Value = serde_json::from_str(&ok(&["status", v, "--json"])).unwrap();
    assert_eq!(status["url"], daemon.base.as_str());
    assert_eq!(status["vault"]["notes"], 3);
    // --url names the daemon outright.
    let listed = ok(&["ls", "--url", &daemon.base, "--prefix", "alpha"]);
    assert_eq!(listed, "alpha\tAlpha\n");
}

/// A daemon that requires auth is asked with the token given, and refused without one.
#[test]
fn reads_pass_the_token_to_a_daemon_that_requires_one() {
    let dir = vault();
    let state = tempfile::tempdir().unwrap();
    let v = dir.path().to_str().unwrap();
    let s = state.path().to_str().unwrap();
    let token = common::create_pat(dir.path(), state.path(), "cli", &[]);
    let daemon = common::spawn(dir.path(), state.path(), &[("AUTH_REQUIRED", "true")]);
    let (fine, _, err) = run(&["ls", v, "--state-dir", s]);
    assert!(!fine && err.contains("needs a token"), "{err}");
    let listed = ok(&[
        "ls",
        v,
        "--state-dir",
        s,
        "--token",
        &token,
        "--prefix",
        "alpha",
    ]);
    assert_eq!(listed, "alpha\tAlpha\n");
    drop(daemon);
}

/// The daemon's index holds every note (searches right after its start find them).
fn wait_indexed(vault: &Path) {
    let v = vault.to_str().unwrap();
    for _ in 0..200 {
        let (fine, out, _) = run(&["status", v, "--json"]);
        if fine {
            let s: serde_json::Value = serde_json::from_str(&out).unwrap();
            let index = &s["index_status"];
            if index["indexed_seq"] == index["committed_seq"] && s["vault"]["notes"] == 3 {
                return;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the daemon did not index the vault");
}
