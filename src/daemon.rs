//! The composition root: open the state directory and its stores, scan the folder and
//! record what changed while stopped, start the search index and the live watcher. What
//! it builds is a [`State`]; nothing below imports this module.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use rayon::prelude::*;

use crate::config::Config;
use crate::history::{Change, History};
use crate::memory::release_free_memory;
use crate::meta::Meta;
use crate::record;
use crate::state::State;
use crate::vault::catalog::{note_from, Excluded, Note};
use crate::vault::fsio;
use crate::vault::path::VaultPaths;
use crate::vault::scan::{self, Observed};
use crate::vault::scan_cache::ScanCache;
use crate::vault::walk::{walk, Want};
use crate::watch::live::{self, LiveWatcher};

/// A running daemon: its state, and the live watcher once it is up. Dropping it stops
/// the watcher.
pub struct Daemon {
    pub state: Arc<State>,
    watcher: Arc<Mutex<Option<LiveWatcher>>>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.state
            .stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Daemon {
    /// Whether the live watcher is up.
    pub fn watching(&self) -> bool {
        self.watcher.lock().is_some()
    }

    /// Stop recording into the state, for a stop on a signal or before the state dir is
    /// opened again: the watcher stops, whatever records under the write lock (a watcher
    /// batch, the start's rescan) finishes and nothing records after it, the index
    /// writes what it holds to disk, and the history writes what is queued (a commit that
    /// keeps failing gets one last try, and is found missing at the next start, as after
    /// a crash). Nothing of this daemon records into the state dir after it returns: what
    /// would takes the write lock and finds the state closed (`State::lock_to_record`).
    pub fn stop(self) {
        let _recording = self.quiesce();
    }

    /// [`Self::stop`]'s steps; the write lock it returns keeps anything from recording
    /// while the caller goes on (a purge removes the state's files under it).
    fn quiesce(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.state
            .stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.watcher.lock().take();
        // A recording under way holds the write lock: it ends first; one that takes the
        // lock after this finds the state closed.
        let recording = self.state.write_lock.lock();
        self.state.index.shutdown();
        self.state.history.stop();
        recording
    }
}

/// What a purge did (see [`purge`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purged {
    /// Notes moved into `.trash/` (when asked).
    pub trashed: usize,
    /// Notes that could not be moved (changed or gone meanwhile): left where they are.
    pub kept: usize,
}

/// What the state directory holds that a purge removes: the history, the index, the note
/// vectors of hybrid search, the metadata store (tokens, queue, sessions, sync log,
/// audit). Named one by one, so a state directory pointed at a folder that holds other
/// files loses only these.
const STATE_FILES: [&str; 9] = [
    "history.git",
    "index",
    "vectors",
    "index.lock",
    crate::vault::scan_cache::FILE_NAME,
    crate::vault::scan_cache::TEMP_NAME,
    "meta.sqlite",
    "meta.sqlite-wal",
    "meta.sqlite-shm",
];

/// Remove everything the daemon holds about its vault, after serving stopped: stop the
/// watcher, the index and the history writer, move the notes to `.trash/` when
/// `request` says so (each only if it is still the version the catalog holds), remove
/// the state directory's files, and leave a fresh metadata store whose audit log holds
/// one row: that a purge happened. The notes folder is otherwise untouched.
#[allow(
    clippy::disallowed_methods,
    reason = "removes the daemon's own files in the state directory"
)]
pub fn purge(daemon: Daemon, request: &crate::state::PurgeRequest) -> anyhow::Result<Purged> {
    let state = daemon.state.clone();
    // Nothing records from here on.
    let recording = daemon.quiesce();
    let (mut trashed, mut kept) = (0, 0);
    if request.trash_notes {
        let notes: Vec<Arc<Note>> = state.catalog.read().iter().cloned().collect();
        for note in notes {
            let from = state.root().join(&note.path);
            let to = crate::writes::trash_path(state.root(), &note.path);
            match fsio::atomic_move(&from, &to, &fsio::Expect::Hash(note.content_hash.clone())) {
                Ok(()) => trashed += 1,
                Err(e) => {
                    kept += 1;
                    tracing::warn!(path = %note.path, error = %e.message, "purge: a note was not moved to .trash/");
                }
            }
        }
    }
    let dir = state.state_dir().clone();
    for name in STATE_FILES {
        let path = dir.join(name);
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match removed {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => anyhow::bail!("purge: cannot remove {}: {e}", path.display()),
        }
    }
    let meta = Meta::open(&dir.join("meta.sqlite"))
        .map_err(|e| anyhow::anyhow!("purge: state dir {}: {}", dir.display(), e.message))?;
    let counts = [
        ("notes_trashed", trashed as i64),
        ("notes_kept", kept as i64),
    ];
    meta.append_audit(
        &crate::meta::audit::AuditEvent::new(crate::meta::audit::AuditKind::Purged, &request.actor)
            .counts(&counts),
        &crate::clock::timestamp(Utc::now()),
    )
    .map_err(|e| anyhow::anyhow!("purge: cannot write the audit row: {}", e.message))?;
    drop(recording);
    drop(state);
    drop(daemon);
    Ok(Purged { trashed, kept })
}

