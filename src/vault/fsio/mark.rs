//! What a crash in the middle of a replacing write leaves, and how the next start puts
//! it right.
//!
//! A replacing write exchanges its temp file with the note (`RENAME_EXCHANGE`) and then
//! checks what it swapped out. Between the two, the note's path holds our bytes and the
//! temp file's name holds the note as it was, which may be an editor's newest save. A
//! crash there used to leave it so, and the next start removed the temp file as a
//! leftover: the editor's save was gone and our refused (and unacknowledged) bytes stayed.
//!
//! So our temp file carries a [`Mark`], the extended attribute `user.notevault.temp`:
//! its own file name, the hash the write expects to swap out, and the hash of the bytes
//! the marked file holds. It is set before the file is synced and taken off once the write
//! is decided: before the swapped-out file is removed (the check passed) and before the
//! lease is let go (the swap was undone; our file is marked again with the editor's bytes
//! before it is put back for a waiting writer). An inode keeps its attributes across
//! renames, so after a crash in the window the mark is on the file at the note's path and
//! names the temp file beside it. [`resolve`], run on each leftover at start (and by
//! `check --repair`), then decides by what the two files hold now:
//!
//! | the marked file | the temp file | done |
//! |---|---|---|
//! | as marked | what the write expected | the write landed: the temp file is removed |
//! | as marked | the marked file's bytes | a copy (the put-back): removed |
//! | as marked | anything else (an editor's save) | put back over the marked file |
//! | changed since (a save after the crash) | expected, or the marked bytes | removed |
//! | changed since | anything else | kept beside the note as `<name> (recovered).md` |
//!
//! The marked file is unmarked in every case. A save made after the crash is never
//! replaced, and an editor's save the write swapped out is never removed. A leftover that
//! carries its own mark, or whose mark is on no file beside it, was never (or is no
//! longer) at the note's path and is removed, as before.
//!
//! Left: a note renamed into another folder inside the window (its swapped-out file is
//! removed, the renamed note keeps our bytes), and a start where the put-back itself fails
//! (a read-only vault: the note with our bytes is then recorded as the write; a later start
//! that can put it back does). Where a filesystem keeps no user attributes the mark is not
//! set, and a leftover is removed as before.

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::TEMP_PREFIX;
use crate::vault::content_hash;

#[cfg(target_os = "linux")]
use attr::{clear_at, read, write};

/// Without user attributes (other systems) nothing is marked, as on a filesystem that
/// keeps none.
#[cfg(not(target_os = "linux"))]
mod attr_none {
    pub fn write(_: &std::fs::File, _: &[u8]) {}
    pub fn clear(_: &std::fs::File) {}
    pub fn clear_at(_: &std::path::Path) {}
    pub fn read(_: &std::path::Path) -> Option<Vec<u8>> {
        None
    }
}
#[cfg(target_os = "linux")]
pub(super) use attr::clear;
#[cfg(not(target_os = "linux"))]
pub(super) use attr_none::clear;
#[cfg(not(target_os = "linux"))]
use attr_none::{clear_at, read, write};

/// The mark of a temp file of a replacing write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mark {
    /// The temp file's name.
    pub name: Vec<u8>,
    /// The hash of the note the write expects to swap out.
    pub expect: String,
    /// The hash of the bytes the marked file holds.
    pub held: String,
}

impl Mark {
    fn encode(&self) -> Vec<u8> {
        let mut out = self.name.clone();
        for part in [&self.expect, &self.held] {
            out.push(b'\n');
            out.extend_from_slice(part.as_bytes());
        }
        out
    }

    fn decode(bytes: &[u8]) -> Option<Mark> {
        let mut parts = bytes.split(|b| *b == b'\n');
        let name = parts.next()?.to_vec();
        let expect = String::from_utf8(parts.next()?.to_vec()).ok()?;
        let held = String::from_utf8(parts.next()?.to_vec()).ok()?;
        Some(Mark { name, expect, held })
    }
}

/// Mark `file`, our temp file named `name`, holding bytes that hash to `held`, to be
/// exchanged with a note expected to hash to `expect` (nothing where attributes are not
/// kept). Marking again replaces the mark.
pub(super) fn set(file: &File, name: &OsStr, expect: &str, held: &str) {
    let mark = Mark {
        name: name.as_bytes().to_vec(),
        expect: expect.to_string(),
        held: held.to_string(),
    };
    write(file, &mark.encode());
}

/// Mark `file` again (its mark read at `at`, where it is now) as holding bytes that
/// hash to `held`, before it is put back at the note's path with those bytes.
pub(super) fn set_held(file: &File, at: &Path, held: &str) {
    if let Some(mut mark) = of(at) {
        mark.held = held.to_string();
        write(file, &mark.encode());
    }
}

/// The mark of the file at `path`, read without opening it (an open would wait on a
/// lease) and without following a symlink.
pub(super) fn of(path: &Path) -> Option<Mark> {
    read(path).and_then(|bytes| Mark::decode(&bytes))
}

