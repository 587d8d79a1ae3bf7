//! `history.git`: a bare git repository (written with gix, never the user's own `.git`)
//! holding one commit per applied batch of changes.
//!
//! One thread owns the repository and applies commits in the order they were sent, so
//! the commit chain follows `committed_seq`. Callers that must not answer before the
//! commit is durable wait on the returned receiver; the startup bootstrap does not.
//! Commit messages carry trailers (`Notevault-Version`, `Notevault-Actor`,
//! `Notevault-Seq`) so `git log` in that repository tells the story.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

use gix::object::tree::EntryKind;
use parking_lot::Mutex;
use rayon::prelude::*;

use crate::error::{Error, Result};

/// Where the new content of a changed path comes from.
#[derive(Debug, Clone)]
pub enum Content {
    /// The bytes just written by the write pipeline.
    Bytes(Arc<Vec<u8>>),
    /// A file to read when the commit is written: only for notes whose bytes are not kept
    /// in memory (over 10 MiB). The write pipeline waits for pending commits before it
    /// changes such a file, so the late read still sees the recorded version.
    File(PathBuf),
}

/// One path of a commit: new content, or `None` for a removal.
#[derive(Debug, Clone)]
pub struct Change {
    pub path: String,
    pub content: Option<Content>,
}

/// One commit to record.
#[derive(Debug, Clone)]
pub struct CommitRequest {
    pub subject: String,
    pub actor: String,
    pub changes: Vec<Change>,
    /// `(key, value)` trailers appended to the message.
    pub trailers: Vec<(String, String)>,
    /// Commit even when the tree is unchanged (an API write always gets its commit, so
    /// its revision has a commit of its own to be read back from).
    pub allow_empty: bool,
}

/// What the history thread reports, for `/v1/index-status` and tests.
#[derive(Debug, Clone, Default)]
pub struct HistoryStatus {
    pub commits: u64,
    pub pending: u64,
    /// Failed commits waiting to be retried.
    pub backlog: u64,
    pub last_error: Option<String>,
    pub head: Option<String>,
}

type Reply = mpsc::Sender<Result<Option<String>>>;

pub struct History {
    tx: Mutex<mpsc::Sender<(CommitRequest, Reply)>>,
    status: Arc<Mutex<HistoryStatus>>,
    git_dir: PathBuf,
}

impl History {
    /// Open `git_dir`, creating a bare repository there if it does not exist, and start
    /// the thread that owns it.
    pub fn open(git_dir: &Path) -> Result<Self> {
        let repo = if git_dir.join("HEAD").exists() {
            gix::open(git_dir).map_err(|e| history_error("open", e))?
        } else {
            gix::init_bare(git_dir).map_err(|e| history_error("init", e))?
        };
        let sync = repo.into_sync();
        let status = Arc::new(Mutex::new(HistoryStatus::default()));
        status.lock().head = sync
            .to_thread_local()
            .head_id()
            .ok()
            .map(|id| id.to_string());
        let (tx, rx) = mpsc::channel::<(CommitRequest, Reply)>();
        let thread_status = status.clone();
        std::thread::Builder::new()
            .name("history".into())
            .spawn(move || {
                // Commits that failed are kept and retried, in order, before the next one:
                // a receipt's `flow_back_error` promises that.
                let mut backlog: Vec<CommitRequest> = Vec::new();
                for (request, reply) in rx {
                    while let Some(first) = backlog.first() {
                        match apply(&sync, first.clone()) {
                            Ok(_) => {
                                backlog.remove(0);
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "history retry failed");
                                break;
                            }
                        }
                    }
                    let result = if backlog.is_empty() {
                        apply(&sync, request.clone())
                    } else {
                        Err(Error::internal("earlier history commits are still failing"))
                    };
                    let mut s = thread_status.lock();
                    s.pending = s.pending.saturating_sub(1);
                    match &result {
                        Ok(Some(id)) => {
                            s.commits += 1;
                            s.head = Some(id.clone());
                        }
                        Ok(None) => {}
                        Err(e) => {
                            tracing::error!(error = %e, "history commit failed; it will be retried");
                            s.last_error = Some(e.message.clone());
                            backlog.push(request);
                        }
                    }
                    s.backlog = backlog.len() as u64;
                    drop(s);
                    let _ = reply.send(result);
                }
            })
            .map_err(|e| Error::internal(format!("cannot start the history thread: {e}")))?;
        Ok(Self {
            tx: Mutex::new(tx),
            status,
            git_dir: git_dir.to_path_buf(),
        })
    }

    /// Queue a commit; the receiver yields the commit id (`None` when nothing changed)
    /// once it is written.
    pub fn commit(&self, request: CommitRequest) -> mpsc::Receiver<Result<Option<String>>> {
        let (reply, rx) = mpsc::channel();
        self.status.lock().pending += 1;
        if let Err(mpsc::SendError((_, reply))) = self.tx.lock().send((request, reply)) {
            let _ = reply.send(Err(Error::internal("the history thread has stopped")));
        }
        rx
    }

    /// Wait until every queued commit is written (or `timeout` passes).
    pub fn flush(&self, timeout: std::time::Duration) {
        let deadline = std::time::Instant::now() + timeout;
        while self.status().pending > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    pub fn status(&self) -> HistoryStatus {
        self.status.lock().clone()
    }

    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }
}

fn history_error(what: &str, err: impl std::fmt::Display) -> Error {
    Error::internal(format!("history {what}: {err}"))
}

