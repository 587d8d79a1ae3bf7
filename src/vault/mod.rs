//! Domain core: the note model, markdown facts, surgical frontmatter edits, safe paths,
//! atomic file IO. No HTTP, no JSON.

pub mod attachments;
pub mod catalog;
pub mod frontmatter;
pub mod fsio;
pub mod graph;
pub mod links;
pub mod markdown;
pub mod path;
pub mod removed;
pub mod scan;
pub mod select;
pub mod settle;

/// `blake3:<hex>` of a file's bytes: a note's `content_hash`.
pub fn content_hash(bytes: &[u8]) -> String {
    format!("blake3:{}", blake3::hash(bytes).to_hex())
}
