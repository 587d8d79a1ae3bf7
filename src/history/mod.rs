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
use crate::vault::packed::Packed;
use crate::vault::path::unstorable;

mod compact;
mod delta;
mod durable;
mod pack;
mod read;
mod repair;
use read::seq_through;
pub use read::{content_at_seq, read_at, Stored};
pub use repair::{verify, Repair, Verified};

/// Where the new content of a changed path comes from.
#[derive(Debug, Clone)]
pub enum Content {
    /// The bytes a write brought, or the catalog's kept (packed) bytes of a note found:
    /// unpacked only while a blob is hashed and written.
    Bytes(Packed),
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
    /// The changes are the whole tree (the vault as found at start), not edits of the
    /// last commit's tree.
    pub replace: bool,
    /// The commit's time when it is not now: a change recorded earlier elsewhere (a
    /// hosted vault's revision, replayed into an export's history).
    pub at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A file left out of a commit, and why (its name is one git cannot store, or it could
/// not be read). Every other change of the commit is still recorded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeftOut {
    pub path: String,
    pub reason: String,
    /// The `Notevault-Seq` of the commit it was left out of (`7` or `3-9`).
    pub seq: String,
    pub at: String,
}

/// What the history thread reports, for `/v1/index-status` and tests. The lasting part
/// (errors, files left out, commits given up) is kept in `notevault-status.json` in the
/// repository, so a restart does not hide a stall.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct HistoryStatus {
    #[serde(skip)]
    pub commits: u64,
    #[serde(skip)]
    pub pending: u64,
    /// Failed commits waiting to be retried.
    #[serde(skip)]
    pub backlog: u64,
    pub last_error: Option<String>,
    pub last_error_at: Option<String>,
    #[serde(skip)]
    pub head: Option<String>,
    /// Every change up to this seq is in a commit, or known to be missing from history.
    #[serde(skip)]
    pub head_seq: i64,
    /// The newest files left out of history (at most [`KEEP_LEFT_OUT`]).
    pub left_out: Vec<LeftOut>,
    /// Files left out since the repository was created.
    pub left_out_total: u64,
    /// Commits given up after failing [`MAX_ATTEMPTS`] times: their revisions' bytes are
    /// not in history.
    pub dropped_commits: u64,
    /// Revisions whose bytes never reached history (the daemon stopped while history was
    /// behind, or their commit was lost in a storage failure), found at start.
    pub lost_revisions: u64,
    /// Torn loose objects removed at starts after a storage failure.
    #[serde(default)]
    pub torn_objects_removed: u64,
    /// The last repair at open (see `repair.rs`).
    #[serde(default)]
    pub last_repair: Option<Repair>,
    /// HEAD was moved back at this start: history is to be brought up to date from the
    /// vault even when no commit is left.
    #[serde(skip)]
    pub repaired_at_start: bool,
}

/// How many left-out files the status keeps by name.
pub const KEEP_LEFT_OUT: usize = 100;
/// A commit that fails this many times in a row is given up (about 7 minutes of retries).
pub const MAX_ATTEMPTS: u32 = 12;
/// Where the lasting status is kept, inside `history.git`.
const STATUS_FILE: &str = "notevault-status.json";
/// Present while a daemon has the repository open: found at open, the last run did not
/// stop cleanly.
const OPEN_MARKER: &str = "notevault-open";

/// What writing a commit did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// The commit id; `None` when the tree was unchanged and no commit was needed.
    pub id: Option<String>,
    /// `(path, reason)` of each change left out of it.
    pub left_out: Vec<(String, String)>,
}

type Reply = mpsc::Sender<Result<Written>>;

/// A queued commit: the request, who waits for it, and how often it failed.
struct Queued {
    request: CommitRequest,
    reply: Option<Reply>,
    attempts: u32,
}

pub struct History {
    tx: Mutex<mpsc::Sender<(CommitRequest, Reply)>>,
    status: Arc<Mutex<HistoryStatus>>,
    git_dir: PathBuf,
    /// The writer thread and the packing thread, joined by [`History::stop`].
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    packer: Mutex<Option<std::thread::JoinHandle<()>>>,
    stop_packing: Arc<std::sync::atomic::AtomicBool>,
}