/// How long the rescan after a first start waits for the search index's build.
const START_SYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Open the state directory, scan the vault and reconcile it with what was stored. The
/// history commit of the scan runs in the background: serving does not wait.
pub fn open(config: Config) -> anyhow::Result<Daemon> {
    let root = config.vault.canonicalize().map_err(|e| {
        anyhow::anyhow!("vault folder {} is not usable: {e}", config.vault.display())
    })?;
    if !root.is_dir() {
        anyhow::bail!("vault {} is not a folder", root.display());
    }
    let state_dir = config.state_dir_of_vault()?;
    crate::state::create_state_dir(&state_dir)
        .map_err(|e| anyhow::anyhow!("state dir {} is not writable: {e}", state_dir.display()))?;
    let state_dir = state_dir.canonicalize()?;
    probe_writable(&state_dir)?;
    let meta = Meta::open(&state_dir.join("meta.sqlite"))
        .map_err(|e| anyhow::anyhow!("state dir {}: {}", state_dir.display(), e.message))?;
    let history = History::open(&state_dir.join("history.git"))
        .map_err(|e| anyhow::anyhow!("state dir {}: {}", state_dir.display(), e.message))?;
    let token_key = match meta.setting("page_token_key")? {
        Some(hex) => parse_key(&hex).ok_or_else(|| anyhow::anyhow!("corrupt page token key"))?,
        None => {
            let key: [u8; 32] = *blake3::hash(uuid::Uuid::new_v4().as_bytes()).as_bytes();
            let key = *blake3::keyed_hash(&key, uuid::Uuid::new_v4().as_bytes()).as_bytes();
            meta.set_setting("page_token_key", &hex_of(&key))?;
            key
        }
    };
    let vault_id = match meta.setting("vault_id")? {
        Some(id) => id,
        None => {
            let id = uuid::Uuid::now_v7().to_string();
            meta.set_setting("vault_id", &id)?;
            id
        }
    };
    let index =
        crate::index::SearchIndex::open_with_model(&state_dir, config.embed_model.as_deref())?;
    let state = Arc::new(State::new(
        config,
        VaultPaths::new(root, state_dir),
        meta,
        history,
        index,
        token_key,
        vault_id,
    )?);
    if let Some(observed) = startup_scan(&state)? {
        let bg = state.clone();
        std::thread::Builder::new()
            .name("scan-cache".into())
            .spawn(move || live::write_scan_cache(&bg, &observed))?;
    }
    let watcher = Arc::new(Mutex::new(None));
    // Setting up the watch walks every folder (hundreds of milliseconds on a large
    // vault), so it runs beside serving; once it is up, a rescan catches whatever
    // changed between the scan and the watch.
    // Once the watch is up, a full rescan catches whatever changed between the scan and
    // the watch; it is also the verify of the notes the start recalled from the scan
    // cache (it reads and hashes every file, keeps the bytes, records what differs, starts
    // the search index) and it writes the scan cache anew. Without a watch, it runs only
    // to verify.
    if state.config.watch || state.unread.pending() {
        let bg = state.clone();
        // `State::stopped` (set when the `Daemon` is dropped) keeps a rescan from starting
        // on a stopped daemon's state.
        let slot = watcher.clone();
        std::thread::Builder::new()
            .name("watch-setup".into())
            .spawn(move || {
                if bg.config.watch {
                    match live::start(&bg) {
                        Ok(w) => {
                            // A daemon stopped meanwhile keeps no watcher (`quiesce` sets
                            // `stopped`, then empties the slot).
                            let mut slot = slot.lock();
                            if !bg.stopped.load(std::sync::atomic::Ordering::SeqCst) {
                                *slot = Some(w);
                            }
                        }
                        Err(e) => tracing::warn!(
                            error = %e,
                            "cannot watch the vault; external edits are seen when read"
                        ),
                    }
                }
                // When the start did not wait for a verify (a first start, a rebuilt
                // index), the index is being built from the catalog now; the rescan reads
                // the whole vault again, so it waits for that build rather than hold both
                // in memory at once. Meanwhile reads of known notes check their stamps
                // (`record::refresh`) and the watch is up; a note created before the watch
                // was up is listed once the rescan has run.
                let deadline = std::time::Instant::now() + START_SYNC_WAIT;
                while !bg.index.start_sync_settled() {
                    if bg.stopped.load(std::sync::atomic::Ordering::SeqCst) {
                        return;
                    }
                    if std::time::Instant::now() >= deadline {
                        tracing::warn!(
                            "the search index build is slow; verifying the vault beside it"
                        );
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                let rescan = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    live::full_rescan(&bg)
                }));
                match rescan {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e.message, "rescan after the start failed")
                    }
                    Err(_) => tracing::error!("rescan after the start panicked"),
                }
                // Whatever happened, the start's verify ends (the index starts).
                live::settle_start(&bg);
                // The rescan read every file once more.
                release_free_memory();
            })?;
    }
    // Sync ops past the retention are compacted hourly (and on demand:
    // `POST /v1/sync:compact`); the thread ends once the state is dropped.
    let weak = Arc::downgrade(&state);
    std::thread::Builder::new()
        .name("sync-compact".into())
        .spawn(move || {
            crate::sync::compact_periodically(weak, std::time::Duration::from_secs(3600))
        })?;
    Ok(Daemon { state, watcher })
}

