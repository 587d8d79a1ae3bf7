//! The writer of the index on disk closed while idle: an instance keeps many vaults open
//! that are read, not written, and an open writer holds threads and its queue's memory.

use tantivy::IndexWriter;

use super::super::schema::NoteDoc;
use super::{small_writer, Worker};

impl Worker {
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

    /// Close the writers when nothing is left to write ([`super::PARK_AFTER`]): the overlay is
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
        crate::memory::release_free_memory();
        tracing::debug!("index writers closed while idle");
    }
}
