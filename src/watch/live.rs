//! The live watcher: notify (inotify on Linux, no polling) → a debounced batch of dirty
//! paths → observe what is there now → `record::reconcile`, as one batch with actor
//! `filesystem`. Kept thin: deciding what changed is reconcile's job.
//!
//! Editors' save patterns come out as one modification: an in-place write, a write to a
//! temp file renamed over the note (its temp and swap names are ignored), or a delete
//! then create, all settle inside one debounce window and reconcile compares the content
//! hash. The empty middle of an in-place save (truncate, then write) is never recorded,
//! whether its two events reach one batch or two (see [`settle`]). A rename keeps its
//! note id (reconcile matches the content hash). A watcher queue overflow or error
//! triggers a full rescan, counted in the status. The watch is set up after the startup
//! scan, beside serving, and followed by one rescan.

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};
use parking_lot::Mutex;

use crate::state::{State, WatchStatus, WriteLock};
use crate::vault::observe::Observed;
use crate::vault::path::is_note_name;
use crate::vault::scan;
use crate::vault::scan_cache::ScanCache;
use crate::vault::settle;
use crate::vault::walk::{walk_under, Want};

/// Quiet time that closes a batch.
const SETTLE: Duration = Duration::from_millis(25);
/// A batch is processed after this long even if events keep coming.
const MAX_BATCH: Duration = Duration::from_millis(250);

/// A running watcher; dropping it stops watching.
pub struct LiveWatcher {
    _watcher: notify::RecommendedWatcher,
}

fn changes_content(kind: &notify::EventKind) -> bool {
    use notify::event::{EventKind, ModifyKind};
    !matches!(
        kind,
        EventKind::Access(_) | EventKind::Modify(ModifyKind::Metadata(_))
    )
}

enum Signal {
    Paths(Vec<PathBuf>),
    /// A folder seen new a moment ago, looked at again: files created in it before its
    /// own watch was in place sent no event.
    Recheck(PathBuf),
    Rescan(String),
}

/// How long after a new folder appears it is looked at again.
const RECHECK_AFTER: Duration = Duration::from_millis(300);

/// Start watching `state`'s vault. The thread holds only a weak reference, so it ends
/// when the service is dropped.
pub fn start(state: &Arc<State>) -> notify::Result<LiveWatcher> {
    let (tx, rx) = mpsc::channel::<Signal>();
    let recheck_tx = tx.clone();
    let root = state.paths.root.clone();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let signal = match res {
            Ok(event) if event.need_rescan() => {
                Signal::Rescan("the watcher asked for a rescan".into())
            }
            // Reads (ours included: scans, the history bootstrap, API reads) and metadata
            // touches change nothing; taking them in would feed the watcher its own reads.
            Ok(event) if !changes_content(&event.kind) => return,
            Ok(event) => Signal::Paths(event.paths),
            Err(e) => Signal::Rescan(format!("watcher error: {e}")),
        };
        let _ = tx.send(signal);
    })?;
    let started = Instant::now();
    watcher.watch(&root, RecursiveMode::Recursive)?;
    tracing::info!(
        setup_ms = started.elapsed().as_millis() as u64,
        "watching the vault"
    );
    let status = state.watch_status.clone();
    status.lock().state = "watching".into();
    let weak = Arc::downgrade(state);
    let thread_status = status;
    std::thread::Builder::new()
        .name("watch".into())
        .spawn(move || run(weak, rx, recheck_tx, thread_status))
        .map_err(|e| notify::Error::generic(&e.to_string()))?;
    Ok(LiveWatcher { _watcher: watcher })
}

