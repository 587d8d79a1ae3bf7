//! Hosted mode's vaults: each a [`State`] over the database's stores (metadata, revision
//! bytes; no folder), opened when a request first names it, its catalog and search
//! index rebuilt from the database into this instance's cache directory, and caught up
//! with what the other instances recorded before it serves a request.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;
use uuid::Uuid;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::hosted::{self, block_on, Database};
use crate::state::{Shared, State, Stores};
use crate::vault::catalog::note_from;
use crate::vault::observe::Observed;
use crate::vault::path::VaultPaths;
use crate::vaults::Directory;

/// The vaults one instance serves from one database.
pub struct HostedVaults {
    db: Database,
    /// A pool of its own for the locks of write keys (`hosted::fence`).
    keys: Database,
    /// The settings every vault is served with (`auth_required` always on).
    config: Config,
    /// This instance's cache: one folder per vault opened (its search index).
    cache: PathBuf,
    open: Mutex<HashMap<String, Arc<State>>>,
    /// Each vault's slot, held while it is loaded or closed: two first requests load it
    /// once, and a load never opens the cache folder's index while the closed one still
    /// shuts down there. One vault's slot never waits on another's; one per vault served.
    slots: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    /// When each open vault was last asked for.
    used: Mutex<HashMap<String, std::time::Instant>>,
    /// The `LISTEN` task of [`Self::follow`], ended by [`Self::stop`]: else it would go
    /// on reconnecting for the rest of a process that outlives the instance.
    listening: Mutex<Option<tokio::task::AbortHandle>>,
    /// Every vault's attachment bytes (`None`: `blob_store` is not configured).
    blobs: Option<Arc<dyn crate::storage::blobs::BlobStore>>,
    /// Links the blob store serves (`None`: `blob_public_endpoint` is not set).
    links: Option<Arc<crate::storage::presign::StoreLinks>>,
}

/// Hosted mode as `serve --database` runs it: the lobby (an empty local vault, which a
/// request naming no vault reaches) and the database's vaults, which follow the other
/// instances' commits and close when idle. [`Hosted::stop`] ends both.
pub struct Hosted {
    pub lobby: super::Daemon,
    pub vaults: Arc<HostedVaults>,
}

impl Hosted {
    /// Open on the pools `db` (the stores) and `keys` (the Idempotency-Key locks), with
    /// the instance's cache under `cache`. Blocking.
    pub fn open(
        config: &Config,
        db: Database,
        keys: Database,
        cache: &std::path::Path,
    ) -> anyhow::Result<Self> {
        let mut lobby = config.clone();
        lobby.vault = cache.join("lobby");
        lobby.state_dir = Some(cache.join("lobby-state"));
        lobby.watch = false;
        lobby.database_url = None;
        crate::state::create_state_dir(&lobby.vault)?;
        let lobby = super::open(lobby)?;
        let links = links(config, &db)?;
        let vaults = Arc::new(
            HostedVaults::new(db, keys, config.clone(), cache.join("vaults"))
                .with_blobs(blobs(config)?)
                .with_links(links),
        );
        HostedVaults::follow(&vaults);
        HostedVaults::close_idle(&vaults);
        HostedVaults::collect_blobs(&vaults);
        Ok(Self { lobby, vaults })
    }

    /// Stop the vaults (their `LISTEN` task too) and the lobby.
    pub fn stop(self) {
        self.vaults.stop();
        self.lobby.stop();
    }
}

impl HostedVaults {
    pub fn new(db: Database, keys: Database, config: Config, cache: PathBuf) -> Self {
        Self {
            db,
            keys,
            config,
            cache,
            open: Mutex::new(HashMap::new()),
            slots: Mutex::new(HashMap::new()),
            used: Mutex::new(HashMap::new()),
            listening: Mutex::new(None),
            blobs: None,
            links: None,
        }
    }

    /// Answer presigned links with the blob store's own (`links`).
    pub fn with_links(mut self, links: Option<Arc<crate::storage::presign::StoreLinks>>) -> Self {
        self.links = links;
        self
    }

