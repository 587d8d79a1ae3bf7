//! Atomic, race-checked file operations: the only code that changes the user's folder.
//!
//! Every write is: temp file in the same folder, write, fsync, check that the target is
//! still what the caller read (content hash, or absent), rename, fsync the folder. A crash
//! leaves the old file or the new one, never a torn one; a change made by an editor since
//! the caller read the file is answered `VERSION_MOVED`, never overwritten.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Reason, Result};
use crate::watch::scan::content_hash;

/// Prefix of our temp files (ignored by the scan, removed at start).
pub const TEMP_PREFIX: &str = ".notevault-tmp-";

/// What the target must be right before the rename.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// No file there (a create).
    Absent,
    /// The file's bytes hash to this (`blake3:<hex>`).
    Hash(String),
}

fn moved(path: &Path, why: &str) -> Error {
    Error::new(
        Reason::VERSION_MOVED,
        format!(
            "{} changed on disk since it was read ({why})",
            path.display()
        ),
    )
}

/// Check `path` against `expect` now.
pub fn check(path: &Path, expect: &Expect) -> Result<()> {
    match (expect, fs::read(path)) {
        (Expect::Absent, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        (Expect::Absent, Ok(_)) => Err(Error::new(
            Reason::NAME_COLLISION,
            format!("{} already exists", path.display()),
        )),
        (Expect::Hash(want), Ok(bytes)) if content_hash(&bytes) == *want => Ok(()),
        (Expect::Hash(_), Ok(_)) => Err(moved(path, "its content differs")),
        (Expect::Hash(_), Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(moved(path, "it was removed"))
        }
        (_, Err(e)) => Err(Error::internal(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::internal(format!("cannot sync folder {}: {e}", dir.display())))
}

fn parent(path: &Path) -> Result<&Path> {
    path.parent()
        .ok_or_else(|| Error::unsafe_path("the path has no parent folder"))
}

/// Write `bytes` to `path` atomically, if `path` still matches `expect`.
pub fn atomic_write(path: &Path, bytes: &[u8], expect: &Expect) -> Result<()> {
    let dir = parent(path)?;
    let created_dir = !dir.exists();
    if created_dir {
        fs::create_dir_all(dir)
            .map_err(|e| Error::internal(format!("cannot create {}: {e}", dir.display())))?;
    }
    let temp = dir.join(format!("{TEMP_PREFIX}{}", uuid::Uuid::now_v7().simple()));
    let result = (|| {
        let mut file = File::create(&temp)
            .map_err(|e| Error::internal(format!("cannot create {}: {e}", temp.display())))?;
        file.write_all(bytes)
            .and_then(|_| file.sync_all())
            .map_err(|e| Error::internal(format!("cannot write {}: {e}", temp.display())))?;
        drop(file);
        check(path, expect)?;
        fs::rename(&temp, path)
            .map_err(|e| Error::internal(format!("cannot replace {}: {e}", path.display())))?;
        sync_dir(dir)?;
        if created_dir {
            if let Some(grand) = dir.parent() {
                sync_dir(grand)?;
            }
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Move `from` to `to` (which must not exist) if `from` still matches `expect`.
pub fn atomic_move(from: &Path, to: &Path, expect: &Expect) -> Result<()> {
    check(from, expect)?;
    check(to, &Expect::Absent)?;
    let to_dir = parent(to)?;
    if !to_dir.exists() {
        fs::create_dir_all(to_dir)
            .map_err(|e| Error::internal(format!("cannot create {}: {e}", to_dir.display())))?;
    }
    fs::rename(from, to).map_err(|e| {
        Error::internal(format!(
            "cannot move {} to {}: {e}",
            from.display(),
            to.display()
        ))
    })?;
    sync_dir(to_dir)?;
    sync_dir(parent(from)?)
}

/// Remove leftover temp files of an earlier run (a crash between write and rename).
pub fn clean_temp_files(root: &Path, state_dir: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for entry in walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| !e.path().starts_with(state_dir))
        .filter_map(|e| e.ok())
    {
        if entry.file_type().is_file()
            && entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX)
            && fs::remove_file(entry.path()).is_ok()
        {
            removed.push(entry.path().to_path_buf());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replace_only_the_version_that_was_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.md");
        atomic_write(&path, b"one", &Expect::Absent).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"one");
        let err = atomic_write(&path, b"x", &Expect::Absent).unwrap_err();
        assert_eq!(err.reason, Reason::NAME_COLLISION);
        let one = content_hash(b"one");
        atomic_write(&path, b"two", &Expect::Hash(one.clone())).unwrap();
        let err = atomic_write(&path, b"three", &Expect::Hash(one)).unwrap_err();
        assert_eq!(err.reason, Reason::VERSION_MOVED);
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file is left behind");
    }

    #[test]
    fn moves_refuse_collisions_and_stale_sources() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.md");
        let b = dir.path().join("sub/b.md");
        fs::write(&a, "a").unwrap();
        atomic_move(&a, &b, &Expect::Hash(content_hash(b"a"))).unwrap();
        assert!(!a.exists() && b.exists());
        fs::write(&a, "again").unwrap();
        let err = atomic_move(&a, &b, &Expect::Hash(content_hash(b"again"))).unwrap_err();
        assert_eq!(err.reason, Reason::NAME_COLLISION);
        let err = atomic_move(
            &a,
            &dir.path().join("c.md"),
            &Expect::Hash(content_hash(b"x")),
        )
        .unwrap_err();
        assert_eq!(err.reason, Reason::VERSION_MOVED);
    }
}
