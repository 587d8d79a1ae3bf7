//! The startup scan: find every note file of the vault and observe it (read, hash, facts),
//! in parallel. Reading never writes: no file, no mtime, no atime beyond the OS default.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use rayon::prelude::*;

use crate::vault::catalog::Excluded;
use crate::vault::markdown::{self, NoteFacts};
use crate::vault::path::VaultPaths;
use crate::vault::scan_cache::ScanCache;
use crate::vault::walk::{walk, Walk, Want};

/// A note file as read from disk.
#[derive(Debug, Clone)]
pub struct Observed {
    /// Vault-relative, `/`-separated, with `.md`.
    pub rel: String,
    pub size: u64,
    pub mtime: SystemTime,
    pub created: SystemTime,
    pub content_hash: String,
    pub facts: NoteFacts,
    /// The bytes, kept for search and grep; `None` above [`MAX_CONTENT_BYTES`].
    pub content: Option<Arc<[u8]>>,
    /// What a stat said of the file both before and after its bytes were read (`None`
    /// when the two differ, or when the bytes did not come from reading the file).
    pub stamp: Option<FileStamp>,
}

/// What a stat says of a file: size, modification and change times, device and inode.
/// A file whose stamp is the one taken when its bytes were read is presumed to hold
/// those bytes (a read checks this instead of hashing); an edit that keeps all of them
/// (same size, within one tick of the file system's clock) is the watcher's to catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileStamp {
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub inode: (u64, u64),
}

impl FileStamp {
    pub fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            size: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            inode: (meta.dev(), meta.ino()),
        }
    }

    /// The stamp of the file at `abs` now (following a symlink, as a read does).
    pub fn at(abs: &Path) -> std::io::Result<Self> {
        std::fs::metadata(abs).map(|m| Self::of(&m))
    }
}

/// Notes larger than this are listed and readable but neither indexed nor grepped
/// (`coverage` says so).
pub const MAX_CONTENT_BYTES: u64 = 10 * 1024 * 1024;

/// What a note's bytes become in the catalog: kept unless too large.
pub fn keep_content(bytes: Arc<[u8]>) -> Option<Arc<[u8]>> {
    (bytes.len() as u64 <= MAX_CONTENT_BYTES).then_some(bytes)
}

/// What a scan found.
#[derive(Debug, Default)]
pub struct ScanResult {
    pub observed: Vec<Observed>,
    pub excluded: Vec<Excluded>,
    /// Our own temp files left by an interrupted write (absolute paths).
    pub leftovers: Vec<std::path::PathBuf>,
    /// The files whose hash and facts came from the scan cache, unread: their
    /// observations carry no bytes (`content: None`) until the verify reads them.
    pub recalled: HashSet<String>,
}

pub use super::content_hash;

/// Walk the vault and list the note files (vault-relative, sorted), what was left out,
/// and our own leftover temp files.
pub fn list_note_files(paths: &VaultPaths) -> Walk {
    walk(
        paths,
        Want {
            notes: true,
            ..Want::default()
        },
    )
}

/// Read one note file.
pub fn observe(root: &Path, rel: &str) -> std::io::Result<Observed> {
    let mut file = std::fs::File::open(root.join(rel))?;
    let meta = file.metadata()?;
    let bytes = read_whole(&mut file, meta.len())?;
    let before = FileStamp::of(&meta);
    let stamp = file
        .metadata()
        .ok()
        .map(|m| FileStamp::of(&m))
        .filter(|after| *after == before && after.size == bytes.len() as u64);
    let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    Ok(Observed {
        rel: rel.to_string(),
        size: bytes.len() as u64,
        mtime,
        created: meta.created().unwrap_or(mtime).min(mtime),
        content_hash: content_hash(&bytes),
        facts: markdown::facts(&bytes),
        content: keep_content(bytes),
        stamp,
    })
}

/// The bytes of the file at `path`, as [`read_whole`] reads them.
pub fn read_file(path: &Path) -> std::io::Result<Arc<[u8]>> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    read_whole(&mut file, len)
}

/// The bytes of `file`, read into the one allocation the catalog keeps (an `Arc<[u8]>`:
/// its counts and the bytes), sized by the `len` its stat gave; a file that turns out
/// shorter or longer is read again from its start.
fn read_whole(file: &mut std::fs::File, len: u64) -> std::io::Result<Arc<[u8]>> {
    use std::io::{Read, Seek};
    if let Ok(len) = usize::try_from(len) {
        // One allocation: `repeat_n` knows its length, so `collect` sizes the `Arc` once.
        let mut bytes: Arc<[u8]> = std::iter::repeat_n(0u8, len).collect();
        let buf = Arc::get_mut(&mut bytes).expect("a new Arc is not shared");
        let whole = match file.read_exact(buf) {
            // At the end when nothing follows (`read_to_end` retries an interrupted read).
            Ok(()) => file.by_ref().take(1).read_to_end(&mut Vec::new())? == 0,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => false,
            Err(e) => return Err(e),
        };
        if whole {
            return Ok(bytes);
        }
        file.rewind()?;
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes.into())
}

