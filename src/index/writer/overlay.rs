//! The overlay's parts: changes not yet on disk, indexed in memory in the writer's own
//! thread. Each publish builds one small single-segment index of the notes changed since
//! the last one; the newest parts are then rebuilt as one while a newer part holds as
//! many notes as the one before it, up to a size (a binary counter: a note is indexed
//! again a logarithmic number of times, and a few parts are searched). Not tantivy's
//! `IndexWriter`: each of its commits joins its indexing thread, starts another and fills
//! a term table of ~4 MiB (benches/README.md, "the overlay without an index writer").

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tantivy::directory::RamDirectory;
use tantivy::schema::Schema;
use tantivy::tokenizer::TokenizerManager;
use tantivy::{Index, IndexSettings, Searcher};

use super::super::schema::{Fields, LinkText, NoteDoc};
use super::super::tokenizer;
use crate::vault::note::Note;

/// Changes not yet on disk as searches see them.
#[derive(Default)]
pub(crate) struct Overlay {
    /// Every note changed since the last commit on disk (its documents there are stale
    /// and left out), with the part that holds its current version (`None`: none does,
    /// the note was deleted or is not searchable).
    pub(crate) current: HashMap<u64, Option<u32>>,
    /// The parts by id, oldest first. A part also holds superseded versions of notes;
    /// a search of a part keeps only the notes `current` says it holds.
    pub(crate) parts: Vec<(u32, Searcher)>,
}

impl Overlay {
    /// Whether the current version of the note `key` is in the part `part`, or with
    /// `None` on disk (the overlay holds no newer version, nor its removal).
    pub(crate) fn holds(&self, part: Option<u32>, key: u64) -> bool {
        match part {
            None => !self.current.contains_key(&key),
            Some(id) => self.current.get(&key) == Some(&Some(id)),
        }
    }
}

/// One part: a single-segment index in memory.
struct Part {
    id: u32,
    searcher: Searcher,
    /// The notes indexed into it (some may be superseded since).
    keys: Vec<u64>,
}

/// The writer thread's side of the overlay.
pub(super) struct Parts {
    schema: Schema,
    tokenizers: TokenizerManager,
    fields: Fields,
    /// Where a document gets the text of the links to its note.
    pub(super) links: Arc<dyn LinkText>,
    parts: Vec<Part>,
    /// Note key → the part holding its current version.
    owner: HashMap<u64, u32>,
    /// Notes changed since the newest part was built.
    unbuilt: HashSet<u64>,
    next_id: u32,
}

/// Parts are merged up to this many notes: a merge indexes its notes again in the
/// writer's thread, so changes behind it wait; the overlay goes to disk at
/// `FLUSH_MAX` (1,000) notes anyway, so a few parts of this size at most.
const MERGE_MAX: usize = 256;

/// The memory budget of a part's segment writer (its term table takes up to a third):
/// enough for the notes in hand, not tantivy's 15 MB minimum of an `IndexWriter`.
fn budget(notes: usize) -> usize {
    (notes * 96 * 1024).clamp(96 * 1024, 15_000_000)
}

impl Parts {
    pub(super) fn new(schema: Schema, fields: Fields) -> Self {
        let probe = Index::create_in_ram(schema.clone());
        tokenizer::register(&probe);
        Parts {
            schema,
            tokenizers: probe.tokenizers().clone(),
            fields,
            links: Arc::new(super::NoLinks),
            parts: Vec::new(),
            owner: HashMap::new(),
            unbuilt: HashSet::new(),
            next_id: 0,
        }
    }

    /// The note `key` changed: the next [`Parts::build`] indexes its current version.
    pub(super) fn changed(&mut self, key: u64) {
        self.unbuilt.insert(key);
    }

    /// Whether notes changed since the last build.
    pub(super) fn dirty(&self) -> bool {
        !self.unbuilt.is_empty()
    }

    /// Index the notes changed since the last build, as they are in `changed` (key →
    /// current version, `None`: gone), into a new part. On an error nothing changes and
    /// the same build can be tried again.
    pub(super) fn build(
        &mut self,
        changed: &HashMap<u64, Option<Arc<Note>>>,
    ) -> tantivy::Result<()> {
        if self.unbuilt.is_empty() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let notes = current(changed, self.unbuilt.iter());
        let built = if notes.is_empty() {
            None
        } else {
            Some(self.index(&notes)?)
        };
        for k in std::mem::take(&mut self.unbuilt) {
            self.owner.remove(&k);
        }
        let count = notes.len();
        if let Some(searcher) = built {
            self.add(searcher, notes);
        }
        // Parts whose every note changed since go (a note edited over and over would
        // leave one behind at each publish).
        let owner = &self.owner;
        self.parts.retain(|p| live(owner, p) > 0);
        tracing::debug!(
            notes = count,
            parts = self.parts.len(),
            us = started.elapsed().as_micros() as u64,
            "overlay part built"
        );
        Ok(())
    }

