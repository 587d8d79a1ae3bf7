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

#[cfg(target_os = "linux")]
fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path"))
    };
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: both arguments are valid NUL-terminated paths that live across the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            flags,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Swap the files at `a` and `b` atomically (`RENAME_EXCHANGE`); `Unsupported` where the
/// system or filesystem has no such rename.
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    return renameat2(a, b, libc::RENAME_EXCHANGE).map_err(|e| {
        if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
            std::io::Error::from(std::io::ErrorKind::Unsupported)
        } else {
            e
        }
    });
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (a, b);
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
}

/// A file's inode number (0 where there is none).
fn inode(meta: &fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        std::os::unix::fs::MetadataExt::ino(meta)
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        0
    }
}

/// A test's editor, called with `(temp, path)` right after the exchange.
#[cfg(test)]
type Editor = Box<dyn FnMut(&Path, &Path)>;

#[cfg(test)]
thread_local! {
    /// Called before anything of the swap (an editor saving after the caller's check).
    static BEFORE_SWAP: std::cell::RefCell<Option<Editor>> = std::cell::RefCell::new(None);
    static AFTER_EXCHANGE: std::cell::RefCell<Option<Editor>> = std::cell::RefCell::new(None);
    /// Set: no lease is taken on the note's file (as where none can be had).
    static NO_NOTE_LEASE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Called right before our file is put back at the path for a waiting writer.
    static BEFORE_PUT_BACK: std::cell::RefCell<Option<Editor>> = std::cell::RefCell::new(None);
}