    /// Keep attachment bytes in `blobs`.
    pub fn with_blobs(mut self, blobs: Option<Arc<dyn crate::storage::blobs::BlobStore>>) -> Self {
        self.blobs = blobs;
        self
    }

    /// Follow the commits of every instance: each vault this one has open takes in the
    /// others' changes as they are notified (`hosted::listen`), on a thread of its own.
    /// Ends with the last reference to `vaults`.
    pub fn follow(vaults: &Arc<Self>) {
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let listening = hosted::listen::follow(&vaults.db, move |id| {
            let _ = tx.send(id.to_string());
        });
        *vaults.listening.lock() = Some(listening);
        let weak = Arc::downgrade(vaults);
        let spawned = std::thread::Builder::new()
            .name("hosted-follow".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let Some(vaults) = weak.upgrade() else {
                        return;
                    };
                    // Notifications that came meanwhile are served by one catch-up each;
                    // one that names a seq this process has (its own commit) by none.
                    let mut told: std::collections::BTreeMap<String, Option<i64>> =
                        std::collections::BTreeMap::new();
                    for payload in std::iter::once(first).chain(rx.try_iter()) {
                        let (id, seq) = hosted::listen::parse(&payload);
                        let seq = seq.and_then(|s| {
                            told.get(id).map_or(Some(s), |had| had.map(|h| h.max(s)))
                        });
                        told.insert(id.to_string(), seq);
                    }
                    let open: Vec<Arc<State>> = {
                        let open = vaults.open.lock();
                        if told.contains_key(hosted::listen::EVERY_VAULT) {
                            open.values().cloned().collect()
                        } else {
                            told.iter()
                                .filter_map(|(id, seq)| {
                                    open.get(id)
                                        .filter(|state| {
                                            seq.is_none_or(|s| s > state.committed_seq())
                                        })
                                        .cloned()
                                })
                                .collect()
                        }
                    };
                    for state in open {
                        let before = state.committed_seq();
                        match crate::record::follow::refresh(&state) {
                            Ok(()) if state.committed_seq() > before => tracing::debug!(
                                vault = %state.vault_id,
                                seq = state.committed_seq(),
                                "took in other instances' changes"
                            ),
                            Ok(()) => {}
                            Err(e) => tracing::warn!(vault = %state.vault_id, error = %e.message, "cannot take in another instance's changes; the next request tries again"),
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot follow other instances' commits; each request catches up");
        }
    }

    /// Close the vaults no request asked for in `vault_idle_seconds` (their catalog and
    /// index leave memory; the index stays in the cache folder for the next open),
    /// checked every quarter of it, on a thread of its own that ends with the last
    /// reference to `vaults`.
    pub fn close_idle(vaults: &Arc<Self>) {
        let idle = std::time::Duration::from_secs(vaults.config.vault_idle_seconds.max(1));
        let weak = Arc::downgrade(vaults);
        let spawned = std::thread::Builder::new()
            .name("hosted-idle".into())
            .spawn(move || loop {
                std::thread::sleep(idle / 4);
                let Some(vaults) = weak.upgrade() else {
                    return;
                };
                let idle_ids: Vec<String> = {
                    let now = std::time::Instant::now();
                    let used = vaults.used.lock();
                    used.iter()
                        .filter(|(_, at)| now.duration_since(**at) >= idle)
                        .map(|(id, _)| id.clone())
                        .collect()
                };
                let closing = !idle_ids.is_empty();
                for id in idle_ids {
                    vaults.close_if_idle(&id, idle);
                }
                if closing {
                    // What the closed vaults' indexes freed goes back to the system
                    // (their writers' kept blocks went back as each writer ended).
                    crate::memory::release_free_memory();
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot close idle vaults; they stay open");
        }
    }

    /// Collect what the blob store holds that no row references (`hosted::collect`),
    /// every quarter of `blob_grace_seconds`, on a thread of its own that ends with the
    /// last reference to `vaults`. Nothing without a blob store.
    pub fn collect_blobs(vaults: &Arc<Self>) {
        if vaults.blobs.is_none() {
            return;
        }
        let grace = std::time::Duration::from_secs(vaults.config.blob_grace_seconds);
        let weak = Arc::downgrade(vaults);
        let spawned = std::thread::Builder::new()
            .name("hosted-blobs".into())
            .spawn(move || loop {
                std::thread::sleep(hosted::collect::every(grace));
                let Some(vaults) = weak.upgrade() else {
                    return;
                };
                let Some(blobs) = vaults.blobs.clone() else {
                    return;
                };
                match block_on(hosted::collect::collect(&vaults.db, &*blobs, grace)) {
                    Ok(Some(c)) if c != Default::default() => {
                        crate::telemetry::blobs_collected("blob", c.blobs);
                        crate::telemetry::blobs_collected("upload", c.uploads);
                        crate::telemetry::blobs_collected("export", c.exports);
                        tracing::info!(
                            blobs = c.blobs,
                            uploads = c.uploads,
                            exports = c.exports,
                            "blobs collected"
                        )
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "blob collection failed; retried later"),
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot collect unreferenced blobs");
        }
    }

    /// The slot of the vault `id` (see [`Self::slots`]).
    fn slot(&self, id: &str) -> Arc<Mutex<()>> {
        self.slots.lock().entry(id.to_string()).or_default().clone()
    }

    /// Close the vault `id` if no request asked for it in `idle`: taken out of `open` and
    /// stopped under its slot, so a request for it meanwhile waits for the old index to
    /// let go of the cache folder, then loads it anew. A vault being loaded (its slot
    /// held) is in use: left for the next round.
    fn close_if_idle(&self, id: &str, idle: std::time::Duration) {
        let slot = self.slot(id);
        let Some(_slot) = slot.try_lock() else {
            return;
        };
        // Taken out under the `used` lock, which `open` marks first: a vault a request is
        // taking now is never closed under it.
        let closed = {
            let mut used = self.used.lock();
            match used.get(id) {
                Some(at) if at.elapsed() >= idle => {
                    used.remove(id);
                    self.open.lock().remove(id)
                }
                _ => None,
            }
        };
        if let Some(state) = closed {
            crate::telemetry::vault_evicted();
            tracing::debug!(vault = %id, "closed an idle vault");
            stop(&state);
        }
    }

    /// Stop listening for commits and every vault opened: their index writers finish.
    pub fn stop(&self) {
        if let Some(listening) = self.listening.lock().take() {
            listening.abort();
        }
        for state in self.open.lock().drain().map(|(_, s)| s) {
            stop(&state);
        }
    }

    fn load(&self, vault: &hosted::registry::Vault) -> Result<Arc<State>> {
        let id = vault.id.to_string();
        let dir = self.cache.join(&id);
        let (root, state_dir) = (dir.join("vault"), dir.join("state"));
        for d in [&root, &state_dir] {
            crate::state::create_state_dir(d).map_err(|e| {
                Error::internal(format!("cache folder {} is not writable: {e}", d.display()))
            })?;
        }
        let mut config = self.config.clone();
        config.vault = root.clone();
        config.state_dir = Some(state_dir.clone());
        config.org_id = vault.org_id.clone();
        config.watch = false;
        let made: [u8; 32] = *blake3::hash(Uuid::new_v4().as_bytes()).as_bytes();
        let key = block_on(hosted::lookup::setting_or(
            &self.db,
            vault.id,
            "page_token_key",
            &hex_of(&made),
        ))?;
        let token_key = parse_key(&key)
            .ok_or_else(|| Error::internal("the vault's page token key is corrupt"))?;
        let index =
            crate::index::SearchIndex::open_with_model(&state_dir, config.embed_model.as_deref())
                .map_err(|e| Error::internal(format!("cannot open the search index: {e}")))?;
        index.set_pace(crate::index::Pace::CACHE);
        let staged = Arc::new(hosted::revisions::Staged::default());
        let revisions =
            hosted::revisions::PgRevisions::new(self.db.clone(), vault.id, staged.clone());
        let state = State::new(
            config,
            VaultPaths::new(root, state_dir),
            Stores {
                meta: Box::new(hosted::meta::PgMeta::sharing(
                    self.db.clone(),
                    vault.id,
                    staged,
                )),
                history: Box::new(revisions),
                files: Box::new(hosted::files::PgFiles),
            },
            index,
            token_key,
            id,
        )?
        .shared(Shared {
            name: vault.name.clone(),
            fence: Box::new(hosted::fence::VaultFence::new(
                self.db.clone(),
                self.keys.clone(),
                vault.id,
            )),
            catch_up: crate::record::follow::catch_up_to,
            blobs: self.blobs.clone(),
            export: {
                let (db, id, blobs) = (self.db.clone(), vault.id, self.blobs.clone());
                Box::new(move |options, out| {
                    hosted::export::write(&db, id, options, blobs.as_deref(), out)
                })
            },
            links: self.links.clone(),
        });
        // Read from only (a cold start's bytes): nothing is staged through it.
        let revisions =
            hosted::revisions::PgRevisions::new(self.db.clone(), vault.id, Arc::default());
        build(&state, &revisions)?;
        tracing::debug!(vault = %state.vault_id, seq = state.committed_seq(), "opened a vault");
        Ok(Arc::new(state))
    }
}

/// The catalog and the search index from the database: every note as of the stored
/// seq, then whatever was recorded meanwhile, taken in from the op log.
fn build(state: &State, revisions: &hosted::revisions::PgRevisions) -> Result<()> {
    let write = state.lock();
    let seq = state.meta.committed_seq()?;
    let rows = state.meta.all_notes()?;
    let hashes: Vec<String> = rows.iter().map(|r| r.content_hash.clone()).collect();
    let mut bytes: HashMap<String, Arc<[u8]>> = HashMap::with_capacity(hashes.len());
    for chunk in hashes.chunks(1000) {
        for (hash, b) in revisions.bytes_of(chunk)? {
            bytes.insert(hash, b.into());
        }
    }
    let mut notes = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(b) = bytes.get(&row.content_hash).cloned() else {
            tracing::warn!(note = %row.note_id, "a note's bytes are missing from the database; it is left out");
            continue;
        };
        let at = crate::clock::parse_or_now;
        let (created, observed_at) = (at(&row.created_at), at(&row.observed_at));
        let observed = Observed::of_bytes(
            row.path.clone(),
            b,
            observed_at.into(),
            created.into(),
            true,
        );
        notes.push(Arc::new(note_from(
            observed,
            row.note_id,
            row.version_id,
            created,
            observed_at,
        )));
    }
    state.catalog.write().insert_all(notes);
    {
        let mut attachments = state.attachments.write();
        for row in state.meta.all_attachments()? {
            attachments.insert(crate::record::attachment_of(row));
        }
    }
    state.set_committed_seq(seq);
    state.start_index(seq);
    // Rows written after the seq was read are taken in again from the op log (an
    // upsert of what the catalog holds already changes nothing).
    crate::record::follow::catch_up(state, &write)
}

/// The store's `AWS_*` settings as the storage seam takes them.
fn store_settings(config: &Config) -> crate::storage::blobs::S3Settings {
    config
        .blob_settings
        .iter()
        .map(|(k, v)| (k.clone(), v.expose().to_string()))
        .collect()
}

/// The blob store `config` names, if any; a URL it cannot use stops the start.
pub fn blobs(config: &Config) -> Result<Option<Arc<dyn crate::storage::blobs::BlobStore>>> {
    let Some(url) = &config.blob_store else {
        return Ok(None);
    };
    let settings = store_settings(config);
    let store = crate::storage::blobs::S3Blobs::open(url, &settings)?;
    Ok(Some(Arc::new(store)))
}

/// The links of the blob store `config` names, for clients at `blob_public_endpoint`;
/// `None` without both. A setting it cannot use stops the start.
pub fn links(
    config: &Config,
    db: &Database,
) -> Result<Option<Arc<crate::storage::presign::StoreLinks>>> {
    let (Some(url), Some(public)) = (&config.blob_store, &config.blob_public_endpoint) else {
        return Ok(None);
    };
    let settings = store_settings(config);
    let pending = Box::new(hosted::presigned::PgPendingUploads::new(db.clone()));
    let transport = Box::new(HttpTransport::new()?);
    let links =
        crate::storage::presign::StoreLinks::open(url, public, &settings, transport, pending)?;
    Ok(Some(Arc::new(links)))
}

/// The HTTP client sending this instance's signed requests to the blob store
/// (`storage::presign::Transport`): a dead store is a quick error.
pub struct HttpTransport {
    client: reqwest::Client,
}

impl HttpTransport {
    pub fn new() -> Result<Self> {
        let client = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(1))
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| Error::internal(format!("an HTTP client for the blob store: {e}")))?;
        Ok(Self { client })
    }
}

impl crate::storage::presign::Transport for HttpTransport {
    fn send<'a>(
        &'a self,
        method: &'a str,
        url: String,
        headers: &'a [(&'static str, String)],
    ) -> futures::future::BoxFuture<'a, std::result::Result<crate::storage::presign::Answer, String>>
    {
        Box::pin(async move {
            let method =
                reqwest::Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
            let mut request = self.client.request(method, url);
            for (name, value) in headers {
                request = request.header(*name, value);
            }
            let answer = request.send().await.map_err(|e| e.to_string())?;
            let status = answer.status().as_u16();
            let headers = answer
                .headers()
                .iter()
                .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
                .collect();
            let body = answer.text().await.unwrap_or_default();
            Ok(crate::storage::presign::Answer {
                status,
                headers,
                body,
            })
        })
    }
}