fn run(
    state: Weak<State>,
    rx: mpsc::Receiver<Signal>,
    tx: mpsc::Sender<Signal>,
    status: Arc<Mutex<WatchStatus>>,
) {
    // Wait for the first event of a batch, then collect until quiet. The loop holds a
    // sender (for rechecks), so it also ends when the service is gone.
    loop {
        let first = match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(s) => s,
            Err(RecvTimeoutError::Timeout) if state.strong_count() > 0 => continue,
            Err(_) => break,
        };
        let started = Instant::now();
        let mut dirty = BTreeSet::new();
        let mut rechecks = BTreeSet::new();
        let mut rescan: Option<String> = None;
        let mut take = |s: Signal, dirty: &mut BTreeSet<PathBuf>| match s {
            Signal::Paths(p) => dirty.extend(p),
            Signal::Recheck(p) => {
                rechecks.insert(p);
            }
            Signal::Rescan(why) => rescan = Some(why),
        };
        take(first, &mut dirty);
        loop {
            let left = MAX_BATCH.saturating_sub(started.elapsed());
            match rx.recv_timeout(SETTLE.min(left)) {
                Ok(s) => take(s, &mut dirty),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if started.elapsed() >= MAX_BATCH {
                break;
            }
        }
        let Some(state) = state.upgrade() else { break };
        let result = match &rescan {
            Some(why) => {
                tracing::warn!(reason = %why, "rescanning the vault");
                status.lock().rescans += 1;
                full_rescan(&state)
            }
            None => {
                // New folders get a second look once their watch is surely in place.
                let new_dirs: Vec<PathBuf> = dirty
                    .iter()
                    .filter(|p| !rechecks.contains(*p) && p.is_dir() && !state.paths.is_ignored(p))
                    .cloned()
                    .collect();
                if !new_dirs.is_empty() {
                    let tx = tx.clone();
                    std::thread::spawn(move || {
                        std::thread::sleep(RECHECK_AFTER);
                        for d in new_dirs {
                            let _ = tx.send(Signal::Recheck(d));
                        }
                    });
                }
                dirty.extend(rechecks.iter().cloned());
                apply_batch(&state, &dirty)
            }
        };
        let mut s = status.lock();
        s.batches += 1;
        s.last_batch_at = Some(chrono::Utc::now());
        if let Err(e) = result {
            tracing::error!(error = %e, "reconciling external changes failed");
            s.last_error = Some(e.message);
        }
    }
    status.lock().state = "stopped".into();
}