/// Put `temp` at `path`, atomically with the `expect` check where the OS allows it.
/// On success `temp` no longer exists. `ours`: the temp file, open (for its inode and
/// its lease).
fn swap_in(temp: &Path, path: &Path, expect: &Expect, ours: Option<&File>) -> Result<()> {
    #[cfg(test)]
    BEFORE_SWAP.with(|hook| {
        if let Some(hook) = hook.borrow_mut().as_mut() {
            hook(temp, path);
        }
    });
    #[cfg(target_os = "linux")]
    {
        let flags = match expect {
            Expect::Absent => libc::RENAME_NOREPLACE,
            Expect::Hash(_) => libc::RENAME_EXCHANGE,
        };
        // A create puts nothing of ours at the path before it is final: no lease needed.
        let lease = match expect {
            Expect::Hash(_) => ours.and_then(lease::Lease::take),
            Expect::Absent => None,
        };
        // The note's own file, which the exchange swaps out and a success removes: an
        // editor writing it in place through an `open` that found it before the exchange
        // would write into a removed file. A read lease cannot be had while it is open for
        // writing (the write is refused), and makes an open for writing wait while it
        // holds (the swap is undone).
        #[cfg(test)]
        let leased = !NO_NOTE_LEASE.get();
        #[cfg(not(test))]
        let leased = true;
        let note_lease = match expect {
            Expect::Hash(_) if leased => match lease::NoteLease::take(path) {
                Ok(held) => held,
                Err(lease::OpenForWriting) => {
                    return Err(Error::new(
                        Reason::VERSION_MOVED,
                        format!(
                            "{} is open for writing in another program (an editor saving \
                             it); retry once it is closed",
                            path.display()
                        ),
                    ))
                }
            },
            _ => None,
        };
        match renameat2(temp, path, flags) {
            Ok(()) => {
                #[cfg(test)]
                AFTER_EXCHANGE.with(|hook| {
                    if let Some(hook) = hook.borrow_mut().as_mut() {
                        hook(temp, path);
                    }
                });
                if let Expect::Hash(want) = expect {
                    // `temp` now holds what was at `path`: it must be what the caller read,
                    // and the file the read lease is on, with no writer waiting on it (else
                    // that writer's save would go into the file removed below).
                    let swapped_out = SwappedOut::read(temp);
                    let why = if !swapped_out
                        .as_ref()
                        .is_ok_and(|s| content_hash(&s.bytes) == *want)
                    {
                        Some("an editor saved it while it was being replaced")
                    } else if note_lease.as_ref().is_some_and(|note| {
                        !note.guards(swapped_out.as_ref().ok().and_then(SwappedOut::inode))
                    }) {
                        Some("an editor was writing it while it was being replaced")
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        undo_swap(
                            temp,
                            path,
                            swapped_out.ok(),
                            ours,
                            lease,
                            note_lease.as_ref(),
                        );
                        return Err(moved(path, why));
                    }
                    // Decided: the note as it was is removed, then our file unmarked (a
                    // crash in between leaves a mark naming nothing, never a leftover
                    // without its partner).
                    if fs::remove_file(temp).is_ok() {
                        if let Some(file) = ours {
                            mark::clear(file);
                        }
                    }
                }
                drop(lease);
                drop(note_lease);
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::new(
                    Reason::NAME_COLLISION,
                    format!("{} already exists", path.display()),
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(moved(path, "it was removed"));
            }
            // Filesystems without renameat2 flags fall back to a plain rename.
            Err(e)
                if e.raw_os_error() == Some(libc::EINVAL)
                    || e.raw_os_error() == Some(libc::ENOSYS) => {}
            Err(e) => {
                return Err(Error::io_write(
                    &e,
                    format!("cannot replace {}: {e}", path.display()),
                ))
            }
        }
    }
    fs::rename(temp, path)
        .map_err(|e| Error::io_write(&e, format!("cannot replace {}: {e}", path.display())))?;
    // In place (a crash before this leaves a mark naming a file that no longer exists).
    if let Some(file) = ours {
        mark::clear(file);
    }
    Ok(())
}

/// The file an exchange swapped out (the editor's), held open while the swap is undone,
/// so that its inode number cannot be reused meanwhile, with the bytes read through it.
#[cfg(target_os = "linux")]
struct SwappedOut {
    file: File,
    bytes: Vec<u8>,
}

#[cfg(target_os = "linux")]
impl SwappedOut {
    fn read(path: &Path) -> std::io::Result<Self> {
        let file = File::open(path)?;
        let bytes = Self::bytes_of(&file)?;
        Ok(Self { file, bytes })
    }

    /// All of `file`'s bytes, read from its start.
    fn bytes_of(mut file: &File) -> std::io::Result<Vec<u8>> {
        use std::io::{Read, Seek};
        let mut bytes = Vec::new();
        file.rewind()?;
        file.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    fn inode(&self) -> Option<u64> {
        self.file.metadata().ok().map(|m| inode(&m))
    }

    /// Read the file again (an editor may still be writing it in place); true if its
    /// bytes changed since they were read.
    fn refresh(&mut self) -> bool {
        match Self::bytes_of(&self.file) {
            Ok(now) if now != self.bytes => {
                self.bytes = now;
                true
            }
            _ => false,
        }
    }

    /// Whether the file still holds the bytes read (an editor may write it in place).
    fn unchanged(&self) -> bool {
        Self::bytes_of(&self.file).is_ok_and(|now| now == self.bytes)
    }
}

/// The inode number of what is at `path` now (not following a symlink), if anything.
#[cfg(target_os = "linux")]
fn inode_at(path: &Path) -> Option<u64> {
    fs::symlink_metadata(path).ok().map(|m| inode(&m))
}

/// Take back a swap whose check failed: the editor's file goes back to `path`, and `temp`
/// is left to the caller to remove. `editors`: the file swapped out (`None` when it could
/// not be read: then the files are only swapped back).
#[cfg(target_os = "linux")]
fn undo_swap(
    temp: &Path,
    path: &Path,
    editors: Option<SwappedOut>,
    ours: Option<&File>,
    lease: Option<lease::Lease<'_>>,
    note: Option<&lease::NoteLease>,
) {
    // The caller answers VERSION_MOVED and syncs no folder: what is swapped here is synced
    // here, once the lease is let go (openers wait no longer than the swap).
    let sync_folder = || {
        if let Ok(dir) = parent(path) {
            let _ = sync_dir(dir);
        }
    };
    let ours_inode = ours.and_then(|f| f.metadata().ok()).map(|m| inode(&m));
    let (Some(file), Some(ours_inode)) = (ours, ours_inode) else {
        // Without our file's identity, only the plain swap back (our file, back under
        // the temp name, keeps its own mark until it is removed).
        let _ = renameat2(temp, path, libc::RENAME_EXCHANGE);
        drop(lease);
        sync_folder();
        return;
    };
    let swapped_back =
        inode_at(path) == Some(ours_inode) && renameat2(temp, path, libc::RENAME_EXCHANGE).is_ok();
    if !swapped_back {
        // Our file left the path before the swap back, or the swap back failed. An editor
        // that saved by rename over it has its newest save at `path` (our file is then
        // unlinked); but if our file is still in the folder (the note renamed away
        // meanwhile, or still at `path`), it is the note now: it gets the editor's bytes,
        // which the caller then removes from `temp`.
        use std::os::unix::fs::MetadataExt;
        if let Some(editors) = &editors {
            if file.metadata().is_ok_and(|m| m.nlink() > 0) && rewrite(file, &editors.bytes) {
                let _ = file.sync_all();
            }
        }
        mark::clear(file);
        if let Some(name) = temp.file_name() {
            mark::clear_if_named(path, name);
        }
        drop(lease);
        sync_folder();
        return;
    }
    if inode_at(temp) != Some(ours_inode) {
        // An editor saved by rename in the instant before the swap back: the swap brought
        // its file here, not ours. Its newest save goes back to `path`; the older one it
        // replaced is what this temp file then holds.
        let _ = renameat2(temp, path, libc::RENAME_EXCHANGE);
        mark::clear(file);
        if let Some(name) = temp.file_name() {
            mark::clear_if_named(path, name);
        }
        drop(lease);
        sync_folder();
        return;
    }
    if let (Some(lease), Some(editors)) = (&lease, editors) {
        give_back(temp, path, file, editors, lease, note);
    }
    // Decided. Our file, if put back at `path`, is unmarked while the lease holds (a
    // waiting writer's save may go into it once it is let go); back under the temp name,
    // it keeps its own mark until it is removed, so a crash before that removes it too.
    if inode_at(path) == Some(ours_inode) {
        mark::clear(file);
    }
    drop(lease);
    sync_folder();
}

/// After a swap back, for those who opened our file while it was at `path` and wait on
/// its lease: give our file the editor's bytes (whether or not one waits yet: an open that
/// found our file may still be on its way to the lease), so a reader reads what is at
/// `path` again; and when one waits to write, put our file back at `path`, synced, with
/// the same bytes and mode, so its save lands there; only while the editor's file is there
/// as it was read and no one waits to write it (a newer save stays), and only while the
/// lease surely holds (the kernel revokes it after `lease-break-time`).
#[cfg(target_os = "linux")]
fn give_back(
    temp: &Path,
    path: &Path,
    file: &File,
    mut editors: SwappedOut,
    lease: &lease::Lease<'_>,
    note: Option<&lease::NoteLease>,
) {
    if !lease.holds() || !rewrite(file, &editors.bytes) {
        return;
    }
    // The editor may have been writing its file in place when it was read (the likeliest
    // reason the check failed): follow it a few times, so no one reads a partial copy.
    for _ in 0..3 {
        if !editors.refresh() || !rewrite(file, &editors.bytes) {
            break;
        }
    }
    if !lease.writer_waits() {
        return;
    }
    let theirs = editors.inode();
    if let Ok(meta) = editors.file.metadata() {
        let _ = file.set_permissions(meta.permissions());
    }
    // Put back, it holds the editor's bytes: a crash before it is unmarked then removes
    // the swapped-out copy instead of putting it over a save made into our file.
    mark::set_held(file, temp, &content_hash(&editors.bytes));
    if file.sync_all().is_err() {
        return;
    }
    #[cfg(test)]
    BEFORE_PUT_BACK.with(|hook| {
        if let Some(hook) = hook.borrow_mut().as_mut() {
            hook(temp, path);
        }
    });
    // A writer waiting on the editor's own file comes first: it is at the path, and
    // would save into a removed file if ours took its place.
    let note_writer = || note.is_some_and(|n| n.writer_waits_on(theirs));
    if !lease.holds() || inode_at(path) != theirs || !editors.unchanged() || note_writer() {
        return;
    }
    if renameat2(temp, path, libc::RENAME_EXCHANGE).is_ok()
        && (inode_at(temp) != theirs || !editors.unchanged() || note_writer())
    {
        // The editor saved in the instant since: that save goes back to `path`.
        let _ = renameat2(temp, path, libc::RENAME_EXCHANGE);
    }
}

/// Replace an open file's bytes with `bytes` through `file`; false if that failed. The
/// space is reserved first, so a full disk stops it before anything is written where
/// blocks are overwritten in place (ext4, xfs, tmpfs; a copy-on-write filesystem may
/// still run out halfway).
#[cfg(target_os = "linux")]
fn rewrite(file: &File, bytes: &[u8]) -> bool {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    if !bytes.is_empty() {
        let len = libc::off_t::try_from(bytes.len()).unwrap_or(libc::off_t::MAX);
        // SAFETY: `file` is an open descriptor for the duration of the call.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, len) };
        // Only a lack of space stops it; a filesystem or sandbox without the call does not.
        let errno = (rc != 0).then(|| std::io::Error::last_os_error().raw_os_error());
        if matches!(errno, Some(Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG))) {
            return false;
        }
    }
    file.write_all_at(bytes, 0).is_ok() && file.set_len(bytes.len() as u64).is_ok()
}

/// Leases held through a swap: a write lease on our temp file while it sits at a note's
/// path (an open of it by anyone, our own threads too, waits until the lease is let go,
/// when it is dropped or the file closed), and a read lease on the note's own file (an
/// open of it for writing waits likewise).
#[cfg(target_os = "linux")]
mod lease {
    use std::fs::File;
    use std::os::fd::AsRawFd;
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    pub struct Lease<'a> {
        file: &'a File,
        taken: Instant,
    }

    /// Kept between the lease's age and the kernel's `lease-break-time`.
    const MARGIN: Duration = Duration::from_secs(2);

    /// How long the kernel lets an opener wait before it revokes a lease
    /// (`/proc/sys/fs/lease-break-time`, 45 s unless changed).
    fn break_time() -> Duration {
        static TIME: OnceLock<Duration> = OnceLock::new();
        *TIME.get_or_init(|| {
            std::fs::read_to_string("/proc/sys/fs/lease-break-time")
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .map_or(Duration::from_secs(45), Duration::from_secs)
        })
    }

    impl<'a> Lease<'a> {
        /// The lease on `file`, or none where it cannot be had (another open of the file,
        /// a filesystem without leases, `fs.leases-enable` off).
        pub fn take(file: &'a File) -> Option<Lease<'a>> {
            quiet_lease_breaks();
            // SAFETY: `file` is an open descriptor for the duration of the call.
            let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) };
            (rc == 0).then(|| Lease {
                file,
                taken: Instant::now(),
            })
        }

        /// Whether the lease surely still holds: an opener waits at most the kernel's
        /// break time, counted from its open, which came after the lease was taken.
        pub fn holds(&self) -> bool {
            self.taken.elapsed() + MARGIN < break_time()
        }

        /// Whether an open for writing (or a truncate) waits on the lease: a lease being
        /// broken reads back as the type it is to become, none for a writer.
        pub fn writer_waits(&self) -> bool {
            // SAFETY: the descriptor is open while `self` borrows it.
            unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_GETLEASE) == libc::F_UNLCK }
        }
    }

    /// A read lease on a note's own file, through a read-only open of it: none can be had
    /// while another open of the file writes, and an open for writing (or a truncate) made
    /// while it holds waits until it is let go (on drop).
    pub struct NoteLease {
        file: File,
        inode: u64,
    }

    /// The note is open for writing (by an editor, or any other program).
    pub struct OpenForWriting;

    impl NoteLease {
        /// The lease on the file at `path`; `Ok(None)` where none can be had for another
        /// reason (a file not ours, a filesystem without leases, `fs.leases-enable` off, a
        /// symlink or nothing at `path`): the swap then goes on without it.
        pub fn take(path: &std::path::Path) -> Result<Option<NoteLease>, OpenForWriting> {
            use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
            quiet_lease_breaks();
            // Non-blocking: a FIFO is not waited on, nor another holder's write lease.
            let Ok(file) = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(path)
            else {
                return Ok(None);
            };
            let Ok(meta) = file.metadata() else {
                return Ok(None);
            };
            // SAFETY: `file` is an open descriptor for the duration of the call.
            let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK) };
            if rc == 0 {
                return Ok(Some(NoteLease {
                    file,
                    inode: meta.ino(),
                }));
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EAGAIN) if refused_only_for_writers(&file) => Err(OpenForWriting),
                Some(libc::EAGAIN) => {
                    static SAID: std::sync::Once = std::sync::Once::new();
                    SAID.call_once(|| {
                        tracing::info!(
                            "the vault's filesystem refused a lease on a note and is not one \
                             known as local: writes go on without checking for a program \
                             that has the note open for writing"
                        )
                    });
                    Ok(None)
                }
                _ => Ok(None),
            }
        }

        /// Whether the lease still guards the file numbered `inode` (the one swapped out):
        /// it is that file's, and no open for writing waits on it. (The kernel times a
        /// lease out only once an opener waits on it, so one that none waits on holds.)
        pub fn guards(&self, inode: Option<u64>) -> bool {
            inode == Some(self.inode) && !self.writer_waits()
        }

        /// Whether an open for writing (or a truncate) waits on the lease of the file
        /// numbered `inode`: false for another file.
        pub fn writer_waits_on(&self, inode: Option<u64>) -> bool {
            inode == Some(self.inode) && self.writer_waits()
        }

        /// Whether an open for writing (or a truncate) waits on the lease (a read lease
        /// being broken, or revoked, reads back as none).
        fn writer_waits(&self) -> bool {
            // SAFETY: the descriptor is open while `self` holds it.
            unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_GETLEASE) != libc::F_RDLCK }
        }
    }

    /// Whether a read lease refused with `EAGAIN` on `file`'s filesystem means another
    /// open of the file writes. True on the local filesystems, whose leases are the
    /// kernel's own (`generic_setlease`); not on a network filesystem, where `EAGAIN` also
    /// means the server gave no delegation (NFS) or oplock (SMB): every write of every
    /// note would then be refused. Unknown filesystems go without the lease.
    pub fn refused_only_for_writers(file: &File) -> bool {
        // From <linux/magic.h>: ext2/3/4, xfs, btrfs, tmpfs, f2fs, overlayfs, bcachefs,
        // zfs, reiserfs, jfs, nilfs2, vfat, exfat, ntfs3, hfsplus, ecryptfs, fuse.
        const LOCAL: [u32; 17] = [
            0xEF53,
            0x5846_5342,
            0x9123_683E,
            0x0102_1994,
            0xF2F5_2010,
            0x794C_7630,
            0xCA45_1A4E,
            0x2FC1_2FC1,
            0x5265_4973,
            0x3153_464A,
            0x3434,
            0x4D44,
            0x2011_BAB0,
            0x7366_746E,
            0x482B,
            0xF15F,
            0x6573_5546,
        ];
        // SAFETY: `statfs` is plain data, for which all zero bytes are a valid value.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: `file` is an open descriptor and `st` a valid buffer during the call.
        if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
            return false;
        }
        // The type is a C long on some targets, an int on others: its low 32 bits.
        #[allow(
            clippy::unnecessary_cast,
            reason = "the field's type differs by target"
        )]
        let magic = (st.f_type as i64 & 0xFFFF_FFFF) as u32;
        LOCAL.contains(&magic)
    }

    impl Drop for NoteLease {
        fn drop(&mut self) {
            // SAFETY: as above.
            unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
        }
    }

    impl Drop for Lease<'_> {
        fn drop(&mut self) {
            // SAFETY: as above.
            unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
        }
    }

    /// A lease break notifies its holder with SIGIO, whose default action ends the
    /// process. Nothing here needs the notice (a lease is let go within the swap), so a
    /// SIGIO left at its default is ignored, once per process.
    fn quiet_lease_breaks() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: reads the current action, then sets SIG_IGN only over SIG_DFL.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGIO, std::ptr::null(), &mut old) == 0
                    && old.sa_sigaction == libc::SIG_DFL
                {
                    libc::signal(libc::SIGIO, libc::SIG_IGN);
                }
            }
        });
    }
}

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
mod tests {
    use super::*;

