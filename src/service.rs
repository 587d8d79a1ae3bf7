//! The assembled daemon: paths, metadata store, history, catalog; the domain calls that
//! the HTTP API (and later MCP) share. No HTTP types here.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use parking_lot::{Mutex, RwLock};

use crate::config::Config;
use crate::error::{Error, Reason, Result};
use crate::history::{Change, History};
use crate::meta::Meta;
use crate::vault::catalog::{Catalog, Excluded, Note};
use crate::vault::markdown;
use crate::vault::path::VaultPaths;
use crate::watch::scan::{self, Observed};
use crate::writes::reconcile;

/// Largest `limit` of a line-sliced read.
pub const MAX_LINES: usize = 2000;
/// Default `limit` of a line-sliced read.
pub const DEFAULT_LINES: usize = 200;

pub use crate::clock::timestamp;

pub struct Service {
    pub config: Config,
    pub paths: VaultPaths,
    pub meta: Meta,
    pub history: History,
    pub catalog: RwLock<Catalog>,
    committed_seq: AtomicI64,
    /// Secret for tamper-evident page tokens, kept in the metadata store.
    pub token_key: [u8; 32],
    /// One change applies at a time: API writes and reconciles of disk changes.
    pub write_lock: Mutex<()>,
    /// Per-`Idempotency-Key` locks of the write pipeline.
    pub key_locks: crate::writes::KeyLocks,
    /// The live watcher, when watching.
    pub watcher: Mutex<Option<crate::watch::live::LiveWatcher>>,
    /// Notes that just left the folder, for move detection across batches.
    pub recently_removed: reconcile::RecentlyRemoved,
    /// The search index, fed every change after the start-up sync.
    pub index: Arc<crate::index::SearchIndex>,
}

/// A note and the bytes of the version it names.
pub type NoteBytes = (Arc<Note>, Vec<u8>);

/// An AIP-132 order: a field, ascending or descending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    /// `score` (relevance), `slug`, `title`, `created_at`, `updated_at`, ...
    pub field: String,
    pub desc: bool,
}

impl Order {
    pub fn relevance() -> Self {
        Self {
            field: "score".into(),
            desc: true,
        }
    }

    pub fn asc(field: &str) -> Self {
        Self {
            field: field.into(),
            desc: false,
        }
    }
}

/// One page of a line-sliced read.
#[derive(Debug, Clone, PartialEq)]
pub struct LinePage {
    pub offset: usize,
    pub limit: usize,
    pub total: usize,
    pub next_offset: Option<usize>,
    pub items: Vec<(usize, String)>,
}

/// The links of one note.
#[derive(Debug, Clone)]
pub struct LinkReport {
    pub note: Arc<Note>,
    /// Every link as written, with the note it resolves to (`None`: unresolved).
    pub outgoing: Vec<(crate::vault::links::RawLink, Option<Arc<Note>>)>,
    /// Notes linking to this one, with the lines of their links.
    pub backlinks: Vec<(Arc<Note>, Vec<usize>)>,
    /// Notes whose links were searched.
    pub total: usize,
    pub committed_seq: i64,
}

/// A note's revisions.
#[derive(Debug, Clone)]
pub struct NoteHistory {
    pub note_id: String,
    pub slug: String,
    /// `None` when the note is deleted.
    pub current_version_id: Option<String>,
    /// Oldest first.
    pub revisions: Vec<crate::meta::RevisionRow>,
}

/// A page of the note listing.
#[derive(Debug, Clone)]
pub struct NoteList {
    pub notes: Vec<Arc<Note>>,
    /// Slug of the last note when more follow.
    pub next_after: Option<String>,
    /// Notes under the prefix (the whole listing, not the page).
    pub matched: usize,
    pub total: usize,
    pub excluded: Vec<Excluded>,
    pub committed_seq: i64,
}

/// One folder of the vault, as the notes in it show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderEntry {
    /// Vault-relative, `/`-separated, no trailing slash.
    pub path: String,
    /// Notes directly in it.
    pub notes: usize,
    /// Notes in it and in every folder below it.
    pub notes_total: usize,
}

/// The folders of the vault whose path starts with a prefix.
#[derive(Debug, Clone)]
pub struct FolderListing {
    /// In path order.
    pub folders: Vec<FolderEntry>,
    /// Notes in the vault.
    pub total: usize,
    pub excluded: Vec<Excluded>,
    pub committed_seq: i64,
}

