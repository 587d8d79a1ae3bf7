//! Atomic, race-checked file operations: the only code that changes the user's folder.
//!
//! Every write is: temp file in the same folder, write, fsync, check that the target is
//! still what the caller read (content hash, or absent), rename, fsync the folder. A crash
//! leaves the old file or the new one, never a torn one; a change made by an editor since
//! the caller read the file is answered `VERSION_MOVED`, never overwritten.
//!
//! On Linux the check and the rename are made one step: the temp file and the target are
//! swapped atomically (`renameat2(RENAME_EXCHANGE)`), the bytes that were swapped out are
//! checked, and if an editor saved in the meantime the swap is undone and its bytes stay.
//! A create uses `RENAME_NOREPLACE`, so a file that appears meanwhile is never replaced.
//!
//! The note's own file is what a success removes: an editor writing it in place, through
//! an `open` that found it before the exchange, would write into a removed file and lose
//! the save. So the note's file (or an attachment's) holds a read lease through the same
//! span: it cannot be had while another open of the file writes (another program's: the
//! daemon never writes a note in place), and the write is then refused with
//! `VERSION_MOVED` before anything is swapped; and an open for writing (or a truncate)
//! made meanwhile waits on it, so the check sees the waiter and undoes the swap: the
//! writer's save lands in the note, back at its path.
//!
//! While our file sits at the path for that check, nobody should read it: an editor that
//! did would build its next save on bytes that are about to be taken back, and lose the
//! save it made just before ours. So our file holds a write lease (`F_SETLEASE`) through
//! the swap and its check (reading and hashing what was swapped out; when the swap is
//! undone, also the work below and, for a waiting writer, an fsync): an open of it waits
//! until the lease is let go, and a non-blocking open fails with `EWOULDBLOCK` meanwhile.
//! The kernel revokes a lease after `lease-break-time` (45 s by default); past it minus a
//! margin nothing below is done. If the swap is undone, our file is first given the
//! editor's bytes (followed a few times while the editor is still writing its file in
//! place), so a reader that waited reads them; and when an opener waits to write, our
//! file, synced, with the editor's mode, is put back at the path with those bytes (only
//! while the editor's file is still there unchanged and no one waits to write it), so its
//! save lands there. If our file left the path meanwhile but is still in the folder (the
//! note renamed away), it is the note now and gets the editor's bytes. The folder is
//! synced after any undo.
//!
//! What is left, each within one `open` call: an open that looked our file up during the
//! swap but reaches the lease only after it was checked, and an open for writing that
//! looked the note's file up before the exchange (or before our file was put back for a
//! waiting writer) but reaches the note's lease only after the last check (its save goes
//! into the note's file, which is removed). Beyond that: a second program saving while
//! another waits (a writer waiting on the note's file keeps it at the path, and a writer
//! waiting on ours then saves into ours, which is removed); a writer waiting on the note's
//! file while the note is renamed away during the check; and an editor's file that cannot
//! be read back, or a rewrite that fails (a full disk): a waiting reader may then read our
//! bytes or a mix, and a waiting writer's save goes into our file, which is removed. Where
//! leases are not available (a note file owned by another user, a filesystem without them;
//! on a network filesystem a refused lease is not taken to mean a writer, since its server
//! may refuse one for its own reasons) the swap runs without them, and only the content
//! check stands. SIGIO, the lease-break notice, is ignored by the process (and so by the
//! `git` it runs) where it was left at its default. A crash inside the window is put right
//! at the next start: see [`mark`].

#![allow(
    clippy::disallowed_methods,
    reason = "the one module that changes the user's folder (clippy.toml)"
)]

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Reason, Result};
use crate::vault::content_hash;
use crate::vault::path::TEMP_PREFIX;

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

mod mark;

pub use mark::{leftover_note, resolve as resolve_leftover, Leftover};

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
        (_, Err(e)) => Err(Error::io_write(
            &e,
            format!("cannot read {}: {e}", path.display()),
        )),
    }
}

/// Folders whose fsync is owed: a write that defers it ([`atomic_write_deferred`],
/// [`atomic_move_deferred`]) names its folders here, and the caller syncs them all once
/// ([`DirSyncs::sync`]) before anything is answered, so writes applied together share
/// one fsync per folder.
#[derive(Debug, Default)]
pub struct DirSyncs {
    dirs: Vec<std::path::PathBuf>,
}

impl DirSyncs {
    fn add(&mut self, dir: &Path) {
        if !self.dirs.iter().any(|d| d == dir) {
            self.dirs.push(dir.to_path_buf());
        }
    }

    /// Fsync every folder named, once each (a new folder before the folder it is in).
    pub fn sync(&mut self) -> Result<()> {
        for dir in std::mem::take(&mut self.dirs) {
            sync_dir(&dir)?;
        }
        Ok(())
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io_write(&e, format!("cannot sync folder {}: {e}", dir.display())))
}

