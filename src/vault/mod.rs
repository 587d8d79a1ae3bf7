//! Domain core: the note model, markdown facts, surgical frontmatter edits, safe paths,
//! atomic file IO. No HTTP, no JSON.

pub mod attachments;
pub mod catalog;
pub mod frontmatter;
pub mod fsio;
pub mod graph;
pub mod link_tables;
pub mod link_text;
pub mod links;
pub mod markdown;
pub mod note;
pub mod observe;
pub mod packed;
pub mod path;
pub mod removed;
pub mod scan;
pub mod scan_cache;
pub mod select;
pub mod settle;
pub mod walk;

/// The file type of a private note: `<name>.nvpriv` beside the notes, holding only what
/// a device encrypted (see the README, "Private notes"). The daemon keeps it as a file
/// kept by path (like an attachment), never reads it as markdown, never indexes it.
pub const PRIVATE_SUFFIX: &str = ".nvpriv";

/// The first line of every private note file: a device's ciphertext envelope, version 1.
pub const PRIVATE_MAGIC: &[u8] = b"notevault-private v1\n";

/// Whether `path` names a private note file.
pub fn is_private_note(path: &str) -> bool {
    path.len() > PRIVATE_SUFFIX.len() && path.ends_with(PRIVATE_SUFFIX)
}

/// `blake3:<hex>` of a file's bytes: a note's `content_hash`.
pub fn content_hash(bytes: &[u8]) -> String {
    format!("blake3:{}", blake3::hash(bytes).to_hex())
}
