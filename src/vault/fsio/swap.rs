//! The swap itself: our temp file and the note's exchanged in one step, the swapped-out
//! bytes checked, and the swap undone (the editor's bytes given back) when they moved.
//! See the module above for the whole story of the window and its leases.

use std::fs::{self, File};
use std::path::Path;

use super::*;

#[cfg(target_os = "linux")]
pub(super) fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> std::io::Result<()> {
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
pub(super) fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
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
pub(super) type Editor = Box<dyn FnMut(&Path, &Path)>;

#[cfg(test)]
thread_local! {
    /// Called before anything of the swap (an editor saving after the caller's check).
    pub(super) static BEFORE_SWAP: std::cell::RefCell<Option<Editor>> = std::cell::RefCell::new(None);
    pub(super) static AFTER_EXCHANGE: std::cell::RefCell<Option<Editor>> = std::cell::RefCell::new(None);
    /// Set: no lease is taken on the note's file (as where none can be had).
    pub(super) static NO_NOTE_LEASE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Called right before our file is put back at the path for a waiting writer.
    pub(super) static BEFORE_PUT_BACK: std::cell::RefCell<Option<Editor>> = std::cell::RefCell::new(None);
}

/// Put `temp` at `path`, atomically with the `expect` check where the OS allows it.
/// On success `temp` no longer exists. `ours`: the temp file, open (for its inode and
/// its lease).
pub(super) fn swap_in(
    temp: &Path,
    path: &Path,
    expect: &Expect,
    ours: Option<&File>,
) -> Result<()> {
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
pub(super) fn rewrite(file: &File, bytes: &[u8]) -> bool {
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