/// What [`resolve_leftovers`] did.
#[derive(Default)]
struct Leftovers {
    /// Temp files moved into the vault's notes (put back, or kept as a recovered copy).
    moved: usize,
    /// Notes (vault-relative) whose replacing write's leftover could not be cleared (a
    /// read-only vault): what is at their path may be a write's refused bytes, so no
    /// intent is taken as landed there.
    unresolved: std::collections::HashSet<String>,
}

/// Put right the temp files left by interrupted writes (`fsio::resolve_leftover`).
fn resolve_leftovers(state: &State, leftovers: &[std::path::PathBuf]) -> Leftovers {
    let mut done = Leftovers::default();
    for temp in leftovers {
        match fsio::resolve_leftover(temp) {
            Ok(fsio::Leftover::Removed) => {
                tracing::info!(path = %temp.display(), "removed a temp file left by an interrupted write");
            }
            Ok(fsio::Leftover::PutBack(note)) => {
                done.moved += 1;
                tracing::warn!(
                    path = %note.display(),
                    "a write was interrupted while it replaced this note; the note as it was before the write is back"
                );
            }
            Ok(fsio::Leftover::Recovered { note, copy }) => {
                done.moved += 1;
                tracing::warn!(
                    path = %note.display(),
                    copy = %copy.display(),
                    "a write was interrupted while it replaced this note, and the note changed since; the save the write had swapped out is kept beside it"
                );
            }
            Err(e) => {
                tracing::warn!(path = %temp.display(), error = %e, "cannot clear a temp file left by an interrupted write");
                let rel = fsio::leftover_note(temp).map(|note| state.paths.rel_lossy(&note));
                done.unresolved.extend(rel);
            }
        }
    }
    done
}

