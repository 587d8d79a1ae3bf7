//! Making `history.git` as durable as the notes: every object a commit names is on disk
//! before the ref moves to it, and the ref itself is written like a note (temp file,
//! fsync, rename, fsync of the folder).
//!
//! gix writes a loose object as a temp file renamed into place, without an fsync, and it
//! skips an object whose file already exists; after a power cut such a file can be empty
//! or torn. So the history thread writes objects through [`Objects`]: an object whose
//! loose file exists is read back and checked before it is relied on (a torn one is
//! written again), and every loose file a commit names is collected and fsynced once per
//! commit, with its folders, before [`set_head`] moves the ref. Blobs in a pack were
//! synced when the pack was written (`pack.rs`).
#![allow(
    clippy::disallowed_methods,
    reason = "writes only history.git's objects and refs, in the state directory"
)]

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use gix::objs::Write as _;
use gix::ObjectId;
use parking_lot::Mutex;
use rayon::prelude::*;

use super::{history_error, pack, Change, Content};
use crate::error::{Error, Result};

/// The loose objects of one commit, written (or found intact) and still to be synced.
pub(crate) struct Objects {
    loose: gix::odb::loose::Store,
    files: Mutex<Vec<PathBuf>>,
    /// What was written loose (for the packing thread).
    written: Mutex<super::compact::Loose>,
}

impl Objects {
    pub(crate) fn new(repo: &gix::Repository) -> Self {
        Self {
            loose: gix::odb::loose::Store::at(repo.objects.store_ref().path(), repo.object_hash()),
            files: Mutex::default(),
            written: Mutex::default(),
        }
    }

    /// How many objects, and bytes before compression, were written loose.
    pub(crate) fn written(&self) -> super::compact::Loose {
        *self.written.lock()
    }