    /// Merge the two newest parts while the newer holds as many current notes as the
    /// older and both together at most
    /// [`MERGE_MAX`]. How many notes were indexed again. Apart from [`Parts::build`], so
    /// that a search waiting for a change does not wait for a merge too. On an error the
    /// merges done before it stay and the rest are not made; the parts hold every
    /// current version either way.
    pub(super) fn merge(
        &mut self,
        changed: &HashMap<u64, Option<Arc<Note>>>,
    ) -> tantivy::Result<usize> {
        let started = std::time::Instant::now();
        let mut merged = 0;
        while self.parts.len() >= 2 {
            let n = self.parts.len();
            let (older, newer) = (&self.parts[n - 2], &self.parts[n - 1]);
            let (older_live, newer_live) = (live(&self.owner, older), live(&self.owner, newer));
            if newer_live < older_live || older_live + newer_live > MERGE_MAX {
                break;
            }
            let ids = [older.id, newer.id];
            let held = older
                .keys
                .iter()
                .chain(&newer.keys)
                .filter(|k| self.owner.get(k).is_some_and(|id| ids.contains(id)));
            let notes = current(changed, held);
            let searcher = self.index(&notes)?;
            merged += notes.len();
            self.parts.truncate(n - 2);
            self.add(searcher, notes);
        }
        if merged > 0 {
            tracing::debug!(
                merged,
                parts = self.parts.len(),
                us = started.elapsed().as_micros() as u64,
                "overlay parts merged"
            );
        }
        Ok(merged)
    }

    /// A new newest part, holding the current version of `notes`.
    fn add(&mut self, searcher: Searcher, notes: Vec<(u64, Arc<Note>)>) {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        for (k, _) in &notes {
            self.owner.insert(*k, id);
        }
        self.parts.push(Part {
            id,
            searcher,
            keys: notes.into_iter().map(|(k, _)| k).collect(),
        });
    }

    /// A single-segment index of `notes`, built in this thread.
    fn index(&self, notes: &[(u64, Arc<Note>)]) -> tantivy::Result<Searcher> {
        // No thread of its own anywhere: the store uncompressed and written in this
        // thread (tantivy's default starts a compressor thread per segment), a reader
        // that watches nothing.
        let settings = IndexSettings {
            docstore_compression: tantivy::store::Compressor::None,
            docstore_compress_dedicated_thread: false,
            ..IndexSettings::default()
        };
        let mut writer = Index::builder()
            .schema(self.schema.clone())
            .settings(settings)
            .tokenizers(self.tokenizers.clone())
            .single_segment_index_writer::<NoteDoc>(RamDirectory::default(), budget(notes.len()))?;
        for (_, note) in notes {
            writer.add_document(NoteDoc::new(self.fields, note.clone(), self.links.clone()))?;
        }
        let index = writer.finalize()?;
        let reader: tantivy::IndexReader = index
            .reader_builder()
            .reload_policy(tantivy::ReloadPolicy::Manual)
            .try_into()?;
        Ok(reader.searcher())
    }

    /// The overlay searches read, for `changed` (the notes changed since the last
    /// commit on disk).
    pub(super) fn overlay(&self, changed: &HashMap<u64, Option<Arc<Note>>>) -> Overlay {
        Overlay {
            current: changed
                .keys()
                .map(|k| (*k, self.owner.get(k).copied()))
                .collect(),
            parts: self
                .parts
                .iter()
                .map(|p| (p.id, p.searcher.clone()))
                .collect(),
        }
    }

    /// Everything went to disk: no part is needed.
    pub(super) fn clear(&mut self) {
        self.parts.clear();
        self.owner.clear();
        self.unbuilt.clear();
    }
}

/// How many of `part`'s notes it holds the current version of.
fn live(owner: &HashMap<u64, u32>, part: &Part) -> usize {
    part.keys
        .iter()
        .filter(|k| owner.get(k) == Some(&part.id))
        .count()
}

/// The current version of each of `keys` that has one, once each, by key.
fn current<'a>(
    changed: &HashMap<u64, Option<Arc<Note>>>,
    keys: impl Iterator<Item = &'a u64>,
) -> Vec<(u64, Arc<Note>)> {
    let mut notes: Vec<(u64, Arc<Note>)> = keys
        .filter_map(|k| changed.get(k).cloned().flatten().map(|n| (*k, n)))
        .collect();
    notes.sort_unstable_by_key(|(k, _)| *k);
    notes.dedup_by_key(|(k, _)| *k);
    notes
}