fn stop(state: &State) {
    state
        .stopped
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let _recording = state.lock();
    state.index.shutdown();
}

impl Directory for HostedVaults {
    fn open(&self, vault_id: &str) -> Result<Option<Arc<State>>> {
        // One spelling of an id (a UUID may be written several ways).
        let Ok(id) = Uuid::parse_str(vault_id) else {
            return Ok(None);
        };
        let vault_id = &id.to_string();
        let Some((vault, stored_seq)) = block_on(hosted::lookup::served(&self.db, vault_id))?
        else {
            // Deleted (or being deleted) since it was opened: served no more, closed
            // under its slot (an id never loaded here has none, and gets none).
            let slot = self.slots.lock().get(vault_id).cloned();
            if let Some(slot) = slot {
                let _slot = slot.lock();
                let closed = self.open.lock().remove(vault_id);
                if let Some(state) = closed {
                    stop(&state);
                }
            }
            return Ok(None);
        };
        // Marked used before it is taken: the idle closer, which checks this under the
        // same lock, then leaves it open (or closed it already, and it is loaded anew).
        self.used
            .lock()
            .insert(vault_id.clone(), std::time::Instant::now());
        let known = self.open.lock().get(vault_id).cloned();
        let state = match known {
            Some(state) => {
                crate::telemetry::vault_cache(true);
                state
            }
            None => {
                // Waits only for this vault: its load by another request, or its close.
                let slot = self.slot(vault_id);
                let _slot = slot.lock();
                // Loaded by another request while this one waited.
                let known = self.open.lock().get(vault_id).cloned();
                match known {
                    Some(state) => state,
                    None => {
                        crate::telemetry::vault_cache(false);
                        let state = self.load(&vault)?;
                        self.open.lock().insert(vault_id.clone(), state.clone());
                        // Used as of now: a load longer than the idle time is not closed
                        // as it is served.
                        self.used
                            .lock()
                            .insert(vault_id.clone(), std::time::Instant::now());
                        state
                    }
                }
            }
        };
        crate::record::follow::refresh_from(&state, stored_seq)?;
        Ok(Some(state))
    }