/// What the history thread shares with the packing thread: the lock it holds for each
/// commit, and where it says what it wrote loose.
struct Packing {
    lock: Arc<Mutex<()>>,
    tx: mpsc::Sender<compact::Loose>,
}

impl History {
    /// Open `git_dir`, creating a bare repository there if it does not exist, and start
    /// the thread that owns it.
    pub fn open(git_dir: &Path) -> Result<Self> {
        let repo = if git_dir.join("HEAD").exists() {
            gix::open(git_dir).map_err(|e| history_error("open", e))?
        } else {
            let repo = gix::init_bare(git_dir).map_err(|e| history_error("init", e))?;
            durable::sync_skeleton(git_dir)?;
            repo
        };
        pack::remove_leftovers(git_dir);
        let mut initial: HistoryStatus = std::fs::read(git_dir.join(STATUS_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        // A start that does not follow a clean stop checks the objects (the last run may
        // have ended with the machine, leaving torn files).
        let marker = git_dir.join(OPEN_MARKER);
        let unclean = marker.exists();
        if let Some(repair) = repair::at_open(&repo, unclean)? {
            initial.torn_objects_removed += repair.torn_objects;
            initial.repaired_at_start = repair.moved;
            initial.last_repair = Some(repair);
            save_status(&git_dir.join(STATUS_FILE), &initial);
        }
        if !unclean {
            durable::create_marker(&marker)?;
        }
        let sync = repo.into_sync();
        let local = sync.to_thread_local();
        if let Ok(head) = local.head_id() {
            initial.head = Some(head.to_string());
            if let Ok(commit) = head.object().map(|o| o.into_commit()) {
                initial.head_seq = seq_through(&commit.message_raw_sloppy().to_string());
            }
        }
        let status = Arc::new(Mutex::new(initial));
        let (tx, rx) = mpsc::channel::<(CommitRequest, Reply)>();
        let thread_status = status.clone();
        let status_file = git_dir.join(STATUS_FILE);
        let lock = Arc::new(Mutex::new(()));
        let stop_packing = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (pack_tx, packer) = compact::spawn(sync.clone(), lock.clone(), stop_packing.clone())?;
        let packing = Packing { lock, tx: pack_tx };
        let thread = std::thread::Builder::new()
            .name("history".into())
            .spawn(move || writer(sync, rx, thread_status, status_file, packing))
            .map_err(|e| {
                Error::internal(format!("cannot start the history thread: {e}")).with_cause(e)
            })?;
        Ok(Self {
            tx: Mutex::new(tx),
            status,
            git_dir: git_dir.to_path_buf(),
            thread: Mutex::new(Some(thread)),
            packer: Mutex::new(Some(packer)),
            stop_packing,
        })
    }

    /// Queue a commit; the receiver yields what was written once it is, or the error of
    /// its first attempt (it is then retried in the background, in order).
    pub fn commit(&self, request: CommitRequest) -> mpsc::Receiver<Result<Written>> {
        let (reply, rx) = mpsc::channel();
        self.status.lock().pending += 1;
        if let Err(mpsc::SendError((_, reply))) = self.tx.lock().send((request, reply)) {
            let _ = reply.send(Err(Error::internal("the history thread has stopped")));
        }
        rx
    }

    /// Wait until every queued commit is written or has failed once (or `timeout` passes).
    pub fn flush(&self, timeout: std::time::Duration) {
        let deadline = std::time::Instant::now() + timeout;
        while self.status().pending > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Stop the writer: what is queued gets one last try, then the thread ends and is
    /// joined; a commit asked for afterwards fails at once ("the history thread has
    /// stopped"). For a purge, which removes the repository next.
    pub fn stop(&self) {
        self.stop_packing
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let (closed, _) = mpsc::channel();
        drop(std::mem::replace(&mut *self.tx.lock(), closed));
        for thread in [&self.thread, &self.packer] {
            if let Some(thread) = thread.lock().take() {
                let _ = thread.join();
            }
        }
    }

    pub fn status(&self) -> HistoryStatus {
        self.status.lock().clone()
    }

    /// Count revisions found at start whose bytes never reached history.
    pub fn note_lost_revisions(&self, count: u64) {
        let mut s = self.status.lock();
        s.lost_revisions += count;
        save_status(&self.git_dir.join(STATUS_FILE), &s);
    }

    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }
}

/// The history thread: applies queued commits in order. A commit that fails is retried,
/// in order, before the ones after it, with a growing pause (1 s doubling to 60 s), and
/// given up after [`MAX_ATTEMPTS`]; a change that can never be stored (a name git
/// refuses, an unreadable file) is left out of its commit instead of failing it, so one
/// bad file never blocks the history of the others.
fn writer(
    sync: gix::ThreadSafeRepository,
    rx: mpsc::Receiver<(CommitRequest, Reply)>,
    status: Arc<Mutex<HistoryStatus>>,
    status_file: PathBuf,
    packing: Packing,
) {
    let mut queue: std::collections::VecDeque<Queued> = Default::default();
    let push = |queue: &mut std::collections::VecDeque<Queued>, (request, reply)| {
        queue.push_back(Queued {
            request,
            reply: Some(reply),
            attempts: 0,
        })
    };
    loop {
        match queue.front().map(|q| q.attempts) {
            None => match rx.recv() {
                Ok(item) => push(&mut queue, item),
                Err(_) => return stopped_cleanly(&status_file),
            },
            Some(0) => {}
            Some(failing) => {
                let pause = std::time::Duration::from_secs(1 << (failing - 1).min(6))
                    .min(std::time::Duration::from_secs(60));
                match rx.recv_timeout(pause) {
                    Ok(item) => push(&mut queue, item),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        // Shutting down: one last try, then whatever still fails is
                        // found missing at the next start.
                        for q in queue.iter_mut() {
                            q.attempts = MAX_ATTEMPTS.saturating_sub(1).min(q.attempts);
                        }
                        drain(&sync, &mut queue, &status, &status_file, &packing);
                        if queue.is_empty() {
                            stopped_cleanly(&status_file);
                        }
                        return;
                    }
                }
            }
        }
        while let Ok(item) = rx.try_recv() {
            push(&mut queue, item);
        }
        drain(&sync, &mut queue, &status, &status_file, &packing);
    }
}

/// Every commit is written and synced: the next start need not check the objects.
#[allow(
    clippy::disallowed_methods,
    reason = "history's open marker, in the state directory"
)]
fn stopped_cleanly(status_file: &Path) {
    if let Some(dir) = status_file.parent() {
        let _ = std::fs::remove_file(dir.join(OPEN_MARKER));
    }
}

