//! Packing history in the background. A commit writes its new objects loose, one zlib
//! file each, and the whole tree of every folder it touches again: left so, each note
//! created in a folder of 20,000 grows `history.git` by about half a megabyte. This
//! thread packs the loose objects of the newest commits into one pack, each tree and
//! note a delta against an earlier version of the same path in that pack, then removes
//! the loose files.
//!
//! The packs made here are listed in [`STATE_FILE`], oldest first, with how many commits
//! each covers. A new pack takes the newest of them in while each covers no more commits
//! than it has so far (a binary counter: few packs, each object rewritten a logarithmic
//! number of times). The `j`-th version of a path in a pack is a delta against its
//! version `j & (j - 1)`, so a read resolves at most log2(versions) deltas.
//! **Invariant:** an object leaves its loose file or a pack only once a synced pack in
//! place holds it; a pack is removed only when the new one holds every object it held.
#![allow(
    clippy::disallowed_methods,
    reason = "packs history.git's own objects, in the state directory"
)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use gix::ObjectId;
use parking_lot::Mutex;

use super::{delta, history_error, pack};
use crate::error::{Error, Result};

/// The packs made here, oldest first (in `history.git`).
pub(crate) const STATE_FILE: &str = "notevault-packs.json";
/// Loose objects written since the last packing that make the next one due.
const DUE_OBJECTS: u64 = 1024;
/// Loose bytes (before compression) that make it due sooner: the trees of a crowded
/// folder.
const DUE_BYTES: u64 = 64 << 20;
/// How long commits must pause before a packing that is due starts.
const PAUSE: std::time::Duration = std::time::Duration::from_millis(250);
/// Loose objects and bytes written since the last packing that make it start without
/// a pause (writes that never pause must not grow loose history without bound).
const FAR_OBJECTS: u64 = 64 * DUE_OBJECTS;
const FAR_BYTES: u64 = 16 * DUE_BYTES;
/// Objects larger than this stay loose (an attachment is read whole to be packed).
const LARGEST: u64 = 8 << 20;
/// Versions of a note kept in memory as delta bases are at most this large (a tree's
/// are all kept: the pass holds each folder's newest tree anyway).
const LARGEST_BASE: usize = 1 << 20;
/// Commits packed in one pass at most.
const MOST_COMMITS: usize = 4096;
/// Loose files removed per hold of the objects lock (the history thread waits for it).
const REMOVE_PER_HOLD: usize = 128;

/// What a commit wrote loose, sent by the history thread after each commit.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Loose {
    pub objects: u64,
    pub bytes: u64,
}

/// The packing thread: it packs at start, then whenever enough was written loose, until
/// the history thread drops its sender (or `stop` is set, which also ends a packing
/// under way). `lock` is held by the history thread for each commit, and here while
/// files are removed.
pub(crate) fn spawn(
    sync: gix::ThreadSafeRepository,
    lock: Arc<Mutex<()>>,
    stop: Arc<AtomicBool>,
) -> Result<(mpsc::Sender<Loose>, std::thread::JoinHandle<()>)> {
    let (tx, rx) = mpsc::channel::<Loose>();
    let thread = std::thread::Builder::new()
        .name("history-pack".into())
        .spawn(move || {
            // Background work: requests come first on a busy machine.
            // SAFETY: setpriority takes no pointers; on Linux, `0` is the calling thread.
            #[cfg(target_os = "linux")]
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, 0, 19);
            }
            let mut due = Loose {
                objects: DUE_OBJECTS,
                bytes: 0,
            };
            loop {
                if due.objects >= DUE_OBJECTS || due.bytes >= DUE_BYTES {
                    // Packing competes with commits for the disk: it waits for a pause in
                    // them, unless far behind.
                    while due.objects < FAR_OBJECTS && due.bytes < FAR_BYTES {
                        match rx.recv_timeout(PAUSE) {
                            Ok(w) => {
                                due.objects += w.objects;
                                due.bytes += w.bytes;
                            }
                            Err(mpsc::RecvTimeoutError::Timeout) => break,
                            Err(mpsc::RecvTimeoutError::Disconnected) => return,
                        }
                    }
                    due = Loose::default();
                    match pack_newest(&sync, &lock, &stop) {
                        Ok(Some(done)) => tracing::debug!(
                            commits = done.commits,
                            objects = done.objects,
                            packs_merged = done.merged,
                            loose_removed = done.loose_removed,
                            "history packed"
                        ),
                        Ok(None) => {}
                        Err(e) => tracing::warn!(
                            error = %e.message,
                            "packing history failed; its loose objects stay and are packed later"
                        ),
                    }
                }
                match rx.recv() {
                    Ok(w) => {
                        due.objects += w.objects;
                        due.bytes += w.bytes;
                    }
                    Err(_) => return,
                }
                if stop.load(Ordering::Relaxed) {
                    return;
                }
            }
        })
        .map_err(|e| {
            Error::internal(format!("cannot start the history packing thread: {e}")).with_cause(e)
        })?;
    Ok((tx, thread))
}