fn parent(path: &Path) -> Result<&Path> {
    path.parent()
        .ok_or_else(|| Error::unsafe_path("the path has no parent folder"))
}

/// Write `bytes` to `path` atomically, if `path` still matches `expect`.
pub fn atomic_write(path: &Path, bytes: &[u8], expect: &Expect) -> Result<()> {
    let mut dirs = DirSyncs::default();
    atomic_write_deferred(path, bytes, expect, &mut dirs)?;
    dirs.sync()
}

/// [`atomic_write`] whose folder fsync is left to `dirs`: the file's bytes are synced
/// and in place when it returns, its folder entry once the caller syncs `dirs`.
pub fn atomic_write_deferred(
    path: &Path,
    bytes: &[u8],
    expect: &Expect,
    dirs: &mut DirSyncs,
) -> Result<()> {
    let temp = prepare(path, bytes, expect)?;
    temp.sync()?;
    temp.place(dirs)
}

/// The first half of an atomic write: `bytes` in a temp file beside `path`, not yet
/// synced nor in place. [`Temp::sync`] then [`Temp::place`] finish it (writes applied
/// together sync their temp files at once); a `Temp` dropped before it is placed
/// removes its file.
pub fn prepare(path: &Path, bytes: &[u8], expect: &Expect) -> Result<Temp> {
    let dir = parent(path)?;
    let created_dir = !dir.exists();
    if created_dir {
        fs::create_dir_all(dir)
            .map_err(|e| Error::io_write(&e, format!("cannot create {}: {e}", dir.display())))?;
    }
    let note = path.file_name().unwrap_or_default();
    let plain = || plain_temp(dir);
    let mut temp = match expect {
        // It will be exchanged with the note: named and marked for a start after a crash
        // (`mark`).
        Expect::Hash(_) => dir.join(mark::temp_name(note)),
        Expect::Absent => plain(),
    };
    let file = File::create(&temp)
        .map_err(|e| Error::io_write(&e, format!("cannot create {}: {e}", temp.display())))?;
    if let (Expect::Hash(want), Some(name)) = (expect, temp.file_name()) {
        if !mark::set(&file, name, note, want, &content_hash(bytes)) {
            // Unmarked, it must not be named as a marked one (a leftover so named and
            // unmarked is taken for a note swapped out): named as any other.
            let renamed = plain();
            if fs::rename(&temp, &renamed).is_ok() {
                temp = renamed;
            }
        }
    }
    // From here on, dropping it removes the temp file.
    let mut prepared = Temp {
        temp,
        path: path.to_path_buf(),
        expect: expect.clone(),
        created_dir,
        file: Some(file),
    };
    if let Some(file) = prepared.file.as_mut() {
        file.write_all(bytes).map_err(|e| {
            Error::io_write(&e, format!("cannot write {}: {e}", prepared.temp.display()))
        })?;
    }
    Ok(prepared)
}

/// A temp file written by [`prepare`], waiting to be synced and put in place.
#[derive(Debug)]
pub struct Temp {
    temp: std::path::PathBuf,
    path: std::path::PathBuf,
    expect: Expect,
    created_dir: bool,
    /// Open until placed; `None` once placed (or never written).
    file: Option<File>,
}

impl Temp {
    /// Fsync the temp file's bytes.
    pub fn sync(&self) -> Result<()> {
        match &self.file {
            Some(file) => file.sync_all().map_err(|e| {
                Error::io_write(&e, format!("cannot write {}: {e}", self.temp.display()))
            }),
            None => Ok(()),
        }
    }