/// Apply queued commits from the front until one fails.
fn drain(
    sync: &gix::ThreadSafeRepository,
    queue: &mut std::collections::VecDeque<Queued>,
    status: &Mutex<HistoryStatus>,
    status_file: &Path,
    packing: &Packing,
) {
    while let Some(front) = queue.front_mut() {
        let mut wrote = compact::Loose::default();
        let result = {
            // The packing thread removes no loose file while a commit may rely on it.
            let _held = packing.lock.lock();
            apply(sync, front.request.clone(), &mut wrote)
        };
        let _ = packing.tx.send(wrote);
        let mut s = status.lock();
        let mut changed = false;
        match result {
            Ok(written) => {
                let q = queue.pop_front().expect("front exists");
                if q.reply.is_some() {
                    s.pending = s.pending.saturating_sub(1);
                }
                if let Some(id) = &written.id {
                    s.commits += 1;
                    s.head = Some(id.clone());
                }
                s.head_seq = s.head_seq.max(request_through(&q.request));
                if !written.left_out.is_empty() {
                    note_left_out(&mut s, &q.request, &written.left_out);
                    changed = true;
                }
                if let Some(reply) = q.reply {
                    let _ = reply.send(Ok(written));
                }
            }
            Err(e) => {
                front.attempts += 1;
                s.last_error = Some(e.message.clone());
                s.last_error_at = Some(crate::clock::timestamp(chrono::Utc::now()));
                changed = true;
                if front.attempts >= MAX_ATTEMPTS {
                    let q = queue.pop_front().expect("front exists");
                    tracing::error!(error = %e.message, attempts = q.attempts, "history commit given up; its revisions' bytes are not in history");
                    s.dropped_commits += 1;
                    s.head_seq = s.head_seq.max(request_through(&q.request));
                    let reason = format!("the commit failed {} times: {}", q.attempts, e.message);
                    let all: Vec<(String, String)> = q
                        .request
                        .changes
                        .iter()
                        .map(|c| (c.path.clone(), reason.clone()))
                        .collect();
                    note_left_out(&mut s, &q.request, &all);
                } else {
                    if front.attempts == 1 {
                        tracing::error!(error = %e.message, "history commit failed; it will be retried");
                    } else {
                        tracing::warn!(error = %e.message, attempts = front.attempts, "history retry failed");
                    }
                    // Whoever waits hears of the failure now; the retry goes on without them.
                    if let Some(reply) = front.reply.take() {
                        s.pending = s.pending.saturating_sub(1);
                        let _ = reply.send(Err(e));
                    }
                    // The commits behind it wait their turn, and say so.
                    for later in queue.iter_mut().skip(1) {
                        if let Some(reply) = later.reply.take() {
                            s.pending = s.pending.saturating_sub(1);
                            let _ = reply.send(Err(Error::internal(
                                "earlier history commits are still failing; this one is queued behind them",
                            )));
                        }
                    }
                    s.backlog = queue.len() as u64;
                    save_status(status_file, &s);
                    return;
                }
            }
        }
        s.backlog = queue.iter().filter(|q| q.attempts > 0).count() as u64;
        if changed {
            save_status(status_file, &s);
        }
    }
}

