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
