//! Leases held through a swap: a write lease on our temp file while it sits at a note's
//! path (an open of it by anyone, our own threads too, waits until the lease is let go,
//! when it is dropped or the file closed), and a read lease on the note's own file (an
//! open of it for writing waits likewise).

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
