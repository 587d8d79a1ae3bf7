//! The link graph's name tables, and link resolution over them, the way Obsidian
//! resolves `[[name]]`: a full or partial path, or a bare file name (the shortest path
//! wins when several notes share it), case-insensitive, plus frontmatter `aliases`.
//!
//! The tables live in the catalog and change with every `Catalog::insert` and
//! `Catalog::remove`. Backlinks do not walk the vault: every note is filed under the
//! lower-case file name each of its links could resolve to (its *link key*), so the notes
//! that may link to a note are the ones filed under its name or one of its aliases.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::vault::links::{resolve_relative, RawLink};
use crate::vault::note::Note;
use crate::vault::path::{file_name_of as name_of, folder_of};

/// Name lookups over every note, and the notes filed under each link key.
#[derive(Debug, Default)]
pub struct LinkTables {
    /// Lower-case slug → notes (several only when slugs differ by case alone).
    by_lower: Table,
    /// Lower-case file name → notes.
    by_name: Table,
    /// Lower-case alias → notes.
    by_alias: Table,
    /// Link key → the notes with a link under that key.
    linking: Table,
}

/// A name → the notes filed under it (foldhash: the tables are rebuilt at every start).
/// Most names have one note: it is held inline, not in an allocation of its own.
type Table = HashMap<String, Notes, foldhash::fast::RandomState>;
type Notes = smallvec::SmallVec<[Arc<Note>; 1]>;

fn shortest<'a>(candidates: impl IntoIterator<Item = &'a Arc<Note>>) -> Option<&'a Arc<Note>> {
    candidates.into_iter().min_by(|a, b| {
        a.slug()
            .len()
            .cmp(&b.slug().len())
            .then_with(|| a.slug().cmp(b.slug()))
    })
}

/// A wikilink target as it is looked up: trimmed, without `.md`, lower-case.
fn wiki_target(link: &RawLink) -> String {
    let target = link.target.trim();
    target.strip_suffix(".md").unwrap_or(target).to_lowercase()
}

/// The lower-case file name a link from `from` can resolve to, whatever else the vault
/// holds: the last part of a wikilink target (a bare name, an alias, or the end of a
/// full or partial path), or of the slug a relative markdown link points at.
fn link_key(from: &Note, link: &RawLink) -> Option<String> {
    if link.markdown {
        let slug = resolve_relative(folder_of(from.slug()), &link.target)?;
        return Some(name_of(&slug).to_lowercase());
    }
    let target = wiki_target(link);
    Some(name_of(&target).to_string())
}

/// The lower-case aliases a note is filed under.
fn alias_keys(note: &Note) -> impl Iterator<Item = String> + '_ {
    note.aliases.iter().map(|a| a.to_lowercase())
}

/// The link keys of a note's links, each once.
fn link_keys(note: &Note) -> HashSet<String> {
    note.links
        .iter()
        .filter_map(|l| link_key(note, l))
        .collect()
}

/// File `note` under `key`. The catalog unfiles a note before it files another of the
/// same slug (`Catalog::insert`), so no list holds a slug twice and nothing is searched
/// here: a name shared by many notes (`readme`, a command page in forty languages) would
/// make filing a vault quadratic in them.
fn file(map: &mut Table, key: String, note: &Arc<Note>) {
    let notes = map.entry(key).or_default();
    debug_assert!(
        !notes.iter().any(|n| n.slug() == note.slug()),
        "{} filed twice",
        note.slug()
    );
    notes.push(note.clone());
}

fn unfile(map: &mut Table, key: &str, note: &Note) {
    if let Some(notes) = map.get_mut(key) {
        notes.retain(|n| n.slug() != note.slug());
        if notes.is_empty() {
            map.remove(key);
        }
    }
}

impl LinkTables {
    /// The keys a note is filed under: (lower-case slug, file name, aliases, link keys).
    fn keys(note: &Note) -> (String, String, Vec<String>, HashSet<String>) {
        let lower = note.slug().to_lowercase();
        let name = name_of(&lower).to_string();
        (lower, name, alias_keys(note).collect(), link_keys(note))
    }

    /// File a note the catalog now holds (no other note with its slug is filed).
    pub(crate) fn add(&mut self, note: &Arc<Note>) {
        self.file_under(note, Self::keys(note));
    }

