//! Repairing `history.git` after a storage failure, at open, before the history thread
//! starts.
//!
//! Objects written since [`super::durable`] are synced before the ref moves, so a power
//! cut can leave only unreferenced torn files behind; a repository written before (or a
//! disk that lied) can also have HEAD name an empty or missing object. After a start
//! that did not follow a clean stop, or whenever HEAD does not read back, every loose
//! object is checked and the torn ones are removed (so `git fsck` is clean and a later
//! write does not take a torn file for its object). When an object HEAD reaches is gone,
//! HEAD moves back to the newest commit whose whole history is intact (none: history
//! starts again from the vault). The start then finds history behind the revisions and
//! records the vault as found; revisions whose bytes went with the lost commits are
//! counted (`lost_revisions`).
#![allow(
    clippy::disallowed_methods,
    reason = "removes torn files from history.git, in the state directory"
)]

use std::collections::HashSet;
use std::path::Path;

use gix::ObjectId;
use rayon::prelude::*;

use super::{durable, seq_through};
use crate::error::Result;

/// What a repair at open did (kept in the history status, reported by
/// `GET /v1/index-status`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Repair {
    pub at: String,
    /// Torn loose objects (empty, or not the bytes their id names) removed.
    pub torn_objects: u64,
    /// HEAD before, when it moved (it named an object that is gone).
    pub from: Option<String>,
    /// HEAD after (`None`: no commit was intact; history started again).
    pub to: Option<String>,
    /// Whether HEAD moved.
    pub moved: bool,
}

/// Check and repair the repository; `unclean`: the last run did not stop cleanly.
/// `None` when nothing needed repair.
pub(crate) fn at_open(repo: &gix::Repository, unclean: bool) -> Result<Option<Repair>> {
    let head_reads = head_reads(repo);
    if !unclean && head_reads {
        return Ok(None);
    }
    let started = std::time::Instant::now();
    let (torn, commits) = sweep(repo)?;
    let mut repair = Repair {
        at: crate::clock::timestamp(chrono::Utc::now()),
        torn_objects: torn,
        ..Default::default()
    };
    let head = repo.head_id().ok().map(|id| id.detach());
    let mut good = HashSet::new();
    let intact = |id: ObjectId, good: &mut HashSet<ObjectId>| reaches_intact(repo, id, good);
    if head_reads && (torn == 0 || head.is_none_or(|h| intact(h, &mut good))) {
        if torn > 0 {
            tracing::warn!(
                torn_objects = torn,
                "history: torn objects removed after an unclean stop; HEAD is intact"
            );
            return Ok(Some(repair));
        }
        return Ok(None);
    }
    // HEAD reaches an object that is gone: the newest commit whose history is whole,
    // loose or packed (the packing thread moves commits into packs).
    let mut commits: HashSet<ObjectId> = commits.into_iter().collect();
    if let Ok(all) = repo.objects.iter() {
        commits.extend(all.filter_map(|id| id.ok()).filter(|id| {
            repo.find_header(*id)
                .is_ok_and(|h| h.kind() == gix::objs::Kind::Commit)
        }));
    }
    let mut candidates: Vec<(i64, i64, ObjectId)> = commits
        .into_iter()
        .filter_map(|id| {
            let commit = repo.find_commit(id).ok()?;
            let seq = seq_through(&commit.message_raw_sloppy().to_string());
            let time = commit.time().map(|t| t.seconds).unwrap_or(0);
            Some((seq, time, id))
        })
        .collect();
    candidates.sort_unstable_by(|a, b| b.cmp(a));
    let to = candidates
        .into_iter()
        .map(|(_, _, id)| id)
        .find(|id| intact(*id, &mut good));
    match to {
        Some(id) => durable::set_head(repo, id)?,
        None => durable::clear_head(repo)?,
    }
    repair.from = head.map(|h| h.to_string());
    repair.to = to.map(|t| t.to_string());
    repair.moved = true;
    tracing::error!(
        torn_objects = torn,
        from = repair.from.as_deref().unwrap_or("(unreadable)"),
        to = repair.to.as_deref().unwrap_or("(none: history starts again from the vault)"),
        ms = started.elapsed().as_millis() as u64,
        "history: HEAD named a lost object after a storage failure; moved back to the newest intact commit"
    );
    Ok(Some(repair))
}