impl Service {
    /// Open the state directory, scan the vault and reconcile it with what was stored.
    /// The history commit of the scan runs in the background: serving does not wait.
    pub fn open(config: Config) -> anyhow::Result<Arc<Self>> {
        let root = config.vault.canonicalize().map_err(|e| {
            anyhow::anyhow!("vault folder {} is not usable: {e}", config.vault.display())
        })?;
        if !root.is_dir() {
            anyhow::bail!("vault {} is not a folder", root.display());
        }
        let state_dir = config.state_dir_of_vault()?;
        std::fs::create_dir_all(&state_dir).map_err(|e| {
            anyhow::anyhow!("state dir {} is not writable: {e}", state_dir.display())
        })?;
        let state_dir = state_dir.canonicalize()?;
        probe_writable(&state_dir)?;
        let meta = Meta::open(&state_dir.join("meta.sqlite"))
            .map_err(|e| anyhow::anyhow!("state dir {}: {}", state_dir.display(), e.message))?;
        let history = History::open(&state_dir.join("history.git"))
            .map_err(|e| anyhow::anyhow!("state dir {}: {}", state_dir.display(), e.message))?;
        let token_key = match meta.setting("page_token_key")? {
            Some(hex) => {
                parse_key(&hex).ok_or_else(|| anyhow::anyhow!("corrupt page token key"))?
            }
            None => {
                let key: [u8; 32] = *blake3::hash(uuid::Uuid::new_v4().as_bytes()).as_bytes();
                let key = *blake3::keyed_hash(&key, uuid::Uuid::new_v4().as_bytes()).as_bytes();
                meta.set_setting("page_token_key", &hex_of(&key))?;
                key
            }
        };
        let committed_seq = AtomicI64::new(meta.committed_seq()?);
        let index = crate::index::SearchIndex::open(&state_dir)?;
        let svc = Arc::new(Self {
            paths: VaultPaths::new(root, state_dir),
            meta,
            history,
            catalog: RwLock::new(Catalog::default()),
            committed_seq,
            token_key,
            write_lock: Mutex::new(()),
            key_locks: Default::default(),
            watcher: Mutex::new(None),
            recently_removed: Default::default(),
            index,
            config,
        });
        svc.startup_scan()?;
        // Setting up the watch walks every folder (hundreds of milliseconds on a large
        // vault), so it runs beside serving; once it is up, a rescan catches whatever
        // changed between the scan and the watch.
        if svc.config.watch {
            let bg = svc.clone();
            std::thread::Builder::new()
                .name("watch-setup".into())
                .spawn(move || match crate::watch::live::start(&bg) {
                    Ok(w) => {
                        *bg.watcher.lock() = Some(w);
                        if let Err(e) = crate::watch::live::full_rescan(&bg) {
                            tracing::warn!(error = %e.message, "rescan after starting the watch failed");
                        }
                        // The rescan read every file once more.
                        release_free_memory();
                    }
                    Err(e) => tracing::warn!(
                        error = %e,
                        "cannot watch the vault; external edits are seen when read"
                    ),
                })?;
        }
        Ok(svc)
    }