    /// Put the synced temp file at its path, if the path still matches what was expected
    /// (see [`atomic_write`]); its folder's fsync is left to `dirs`.
    pub fn place(mut self, dirs: &mut DirSyncs) -> Result<()> {
        // Kept open through the swap: the lease is held on it, and closing it lets go.
        let file = self.file.take();
        check(&self.path, &self.expect)?;
        swap_in(&self.temp, &self.path, &self.expect, file.as_ref())?;
        drop(file);
        // In place: nothing to remove when dropped.
        self.temp = std::path::PathBuf::new();
        let dir = parent(&self.path)?;
        dirs.add(dir);
        if self.created_dir {
            if let Some(grand) = dir.parent() {
                dirs.add(grand);
            }
        }
        Ok(())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.temp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

mod swap;
#[cfg(target_os = "linux")]
use swap::renameat2;
#[cfg(all(test, target_os = "linux"))]
use swap::rewrite;
use swap::{exchange, swap_in};
#[cfg(test)]
use swap::{AFTER_EXCHANGE, BEFORE_PUT_BACK, BEFORE_SWAP, NO_NOTE_LEASE};

#[cfg(target_os = "linux")]
mod lease;

/// Move `from` to `to` (which must not exist) if `from` still matches `expect`.
pub fn atomic_move(from: &Path, to: &Path, expect: &Expect) -> Result<()> {
    let mut dirs = DirSyncs::default();
    atomic_move_deferred(from, to, expect, &mut dirs)?;
    dirs.sync()
}

/// [`atomic_move`] whose folder fsyncs are left to `dirs`.
pub fn atomic_move_deferred(
    from: &Path,
    to: &Path,
    expect: &Expect,
    dirs: &mut DirSyncs,
) -> Result<()> {
    check(from, expect)?;
    check(to, &Expect::Absent)?;
    let to_dir = parent(to)?;
    let created_dir = !to_dir.exists();
    if created_dir {
        fs::create_dir_all(to_dir)
            .map_err(|e| Error::io_write(&e, format!("cannot create {}: {e}", to_dir.display())))?;
    }
    move_no_replace(from, to)?;
    if let Expect::Hash(want) = expect {
        // What moved must be what the caller read; else an editor saved in between.
        if fs::read(to)
            .map(|b| content_hash(&b) != *want)
            .unwrap_or(true)
        {
            let _ = move_no_replace(to, from);
            return Err(moved(from, "an editor saved it while it was being moved"));
        }
    }
    dirs.add(to_dir);
    if created_dir {
        if let Some(grand) = to_dir.parent() {
            dirs.add(grand);
        }
    }
    dirs.add(parent(from)?);
    Ok(())
}

/// A new temp file of ours in `dir` (created when missing), for a caller that streams
/// bytes into it (an upload) and then puts it in place with [`place_temp`] or drops it
/// with [`discard_temp`].
pub fn create_temp(dir: &Path) -> std::io::Result<(File, std::path::PathBuf)> {
    if !dir.exists() {
        fs::create_dir_all(dir)?;
    }
    let temp = plain_temp(dir);
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)?;
    Ok((file, temp))
}

/// Drop one of our temp files (an upload refused or abandoned). Anything that is not
/// named as our temp files is left alone.
pub fn discard_temp(temp: &Path) {
    if temp_file_name(temp).is_some() {
        let _ = fs::remove_file(temp);
    }
}

/// A new name for a temp file of ours in `dir` (any but a replacing write's, which
/// `mark::temp_name` names).
fn plain_temp(dir: &Path) -> std::path::PathBuf {
    dir.join(format!("{TEMP_PREFIX}{}", uuid::Uuid::now_v7().simple()))
}

/// The file name of `path` if it is named as our temp files.
fn temp_file_name(path: &Path) -> Option<&std::ffi::OsStr> {
    use std::os::unix::ffi::OsStrExt;
    path.file_name()
        .filter(|n| n.as_bytes().starts_with(TEMP_PREFIX.as_bytes()))
}

/// Whether a write of the file at `path` is refused while another program has it open
/// for writing: on Linux, on a filesystem known to be local (see the module doc).
pub fn watches_open_writers(path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        File::open(path).is_ok_and(|f| lease::refused_only_for_writers(&f))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        false
    }
}

