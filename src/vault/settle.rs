//! An editor that saves in place truncates the note, then writes it: in between the file
//! is empty. Recorded, that moment is an empty revision (a history commit, and an op that
//! would hand devices an empty note) although the final state is right.
//!
//! The rule, for every observation that may be recorded (the watcher's batches, its
//! rescans, and reconcile on read): a note found empty that has content in the catalog is
//! looked at again (size, times and inode, every few milliseconds) before it is recorded.
//! - It changes (its content is back, or it is gone): observe it again.
//! - It stays empty and unchanged for [`QUIET`]: a person emptied it; it is recorded.
//! - It is still changing [`BOUND`] after the first look: nothing is recorded now. The
//!   change that keeps it moving comes back on its own (the watcher gets its event; the
//!   next read looks again).
//!
//! So a truncate-then-write is one revision whether the watcher sees its two events in
//! one batch or in two, and an emptied note is recorded about [`QUIET`] late.

use std::path::Path;
use std::sync::LazyLock;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::RwLock;

use crate::vault::catalog::Catalog;
use crate::vault::observe::{self, Observed};
use crate::vault::path::slug_of;

/// How long an emptied note must stay empty and unchanged to be recorded as empty.
pub const QUIET: Duration = Duration::from_millis(100);
/// How long after the first look an emptied note that keeps changing is left alone.
pub const BOUND: Duration = Duration::from_millis(250);
/// How often an emptied note is looked at.
const POLL: Duration = Duration::from_millis(2);

/// `content_hash` of a zero-length file.
static EMPTY_HASH: LazyLock<String> = LazyLock::new(|| crate::vault::content_hash(b""));

/// Observe the note at `rel` (vault-relative) to record it, with the rule above. `None`:
/// it is an emptied note still changing; record nothing now. The caller holds the write
/// lock, as for any observation that is recorded.
pub fn observe(
    root: &Path,
    catalog: &RwLock<Catalog>,
    rel: &str,
) -> std::io::Result<Option<Observed>> {
    let abs = root.join(rel);
    let started = Instant::now();
    loop {
        let observed = observe::observe(root, rel)?;
        if observed.size > 0 || !had_content(catalog, rel) {
            return Ok(Some(observed));
        }
        match watch_emptied(&abs, started) {
            Emptied::Changed => continue,
            Emptied::Settled => return Ok(Some(observed)),
            Emptied::Unsettled => {
                tracing::debug!(path = %rel, "an emptied note is still changing; not recorded yet");
                return Ok(None);
            }
        }
    }
}

/// The catalog has the note at `rel` with content.
fn had_content(catalog: &RwLock<Catalog>, rel: &str) -> bool {
    catalog
        .read()
        .get(slug_of(rel))
        .is_some_and(|n| n.content_hash != *EMPTY_HASH)
}

enum Emptied {
    Changed,
    Settled,
    Unsettled,
}

/// Look at an empty file until it changes, stays as it is for [`QUIET`], or [`BOUND`]
/// after `started` passes.
fn watch_emptied(abs: &Path, started: Instant) -> Emptied {
    let first = stamp(abs);
    // Written again (or gone) since it was read empty: the empty read is out of date,
    // however long the file now stays as it is (an editor's last save).
    if first.as_ref().is_none_or(|s| s.len > 0) {
        return if started.elapsed() >= BOUND {
            Emptied::Unsettled
        } else {
            Emptied::Changed
        };
    }
    let since = Instant::now();
    loop {
        std::thread::sleep(POLL);
        if stamp(abs) != first {
            return Emptied::Changed;
        }
        if since.elapsed() >= QUIET {
            return Emptied::Settled;
        }
        if started.elapsed() >= BOUND {
            return Emptied::Unsettled;
        }
    }
}

/// What tells one state of a file from the next without reading it: size, modification
/// and change times, inode (`None` when it is gone or unreadable).
#[derive(PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    #[cfg(unix)]
    changed: (i64, i64),
    #[cfg(unix)]
    inode: (u64, u64),
}

fn stamp(abs: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(abs).ok()?;
    #[cfg(unix)]
    use std::os::unix::fs::MetadataExt;
    Some(Stamp {
        len: meta.len(),
        modified: meta.modified().ok(),
        #[cfg(unix)]
        changed: (meta.ctime(), meta.ctime_nsec()),
        #[cfg(unix)]
        inode: (meta.dev(), meta.ino()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A note read empty and written before the first look is observed again, not
    /// recorded empty after `QUIET` (the last of an editor's in-place saves).
    #[test]
    fn a_note_written_since_it_was_read_empty_is_looked_at_again() {
        let dir = tempfile::tempdir().unwrap();
        let abs = dir.path().join("n.md");
        #[allow(clippy::disallowed_methods, reason = "a test's own temp folder")]
        std::fs::write(&abs, "# N\n\nsaved\n").unwrap();
        assert!(matches!(
            watch_emptied(&abs, Instant::now()),
            Emptied::Changed
        ));
        // Still empty and unchanged for QUIET: a person emptied it.
        #[allow(clippy::disallowed_methods, reason = "a test's own temp folder")]
        std::fs::write(&abs, "").unwrap();
        assert!(matches!(
            watch_emptied(&abs, Instant::now()),
            Emptied::Settled
        ));
    }
}
