//! A hosted vault moves out as it came in: `notevault export --vault NAME --database URL`
//! writes the archive of a local export, and a folder brought in with `import` comes back
//! with every note's and attachment's bytes as they were, its history replayed as a git
//! bundle. An import cut off carries on where it stopped when run again.

#![allow(
    clippy::disallowed_methods,
    reason = "the test reads the folders and the unpacked archive"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::hosted::{cli_with, Hosted};
use crate::common::s3::S3Server;

/// Every `.md` file under `root` (the state dir and dot folders left out): path → bytes.
fn notes_in(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                found.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    found
}

/// `notevault export --vault team --history -o FILE` of `hosted`, unpacked into `into`:
/// the manifest.
fn export(hosted: &Hosted, into: &Path, env: &[(String, String)]) -> Value {
    let archive = into.join("out.tar.gz");
    let out = cli_with(
        &hosted.db.url,
        &[
            "export",
            "--vault",
            "team",
            "--history",
            "-o",
            archive.to_str().unwrap(),
        ],
        env,
    );
    assert!(out.starts_with("exported "), "{out}");
    let unpacked = Command::new("tar")
        .arg("xzf")
        .arg(&archive)
        .arg("-C")
        .arg(into)
        .status()
        .unwrap();
    assert!(unpacked.success());
    serde_json::from_slice(&std::fs::read(into.join("manifest.json")).unwrap()).unwrap()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_round_trips_through_a_hosted_vault_with_its_history() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    // A folder served in local mode: a note edited and one moved, so its history holds
    // more than the first commit.
    let local = crate::common::TestServer::start(Some("vault-example"), |_| {}).await;
    let inbox = local.get_json("/v1/notes/Inbox?limit=1", 200).await;
    local
        .call(
            Method::POST,
            "/v1/notes/Inbox:append",
            Some("k-append"),
            Some(json!({"content": "kept on the way out\n", "version_id": inbox["version_id"], "agent_id": "mover"})),
            200,
        )
        .await;
    let listed = local.get_json("/v1/notes?page_size=500", 200).await;
    let (_dir, folder, state) = local.stop().await;
    let before = notes_in(&folder);
    assert!(before.len() >= 5, "{:?}", before.keys());
    let Some(s3) = S3Server::start() else {
        return;
    };
    let store = s3.env("round-trip");
    let out = cli_with(
        &hosted.db.url,
        &[
            "import",
            folder.to_str().unwrap(),
            "--vault",
            "team",
            "--state-dir",
            state.to_str().unwrap(),
        ],
        &store,
    );
    assert!(out.contains(" 1 attachments and private notes "), "{out}");

    // Out again: the same notes and attachment, byte for byte.
    let first = tempfile::tempdir().unwrap();
    let manifest = export(&hosted, first.path(), &store);
    assert_eq!(manifest["format"], "notevault-export");
    assert_eq!(manifest["history"], "bundle");
    assert_eq!(manifest["notes"], before.len());
    assert_eq!(listed["notes"].as_array().unwrap().len(), before.len());
    assert_eq!(notes_in(&first.path().join("vault")), before);
    let diagram = "attachments/diagram.png";
    assert_eq!(
        std::fs::read(first.path().join("vault").join(diagram)).unwrap(),
        std::fs::read(folder.join(diagram)).unwrap()
    );

    // A change made in hosted mode goes out too, and the history replays every revision
    // with its actor, its time and the note's bytes at its seq.
    let a = hosted.instance();
    a.call(
        Method::POST,
        "/v1/notes",
        Some("k-new"),
        Some(json!({"slug": "made-hosted", "content": "# Made hosted\n\nbody\n", "agent_id": "cloud"})),
        201,
    )
    .await;
    let revisions = a.get("/v1/notes/Inbox:listRevisions", 200).await;
    let second = tempfile::tempdir().unwrap();
    let manifest = export(&hosted, second.path(), &store);
    let now = notes_in(&second.path().join("vault"));
    assert_eq!(manifest["notes"], before.len() + 1);
    assert_eq!(now["made-hosted.md"], b"# Made hosted\n\nbody\n");
    assert_eq!(now["Inbox.md"], before["Inbox.md"]);

    let clone = second.path().join("clone");
    let out = Command::new("git")
        .arg("clone")
        .arg("--quiet")
        .arg(second.path().join("history.bundle"))
        .arg(&clone)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(notes_in(&clone), now, "the last commit is the vault");
    let last = git(&clone, &["log", "-1", "--format=%B"]);
    assert!(last.contains("Notevault-Actor: agent:cloud"), "{last}");
    // Inbox's revisions, newest first, each a commit naming its version at its time.
    for version in revisions["versions"].as_array().unwrap() {
        let id = version["version_id"].as_str().unwrap();
        let commit = git(
            &clone,
            &[
                "log",
                "--format=%H %ct",
                &format!("--grep=Notevault-Version: {id}"),
            ],
        );
        let (_, time) = commit
            .trim()
            .split_once(' ')
            .expect("a commit per revision");
        let at = chrono::DateTime::parse_from_rfc3339(version["created_at"].as_str().unwrap())
            .unwrap()
            .timestamp();
        assert_eq!(time.parse::<i64>().unwrap(), at, "{version}");
    }
}

