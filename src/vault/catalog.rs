//! The in-memory catalog: every note the daemon knows, by slug and by note id.
//!
//! It is derived state, rebuilt from the folder (and the ids kept in the metadata store)
//! at every start, and updated only by `writes::reconcile` and the write pipeline.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use rayon::prelude::*;

use crate::vault::link_tables::LinkTables;
use crate::vault::note::{Note, Visibility};
use crate::vault::observe::Excluded;

/// A note as the entry of [`Catalog`]'s slug table: ordered and looked up by the note's
/// slug, which is part of the note (no copy of it as a key).
#[derive(Debug, Clone)]
struct BySlug(Arc<Note>);

impl Borrow<str> for BySlug {
    fn borrow(&self) -> &str {
        self.0.slug()
    }
}

// As the slug's `str` compares (what `Borrow` asks of them).
impl PartialEq for BySlug {
    fn eq(&self, other: &Self) -> bool {
        self.0.slug() == other.0.slug()
    }
}

impl Eq for BySlug {}

impl PartialOrd for BySlug {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for BySlug {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.slug().cmp(other.0.slug())
    }
}

/// A note as the entry of [`Catalog`]'s id table: hashed and looked up by its note id.
#[derive(Debug, Clone)]
struct ById(Arc<Note>);

impl Borrow<str> for ById {
    fn borrow(&self) -> &str {
        &self.0.note_id
    }
}

// As the id's `str` hashes and compares (what `Borrow` asks of them).
impl std::hash::Hash for ById {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.note_id.as_str().hash(state)
    }
}

impl PartialEq for ById {
    fn eq(&self, other: &Self) -> bool {
        self.0.note_id == other.0.note_id
    }
}

impl Eq for ById {}

#[derive(Debug, Default)]
pub struct Catalog {
    /// The notes by slug and by id: sets of the notes themselves, keyed by what each note
    /// holds (`replace`, not `insert`, puts a newer note in an equal one's place).
    by_slug: BTreeSet<BySlug>,
    by_id: HashSet<ById>,
    by_key: HashMap<u64, Arc<Note>>,
    /// The link graph's name tables (see [`crate::vault::link_tables`]).
    links: LinkTables,
    /// Frontmatter tag → the slugs of the notes carrying it (for list filters).
    by_tag: BTreeMap<String, BTreeSet<String>>,
    pub excluded: Vec<Excluded>,
}

impl Catalog {
    pub fn len(&self) -> usize {
        self.by_slug.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_slug.is_empty()
    }

    pub fn get(&self, slug: &str) -> Option<&Arc<Note>> {
        self.by_slug.get(slug).map(|e| &e.0)
    }

    pub fn get_by_id(&self, note_id: &str) -> Option<&Arc<Note>> {
        self.by_id.get(note_id).map(|e| &e.0)
    }

    /// The note whose [`Note::key`] is `key`.
    pub fn get_by_key(&self, key: u64) -> Option<&Arc<Note>> {
        self.by_key.get(&key)
    }

