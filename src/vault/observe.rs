//! One file observed: its bytes read whole (or streamed and hashed), its stamp, its
//! facts; or why it was left out. What the scan, the scan cache, the catalog and the
//! attachment facts share, so none of them imports another for it.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::vault::content_hash;
use crate::vault::markdown::{self, NoteFacts};
use crate::vault::packed::{Packed, Scratch};

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
    /// The bytes, kept (packed) for reads, search and grep; `None` above
    /// [`MAX_CONTENT_BYTES`].
    pub content: Option<Packed>,
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

/// Whether a note of `len` bytes has them kept (packed) in the catalog.
fn kept(len: usize) -> bool {
    len as u64 <= MAX_CONTENT_BYTES
}

/// The packed bytes a caller already holds for a file, by `(rel, content hash)`: the
/// catalog's kept bytes of that version.
pub type Known<'a> = &'a (dyn Fn(&str, &str) -> Option<Packed> + Sync);

/// A file the scan could not take in, and why (reported in `coverage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excluded {
    pub path: String,
    pub reason: String,
}

impl Observed {
    /// A note's bytes held already (a write's, a store's), observed without a file:
    /// kept whole when `keep_all` (a store with no file to read a large note back from),
    /// else up to [`MAX_CONTENT_BYTES`].
    pub fn of_bytes(
        rel: String,
        bytes: Arc<[u8]>,
        mtime: SystemTime,
        created: SystemTime,
        keep_all: bool,
    ) -> Self {
        Self {
            rel,
            size: bytes.len() as u64,
            mtime,
            created,
            content_hash: content_hash(&bytes),
            facts: markdown::facts(&bytes),
            content: (keep_all || kept(bytes.len())).then(|| Packed::of(bytes)),
            stamp: None,
        }
    }
}

/// Read one note file.
pub fn observe(root: &Path, rel: &str) -> std::io::Result<Observed> {
    observe_sharing(root, rel, None, &mut Reading::default())
}

/// What a worker reading many files in a row reuses: the buffer a file is read into
/// (its bytes are kept packed, not as read) and the packer's [`Scratch`].
#[derive(Default)]
pub struct Reading {
    bytes: Vec<u8>,
    pack: Scratch,
}

/// The largest read buffer a [`Reading`] keeps between files.
const READ_KEPT: usize = 1 << 20;

/// [`observe`] with a worker's [`Reading`], taking the bytes `known` holds for the
/// version it read instead of packing its own copy.
pub fn observe_sharing(
    root: &Path,
    rel: &str,
    known: Option<Known<'_>>,
    reading: &mut Reading,
) -> std::io::Result<Observed> {
    let observed = observe_into(root, rel, known, reading);
    if reading.bytes.capacity() > READ_KEPT {
        reading.bytes = Vec::new();
    }
    observed
}

fn observe_into(
    root: &Path,
    rel: &str,
    known: Option<Known<'_>>,
    reading: &mut Reading,
) -> std::io::Result<Observed> {
    let Reading { bytes, pack } = reading;
    let mut file = std::fs::File::open(root.join(rel))?;
    let meta = file.metadata()?;
    bytes.clear();
    bytes.reserve(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(bytes)?;
    let before = FileStamp::of(&meta);
    let stamp = file
        .metadata()
        .ok()
        .map(|m| FileStamp::of(&m))
        .filter(|after| *after == before && after.size == bytes.len() as u64);
    let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    let hash = content_hash(bytes);
    let content = match known.and_then(|k| k(rel, &hash)) {
        Some(kept) => Some(kept),
        None => kept(bytes.len()).then(|| Packed::with(bytes, pack)),
    };
    Ok(Observed {
        rel: rel.to_string(),
        size: bytes.len() as u64,
        mtime,
        created: meta.created().unwrap_or(mtime).min(mtime),
        content_hash: hash,
        facts: markdown::facts(bytes),
        content,
        stamp,
    })
}

/// The bytes of the file at `path`, as [`read_whole`] reads them.
pub fn read_file(path: &Path) -> std::io::Result<Arc<[u8]>> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    read_whole(&mut file, len)
}

/// The bytes of `file`, read into one allocation (an `Arc<[u8]>`: its counts and the
/// bytes), sized by the `len` its stat gave; a file that turns out shorter or longer is
/// read again from its start.
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

/// How many leading bytes the type sniffer looks at.
pub const SNIFF_BYTES: usize = 8192;

/// Read a file once: its SHA-256, size and the first bytes for the sniffer. Streams; the
/// file is never held in memory.
pub fn hash_file(path: &Path) -> std::io::Result<(String, u64, Vec<u8>)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut head = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if head.len() < SNIFF_BYTES {
            let take = (SNIFF_BYTES - head.len()).min(n);
            head.extend_from_slice(&buf[..take]);
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hex(&hasher.finalize()), size, head))
}

/// SHA-256 (hex) of `bytes`: an attachment's (or a private note's ciphertext's) name in
/// the blob store and its receipts.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
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