/// `notevault import` of `folder` into `team`, with `env`: whether it succeeded, and
/// what it said.
fn import(
    hosted: &Hosted,
    folder: &Path,
    state: &Path,
    env: &[(String, String)],
) -> (bool, String) {
    let out = Command::new(crate::common::BIN)
        .args([
            "import",
            folder.to_str().unwrap(),
            "--vault",
            "team",
            "--state-dir",
        ])
        .arg(state)
        .args(["--database", &hosted.db.url])
        .env_remove("NOTEVAULT_CONFIG")
        .env_remove("NOTEVAULT_BLOB_STORE")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_cut_off_carries_on_where_it_stopped() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let Some(mut s3) = S3Server::start() else {
        return;
    };
    let local = crate::common::TestServer::start(Some("vault-example"), |_| {}).await;
    let listed = local.get_json("/v1/notes?page_size=500", 200).await;
    let revisions = local.get_json("/v1/notes/Inbox:listRevisions", 200).await;
    let (_dir, folder, state) = local.stop().await;
    let other = crate::common::TestServer::start(Some("vault-example"), |_| {}).await;
    let (_other_dir, other_folder, other_state) = other.stop().await;
    let store = s3.env("import");

    // The folder has an attachment: without a blob store nothing is copied.
    let (ok, said) = import(&hosted, &folder, &state, &[]);
    assert!(!ok && said.contains("NOTEVAULT_BLOB_STORE"), "{said}");
    let env: Vec<(&str, &str)> = store
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let a = hosted.instance_with(&env);
    assert_eq!(a.get("/v1/notes", 200).await["notes"], json!([]));

    // The store down: the notes and their history go in, the attachment does not.
    s3.stop();
    let (ok, said) = import(&hosted, &folder, &state, &store);
    assert!(!ok && said.contains("blob store"), "{said}");
    assert_eq!(
        a.get("/v1/notes?page_size=500", 200).await["notes"]
            .as_array()
            .unwrap()
            .len(),
        listed["notes"].as_array().unwrap().len()
    );
    // Another folder may not finish it.
    let (ok, said) = import(&hosted, &other_folder, &other_state, &store);
    assert!(!ok && said.contains("another folder"), "{said}");

    // Run again with the store back: it carries on, and copies nothing twice.
    s3.resume();
    let (ok, said) = import(&hosted, &folder, &state, &store);
    assert!(ok, "{said}");
    assert!(
        said.contains("resuming") && said.contains(" 1 attachments and private notes "),
        "{said}"
    );
    assert_eq!(
        a.get("/v1/notes/Inbox:listRevisions", 200).await["versions"],
        revisions["versions"]
    );
    let res = reqwest::Client::new()
        .get(a.url("/v1/attachments/attachments/diagram.png"))
        .bearer_auth(crate::common::hosted::TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.bytes().await.unwrap().to_vec(),
        std::fs::read(folder.join("attachments/diagram.png")).unwrap()
    );
    // Finished: a third run is refused like any import into a vault with notes.
    let (ok, said) = import(&hosted, &folder, &state, &store);
    assert!(!ok && said.contains("holds notes already"), "{said}");
}