    /// File many notes the catalog now holds (none of them filed yet): the four tables
    /// are built side by side, the link keys worked out in parallel.
    pub(crate) fn add_all(&mut self, notes: &[Arc<Note>]) {
        use rayon::prelude::*;
        let LinkTables {
            by_lower,
            by_name,
            by_alias,
            linking,
        } = self;
        rayon::join(
            || {
                rayon::join(
                    || {
                        // One name each (the tables are empty): no table grows step by step.
                        by_lower.reserve(notes.len());
                        by_name.reserve(notes.len());
                        for note in notes {
                            let lower = note.slug().to_lowercase();
                            file(by_name, name_of(&lower).to_string(), note);
                            file(by_lower, lower, note);
                        }
                    },
                    || {
                        for note in notes {
                            for alias in alias_keys(note) {
                                file(by_alias, alias, note);
                            }
                        }
                    },
                )
            },
            || {
                let keys: Vec<HashSet<String>> = notes.par_iter().map(|n| link_keys(n)).collect();
                for (note, keys) in notes.iter().zip(keys) {
                    for key in keys {
                        file(linking, key, note);
                    }
                }
            },
        );
    }

    fn file_under(
        &mut self,
        note: &Arc<Note>,
        (lower, name, aliases, links): (String, String, Vec<String>, HashSet<String>),
    ) {
        file(&mut self.by_lower, lower, note);
        file(&mut self.by_name, name, note);
        for alias in aliases {
            file(&mut self.by_alias, alias, note);
        }
        for key in links {
            file(&mut self.linking, key, note);
        }
    }

    /// Take out a note the catalog no longer holds.
    pub(crate) fn remove(&mut self, note: &Note) {
        let (lower, name, aliases, links) = Self::keys(note);
        unfile(&mut self.by_lower, &lower, note);
        unfile(&mut self.by_name, &name, note);
        for alias in aliases {
            unfile(&mut self.by_alias, &alias, note);
        }
        for key in links {
            unfile(&mut self.linking, &key, note);
        }
    }

    /// The note a link from `from` points at, if any. Links to attachments (a target
    /// with another extension than `.md`) resolve to nothing and are not counted.
    pub fn resolve(&self, from: &Note, link: &RawLink) -> Option<&Arc<Note>> {
        let tables = self;
        if link.markdown {
            let slug = resolve_relative(folder_of(from.slug()), &link.target)?;
            return tables.exact(&slug.to_lowercase());
        }
        let target = wiki_target(link);
        if let Some(note) = tables.exact(&target) {
            return Some(note);
        }
        if target.contains('/') {
            // A partial path: the shortest slug ending in `/target`. Such a slug's file
            // name is the target's last part.
            let suffix = format!("/{target}");
            return shortest(
                tables
                    .by_name
                    .get(name_of(&target))
                    .into_iter()
                    .flatten()
                    .filter(|n| n.slug().to_lowercase().ends_with(&suffix)),
            );
        }
        tables
            .by_name
            .get(&target)
            .and_then(shortest)
            .or_else(|| tables.by_alias.get(&target).and_then(shortest))
    }

    /// The notes that may link to `target`, each once, in slug order: those filed under
    /// its file name or one of its aliases (resolving their links tells which do).
    pub fn may_link_to(&self, target: &Note) -> Vec<&Arc<Note>> {
        let mut keys = vec![name_of(target.slug()).to_lowercase()];
        keys.extend(target.aliases.iter().map(|a| a.to_lowercase()));
        let mut candidates: Vec<&Arc<Note>> = keys
            .iter()
            .filter_map(|k| self.linking.get(k))
            .flatten()
            .filter(|n| n.note_id != target.note_id)
            .collect();
        candidates.sort_by(|a, b| a.slug().cmp(b.slug()));
        candidates.dedup_by(|a, b| a.slug() == b.slug());
        candidates
    }

    /// The notes whose slug is `slug` but for letter case.
    pub(crate) fn by_lower_slug(&self, lower: &str) -> &[Arc<Note>] {
        self.by_lower.get(lower).map_or(&[], Notes::as_slice)
    }

    /// The note a lower-case slug names; of several differing only by case, the last
    /// in slug order.
    fn exact(&self, lower: &str) -> Option<&Arc<Note>> {
        self.by_lower
            .get(lower)?
            .iter()
            .max_by(|a, b| a.slug().cmp(b.slug()))
    }
}

#[cfg(test)]
impl LinkTables {
    /// Every table's entries (table, key, the slugs filed under it), sorted: what a
    /// look-up can see (resolution never depends on the order of a key's notes).
    pub(crate) fn entries(&self) -> Vec<(&'static str, String, Vec<String>)> {
        let tables = [
            ("by_lower", &self.by_lower),
            ("by_name", &self.by_name),
            ("by_alias", &self.by_alias),
            ("linking", &self.linking),
        ];
        let mut out: Vec<_> = tables
            .into_iter()
            .flat_map(|(name, table)| {
                table.iter().map(move |(key, notes)| {
                    let mut slugs: Vec<String> =
                        notes.iter().map(|n| n.slug().to_string()).collect();
                    slugs.sort();
                    (name, key.clone(), slugs)
                })
            })
            .collect();
        out.sort();
        out
    }
}