/// Take the mark off the file at `path` if it names our temp file `name` (an editor that
/// copies attributes when it saves by rename carries the mark over to its file).
pub(super) fn clear_if_named(path: &Path, name: &OsStr) {
    if of(path).is_some_and(|m| m.name == name.as_bytes()) {
        clear_at(path);
    }
}

#[cfg(target_os = "linux")]
mod attr {
    use std::ffi::CString;
    use std::fs::File;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    const NAME: &std::ffi::CStr = c"user.notevault.temp";
    /// Longer than any mark (a name of 47 bytes and two hashes of 71).
    const MAX: usize = 512;

    pub fn write(file: &File, value: &[u8]) {
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

    pub fn clear(file: &File) {
        // SAFETY: as above.
        unsafe { libc::fremovexattr(file.as_raw_fd(), NAME.as_ptr()) };
    }

    fn c_path(path: &Path) -> Option<CString> {
        CString::new(path.as_os_str().as_bytes()).ok()
    }

    pub fn clear_at(path: &Path) {
        if let Some(path) = c_path(path) {
            // SAFETY: `path` is NUL-terminated and lives across the call.
            unsafe { libc::lremovexattr(path.as_ptr(), NAME.as_ptr()) };
        }
    }

    pub fn read(path: &Path) -> Option<Vec<u8>> {
        let path = c_path(path)?;
        let mut value = [0u8; MAX];
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
    /// It was removed: it held nothing the folder does not hold.
    Removed,
    /// It held the note swapped out by a write interrupted in its window, and was moved
    /// back to the note's path (the file named here).
    PutBack(PathBuf),
    /// It held an editor's save swapped out by an interrupted write, and the note was
    /// saved again after the crash: the save is kept beside the note as `copy`.
    Recovered { note: PathBuf, copy: PathBuf },
}

/// Put right one of our temp files left by an interrupted write (see the module doc).
/// Anything not named as our temp files is left alone (an error).
pub fn resolve(temp: &Path) -> std::io::Result<Leftover> {
    let Some(name) = temp
        .file_name()
        .filter(|n| n.as_bytes().starts_with(TEMP_PREFIX.as_bytes()))
    else {
        return Err(std::io::Error::other("not a notevault temp file"));
    };
    let ours = of(temp).is_some_and(|m| m.name == name.as_bytes());
    let marked = if ours { None } else { marked_for(temp, name)? };
    let Some((note, mark)) = marked else {
        std::fs::remove_file(temp)?;
        return Ok(Leftover::Removed);
    };
    let held_now = content_hash(&std::fs::read(&note)?);
    let swapped_out = content_hash(&std::fs::read(temp)?);
    let done = if held_now == mark.held {
        if swapped_out == mark.expect || swapped_out == mark.held {
            std::fs::remove_file(temp)?;
            Leftover::Removed
        } else {
            std::fs::rename(temp, &note)?;
            Leftover::PutBack(note.clone())
        }
    } else if swapped_out == mark.expect || swapped_out == mark.held {
        std::fs::remove_file(temp)?;
        Leftover::Removed
    } else {
        let copy = keep_beside(temp, &note)?;
        Leftover::Recovered {
            note: note.clone(),
            copy,
        }
    };
    // A put-back replaced the marked file; otherwise it stays, unmarked.
    clear_if_named(&note, name);
    if let Some(dir) = note.parent() {
        if let Err(e) = File::open(dir).and_then(|d| d.sync_all()) {
            tracing::warn!(folder = %dir.display(), error = %e, "cannot sync a folder after clearing a temp file");
        }
    }
    Ok(done)
}

/// Move `temp` beside `note` under the first free name of `<stem> (recovered).<ext>`,
/// `<stem> (recovered 2).<ext>`, ...
fn keep_beside(temp: &Path, note: &Path) -> std::io::Result<PathBuf> {
    let stem = note.file_stem().unwrap_or_default().to_string_lossy();
    let ext = note
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    for n in 1..1000 {
        let suffix = if n == 1 {
            String::new()
        } else {
            format!(" {n}")
        };
        let copy = note.with_file_name(format!("{stem} (recovered{suffix}){ext}"));
        match super::move_no_replace(temp, &copy) {
            Ok(()) => return Ok(copy),
            Err(e) if e.reason == crate::error::Reason::NAME_COLLISION => continue,
            Err(e) => return Err(std::io::Error::other(e.message)),
        }
    }
    Err(std::io::Error::other("no free name for a recovered copy"))
}

/// The file beside `temp` whose mark names it, with its mark, if any.
fn marked_for(temp: &Path, name: &OsStr) -> std::io::Result<Option<(PathBuf, Mark)>> {
    let Some(dir) = temp.parent() else {
        return Ok(None);
    };
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name() == name || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        if let Some(mark) = of(&entry.path()).filter(|m| m.name == name.as_bytes()) {
            return Ok(Some((entry.path(), mark)));
        }
    }
    Ok(None)
}