    fn startup_scan(&self) -> anyhow::Result<()> {
        // The watcher is already running: it waits for this lock before reconciling.
        let _write = self.write_lock.lock();
        let started = std::time::Instant::now();
        let found = scan::scan(&self.paths);
        let scanned = started.elapsed();
        for temp in &found.leftovers {
            if std::fs::remove_file(temp).is_ok() {
                tracing::info!(path = %temp.display(), "removed a temp file left by an interrupted write");
            }
        }
        let stored = self.meta.all_notes()?;
        let history_status = self.history.status();
        let first_history = history_status.head.is_none();
        // History is behind the revisions (it was stalled, or the daemon stopped before a
        // commit was written): record the whole vault as it is now, and find out which of
        // the revisions in between that commit holds.
        let behind = !first_history && history_status.head_seq < self.committed_seq();
        let gap = if behind {
            tracing::warn!(
                history_seq = history_status.head_seq,
                committed_seq = self.committed_seq(),
                "history is behind the recorded revisions; recording the vault as found"
            );
            self.meta.revisions_after(history_status.head_seq)?
        } else {
            Vec::new()
        };
        let history: Vec<Change> = if first_history || behind {
            found
                .observed
                .iter()
                .map(|o| reconcile::recorded(&self.paths.root, o))
                .collect()
        } else {
            Vec::new()
        };
        let mut by_path: HashMap<String, Observed> = found
            .observed
            .into_iter()
            .map(|o| (o.rel.clone(), o))
            .collect();
        // Rebuild the catalog as stored; what differs goes through reconcile.
        let mut removed = Vec::new();
        let mut changed = Vec::new();
        {
            let mut catalog = self.catalog.write();
            for row in stored {
                let created = parse_time(&row.created_at);
                let observed_at = parse_time(&row.observed_at);
                let obs = match by_path.remove(&row.path) {
                    Some(obs) if obs.content_hash == row.content_hash => obs,
                    Some(obs) => {
                        // Changed while stopped: the stored version goes in, reconcile
                        // records the new one.
                        let stale = Observed {
                            content_hash: row.content_hash.clone(),
                            ..obs.clone()
                        };
                        changed.push(obs);
                        stale
                    }
                    None => {
                        removed.push(row.path.clone());
                        Observed {
                            rel: row.path.clone(),
                            size: 0,
                            mtime: std::time::SystemTime::UNIX_EPOCH,
                            created: std::time::SystemTime::UNIX_EPOCH,
                            content_hash: row.content_hash.clone(),
                            facts: Default::default(),
                            content: None,
                        }
                    }
                };
                catalog.insert(reconcile::note_from(
                    obs,
                    row.note_id,
                    row.version_id,
                    created,
                    observed_at,
                ));
            }
            catalog.excluded = found.excluded;
        }
        // Files the store has never seen.
        changed.extend(by_path.into_values());
        // Writes under way when the daemon stopped: what landed is recorded as those
        // writes, before the rest is taken as an editor's changes.
        crate::writes::recover::resolve_intents(self, &mut changed, &mut removed)?;
        let subject = if first_history {
            "Record the vault as found"
        } else if behind {
            "Record the vault as found (history was behind)"
        } else {
            "Record changes made while notevault was stopped"
        };
        let outcome = reconcile::reconcile(self, changed, removed, "filesystem", subject, history)?;
        if behind {
            self.settle_gap(gap, outcome.commit);
        }
        // The index catches up with the catalog in the background; every later change
        // follows it in order.
        let notes: Vec<Arc<Note>> = self.catalog.read().iter().cloned().collect();
        self.index.start(notes, self.committed_seq());
        tracing::info!(
            notes = self.catalog.read().len(),
            revisions = outcome.revisions,
            scan_ms = scanned.as_millis() as u64,
            total_ms = started.elapsed().as_millis() as u64,
            "vault scanned"
        );
        Ok(())
    }

    /// After history was found behind at start: the revisions recorded while it was
    /// behind that are the current version of their note are held by the commit of the
    /// vault as found (their commit id is stored); the others' bytes are gone, and are
    /// counted in the history status. Runs when that commit is written.
    fn settle_gap(
        &self,
        gap: Vec<crate::meta::RevisionRow>,
        commit: Option<std::sync::mpsc::Receiver<Result<crate::history::Written>>>,
    ) {
        let current: Vec<i64> = {
            let catalog = self.catalog.read();
            gap.iter()
                .filter(|r| {
                    catalog
                        .get_by_id(&r.note_id)
                        .is_some_and(|n| n.version_id == r.version_id && n.path == r.path)
                })
                .map(|r| r.seq)
                .collect()
        };
        let lost = gap
            .iter()
            .filter(|r| r.content_hash.is_some() && !current.contains(&r.seq))
            .count() as u64;
        let commit_id = commit
            .and_then(|rx| rx.recv().ok())
            .and_then(|r| r.ok())
            .and_then(|w| w.id);
        match commit_id {
            Some(id) => {
                if let Err(e) = self.meta.set_commit_ids(&current, &id) {
                    tracing::warn!(error = %e.message, "cannot link revisions to the commit of the vault as found");
                }
                if lost > 0 {
                    tracing::warn!(
                        revisions = lost,
                        "revisions recorded while history was behind have no bytes in history"
                    );
                    self.history.note_lost_revisions(lost);
                }
            }
            None => tracing::warn!("the commit of the vault as found failed; it is retried"),
        }
    }

    pub fn committed_seq(&self) -> i64 {
        self.committed_seq.load(Ordering::SeqCst)
    }

