//! The vault's summary (`GET /v1/vault`): counts, size, settings and freshness.

use std::collections::HashSet;

use crate::error::Result;
use crate::state::State;
use crate::vault::note::Visibility;

/// What `GET /v1/vault` says.
#[derive(Debug, Clone)]
pub struct VaultSummary {
    pub root: String,
    pub notes: usize,
    pub excluded: usize,
    pub private: usize,
    pub folders: usize,
    pub tags: usize,
    pub bytes: u64,
    pub statuses: Vec<(String, usize)>,
    pub committed_seq: i64,
    pub indexed_seq: i64,
    pub settings: super::settings::WriteSettings,
}

/// Counts, size, settings and freshness of the vault.
pub fn summary(state: &State) -> Result<VaultSummary> {
    let settings = super::settings::settings(state)?;
    let catalog = state.catalog.read();
    let mut folders: HashSet<&str> = HashSet::new();
    let mut tags: HashSet<&str> = HashSet::new();
    let mut statuses: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut bytes = 0;
    let mut private = 0;
    for note in catalog.iter() {
        folders.extend(crate::vault::path::ancestors(note.slug()));
        tags.extend(note.tags.iter().map(String::as_str));
        *statuses.entry(note.status.as_str()).or_default() += 1;
        bytes += note.size;
        if note.visibility == Visibility::Private {
            private += 1;
        }
    }
    private += super::private::private_note_count(state);
    Ok(VaultSummary {
        root: state.root().display().to_string(),
        notes: catalog.len(),
        excluded: catalog.excluded.len(),
        private,
        folders: folders.len(),
        tags: tags.len(),
        bytes,
        statuses: statuses
            .into_iter()
            .map(|(s, n)| (s.to_string(), n))
            .collect(),
        committed_seq: state.committed_seq(),
        indexed_seq: state.index.indexed_seq(),
        settings,
    })
}