/// Observe every dirty path (files, and folders created, renamed or removed) and
/// reconcile what differs from the catalog.
fn apply_batch(state: &State, dirty: &BTreeSet<PathBuf>) -> crate::error::Result<()> {
    let paths = &state.paths;
    let mut observe: BTreeSet<String> = BTreeSet::new();
    let mut gone: BTreeSet<String> = BTreeSet::new();
    // Attachments (files that are not notes) to look at again.
    let mut files: BTreeSet<String> = BTreeSet::new();
    for abs in dirty {
        if paths.is_ignored(abs) {
            continue;
        }
        let Ok(rel) = abs.strip_prefix(&paths.root) else {
            continue;
        };
        let Some(rel) = rel.to_str().map(|s| s.replace('\\', "/")) else {
            continue;
        };
        if rel.is_empty() {
            continue;
        }
        let meta = std::fs::symlink_metadata(abs);
        match meta {
            Ok(m) if m.is_dir() => {
                // A folder created or moved in: every note inside.
                // The one walk's rules: a symlinked note inside the vault is kept.
                let inside = walk_under(
                    paths,
                    abs,
                    Want {
                        notes: true,
                        attachments: true,
                        ..Want::default()
                    },
                );
                observe.extend(inside.notes);
                let prefix = format!("{rel}/");
                files.extend(inside.attachments);
                files.extend(
                    state
                        .attachments
                        .read()
                        .iter()
                        .filter(|a| a.path.starts_with(&prefix))
                        .map(|a| a.path.clone()),
                );
                for note in state
                    .catalog
                    .read()
                    .iter()
                    .filter(|n| n.path.starts_with(&prefix))
                {
                    if !paths.root.join(&note.path).exists() {
                        gone.insert(note.path.clone());
                    }
                }
            }
            Ok(_) if is_note_name(&rel) => {
                observe.insert(rel);
            }
            Ok(m) if m.is_file() || m.is_symlink() => {
                files.insert(rel);
            }
            Ok(_) => {}
            Err(_) => {
                // Removed: a note, or a folder of notes, or an attachment.
                let prefix = format!("{rel}/");
                files.extend(
                    state
                        .attachments
                        .read()
                        .iter()
                        .filter(|a| a.path == rel || a.path.starts_with(&prefix))
                        .map(|a| a.path.clone()),
                );
                let catalog = state.catalog.read();
                for note in catalog.iter() {
                    if (note.path == rel || note.path.starts_with(&prefix))
                        && !paths.root.join(&note.path).exists()
                    {
                        gone.insert(note.path.clone());
                    }
                }
            }
        }
    }
    // Files whose bytes the catalog already has (our own writes, above all) need nothing:
    // checking that takes no lock, so the pipeline is not held up by its own echoes.
    observe.retain(|rel| {
        let known = state
            .catalog
            .read()
            .get(crate::vault::path::slug_of(rel))
            .map(|n| n.content_hash.clone());
        match (known, std::fs::read(paths.root.join(rel))) {
            (Some(hash), Ok(bytes)) => crate::vault::content_hash(&bytes) != hash,
            _ => true,
        }
    });
    if observe.is_empty() && gone.is_empty() && files.is_empty() {
        return Ok(());
    }
    // Observe under the write lock: a file read before an API write and reconciled after
    // it would record stale content over the newer version.
    let write = state.lock();
    // The daemon stopped meanwhile: nothing more is recorded into its state.
    if state.closed() {
        return Ok(());
    }
    crate::record::files::sync_paths(state, &write, &files)?;
    if observe.is_empty() && gone.is_empty() {
        return Ok(());
    }
    let mut observed: Vec<Observed> = Vec::new();
    for rel in observe {
        if paths.resolve(&rel).is_err() {
            continue;
        }
        // An emptied note may be an in-place save half done: `settle` waits for it.
        match settle::observe(&state.paths.root, &state.catalog, &rel) {
            Ok(Some(o)) => observed.push(o),
            Ok(None) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                gone.insert(rel);
            }
            Err(e) => tracing::warn!(path = %rel, error = %e, "cannot read a changed note"),
        }
    }
    // A note that appeared with the bytes of a known note whose file is gone was moved,
    // even when the move's two halves reached different batches: take the old path in.
    {
        let catalog = state.catalog.read();
        let new_hashes: std::collections::HashSet<&str> = observed
            .iter()
            .filter(|o| catalog.get(crate::vault::path::slug_of(&o.rel)).is_none())
            .map(|o| o.content_hash.as_str())
            .collect();
        if !new_hashes.is_empty() {
            for note in catalog.iter() {
                if new_hashes.contains(note.content_hash.as_str())
                    && !paths.root.join(&note.path).exists()
                {
                    gone.insert(note.path.clone());
                }
            }
        }
    }
    let removed: Vec<String> = gone
        .into_iter()
        .filter(|r| !paths.root.join(r).exists())
        .collect();
    crate::record::reconcile::reconcile(
        state,
        &write,
        observed,
        removed,
        "filesystem",
        "Record external edits",
        None,
    )?;
    Ok(())
}

/// Compare the whole folder with the catalog and reconcile the difference. It is also
/// the verify of the notes a start recalled from the scan cache: their bytes are kept as
/// the files are read, a file whose hash differs is recorded like any change, and the
/// search index starts once they are in. The scan cache is written from what it read.
pub fn full_rescan(state: &State) -> crate::error::Result<()> {
    let write = state.lock();
    // The daemon was stopped meanwhile (a test server, a purge): nothing more is recorded
    // into its state.
    if state.closed() {
        return Ok(());
    }
    let rescanned = rescan_locked(state, &write);
    if state.unread.pending() {
        finish_verify(state, &write);
    }
    drop(write);
    let mut entries = rescanned?;
    // In path order, as the cache keeps them; encoded outside the write lock.
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    store_scan_cache(
        state,
        ScanCache::encode_entries(entries.into_iter().map(|(_, e)| e)),
    );
    // The entries were made on the scan's workers.
    crate::memory::release_workers_free_memory();
    Ok(())
}

