//! Several vaults served by one daemon: `serve ~/Notes ~/Work` or `[[vaults]]` entries in
//! the config file. Each vault gets a configuration of its own (its folder, its state
//! directory, the identity provider's organization that maps to it); everything else is
//! the daemon's and shared.

use std::path::PathBuf;

use serde::Deserialize;

use super::Config;

/// One vault of `[[vaults]]` (or one folder of `serve A B`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VaultEntry {
    /// The vault's folder.
    pub path: PathBuf,
    /// Where its history, metadata and index live; `None`: `<path>/.notevault`.
    pub state_dir: Option<PathBuf>,
    /// The identity provider's organization that maps to this vault (a JWT naming no
    /// `vault_id` reaches the vault whose `org_id` it carries).
    pub org_id: Option<String>,
}

impl Config {
    /// The configuration of each vault served, the first (the default vault, which a
    /// request without a bearer reaches) first: one per `[[vaults]]` entry, or this one
    /// alone. A top-level `state_dir` names one vault's directory, so it is refused
    /// beside several vaults (two vaults never share a state directory).
    pub fn vault_configs(&self) -> Result<Vec<Config>, String> {
        if self.vaults.len() < 2 {
            let mut one = self.clone();
            if let Some(entry) = self.vaults.first() {
                one.vault = entry.path.clone();
                one.state_dir = entry.state_dir.clone().or(one.state_dir);
                one.org_id = entry.org_id.clone().or(one.org_id);
            }
            one.vaults.clear();
            return Ok(vec![one]);
        }
        if self.state_dir.is_some() {
            return Err("a state directory (--state-dir, state_dir, NOTEVAULT_STATE_DIR) names one vault's; with several vaults give each [[vaults]] entry its own state_dir, or leave it out (<vault>/.notevault)".into());
        }
        Ok(self
            .vaults
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                let mut one = self.clone();
                one.vault = entry.path.clone();
                one.state_dir = entry.state_dir.clone();
                // The top-level `org_id` is the default vault's.
                one.org_id = entry
                    .org_id
                    .clone()
                    .or_else(|| (i == 0).then(|| self.org_id.clone()).flatten());
                one.vaults.clear();
                one
            })
            .collect())
    }
}
