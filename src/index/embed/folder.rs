//! The files of a model folder: read whole, and the fingerprint of what was read.

use std::path::Path;

use anyhow::Context;

/// The files every model folder has.
pub const FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// A file of a model folder, read whole; the error names the file and what a folder holds.
pub fn read_file(dir: &Path, name: &str) -> anyhow::Result<Vec<u8>> {
    std::fs::read(dir.join(name)).with_context(|| {
        format!(
            "the embedding model folder {} has no readable {name} (a model folder has {})",
            dir.display(),
            FILES.join(", ")
        )
    })
}

/// BLAKE3 of `parts`, each prefixed by its length, as 32 hex digits.
pub fn fingerprint(parts: &[&[u8]]) -> String {
    let mut hasher = blake3::Hasher::new();
    for bytes in parts {
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    hasher.finalize().to_hex()[..32].to_string()
}
