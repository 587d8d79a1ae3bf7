//! The purge of what the daemon holds about its vault, as asked by a signed-in person
//! (`POST /v1/vault/purge`, the console): the confirmation is checked here, then serving
//! stops (`State::stop`) and the daemon removes its state once nothing else runs
//! (`daemon::purge`). The notes folder is untouched unless `trash_notes` is asked.

use crate::error::{Error, Result};
use crate::state::{PurgeRequest, State};

/// The vault's name, as a purge must be confirmed with: its folder's name.
pub fn vault_name(state: &State) -> String {
    state
        .root()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| state.root().display().to_string())
}

/// Ask for a purge: `confirm` must be the vault's name exactly (`VALIDATION_FAILED` on
/// `confirm` otherwise, and nothing changes). A second request while the first one
/// stops the daemon is answered the same.
pub fn request(state: &State, confirm: &str, trash_notes: bool, actor: &str) -> Result<()> {
    let name = vault_name(state);
    if confirm != name {
        return Err(Error::invalid_field(
            "confirm",
            format!("must be the vault's name, {name:?}, typed exactly"),
        ));
    }
    let _ = state.purge.set(PurgeRequest {
        trash_notes,
        actor: actor.to_string(),
    });
    tracing::warn!(
        actor,
        trash_notes,
        "purge asked: the daemon stops serving and removes its state"
    );
    state.stop.cancel();
    Ok(())
}