/// Scan the whole vault, with a progress bar on stderr when it is a terminal and the
/// vault is large enough for the scan to take a moment.
pub fn scan(paths: &VaultPaths) -> ScanResult {
    scan_with(paths, list_note_files(paths), None)
}

/// The bytes a caller already holds for a file, by `(rel, content hash)`: the catalog's
/// kept bytes of that version.
pub type Known<'a> = &'a (dyn Fn(&str, &str) -> Option<Arc<[u8]>> + Sync);

/// [`scan`] that keeps the caller's copy of bytes it already holds (`known`) instead of
/// the one it read: a rescan of a vault whose bytes the catalog keeps then holds one copy
/// of them, not two (each read copy is dropped as soon as its hash is known).
pub fn scan_sharing(paths: &VaultPaths, known: Known<'_>) -> ScanResult {
    scan_observing(paths, list_note_files(paths), None, Some(known))
}

/// [`scan`] of the files `listed` by [`list_note_files`], taking from `cache` the hash
/// and facts of every file whose stamp is the cached one (a stat instead of a read;
/// listed in [`ScanResult::recalled`]); the other files are read.
pub fn scan_with(paths: &VaultPaths, listed: Walk, cache: Option<ScanCache>) -> ScanResult {
    scan_observing(paths, listed, cache, None)
}

fn scan_observing(
    paths: &VaultPaths,
    listed: Walk,
    cache: Option<ScanCache>,
    known: Option<Known<'_>>,
) -> ScanResult {
    let Walk {
        notes: files,
        note_stats,
        mut excluded,
        leftovers,
        ..
    } = listed;
    let mut observed = Vec::with_capacity(files.len());
    let mut recalled = HashSet::new();
    let to_read = match cache {
        None => files,
        Some(mut cache) => {
            // Taken by the walk when it was asked to (relative to each folder), else now.
            let stats: Vec<Option<std::fs::Metadata>> = note_stats.unwrap_or_else(|| {
                files
                    .par_iter()
                    .map(|rel| std::fs::metadata(paths.root.join(rel)).ok())
                    .collect()
            });
            let mut to_read = Vec::new();
            for (rel, meta) in files.into_iter().zip(stats) {
                let Some(meta) = meta.filter(|m| m.is_file()) else {
                    to_read.push(rel);
                    continue;
                };
                let stamp = FileStamp::of(&meta);
                match cache.take(&rel, &stamp) {
                    Some((content_hash, facts)) => {
                        let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                        recalled.insert(rel.clone());
                        observed.push(Observed {
                            rel,
                            size: stamp.size,
                            mtime,
                            created: meta.created().unwrap_or(mtime).min(mtime),
                            content_hash,
                            facts,
                            content: None,
                            stamp: Some(stamp),
                        });
                    }
                    None => to_read.push(rel),
                }
            }
            to_read
        }
    };
    let progress = crate::progress::Progress::start("scanning", "notes", to_read.len() as u64);
    let results: Vec<Result<Observed, Excluded>> = to_read
        .par_iter()
        .map(|rel| {
            let out = observe(&paths.root, rel)
                .map(|mut o| {
                    if o.content.is_some() {
                        if let Some(kept) = known.and_then(|k| k(&o.rel, &o.content_hash)) {
                            o.content = Some(kept);
                        }
                    }
                    o
                })
                .map_err(|err| Excluded {
                    path: rel.clone(),
                    reason: format!("unreadable: {err}"),
                });
            progress.inc(1);
            out
        })
        .collect();
    progress.finish();
    for r in results {
        match r {
            Ok(o) => observed.push(o),
            Err(e) => excluded.push(e),
        }
    }
    ScanResult {
        observed,
        excluded,
        leftovers,
        recalled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file whose length is not the one its stat gave (it changed in between) is read
    /// whole all the same.
    #[test]
    fn a_file_longer_or_shorter_than_its_stat_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n.md");
        #[allow(clippy::disallowed_methods, reason = "a test file")]
        std::fs::write(&path, b"# Note\nsome words\n").unwrap();
        for stated in [0, 5, 18, 19, 4096] {
            let mut file = std::fs::File::open(&path).unwrap();
            let bytes = read_whole(&mut file, stated).unwrap();
            assert_eq!(&bytes[..], b"# Note\nsome words\n", "stat said {stated}");
        }
    }
}
