//! The daemon's state: the stores and the sequence number, as plain data. Every domain
//! module (the recorder, the write pipeline, the queries, the watcher) takes a `&State`;
//! none of them builds one (that is `daemon`'s job) and this module imports only the
//! stores below it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use parking_lot::{Mutex, RwLock};

use crate::config::Config;
use crate::index::SearchIndex;
use crate::storage::files::NoteFiles;
use crate::storage::metadata::Metadata;
use crate::storage::Revisions;
use crate::vault::attachments::AttachmentCatalog;
use crate::vault::catalog::Catalog;
use crate::vault::path::VaultPaths;
use crate::vault::removed::RecentlyRemoved;

pub struct State {
    pub config: Config,
    pub paths: VaultPaths,
    /// Metadata, through the storage seam (local mode: SQLite, `meta::Meta`).
    pub meta: Box<dyn Metadata>,
    /// Revisions, through the storage seam (local mode: `history.git`).
    pub history: Box<dyn Revisions>,
    /// Note bytes, through the storage seam (local mode: the vault folder).
    pub files: Box<dyn NoteFiles>,
    /// Shared with the search index, which reads links from it (`CatalogLinks`).
    pub catalog: Arc<RwLock<Catalog>>,
    /// The vault's attachments (every file that is not a note), changed by `record` only.
    pub attachments: RwLock<AttachmentCatalog>,
    /// The seq of the last recorded change; advanced only by `record`.
    committed_seq: AtomicI64,
    /// Secret for tamper-evident page tokens, kept in the metadata store.
    pub token_key: [u8; 32],
    /// Secret of presigned attachment links, derived from the page-token key (so it is
    /// kept in the metadata store's settings with it, and is this vault's own).
    pub presign_key: [u8; 32],
    /// This vault's stable id (a UUID made at the first start, kept in the metadata
    /// store's settings): a token naming another `vault_id` is refused.
    pub vault_id: String,
    /// One change is recorded at a time: API writes and reconciles of disk changes.
    /// Taken as a [`WriteLock`] ([`State::lock`], [`State::lock_to_record`]).
    write_mutex: Mutex<()>,
    /// Writes waiting to be applied as a group (see `writes::group`).
    pub write_queue: WriteQueue,
    /// Per-`Idempotency-Key` locks of the write pipeline.
    pub key_locks: KeyLocks,
    /// Notes that just left the folder, for move detection across batches.
    pub recently_removed: RecentlyRemoved,
    /// The search index, fed every change after the start-up sync.
    pub index: Arc<SearchIndex>,
    /// Notes the start recalled from the scan cache, bytes not read yet, until the
    /// verify (the full rescan after the start) has read them.
    pub unread: crate::vault::scan_cache::Unread,
    /// What the live watcher reports (`off` until it runs).
    pub watch_status: Arc<Mutex<WatchStatus>>,
    /// Cancelled to stop serving (a purge asks it); `http::run` ends when it is.
    pub stop: tokio_util::sync::CancellationToken,
    /// A purge asked for: the daemon stops serving and then removes its state
    /// (`daemon::purge`), once nothing else holds it.
    pub purge: std::sync::OnceLock<PurgeRequest>,
    /// The `Daemon` that opened this state was dropped: a rescan that has not started
    /// yet does not start (`watch::live::full_rescan`), and no scan cache is written.
    pub stopped: std::sync::atomic::AtomicBool,
    /// Other processes record changes of this vault too (hosted mode): its stores are
    /// the truth, this state a cache of them.
    pub shared: Option<Shared>,
}

/// The stores a vault's state reaches through the storage seam.
pub struct Stores {
    pub meta: Box<dyn Metadata>,
    pub history: Box<dyn Revisions>,
    pub files: Box<dyn NoteFiles>,
}

/// What a vault recorded by several processes needs: one writer at a time across them,
/// and the changes of the others taken in before a change is planned.
pub struct Shared {
    /// The vault's name in its registry (what a purge is confirmed with).
    pub name: String,
    pub fence: Box<dyn Fence>,
    /// Bring the catalog, the index and the seq up to what the stores hold (their seq
    /// as read once the fence was held: `record::follow`), under the write lock.
    pub catch_up: fn(&State, &WriteLock<'_>, i64) -> crate::error::Result<()>,
    /// Where the vault's attachment bytes are (`None`: no blob store is configured).
    pub blobs: Option<Arc<dyn crate::storage::blobs::BlobStore>>,
    /// Write the vault's export archive (`crate::export`'s layout) from the stores.
    pub export: Box<Exporter>,
    /// Links the blob store serves itself (`None`: `blob_public_endpoint` is not set,
    /// and a presigned link is the instance's own).
    pub links: Option<Arc<crate::storage::presign::StoreLinks>>,
}

/// Writes a vault's export archive to a sink.
pub type Exporter = dyn Fn(&crate::export::Options, &mut dyn std::io::Write) -> std::io::Result<crate::export::Manifest>
    + Send
    + Sync;

/// The other processes' lock of a vault, held ([`Fence::hold`]).
pub struct Fenced {
    /// Lets go of the lock when dropped.
    pub guard: Box<dyn Send>,
    /// The seq the stores had recorded once the lock was held (read with it).
    pub stored_seq: i64,
}

/// The lock that keeps other processes from recording a change of the vault.
pub trait Fence: Send + Sync {
    /// Hold the lock until the returned guard is dropped (its letting go may finish
    /// later; this process's next `hold` waits for it).
    fn hold(&self) -> crate::error::Result<Fenced>;

