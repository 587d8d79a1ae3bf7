//! The text of links as part of their targets' documents (`vault::link_text`): a change
//! to what a note's links say re-indexes the notes they point at, and only those whose
//! text changed; the start-up sync gathers every note's link text in one pass.

use std::collections::HashMap;
use std::sync::Arc;

use super::super::schema::LinkText;
use super::super::{searchable, SearchIndex};
use super::Worker;
use crate::vault::link_text::AllLinkText;
use crate::vault::note::Note;

/// What the index asks of the vault about its links (answered from its catalog).
pub trait Links: LinkText {
    /// What every note's links say (the start-up sync).
    fn all(&self) -> AllLinkText;
    /// The notes `note` links to, each with a hash of what its links say of them.
    fn outgoing(&self, note: &Note) -> Vec<(u64, u64)>;
    /// The current version of the note `key` names.
    fn current(&self, key: u64) -> Option<Arc<Note>>;
}

/// No links known (until a vault's catalog is given: tests, a vault being opened).
pub struct NoLinks;

impl LinkText for NoLinks {
    fn of(&self, _: &Note) -> String {
        String::new()
    }
}

impl Links for NoLinks {
    fn all(&self) -> AllLinkText {
        AllLinkText::default()
    }
    fn outgoing(&self, _: &Note) -> Vec<(u64, u64)> {
        Vec::new()
    }
    fn current(&self, _: u64) -> Option<Arc<Note>> {
        None
    }
}

impl SearchIndex {
    /// Where links come from from now on: the vault's catalog. Before
    /// [`SearchIndex::start`].
    pub fn set_links(&self, links: Arc<dyn Links>) {
        *self.links.write() = links;
    }

    pub(super) fn links(&self) -> Arc<dyn Links> {
        self.links.read().clone()
    }

    /// The start-up sync's link text: every note's, gathered at once; what each note's
    /// links say is kept to tell later changes apart.
    pub(super) fn gather_links(&self, w: &mut Worker) -> Arc<HashMap<u64, String>> {
        let links = self.links();
        let all = links.all();
        w.outgoing = all.outgoing;
        w.links = links.clone();
        w.parts.links = links;
        Arc::new(all.incoming)
    }

    /// The note `key` changed to `note` (`None`: removed): the notes whose link text
    /// it changed are indexed again (their current versions, at no seq of their own).
    pub(super) fn relink(&self, w: &mut Worker, key: u64, note: Option<&Note>) {
        let now = match note {
            Some(note) if !note.links.is_empty() => w.links.outgoing(note),
            _ => Vec::new(),
        };
        let before = if now.is_empty() {
            w.outgoing.remove(&key).unwrap_or_default()
        } else {
            w.outgoing.insert(key, now.clone()).unwrap_or_default()
        };
        if before == now {
            return;
        }
        // Both lists are sorted: a target whose (key, hash) is in one only changed.
        let mut targets: Vec<u64> = before
            .iter()
            .filter(|e| now.binary_search(e).is_err())
            .chain(now.iter().filter(|e| before.binary_search(e).is_err()))
            .map(|(t, _)| *t)
            .filter(|t| *t != key)
            .collect();
        targets.sort_unstable();
        targets.dedup();
        for target in targets {
            // A note changed in this batch is indexed at its own version anyway.
            if w.changed.contains_key(&target) {
                w.parts.changed(target);
                continue;
            }
            if let Some(t) = w.links.current(target).filter(|t| searchable(t)) {
                w.touch(target);
                w.changed.insert(target, Some(t));
            }
        }
    }
}
