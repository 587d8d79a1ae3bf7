//! The purge of what the daemon holds about its vault, as asked by a signed-in person
//! (`POST /v1/vault/purge`, the console): the confirmation is checked here, then serving
//! stops (`State::stop`) and the daemon removes its state once nothing else runs
//! (`daemon::purge`). The notes folder is untouched unless `trash_notes` is asked. A
//! hosted vault is deleted from the database at once, for every instance.

use crate::error::{Error, Result};
use crate::state::{PurgeRequest, State};

/// The vault's name, as a purge must be confirmed with: its folder's name.
pub fn vault_name(state: &State) -> String {
    if let Some(shared) = &state.shared {
        return shared.name.clone();
    }
    state
        .root()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| state.root().display().to_string())
}

/// Ask for a purge: `confirm` must be the vault's name exactly (`VALIDATION_FAILED` on
/// `confirm` otherwise, and nothing changes). Answers the purge that will run: a second
/// request while the first one stops the daemon gets the first one's.
pub fn request(
    state: &State,
    confirm: &str,
    trash_notes: bool,
    actor: &str,
) -> Result<PurgeRequest> {
    let name = vault_name(state);
    if confirm != name {
        return Err(Error::invalid_field(
            "confirm",
            format!("must be the vault's name, {name:?}, typed exactly"),
        ));
    }
    // A shared vault's stores are deleted now, for every process serving it (they refuse
    // it from their next request on); there is no folder to put notes aside in.
    if let Some(shared) = &state.shared {
        shared.fence.delete_vault()?;
        state
            .stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    let asked = state
        .purge
        .get_or_init(|| PurgeRequest {
            trash_notes,
            actor: actor.to_string(),
        })
        .clone();
    tracing::warn!(
        actor,
        trash_notes = asked.trash_notes,
        "purge asked: the daemon stops serving and removes its state"
    );
    state.stop.cancel();
    Ok(asked)
}
