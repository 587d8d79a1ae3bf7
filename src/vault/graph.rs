//! The link graph: outgoing links, backlinks and unresolved links, resolved the way
//! Obsidian resolves `[[name]]`: a full or partial path, or a bare file name (the
//! shortest path wins when several notes share it), case-insensitive, plus frontmatter
//! `aliases`.
//!
//! The name tables it resolves with ([`LinkTables`], in `link_tables`) live in the catalog,
//! so whatever records a note (the write pipeline, the watcher's reconcile, the start-up
//! scan) keeps them current. A link is resolved when it is asked about, never stored
//! resolved: a new note can change what `[[name]]` means elsewhere (a shorter path with
//! that name), and resolving late keeps that exact.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::vault::catalog::Catalog;
use crate::vault::link_tables::LinkTables;
use crate::vault::links::RawLink;
use crate::vault::note::Note;

/// Link resolution over the catalog's tables (building one costs nothing).
pub struct Graph<'a> {
    catalog: &'a Catalog,
}

impl<'a> Graph<'a> {
    pub fn build(catalog: &'a Catalog) -> Self {
        Graph { catalog }
    }

    fn tables(&self) -> &'a LinkTables {
        self.catalog.link_tables()
    }

    /// The note a link from `from` points at, if any (see [`LinkTables::resolve`]).
    pub fn resolve(&self, from: &Note, link: &RawLink) -> Option<&'a Arc<Note>> {
        self.tables().resolve(from, link)
    }

    /// Whether a link target names an attachment rather than a note.
    pub fn is_attachment(link: &RawLink) -> bool {
        crate::vault::attachments::links_attachment(link)
    }

    /// For every note, the slugs it links to (resolved notes only).
    pub fn edges(&self) -> HashMap<&'a str, HashSet<&'a str>> {
        let mut out: HashMap<&str, HashSet<&str>> = HashMap::new();
        for note in self.catalog.iter() {
            let targets = out.entry(note.slug()).or_default();
            for link in &note.links {
                if let Some(t) = self.resolve(note, link) {
                    if t.note_id != note.note_id {
                        targets.insert(t.slug());
                    }
                }
            }
        }
        out
    }

    /// The notes linking to `target`, in slug order, with the lines of their links.
    /// Only the notes filed under its file name or one of its aliases are resolved.
    pub fn backlinks(&self, target: &Note) -> Vec<(&'a Arc<Note>, Vec<usize>)> {
        self.tables()
            .may_link_to(target)
            .into_iter()
            .filter_map(|note| {
                let lines: Vec<usize> = note
                    .links
                    .iter()
                    .filter(|l| {
                        self.resolve(note, l)
                            .is_some_and(|t| t.note_id == target.note_id)
                    })
                    .map(|l| l.line)
                    .collect();
                (!lines.is_empty()).then_some((note, lines))
            })
            .collect()
    }
}