/// Whether HEAD is unborn, or names a commit whose object and tree read back.
fn head_reads(repo: &gix::Repository) -> bool {
    match repo.head_id() {
        Err(_) => repo.head_name().is_ok_and(|n| n.is_some()) && head_is_unborn(repo),
        Ok(id) => id
            .object()
            .ok()
            .and_then(|o| o.try_into_commit().ok())
            .and_then(|c| c.tree().ok())
            .is_some(),
    }
}

fn head_is_unborn(repo: &gix::Repository) -> bool {
    repo.head().is_ok_and(|h| h.is_unborn())
}

/// Check every loose object, remove the torn ones and the temp files of interrupted
/// writes; the number removed and the ids of the intact commits.
fn sweep(repo: &gix::Repository) -> Result<(u64, Vec<ObjectId>)> {
    let objects_dir = repo.objects.store_ref().path().to_path_buf();
    let loose = gix::odb::loose::Store::at(&objects_dir, repo.object_hash());
    let ids: Vec<ObjectId> = loose.iter().filter_map(|id| id.ok()).collect();
    let checked: Vec<(ObjectId, Option<gix::objs::Kind>)> = ids
        .into_par_iter()
        .map(|id| (id, kind_if_intact(&loose, &id)))
        .collect();
    let mut torn = 0;
    let mut commits = Vec::new();
    for (id, kind) in checked {
        match kind {
            Some(gix::objs::Kind::Commit) => commits.push(id),
            Some(_) => {}
            None => {
                let path = loose.object_path(&id);
                if let Err(e) = std::fs::remove_file(&path) {
                    tracing::warn!(error = %e, object = %id, "cannot remove a torn history object");
                } else {
                    torn += 1;
                }
            }
        }
    }
    // Temp files of object writes cut short (gix writes them in the objects folder).
    if let Ok(entries) = std::fs::read_dir(&objects_dir) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with(".tmp") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    if torn > 0 {
        durable::sync_path(&objects_dir).map_err(|e| super::history_error("sync", e))?;
    }
    Ok((torn, commits))
}

fn kind_if_intact(loose: &gix::odb::loose::Store, id: &gix::oid) -> Option<gix::objs::Kind> {
    let mut buf = Vec::new();
    let data = loose.try_find(id, &mut buf).ok()??;
    let hashed = gix::objs::compute_hash(id.kind(), data.kind, data.data).ok()?;
    (hashed == id).then_some(data.kind)
}

/// Whether every object `commit` reaches (its tree, blobs and ancestors) is there;
/// `good` remembers what an earlier walk found whole.
fn reaches_intact(repo: &gix::Repository, commit: ObjectId, good: &mut HashSet<ObjectId>) -> bool {
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut stack = vec![commit];
    while let Some(id) = stack.pop() {
        if good.contains(&id) || !seen.insert(id) {
            continue;
        }
        let Ok(object) = repo.find_object(id) else {
            return false;
        };
        match object.kind {
            gix::objs::Kind::Commit => {
                let Ok(commit) = object.try_into_commit() else {
                    return false;
                };
                let Ok(tree) = commit.tree_id() else {
                    return false;
                };
                stack.push(tree.detach());
                stack.extend(commit.parent_ids().map(|p| p.detach()));
            }
            gix::objs::Kind::Tree => {
                let tree = object.into_tree();
                let Ok(decoded) = tree.decode() else {
                    return false;
                };
                for entry in &decoded.entries {
                    let oid = entry.oid.to_owned();
                    if entry.mode.is_tree() {
                        stack.push(oid);
                    } else if entry.mode.is_blob() || entry.mode.is_link() {
                        if !good.contains(&oid) && !repo.has_object(oid) {
                            return false;
                        }
                        seen.insert(oid);
                    }
                }
            }
            _ => {}
        }
    }
    good.extend(seen);
    true
}

