//! The packing thread's work, run directly on a history written by the history thread.
#![allow(
    clippy::disallowed_methods,
    reason = "the tests play a storage failure on history.git, in a temporary folder"
)]

use super::*;

/// Loose object files below `git_dir/objects` (not the pack folder).
fn loose_files(git_dir: &Path) -> usize {
    walkdir::WalkDir::new(git_dir.join("objects"))
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file() && !e.path().starts_with(git_dir.join("objects/pack")))
        .count()
}

fn pack_bytes(git_dir: &Path) -> u64 {
    std::fs::read_dir(git_dir.join("objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

fn pack_once(git_dir: &Path) -> Option<compact::Done> {
    let sync = gix::open(git_dir).unwrap().into_sync();
    compact::pack_newest(
        &sync,
        &Mutex::new(()),
        &std::sync::atomic::AtomicBool::new(false),
    )
    .unwrap()
}

/// A crowded folder filled one note a commit, and a note edited a commit at a time:
/// packed, history keeps every revision, no loose file is left, and the trees of the
/// crowded folder cost a delta each, not a copy.
#[test]
fn packing_keeps_every_revision_and_stores_a_crowded_folder_as_deltas() {
    let dir = tempfile::tempdir().unwrap();
    let git_dir = dir.path().join("history.git");
    let history = History::open(&git_dir).unwrap();
    let bytes = |s: String| {
        Some(Content::Bytes(crate::vault::packed::Packed::plain(
            Arc::from(s.into_bytes()),
        )))
    };
    let crowd: Vec<Change> = (0..2000)
        .map(|i| Change {
            path: format!("crowd/n{i:04}.md"),
            content: bytes(format!("# Note {i}\n")),
        })
        .collect();
    let mut expected: Vec<(String, String, String)> = Vec::new();
    let first = super::commit(&history, crowd).unwrap();
    expected.push((first, "crowd/n0007.md".into(), "# Note 7\n".into()));
    let mut log = String::new();
    for i in 0..150 {
        let path = format!("crowd/new-{i:03}.md");
        let text = format!("# New {i}\n");
        let id = super::commit(
            &history,
            vec![Change {
                path: path.clone(),
                content: bytes(text.clone()),
            }],
        )
        .unwrap();
        expected.push((id, path, text));
        log.push_str(&format!("line {i}\n"));
        let id = super::commit(
            &history,
            vec![Change {
                path: "log.md".into(),
                content: bytes(log.clone()),
            }],
        )
        .unwrap();
        expected.push((id, "log.md".into(), log.clone()));
    }
    history.stop();
    let loose_before = loose_files(&git_dir);
    let state = git_dir.join(compact::STATE_FILE);
    // The packing thread may have packed some of it already; what is left goes now.
    pack_once(&git_dir);
    assert_eq!(
        loose_files(&git_dir),
        0,
        "{loose_before} loose files before"
    );
    assert_eq!(pack_once(&git_dir), None, "nothing left to pack");
    for (commit, path, text) in &expected {
        assert_eq!(
            read_at(&git_dir, commit, path).unwrap(),
            Stored::Bytes(text.as_bytes().to_vec()),
            "{path} at {commit}"
        );
    }
    // 301 trees of a 2,000-entry folder (~80 KB each) and 150 versions of a growing note:
    // as copies, megabytes; as deltas, the first copy and a few KB.
    let packed = pack_bytes(&git_dir);
    assert!(packed < 400_000, "{packed} bytes of packs");
    super::fsck_clean(&git_dir);

    // More commits, with a reader open from before: the newest packs are taken into the
    // next one, and what the reader had found it still finds.
    let reader = gix::open(&git_dir).unwrap();
    let (old_commit, old_path, old_text) = expected[1].clone();
    let old = gix::ObjectId::from_hex(old_commit.as_bytes()).unwrap();
    assert!(reader.find_commit(old).is_ok());
    let listed = |state: &Path| -> Vec<String> {
        let state: serde_json::Value =
            serde_json::from_slice(&std::fs::read(state).unwrap()).unwrap();
        assert_eq!(state["retired"], serde_json::json!([]), "{state}");
        state["packs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    let mut most = 0;
    for round in 0..6 {
        let history = History::open(&git_dir).unwrap();
        for i in 0..20 {
            let path = format!("crowd/round-{round}-{i}.md");
            let id = super::commit(
                &history,
                vec![Change {
                    path: path.clone(),
                    content: bytes(path.clone()),
                }],
            )
            .unwrap();
            expected.push((id, path.clone(), path));
        }
        history.stop();
        pack_once(&git_dir);
        let listed = listed(&state);
        most = most.max(listed.len());
        // On disk: the packs listed and the first commit's pack of blobs; the packs a
        // newer one took in are gone.
        let on_disk: std::collections::BTreeSet<String> =
            std::fs::read_dir(git_dir.join("objects/pack"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "idx"))
                .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
                .collect();
        assert_eq!(on_disk.len(), listed.len() + 1, "{on_disk:?} {listed:?}");
        assert!(listed.iter().all(|n| on_disk.contains(n)), "{listed:?}");
    }
    assert!(
        most <= 3,
        "at most {most} packs listed: a binary counter keeps few"
    );
    assert_eq!(loose_files(&git_dir), 0);
    for (commit, path, text) in &expected {
        assert_eq!(
            read_at(&git_dir, commit, path).unwrap(),
            Stored::Bytes(text.as_bytes().to_vec()),
            "{path} at {commit}"
        );
    }
    let tree = reader.find_commit(old).unwrap().tree().unwrap();
    let entry = tree.lookup_entry_by_path(&old_path).unwrap().unwrap();
    assert_eq!(entry.object().unwrap().data.as_slice(), old_text.as_bytes());
    super::fsck_clean(&git_dir);
}

/// A repair at open finds the commits the packing thread packed: HEAD naming a lost
/// commit moves back to the newest packed one, not to an empty history.
#[test]
fn a_repair_moves_head_back_to_a_packed_commit() {
    let dir = tempfile::tempdir().unwrap();
    let git_dir = dir.path().join("history.git");
    let history = History::open(&git_dir).unwrap();
    let mut last = String::new();
    for i in 0..3 {
        last = super::commit_at(
            &history,
            vec![Change {
                path: format!("n{i}.md"),
                content: Some(Content::Bytes(crate::vault::packed::Packed::plain(
                    Arc::from(format!("{i}").into_bytes()),
                ))),
            }],
            i + 1,
        )
        .unwrap();
    }
    history.stop();
    pack_once(&git_dir);
    assert_eq!(loose_files(&git_dir), 0);
    let head = std::fs::read_to_string(git_dir.join("HEAD")).unwrap();
    let branch = head.trim().strip_prefix("ref: ").unwrap();
    std::fs::write(git_dir.join(branch), format!("{}\n", "1".repeat(40))).unwrap();
    let history = History::open(&git_dir).unwrap();
    let repair = history.status().last_repair.expect("repaired");
    assert_eq!(repair.to.as_deref(), Some(last.as_str()));
    assert_eq!(
        read_at(&git_dir, &last, "n2.md").unwrap(),
        Stored::Bytes(b"2".to_vec())
    );
}