    pub(crate) fn set_committed_seq(&self, seq: i64) {
        self.committed_seq.store(seq, Ordering::SeqCst);
    }

    pub fn root(&self) -> &Path {
        &self.paths.root
    }

    pub fn state_dir(&self) -> &PathBuf {
        &self.paths.state_dir
    }

    /// Find a note by note id or slug. A key that would leave the vault is `UNSAFE_PATH`;
    /// a note file created since the scan is taken in on the spot.
    pub fn find(&self, key: &str) -> Result<Arc<Note>> {
        self.find_with(key, |rel| self.refresh(rel))
    }

    /// [`Service::find`] for a caller that holds the write lock.
    pub(crate) fn find_locked(&self, key: &str) -> Result<Arc<Note>> {
        self.find_with(key, |rel| self.refresh_locked(rel))
    }

    fn find_with(&self, key: &str, refresh: impl Fn(&str) -> Result<()>) -> Result<Arc<Note>> {
        if key.is_empty() {
            return Err(Error::invalid_field("note", "must be at least 1 character"));
        }
        if let Some(note) = self.catalog.read().find(key) {
            return Ok(note.clone());
        }
        let rel = if key.ends_with(".md") {
            key.to_string()
        } else {
            format!("{key}.md")
        };
        let safe = self.paths.resolve(&rel)?;
        if safe.abs.is_file() {
            refresh(&safe.rel)?;
            if let Some(note) = self.catalog.read().get(crate::vault::path::slug_of(&rel)) {
                return Ok(note.clone());
            }
        }
        Err(Error::not_found(key))
    }

    /// Read a note's bytes, checking the path again and catching an external edit the
    /// catalog has not seen yet (it is reconciled as a `filesystem` revision first).
    pub fn read(&self, key: &str) -> Result<(Arc<Note>, Vec<u8>)> {
        match self.read_agreeing(key, false)? {
            Ok(read) => Ok(read),
            // Still changing after a few tries: the latest bytes.
            Err(note) => {
                let bytes = std::fs::read(self.paths.resolve(&note.path)?.abs)?;
                Ok((note, bytes))
            }
        }
    }