fn apply(sync: &gix::ThreadSafeRepository, request: CommitRequest) -> Result<Option<String>> {
    let repo = sync.to_thread_local();
    // Write the blobs first, in parallel: the bootstrap of a large vault is mostly this.
    let blobs: Vec<(String, Option<gix::ObjectId>)> = request
        .changes
        .par_iter()
        .map_init(
            || sync.to_thread_local(),
            |repo, change| -> Result<_> {
                let id = match &change.content {
                    None => None,
                    Some(Content::Bytes(bytes)) => Some(
                        repo.write_blob(bytes.as_slice())
                            .map_err(|e| history_error("write blob", e))?
                            .detach(),
                    ),
                    Some(Content::File(path)) => match std::fs::read(path) {
                        Ok(bytes) => Some(
                            repo.write_blob(&bytes)
                                .map_err(|e| history_error("write blob", e))?
                                .detach(),
                        ),
                        // Gone since it was seen: the next reconcile records the removal.
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                        Err(e) => return Err(history_error("read file", e)),
                    },
                };
                Ok((change.path.clone(), id))
            },
        )
        .collect::<Result<_>>()?;

    let parent = repo.head_id().ok().map(|id| id.detach());
    let base_tree = repo
        .head_tree_id_or_empty()
        .map_err(|e| history_error("read head", e))?
        .detach();
    let mut editor = repo
        .edit_tree(base_tree)
        .map_err(|e| history_error("edit tree", e))?;
    for (path, id) in &blobs {
        match id {
            Some(id) => {
                editor
                    .upsert(path.as_str(), EntryKind::Blob, *id)
                    .map_err(|e| history_error("tree upsert", e))?;
            }
            None => {
                editor
                    .remove(path.as_str())
                    .map_err(|e| history_error("tree remove", e))?;
            }
        }
    }
    let tree = editor
        .write()
        .map_err(|e| history_error("write tree", e))?
        .detach();
    if parent.is_some() && tree == base_tree && !request.allow_empty {
        return Ok(None);
    }
    let mut message = request.subject.clone();
    message.push_str("\n\n");
    message.push_str(&format!("Notevault-Actor: {}\n", request.actor));
    for (key, value) in &request.trailers {
        message.push_str(&format!("{key}: {value}\n"));
    }
    let signature = gix::actor::Signature {
        name: "notevault".into(),
        email: "notevault@localhost".into(),
        time: gix::date::Time::now_utc(),
    };
    let mut time_buf = gix::date::parse::TimeBuf::default();
    let signature = signature.to_ref(&mut time_buf);
    let id = repo
        .commit_as(signature, signature, "HEAD", message, tree, parent)
        .map_err(|e| history_error("commit", e))?;
    Ok(Some(id.to_string()))
}

/// Read the content of `path` as it was at commit `commit` (a hex id).
pub fn read_at(git_dir: &Path, commit: &str, path: &str) -> Result<Option<Vec<u8>>> {
    let repo = gix::open(git_dir).map_err(|e| history_error("open", e))?;
    let id = gix::ObjectId::from_hex(commit.as_bytes()).map_err(|e| history_error("id", e))?;
    let tree = repo
        .find_commit(id)
        .map_err(|e| history_error("find commit", e))?
        .tree()
        .map_err(|e| history_error("read tree", e))?;
    let Some(entry) = tree
        .lookup_entry_by_path(path)
        .map_err(|e| history_error("lookup", e))?
    else {
        return Ok(None);
    };
    let blob = entry.object().map_err(|e| history_error("read blob", e))?;
    Ok(Some(blob.data.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(history: &History, changes: Vec<Change>) -> Option<String> {
        history
            .commit(CommitRequest {
                subject: "test".into(),
                actor: "test".into(),
                changes,
                trailers: vec![("Notevault-Seq".into(), "1".into())],
                allow_empty: false,
            })
            .recv()
            .unwrap()
            .unwrap()
    }

    #[test]
    fn commits_chain_and_unchanged_trees_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path().join("history.git");
        let history = History::open(&git_dir).unwrap();
        let bytes = |s: &str| Some(Content::Bytes(Arc::new(s.as_bytes().to_vec())));
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
            read_at(&git_dir, &first, "dir/b.md").unwrap().unwrap(),
            b"b"
        );
        assert_eq!(read_at(&git_dir, &second, "dir/b.md").unwrap(), None);
        assert_eq!(history.status().commits, 2);
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

/// The content of `path` as recorded by the commit that carries revision `seq`
/// (`None` when no commit carries it, or the path is absent there).
pub fn content_at_seq(git_dir: &Path, seq: i64, path: &str) -> Result<Option<Vec<u8>>> {
    let repo = gix::open(git_dir).map_err(|e| history_error("open", e))?;
    let Ok(head) = repo.head_id() else {
        return Ok(None);
    };
    let walk = repo
        .rev_walk([head.detach()])
        .all()
        .map_err(|e| history_error("walk", e))?;
    for info in walk {
        let info = info.map_err(|e| history_error("walk", e))?;
        let commit = info.object().map_err(|e| history_error("read commit", e))?;
        let message = commit.message_raw_sloppy().to_string();
        if !covers(&message, seq) {
            continue;
        }
        let tree = commit.tree().map_err(|e| history_error("read tree", e))?;
        let Some(entry) = tree
            .lookup_entry_by_path(path)
            .map_err(|e| history_error("lookup", e))?
        else {
            return Ok(None);
        };
        let blob = entry.object().map_err(|e| history_error("read blob", e))?;
        return Ok(Some(blob.data.clone()));
    }
    Ok(None)
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