/// The start-up scan; what it read, when the scan cache is to be written from it (no
/// rescan follows).
fn startup_scan(state: &State) -> anyhow::Result<Option<Vec<Observed>>> {
    // The watcher is already running: it waits for this lock before reconciling.
    let _write = state.write_lock.lock();
    let started = std::time::Instant::now();
    let history_status = state.history.status();
    let first_history = history_status.head.is_none();
    // History is behind the revisions (it was stalled, or the daemon stopped before a
    // commit was written): record the whole vault as it is now, and find out which of
    // the revisions in between that commit holds.
    // A HEAD moved back by a repair (`history::repair`) counts as behind even when no
    // commit was left.
    let behind = (!first_history || history_status.repaired_at_start)
        && history_status.head_seq < state.committed_seq();
    // A file whose stamp is the one the last full scan saw is taken from the scan cache
    // unread, unless the whole vault is to be recorded (its bytes go into history now)
    // or indexed (a new or rebuilt index: `notevault reindex`).
    let use_cache = !(first_history || behind) && state.index.state().rebuilt.is_none();
    // Side by side: the walk that lists the notes (with a stat of each when the cache is
    // to be used) and the attachments, the load of the scan cache and of the stored notes.
    let want = Want {
        notes: true,
        note_stats: use_cache,
        attachments: true,
    };
    let (mut walked, (cache, stored)) = rayon::join(
        || walk(&state.paths, want),
        || {
            rayon::join(
                || {
                    use_cache
                        .then(|| ScanCache::load(state.state_dir()))
                        .flatten()
                },
                || state.meta.all_notes(),
            )
        },
    );
    let stored = stored?;
    // Temp files of interrupted writes, before anything is read: a note swapped out by a
    // write that a crash cut short goes back to its path, or beside it (`fsio::Leftover`),
    // and then the walk is taken again, so it lists the files as they are now.
    let leftovers = resolve_leftovers(state, &walked.leftovers);
    if leftovers.moved > 0 {
        walked = walk(&state.paths, want);
    }
    let listed_at = started.elapsed();
    let listed = std::mem::take(&mut walked.attachments);
    let mut file_excluded = std::mem::take(&mut walked.attachments_excluded);
    let found = scan::scan_with(&state.paths, walked, cache);
    let scanned = started.elapsed();
    let mut recalled = found.recalled;
    let found_count = found.observed.len();
    // Without a watcher no rescan follows the start: the cache is written from this scan.
    let cache_from_scan: Option<Vec<Observed>> =
        (!state.config.watch && recalled.is_empty()).then(|| found.observed.clone());
    let gap = if behind {
        tracing::warn!(
            history_seq = history_status.head_seq,
            committed_seq = state.committed_seq(),
            "history is behind the recorded revisions; recording the vault as found"
        );
        state.meta.revisions_after(history_status.head_seq)?
    } else {
        Vec::new()
    };
    // Attachments: the stored facts go into the catalog, and each file on disk is
    // observed in parallel, re-hashed only when its size, mtime or inode changed.
    let stored_files: HashMap<String, crate::vault::attachments::Attachment> = state
        .meta
        .all_attachments()?
        .into_iter()
        .map(|row| (row.path.clone(), record::attachment_of(row)))
        .collect();
    let (found_files, bad) =
        crate::vault::attachments::observe_all(&state.paths.root, &listed, &stored_files);
    file_excluded.extend(bad);
    let gone_files: Vec<String> = {
        let on_disk: std::collections::HashSet<&str> = listed.iter().map(String::as_str).collect();
        stored_files
            .keys()
            .filter(|p| !on_disk.contains(p.as_str()))
            .cloned()
            .collect()
    };
    {
        let mut attachments = state.attachments.write();
        for a in stored_files.into_values() {
            attachments.insert(a);
        }
        attachments.excluded = file_excluded;
    }
    let mut history: Vec<Change> = if first_history || behind {
        found
            .observed
            .iter()
            .map(|o| record::history_change(state, o, None))
            .collect()
    } else {
        Vec::new()
    };
    if first_history || behind {
        history.extend(
            found_files
                .iter()
                .map(|a| record::file_change(state, &a.path, true)),
        );
    }
    let files = record::files::changes(state, found_files, &gone_files);
    // Rebuild the catalog as stored; what differs goes through reconcile. Each stored
    // row meets its file's observation in one merge of the two lists in path order, and
    // the notes are built in parallel.
    let mut stored = stored;
    let mut observed = found.observed;
    rayon::join(
        || stored.par_sort_unstable_by(|a, b| a.path.cmp(&b.path)),
        || observed.par_sort_unstable_by(|a, b| a.rel.cmp(&b.rel)),
    );
    let (pairs, unknown) = pair_by_path(stored, observed);
    let rebuilt: Vec<Rebuilt> = pairs
        .into_par_iter()
        .map(|(row, found_now)| rebuild(state, row, found_now, &recalled))
        .collect();
    let mut removed = Vec::new();
    let mut changed = Vec::new();
    let mut excluded = found.excluded;
    let mut notes = Vec::with_capacity(rebuilt.len());
    for r in rebuilt {
        if r.reread {
            recalled.remove(&r.note.path);
        }
        notes.push(r.note);
        changed.extend(r.changed.map(|b| *b));
        removed.extend(r.removed);
        excluded.extend(r.excluded);
    }
    // Files the store has never seen (one recalled from the cache is read now).
    for obs in unknown {
        let obs = if recalled.remove(&obs.rel) {
            reread(state, &obs.rel, &mut excluded)
        } else {
            Some(obs)
        };
        changed.extend(obs);
    }
    {
        let mut catalog = state.catalog.write();
        catalog.insert_all(notes);
        catalog.excluded = excluded;
    }
    let cataloged = started.elapsed();
    // Writes under way when the daemon stopped: what landed is recorded as those
    // writes, before the rest is taken as an editor's changes.
    crate::writes::recover::resolve_intents(
        state,
        &mut changed,
        &mut removed,
        &leftovers.unresolved,
    )?;
    let subject = if first_history {
        "Record the vault as found"
    } else if behind {
        "Record the vault as found (history was behind)"
    } else {
        "Record changes made while notevault was stopped"
    };
    let whole_vault = (first_history || behind).then_some(history);
    let outcome = record::reconcile::reconcile_with_files(
        state,
        changed,
        removed,
        files,
        "filesystem",
        subject,
        whole_vault,
    )?;
    if behind {
        settle_gap(state, gap, outcome.commit);
    }
    // The index catches up with the catalog in the background; every later change
    // follows it in order. When notes were recalled unread, the verify starts it once
    // their bytes are in (until then, searches answer from the index as it was stored).
    state
        .unread
        .begin(found_count - recalled.len(), recalled.len());
    if first_history || behind {
        // Recording the whole vault built rows for every note; hand that memory back
        // before the index build takes its share.
        release_free_memory();
    }
    if recalled.is_empty() {
        let notes: Vec<Arc<Note>> = state.catalog.read().iter().cloned().collect();
        state.index.start(notes, state.committed_seq());
    }
    tracing::info!(
        notes = state.catalog.read().len(),
        recalled = recalled.len(),
        revisions = outcome.revisions,
        listed_ms = listed_at.as_millis() as u64,
        scan_ms = scanned.as_millis() as u64,
        catalog_ms = cataloged.as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "vault scanned"
    );
    Ok(cache_from_scan)
}

