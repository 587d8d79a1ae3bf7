//! Attachments found on disk become [`FileEntry`]s for the one recorder: the start-up
//! scan, the watcher's batches and its rescans. A file whose size, mtime and inode are
//! what the catalog holds is not read again. Here too: an attachment's facts to and from
//! its store row.

use std::collections::{BTreeSet, HashMap};

use crate::clock::timestamp;
use crate::error::Result;
use crate::record::{record, Batch, FileEntry, Recorded};
use crate::state::{State, WriteLock};
use crate::storage::rows::AttachmentRow;
use crate::vault::attachments::{self, Attachment};
use chrono::{DateTime, Utc};

/// The changes that take the catalog from what it holds to `found` (files as observed)
/// and `gone` (paths no longer there). Files with the bytes the catalog has are left out.
pub fn changes(state: &State, found: Vec<Attachment>, gone: &[String]) -> Vec<FileEntry> {
    let catalog = state.attachments.read();
    let mut out = Vec::new();
    for a in found {
        let kind = match catalog.get(&a.path) {
            Some(known) if known.sha256 == a.sha256 && known.content_type == a.content_type => {
                continue
            }
            Some(_) => "update",
            None => "create",
        };
        out.push(FileEntry {
            path: a.path.clone(),
            to: Some(a),
            kind: kind.into(),
        });
    }
    for path in gone {
        if catalog.get(path).is_some() {
            out.push(FileEntry {
                path: path.clone(),
                to: None,
                kind: "delete".into(),
            });
        }
    }
    out
}

/// Record `files` as one batch of `actor` (not durable: history catches up behind).
pub fn record_files(
    state: &State,
    write: &WriteLock<'_>,
    files: Vec<FileEntry>,
    actor: &str,
    subject: &str,
) -> Result<Recorded> {
    record(
        state,
        write,
        Batch {
            actor,
            subject: subject.to_string(),
            entries: Vec::new(),
            files,
            whole_vault: None,
            durable: false,
            marks: Vec::new(),
        },
    )
}

/// Look at these vault paths again (the watcher's dirty attachments, and those under a
/// folder that came or went) and record what changed, under the write lock.
pub fn sync_paths(state: &State, write: &WriteLock<'_>, rels: &BTreeSet<String>) -> Result<()> {
    if rels.is_empty() {
        return Ok(());
    }
    let mut found = Vec::new();
    let mut gone = Vec::new();
    for rel in rels {
        if state.paths.resolve(rel).is_err() {
            continue;
        }
        let known = state.attachments.read().get(rel).cloned();
        match attachments::observe(&state.paths.root, rel, known.as_deref()) {
            Ok(a) => found.push(a),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => gone.push(rel.clone()),
            Err(e) => {
                if state.paths.root.join(rel).is_dir() {
                    continue;
                }
                tracing::warn!(path = %rel, error = %e, "cannot read a changed attachment");
            }
        }
    }
    let files = changes(state, found, &gone);
    record_files(
        state,
        write,
        files,
        "filesystem",
        "Record external attachment changes",
    )?;
    Ok(())
}

/// Compare every attachment on disk with the catalog and record the difference, under
/// the write lock.
pub fn rescan(state: &State, write: &WriteLock<'_>) -> Result<()> {
    let (listed, mut excluded) = attachments::list_files(&state.paths);
    let known: HashMap<String, Attachment> = state
        .attachments
        .read()
        .iter()
        .map(|a| (a.path.clone(), (**a).clone()))
        .collect();
    let (found, bad) = attachments::observe_all(&state.paths.root, &listed, &known);
    excluded.extend(bad);
    let on_disk: BTreeSet<&str> = listed.iter().map(String::as_str).collect();
    let gone: Vec<String> = known
        .keys()
        .filter(|p| !on_disk.contains(p.as_str()))
        .cloned()
        .collect();
    state.attachments.write().excluded = excluded;
    let files = changes(state, found, &gone);
    record_files(
        state,
        write,
        files,
        "filesystem",
        "Record external attachment changes (rescan)",
    )?;
    Ok(())
}

/// The store rows of an attachment's facts.
pub fn attachment_row(a: &Attachment) -> AttachmentRow {
    AttachmentRow {
        path: a.path.clone(),
        size: a.size,
        mtime_ns: a.stamp.mtime_ns,
        inode: a.stamp.inode,
        sha256: a.sha256.clone(),
        content_type: a.content_type.clone(),
        modified_at: timestamp(a.modified_at),
    }
}

/// An attachment's facts from its store row.
pub fn attachment_of(row: AttachmentRow) -> Attachment {
    Attachment {
        stamp: crate::vault::attachments::Stamp {
            size: row.size,
            mtime_ns: row.mtime_ns,
            inode: row.inode,
        },
        modified_at: DateTime::parse_from_rfc3339(&row.modified_at)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default(),
        path: row.path,
        size: row.size,
        sha256: row.sha256,
        content_type: row.content_type,
    }
}