    /// Read the note `key` names so that the bytes are the version answered: an editor
    /// writing in place can be caught mid-write, so a file whose hash is not the
    /// catalog's is reconciled and read again, a few times. `Err(note)`: it kept changing
    /// (the latest note). `locked`: the caller holds the write lock.
    pub(crate) fn read_agreeing(
        &self,
        key: &str,
        locked: bool,
    ) -> Result<std::result::Result<NoteBytes, Arc<Note>>> {
        let find = |key: &str| {
            if locked {
                self.find_locked(key)
            } else {
                self.find(key)
            }
        };
        let refresh = |rel: &str| {
            if locked {
                self.refresh_locked(rel)
            } else {
                self.refresh(rel)
            }
        };
        let mut note = find(key)?;
        for _ in 0..5 {
            let safe = self.paths.resolve(&note.path)?;
            let bytes = match std::fs::read(&safe.abs) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    refresh(&note.path)?;
                    return Err(Error::not_found(key));
                }
                Err(e) => return Err(Error::internal(format!("cannot read {}: {e}", note.path))),
            };
            if scan::content_hash(&bytes) == note.content_hash {
                return Ok(Ok((note, bytes)));
            }
            refresh(&note.path)?;
            note = find(&note.note_id)?;
        }
        Ok(Err(note))
    }

    /// The history of the note `key` names, also of a deleted note (found by its id or
    /// the path it last had): its id, slug, current version (`None` when deleted) and
    /// revisions, oldest first.
    pub fn history_of(&self, key: &str) -> Result<NoteHistory> {
        self.history_with(key, true)
    }

    /// [`Service::history_of`] without loading the revisions of a note that exists (a
    /// caller that pages them from the store itself).
    pub fn history_with(&self, key: &str, load: bool) -> Result<NoteHistory> {
        let (note_id, slug, current) = match self.find(key) {
            Ok(note) => (
                note.note_id.clone(),
                note.slug.clone(),
                Some(note.version_id.clone()),
            ),
            Err(e) if e.reason == crate::error::Reason::NOTE_NOT_FOUND => {
                let mut by_id = self.meta.revisions_of(key)?;
                if by_id.is_empty() {
                    let rel = if key.ends_with(".md") {
                        key.to_string()
                    } else {
                        format!("{key}.md")
                    };
                    if let Some(r) = self.meta.latest_revision_at(&rel)? {
                        by_id = self.meta.revisions_of(&r.note_id)?;
                    }
                }
                let last = by_id.last().ok_or_else(|| Error::not_found(key))?;
                let slug = crate::vault::path::slug_of(&last.path).to_string();
                let note_id = last.note_id.clone();
                return Ok(NoteHistory {
                    note_id,
                    slug,
                    current_version_id: None,
                    revisions: by_id,
                });
            }
            Err(e) => return Err(e),
        };
        let revisions = if load {
            self.meta.revisions_of(&note_id)?
        } else {
            Vec::new()
        };
        Ok(NoteHistory {
            note_id,
            slug,
            current_version_id: current,
            revisions,
        })
    }

    /// The links of a note: outgoing (resolved or not) and backlinks with their lines.
    pub fn links(&self, key: &str) -> Result<LinkReport> {
        let note = self.find(key)?;
        let catalog = self.catalog.read();
        let graph = crate::vault::graph::Graph::build(&catalog);
        let outgoing = note
            .links
            .iter()
            .filter(|l| !crate::vault::graph::Graph::is_attachment(l))
            .map(|l| (l.clone(), graph.resolve(&note, l).cloned()))
            .collect();
        let backlinks = graph
            .backlinks(&note)
            .into_iter()
            .map(|(n, lines)| (n.clone(), lines))
            .collect();
        Ok(LinkReport {
            total: catalog.len(),
            committed_seq: self.committed_seq(),
            note,
            outgoing,
            backlinks,
        })
    }

    /// The bytes of a revision (`None` for a delete). A revision whose bytes are not in
    /// history is an error that says so, never an empty or a wrong content: left out of
    /// history, or lost while history was behind, is `REVISION_CONTENT_MISSING`; not
    /// written yet (history is catching up or retrying) is `HISTORY_BEHIND`.
    pub fn revision_content(&self, revision: &crate::meta::RevisionRow) -> Result<Option<Vec<u8>>> {
        use crate::history::Stored;
        if revision.content_hash.is_none() {
            return Ok(None);
        }
        let lookup = || match &revision.commit_id {
            Some(commit) => crate::history::read_at(self.history.git_dir(), commit, &revision.path),
            None => {
                crate::history::content_at_seq(self.history.git_dir(), revision.seq, &revision.path)
            }
        };
        let mut stored = lookup()?;
        if stored == Stored::NotRecorded && revision.seq > self.history.status().head_seq {
            // Recorded a moment ago: its commit may be on its way.
            self.history.flush(std::time::Duration::from_secs(2));
            stored = lookup()?;
        }
        let missing = |why: String| {
            Error::new(
                Reason::REVISION_CONTENT_MISSING,
                format!(
                    "the bytes of revision {} are not in history: {why}",
                    revision.version_id
                ),
            )
            .with_meta("revision_id", revision.version_id.clone())
        };
        match stored {
            Stored::Bytes(bytes) => Ok(Some(bytes)),
            Stored::LeftOut(why) => Err(missing(why)),
            Stored::Absent => Err(missing(format!(
                "its commit does not hold {}",
                revision.path
            ))),
            Stored::NotRecorded if revision.seq > self.history.status().head_seq => {
                let status = self.history.status();
                Err(Error::new(
                    Reason::HISTORY_BEHIND,
                    format!(
                        "history has recorded changes up to {}, not yet revision {} (seq {}); {} commits are waiting to be retried",
                        status.head_seq, revision.version_id, revision.seq, status.backlog
                    ),
                )
                .with_meta("revision_id", revision.version_id.clone())
                .with_retry_after(5))
            }
            Stored::NotRecorded => Err(missing(
                "the daemon stopped (or gave up a failing commit) before history recorded it"
                    .into(),
            )),
        }
    }

    /// Reconcile one path with the disk (`filesystem` actor).
    pub fn refresh(&self, rel: &str) -> Result<()> {
        let _write = self.write_lock.lock();
        self.refresh_locked(rel)
    }

    /// [`Service::refresh`] for a caller that holds the write lock. An emptied note still
    /// changing (an in-place save half done) is not recorded (`watch::settle`).
    pub(crate) fn refresh_locked(&self, rel: &str) -> Result<()> {
        let (observed, removed) = match crate::watch::settle::observe(self, rel) {
            Ok(Some(o)) => (vec![o], vec![]),
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (vec![], vec![rel.to_string()]),
            Err(e) => return Err(Error::internal(format!("cannot read {rel}: {e}"))),
        };
        reconcile::reconcile(
            self,
            observed,
            removed,
            "filesystem",
            "Record an external edit",
            Vec::new(),
        )?;
        Ok(())
    }

    /// A line-sliced read: 1-based `offset`, `limit` lines (1..=2000).
    pub fn read_lines(
        &self,
        key: &str,
        offset: usize,
        limit: usize,
    ) -> Result<(Arc<Note>, LinePage)> {
        if offset < 1 {
            return Err(Error::invalid_field(
                "offset",
                "must be 1 or more (lines are numbered from 1)",
            ));
        }
        if !(1..=MAX_LINES).contains(&limit) {
            return Err(Error::invalid_field(
                "limit",
                format!("must be between 1 and {MAX_LINES}"),
            ));
        }
        let (note, bytes) = self.read(key)?;
        let (text, _) = markdown::decode(&bytes);
        let all: Vec<&str> = markdown::lines(&text).collect();
        let total = all.len();
        if offset > total.max(1) {
            return Err(Error::invalid_field(
                "offset",
                format!("line {offset} is past the end of the note ({total} lines); use an offset from 1 to {}", total.max(1)),
            ));
        }
        let items: Vec<(usize, String)> = all
            .iter()
            .enumerate()
            .skip(offset - 1)
            .take(limit)
            .map(|(i, l)| (i + 1, (*l).to_string()))
            .collect();
        let end = offset - 1 + items.len();
        Ok((
            note,
            LinePage {
                offset,
                limit,
                total,
                next_offset: (end < total).then_some(end + 1),
                items,
            },
        ))
    }

    /// The folders holding notes (at any depth), derived from the catalog: a folder is
    /// listed when a note is in it or below it; only those whose path starts with
    /// `prefix` are kept.
    pub fn folders(&self, prefix: &str) -> FolderListing {
        let catalog = self.catalog.read();
        let mut counts: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
        for note in catalog.iter() {
            let Some((dir, _)) = note.slug.rsplit_once('/') else {
                continue;
            };
            counts.entry(dir).or_default().0 += 1;
            let mut folder = dir;
            loop {
                counts.entry(folder).or_default().1 += 1;
                match folder.rsplit_once('/') {
                    Some((parent, _)) => folder = parent,
                    None => break,
                }
            }
        }
        FolderListing {
            folders: counts
                .into_iter()
                .filter(|(path, _)| path.starts_with(prefix))
                .map(|(path, (notes, notes_total))| FolderEntry {
                    path: path.to_string(),
                    notes,
                    notes_total,
                })
                .collect(),
            total: catalog.len(),
            excluded: catalog.excluded.clone(),
            committed_seq: self.committed_seq(),
        }
    }

    /// List notes whose slug starts with `prefix` and that match `filter`, in slug order,
    /// after `after`.
    pub fn list(
        &self,
        prefix: &str,
        filter: Option<&crate::filter::Expr>,
        after: Option<&str>,
        page_size: usize,
    ) -> NoteList {
        let catalog = self.catalog.read();
        let mut notes = Vec::with_capacity(page_size.min(catalog.len()));
        let mut next_after = None;
        let after = after.filter(|a| *a >= prefix);
        let start = after.or(None);
        let uses_links = filter.is_some_and(|f| {
            f.fields()
                .iter()
                .any(|(name, _)| matches!(*name, "links_to" | "linked_from" | "orphan"))
        });
        let graph = uses_links.then(|| crate::vault::graph::Graph::build(&catalog));
        let links = graph.as_ref().map(LinkSets::new);
        let keep = |n: &&Arc<Note>| {
            filter.is_none_or(|f| f.matches(&|field| note_field(n, field, links.as_ref())))
        };
        // A filter over tags, folder, path or slug walks only its candidates.
        let scope = catalog.scope(filter);
        let mut iter = scope.walk(prefix, start).filter(keep);
        for note in iter.by_ref() {
            if notes.len() == page_size {
                next_after = notes.last().map(|n: &Arc<Note>| n.slug.clone());
                break;
            }
            notes.push(note.clone());
        }
        let matched = if prefix.is_empty() && filter.is_none() {
            catalog.len()
        } else if start.is_none() && next_after.is_none() {
            // The page holds every match already: no second pass of the filter.
            notes.len()
        } else {
            scope.walk(prefix, None).filter(keep).count()
        };
        NoteList {
            notes,
            next_after,
            matched,
            total: catalog.len(),
            excluded: catalog.excluded.clone(),
            committed_seq: self.committed_seq(),
        }
    }
}

