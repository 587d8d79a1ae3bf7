//! Private notes as listings show them: a handle per `<name>.nvpriv` file, built from
//! the file's facts alone. The daemon holds only ciphertext, so a handle carries no
//! content, no tags, no frontmatter and no links, and its title is the file's name (a
//! note's own title lives inside the ciphertext).

use std::sync::Arc;

use crate::state::State;
use crate::vault::attachments::Attachment;
use crate::vault::note::{Note, Visibility};
use crate::vault::PRIVATE_SUFFIX;

/// What a reader of a private note's handle is told.
pub const PRIVATE_WARNING: &str =
    "private note: end-to-end encrypted; read it on a device that holds the key";

/// The handle of the private note kept in `a`: `note_id` is its slug (the file is its
/// identity: a device moves it as a delete and an upsert), `version_id` and
/// `content_hash` are the file's `sha256:<hex>`.
pub fn handle(a: &Attachment) -> Note {
    let slug = a.path.strip_suffix(PRIVATE_SUFFIX).unwrap_or(&a.path);
    let hash = format!("sha256:{}", a.sha256);
    Note {
        note_id: slug.to_string(),
        path: a.path.clone(),
        title: crate::vault::path::file_name_of(slug).to_string(),
        status: "active".to_string(),
        visibility: Visibility::Private,
        tags: Vec::new(),
        frontmatter: None,
        aliases: Vec::new(),
        links: Vec::new(),
        warnings: vec![PRIVATE_WARNING.to_string()],
        version_id: hash.clone(),
        content_hash: hash,
        size: a.size,
        created_at: a.modified_at,
        updated_at: a.modified_at,
        observed_at: a.modified_at,
        content: None,
        stamp: None,
    }
}

/// The private notes whose slug starts with `prefix`, in slug order.
pub fn handles(state: &State, prefix: &str) -> Vec<Arc<Note>> {
    let mut out: Vec<Arc<Note>> = state
        .attachments
        .read()
        .iter()
        .filter(|a| crate::vault::is_private_note(&a.path))
        .map(|a| Arc::new(handle(a)))
        .filter(|n| n.slug().starts_with(prefix))
        .collect();
    out.sort_by(|a, b| a.slug().cmp(b.slug()));
    out
}

/// How many private note files (`<name>.nvpriv`) the vault holds.
pub fn private_note_count(state: &State) -> usize {
    state
        .attachments
        .read()
        .iter()
        .filter(|a| crate::vault::is_private_note(&a.path))
        .count()
}