    /// Write an object (or find it intact) and remember its file for [`Self::sync`].
    pub(crate) fn write(
        &self,
        repo: &gix::Repository,
        kind: gix::objs::Kind,
        data: &[u8],
    ) -> Result<ObjectId> {
        let id = gix::objs::compute_hash(repo.object_hash(), kind, data)
            .map_err(|e| history_error("hash an object", e))?;
        let path = self.loose.object_path(&id);
        match std::fs::symlink_metadata(&path) {
            Ok(_) if intact(&self.loose, &id) => {
                self.files.lock().push(path);
                return Ok(id);
            }
            Ok(_) => {
                // Torn by a storage failure before it was synced: written anew.
                tracing::warn!(object = %id, "a torn history object is written again");
                std::fs::remove_file(&path)
                    .map_err(|e| history_error("remove a torn object", e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if repo.objects.exists_without_refresh(&id) {
                    // In a pack, synced when the pack was written.
                    return Ok(id);
                }
            }
            Err(e) => return Err(history_error("look for an object", e)),
        }
        if kind == gix::objs::Kind::Tree && data.len() >= STORED_FROM {
            write_stored(self.loose.path(), &path, kind, data)
                .map_err(|e| history_error("write an object", e))?;
        } else {
            let written = self
                .loose
                .write_buf(kind, data)
                .map_err(|e| history_error("write an object", e))?;
            debug_assert_eq!(written, id);
        }
        self.files.lock().push(path);
        let mut w = self.written.lock();
        w.objects += 1;
        w.bytes += data.len() as u64;
        Ok(id)
    }

    /// Whether the repository holds the object `id` intact, so it need not be written: a
    /// loose file read back and checked (and remembered for [`Self::sync`]; a torn one is
    /// removed), or an entry of a pack.
    pub(crate) fn has(&self, repo: &gix::Repository, id: &ObjectId) -> Result<bool> {
        let path = self.loose.object_path(id);
        match std::fs::symlink_metadata(&path) {
            Ok(_) if intact(&self.loose, id) => {
                self.files.lock().push(path);
                Ok(true)
            }
            Ok(_) => {
                tracing::warn!(object = %id, "a torn history object is written again");
                std::fs::remove_file(&path)
                    .map_err(|e| history_error("remove a torn object", e))?;
                Ok(false)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(repo.objects.exists_without_refresh(id))
            }
            Err(e) => Err(history_error("look for an object", e)),
        }
    }

    /// Sync every object file collected, then their folders and the objects folder (a
    /// fan-out folder may be new).
    pub(crate) fn sync(&self) -> Result<()> {
        let files = std::mem::take(&mut *self.files.lock());
        if files.is_empty() {
            return Ok(());
        }
        let mut dirs: BTreeSet<PathBuf> = files
            .iter()
            .filter_map(|f| f.parent().map(Path::to_path_buf))
            .collect();
        dirs.insert(self.loose.path().to_path_buf());
        // Side by side: the device flushes of fsyncs under way together are merged
        // (figures in benches/README.md).
        files
            .par_iter()
            .try_for_each(|file| sync_path(file))
            .map_err(|e| history_error("sync an object", e))?;
        dirs.par_iter()
            .try_for_each(|dir| sync_path(dir))
            .map_err(|e| history_error("sync the objects folder", e))?;
        Ok(())
    }
}

/// Trees from this size on (a crowded folder's, rewritten by every commit into it) are
/// written loose as stored zlib blocks, not compressed: compressing them cost
/// more than the rest of the commit, and the packing thread (`compact.rs`) soon stores
/// them as deltas.
const STORED_FROM: usize = 64 << 10;

/// Write a loose object uncompressed (a zlib stream of stored blocks, as git reads any)
/// under its `path`, through a temporary file in `objects` renamed into place; its id
/// was computed by the caller, so it is hashed once.
fn write_stored(
    objects: &Path,
    path: &Path,
    kind: gix::objs::Kind,
    data: &[u8],
) -> std::io::Result<()> {
    let mut z = flate2::write::ZlibEncoder::new(
        Vec::with_capacity(data.len() + data.len() / 1000 + 64),
        flate2::Compression::none(),
    );
    z.write_all(kind.as_bytes())?;
    z.write_all(format!(" {}\0", data.len()).as_bytes())?;
    z.write_all(data)?;
    let bytes = z.finish()?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let temp = objects.join(format!(
        "{}{}",
        pack::TEMP_OBJECT,
        uuid::Uuid::new_v4().simple()
    ));
    let written = std::fs::File::create_new(&temp)
        .and_then(|mut f| f.write_all(&bytes))
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// Whether the loose object `id` reads back whole, with the id its bytes hash to.
pub(crate) fn intact(loose: &gix::odb::loose::Store, id: &gix::oid) -> bool {
    let mut buf = Vec::new();
    match loose.try_find(id, &mut buf) {
        Ok(Some(data)) => {
            gix::objs::compute_hash(id.kind(), data.kind, data.data).is_ok_and(|h| h == id)
        }
        _ => false,
    }
}

/// fsync a file or a folder.
pub(crate) fn sync_path(path: &Path) -> std::io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

/// The file of the ref HEAD names (`refs/heads/main`).
fn head_ref_file(repo: &gix::Repository) -> Result<PathBuf> {
    let name = repo
        .head_name()
        .map_err(|e| history_error("read HEAD", e))?
        .ok_or_else(|| Error::internal("history read HEAD: HEAD is detached"))?;
    let name = gix::path::from_bstr(name.as_bstr()).map_err(|e| history_error("read HEAD", e))?;
    Ok(repo.git_dir().join(name))
}

/// Move HEAD's ref to `id` durably: the lock file is written and synced, renamed over
/// the ref, and the folder synced. The objects `id` names must be synced already.
pub(crate) fn set_head(repo: &gix::Repository, id: ObjectId) -> Result<()> {
    let file = head_ref_file(repo)?;
    let dir = file
        .parent()
        .ok_or_else(|| Error::internal("history write the ref: no folder"))?;
    std::fs::create_dir_all(dir).map_err(|e| history_error("create the refs folder", e))?;
    let mut lock = file.clone().into_os_string();
    lock.push(".lock");
    let lock = PathBuf::from(lock);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&lock)?;
        f.write_all(format!("{id}\n").as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&lock, &file)?;
        sync_path(dir)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&lock);
        history_error("update the ref", e)
    })
}

/// Remove HEAD's ref durably (no commit of history is intact: history starts again).
pub(crate) fn clear_head(repo: &gix::Repository) -> Result<()> {
    let file = head_ref_file(repo)?;
    match std::fs::remove_file(&file) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(history_error("remove the ref", e)),
    }
    if let Some(dir) = file.parent() {
        sync_path(dir).map_err(|e| history_error("sync the refs folder", e))?;
    }
    Ok(())
}