    /// Hold the lock of one `Idempotency-Key` of the vault (taken before
    /// [`hold`](Self::hold)'s,
    /// never after), so a key sent to two processes at once is applied once.
    fn hold_key(&self, key: &str) -> crate::error::Result<Box<dyn Send>>;

    /// Delete the vault from the stores, for every process at once (a purge).
    fn delete_vault(&self) -> crate::error::Result<()>;
}

/// Writes waiting to be applied (`writes::group`'s jobs): whoever holds
/// `lead` takes every queued job, applies them as one group under the write lock (one
/// history commit, one transaction, one fsync per folder), answers each, and wakes the
/// waiting threads (`changed`, notified with `jobs` held).
#[derive(Default)]
pub struct WriteQueue {
    pub jobs: Mutex<Vec<Arc<crate::writes::Job>>>,
    pub changed: parking_lot::Condvar,
    pub lead: Mutex<()>,
}

/// What a purge was asked to do beyond removing the daemon's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeRequest {
    /// Move the notes into `.trash/` too.
    pub trash_notes: bool,
    /// Who asked (`console`, `api`), for the audit row that stays.
    pub actor: String,
}

impl State {
    /// Assemble the state from opened stores; `committed_seq` is the store's.
    pub fn new(
        config: Config,
        paths: VaultPaths,
        stores: Stores,
        index: Arc<SearchIndex>,
        token_key: [u8; 32],
        vault_id: String,
    ) -> crate::error::Result<Self> {
        let Stores {
            meta,
            history,
            files,
        } = stores;
        let committed_seq = AtomicI64::new(meta.committed_seq()?);
        Ok(Self {
            config,
            files,
            paths,
            meta,
            history,
            catalog: Arc::new(RwLock::new(Catalog::default())),
            attachments: RwLock::new(AttachmentCatalog::default()),
            committed_seq,
            presign_key: presign_key(&token_key),
            token_key,
            vault_id,
            write_mutex: Mutex::new(()),
            write_queue: WriteQueue::default(),
            key_locks: KeyLocks::default(),
            recently_removed: RecentlyRemoved::default(),
            index,
            unread: Default::default(),
            watch_status: Arc::new(Mutex::new(WatchStatus {
                state: "off".into(),
                ..Default::default()
            })),
            stop: tokio_util::sync::CancellationToken::new(),
            purge: std::sync::OnceLock::new(),
            stopped: std::sync::atomic::AtomicBool::new(false),
            shared: None,
        })
    }

    /// The state of a vault that other processes record changes of too.
    pub fn shared(mut self, shared: Shared) -> Self {
        self.shared = Some(shared);
        self
    }

    /// Whether nothing more is to be recorded into this state: its `Daemon` was dropped,
    /// or a purge was asked for.
    pub fn closed(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::SeqCst) || self.purge.get().is_some()
    }

    /// The write lock, for a change to be recorded; 503 `SERVER_BUSY` once the state is
    /// [`closed`](Self::closed) (the daemon is stopping: nothing more is written, and the
    /// caller may retry against the next start).
    pub fn lock_to_record(&self) -> crate::error::Result<WriteLock<'_>> {
        let write = self.lock_to_write()?;
        if self.closed() {
            return Err(stopping());
        }
        Ok(write)
    }

    /// The write lock, whether or not the state is closed (a stop, the start's scan).
    /// Of a shared vault, the other processes' lock is not taken: use
    /// [`lock_to_write`](Self::lock_to_write) to change it.
    pub fn lock(&self) -> WriteLock<'_> {
        WriteLock {
            _held: self.write_mutex.lock(),
            of: &self.write_mutex,
            _fence: None,
        }
    }

    /// The write lock for a change, whether or not the state is closed; of a shared
    /// vault also the other processes' lock, and their changes taken in, so the change
    /// is planned against the vault as it is.
    pub fn lock_to_write(&self) -> crate::error::Result<WriteLock<'_>> {
        let mut write = self.lock();
        if let Some(shared) = &self.shared {
            let fenced = shared.fence.hold()?;
            write._fence = Some(fenced.guard);
            (shared.catch_up)(self, &write, fenced.stored_seq)?;
        }
        Ok(write)
    }

    pub fn committed_seq(&self) -> i64 {
        self.committed_seq.load(Ordering::SeqCst)
    }

    /// Only the recorder advances the seq, holding the write lock.
    pub(crate) fn set_committed_seq(&self, seq: i64) {
        self.committed_seq.store(seq, Ordering::SeqCst);
    }

    pub fn root(&self) -> &Path {
        &self.paths.root
    }

    pub fn state_dir(&self) -> &PathBuf {
        &self.paths.state_dir
    }
}