/// What `notevault check` found in a `history.git`.
#[derive(Debug, Clone)]
pub struct Verified {
    /// `git fsck`, or `gix` (every object read and decoded) when the git CLI is absent.
    pub how: &'static str,
    /// The seq the HEAD commit records (0 without a commit).
    pub head_seq: i64,
}

/// Verify `git_dir` without changing it: `git fsck` when the git CLI is there (dangling
/// objects are not a problem), else every object read and decoded through gix. An error
/// says, in one line, what is wrong.
pub fn verify(git_dir: &Path) -> std::result::Result<Verified, String> {
    if !git_dir.join("HEAD").is_file() {
        return Err(format!("{} is not a git repository", git_dir.display()));
    }
    let repo = gix::open(git_dir).map_err(|e| format!("cannot open: {e}"))?;
    let head_seq = match repo.head_id() {
        Ok(head) => {
            let commit = head
                .object()
                .map_err(|e| format!("HEAD names a missing object: {e}"))?
                .try_into_commit()
                .map_err(|e| format!("HEAD is not a commit: {e}"))?;
            seq_through(&commit.message_raw_sloppy().to_string())
        }
        Err(_) => 0,
    };
    match std::process::Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["fsck", "--no-progress", "--no-dangling"])
        .output()
    {
        Ok(out) if out.status.success() => {
            return Ok(Verified {
                how: "git fsck",
                head_seq,
            })
        }
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout);
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(format!("git fsck failed: {}", first.trim()));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot run git fsck: {e}")),
    }
    let ids = repo
        .objects
        .iter()
        .map_err(|e| format!("cannot list objects: {e}"))?;
    for id in ids {
        let id = id.map_err(|e| format!("cannot list objects: {e}"))?;
        let object = repo
            .find_object(id)
            .map_err(|e| format!("object {id} is unreadable: {e}"))?;
        let kind = object.kind;
        gix::objs::ObjectRef::from_bytes(&object.data, kind, repo.object_hash())
            .map_err(|e| format!("object {id} is corrupt: {e}"))?;
    }
    Ok(Verified {
        how: "gix",
        head_seq,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::{read_at, Change, CommitRequest, Content, History, Stored, OPEN_MARKER};

    fn commit(history: &History, seq: i64, path: &str, text: &str) -> String {
        history
            .commit(CommitRequest {
                subject: "test".into(),
                actor: "test".into(),
                changes: vec![Change {
                    path: path.into(),
                    content: Some(Content::Bytes(crate::vault::packed::Packed::plain(
                        Arc::from(text.as_bytes()),
                    ))),
                }],
                trailers: vec![("Notevault-Seq".into(), seq.to_string())],
                allow_empty: true,
                replace: false,
                at: None,
            })
            .recv()
            .unwrap()
            .unwrap()
            .id
            .unwrap()
    }

    /// Leave the loose object `id` as a power cut leaves an unsynced file: empty.
    fn tear(git_dir: &std::path::Path, id: &str) {
        let path = git_dir.join("objects").join(&id[..2]).join(&id[2..]);
        let _ =
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644));
        std::fs::write(&path, b"").unwrap();
    }

    use crate::history::tests::fsck_clean;

    #[test]
    fn a_head_naming_a_torn_commit_moves_back_to_the_newest_intact_one() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path().join("history.git");
        let history = History::open(&git_dir).unwrap();
        let first = commit(&history, 1, "a.md", "one");
        let second = commit(&history, 2, "a.md", "two");
        history.stop();
        drop(history);
        tear(&git_dir, &second);
        let history = History::open(&git_dir).unwrap();
        let status = history.status();
        let repair = status.last_repair.clone().expect("repaired");
        assert!(repair.moved && status.repaired_at_start);
        assert_eq!(repair.to.as_deref(), Some(first.as_str()));
        assert_eq!(status.head.as_deref(), Some(first.as_str()));
        assert_eq!((status.head_seq, status.torn_objects_removed), (1, 1));
        assert!(matches!(
            read_at(&git_dir, &second, "a.md").unwrap(),
            Stored::Lost(_)
        ));
        fsck_clean(&git_dir);
        // History goes on from the intact commit.
        let third = commit(&history, 3, "a.md", "three");
        assert_eq!(
            read_at(&git_dir, &third, "a.md").unwrap(),
            Stored::Bytes(b"three".to_vec())
        );
        assert_eq!(
            read_at(&git_dir, &first, "a.md").unwrap(),
            Stored::Bytes(b"one".to_vec())
        );
        history.stop();
        fsck_clean(&git_dir);
        // The lasting part says so after another start too.
        drop(history);
        let status = History::open(&git_dir).unwrap().status();
        assert_eq!(status.torn_objects_removed, 1);
        assert!(!status.repaired_at_start);
    }

    #[test]
    fn without_an_intact_commit_history_starts_again() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path().join("history.git");
        let history = History::open(&git_dir).unwrap();
        let only = commit(&history, 1, "a.md", "one");
        history.stop();
        drop(history);
        tear(&git_dir, &only);
        let history = History::open(&git_dir).unwrap();
        let status = history.status();
        assert!(status.repaired_at_start && status.head.is_none());
        assert_eq!(status.last_repair.unwrap().to, None);
        let next = commit(&history, 2, "a.md", "two");
        assert_eq!(
            read_at(&git_dir, &next, "a.md").unwrap(),
            Stored::Bytes(b"two".to_vec())
        );
        history.stop();
        fsck_clean(&git_dir);
    }

    #[test]
    fn a_torn_orphan_is_removed_after_an_unclean_stop_and_written_anew() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path().join("history.git");
        let history = History::open(&git_dir).unwrap();
        let head = commit(&history, 1, "a.md", "one");
        history.stop();
        drop(history);
        assert!(
            !git_dir.join(OPEN_MARKER).exists(),
            "a clean stop removes the marker"
        );
        // A blob written but never synced when the machine stopped: empty, named by nothing.
        let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, b"two")
            .unwrap()
            .to_string();
        std::fs::create_dir_all(git_dir.join("objects").join(&id[..2])).unwrap();
        tear(&git_dir, &id);
        // Found as it is before a clean stop: the next open checks.
        let history = History::open(&git_dir).unwrap();
        history.stop();
        drop(history);
        std::fs::write(git_dir.join(OPEN_MARKER), b"").unwrap();
        tear(&git_dir, &id);
        let history = History::open(&git_dir).unwrap();
        let status = history.status();
        assert_eq!(status.torn_objects_removed, 1);
        assert!(!status.last_repair.unwrap().moved);
        assert_eq!(status.head.as_deref(), Some(head.as_str()));
        fsck_clean(&git_dir);
        let next = commit(&history, 2, "a.md", "two");
        assert_eq!(
            read_at(&git_dir, &next, "a.md").unwrap(),
            Stored::Bytes(b"two".to_vec())
        );
        history.stop();
        fsck_clean(&git_dir);
    }

    #[test]
    fn a_torn_object_found_by_a_write_is_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path().join("history.git");
        let history = History::open(&git_dir).unwrap();
        commit(&history, 1, "a.md", "one");
        let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, b"two")
            .unwrap()
            .to_string();
        std::fs::create_dir_all(git_dir.join("objects").join(&id[..2])).unwrap();
        tear(&git_dir, &id);
        let next = commit(&history, 2, "a.md", "two");
        assert_eq!(
            read_at(&git_dir, &next, "a.md").unwrap(),
            Stored::Bytes(b"two".to_vec())
        );
        history.stop();
        fsck_clean(&git_dir);
    }
}