/// A pack made here: its name (`pack-<sha>`) and how many commits it covers.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Packed {
    name: String,
    commits: u64,
}

/// The state file: the packs made here, oldest first, and those a newer pack replaced,
/// still to be removed (a stop between the two steps leaves them to the next packing).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct State {
    packs: Vec<Packed>,
    retired: Vec<String>,
}

/// What one packing did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Done {
    pub commits: u64,
    pub objects: u64,
    pub merged: u64,
    pub loose_removed: u64,
}

/// Pack the loose objects of the newest commits (and the newest packs made here, as
/// the binary counter says) into one pack; `None` when there was nothing to pack.
pub(crate) fn pack_newest(
    sync: &gix::ThreadSafeRepository,
    lock: &Mutex<()>,
    stop: &AtomicBool,
) -> Result<Option<Done>> {
    let git_dir = sync.git_dir().to_path_buf();
    let pack_dir = git_dir.join("objects").join("pack");
    let state: State = std::fs::read(git_dir.join(STATE_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    if !state.retired.is_empty() {
        remove_packs(&pack_dir, &state.retired, lock);
        save_state(&git_dir, &state.packs, &[])?;
    }
    let mut packs = state.packs;
    packs.retain(|p| pack_dir.join(format!("{}.idx", p.name)).exists());
    let indices = packs
        .iter()
        .map(|p| {
            gix::odb::pack::index::File::at(
                pack_dir.join(format!("{}.idx", p.name)),
                gix::hash::Kind::Sha1,
            )
            .map_err(|e| history_error("read a pack index", e))
        })
        .collect::<Result<Vec<_>>>()?;
    let repo = sync.to_thread_local();
    let loose = gix::odb::loose::Store::at(git_dir.join("objects"), gix::hash::Kind::Sha1);

    // The newest commits whose objects are loose or in packs taken in, newest first.
    let Ok(head) = repo.head_id() else {
        return Ok(None);
    };
    let mut range: Vec<ObjectId> = Vec::new();
    let mut merged = 0;
    let mut at = Some(head.detach());
    while let Some(id) = at {
        let taken = |k: usize| indices[k].lookup(id).is_some();
        let in_taken = (packs.len() - merged..packs.len()).any(taken);
        if !loose.contains(&id) && !in_taken {
            match packs.len().checked_sub(merged + 1) {
                Some(k) if taken(k) && packs[k].commits <= range.len() as u64 => merged += 1,
                _ => break,
            }
        }
        range.push(id);
        at = parent(&repo, id)?;
    }
    if range.is_empty() || stop.load(Ordering::Relaxed) {
        return Ok(None);
    }
    range.reverse();
    // A long history never packed (a repository from before packing) goes a part at a
    // time, oldest first, so a pass holds a bounded part of it in memory.
    range.truncate(MOST_COMMITS);
    let taken = &indices[packs.len() - merged..];

    let mut pass = Pass {
        repo: &repo,
        loose: &loose,
        taken,
        entries: Vec::new(),
        offset: 12,
        emitted: HashMap::new(),
        loose_files: Vec::new(),
        chains: HashMap::new(),
        current: HashMap::new(),
        z: pack::compressor(),
    };
    let mut tree = match parent(&repo, range[0])? {
        Some(p) => Some(commit_tree(&repo, p)?.0),
        None => None,
    };
    for id in &range {
        if stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let (next, data) = commit_tree(&repo, *id)?;
        pass.emit(b"", gix::objs::Kind::Commit, *id, Arc::new(data))?;
        pass.diff(Vec::new(), tree, next)?;
        tree = Some(next);
    }
    let Pass {
        entries,
        emitted,
        loose_files,
        ..
    } = pass;
    if entries.is_empty() {
        return Ok(None);
    }
    let name = pack::write_entries(&git_dir, &entries)?;

    // The taken packs: removed if the new one holds all they held; else kept (no
    // longer listed, so never taken again).
    let removable: Vec<bool> = taken
        .iter()
        .map(|index| index.iter().all(|e| emitted.contains_key(&e.oid)))
        .collect();
    let kept = packs.len() - merged;
    let gone: Vec<Packed> = packs.drain(kept..).collect();
    packs.push(Packed {
        name: name.clone(),
        commits: range.len() as u64,
    });
    let mut retired = Vec::new();
    for (p, ok) in gone.iter().zip(removable) {
        if ok && p.name != name {
            retired.push(p.name.clone());
        } else if !ok {
            tracing::warn!(pack = %p.name, "a history pack holds objects no commit names now; it is kept");
        }
    }
    save_state(&git_dir, &packs, &retired)?;

    let mut done = Done {
        commits: range.len() as u64,
        objects: entries.len() as u64,
        merged: merged as u64,
        loose_removed: 0,
    };
    for chunk in loose_files.chunks(REMOVE_PER_HOLD) {
        let _held = lock.lock();
        for file in chunk {
            if std::fs::remove_file(file).is_ok() {
                done.loose_removed += 1;
            }
        }
    }
    if !retired.is_empty() {
        remove_packs(&pack_dir, &retired, lock);
        save_state(&git_dir, &packs, &[])?;
    }
    Ok(Some(done))
}

/// Remove packs a newer one replaced (under the lock of commits: one may be relying on
/// an object it found there).
fn remove_packs(pack_dir: &Path, names: &[String], lock: &Mutex<()>) {
    let _held = lock.lock();
    for name in names {
        // The index first: a reader never finds an index without its pack.
        let _ = std::fs::remove_file(pack_dir.join(format!("{name}.idx")));
        let _ = std::fs::remove_file(pack_dir.join(format!("{name}.pack")));
    }
}

/// A commit's tree and bytes.
fn commit_tree(repo: &gix::Repository, id: ObjectId) -> Result<(ObjectId, Vec<u8>)> {
    let object = repo
        .find_object(id)
        .map_err(|e| history_error("read a commit to pack", e))?;
    let tree = gix::objs::CommitRef::from_bytes(&object.data, gix::hash::Kind::Sha1)
        .map_err(|e| history_error("decode a commit to pack", e))?
        .tree();
    Ok((tree, object.detach().data))
}

fn parent(repo: &gix::Repository, id: ObjectId) -> Result<Option<ObjectId>> {
    let commit = repo
        .find_commit(id)
        .map_err(|e| history_error("read a commit to pack", e))?;
    let first = commit.parent_ids().next().map(|p| p.detach());
    Ok(first)
}

/// Write the state file (a temporary file renamed over it).
fn save_state(git_dir: &Path, packs: &[Packed], retired: &[String]) -> Result<()> {
    let file = git_dir.join(STATE_FILE);
    let temp = git_dir.join(format!("{STATE_FILE}.tmp"));
    let state = State {
        packs: packs.to_vec(),
        retired: retired.to_vec(),
    };
    let bytes = serde_json::to_vec(&state).map_err(|e| history_error("encode the pack list", e))?;
    std::fs::write(&temp, bytes)
        .and_then(|()| std::fs::File::open(&temp)?.sync_all())
        .and_then(|()| std::fs::rename(&temp, &file))
        .and_then(|()| std::fs::File::open(git_dir)?.sync_all())
        .map_err(|e| history_error("write the pack list", e))
}

/// Where an entry is in its tree's bytes.
type Span = (usize, usize);

/// One version of a path in the pack being made: which, where, and its bytes (a base
/// for later versions; `None` when too large to keep).
struct Version {
    j: u64,
    offset: u64,
    bytes: Option<Arc<Vec<u8>>>,
}

#[derive(Default)]
struct Chain {
    count: u64,
    versions: Vec<Version>,
}

/// The versions `j`'s later versions may be deltas against: `j` with its lowest set bits
/// cleared one by one.
fn bases_of(j: u64) -> impl Iterator<Item = u64> {
    std::iter::successors(Some(j), |&x| (x != 0).then(|| x & (x - 1)))
}

struct Pass<'a> {
    repo: &'a gix::Repository,
    loose: &'a gix::odb::loose::Store,
    taken: &'a [gix::odb::pack::index::File],
    entries: Vec<(ObjectId, Vec<u8>)>,
    offset: u64,
    emitted: HashMap<ObjectId, u64>,
    loose_files: Vec<PathBuf>,
    chains: HashMap<Vec<u8>, Chain>,
    /// The tree last seen at each folder's path, and its bytes.
    current: HashMap<Vec<u8>, (ObjectId, Arc<Vec<u8>>)>,
    z: flate2::Compress,
}

impl Pass<'_> {
    /// An object's bytes, which must be of the `kind` its tree says.
    fn read(&self, id: ObjectId, kind: gix::objs::Kind) -> Result<Arc<Vec<u8>>> {
        let object = self
            .repo
            .find_object(id)
            .map_err(|e| history_error("read an object to pack", e))?;
        if object.kind != kind {
            return Err(Error::internal(format!(
                "history an object to pack is a {}, its tree says {kind}: {id}",
                object.kind
            )));
        }
        Ok(Arc::new(object.detach().data))
    }

    /// The changes from tree `old` to tree `new` at `path` (`a/b/`, the root `""`): each
    /// new tree and blob packed if it is to be.
    fn diff(&mut self, path: Vec<u8>, old: Option<ObjectId>, new: ObjectId) -> Result<()> {
        if old == Some(new) {
            return Ok(());
        }
        let new_bytes = match self.current.get(&path) {
            Some((id, bytes)) if *id == new => bytes.clone(),
            _ => self.read(new, gix::objs::Kind::Tree)?,
        };
        let old_bytes = match (old, self.current.get(&path)) {
            (None, _) => None,
            (Some(o), Some((id, bytes))) if *id == o => Some(bytes.clone()),
            (Some(o), _) => Some(self.read(o, gix::objs::Kind::Tree)?),
        };
        self.emit(&path, gix::objs::Kind::Tree, new, new_bytes.clone())?;
        let old_tree: &[u8] = old_bytes.as_ref().map_or(&[], |b| b.as_slice());
        let undecodable = || Error::internal("history a tree to pack does not decode");
        let before = delta::records(old_tree).ok_or_else(undecodable)?;
        let after = delta::records(&new_bytes).ok_or_else(undecodable)?;
        // A merge walk: an entry changed or added, and the one it replaces.
        let mut changed: Vec<(Span, Option<Span>)> = Vec::new();
        let (mut i, mut j) = (0, 0);
        while let Some(&n) = after.get(j) {
            let o = before.get(i).copied();
            match o.map(|o| (old_tree[o.0..o.1] == new_bytes[n.0..n.1], o)) {
                Some((true, _)) => (i, j) = (i + 1, j + 1),
                Some((false, o)) => match delta::order(old_tree, o, &new_bytes, n) {
                    std::cmp::Ordering::Less => i += 1,
                    std::cmp::Ordering::Equal => {
                        changed.push((n, Some(o)));
                        (i, j) = (i + 1, j + 1);
                    }
                    std::cmp::Ordering::Greater => {
                        changed.push((n, None));
                        j += 1;
                    }
                },
                None => {
                    changed.push((n, None));
                    j += 1;
                }
            }
        }
        let mut folders = Vec::new();
        for (n, o) in changed {
            let (mode, name, id) = delta::record(&new_bytes, n);
            let id = ObjectId::from_bytes_or_panic(id);
            let mut at = path.clone();
            at.extend_from_slice(name);
            match mode {
                b"40000" => {
                    at.push(b'/');
                    let was = o
                        .map(|o| delta::record(old_tree, o))
                        .filter(|(mode, _, _)| *mode == b"40000")
                        .map(|(_, _, id)| ObjectId::from_bytes_or_panic(id));
                    folders.push((at, was, id));
                }
                b"160000" => {}
                _ => {
                    if let Some(bytes) = self.blob(id)? {
                        self.emit(&at, gix::objs::Kind::Blob, id, bytes)?;
                    }
                }
            }
        }
        self.current.insert(path, (new, new_bytes));
        for (at, old, id) in folders {
            self.diff(at, old, id)?;
        }
        Ok(())
    }

    /// A blob's bytes, when it is to be packed (and not too large to read whole).
    fn blob(&self, id: ObjectId) -> Result<Option<Arc<Vec<u8>>>> {
        if self.emitted.contains_key(&id) || !self.member(&id) {
            return Ok(None);
        }
        let header = self
            .repo
            .find_header(id)
            .map_err(|e| history_error("read an object to pack", e))?;
        if header.size() > LARGEST {
            return Ok(None);
        }
        self.read(id, gix::objs::Kind::Blob).map(Some)
    }

    /// Whether `id` is to be packed: loose, or in a pack taken in.
    fn member(&self, id: &ObjectId) -> bool {
        self.loose.contains(id) || self.taken.iter().any(|i| i.lookup(id).is_some())
    }

    /// Add `id` (at `path`) to the pack, as a delta when an earlier version of the path
    /// makes it small.
    fn emit(
        &mut self,
        path: &[u8],
        kind: gix::objs::Kind,
        id: ObjectId,
        bytes: Arc<Vec<u8>>,
    ) -> Result<()> {
        if self.emitted.contains_key(&id) || !self.member(&id) {
            return Ok(());
        }
        let number = match kind {
            gix::objs::Kind::Commit => pack::OBJ_COMMIT,
            gix::objs::Kind::Tree => pack::OBJ_TREE,
            gix::objs::Kind::Blob => pack::OBJ_BLOB,
            gix::objs::Kind::Tag => return Ok(()),
        };
        let chain = self.chains.entry(path.to_vec()).or_default();
        let j = chain.count;
        let base = (j > 0 && kind != gix::objs::Kind::Commit)
            .then(|| chain.versions.iter().find(|v| v.j == j & (j - 1)))
            .flatten()
            .and_then(|v| Some((v.offset, v.bytes.clone()?)));
        let delta = base.and_then(|(offset, base)| {
            let d = match kind {
                gix::objs::Kind::Tree => delta::tree(&base, &bytes),
                _ => delta::ends(&base, &bytes),
            };
            d.map(|d| (offset, d))
        });
        let entry = match &delta {
            Some((base, d)) => pack::entry(
                &mut self.z,
                pack::OBJ_OFS_DELTA,
                d,
                Some(self.offset - base),
            ),
            None => pack::entry(&mut self.z, number, &bytes, None),
        }
        .map_err(|e| history_error("compress an object to pack", e))?;
        if kind != gix::objs::Kind::Commit {
            let keep: HashSet<u64> = bases_of(j).collect();
            chain.versions.retain(|v| keep.contains(&v.j));
            chain.versions.push(Version {
                j,
                offset: self.offset,
                bytes: (kind == gix::objs::Kind::Tree || bytes.len() <= LARGEST_BASE)
                    .then_some(bytes),
            });
            chain.count += 1;
        }
        let file = self.loose.object_path(&id);
        if file.exists() {
            self.loose_files.push(file);
        }
        self.emitted.insert(id, self.offset);
        self.offset += entry.len() as u64;
        self.entries.push((id, entry));
        Ok(())
    }
}
