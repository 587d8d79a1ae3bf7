//! Unit tests of the parent module.

use super::*;

fn commit(history: &History, changes: Vec<Change>) -> Option<String> {
    commit_at(history, changes, 1)
}

/// A commit of `changes` as of `seq`: its id (`None` when nothing changed).
fn commit_at(history: &History, changes: Vec<Change>, seq: i64) -> Option<String> {
    history
        .commit(CommitRequest {
            subject: "test".into(),
            actor: "test".into(),
            changes,
            trailers: vec![("Notevault-Seq".into(), seq.to_string())],
            allow_empty: false,
            replace: false,
            at: None,
        })
        .recv()
        .unwrap()
        .unwrap()
        .id
}

#[test]
fn commits_chain_and_unchanged_trees_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let git_dir = dir.path().join("history.git");
    let history = History::open(&git_dir).unwrap();
    let bytes = |s: &str| {
        Some(Content::Bytes(crate::vault::packed::Packed::plain(
            Arc::from(s.as_bytes()),
        )))
    };
    let first = commit(
        &history,
        vec![
            Change {
                path: "a.md".into(),
                content: bytes("a"),
            },
            Change {
                path: "dir/b.md".into(),
                content: bytes("b"),
            },
        ],
    )
    .unwrap();
    let same = commit(
        &history,
        vec![Change {
            path: "a.md".into(),
            content: bytes("a"),
        }],
    );
    assert_eq!(same, None);
    let second = commit(
        &history,
        vec![Change {
            path: "dir/b.md".into(),
            content: None,
        }],
    )
    .unwrap();
    assert_ne!(first, second);
    assert_eq!(
        read_at(&git_dir, &first, "dir/b.md").unwrap(),
        Stored::Bytes(b"b".to_vec())
    );
    assert_eq!(
        read_at(&git_dir, &second, "dir/b.md").unwrap(),
        Stored::Absent
    );
    assert_eq!(history.status().commits, 2);
}

#[test]
fn a_name_git_refuses_is_left_out_and_the_rest_committed() {
    let dir = tempfile::tempdir().unwrap();
    let git_dir = dir.path().join("history.git");
    let history = History::open(&git_dir).unwrap();
    let bytes = |s: &str| {
        Some(Content::Bytes(crate::vault::packed::Packed::plain(
            Arc::from(s.as_bytes()),
        )))
    };
    for bad in [".GIT/x.md", "git~1/x.md", ".Git/y.md"] {
        let written = history
            .commit(CommitRequest {
                subject: "test".into(),
                actor: "test".into(),
                changes: vec![
                    Change {
                        path: bad.into(),
                        content: bytes("bad"),
                    },
                    Change {
                        path: "good.md".into(),
                        content: bytes(bad),
                    },
                ],
                trailers: vec![("Notevault-Seq".into(), "4".into())],
                allow_empty: false,
                replace: false,
                at: None,
            })
            .recv()
            .unwrap()
            .unwrap();
        let id = written.id.expect("the good change is committed");
        assert_eq!(written.left_out.len(), 1, "{bad}");
        assert_eq!(
            read_at(&git_dir, &id, "good.md").unwrap(),
            Stored::Bytes(bad.as_bytes().to_vec())
        );
        assert!(matches!(
            read_at(&git_dir, &id, bad).unwrap(),
            Stored::LeftOut(_)
        ));
        assert!(matches!(
            content_at_seq(&git_dir, 4, bad).unwrap(),
            Stored::LeftOut(_)
        ));
    }
    let status = history.status();
    assert_eq!((status.backlog, status.left_out_total), (0, 3));
    assert_eq!(status.head_seq, 4);
    assert_eq!(
        content_at_seq(&git_dir, 5, "good.md").unwrap(),
        Stored::NotRecorded
    );
    // The lasting part survives a restart.
    drop(history);
    let reopened = History::open(&git_dir).unwrap().status();
    assert_eq!(reopened.left_out_total, 3);
    assert_eq!(reopened.left_out.len(), 3);
    assert_eq!(reopened.head_seq, 4);
}

#[test]
fn unstorable_names() {
    for bad in [
        ".git/x.md",
        ".GIT/x.md",
        "a/git~1/b.md",
        "GIT~1/x.md",
        ".git./x.md",
    ] {
        assert!(unstorable(bad).is_some(), "{bad}");
    }
    for good in ["a.md", "git/x.md", ".github/x.md", "new\nline.md", "Zoë.md"] {
        assert_eq!(unstorable(good), None, "{good}");
    }
}

/// `git fsck --full` finds nothing wrong, where git is installed.
pub(super) fn fsck_clean(git_dir: &Path) {
    if let Ok(out) = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["fsck", "--full", "--no-progress", "--no-dangling"])
        .output()
    {
        assert!(
            out.status.success() && out.stdout.is_empty(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

mod packing;
