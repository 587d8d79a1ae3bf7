//! What both kinds of model read the same way: the folder's files (whole, or absent),
//! the fingerprint of what was read, the tokenizer's unknown token, a text's cut.

use std::path::Path;

use anyhow::{anyhow, Context};
use tokenizers::models::ModelWrapper;
use tokenizers::Tokenizer;

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

/// A file of the folder that may be absent.
pub fn optional(dir: &Path, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
    match std::fs::read(dir.join(name)) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow!("{name} in the model folder cannot be read: {e}")),
    }
}

/// The id of the tokenizer's unknown token, when its model has one.
pub fn unknown_token(tokenizer: &Tokenizer) -> Option<u32> {
    let name = match tokenizer.get_model() {
        ModelWrapper::WordPiece(m) => Some(m.unk_token.clone()),
        ModelWrapper::WordLevel(m) => Some(m.unk_token.clone()),
        ModelWrapper::BPE(m) => m.unk_token.clone(),
        ModelWrapper::Unigram(_) => None,
    };
    name.and_then(|t| tokenizer.token_to_id(&t))
}

/// `text` cut to its first `chars` characters (before tokenizing: a tokenizer reads the
/// whole text it is given, however much of it is kept).
pub fn cut(text: &str, chars: usize) -> &str {
    match text.char_indices().nth(chars) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}
