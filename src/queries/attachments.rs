//! Attachment reads both surfaces share: the listing (filter, order, page), the notes
//! that reference each attachment, and finding one by name or path.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::error::{Error, Reason, Result};
use crate::filter::{Expr, Value};
use crate::state::State;
use crate::vault::attachments::{links_attachment, Attachment};
use crate::vault::observe::Excluded;

/// The fields an attachment listing filters on.
pub const FILTER_FIELDS: &[&str] = &[
    "folder",
    "path",
    "file_name",
    "content_type",
    "size",
    "modified_at",
    "referenced",
    "sha256",
];

/// The fields an attachment listing orders by.
pub const ORDER_FIELDS: &[&str] = &["path", "file_name", "size", "modified_at", "content_type"];

/// For every attachment some note links to or embeds, how many notes do (resolved as
/// Obsidian does, see `AttachmentCatalog::resolve`).
pub fn references(state: &State) -> HashMap<String, usize> {
    let catalog = state.catalog.read();
    let attachments = state.attachments.read();
    let mut by_path: HashMap<String, HashSet<&str>> = HashMap::new();
    for note in catalog.iter() {
        let folder = crate::vault::path::folder_of(note.slug());
        for link in note.links.iter().filter(|l| links_attachment(l)) {
            if let Some(a) = attachments.resolve(folder, link) {
                by_path
                    .entry(a.path.clone())
                    .or_default()
                    .insert(note.note_id.as_str());
            }
        }
    }
    by_path.into_iter().map(|(p, n)| (p, n.len())).collect()
}

/// One attachment's value for a filter field.
pub fn field(a: &Attachment, refs: usize, name: &str) -> Value {
    match name {
        "folder" => Value::Text(a.folder().to_string()),
        "path" => Value::Text(a.path.clone()),
        "file_name" => Value::Text(a.file_name().to_string()),
        "content_type" => Value::Text(a.content_type.clone()),
        "sha256" => Value::Text(a.sha256.clone()),
        "size" => Value::Number(a.size as f64),
        "modified_at" => Value::Time(a.modified_at),
        "referenced" => Value::Text((refs > 0).to_string()),
        _ => Value::Missing,
    }
}

/// A page of attachments.
#[derive(Debug)]
pub struct Page {
    pub items: Vec<(Arc<Attachment>, usize)>,
    pub total: usize,
    pub matched: usize,
    /// The offset of the next page, when there is one.
    pub next_offset: Option<usize>,
    pub excluded: Vec<Excluded>,
    pub committed_seq: i64,
}

/// List attachments matching `filter` in `order` (`field`, descending?), from `offset`.
pub fn list(
    state: &State,
    filter: Option<&Expr>,
    order: (&str, bool),
    offset: usize,
    page_size: usize,
) -> Page {
    let refs = references(state);
    let attachments = state.attachments.read();
    let committed_seq = state.committed_seq();
    let count = |a: &Attachment| refs.get(&a.path).copied().unwrap_or(0);
    // Private notes' `.nvpriv` files are notes, not attachments: the sync plane carries
    // them (ciphertext), listings leave them out.
    let mut matched: Vec<&Arc<Attachment>> = attachments
        .iter()
        .filter(|a| !crate::vault::is_private_note(&a.path))
        .filter(|a| filter.is_none_or(|f| f.matches(&|name| field(a, count(a), name))))
        .collect();
    let (by, desc) = order;
    if by != "path" || desc {
        matched.sort_by(|a, b| {
            let o = match by {
                "file_name" => a.file_name().cmp(b.file_name()),
                "size" => a.size.cmp(&b.size),
                "modified_at" => a.modified_at.cmp(&b.modified_at),
                "content_type" => a.content_type.cmp(&b.content_type),
                _ => std::cmp::Ordering::Equal,
            }
            .then_with(|| a.path.cmp(&b.path));
            if desc {
                o.reverse()
            } else {
                o
            }
        });
    }
    let total = attachments
        .iter()
        .filter(|a| !crate::vault::is_private_note(&a.path))
        .count();
    let matched_n = matched.len();
    let items: Vec<(Arc<Attachment>, usize)> = matched
        .into_iter()
        .skip(offset)
        .take(page_size)
        .map(|a| ((*a).clone(), count(a)))
        .collect();
    let next_offset = (offset + items.len() < matched_n).then_some(offset + items.len());
    Page {
        items,
        total,
        matched: matched_n,
        next_offset,
        excluded: attachments.excluded.clone(),
        committed_seq,
    }
}

/// The attachment a download names: a vault path (`projects/alpha/diagram.png`), or a
/// file name found anywhere in the vault. Several files of that name with different
/// bytes are `ATTACHMENT_AMBIGUOUS` (each candidate's `sha256` and path in the metadata)
/// unless `sha256` picks one; the same bytes in several places answer the shortest path.
pub fn find(state: &State, name: &str, sha256: Option<&str>) -> Result<Arc<Attachment>> {
    let not_found = || {
        Error::new(
            Reason::ATTACHMENT_NOT_FOUND,
            format!("no attachment {name:?}"),
        )
        .with_meta("file_name", name)
    };
    if name.contains('/') {
        let safe = state.paths.resolve(name)?;
        let attachments = state.attachments.read();
        let a = attachments.get(&safe.rel).cloned().ok_or_else(not_found)?;
        if sha256.is_some_and(|s| !s.eq_ignore_ascii_case(&a.sha256)) {
            return Err(not_found().with_meta("sha256", sha256.unwrap_or_default()));
        }
        return Ok(a);
    }
    if name.contains('\0') || name.contains('\\') || name == "." || name == ".." {
        return Err(Error::unsafe_path(
            "an attachment name is a file name or a vault-relative path",
        ));
    }
    let attachments = state.attachments.read();
    let candidates: Vec<&Arc<Attachment>> = attachments
        .named(name)
        .into_iter()
        .filter(|a| sha256.is_none_or(|s| s.eq_ignore_ascii_case(&a.sha256)))
        .collect();
    let Some(first) = candidates.first() else {
        return Err(not_found());
    };
    let distinct: HashSet<&str> = candidates.iter().map(|a| a.sha256.as_str()).collect();
    if distinct.len() > 1 {
        let mut e = Error::new(
            Reason::ATTACHMENT_AMBIGUOUS,
            format!(
                "{} files named {name:?} hold different bytes; name one by its sha256 or path",
                candidates.len()
            ),
        )
        .with_meta("file_name", name);
        for (i, a) in candidates.iter().enumerate() {
            e = e
                .with_meta(format!("candidate_{i}_sha256"), a.sha256.clone())
                .with_meta(format!("candidate_{i}_path"), a.path.clone());
        }
        return Err(e);
    }
    Ok((*first).clone())
}
