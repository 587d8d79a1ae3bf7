//! Reading revisions back from `history.git`: by the revision's commit id, or by the
//! commit whose `Notevault-Seq` trailer covers its seq; a path left out of its commit (a
//! `Notevault-Left-Out` trailer, or a name git refuses) is said so, never read as absent.

use std::path::Path;

use super::{history_error, LEFT_OUT_TRAILER};
use crate::error::Result;
use crate::vault::path::unstorable;

/// The reason `path` was left out of the commit with this message, if it was.
fn left_out_of(message: &str, path: &str) -> Option<String> {
    let quoted = serde_json::to_string(path).ok()?;
    message.lines().find_map(|line| {
        let rest = line.strip_prefix(LEFT_OUT_TRAILER)?.strip_prefix(&quoted)?;
        Some(rest.trim().to_string())
    })
}

/// What `history.git` holds of a path in a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// The bytes.
    Bytes(Vec<u8>),
    /// The commit has no such path: the note was removed (or never there).
    Absent,
    /// The commit left the path out, for this reason.
    LeftOut(String),
    /// No commit carries the revision.
    NotRecorded,
    /// The commit (or an object of it) is gone from `history.git`: lost in a storage
    /// failure, and the repair at start moved history past it.
    Lost(String),
}

fn lost(what: &str, id: impl std::fmt::Display) -> Stored {
    Stored::Lost(format!(
        "its {what} {id} is gone from history (lost in a storage failure; `history.last_repair` in `GET /v1/index-status` says when)"
    ))
}

/// What commit `commit` (a hex id) holds of `path`.
pub fn read_at(git_dir: &Path, commit: &str, path: &str) -> Result<Stored> {
    again_if_lost(|| read_at_once(git_dir, commit, path))
}

/// An object that the packing thread (`compact.rs`) moves from its loose file into a pack
/// between the two steps of a lookup reads as missing: a second look, with a fresh handle
/// (which finds the new pack), tells a moved object from a lost one.
fn again_if_lost(read: impl Fn() -> Result<Stored>) -> Result<Stored> {
    match read()? {
        Stored::Lost(_) => read(),
        found => Ok(found),
    }
}

fn read_at_once(git_dir: &Path, commit: &str, path: &str) -> Result<Stored> {
    let repo = gix::open(git_dir).map_err(|e| history_error("open", e))?;
    let id = gix::ObjectId::from_hex(commit.as_bytes()).map_err(|e| history_error("id", e))?;
    let Ok(commit) = repo.find_commit(id) else {
        return Ok(lost("commit", id));
    };
    stored_in(&commit, path)
}

fn stored_in(commit: &gix::Commit<'_>, path: &str) -> Result<Stored> {
    if let Some(why) = left_out_of(&commit.message_raw_sloppy().to_string(), path) {
        return Ok(Stored::LeftOut(why));
    }
    if let Some(why) = unstorable(path) {
        return Ok(Stored::LeftOut(why));
    }
    let Ok(tree) = commit.tree() else {
        return Ok(lost("tree of commit", commit.id));
    };
    let entry = match tree.lookup_entry_by_path(path) {
        Ok(Some(entry)) => entry,
        Ok(None) => return Ok(Stored::Absent),
        Err(_) => return Ok(lost("tree of commit", commit.id)),
    };
    match entry.object() {
        Ok(blob) => Ok(Stored::Bytes(blob.data.clone())),
        Err(_) => Ok(lost("blob", entry.oid())),
    }
}

/// Whether a commit message's `Notevault-Seq` trailer (`7` or `3-9`) covers `seq`.
fn covers(message: &str, seq: i64) -> bool {
    message.lines().any(|line| {
        let Some(range) = line.strip_prefix("Notevault-Seq: ") else {
            return false;
        };
        let (lo, hi) = range
            .trim()
            .split_once('-')
            .unwrap_or((range.trim(), range.trim()));
        matches!((lo.parse::<i64>(), hi.parse::<i64>()), (Ok(lo), Ok(hi)) if lo <= seq && seq <= hi)
    })
}

/// What the commit that carries revision `seq` holds of `path`
/// ([`Stored::NotRecorded`] when no commit carries it).
pub fn content_at_seq(git_dir: &Path, seq: i64, path: &str) -> Result<Stored> {
    again_if_lost(|| content_at_seq_once(git_dir, seq, path))
}

fn content_at_seq_once(git_dir: &Path, seq: i64, path: &str) -> Result<Stored> {
    let repo = gix::open(git_dir).map_err(|e| history_error("open", e))?;
    let Ok(head) = repo.head_id() else {
        return Ok(Stored::NotRecorded);
    };
    let walk = repo
        .rev_walk([head.detach()])
        .all()
        .map_err(|e| history_error("walk", e))?;
    for info in walk {
        // A commit the walk cannot read is gone (see `Stored::Lost`).
        let Ok(info) = info else {
            return Ok(lost("history before commit", head));
        };
        let Ok(commit) = info.object() else {
            return Ok(lost("commit", info.id));
        };
        let message = commit.message_raw_sloppy().to_string();
        if covers(&message, seq) {
            return stored_in(&commit, path);
        }
    }
    Ok(Stored::NotRecorded)
}

/// The newest seq a commit message accounts for: the top of its `Notevault-Seq` range,
/// or its `Notevault-Through` (a commit that brought history up to date at start).
pub(crate) fn seq_through(message: &str) -> i64 {
    message
        .lines()
        .filter_map(|line| {
            if let Some(range) = line.strip_prefix("Notevault-Seq: ") {
                let hi = range.trim().rsplit('-').next()?;
                hi.parse::<i64>().ok()
            } else {
                line.strip_prefix("Notevault-Through: ")?
                    .trim()
                    .parse()
                    .ok()
            }
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod seq_tests {
    #[test]
    fn seq_trailers() {
        assert!(super::covers("x\n\nNotevault-Seq: 5\n", 5));
        assert!(super::covers("x\n\nNotevault-Seq: 3-9\n", 7));
        assert!(!super::covers("x\n\nNotevault-Seq: 3-9\n", 10));
        assert!(!super::covers("x\n", 1));
    }
}