/// Put a filled temp file (synced by the caller) at `path`, which must not exist
/// (`NAME_COLLISION`): an atomic no-replace rename, then the folders are synced. The temp
/// file is removed when it cannot be placed.
pub fn place_temp(temp: &Path, path: &Path) -> Result<()> {
    let result = (|| {
        let dir = parent(path)?;
        if !dir.exists() {
            fs::create_dir_all(dir).map_err(|e| {
                Error::io_write(&e, format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        move_no_replace(temp, path)?;
        sync_dir(dir)?;
        if let Some(from) = temp.parent().filter(|p| *p != dir) {
            sync_dir(from)?;
        }
        Ok(())
    })();
    if result.is_err() {
        discard_temp(temp);
    }
    result
}

/// Remove a file that is not a note (an attachment), if it still has the SHA-256
/// `sha256` (`VERSION_MOVED` when it changed or left); the folder is synced.
pub fn remove_checked(path: &Path, sha256: &str) -> Result<()> {
    let now = crate::vault::observe::hash_file(path)
        .map_err(|e| moved(path, &format!("it cannot be read: {e}")))?;
    if now.0 != sha256 {
        return Err(moved(path, "its content differs"));
    }
    fs::remove_file(path)
        .map_err(|e| Error::io_write(&e, format!("cannot remove {}: {e}", path.display())))?;
    sync_dir(parent(path)?)
}

/// Move a file that is not a note to `to` (which must not exist), if it still has the
/// SHA-256 `sha256`.
pub fn move_checked(from: &Path, to: &Path, sha256: &str) -> Result<()> {
    let now = crate::vault::observe::hash_file(from)
        .map_err(|e| moved(from, &format!("it cannot be read: {e}")))?;
    if now.0 != sha256 {
        return Err(moved(from, "its content differs"));
    }
    let to_dir = parent(to)?;
    if !to_dir.exists() {
        fs::create_dir_all(to_dir)
            .map_err(|e| Error::io_write(&e, format!("cannot create {}: {e}", to_dir.display())))?;
    }
    move_no_replace(from, to)?;
    sync_dir(to_dir)?;
    sync_dir(parent(from)?)
}

/// Make the folder `path` (its parent must exist): a folder, or anything, already there
/// is `NAME_COLLISION`. The parent is fsynced.
pub fn create_folder(path: &Path) -> Result<()> {
    let parent_dir = parent(path)?;
    if !parent_dir.is_dir() {
        return Err(Error::new(
            Reason::FOLDER_NOT_FOUND,
            format!("{} does not exist", parent_dir.display()),
        ));
    }
    match fs::create_dir(path) {
        Ok(()) => sync_dir(parent_dir),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Error::new(
            Reason::NAME_COLLISION,
            format!("{} already exists", path.display()),
        )),
        Err(e) => Err(Error::io_write(
            &e,
            format!("cannot create {}: {e}", path.display()),
        )),
    }
}

/// Move the folder `from`, with everything in it, to `to` (which must not exist) in one
/// rename; a missing parent of `to` is made. Both parents are fsynced.
pub fn move_folder(from: &Path, to: &Path) -> Result<()> {
    if !from.is_dir() {
        return Err(Error::new(
            Reason::FOLDER_NOT_FOUND,
            format!("{} is not a folder", from.display()),
        ));
    }
    let to_dir = parent(to)?;
    if !to_dir.exists() {
        fs::create_dir_all(to_dir)
            .map_err(|e| Error::io_write(&e, format!("cannot create {}: {e}", to_dir.display())))?;
    }
    move_no_replace(from, to).map_err(|e| {
        if e.reason == Reason::VERSION_MOVED {
            Error::new(
                Reason::FOLDER_NOT_FOUND,
                format!("{} was removed meanwhile", from.display()),
            )
        } else {
            e
        }
    })?;
    sync_dir(to_dir)?;
    sync_dir(parent(from)?)
}

/// Remove the folder `path` if it is empty (`rmdir`: never anything in it). A folder
/// that is not empty is `VALIDATION_FAILED` naming `trash_notes`.
pub fn remove_empty_folder(path: &Path) -> Result<()> {
    match fs::remove_dir(path) {
        Ok(()) => sync_dir(parent(path)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::new(
            Reason::FOLDER_NOT_FOUND,
            format!("{} does not exist", path.display()),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => Err(Error::invalid_field(
            "trash_notes",
            format!(
                "{} is not empty; send `trash_notes: true` to move what it holds to .trash/",
                path.display()
            ),
        )),
        Err(e) => Err(Error::io_write(
            &e,
            format!("cannot remove {}: {e}", path.display()),
        )),
    }
}

/// Move the file `from` to `to` (which must not exist) if `unchanged` says so of it
/// before the rename and of what arrived after it; otherwise the rename is undone and the
/// answer is `VERSION_MOVED` (an editor changed it meanwhile). For attachments, whose
/// identity is a stamp (size, mtime, inode) rather than a re-read.
pub fn move_unchanged(from: &Path, to: &Path, unchanged: &dyn Fn(&Path) -> bool) -> Result<()> {
    if !unchanged(from) {
        return Err(moved(from, "it changed since it was listed"));
    }
    check(to, &Expect::Absent)?;
    let to_dir = parent(to)?;
    if !to_dir.exists() {
        fs::create_dir_all(to_dir)
            .map_err(|e| Error::io_write(&e, format!("cannot create {}: {e}", to_dir.display())))?;
    }
    move_no_replace(from, to)?;
    if !unchanged(to) {
        let _ = move_no_replace(to, from);
        return Err(moved(from, "it changed while it was being moved"));
    }
    sync_dir(to_dir)?;
    sync_dir(parent(from)?)
}

fn move_no_replace(from: &Path, to: &Path) -> Result<()> {
    let failed = |e: std::io::Error| {
        Error::io_write(
            &e,
            format!("cannot move {} to {}: {e}", from.display(), to.display()),
        )
    };
    #[cfg(target_os = "linux")]
    match renameat2(from, to, libc::RENAME_NOREPLACE) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(Error::new(
                Reason::NAME_COLLISION,
                format!("{} already exists", to.display()),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(moved(from, "it was removed"))
        }
        Err(e)
            if e.raw_os_error() == Some(libc::EINVAL) || e.raw_os_error() == Some(libc::ENOSYS) => {
        }
        Err(e) => return Err(failed(e)),
    }
    fs::rename(from, to).map_err(failed)
}

#[cfg(test)]
mod tests;