/// The write lock of one vault, held (the only way to take it: [`State::lock`],
/// [`State::lock_to_record`]). What must run under the lock takes a `&WriteLock` as an
/// argument; the recorder also checks that it is this vault's ([`State::holds`]).
pub struct WriteLock<'a> {
    // The other processes' lock is let go first (fields drop in order; its unlock may
    // land after this one: `Fence::hold`).
    _fence: Option<Box<dyn Send>>,
    _held: parking_lot::MutexGuard<'a, ()>,
    of: &'a Mutex<()>,
}

impl State {
    /// Whether `write` is this vault's lock (and not another vault's of the same daemon).
    pub fn holds(&self, write: &WriteLock<'_>) -> bool {
        std::ptr::eq(write.of, &self.write_mutex)
    }
}

/// What the live watcher reports (`GET /v1/index-status`).
#[derive(Debug, Clone, Default)]
pub struct WatchStatus {
    /// `off`, `watching`, `stopped`, or `failed`.
    pub state: String,
    pub batches: u64,
    pub rescans: u64,
    pub last_error: Option<String>,
    pub last_batch_at: Option<DateTime<Utc>>,
}

/// Per-key locks, so a concurrent duplicate waits for the first and replays it.
#[derive(Default)]
pub struct KeyLocks {
    locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

impl KeyLocks {
    pub(crate) fn get(&self, key: &str) -> Arc<Mutex<()>> {
        let mut locks = self.locks.lock();
        if locks.len() > 10_000 {
            locks.retain(|_, l| Arc::strong_count(l) > 1);
        }
        locks.entry(key.to_string()).or_default().clone()
    }
}

/// The secret of a vault's presigned links, derived from its page-token key.
pub fn presign_key(token_key: &[u8; 32]) -> [u8; 32] {
    blake3::derive_key("notevault 2026 presigned attachment links", token_key)
}

/// The answer to a change asked for once the daemon is stopping.
pub fn stopping() -> crate::error::Error {
    crate::error::Error::new(
        crate::error::Reason::SERVER_BUSY,
        "the daemon is stopping; nothing was written",
    )
    .with_retry_after(1)
}

/// Make the state directory `dir` if it is missing. One the daemon makes gets a
/// `.gitignore` of `*`, so a vault under git (or a tool that honours it) never takes in
/// the daemon's stores; an existing `.gitignore` is never rewritten, and a folder that
/// was there before (a `--state-dir` of the user's) gets none.
#[allow(
    clippy::disallowed_methods,
    reason = "the state directory's own .gitignore, written once when the folder is made"
)]
pub fn create_state_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    let ignore = dir.join(".gitignore");
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&ignore)
    {
        Ok(mut file) => {
            use std::io::Write;
            file.write_all(b"*\n")?;
            file.sync_all()
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

impl State {
    /// Start the search index on every note of the catalog as of `seq`, the text of
    /// their links read from the catalog. Call with the write lock held.
    pub fn start_index(&self, seq: i64) {
        self.index
            .set_links(Arc::new(CatalogLinks(self.catalog.clone())));
        let notes: Vec<Arc<crate::vault::note::Note>> =
            self.catalog.read().iter().cloned().collect();
        self.index.start(notes, seq);
    }
}

/// The index's view of the vault's links: the catalog (not the state, which owns the
/// index: the index's threads never hold what would drop it).
struct CatalogLinks(Arc<RwLock<Catalog>>);

impl crate::index::LinkText for CatalogLinks {
    fn of(&self, note: &crate::vault::note::Note) -> String {
        crate::vault::link_text::incoming(&self.0, note)
    }
}

impl crate::index::Links for CatalogLinks {
    fn all(&self) -> crate::vault::link_text::AllLinkText {
        crate::vault::link_text::all(&self.0)
    }

    fn outgoing(&self, note: &crate::vault::note::Note) -> Vec<(u64, u64)> {
        crate::vault::link_text::outgoing(&self.0, note)
    }

    fn current(&self, key: u64) -> Option<Arc<crate::vault::note::Note>> {
        self.0.read().get_by_key(key).cloned()
    }
}