    /// Find a note by note id or slug (exact case first, then case-insensitive when unique).
    pub fn find(&self, key: &str) -> Option<&Arc<Note>> {
        if let Some(note) = self.get_by_id(key).or_else(|| self.get(key)) {
            return Some(note);
        }
        let key = key.strip_suffix(".md").unwrap_or(key);
        if let Some(note) = self.get(key) {
            return Some(note);
        }
        match self.links.by_lower_slug(&key.to_lowercase()) {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Put `note` in every table (in place of an older version, or another note at its
    /// slug); the note as the catalog now holds it.
    pub fn insert(&mut self, note: impl Into<Arc<Note>>) -> Arc<Note> {
        let note: Arc<Note> = note.into();
        if let Some(old) = self.get_by_id(&note.note_id) {
            if old.slug() != note.slug() {
                let old = old.clone();
                if let Some(BySlug(old)) = self.by_slug.take(old.slug()) {
                    self.unfile(&old);
                }
            }
        }
        if let Some(BySlug(replaced)) = self.by_slug.replace(BySlug(note.clone())) {
            if replaced.note_id != note.note_id {
                self.by_id.remove(replaced.note_id.as_str());
                self.by_key.remove(&replaced.key());
            }
            self.unfile(&replaced);
        }
        self.file(&note);
        self.by_key.insert(note.key(), note.clone());
        self.by_id.replace(ById(note.clone()));
        note
    }

    /// Insert `notes`, as [`insert`](Self::insert) would one by one; into an empty catalog
    /// (the start) the tables are built side by side from the notes sorted by slug.
    pub fn insert_all(&mut self, mut notes: Vec<Arc<Note>>) {
        let one_by_one = |catalog: &mut Catalog, notes: Vec<Arc<Note>>| {
            notes.into_iter().for_each(|n| {
                catalog.insert(n);
            })
        };
        if !self.by_slug.is_empty() {
            return one_by_one(self, notes);
        }
        notes.par_sort_by(|a, b| a.slug().cmp(b.slug()));
        if notes.windows(2).any(|w| w[0].slug() == w[1].slug()) {
            // Two notes under one slug: the later one wins, as with `insert`.
            return one_by_one(self, notes);
        }
        let Catalog {
            by_slug,
            by_id,
            by_key,
            links,
            by_tag,
            ..
        } = self;
        rayon::join(
            || {
                rayon::join(
                    || links.add_all(&notes),
                    || notes.iter().for_each(|n| file_tags(by_tag, n)),
                )
            },
            || {
                rayon::join(
                    || {
                        by_key.reserve(notes.len());
                        by_key.extend(notes.iter().map(|n| (n.key(), n.clone())));
                    },
                    || {
                        by_id.reserve(notes.len());
                        by_id.extend(notes.iter().map(|n| ById(n.clone())));
                        *by_slug = notes.iter().map(|n| BySlug(n.clone())).collect();
                    },
                )
            },
        );
        if self.by_id.len() != notes.len() {
            // Two notes with one id: the later one wins, as with `insert`.
            *self = Catalog {
                excluded: std::mem::take(&mut self.excluded),
                ..Catalog::default()
            };
            one_by_one(self, notes);
        }
    }

    /// The note `observed` names, rebuilt from that observation (bytes, facts, stamp;
    /// the same ids and times) when it is still unread and the file holds its version
    /// (the same hash); `false` when it is not.
    pub fn fill_content(&mut self, observed: &crate::vault::observe::Observed) -> bool {
        let slug = crate::vault::path::slug_of(&observed.rel);
        let note = match self.get(slug) {
            Some(n)
                if n.unread()
                    && n.content_hash == observed.content_hash
                    && observed.content.is_some() =>
            {
                note_from(
                    observed.clone(),
                    n.note_id.clone(),
                    n.version_id.clone(),
                    n.created_at,
                    n.observed_at,
                )
            }
            _ => return false,
        };
        self.insert(note);
        true
    }

    /// The note at `slug` with `content` kept, when it is still unread and its file's
    /// stamp is still the one it was recalled with, the bytes read under that stamp
    /// hashing to the note's (the caller's check: every fact the catalog holds is then
    /// the file's; [`fill_content`](Self::fill_content) otherwise); `false` when not.
    pub fn fill_bytes(
        &mut self,
        slug: &str,
        stamp: crate::vault::observe::FileStamp,
        content: crate::vault::packed::Packed,
    ) -> bool {
        if !self
            .get(slug)
            .is_some_and(|n| n.unread() && n.stamp == Some(stamp))
        {
            return false;
        }
        let Some(note) = self.remove(slug) else {
            return false;
        };
        // Moved when the catalog holds the only reference (the index takes none before
        // the verify ends; a reader may hold one, then it is cloned).
        let note = Note {
            content: Some(content),
            ..Arc::unwrap_or_clone(note)
        };
        self.insert(note);
        true
    }

    pub fn remove(&mut self, slug: &str) -> Option<Arc<Note>> {
        let BySlug(note) = self.by_slug.take(slug)?;
        self.by_id.remove(note.note_id.as_str());
        self.by_key.remove(&note.key());
        self.unfile(&note);
        Some(note)
    }

    /// Enter a note into the derived tables (links, tags).
    fn file(&mut self, note: &Arc<Note>) {
        self.links.add(note);
        file_tags(&mut self.by_tag, note);
    }

    /// Take a note that left `by_slug` out of the derived tables.
    fn unfile(&mut self, note: &Note) {
        self.links.remove(note);
        for tag in &note.tags {
            if let Some(slugs) = self.by_tag.get_mut(tag) {
                slugs.remove(note.slug());
                if slugs.is_empty() {
                    self.by_tag.remove(tag);
                }
            }
        }
    }

    /// The link graph's name tables, current with every insert and remove.
    pub fn link_tables(&self) -> &LinkTables {
        &self.links
    }

    /// The slugs of the notes carrying each tag, by tag.
    pub fn tag_table(&self) -> &BTreeMap<String, BTreeSet<String>> {
        &self.by_tag
    }

    /// Notes in slug order, strictly after `after` when given.
    pub fn iter_from<'a>(
        &'a self,
        after: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Arc<Note>> + 'a {
        use std::ops::Bound;
        let lower = match after {
            Some(a) => Bound::Excluded(a),
            None => Bound::Unbounded,
        };
        self.by_slug
            .range::<str, _>((lower, Bound::Unbounded))
            .map(|e| &e.0)
    }

    /// Notes in slug order within `bounds`.
    pub fn range<'a>(
        &'a self,
        bounds: (std::ops::Bound<&str>, std::ops::Bound<&str>),
    ) -> impl Iterator<Item = &'a Arc<Note>> + 'a {
        self.by_slug.range::<str, _>(bounds).map(|e| &e.0)
    }

    /// Notes whose slug starts with `prefix`, in slug order.
    pub fn iter_prefix<'a: 'p, 'p>(
        &'a self,
        prefix: &'p str,
    ) -> impl Iterator<Item = &'a Arc<Note>> + 'p {
        use std::ops::Bound;
        self.by_slug
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |e| e.0.slug().starts_with(prefix))
            .map(|e| &e.0)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Note>> {
        self.by_slug.iter().map(|e| &e.0)
    }
}

