//! Writers closed while idle: an instance keeps many vaults open that are read, not
//! written, and each open writer holds threads and its queue's memory.

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

    /// The overlay's writer, opened if it is closed.
    pub(super) fn open_overlay(&mut self) -> tantivy::Result<&mut IndexWriter<NoteDoc>> {
        let writer = match self.ram_writer.take() {
            Some(w) => w,
            None => small_writer(&self.ram)?,
        };
        Ok(self.ram_writer.insert(writer))
    }

    /// Both writers are closed.
    pub(super) fn parked(&self) -> bool {
        self.main.is_none() && self.ram_writer.is_none()
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
        drop(self.ram_writer.take());
        crate::memory::release_free_memory();
        tracing::debug!("index writers closed while idle");
    }
}
