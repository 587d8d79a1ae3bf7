//! When the index on disk is written: the overlay's pace, and the writer closed while
//! idle (an instance keeps many vaults open that are read, not written, and an open
//! writer holds threads and its queue's memory).

use std::time::Duration;

use tantivy::IndexWriter;

use super::super::schema::NoteDoc;
use super::{small_writer, Worker};

#[cfg(not(test))]
const PARK_AFTER: Duration = Duration::from_secs(30);
#[cfg(test)]
const PARK_AFTER: Duration = Duration::from_millis(100);

/// When the overlay goes to disk (besides 1,000 notes waiting): each commit on
/// disk costs a segment's fixed work (an indexing thread, its term table and columns,
/// files created), whatever it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pace {
    /// Writes paused this long.
    pub idle: Duration,
    /// The overlay's oldest change is this old.
    pub age: Duration,
    /// With nothing to write for this long, the writers are closed (their threads end),
    /// to be opened again by the next commit on disk.
    pub park: Duration,
    /// Whether closing them hands the process's free memory back to the system too (a
    /// daemon of one folder returns to its idle size). Not where many vaults each park
    /// a writer: each time, every thread would fault its freed pages in again.
    pub give_back: bool,
    /// When the writer ends (the service stops). Else the next open's start-up sync
    /// indexes what was left in memory (it compares every note's stamp).
    pub at_end: bool,
}

impl Pace {
    /// A folder's: the index on disk is what the next start trusts, soon after writes.
    pub const FOLDER: Pace = Pace {
        idle: Duration::from_secs(1),
        age: Duration::from_secs(10),
        park: PARK_AFTER,
        give_back: true,
        at_end: true,
    };
    /// A database's vault (hosted mode): the index on disk is a cache of the database,
    /// which the next open checks; searches read the overlay meanwhile. A vault written
    /// now and then would otherwise pay a commit on disk for each write, on every instance
    /// that has it open.
    pub const CACHE: Pace = Pace {
        idle: Duration::from_secs(60),
        age: Duration::from_secs(600),
        // Its next commit on disk waits for the idle time (unless 1,000 notes wait).
        park: Duration::from_secs(1),
        give_back: false,
        at_end: false,
    };
}

impl Worker {
    /// Whether the overlay goes to disk now that nothing came for a while: writes
    /// paused for the pace's idle time, or a failed commit's back-off is over.
    pub(super) fn flush_due(&self) -> bool {
        self.retry.failing()
            || self.sync_pending.is_some()
            || self
                .last_change
                .is_none_or(|t| t.elapsed() >= self.pace.idle)
    }

    /// The writer of the index on disk, opened if it is closed.
    pub(super) fn open_main(&mut self) -> tantivy::Result<&mut IndexWriter<NoteDoc>> {
        let writer = match self.main.take() {
            Some(w) => w,
            None => small_writer(&self.index)?,
        };
        Ok(self.main.insert(writer))
    }

    /// The writer is closed (the overlay has no writer of its own: `overlay.rs`).
    pub(super) fn parked(&self) -> bool {
        self.main.is_none()
    }

    /// Close the writers when nothing is left to write ([`Pace::park`]): the overlay is
    /// empty (on disk), no start-up sync or merge is pending.
    pub(super) fn park(&mut self) {
        if self.parked()
            || self.merging
            || self.unpublished()
            || !self.changed.is_empty()
            || self.sync_pending.is_some()
            || self.merge_at.is_some()
        {
            return;
        }
        if let Some(main) = self.main.take() {
            let _ = main.wait_merging_threads();
        }
        if self.pace.give_back {
            crate::memory::release_free_memory();
        }
        tracing::debug!("index writers closed while idle");
    }
}

impl super::SearchIndex {
    /// The writer's [`Pace`] from now on (a new index has [`Pace::FOLDER`]'s).
    pub fn set_pace(&self, pace: Pace) {
        self.send(super::Msg::Pace(pace));
    }
}