/// End the start's verify if nothing did (the rescan panicked or never ran): whatever
/// waits for it goes on.
pub fn settle_start(state: &State) {
    let write = state.lock();
    // Nothing is recorded into a stopped daemon's state (and nothing waits for it).
    if state.closed() {
        return;
    }
    if state.unread.pending() {
        finish_verify(state, &write);
    }
}

/// Write the scan cache from a full scan's observations: encoded outside the write lock,
/// put in place under it (so one writer at a time, and never into a purged state dir).
pub fn write_scan_cache(state: &State, observed: &[Observed]) {
    store_scan_cache(state, ScanCache::encode(observed));
}

/// Put the scan cache `encoded` in place, under the write lock.
fn store_scan_cache(state: &State, encoded: std::io::Result<Vec<u8>>) {
    let _write = state.lock();
    // Never into a purged state dir, nor after the daemon stopped (a test, or whatever
    // opens the state dir next, may be writing its own cache).
    if state.closed() {
        return;
    }
    match encoded.and_then(|bytes| ScanCache::store(state.state_dir(), &bytes)) {
        Ok(()) => tracing::debug!("scan cache written"),
        Err(e) => tracing::warn!(error = %e, "cannot write the scan cache"),
    }
}

/// What a rescan keeps of a file it read.
enum Seen {
    /// The catalog's version, bytes kept.
    Same,
    /// The catalog's version of a note recalled unread, its file's stamp the recalled
    /// one: its bytes are to be kept.
    Unread {
        stamp: crate::vault::observe::FileStamp,
        content: crate::vault::packed::Packed,
    },
    /// The same, its file's stamp another: the note is rebuilt from the observation.
    Refill(Box<Observed>),
    /// Not the catalog's version, or a file the catalog does not know.
    Changed(Box<Observed>),
}

/// The scan cache entries of a rescan (`ScanCache::entry_of`), by path.
type CacheEntries = Vec<(String, std::io::Result<Vec<u8>>)>;