    fn vault_of_token(&self, prefix: &str) -> Result<Option<String>> {
        block_on(hosted::lookup::vault_of_token(&self.db, prefix))
    }

    fn vault_of_session(&self, digest: &str) -> Result<Option<String>> {
        block_on(hosted::lookup::vault_of_session(&self.db, digest))
    }

    fn vault_of_sign_in_code(&self, digest: &str) -> Result<Option<String>> {
        block_on(hosted::lookup::vault_of_sign_in_code(&self.db, digest))
    }

    fn ready(&self) -> crate::vaults::Checks {
        let reached = block_on(async {
            let client = self.db.client().await?;
            client
                .simple_query("SELECT 1")
                .await
                .map_err(hosted::db_error)?;
            Ok::<_, Error>(())
        });
        let mut checks = match reached {
            Ok(()) => {
                let schema = block_on(hosted::schema::check(&self.db)).map_err(|e| e.message);
                vec![("database", Ok(())), ("schema", schema)]
            }
            Err(e) => vec![
                ("database", Err(e.message)),
                (
                    "schema",
                    Err("not checked: the database is unreachable".into()),
                ),
            ],
        };
        if let Some(blobs) = &self.blobs {
            checks.push(("blob_store", block_on(blobs.check()).map_err(|e| e.message)));
        }
        checks
    }