    /// Run `write` with `editor` playing an editor right after the exchange.
    fn with_editor<T>(editor: impl FnMut(&Path, &Path) + 'static, write: impl FnOnce() -> T) -> T {
        AFTER_EXCHANGE.with(|h| *h.borrow_mut() = Some(Box::new(editor)));
        let out = write();
        AFTER_EXCHANGE.with(|h| *h.borrow_mut() = None);
        out
    }

    /// [`with_editor`], the editor having saved `saved` in place before the swap (after
    /// the caller's read: the check then fails).
    fn saved_first<T>(
        saved: &'static [u8],
        editor: impl FnMut(&Path, &Path) + 'static,
        write: impl FnOnce() -> T,
    ) -> T {
        BEFORE_SWAP.with(|h| {
            *h.borrow_mut() = Some(Box::new(move |_: &Path, path: &Path| {
                fs::write(path, saved).unwrap()
            }))
        });
        let out = with_editor(editor, write);
        BEFORE_SWAP.with(|h| *h.borrow_mut() = None);
        out
    }

    /// The names of the files in `dir`.
    fn names(dir: &Path) -> Vec<std::ffi::OsString> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect()
    }

    /// An opener of the note on another thread, started by an editor hook; what it read.
    #[cfg(target_os = "linux")]
    type Opener = std::sync::Arc<std::sync::Mutex<Option<std::thread::JoinHandle<Vec<u8>>>>>;

    /// Start `open` of `path` on another thread, kept in `slot`, and return once it waits
    /// on our lease.
    #[cfg(target_os = "linux")]
    fn open_waiting(
        slot: &Opener,
        path: &Path,
        open: impl FnOnce(&Path) -> Vec<u8> + Send + 'static,
    ) {
        let at = path.to_path_buf();
        *slot.lock().unwrap() = Some(std::thread::spawn(move || open(&at)));
        wait_for_a_waiting_open(path);
    }

    /// What the opener in `slot` read, once it is done.
    #[cfg(target_os = "linux")]
    fn opened(slot: &Opener) -> Vec<u8> {
        slot.lock().unwrap().take().unwrap().join().unwrap()
    }

    /// An appender that waits on our file (so it is put back for it).
    #[cfg(target_os = "linux")]
    fn append(path: &Path) -> Vec<u8> {
        use std::io::Write as _;
        let mut f = fs::OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(b" + appended").unwrap();
        Vec::new()
    }

    /// A write to `a.md` read at `v1`, refused (the editor saved `editor 1` in place before
    /// the exchange) while an appender waits on our file; `editor` plays the editor again
    /// right before our file is put back for the appender. The note's path.
    #[cfg(target_os = "linux")]
    fn put_back_raced_by(
        dir: &Path,
        editor: impl FnMut(&Path, &Path) + 'static,
    ) -> std::path::PathBuf {
        let path = dir.join("a.md");
        atomic_write(&path, b"v1", &Expect::Absent).unwrap();
        BEFORE_PUT_BACK.with(|hook| *hook.borrow_mut() = Some(Box::new(editor)));
        let writer = Opener::default();
        let slot = writer.clone();
        let err = saved_first(
            b"editor 1",
            move |_, path| open_waiting(&slot, path, append),
            || atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"v1"))),
        )
        .unwrap_err();
        BEFORE_PUT_BACK.with(|hook| *hook.borrow_mut() = None);
        assert_eq!(err.reason, Reason::VERSION_MOVED);
        opened(&writer);
        path
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_editor_save_during_the_exchange_is_never_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.md");
        atomic_write(&path, b"v1", &Expect::Absent).unwrap();
        let expect = Expect::Hash(content_hash(b"v1"));
        // The editor, having saved in place before the exchange (the check then fails),
        // saves again by rename while our file is at the path.
        let err = saved_first(
            b"editor 1",
            |_, path| {
                let swp = path.with_file_name(".a.md.swp");
                fs::write(&swp, b"editor 1\neditor 2").unwrap();
                fs::rename(&swp, path).unwrap();
            },
            || atomic_write(&path, b"ours", &expect),
        )
        .unwrap_err();
        assert_eq!(err.reason, Reason::VERSION_MOVED);
        assert_eq!(fs::read(&path).unwrap(), b"editor 1\neditor 2");
        // Only the editor's file is left: no temp file of ours.
        assert_eq!(names(dir.path()), ["a.md"]);
        // The in-place save alone: swapped back, the editor's bytes stay.
        let err = saved_first(
            b"editor 3",
            |_, _| {},
            || {
                atomic_write(
                    &path,
                    b"ours",
                    &Expect::Hash(content_hash(b"editor 1\neditor 2")),
                )
            },
        )
        .unwrap_err();
        assert_eq!(err.reason, Reason::VERSION_MOVED);
        assert_eq!(fs::read(&path).unwrap(), b"editor 3");
    }

    /// Wait until an open of the file at `path` waits on our lease (`/proc/locks` shows
    /// the lease as being broken).
    #[cfg(target_os = "linux")]
    fn wait_for_a_waiting_open(path: &Path) {
        use std::os::unix::fs::MetadataExt;
        let ino = fs::symlink_metadata(path).unwrap().ino();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let locks = fs::read_to_string("/proc/locks").unwrap();
            if locks
                .lines()
                .any(|l| l.contains("BREAKING") && l.contains(&format!(":{ino} ")))
            {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no open waited on the lease:\n{locks}"
            );
            std::thread::yield_now();
        }
    }

    /// Whether the folder of `dir` gives leases (ext4, xfs, btrfs, tmpfs do; some FUSE
    /// and network filesystems, or `fs.leases-enable = 0`, do not).
    #[cfg(target_os = "linux")]
    fn leases_here(dir: &Path) -> bool {
        let probe = File::create(dir.join("probe")).unwrap();
        let lease = lease::Lease::take(&probe).is_some();
        drop(probe);
        fs::remove_file(dir.join("probe")).unwrap();
        if !lease {
            eprintln!("SKIPPED: no file leases on {}", dir.display());
        }
        lease
    }

    /// Someone opens the path while our file is there and the check then fails: they
    /// wait, and find the editor's bytes, never ours; one that writes saves at the path.
    #[cfg(target_os = "linux")]
    #[test]
    fn an_open_during_the_exchange_never_sees_our_bytes_when_the_check_fails() {
        let dir = tempfile::tempdir().unwrap();
        if !leases_here(dir.path()) {
            return;
        }
        let path = dir.path().join("a.md");
        atomic_write(&path, b"v1", &Expect::Absent).unwrap();
        let expect = Expect::Hash(content_hash(b"v1"));
        // The editor saved in place before the exchange (so the check fails), then reads
        // the note again while our file is at the path.
        let reader = Opener::default();
        let slot = reader.clone();
        let err = saved_first(
            b"editor 1",
            move |_, path| open_waiting(&slot, path, |at| fs::read(at).unwrap()),
            || atomic_write(&path, b"ours", &expect),
        )
        .unwrap_err();
        assert_eq!(err.reason, Reason::VERSION_MOVED);
        let read = opened(&reader);
        assert_eq!(
            read,
            b"editor 1",
            "the reader saw {:?}",
            String::from_utf8_lossy(&read)
        );
        assert_eq!(fs::read(&path).unwrap(), b"editor 1");

        // Now it saves in place while our file is at the path: the save is at the path.
        // Our file, put back for it, is marked as holding the editor's bytes by then.
        let held = std::rc::Rc::new(std::cell::RefCell::new(None));
        let seen = held.clone();
        BEFORE_PUT_BACK.with(|hook| {
            *hook.borrow_mut() = Some(Box::new(move |temp: &Path, _: &Path| {
                *seen.borrow_mut() = mark::of(temp).map(|m| m.held);
            }))
        });
        let writer = Opener::default();
        let slot = writer.clone();
        let err = saved_first(
            b"editor 2",
            move |_, path| {
                open_waiting(&slot, path, |at| {
                    fs::write(at, b"editor 2\neditor 3").unwrap();
                    // Unmarked before the lease was let go.
                    assert_eq!(mark::of(at), None);
                    Vec::new()
                });
            },
            || atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"editor 1"))),
        )
        .unwrap_err();
        assert_eq!(err.reason, Reason::VERSION_MOVED);
        BEFORE_PUT_BACK.with(|hook| *hook.borrow_mut() = None);
        opened(&writer);
        if marks_here(dir.path()) {
            assert_eq!(*held.borrow(), Some(content_hash(b"editor 2")));
        }
        assert_eq!(fs::read(&path).unwrap(), b"editor 2\neditor 3");
        assert_eq!(names(dir.path()), ["a.md"], "no temp file is left behind");
        assert_eq!(mark::of(&path), None, "our file, put back, is unmarked");

        // And when the check passes, a reader that waited reads our write.
        let reader = Opener::default();
        let slot = reader.clone();
        let expect = Expect::Hash(content_hash(b"editor 2\neditor 3"));
        with_editor(
            move |_, path| {
                open_waiting(&slot, path, |at| {
                    let read = fs::read(at).unwrap();
                    assert_eq!(mark::of(at), None, "unmarked before the lease was let go");
                    read
                })
            },
            || atomic_write(&path, b"ours", &expect),
        )
        .unwrap();
        assert_eq!(opened(&reader), b"ours");
    }

    /// A writer waits on our file, and the editor saves by rename right before our file
    /// is put back for it: the editor's save stays at the path.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_rename_save_before_the_put_back_stays() {
        let dir = tempfile::tempdir().unwrap();
        if !leases_here(dir.path()) {
            return;
        }
        let path = put_back_raced_by(dir.path(), |_, path| {
            let swp = path.with_file_name(".a.md.swp");
            fs::write(&swp, b"editor 2").unwrap();
            fs::rename(&swp, path).unwrap();
        });
        assert_eq!(fs::read(path).unwrap(), b"editor 2");
        assert_eq!(names(dir.path()), ["a.md"], "no temp file is left behind");
    }

    /// The note is renamed while our file is at its path and the check then fails: the
    /// note, under its new name, holds the editor's bytes, not ours.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_note_renamed_during_the_exchange_keeps_the_editors_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.md");
        let moved_to = dir.path().join("b.md");
        atomic_write(&path, b"v1", &Expect::Absent).unwrap();
        let to = moved_to.clone();
        let err = saved_first(
            b"editor 1",
            move |_, path| fs::rename(path, &to).unwrap(),
            || atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"v1"))),
        )
        .unwrap_err();
        assert_eq!(err.reason, Reason::VERSION_MOVED);
        assert_eq!(fs::read(&moved_to).unwrap(), b"editor 1");
        assert_eq!(names(dir.path()), ["b.md"], "no temp file is left behind");
    }

    /// As above, with the editor writing its file in place instead: that write stays.
    #[cfg(target_os = "linux")]
    #[test]
    fn an_in_place_save_before_the_put_back_stays() {
        let dir = tempfile::tempdir().unwrap();
        if !leases_here(dir.path()) {
            return;
        }
        // It writes the file at the path, the editor's own (back there), which waits on
        // the note's lease: our file is not put back for the appender, whose append goes
        // into it and is lost (a second program saving while another waits).
        let editor = Opener::default();
        let slot = editor.clone();
        let path = put_back_raced_by(dir.path(), move |_, path| {
            open_waiting(&slot, path, |at| {
                fs::write(at, b"editor 1, then 2").unwrap();
                Vec::new()
            })
        });
        opened(&editor);
        assert_eq!(fs::read(&path).unwrap(), b"editor 1, then 2");
        assert_eq!(names(dir.path()), ["a.md"], "no temp file is left behind");
    }

    /// Where no lease can be had on the note's file (a file not ours), the content check
    /// alone stands: an editor writing the swapped-out file in place during the check (as
    /// through an `open` made before the exchange) has its bytes back at the path.
    #[cfg(target_os = "linux")]
    #[test]
    fn without_the_notes_lease_an_in_place_save_during_the_check_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.md");
        atomic_write(&path, b"v1", &Expect::Absent).unwrap();
        NO_NOTE_LEASE.set(true);
        let err = with_editor(
            |temp, _| fs::write(temp, b"editor 1").unwrap(),
            || atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"v1"))),
        )
        .unwrap_err();
        NO_NOTE_LEASE.set(false);
        assert_eq!(err.reason, Reason::VERSION_MOVED);
        assert_eq!(fs::read(&path).unwrap(), b"editor 1");
        assert_eq!(names(dir.path()), ["a.md"], "no temp file is left behind");
    }

    /// The filesystem test of a refused lease agrees with the mount table: the local
    /// filesystems tests run on are known as local (else a note open for writing would go
    /// unnoticed there), and `/proc` (not a filesystem notes live on) is not.
    #[cfg(target_os = "linux")]
    #[test]
    fn local_filesystems_are_known_as_local() {
        use std::os::unix::ffi::OsStringExt;
        let dir = tempfile::tempdir().unwrap();
        let probe = dir.path().join("probe");
        fs::write(&probe, b"x").unwrap();
        let at = fs::canonicalize(&probe).unwrap();
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
        // The mount the probe is under: the longest mount point that is a prefix (its
        // spaces and the like written as octal escapes), the last such (the top one).
        let unescape = |p: &str| {
            let (b, mut out, mut i) = (p.as_bytes(), Vec::new(), 0);
            while i < b.len() {
                let octal = (b[i] == b'\\')
                    .then(|| p.get(i + 1..i + 4))
                    .flatten()
                    .and_then(|o| u8::from_str_radix(o, 8).ok());
                match octal {
                    Some(c) => {
                        out.push(c);
                        i += 4;
                    }
                    None => {
                        out.push(b[i]);
                        i += 1;
                    }
                }
            }
            std::path::PathBuf::from(std::ffi::OsString::from_vec(out))
        };
        let mut under: Option<(usize, String)> = None;
        for l in mountinfo.lines() {
            let Some((left, right)) = l.split_once(" - ") else {
                continue;
            };
            let (Some(point), Some(fstype)) = (left.split(' ').nth(4), right.split(' ').next())
            else {
                continue;
            };
            let point = unescape(point);
            let len = point.as_os_str().len();
            if at.starts_with(&point) && under.as_ref().is_none_or(|(n, _)| len >= *n) {
                under = Some((len, fstype.to_string()));
            }
        }
        let fstype = under.unwrap().1;
        let local = watches_open_writers(&probe);
        if ["ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay"].contains(&&*fstype) {
            assert!(local, "{fstype} is not known as local");
        } else {
            eprintln!("{fstype}: local = {local}");
        }
        assert!(!watches_open_writers(Path::new("/proc/self/status")));
    }

    /// A program holds the note open for writing (an editor about to save in place through
    /// it): the write is refused before anything is swapped, and that save is the note's.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_note_open_for_writing_is_not_replaced_under_its_writer() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        if !leases_here(dir.path()) {
            return;
        }
        let path = dir.path().join("a.md");
        atomic_write(&path, b"v1", &Expect::Absent).unwrap();
        if !lease::refused_only_for_writers(&File::open(&path).unwrap()) {
            eprintln!("SKIPPED: not a filesystem known to be local");
            return;
        }
        let held = fs::OpenOptions::new().write(true).open(&path).unwrap();
        let err = atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"v1"))).unwrap_err();
        assert_eq!(err.reason, Reason::VERSION_MOVED);
        assert!(err.message.contains("open for writing"), "{}", err.message);
        assert_eq!(fs::read(&path).unwrap(), b"v1");
        assert_eq!(names(dir.path()), ["a.md"], "no temp file is left behind");
        held.set_len(0).unwrap();
        held.write_all_at(b"editor", 0).unwrap();
        drop(held);
        assert_eq!(fs::read(&path).unwrap(), b"editor");
        // Once it is closed the note is written; a program reading it never stops that.
        let reader = File::open(&path).unwrap();
        atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"editor"))).unwrap();
        drop(reader);
        assert_eq!(fs::read(&path).unwrap(), b"ours");
    }

    /// An editor's open for writing found the note's file before the exchange and reaches
    /// it during the check (the file is unchanged so far): the swap is undone, and the
    /// editor's save lands in the note at its path, not in a removed file.
    #[cfg(target_os = "linux")]
    #[test]
    fn an_in_place_save_reaching_the_note_during_the_check_is_never_removed() {
        let dir = tempfile::tempdir().unwrap();
        if !leases_here(dir.path()) {
            return;
        }
        let path = dir.path().join("a.md");
        atomic_write(&path, b"v1", &Expect::Absent).unwrap();
        let writer = Opener::default();
        let slot = writer.clone();
        // After the exchange the note's file is under the temp name: an open of that name
        // finds the file the editor's open found.
        let err = with_editor(
            move |temp, _| {
                open_waiting(&slot, temp, |at| {
                    fs::write(at, b"editor").unwrap();
                    Vec::new()
                })
            },
            || atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"v1"))),
        )
        .unwrap_err();
        assert_eq!(err.reason, Reason::VERSION_MOVED);
        opened(&writer);
        assert_eq!(fs::read(&path).unwrap(), b"editor");
        assert_eq!(names(dir.path()), ["a.md"], "no temp file is left behind");
    }

    /// A temp dir whose files keep user extended attributes (the marks), or `None` (the
    /// test is skipped, and says so) where they do not.
    #[cfg(target_os = "linux")]
    fn marked_dir() -> Option<tempfile::TempDir> {
        let dir = tempfile::tempdir().unwrap();
        marks_here(dir.path()).then_some(dir)
    }

    /// Whether files in `dir` keep our mark (user extended attributes); else a line
    /// says the test is skipped.
    #[cfg(target_os = "linux")]
    fn marks_here(dir: &Path) -> bool {
        let probe = dir.join("probe");
        let file = File::create(&probe).unwrap();
        mark::set(&file, OsStr::new("probe"), OsStr::new("p"), "x", "y");
        let kept = mark::of(&probe).is_some();
        fs::remove_file(&probe).unwrap();
        if !kept {
            eprintln!(
                "SKIPPED: {} keeps no user extended attributes",
                dir.display()
            );
        }
        kept
    }

    use std::ffi::OsStr;

    /// A write of `ours` to `path` (holding `v1`) cut short right after the exchange, as
    /// a crash would leave it: `editor` (if any) saved in place just before, so its bytes
    /// are what was swapped out. The temp file's path.
    #[cfg(target_os = "linux")]
    fn cut_short_after_the_exchange(path: &Path, editor: Option<&[u8]>) -> std::path::PathBuf {
        let temp = prepare(path, b"ours", &Expect::Hash(content_hash(b"v1"))).unwrap();
        temp.sync().unwrap();
        renameat2(&temp.temp, path, libc::RENAME_EXCHANGE).unwrap();
        if let Some(bytes) = editor {
            fs::write(&temp.temp, bytes).unwrap();
        }
        let left = temp.temp.clone();
        // The crash: nothing of the write's own clean-up runs.
        std::mem::forget(temp);
        assert_eq!(fs::read(path).unwrap(), b"ours");
        left
    }

    /// A fresh `a.md` holding `v1` in `dir` (whatever was there before removed).
    fn v1(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("a.md");
        let _ = fs::remove_file(&path);
        atomic_write(&path, b"v1", &Expect::Absent).unwrap();
        path
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn only_the_exchange_window_carries_the_mark() {
        let Some(dir) = marked_dir() else {
            return;
        };
        let path = v1(dir.path());
        assert_eq!(mark::of(&path), None, "a create is never marked");
        // In the window: our file, at the path, names the temp file that holds the note.
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let saw = seen.clone();
        with_editor(
            move |temp, path| {
                saw.borrow_mut().push((
                    mark::of(path),
                    temp.file_name().unwrap().as_encoded_bytes().to_vec(),
                    mark::of(temp),
                ))
            },
            || atomic_write(&path, b"v2", &Expect::Hash(content_hash(b"v1"))),
        )
        .unwrap();
        let (at_path, temp_name, at_temp) = seen.borrow_mut().pop().unwrap();
        assert!(temp_name.starts_with(b".notevault-tmp-m") && temp_name.ends_with(b"-a.md"));
        assert_eq!(
            at_path,
            Some(mark::Mark {
                name: temp_name,
                expect: content_hash(b"v1"),
                held: content_hash(b"v2"),
                note: b"a.md".to_vec(),
            })
        );
        assert_eq!(at_temp, None);
        // Decided either way: nothing is left marked.
        assert_eq!(mark::of(&path), None, "a write that landed");
        let err = saved_first(
            b"editor",
            |_, _| {},
            || atomic_write(&path, b"v3", &Expect::Hash(content_hash(b"v2"))),
        )
        .unwrap_err();
        assert_eq!(err.reason, Reason::VERSION_MOVED);
        assert_eq!(fs::read(&path).unwrap(), b"editor");
        assert_eq!(mark::of(&path), None, "a write refused");
        assert_eq!(names(dir.path()), ["a.md"]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_note_swapped_out_by_a_write_cut_short_goes_back() {
        let Some(dir) = marked_dir() else {
            return;
        };
        let path = v1(dir.path());
        // The editor's save, which the check would have refused to replace, is back.
        let temp = cut_short_after_the_exchange(&path, Some(b"editor"));
        assert_eq!(
            resolve_leftover(&temp).unwrap(),
            Leftover::PutBack(path.clone())
        );
        assert_eq!(fs::read(&path).unwrap(), b"editor");
        assert_eq!(names(dir.path()), ["a.md"]);
        assert_eq!(mark::of(&path), None);
        // A write whose check would have passed landed: it stays (the start records it as
        // the write, and the retry gets its receipt).
        let path = v1(dir.path());
        let temp = cut_short_after_the_exchange(&path, None);
        assert_eq!(resolve_leftover(&temp).unwrap(), Leftover::Removed);
        assert_eq!(fs::read(&path).unwrap(), b"ours");
        assert_eq!(names(dir.path()), ["a.md"]);
        assert_eq!(mark::of(&path), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_save_made_after_the_crash_is_never_replaced() {
        let Some(dir) = marked_dir() else {
            return;
        };
        let copy = dir.path().join("a (recovered).md");
        // Saved in place after the crash: both saves stay, the one swapped out beside it.
        let path = v1(dir.path());
        let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
        fs::write(&path, b"ours, edited after the crash").unwrap();
        assert_eq!(
            resolve_leftover(&temp).unwrap(),
            Leftover::Recovered {
                note: path.clone(),
                copy: copy.clone()
            }
        );
        assert_eq!(fs::read(&path).unwrap(), b"ours, edited after the crash");
        assert_eq!(fs::read(&copy).unwrap(), b"editor 1");
        assert_eq!(mark::of(&path), None);
        fs::remove_file(&copy).unwrap();
        // When what was swapped out is the version the write read, it is in history: removed.
        let path = v1(dir.path());
        let temp = cut_short_after_the_exchange(&path, None);
        fs::write(&path, b"edited after the crash").unwrap();
        assert_eq!(resolve_leftover(&temp).unwrap(), Leftover::Removed);
        assert_eq!(fs::read(&path).unwrap(), b"edited after the crash");
        assert_eq!(names(dir.path()), ["a.md"]);
        // An editor that copies attributes saved by rename: its file carries the mark.
        let path = v1(dir.path());
        let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
        let copied = mark::of(&path).unwrap();
        let swp = dir.path().join(".a.md.swp");
        let file = File::create(&swp).unwrap();
        fs::write(&swp, b"editor 2").unwrap();
        let os = |b: &[u8]| <OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b).to_owned();
        mark::set(
            &file,
            &os(&copied.name),
            &os(&copied.note),
            &copied.expect,
            &copied.held,
        );
        assert_eq!(mark::of(&swp), Some(copied));
        fs::rename(&swp, &path).unwrap();
        assert!(matches!(
            resolve_leftover(&temp).unwrap(),
            Leftover::Recovered { .. }
        ));
        assert_eq!(fs::read(&path).unwrap(), b"editor 2");
        assert_eq!(fs::read(&copy).unwrap(), b"editor 1");
        assert_eq!(mark::of(&path), None);
        fs::remove_file(&copy).unwrap();
        // Cut short after our file, given the editor's bytes, was put back for a writer,
        // which then saved into it: its save stays, and the copy is removed.
        let path = v1(dir.path());
        let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
        let ours = File::options().write(true).open(&path).unwrap();
        assert!(rewrite(&ours, b"editor 1"));
        mark::set_held(&ours, &path, &content_hash(b"editor 1"));
        fs::write(&path, b"editor 1 + the writer's save").unwrap();
        assert_eq!(resolve_leftover(&temp).unwrap(), Leftover::Removed);
        assert_eq!(fs::read(&path).unwrap(), b"editor 1 + the writer's save");
        assert_eq!(names(dir.path()), ["a.md"]);
        assert_eq!(mark::of(&path), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_note_gone_or_renamed_after_the_crash_keeps_the_save_swapped_out() {
        let Some(dir) = marked_dir() else {
            return;
        };
        let copy = dir.path().join("a (recovered).md");
        let recovered = |temp: &Path, path: &Path| {
            assert_eq!(
                resolve_leftover(temp).unwrap(),
                Leftover::Recovered {
                    note: path.to_path_buf(),
                    copy: copy.clone()
                }
            );
            assert_eq!(fs::read(&copy).unwrap(), b"editor 1");
            fs::remove_file(&copy).unwrap();
        };
        // The note removed.
        let path = v1(dir.path());
        let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
        fs::remove_file(&path).unwrap();
        recovered(&temp, &path);
        assert!(names(dir.path()).is_empty());
        // Saved by a rename that keeps no attributes.
        let path = v1(dir.path());
        let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
        fs::write(dir.path().join("new"), b"editor 2").unwrap();
        fs::rename(dir.path().join("new"), &path).unwrap();
        recovered(&temp, &path);
        assert_eq!(fs::read(&path).unwrap(), b"editor 2");
        // Emacs's first save: the note renamed to a backup, a new file written. The save
        // swapped out goes beside the note, not over the backup, which is unmarked.
        let path = v1(dir.path());
        let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
        let backup = dir.path().join("a.md~");
        fs::rename(&path, &backup).unwrap();
        fs::write(&path, b"editor 2").unwrap();
        recovered(&temp, &path);
        assert_eq!(fs::read(&backup).unwrap(), b"ours");
        assert_eq!(mark::of(&backup), None);
        assert_eq!(fs::read(&path).unwrap(), b"editor 2");
        fs::remove_file(&backup).unwrap();
        // Removed, and the folder holds the same bytes anyway: nothing to keep.
        let path = v1(dir.path());
        let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
        fs::remove_file(&path).unwrap();
        fs::write(&path, b"editor 1").unwrap();
        assert_eq!(resolve_leftover(&temp).unwrap(), Leftover::Removed);
        assert_eq!(names(dir.path()), ["a.md"]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_recovered_copy_never_replaces_a_file_and_fits_a_name() {
        let Some(dir) = marked_dir() else {
            return;
        };
        let path = v1(dir.path());
        fs::write(dir.path().join("a (recovered).md"), b"taken").unwrap();
        let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
        fs::write(&path, b"editor 2").unwrap();
        let done = resolve_leftover(&temp).unwrap();
        let copy = dir.path().join("a (recovered 2).md");
        assert!(
            matches!(&done, Leftover::Recovered { copy: c, .. } if *c == copy),
            "{done:?}"
        );
        assert_eq!(
            fs::read(dir.path().join("a (recovered).md")).unwrap(),
            b"taken"
        );
        assert_eq!(fs::read(&copy).unwrap(), b"editor 1");
        // A name as long as a file name can be: the copy's is cut to fit.
        let long = dir.path().join(format!("{}.md", "é".repeat(126)));
        atomic_write(&long, b"v1", &Expect::Absent).unwrap();
        let temp = cut_short_after_the_exchange(&long, Some(b"editor 1"));
        fs::write(&long, b"editor 2").unwrap();
        let Leftover::Recovered { copy, .. } = resolve_leftover(&temp).unwrap() else {
            panic!("kept");
        };
        let name = copy.file_name().unwrap().to_str().unwrap();
        assert!(
            name.len() <= 255 && name.ends_with("é (recovered).md"),
            "{name}"
        );
        assert_eq!(fs::read(&copy).unwrap(), b"editor 1");
    }

    /// Set our mark's attribute on the file at `path` to `value` as written (an older
    /// form, or one a test makes up).
    #[cfg(target_os = "linux")]
    fn set_raw_mark(path: &Path, value: &[u8]) {
        assert!(mark::set_raw(path, value));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn what_a_mark_or_a_leftover_says_is_checked() {
        use std::os::unix::fs::PermissionsExt;
        let Some(dir) = marked_dir() else {
            return;
        };
        // A note name that leaves the folder is not followed: the marked file's own path.
        let path = v1(dir.path());
        let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
        let mut mark = mark::of(&path).unwrap();
        mark.note = b"../outside.md".to_vec();
        let value = [
            &mark.name[..],
            mark.expect.as_bytes(),
            mark.held.as_bytes(),
            &mark.note,
        ]
        .join(&b'\n');
        set_raw_mark(&path, &value);
        assert_eq!(
            resolve_leftover(&temp).unwrap(),
            Leftover::PutBack(path.clone())
        );
        assert_eq!(fs::read(&path).unwrap(), b"editor 1");
        assert!(!dir
            .path()
            .parent()
            .unwrap()
            .join("outside (recovered).md")
            .exists());
        assert_eq!(names(dir.path()), ["a.md"]);
        // An older mark (the temp file's name and the hashes, a plain temp name) still puts
        // the save back where the marked file is.
        let path = v1(dir.path());
        let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
        let old = temp.with_file_name(".notevault-tmp-0194d3a5c0de7000a000000000000002");
        fs::rename(&temp, &old).unwrap();
        let mark = mark::of(&path).unwrap();
        let value = [
            old.file_name().unwrap().as_encoded_bytes(),
            mark.expect.as_bytes(),
            mark.held.as_bytes(),
        ]
        .join(&b'\n');
        set_raw_mark(&path, &value);
        assert_eq!(
            resolve_leftover(&old).unwrap(),
            Leftover::PutBack(path.clone())
        );
        assert_eq!(fs::read(&path).unwrap(), b"editor 1");
        // A read-only save whose partner is gone is kept all the same.
        let path = v1(dir.path());
        let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
        fs::remove_file(&path).unwrap();
        fs::set_permissions(&temp, fs::Permissions::from_mode(0o444)).unwrap();
        let copy = dir.path().join("a (recovered).md");
        assert_eq!(
            resolve_leftover(&temp).unwrap(),
            Leftover::Recovered {
                note: path.clone(),
                copy: copy.clone()
            }
        );
        assert_eq!(fs::read(&copy).unwrap(), b"editor 1");
        // A start cut short between the copy's link and the temp file's removal: the
        // copy is found again, not made twice.
        let path = v1(dir.path());
        fs::remove_file(&copy).unwrap();
        let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
        fs::remove_file(&path).unwrap();
        fs::hard_link(&temp, &copy).unwrap();
        assert_eq!(
            resolve_leftover(&temp).unwrap(),
            Leftover::Recovered {
                note: path.clone(),
                copy: copy.clone()
            }
        );
        assert_eq!(names(dir.path()), ["a (recovered).md"]);
        fs::remove_file(&copy).unwrap();
        // A private note's copy stays private (its extension is kept).
        let private = dir.path().join("j.nvpriv");
        atomic_write(&private, b"v1", &Expect::Absent).unwrap();
        let temp = cut_short_after_the_exchange(&private, Some(b"sealed 1"));
        fs::remove_file(&private).unwrap();
        assert_eq!(
            resolve_leftover(&temp).unwrap(),
            Leftover::Recovered {
                note: private.clone(),
                copy: dir.path().join("j (recovered).nvpriv")
            }
        );
        fs::remove_file(dir.path().join("j (recovered).nvpriv")).unwrap();
        // Empty, unmarked (cut short between its creation and its mark): nothing to keep.
        let empty = dir
            .path()
            .join(".notevault-tmp-m0194d3a5c0de7000a000000000000003-b.md");
        fs::write(&empty, b"").unwrap();
        assert_eq!(resolve_leftover(&empty).unwrap(), Leftover::Removed);
        // A symlink named as ours is removed, its target untouched.
        let link = dir
            .path()
            .join(".notevault-tmp-m0194d3a5c0de7000a000000000000004-c.md");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert_eq!(resolve_leftover(&link).unwrap(), Leftover::Removed);
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn a_leftover_that_never_replaced_a_note_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = v1(dir.path());
        // Cut short before the exchange: the temp file carries its own mark.
        let temp = prepare(&path, b"ours", &Expect::Hash(content_hash(b"v1"))).unwrap();
        let left = temp.temp.clone();
        std::mem::forget(temp);
        assert_eq!(resolve_leftover(&left).unwrap(), Leftover::Removed);
        // A create's temp file carries none, and is named as before the mark.
        let temp = prepare(&dir.path().join("b.md"), b"new", &Expect::Absent).unwrap();
        let left = temp.temp.clone();
        std::mem::forget(temp);
        assert_eq!(resolve_leftover(&left).unwrap(), Leftover::Removed);
        // So is one from a version before the mark.
        fs::write(dir.path().join(".notevault-tmp-0194d3a5c0de70"), b"half").unwrap();
        assert_eq!(
            resolve_leftover(&dir.path().join(".notevault-tmp-0194d3a5c0de70")).unwrap(),
            Leftover::Removed
        );
        assert_eq!(fs::read(&path).unwrap(), b"v1");
        assert_eq!(names(dir.path()), ["a.md"]);
        // Only our temp files are touched.
        let err = resolve_leftover(&path).unwrap_err();
        assert!(err.to_string().contains("not a notevault temp file"));
        assert_eq!(fs::read(&path).unwrap(), b"v1");
    }

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
