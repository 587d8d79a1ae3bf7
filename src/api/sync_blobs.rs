//! A hosted vault's private notes in a device push: once the push is checked, each one's
//! ciphertext goes to the blob store (named by its sha256) before its op is applied, as
//! an upload's bytes do before their row, so the row the recorder writes always names
//! bytes the store holds.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::error::{Error, Result};
use crate::state::State;
use crate::storage::blobs::BlobStore;
use crate::storage::upload::HashedUpload;
use crate::writes::Op;

/// For each checked op of a push, why its bytes could not be stored (`None`: stored, or
/// nothing to store). A local vault, or a hosted one without a blob store, stores
/// nothing here (the write says why).
pub async fn store_private(state: &State, ops: &[Op]) -> Vec<Option<Error>> {
    let blobs = state.shared.as_ref().and_then(|s| s.blobs.clone());
    let mut refused = Vec::with_capacity(ops.len());
    for op in ops {
        refused.push(match (op, &blobs) {
            (Op::PutPrivate { ciphertext, .. }, Some(blobs)) => {
                put(&**blobs, &state.vault_id, ciphertext).await.err()
            }
            _ => None,
        });
    }
    refused
}

async fn put(blobs: &dyn BlobStore, vault: &str, ciphertext: &str) -> Result<()> {
    let bytes = STANDARD
        .decode(ciphertext)
        .map_err(|_| Error::invalid_field("content_base64", "is not valid standard base64"))?;
    let mut upload = HashedUpload::new(blobs.begin(vault, None));
    upload.write(bytes.into()).await?;
    upload.finish().await.map(drop)
}