fn note_left_out(s: &mut HistoryStatus, request: &CommitRequest, left_out: &[(String, String)]) {
    let seq = request
        .trailers
        .iter()
        .find(|(k, _)| k == "Notevault-Seq")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let at = crate::clock::timestamp(chrono::Utc::now());
    for (path, reason) in left_out {
        // Once per file and reason: a file edited again is not logged again.
        let known = s
            .left_out
            .iter()
            .any(|l| l.path == *path && l.reason == *reason);
        if !known {
            tracing::warn!(path = %path.escape_debug(), reason = %reason, "a file was left out of history");
        }
        s.left_out_total += 1;
        s.left_out.retain(|l| l.path != *path);
        s.left_out.push(LeftOut {
            path: path.clone(),
            reason: reason.clone(),
            seq: seq.clone(),
            at: at.clone(),
        });
    }
    let extra = s.left_out.len().saturating_sub(KEEP_LEFT_OUT);
    s.left_out.drain(..extra);
}

/// Keep the lasting part of the status (written whole, then renamed into place).
#[allow(
    clippy::disallowed_methods,
    reason = "history's status file, in the state directory"
)]
fn save_status(file: &Path, status: &HistoryStatus) {
    let Ok(json) = serde_json::to_vec_pretty(status) else {
        return;
    };
    let temp = file.with_extension("json.tmp");
    let write = || -> std::io::Result<()> {
        std::fs::write(&temp, json)?;
        durable::sync_path(&temp)?;
        std::fs::rename(&temp, file)
    };
    if let Err(e) = write() {
        tracing::warn!(error = %e, "cannot keep the history status");
    }
}

/// The newest seq a commit request carries (`Notevault-Seq` or `Notevault-Through`).
fn request_through(request: &CommitRequest) -> i64 {
    let message: String = request
        .trailers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\n"))
        .collect();
    seq_through(&message)
}

pub(crate) fn history_error(
    what: &str,
    err: impl std::error::Error + Send + Sync + 'static,
) -> Error {
    Error::internal(format!("history {what}: {err}")).with_cause(err)
}

fn apply(
    sync: &gix::ThreadSafeRepository,
    request: CommitRequest,
    wrote: &mut compact::Loose,
) -> Result<Written> {
    let repo = sync.to_thread_local();
    let objects = durable::Objects::new(&repo);
    let result = write_commit(sync, &repo, &objects, request);
    *wrote = objects.written();
    result
}