/// The filter fields of a note listing.
pub const NOTE_FILTER_FIELDS: &[&str] = &[
    "tags",
    "folder",
    "path",
    "slug",
    "title",
    "status",
    "visibility",
    "created_at",
    "updated_at",
    "links_to",
    "linked_from",
    "orphan",
    "frontmatter.",
];

/// Resolved links of every note, for the link filter fields.
pub struct LinkSets<'a> {
    outgoing: HashMap<&'a str, HashSet<&'a str>>,
    incoming: HashMap<&'a str, HashSet<&'a str>>,
}

impl<'a> LinkSets<'a> {
    pub fn new(graph: &crate::vault::graph::Graph<'a>) -> Self {
        let outgoing = graph.edges();
        let mut incoming: HashMap<&str, HashSet<&str>> = HashMap::new();
        for (from, targets) in &outgoing {
            for to in targets {
                incoming.entry(*to).or_default().insert(*from);
            }
        }
        Self { outgoing, incoming }
    }
}

/// A note's value for a filter field. `links_to` lists the slugs it links to,
/// `linked_from` the slugs linking to it, `orphan` is `true` when nothing links to it.
pub fn note_field(note: &Note, field: &str, links: Option<&LinkSets<'_>>) -> crate::filter::Value {
    use crate::filter::Value;
    let slugs = |m: Option<&HashSet<&str>>| {
        let mut v: Vec<String> = m.into_iter().flatten().map(|s| s.to_string()).collect();
        v.sort();
        Value::List(v)
    };
    match field {
        "links_to" => slugs(links.and_then(|l| l.outgoing.get(note.slug.as_str()))),
        "linked_from" => slugs(links.and_then(|l| l.incoming.get(note.slug.as_str()))),
        "orphan" => Value::Text(
            links
                .is_some_and(|l| {
                    l.incoming
                        .get(note.slug.as_str())
                        .is_none_or(|s| s.is_empty())
                })
                .to_string(),
        ),
        "tags" => Value::List(note.tags.clone()),
        "folder" => Value::Text(
            note.slug
                .rsplit_once('/')
                .map_or("", |(f, _)| f)
                .to_string(),
        ),
        "path" => Value::Text(note.path.clone()),
        "slug" => Value::Text(note.slug.clone()),
        "title" => Value::Text(note.title.clone()),
        "status" => Value::Text(note.status.clone()),
        "visibility" => Value::Text(note.visibility.as_str().to_string()),
        "created_at" => Value::Time(note.created_at),
        "updated_at" => Value::Time(note.updated_at),
        other => {
            let Some(key) = other.strip_prefix("frontmatter.") else {
                return Value::Missing;
            };
            match note.frontmatter.as_ref().and_then(|m| m.get(key)) {
                Some(serde_norway::Value::Sequence(items)) => {
                    Value::List(items.iter().filter_map(markdown::scalar_string).collect())
                }
                Some(serde_norway::Value::Number(n)) => {
                    n.as_f64().map_or(Value::Missing, Value::Number)
                }
                Some(v) => markdown::scalar_string(v).map_or(Value::Missing, Value::Text),
                None => Value::Missing,
            }
        }
    }
}

/// Hand memory freed after a burst (the start-up scan, a rescan, the index build) back to
/// the system: glibc keeps freed memory in its arenas otherwise, and the daemon's resident
/// size would stay at its peak.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's heaps to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn parse_time(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

fn probe_writable(dir: &Path) -> anyhow::Result<()> {
    let probe = dir.join(".notevault-tmp-probe");
    std::fs::write(&probe, b"")
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| anyhow::anyhow!("state dir {} is not writable: {e}", dir.display()))
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_key(hex: &str) -> Option<[u8; 32]> {
    let mut key = [0u8; 32];
    if hex.len() != 64 {
        return None;
    }
    for (i, chunk) in hex.as_bytes().chunks(2).enumerate() {
        key[i] = u8::from_str_radix(std::str::from_utf8(chunk).ok()?, 16).ok()?;
    }
    Some(key)
}