/// File `note` under each of its tags.
fn file_tags(by_tag: &mut BTreeMap<String, BTreeSet<String>>, note: &Note) {
    for tag in &note.tags {
        by_tag
            .entry(tag.clone())
            .or_default()
            .insert(note.slug().to_string());
    }
}

/// Build the catalog entry of an observed file.
pub fn note_from(
    observed: crate::vault::observe::Observed,
    note_id: String,
    version_id: String,
    created_at: DateTime<Utc>,
    observed_at: DateTime<Utc>,
) -> Note {
    let facts = observed.facts;
    let slug = crate::vault::path::slug_of(&observed.rel);
    let file_name = crate::vault::path::file_name_of(slug).to_string();
    let mut warnings = Vec::new();
    if let Some(why) = &facts.frontmatter_error {
        warnings.push(format!("{why}; the frontmatter was treated as absent"));
    }
    if let Some(why) = crate::vault::path::unstorable(&observed.rel) {
        warnings.push(format!(
            "history.git cannot keep this file ({why}); it is served, but its revisions' bytes are not versioned; rename it to keep its history"
        ));
    }
    if facts.lossy_utf8 {
        warnings
            .push("the file is not valid UTF-8; invalid bytes were replaced with U+FFFD".into());
    }
    Note {
        note_id,
        title: facts.title.unwrap_or(file_name),
        status: facts.status.unwrap_or_else(|| "active".into()),
        visibility: Visibility::Standard,
        tags: facts.tags,
        frontmatter: facts.frontmatter.map(Box::new),
        aliases: facts.aliases,
        links: facts.links,
        warnings,
        version_id,
        content_hash: observed.content_hash,
        size: observed.size,
        created_at,
        updated_at: observed.mtime.into(),
        observed_at,
        content: observed.content,
        stamp: observed.stamp,
        path: observed.rel,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vault::links::RawLink;
    use crate::vault::markdown::NoteFacts;
    use crate::vault::note::key_of;
    use crate::vault::observe::Observed;

    fn note(rel: &str, id: &str, tags: &[&str], aliases: &[&str], links: &[(&str, bool)]) -> Note {
        let observed = Observed {
            rel: rel.into(),
            size: 1,
            mtime: std::time::SystemTime::UNIX_EPOCH,
            created: std::time::SystemTime::UNIX_EPOCH,
            content_hash: format!("hash-{id}"),
            facts: NoteFacts {
                tags: tags.iter().map(|t| t.to_string()).collect(),
                aliases: aliases.iter().map(|a| a.to_string()).collect(),
                links: links
                    .iter()
                    .map(|(target, markdown)| RawLink {
                        target: target.to_string(),
                        line: 1,
                        markdown: *markdown,
                        embed: false,
                    })
                    .collect(),
                ..Default::default()
            },
            content: None,
            stamp: None,
        };
        note_from(
            observed,
            id.into(),
            format!("v-{id}"),
            Utc::now(),
            Utc::now(),
        )
    }

    /// What a reader of the catalog can see of it, in a comparable form.
    fn view(c: &Catalog) -> Vec<String> {
        let mut out: Vec<String> = c
            .iter()
            .map(|n| format!("slug {} {}", n.slug(), n.note_id))
            .collect();
        for n in c.iter() {
            out.push(format!(
                "id {} {:?}",
                n.note_id,
                c.get_by_id(&n.note_id).map(|m| m.slug())
            ));
            out.push(format!("key {:?}", c.get_by_key(n.key()).map(|m| m.slug())));
        }
        out.extend(
            c.tag_table()
                .iter()
                .map(|(t, slugs)| format!("tag {t} {slugs:?}")),
        );
        out.extend(
            c.link_tables()
                .entries()
                .into_iter()
                .map(|e| format!("{e:?}")),
        );
        out
    }

    fn same(a: Vec<String>, b: Vec<String>) {
        let first = a.iter().zip(&b).find(|(x, y)| x != y);
        assert!(first.is_none(), "first difference: {first:?}");
        assert_eq!(a.len(), b.len());
    }

    fn sample() -> Vec<Note> {
        let mut notes = Vec::new();
        for i in 0..300 {
            let folder = ["a", "b/c", "B/c", "d"][i % 4];
            let name = ["readme", "Plan", "plan", "x y"][i % 4 / 2 + i % 3 % 2];
            notes.push(note(
                &format!("{folder}/{name} {i}.md"),
                &format!("id{i}"),
                &[["work", "home", "work/deep"][i % 3]],
                if i % 5 == 0 {
                    &["Alias One", "other"]
                } else {
                    &[]
                },
                &[
                    ("readme 4", false),
                    ("../c/Plan 1.md", true),
                    ("nowhere", false),
                ],
            ));
        }
        notes.push(note(
            "readme.md",
            "top",
            &[],
            &["README"],
            &[("a/readme 0", false)],
        ));
        notes.push(note("README.md", "top-upper", &[], &[], &[]));
        notes
    }

    /// A note recalled unread takes the bytes read under its own stamp, and keeps every
    /// table as it was; under another stamp (the file touched since) it does not.
    #[test]
    fn fill_bytes_keeps_the_bytes_read_under_the_recalled_stamp_only() {
        let stamp = crate::vault::observe::FileStamp {
            size: 1,
            mtime: (1, 0),
            ctime: (1, 0),
            inode: (1, 1),
        };
        let mut catalog = Catalog::default();
        sample().into_iter().for_each(|mut n| {
            n.stamp = Some(stamp);
            catalog.insert(n);
        });
        let before = view(&catalog);
        let bytes = crate::vault::packed::Packed::plain(Arc::from(&b"x"[..]));
        let slug = catalog.iter().next().unwrap().slug().to_string();
        let touched = crate::vault::observe::FileStamp {
            mtime: (2, 0),
            ..stamp
        };
        assert!(!catalog.fill_bytes(&slug, touched, bytes.clone()));
        assert!(catalog.get(&slug).unwrap().unread());
        assert!(catalog.fill_bytes(&slug, stamp, bytes.clone()));
        let filled = catalog.get(&slug).unwrap();
        assert!(!filled.unread());
        assert_eq!(filled.content.as_ref().unwrap().bytes().as_ref(), b"x");
        assert!(!catalog.fill_bytes(&slug, stamp, bytes), "filled once");
        same(view(&catalog), before);
    }

    #[test]
    fn insert_all_files_notes_as_insert_does() {
        let mut one_by_one = Catalog::default();
        sample().into_iter().for_each(|n| {
            one_by_one.insert(n);
        });
        let mut all = Catalog::default();
        let mut shuffled: Vec<Arc<Note>> = sample().into_iter().map(Arc::new).collect();
        shuffled.reverse();
        all.insert_all(shuffled);
        assert_eq!(all.len(), 302);
        same(view(&all), view(&one_by_one));
    }

    #[test]
    fn insert_all_of_one_id_twice_keeps_the_later_note_as_insert_does() {
        let twice = || {
            vec![
                note("a.md", "same", &["t"], &[], &[]),
                note("b.md", "same", &["u"], &[], &[]),
                note("c.md", "other", &[], &[], &[]),
            ]
        };
        let mut one_by_one = Catalog::default();
        twice().into_iter().for_each(|n| {
            one_by_one.insert(n);
        });
        let mut all = Catalog::default();
        all.insert_all(twice().into_iter().map(Arc::new).collect());
        same(view(&all), view(&one_by_one));
        assert_eq!(all.get_by_id("same").map(|n| n.slug()), Some("b"));
        assert_eq!(all.len(), 2);
    }

    /// A newer version of a note (the same id and slug), a move (the same id, a new slug)
    /// and another note taking an occupied slug each leave one entry, the newer note's, in
    /// the slug, id and key tables; order and ranges follow the slugs.
    #[test]
    fn a_newer_note_replaces_the_older_in_every_table() {
        use std::ops::Bound;
        let mut c = Catalog::default();
        for (rel, id) in [("b.md", "one"), ("a/x.md", "two"), ("c.md", "three")] {
            c.insert(note(rel, id, &[], &[], &[]));
        }
        // A new version: same id, same slug.
        let mut edited = note("b.md", "one", &["t"], &[], &[]);
        edited.version_id = "v-one-2".into();
        c.insert(edited);
        for found in [c.get("b"), c.get_by_id("one"), c.get_by_key(key_of("one"))] {
            assert_eq!(found.map(|n| n.version_id.as_str()), Some("v-one-2"));
        }
        // A move: same id, a new slug; the old version leaves the tag table.
        c.insert(note("d/b.md", "one", &[], &[], &[]));
        assert!(c.get("b").is_none());
        assert_eq!(c.get_by_id("one").map(|n| n.slug()), Some("d/b"));
        assert!(c.tag_table().get("t").is_none());
        // Another note takes an occupied slug: the one it replaces leaves every table.
        c.insert(note("c.md", "four", &[], &[], &[]));
        assert!(c.get_by_id("three").is_none());
        assert!(c.get_by_key(key_of("three")).is_none());
        assert_eq!(c.get("c").map(|n| n.note_id.as_str()), Some("four"));
        let slugs = |it: &mut dyn Iterator<Item = &Arc<Note>>| -> Vec<String> {
            it.map(|n| n.slug().to_string()).collect()
        };
        assert_eq!(slugs(&mut c.iter()), ["a/x", "c", "d/b"]);
        assert_eq!(slugs(&mut c.iter_from(Some("a/x"))), ["c", "d/b"]);
        assert_eq!(slugs(&mut c.iter_prefix("d/")), ["d/b"]);
        let bounds = (Bound::Included("b"), Bound::Excluded("d/b"));
        assert_eq!(slugs(&mut c.range(bounds)), ["c"]);
        assert_eq!(c.len(), 3);
        assert_eq!(
            c.remove("c").map(|n| n.note_id.clone()),
            Some("four".into())
        );
        assert!(c.get_by_id("four").is_none());
        assert_eq!(c.len(), 2);
        // A move onto a slug another note holds: that note leaves every table.
        c.insert(note("a/x.md", "one", &[], &[], &[]));
        assert!(c.get_by_id("two").is_none());
        assert!(c.get("d/b").is_none());
        assert_eq!(c.get("a/x").map(|n| n.note_id.as_str()), Some("one"));
        assert_eq!(c.len(), 1);
        // By slug, not by path: `a` before `a-b` (their paths sort the other way).
        c.insert(note("a-b.md", "five", &[], &[], &[]));
        c.insert(note("a.md", "six", &[], &[], &[]));
        assert_eq!(slugs(&mut c.iter()), ["a", "a-b", "a/x"]);
    }
}
