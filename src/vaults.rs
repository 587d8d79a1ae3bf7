//! The vault registry: every vault one daemon serves, each its own [`State`], the default
//! one (which a request without a bearer reaches) first. Which vault a request reaches is
//! decided by its credential (`http::authenticate`); nothing here knows of requests.

use std::sync::Arc;

use crate::state::State;

pub struct Vaults {
    all: Vec<Arc<State>>,
}

impl Vaults {
    /// The registry of `all`, the default vault first. Two vaults with one `vault_id` (a
    /// state directory copied from another vault's) would make a token of one reach the
    /// other: refused.
    pub fn new(all: Vec<Arc<State>>) -> Result<Self, String> {
        if all.is_empty() {
            return Err("no vault to serve".into());
        }
        for (i, a) in all.iter().enumerate() {
            if let Some(b) = all[..i].iter().find(|b| b.vault_id == a.vault_id) {
                return Err(format!(
                    "the vaults {} and {} have the same vault_id {} (was a state directory copied?); give one of them a state directory of its own",
                    b.root().display(),
                    a.root().display(),
                    a.vault_id
                ));
            }
        }
        Ok(Self { all })
    }

    /// The vault a request without a bearer (or a credential naming no vault) reaches.
    pub fn default_vault(&self) -> &Arc<State> {
        &self.all[0]
    }

    pub fn all(&self) -> &[Arc<State>] {
        &self.all
    }
}

impl From<Arc<State>> for Vaults {
    fn from(state: Arc<State>) -> Self {
        Self { all: vec![state] }
    }
}

/// Each part a directory needs, and why it cannot serve now ([`Directory::ready`]).
pub type Checks = Vec<(&'static str, std::result::Result<(), String>)>;

/// The vaults of a hosted deployment: many, opened when a request first names one, and
/// found by what a credential carries. Implemented by the composition root over the
/// database (`daemon::hosted`).
pub trait Directory: Send + Sync {
    /// The vault `vault_id`, opened if it is not yet and caught up with what the other
    /// instances recorded; `None` when there is no such vault (or it is being deleted).
    fn open(&self, vault_id: &str) -> crate::error::Result<Option<Arc<State>>>;

    /// The id of the vault whose personal access token has the public prefix `prefix`.
    fn vault_of_token(&self, prefix: &str) -> crate::error::Result<Option<String>>;

    /// The id of the vault whose console session has this digest.
    fn vault_of_session(&self, digest: &str) -> crate::error::Result<Option<String>>;

    /// The id of the vault whose console sign-in code has this digest.
    fn vault_of_sign_in_code(&self, digest: &str) -> crate::error::Result<Option<String>>;

    /// Keep a sign-in through the identity provider, started for the vault a person
    /// names (its name or id), in that vault's rows without opening it (an unsigned
    /// request must not load a vault); `false`: no such vault.
    fn begin_idp_sign_in(
        &self,
        name_or_id: &str,
        state_digest: &str,
        sign_in: &crate::storage::rows::IdpSignIn,
        at: (&str, &str),
    ) -> crate::error::Result<bool>;

    /// Take back (once) the sign-in whose `state` has this digest, unexpired at `now`: its
    /// vault's id and `org_id`, and the sign-in. Opens nothing.
    fn take_idp_sign_in(
        &self,
        state_digest: &str,
        now: &str,
    ) -> crate::error::Result<Option<(String, Option<String>, crate::storage::rows::IdpSignIn)>>;

    /// The ids of the vaults of the organization `org_id`.
    fn vaults_of_org(&self, org_id: &str) -> crate::error::Result<Vec<String>>;

    /// The secret of the vault's presigned links (`State::presign_key`), read without
    /// opening it, so that only a link it signed opens it; `None`: no such vault yet.
    fn link_key(&self, vault_id: &str) -> crate::error::Result<Option<[u8; 32]>>;

    /// Each part the directory needs to serve (`database`, `schema`), and why it cannot
    /// now (for `/readyz`).
    fn ready(&self) -> Checks;

    /// The vaults open on this instance now (a scrape's op-log lag).
    fn open_vaults(&self) -> Vec<Arc<State>> {
        Vec::new()
    }

    /// Set its database pools' gauges (`telemetry`), for a scrape.
    fn sample_pools(&self) {}

    /// The writes waiting for review in the vaults open now; `None` when it cannot tell.
    fn pending_writes(&self) -> Option<usize> {
        None
    }
}