/// Sync a new repository's skeleton (HEAD, config, the folders), so the first commit's
/// ref does not outlive the HEAD that names it.
pub(crate) fn sync_skeleton(git_dir: &Path) -> Result<()> {
    let sync = |p: &Path| sync_path(p).map_err(|e| history_error("sync the new repository", e));
    for file in ["HEAD", "config"] {
        let path = git_dir.join(file);
        if path.exists() {
            sync(&path)?;
        }
    }
    for dir in ["refs/heads", "refs", "objects", ""] {
        let path = git_dir.join(dir);
        if path.is_dir() {
            sync(&path)?;
        }
    }
    if let Some(parent) = git_dir.parent() {
        sync(parent)?;
    }
    Ok(())
}

/// Create the open marker durably (it must outlive a power cut to be found).
pub(crate) fn create_marker(path: &Path) -> Result<()> {
    let create = || -> std::io::Result<()> {
        std::fs::File::create(path)?.sync_all()?;
        sync_path(path.parent().unwrap_or(Path::new(".")))
    };
    create().map_err(|e| history_error("create the open marker", e))
}

/// A change's blob: its id, `None` for a removal, `Err` when it is left out (and why).
pub(crate) type BlobOf = std::result::Result<Option<gix::ObjectId>, String>;

/// A change's blob written as a loose object: the bytes given, or the file read here
/// (one file at a time per thread).
pub(crate) fn loose_blob(
    repo: &gix::Repository,
    objects: &Objects,
    change: &Change,
) -> Result<BlobOf> {
    let write = |bytes: &[u8]| -> Result<BlobOf> {
        let id = objects.write(repo, gix::objs::Kind::Blob, bytes)?;
        Ok(Ok(Some(id)))
    };
    match &change.content {
        None => Ok(Ok(None)),
        Some(Content::Bytes(bytes)) => write(&bytes.bytes()),
        Some(Content::File(path)) => match std::fs::read(path) {
            Ok(bytes) => write(&bytes),
            // Gone since it was seen: the next reconcile records the removal.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Ok(None)),
            Err(e) => Ok(Err(format!("unreadable: {e}"))),
        },
    }
}

/// The blobs of a commit of many files: the bytes given (the notes the scan read) as one
/// pack (`pack.rs`); a file to read (an attachment, a note too large to keep in memory)
/// as a loose object, one at a time per thread, so a vault of large files is never held
/// in memory at once.
pub(crate) fn packed_blobs(
    sync: &gix::ThreadSafeRepository,
    objects: &Objects,
    changes: &[&Change],
    progress: &crate::progress::Progress,
) -> Result<Vec<(String, BlobOf)>> {
    let data: Vec<&crate::vault::packed::Packed> = changes
        .iter()
        .filter_map(|c| match &c.content {
            Some(Content::Bytes(bytes)) => Some(bytes),
            _ => None,
        })
        .collect();
    // Blobs history holds already are not packed again (a vault recorded as found after
    // history fell behind is mostly those); a first commit has none to look for.
    let repo = sync.to_thread_local();
    let bootstrap = repo.head_id().is_err();
    let held = |id: &gix::ObjectId| -> Result<bool> {
        if bootstrap {
            return Ok(false);
        }
        objects.has(&repo, id)
    };
    let mut packed = pack::write_blobs(sync.git_dir(), &data, &held)?.into_iter();
    progress.inc(data.len() as u64);
    let rest: Vec<BlobOf> = changes
        .par_iter()
        .filter(|c| !matches!(c.content, Some(Content::Bytes(_))))
        .inspect(|_| progress.inc(1))
        .map_init(
            || sync.to_thread_local(),
            |repo, c| loose_blob(repo, objects, c),
        )
        .collect::<Result<_>>()?;
    let mut rest = rest.into_iter();
    Ok(changes
        .iter()
        .map(|c| {
            let id = match c.content {
                Some(Content::Bytes(_)) => Ok(packed.next()),
                _ => rest.next().unwrap_or(Ok(None)),
            };
            (c.path.clone(), id)
        })
        .collect())
}
