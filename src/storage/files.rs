//! The note-bytes half of the storage seam: where the write pipeline puts a note's new
//! bytes, moves a note, or puts one aside. Local mode's implementation is the vault
//! folder (`folder.rs`: atomic writes that never clobber an editor's save, `.trash/`);
//! hosted mode's keeps the bytes in the note's row, written by the recorder's
//! transaction, so its placements only check and remember.
//!
//! What a caller may count on in either implementation: a placement refused because the
//! note is no longer the version read (`expect`) changes nothing and is
//! `VERSION_MOVED` (or `NAME_COLLISION` where nothing was expected); what was placed
//! is durable once [`Placements::sync`] answered.

use std::time::SystemTime;

use crate::error::Result;

/// A vault's note bytes, as the write pipeline changes them.
pub trait NoteFiles: Send + Sync {
    /// A set of placements whose durability is settled together (one fsync per folder
    /// for writes applied as a group).
    fn placements(&self) -> Box<dyn Placements + '_>;

    /// When the note at `rel` was last modified, where the store knows (a file's mtime).
    fn modified(&self, rel: &str) -> Option<SystemTime>;

    /// Whether a change lands only with the transaction that records it (no file is
    /// placed before): then a write whose receipt that transaction keeps needs no intent
    /// stored ahead of it, as nothing can land without its receipt.
    fn lands_with_record(&self) -> bool {
        false
    }
}

/// Note changes under way. `expect` is the content hash of the version the change was
/// planned against (`None`: no note may be there).
pub trait Placements {
    /// Put `bytes` at `rel`.
    fn write(&mut self, rel: &str, bytes: &[u8], expect: Option<&str>) -> Result<()>;

    /// The first half of [`write`](Self::write), for writes applied together: the bytes
    /// are staged, and [`settle_prepared`](Self::settle_prepared) makes them all durable
    /// at once and puts each in place.
    fn prepare(&mut self, rel: &str, bytes: &[u8], expect: Option<&str>) -> Result<()>;

    /// Finish every prepared write, in the order prepared: one result each (a write
    /// whose note changed meanwhile is refused alone).
    fn settle_prepared(&mut self) -> Vec<Result<()>>;

    /// Move the note at `from` (holding `expect`) to `to`, with `rewrite` as its new
    /// bytes when given. A rewrite refused undoes the move.
    fn move_note(
        &mut self,
        from: &str,
        to: &str,
        expect: &str,
        rewrite: Option<&[u8]>,
    ) -> Result<()>;

    /// Put the note at `rel` (holding `expect`) aside: deleted, kept where a person can
    /// bring it back.
    fn trash(&mut self, rel: &str, expect: &str) -> Result<()>;

    /// Make every placement so far durable.
    fn sync(&mut self) -> Result<()>;
}