    fn begin_idp_sign_in(
        &self,
        name_or_id: &str,
        state_digest: &str,
        sign_in: &crate::storage::rows::IdpSignIn,
        (now, expires): (&str, &str),
    ) -> Result<bool> {
        let Some((id, _)) = block_on(hosted::lookup::vault_named(&self.db, name_or_id))? else {
            return Ok(false);
        };
        use crate::storage::metadata::Sessions;
        let rows = hosted::meta::PgMeta::new(self.db.clone(), id);
        rows.insert_idp_sign_in(state_digest, sign_in, now, expires)?;
        Ok(true)
    }

    fn take_idp_sign_in(
        &self,
        state_digest: &str,
        now: &str,
    ) -> Result<Option<(String, Option<String>, crate::storage::rows::IdpSignIn)>> {
        let Some((id, org)) =
            block_on(hosted::lookup::vault_of_idp_sign_in(&self.db, state_digest))?
        else {
            return Ok(None);
        };
        use crate::storage::metadata::Sessions;
        let rows = hosted::meta::PgMeta::new(self.db.clone(), id);
        Ok(rows
            .take_idp_sign_in(state_digest, now)?
            .map(|sign_in| (id.to_string(), org, sign_in)))
    }

    fn vaults_of_org(&self, org_id: &str) -> Result<Vec<String>> {
        block_on(hosted::lookup::vaults_of_org(&self.db, org_id))
    }

    fn link_key(&self, vault_id: &str) -> Result<Option<[u8; 32]>> {
        let Ok(id) = Uuid::parse_str(vault_id) else {
            return Ok(None);
        };
        let key = block_on(hosted::lookup::setting(&self.db, id, "page_token_key"))?;
        Ok(key
            .as_deref()
            .and_then(parse_key)
            .map(|k| crate::state::presign_key(&k)))
    }

    fn open_vaults(&self) -> Vec<Arc<State>> {
        self.open.lock().values().cloned().collect()
    }

    fn sample_pools(&self) {
        self.db.sample_pool();
        self.keys.sample_pool();
    }

    fn pending_writes(&self) -> Option<usize> {
        let open: Vec<Uuid> = self
            .open
            .lock()
            .keys()
            .filter_map(|id| Uuid::parse_str(id).ok())
            .collect();
        match block_on(hosted::lookup::pending_writes(&self.db, &open)) {
            Ok(n) => usize::try_from(n).ok(),
            Err(e) => {
                tracing::debug!(error = %e.message, "cannot count the review queue for a scrape");
                None
            }
        }
    }
}

use super::{hex_of, parse_key};