fn write_commit(
    sync: &gix::ThreadSafeRepository,
    repo: &gix::Repository,
    objects: &durable::Objects,
    request: CommitRequest,
) -> Result<Written> {
    // Names git refuses never reach the tree editor: they are left out, not fatal.
    let mut left_out: Vec<(String, String)> = Vec::new();
    let storable: Vec<&Change> = request
        .changes
        .iter()
        .filter(|c| match unstorable(&c.path) {
            Some(why) => {
                left_out.push((c.path.clone(), why));
                false
            }
            None => true,
        })
        .collect();
    // Write the blobs first, in parallel: the bootstrap of a large vault is mostly this.
    // `Err` of the outer result fails the commit (to be retried); `Err` of the inner one
    // leaves that change out.
    let progress = crate::progress::Progress::start("history", "files", storable.len() as u64);
    let kept = storable
        .iter()
        .filter(|c| matches!(c.content, Some(Content::Bytes(_))))
        .count();
    let blobs: Vec<(String, durable::BlobOf)> = if kept >= pack::AT_LEAST {
        durable::packed_blobs(sync, objects, &storable, &progress)?
    } else {
        storable
            .par_iter()
            .inspect(|_| progress.inc(1))
            .map_init(
                || sync.to_thread_local(),
                |repo, change| {
                    Ok((
                        change.path.clone(),
                        durable::loose_blob(repo, objects, change)?,
                    ))
                },
            )
            .collect::<Result<_>>()?
    };
    progress.finish();

    let parent = repo.head_id().ok().map(|id| id.detach());
    let base_tree = repo
        .head_tree_id_or_empty()
        .map_err(|e| history_error("read head", e))?
        .detach();
    let start = if request.replace {
        gix::ObjectId::empty_tree(repo.object_hash())
    } else {
        base_tree
    };
    // The plumbing editor: gix's own (`tree::Editor::write`) checks that each entry of
    // each tree it writes is in the object database, a `stat` per loose object, so a
    // commit cost grew with the files of the folders it touched (4,000 loose notes in one
    // folder: 8 ms a commit, most of the history thread's time). Names were validated on
    // the way in (`unstorable`: the same validation, left out instead of failing the
    // commit) and the blobs were just written.
    let mut editor = repo
        .edit_tree(start)
        .map_err(|e| history_error("edit tree", e))?
        .detach();
    for (path, id) in blobs {
        let edited = match id {
            Ok(Some(id)) => editor
                .upsert(path.split('/'), EntryKind::Blob, id)
                .map(|_| ())
                .map_err(|e| format!("the tree cannot hold it: {e}")),
            Ok(None) => editor
                .remove(path.split('/'))
                .map(|_| ())
                .map_err(|e| format!("the tree cannot drop it: {e}")),
            Err(why) => Err(why),
        };
        if let Err(why) = edited {
            left_out.push((path, why));
        }
    }
    let mut buf = Vec::new();
    let tree = editor
        .write(|tree| {
            buf.clear();
            gix::objs::WriteTo::write_to(tree, &mut buf)
                .map_err(|e| history_error("encode tree", e))?;
            objects.write(repo, gix::objs::Kind::Tree, &buf)
        })
        .map_err(|e| history_error("write tree", e))?;
    if parent.is_some() && tree == base_tree && !request.allow_empty && left_out.is_empty() {
        return Ok(Written { id: None, left_out });
    }
    let mut message = request.subject.clone();
    message.push_str("\n\n");
    message.push_str(&format!("Notevault-Actor: {}\n", request.actor));
    for (key, value) in &request.trailers {
        message.push_str(&format!("{key}: {value}\n"));
    }
    // A trailer per file left out, so a read of this commit can tell "left out" from
    // "removed". The path is JSON-quoted: a name may hold a newline.
    for (path, why) in &left_out {
        let quoted = serde_json::to_string(path).unwrap_or_default();
        message.push_str(&format!(
            "{LEFT_OUT_TRAILER}{quoted} {}\n",
            why.replace(['\n', '\r'], " ")
        ));
    }
    let signature = gix::actor::Signature {
        name: "notevault".into(),
        email: "notevault@localhost".into(),
        time: match request.at {
            Some(at) => gix::date::Time::new(at.timestamp(), 0),
            None => gix::date::Time::now_utc(),
        },
    };
    let commit = gix::objs::Commit {
        tree,
        parents: parent.into_iter().collect(),
        author: signature.clone(),
        committer: signature,
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    buf.clear();
    gix::objs::WriteTo::write_to(&commit, &mut buf)
        .map_err(|e| history_error("encode commit", e))?;
    let id = objects.write(repo, gix::objs::Kind::Commit, &buf)?;
    // Every object the commit names is on disk before the ref names it.
    objects.sync()?;
    durable::set_head(repo, id)?;
    Ok(Written {
        id: Some(id.to_string()),
        left_out,
    })
}

pub(crate) const LEFT_OUT_TRAILER: &str = "Notevault-Left-Out: ";

#[cfg(test)]
mod tests;
