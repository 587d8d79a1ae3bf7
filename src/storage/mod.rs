//! The storage seam: what the write pipeline, the recorder and the queries ask of a
//! vault's durable stores, as traits, so that a second implementation (hosted mode:
//! PostgreSQL and an object store, no folder) can stand behind the same pipeline. One
//! implementation today, local mode's: `history.git` for revisions ([`local`]), SQLite
//! for metadata ([`metadata`]'s traits, implemented by `meta::Meta`), the vault folder
//! for note bytes ([`files`], [`folder`]).
//!
//! What a trait says is what a caller may count on in either mode: a revision's bytes
//! are read back by the revision (its commit) or by its seq; a commit is durable once its
//! receiver answers; a store that could not keep a revision says so (`Stored::Lost`,
//! `Stored::LeftOut`), never answers empty bytes.

pub mod blobs;
pub mod files;
pub mod folder;
pub mod local;
pub mod metadata;
pub mod presign;
pub mod rows;
mod s3_errors;
mod s3_upload;
pub mod upload;

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use crate::error::Result;
pub use crate::history::{Change, CommitRequest, Content, HistoryStatus, Stored, Written};

/// The revisions of a vault's notes and attachments: one commit per recorded batch, in
/// `committed_seq` order.
pub trait Revisions: Send + Sync {
    /// Queue `request`; the receiver answers once the commit is durable (or failed), or at
    /// once where the metadata transaction that follows makes it durable (hosted).
    fn commit(&self, request: CommitRequest) -> mpsc::Receiver<Result<Written>>;
    /// Wait up to `timeout` for every queued commit.
    fn flush(&self, timeout: Duration);
    /// Write what is queued, then stop taking commits.
    fn stop(&self);
    /// How far the store has come (`GET /v1/index-status` → `history`).
    fn status(&self) -> HistoryStatus;
    /// Count revisions whose bytes never reached the store.
    fn note_lost_revisions(&self, count: u64);
    /// What the commit `commit` holds of `path`.
    fn read_at(&self, commit: &str, path: &str) -> Result<Stored>;
    /// What the commit covering `seq` holds of `path`.
    fn content_at_seq(&self, seq: i64, path: &str) -> Result<Stored>;
    /// [`content_at_seq`](Self::content_at_seq) of each `(seq, path)`, in their order:
    /// one read where a store can (a follower takes in a page of another instance's
    /// changes under the vault's lock).
    fn contents_at_seqs(&self, at: &[(i64, &str)]) -> Result<Vec<Stored>> {
        at.iter()
            .map(|(seq, path)| self.content_at_seq(*seq, path))
            .collect()
    }
    /// The git repository behind the store, where there is one (a history bundle of an
    /// export, `check`); `None` for a store that is not git.
    fn git_dir(&self) -> Option<&Path>;
}
