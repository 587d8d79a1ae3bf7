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
use crate::storage::metadata::{Audit, Settings};
use crate::vault::catalog::note_from;
use crate::vault::fsio;
use crate::vault::note::Note;
use crate::vault::observe::Excluded;
use crate::vault::observe::Observed;
use crate::vault::path::VaultPaths;
use crate::vault::scan;
use crate::vault::scan_cache::ScanCache;
use crate::vault::walk::{walk, Want};
use crate::watch::live::{self, LiveWatcher};

pub mod hosted;
mod rebuild;
mod startup;
mod trusted;

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
        // Not in `quiesce`: a purge goes on changing the folder after it.
        trusted::mark_clean_stop(&self.state);
    }

    /// [`Self::stop`]'s steps; the write lock it returns keeps anything from recording
    /// while the caller goes on (a purge removes the state's files under it).
    fn quiesce(&self) -> crate::state::WriteLock<'_> {
        self.state
            .stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.watcher.lock().take();
        // A recording under way holds the write lock: it ends first; one that takes the
        // lock after this finds the state closed.
        let recording = self.state.lock();
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
            let to = crate::storage::folder::trash_path(state.root(), &note.path);
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
        &crate::storage::rows::AuditEvent::new(
            crate::storage::rows::AuditKind::Purged,
            &request.actor,
        )
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

/// Open every vault of `configs` ([`Config::vault_configs`], the default first), each as
/// [`open`] does. Two vaults never share a folder or a state directory, and neither lies
/// inside the other (the outer vault's scan would take in the inner one's notes): that
/// is refused before anything is opened.
pub fn open_all(configs: Vec<Config>) -> anyhow::Result<Vec<Daemon>> {
    let mut seen: Vec<(std::path::PathBuf, std::path::PathBuf)> = Vec::new();
    for config in &configs {
        let root = config.vault.canonicalize().map_err(|e| {
            anyhow::anyhow!("vault folder {} is not usable: {e}", config.vault.display())
        })?;
        let state_dir = config.state_dir_of_vault()?;
        let state_dir = state_dir.canonicalize().unwrap_or(state_dir);
        for (other, other_state) in &seen {
            if root.starts_with(other) || other.starts_with(&root) {
                anyhow::bail!(
                    "the vaults {} and {} overlap (one is the other, or inside it); serve folders that are apart",
                    other.display(),
                    root.display()
                );
            }
            if state_dir == *other_state {
                anyhow::bail!(
                    "the vaults {} and {} have one state directory {}; give each its own",
                    other.display(),
                    root.display(),
                    state_dir.display()
                );
            }
        }
        seen.push((root, state_dir));
    }
    configs.into_iter().map(open).collect()
}

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
        VaultPaths::new(root.clone(), state_dir),
        crate::state::Stores {
            meta: Box::new(meta),
            history: Box::new(history),
            files: Box::new(crate::storage::folder::Folder::new(root)),
        },
        index,
        token_key,
        vault_id,
    )?);
    // Until the start ends (its verify, when one runs): then `serving`, or `started`.
    crate::memory::starting();
    if let Some(observed) = startup::startup_scan(&state)? {
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
                // The start's burst is over: freed pages are kept a moment from now on
                // (a local daemon's watch; a hosted instance's lobby has none).
                if bg.config.watch {
                    crate::memory::serving();
                } else {
                    crate::memory::started();
                }
            })?;
    } else {
        crate::memory::started();
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
