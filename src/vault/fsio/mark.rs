//! What a crash in the middle of a replacing write leaves, and how the next start puts
//! it right.
//!
//! A replacing write exchanges its temp file with the note (`RENAME_EXCHANGE`) and then
//! checks what it swapped out. Between the two, the note's path holds our bytes and the
//! temp file's name holds the note as it was, which may be an editor's newest save. A
//! crash there used to leave it so, and the next start removed the temp file as a
//! leftover: the editor's save was gone and our refused (and unacknowledged) bytes stayed.
//!
//! So our temp file carries a mark, the extended attribute `user.notevault.temp` holding
//! its own file name, from before it is synced until the write is decided: it is taken off
//! before the swapped-out file is removed (the check passed) and before the lease is let
//! go (the swap was undone). An inode keeps its attributes across renames, so after a
//! crash in the window the mark is on the file at the note's path and names the temp file
//! beside it. [`resolve`], run on each leftover at start (and by `check --repair`), moves
//! the temp file back over the marked file: the note is again what it was before the
//! write, whichever way its check would have gone, and the write, never acknowledged, is
//! forgotten or applied again by its retry. A leftover that carries its own mark, or whose
//! mark is on no file beside it, was never (or is no longer) at the note's path and is
//! removed, as before.
//!
//! Where a filesystem keeps no user attributes the mark is not set, and a leftover is
//! removed as before: the window stays what it was there.

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::TEMP_PREFIX;

#[cfg(target_os = "linux")]
pub(super) use attr::{clear, of, set};

/// Without user attributes (other systems) nothing is marked, as on a filesystem that
/// keeps none.
#[cfg(not(target_os = "linux"))]
mod attr_none {
    pub fn set(_: &std::fs::File, _: &std::ffi::OsStr) {}
    pub fn clear(_: &std::fs::File) {}
    pub fn of(_: &std::path::Path) -> Option<Vec<u8>> {
        None
    }
}
#[cfg(not(target_os = "linux"))]
pub(super) use attr_none::{clear, of, set};

#[cfg(target_os = "linux")]
mod attr {
    use std::ffi::{CString, OsStr};
    use std::fs::File;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    const NAME: &std::ffi::CStr = c"user.notevault.temp";

    /// Mark `file`, our temp file named `name` (nothing where attributes are not kept).
    pub fn set(file: &File, name: &OsStr) {
        let value = name.as_bytes();
        // SAFETY: the descriptor is open for the call; name and value outlive it.
        unsafe {
            libc::fsetxattr(
                file.as_raw_fd(),
                NAME.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        };
    }

    /// Take the mark off `file` (nothing if it has none).
    pub fn clear(file: &File) {
        // SAFETY: as above.
        unsafe { libc::fremovexattr(file.as_raw_fd(), NAME.as_ptr()) };
    }

    /// The mark of the file at `path`, read without opening it (an open would wait on a
    /// lease) and without following a symlink.
    pub fn of(path: &Path) -> Option<Vec<u8>> {
        let path = CString::new(path.as_os_str().as_bytes()).ok()?;
        let mut value = [0u8; 256];
        // SAFETY: `path` is NUL-terminated, `value` is writable for its length.
        let len = unsafe {
            libc::lgetxattr(
                path.as_ptr(),
                NAME.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        usize::try_from(len).ok().map(|len| value[..len].to_vec())
    }
}

/// What [`resolve`] did with a leftover temp file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leftover {
    /// It was removed.
    Removed,
    /// It held the note swapped out by a write interrupted in its window, and was moved
    /// back to the note's path (the file named here).
    PutBack(PathBuf),
}

/// Put right one of our temp files left by an interrupted write: moved back over the
/// note whose file carries its mark, else removed. Anything not named as our temp files
/// is left alone (an error).
pub fn resolve(temp: &Path) -> std::io::Result<Leftover> {
    let Some(name) = temp
        .file_name()
        .filter(|n| n.as_bytes().starts_with(TEMP_PREFIX.as_bytes()))
    else {
        return Err(std::io::Error::other("not a notevault temp file"));
    };
    if of(temp).is_none_or(|mark| mark != name.as_bytes()) {
        if let Some(note) = marked_for(temp, name)? {
            std::fs::rename(temp, &note)?;
            if let Some(dir) = note.parent() {
                File::open(dir)?.sync_all()?;
            }
            return Ok(Leftover::PutBack(note));
        }
    }
    std::fs::remove_file(temp)?;
    Ok(Leftover::Removed)
}

/// The file beside `temp` whose mark names it, if any.
fn marked_for(temp: &Path, name: &OsStr) -> std::io::Result<Option<PathBuf>> {
    let Some(dir) = temp.parent() else {
        return Ok(None);
    };
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name() != name
            && entry.file_type().is_ok_and(|t| t.is_file())
            && of(&entry.path()).is_some_and(|mark| mark == name.as_bytes())
        {
            return Ok(Some(entry.path()));
        }
    }
    Ok(None)
}
