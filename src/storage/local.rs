//! Local mode's stores behind the seam: `history.git` ([`History`]) for revisions.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use super::{CommitRequest, HistoryStatus, Revisions, Stored, Written};
use crate::error::Result;
use crate::history::{self, History};

impl Revisions for History {
    fn commit(&self, request: CommitRequest) -> mpsc::Receiver<Result<Written>> {
        History::commit(self, request)
    }

    fn flush(&self, timeout: Duration) {
        History::flush(self, timeout)
    }

    fn stop(&self) {
        History::stop(self)
    }

    fn status(&self) -> HistoryStatus {
        History::status(self)
    }

    fn note_lost_revisions(&self, count: u64) {
        History::note_lost_revisions(self, count)
    }

    fn read_at(&self, commit: &str, path: &str) -> Result<Stored> {
        history::read_at(History::git_dir(self), commit, path)
    }

    fn content_at_seq(&self, seq: i64, path: &str) -> Result<Stored> {
        history::content_at_seq(History::git_dir(self), seq, path)
    }

    fn git_dir(&self) -> Option<&Path> {
        Some(History::git_dir(self))
    }
}
