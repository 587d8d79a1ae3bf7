//! The link graph: outgoing links, backlinks and unresolved links, resolved the way
//! Obsidian resolves `[[name]]`: a full or partial path, or a bare file name (the
//! shortest path wins when several notes share it), case-insensitive, plus frontmatter
//! `aliases`. Built from the catalog, which the watcher and the pipeline keep current.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::vault::catalog::{Catalog, Note};
use crate::vault::links::{resolve_relative, RawLink};

/// Name lookups over every note.
pub struct Graph<'a> {
    by_slug: HashMap<String, &'a Arc<Note>>,
    by_name: HashMap<String, Vec<&'a Arc<Note>>>,
    by_alias: HashMap<String, Vec<&'a Arc<Note>>>,
    notes: Vec<&'a Arc<Note>>,
}

fn name_of(slug: &str) -> &str {
    slug.rsplit('/').next().unwrap_or(slug)
}

fn shortest<'a>(candidates: &[&'a Arc<Note>]) -> Option<&'a Arc<Note>> {
    candidates
        .iter()
        .min_by(|a, b| {
            a.slug
                .len()
                .cmp(&b.slug.len())
                .then_with(|| a.slug.cmp(&b.slug))
        })
        .copied()
}

impl<'a> Graph<'a> {
    pub fn build(catalog: &'a Catalog) -> Self {
        let mut g = Graph {
            by_slug: HashMap::new(),
            by_name: HashMap::new(),
            by_alias: HashMap::new(),
            notes: Vec::with_capacity(catalog.len()),
        };
        for note in catalog.iter() {
            g.notes.push(note);
            g.by_slug.insert(note.slug.to_lowercase(), note);
            g.by_name
                .entry(name_of(&note.slug).to_lowercase())
                .or_default()
                .push(note);
            for alias in &note.aliases {
                g.by_alias
                    .entry(alias.to_lowercase())
                    .or_default()
                    .push(note);
            }
        }
        g
    }

    /// The note a link from `from` points at, if any. Links to attachments (a target
    /// with another extension than `.md`) resolve to nothing and are not counted.
    pub fn resolve(&self, from: &Note, link: &RawLink) -> Option<&'a Arc<Note>> {
        if link.markdown {
            let folder = from.slug.rsplit_once('/').map_or("", |(f, _)| f);
            let slug = resolve_relative(folder, &link.target)?;
            return self.by_slug.get(&slug.to_lowercase()).copied();
        }
        let target = link.target.trim();
        let target = target.strip_suffix(".md").unwrap_or(target).to_lowercase();
        if let Some(note) = self.by_slug.get(&target) {
            return Some(note);
        }
        if target.contains('/') {
            let suffix = format!("/{target}");
            let matches: Vec<&Arc<Note>> = self
                .notes
                .iter()
                .copied()
                .filter(|n| n.slug.to_lowercase().ends_with(&suffix))
                .collect();
            return shortest(&matches);
        }
        self.by_name
            .get(&target)
            .and_then(|c| shortest(c))
            .or_else(|| self.by_alias.get(&target).and_then(|c| shortest(c)))
    }

    /// Whether a link target names an attachment rather than a note.
    pub fn is_attachment(link: &RawLink) -> bool {
        let name = link.target.rsplit('/').next().unwrap_or(&link.target);
        !link.markdown
            && name.rsplit_once('.').is_some_and(|(_, ext)| {
                !ext.eq_ignore_ascii_case("md") && !ext.contains(' ') && ext.len() <= 5
            })
    }

    /// For every note, the slugs it links to (resolved notes only).
    pub fn edges(&self) -> HashMap<&'a str, HashSet<&'a str>> {
        let mut out: HashMap<&str, HashSet<&str>> = HashMap::new();
        for note in &self.notes {
            let targets = out.entry(note.slug.as_str()).or_default();
            for link in &note.links {
                if let Some(t) = self.resolve(note, link) {
                    if t.note_id != note.note_id {
                        targets.insert(t.slug.as_str());
                    }
                }
            }
        }
        out
    }

    /// The notes linking to `target`, with the lines of their links.
    pub fn backlinks(&self, target: &Note) -> Vec<(&'a Arc<Note>, Vec<usize>)> {
        let mut out = Vec::new();
        for note in &self.notes {
            if note.note_id == target.note_id {
                continue;
            }
            let lines: Vec<usize> = note
                .links
                .iter()
                .filter(|l| {
                    self.resolve(note, l)
                        .is_some_and(|t| t.note_id == target.note_id)
                })
                .map(|l| l.line)
                .collect();
            if !lines.is_empty() {
                out.push((*note, lines));
            }
        }
        out
    }
}