/// After history was found behind at start: the revisions recorded while it was
/// behind that are the current version of their note are held by the commit of the
/// vault as found (their commit id is stored); the others' bytes are gone, and are
/// counted in the history status. Runs when that commit is written.
fn settle_gap(
    state: &State,
    gap: Vec<crate::meta::RevisionRow>,
    commit: Option<std::sync::mpsc::Receiver<crate::error::Result<crate::history::Written>>>,
) {
    let current: Vec<i64> = {
        let catalog = state.catalog.read();
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
            if let Err(e) = state.meta.set_commit_ids(&current, &id) {
                tracing::warn!(error = %e.message, "cannot link revisions to the commit of the vault as found");
            }
            if lost > 0 {
                tracing::warn!(
                    revisions = lost,
                    "revisions recorded while history was behind have no bytes in history"
                );
                state.history.note_lost_revisions(lost);
            }
        }
        None => tracing::warn!("the commit of the vault as found failed; it is retried"),
    }
}

/// A stored note as the start rebuilds it: its catalog entry (the stored version), and
/// what reconcile is to record of it.
struct Rebuilt {
    note: Arc<Note>,
    /// The file now holds another version.
    changed: Option<Box<Observed>>,
    /// The file is gone (its path).
    removed: Option<String>,
    /// The file could not be read again.
    excluded: Option<Excluded>,
    /// It was recalled from the scan cache and has now been read.
    reread: bool,
}