/// The rescan under the write lock; the scan cache entries of what it read.
fn rescan_locked(state: &State, write: &WriteLock<'_>) -> crate::error::Result<CacheEntries> {
    let started = Instant::now();
    crate::record::files::rescan(state, write)?;
    // A file still holding the catalog's version shares the catalog's bytes: the
    // rescan after a cold start reads the whole vault again while the index is built.
    let known = |rel: &str, hash: &str| {
        let catalog = state.catalog.read();
        let note = catalog.get(crate::vault::path::slug_of(rel))?;
        (note.content_hash == hash)
            .then(|| note.content.clone())
            .flatten()
    };
    // Each file as it is read: its scan cache entry, kept; its observation only when it
    // differs from the catalog, or holds the bytes of a note the start recalled unread
    // (the verify of a warm start: filled in below).
    let (seen, excluded) = scan::scan_taking(&state.paths, &known, |o| {
        let entry = ScanCache::entry_of(&o);
        let held = state
            .catalog
            .read()
            .get(crate::vault::path::slug_of(&o.rel))
            .map(|n| {
                (
                    n.content_hash == o.content_hash,
                    n.unread(),
                    n.stamp == o.stamp,
                )
            });
        // Boxed: most notes are the same, and their entries hold no observation's room.
        // What is made here and dropped on the calling thread stays in this worker's
        // allocator pages until it allocates again: only what changed travels whole.
        let rel = o.rel.clone();
        let kept = match (held, o.stamp, o.content.clone()) {
            (Some((true, false, _)), ..) => Seen::Same,
            (Some((true, true, true)), Some(stamp), Some(content)) => {
                Seen::Unread { stamp, content }
            }
            (Some((true, true, _)), ..) => Seen::Refill(Box::new(o)),
            _ => Seen::Changed(Box::new(o)),
        };
        (rel, entry, kept)
    });
    let scanned = started.elapsed();
    let notes = seen.len();
    let mut changed = Vec::new();
    let mut unread = Vec::new();
    let mut refill = Vec::new();
    let mut on_disk = HashSet::with_capacity(seen.len());
    let mut entries = Vec::with_capacity(seen.len());
    for (rel, entry, kept) in seen {
        if let Some(entry) = entry {
            entries.push((rel.clone(), entry));
        }
        match kept {
            Seen::Same => {}
            Seen::Unread { stamp, content } => unread.push((rel.clone(), stamp, content)),
            Seen::Refill(o) => refill.push(o),
            Seen::Changed(o) => changed.push(*o),
        }
        on_disk.insert(rel);
    }
    // The bytes of the notes recalled unread: kept where the file still has the version
    // the catalog holds (a few thousand at a time, so reads go on between).
    // Their bytes move to pages of this thread's (`Packed::moved_here`), the workers'
    // pages handed back as they empty.
    let mut filled = 0;
    let mut unread = unread.into_iter().peekable();
    while unread.peek().is_some() {
        {
            let mut catalog = state.catalog.write();
            for (rel, stamp, content) in unread.by_ref().take(2048) {
                let slug = crate::vault::path::slug_of(&rel);
                filled += usize::from(catalog.fill_bytes(slug, stamp, content.moved_here()));
            }
        }
        crate::memory::release_workers_free_memory();
    }
    for chunk in refill.chunks(2048) {
        let mut catalog = state.catalog.write();
        for o in chunk {
            filled += usize::from(catalog.fill_content(o));
        }
    }
    drop(refill);
    let mut removed: Vec<String> = state
        .catalog
        .read()
        .iter()
        .filter(|n| !on_disk.contains(n.path.as_str()))
        .map(|n| n.path.clone())
        .collect();
    drop(on_disk);
    let compared = started.elapsed();
    // A note the scan found empty may be an in-place save half done.
    changed.retain_mut(|o| {
        if o.size > 0 {
            return true;
        }
        match settle::observe(&state.paths.root, &state.catalog, &o.rel) {
            Ok(Some(now)) => {
                *o = now;
                true
            }
            Ok(None) => false,
            Err(e) => {
                if e.kind() == std::io::ErrorKind::NotFound {
                    removed.push(o.rel.clone());
                }
                false
            }
        }
    });
    state.catalog.write().excluded = excluded;
    // The verify of a start that walked nothing finds what changed while stopped.
    let subject = if state.unread.unwalked() {
        "Record changes made while notevault was stopped"
    } else {
        "Record external edits (rescan)"
    };
    crate::record::reconcile::reconcile(
        state,
        write,
        changed,
        removed,
        "filesystem",
        subject,
        None,
    )?;
    tracing::info!(
        notes,
        filled,
        scan_ms = scanned.as_millis() as u64,
        compare_ms = compared.as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "vault rescanned"
    );
    Ok(entries)
}

/// End the verify of the start (under the write lock): a note still unread (the rescan
/// failed, or did not see it) is read now, and kept where its file still holds the
/// catalog's version, else taken in as a change (recorded, or dropped when the file is
/// gone); then the search index starts from the catalog, and whatever waited for every
/// note's bytes (grep) goes on.
fn finish_verify(state: &State, write: &WriteLock<'_>) {
    use rayon::prelude::*;
    let unread: Vec<String> = state
        .catalog
        .read()
        .iter()
        .filter(|n| n.unread())
        .map(|n| n.path.clone())
        .collect();
    let read: Vec<(String, Option<Observed>)> = unread
        .into_par_iter()
        .map(|rel| {
            let obs = crate::vault::observe::observe(&state.paths.root, &rel).ok();
            (rel, obs)
        })
        .collect();
    let mut differ = Vec::new();
    {
        let mut catalog = state.catalog.write();
        for (rel, obs) in &read {
            if !obs.as_ref().is_some_and(|o| catalog.fill_content(o)) {
                differ.push(rel.clone());
            }
        }
    }
    for rel in &differ {
        if let Err(e) = crate::record::refresh::refresh_with(
            state,
            rel,
            crate::record::refresh::Lock::Held(write),
        ) {
            tracing::warn!(path = %rel, error = %e.message, "a note recalled at start could not be read again");
        }
    }
    state.start_index(state.committed_seq());
    state.unread.finish();
}
