//! Hosted mode's note bytes: there is no folder. A note's bytes reach the database with
//! its revision (`revisions::PgRevisions` writes them, the metadata transaction names
//! them), so a placement has nothing to put anywhere. What a folder's placement checks
//! (that the note is still the version the change was planned against) holds by the
//! vault's fence: the change was planned, under it, against every change recorded
//! before, and the metadata transaction refuses a seq another process took.

use std::time::SystemTime;

use crate::error::Result;
use crate::storage::files::{NoteFiles, Placements};

pub struct PgFiles;

impl NoteFiles for PgFiles {
    fn placements(&self) -> Box<dyn Placements + '_> {
        Box::new(Nothing { prepared: 0 })
    }

    fn modified(&self, _rel: &str) -> Option<SystemTime> {
        None
    }

    fn lands_with_record(&self) -> bool {
        true
    }
}

struct Nothing {
    prepared: usize,
}

impl Placements for Nothing {
    fn write(&mut self, _rel: &str, _bytes: &[u8], _expect: Option<&str>) -> Result<()> {
        Ok(())
    }

    fn prepare(&mut self, _rel: &str, _bytes: &[u8], _expect: Option<&str>) -> Result<()> {
        self.prepared += 1;
        Ok(())
    }

    fn settle_prepared(&mut self) -> Vec<Result<()>> {
        (0..std::mem::take(&mut self.prepared))
            .map(|_| Ok(()))
            .collect()
    }

    fn move_note(
        &mut self,
        _from: &str,
        _to: &str,
        _expect: &str,
        _rewrite: Option<&[u8]>,
    ) -> Result<()> {
        Ok(())
    }

    fn trash(&mut self, _rel: &str, _expect: &str) -> Result<()> {
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
}