/// Pair each stored row with the observation of its path (both sorted by path); the
/// observations no row names come back apart.
fn pair_by_path(
    rows: Vec<crate::meta::NoteRow>,
    observed: Vec<Observed>,
) -> (Vec<(crate::meta::NoteRow, Option<Observed>)>, Vec<Observed>) {
    let mut pairs = Vec::with_capacity(rows.len());
    let mut unknown = Vec::new();
    let mut observed = observed.into_iter().peekable();
    for row in rows {
        while observed
            .peek()
            .is_some_and(|o| o.rel.as_str() < row.path.as_str())
        {
            unknown.extend(observed.next());
        }
        let found = observed.next_if(|o| o.rel == row.path);
        pairs.push((row, found));
    }
    unknown.extend(observed);
    (pairs, unknown)
}

/// The catalog entry of a stored row, given what the scan found at its path.
fn rebuild(
    state: &State,
    row: crate::meta::NoteRow,
    mut found_now: Option<Observed>,
    recalled: &std::collections::HashSet<String>,
) -> Rebuilt {
    let created = parse_time(&row.created_at);
    let observed_at = parse_time(&row.observed_at);
    let mut excluded = Vec::new();
    let mut reread_now = false;
    if found_now
        .as_ref()
        .is_some_and(|o| o.content_hash != row.content_hash && recalled.contains(&o.rel))
    {
        // Recalled from the cache with a hash the store does not hold: what is built
        // or recorded from this file is read now.
        reread_now = true;
        found_now = reread(state, &row.path, &mut excluded);
    }
    let (mut changed, mut removed) = (None, None);
    let obs = match found_now {
        Some(obs) if obs.content_hash == row.content_hash => obs,
        Some(obs) => {
            // Changed while stopped: the stored version goes in, reconcile records the
            // new one.
            let stale = Observed {
                content_hash: row.content_hash.clone(),
                stamp: None,
                ..obs.clone()
            };
            changed = Some(Box::new(obs));
            stale
        }
        None => {
            removed = Some(row.path.clone());
            Observed {
                rel: row.path.clone(),
                size: 0,
                mtime: std::time::SystemTime::UNIX_EPOCH,
                created: std::time::SystemTime::UNIX_EPOCH,
                content_hash: row.content_hash.clone(),
                facts: Default::default(),
                content: None,
                stamp: None,
            }
        }
    };
    Rebuilt {
        note: Arc::new(note_from(
            obs,
            row.note_id,
            row.version_id,
            created,
            observed_at,
        )),
        changed,
        removed,
        excluded: excluded.pop(),
        reread: reread_now,
    }
}

/// Read the file `rel` the start had recalled from the scan cache; `None` (and the file
/// among those left out) when it cannot be read, as the scan does.
fn reread(state: &State, rel: &str, excluded: &mut Vec<Excluded>) -> Option<Observed> {
    match scan::observe(&state.paths.root, rel) {
        Ok(obs) => Some(obs),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            excluded.push(Excluded {
                path: rel.to_string(),
                reason: format!("unreadable: {e}"),
            });
            None
        }
    }
}

fn parse_time(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

#[allow(
    clippy::disallowed_methods,
    reason = "a probe file in the state directory"
)]
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
