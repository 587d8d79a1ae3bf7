//! The one write pipeline: validate → idempotency → (policy, the queuing branch, arrives
//! with the review issue) → apply (file, history, metadata, catalog) → receipt.
//!
//! HTTP uses it now; MCP and device sync will call the same [`submit`]. `reconcile` takes
//! changes found on disk through the same stores.
//!
//! Ordering and durability: one write applies at a time (the service's write lock), so
//! `committed_seq` and the history commits advance together. A change is on disk (atomic
//! rename, folder fsynced) and committed to `history.git` before its revision is recorded,
//! and its idempotency record is stored before the receipt leaves the daemon.

pub mod links;
pub mod reconcile;
pub mod review;

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Utc;
use parking_lot::Mutex;

use crate::error::{Error, Reason, Result};
use crate::history::{Change, CommitRequest, Content};
use crate::meta::{IdempotencyRow, NoteRow, RevisionRow};
use crate::service::{timestamp, Service};
use crate::vault::catalog::Note;
use crate::vault::frontmatter::{self, FmValue};
use crate::vault::fsio::{self, Expect};
use crate::vault::path::slug_of;
use crate::watch::scan::{self, Observed};

/// One change a PATCH asks for (in mask order).
#[derive(Debug, Clone, PartialEq)]
pub enum PatchChange {
    /// Set a top-level frontmatter key (`title`, `status`, `tags`, `frontmatter.<key>`).
    SetKey(String, FmValue),
    /// Remove a top-level frontmatter key (`frontmatter.<key>` set to null).
    RemoveKey(String),
    /// Replace the body after the frontmatter.
    Content(String),
    /// Move the note into this folder (`""` is the vault root).
    Folder(String),
}

/// A write operation, already validated for shape by the caller.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Create {
        slug: String,
        body: String,
        keys: Vec<(String, FmValue)>,
    },
    Patch {
        note: String,
        version_id: Option<String>,
        changes: Vec<PatchChange>,
    },
    Delete {
        note: String,
        version_id: Option<String>,
    },
    Edit {
        note: String,
        version_id: String,
        old_string: String,
        new_string: String,
    },
    Move {
        note: String,
        folder: String,
        version_id: Option<String>,
    },
    Rename {
        note: String,
        name: String,
        version_id: Option<String>,
    },
    /// Restore the content of a listed revision (also of a deleted note) as a new revision.
    Rollback {
        note: String,
        revision_id: String,
        version_id: Option<String>,
    },
}

impl Op {
    /// The pending-write `kind` of this operation.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Create { .. } | Op::Patch { .. } | Op::Rollback { .. } => "write",
            Op::Delete { .. } => "delete",
            Op::Edit { .. } => "edit",
            Op::Move { .. } => "move",
            Op::Rename { .. } => "rename",
        }
    }
}

/// `applied` or `queued`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiptStatus {
    Applied,
    Queued,
}

/// What a write did.
#[derive(Debug, Clone)]
pub struct Receipt {
    pub status: ReceiptStatus,
    pub slug: String,
    pub note_id: String,
    pub version_id: String,
    pub content_hash: String,
    pub committed_seq: i64,
    /// The note after the write, for create and PATCH.
    pub note: Option<Arc<Note>>,
    pub renamed: bool,
    pub unchanged: bool,
    pub links_updated: usize,
    /// `(slug, reason)` of each note whose links could not be rewritten.
    pub links_failed: Vec<(String, String)>,
    pub flow_back_error: Option<String>,
    pub pending_id: Option<String>,
    /// A note was created (the HTTP layer answers 201).
    pub created: bool,
}

/// The idempotency of one request: its key, the hash of the operation, and how the
/// caller renders a receipt (status, body) so a replay returns exactly the same bytes.
pub struct Idempotency<'a> {
    pub key: &'a str,
    pub op_hash: String,
    pub render: &'a (dyn Fn(&Receipt) -> (u16, String) + Sync),
    /// The request as the caller received it, kept if the write is queued.
    pub payload: String,
}

/// Per-key locks, so a concurrent duplicate waits for the first and replays it.
#[derive(Default)]
pub struct KeyLocks {
    locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

impl KeyLocks {
    pub(crate) fn get(&self, key: &str) -> Arc<Mutex<()>> {
        let mut locks = self.locks.lock();
        if locks.len() > 10_000 {
            locks.retain(|_, l| Arc::strong_count(l) > 1);
        }
        locks.entry(key.to_string()).or_default().clone()
    }
}

/// Submit a write: replay it if this key already ran this operation, refuse a key reused
/// for another operation, else apply it and store its rendered receipt under the key.
pub fn submit(
    svc: &Service,
    op: Op,
    agent_id: &str,
    idem: Idempotency<'_>,
) -> Result<(u16, String)> {
    let key_lock = svc.key_locks.get(idem.key);
    let _key_guard = key_lock.lock();
    if let Some(row) = svc.meta.idempotency(idem.key)? {
        if row.op_hash == idem.op_hash {
            return Ok((row.status, row.body));
        }
        return Err(Error::new(
            Reason::IDEMPOTENCY_KEY_REUSED,
            "this Idempotency-Key was already used for a different request",
        )
        .with_meta("idempotency_key", idem.key));
    }
    let settings = review::settings(svc)?;
    let receipt = if review::must_queue(&settings, &op)? {
        let _write = svc.write_lock.lock();
        review::queue(svc, &op, agent_id, idem.payload)?
    } else {
        let now = Utc::now();
        review::check_budget(svc, &settings, now)?;
        let _write = svc.write_lock.lock();
        let receipt = apply(svc, &op, agent_id)?;
        if !receipt.unchanged {
            svc.meta.record_applied_write(&timestamp(now))?;
        }
        receipt
    };
    let (status, body) = (idem.render)(&receipt);
    svc.meta.store_idempotency(
        &IdempotencyRow {
            key: idem.key.to_string(),
            op_hash: idem.op_hash,
            status,
            body: body.clone(),
        },
        &timestamp(Utc::now()),
    )?;
    Ok((status, body))
}

/// The note `key` names, with its current bytes; an external edit the catalog has not
/// seen yet is recorded first (a `filesystem` revision), so preconditions see it. The
/// bytes are always the version answered (the refresh may record other bytes than were
/// read: an in-place save caught half done is recorded once it is whole); a note that
/// keeps changing under the reads is `VERSION_MOVED`.
fn current(svc: &Service, key: &str) -> Result<(Arc<Note>, Vec<u8>)> {
    let mut note = svc.find_locked(key)?;
    for _ in 0..5 {
        let safe = svc.paths.resolve(&note.path)?;
        let bytes = match std::fs::read(&safe.abs) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                svc.refresh_locked(&note.path)?;
                return Err(Error::not_found(key));
            }
            Err(e) => return Err(Error::internal(format!("cannot read {}: {e}", note.path))),
        };
        if scan::content_hash(&bytes) == note.content_hash {
            return Ok((note, bytes));
        }
        svc.refresh_locked(&note.path)?;
        note = svc.find_locked(&note.note_id)?;
    }
    Err(Error::new(
        Reason::VERSION_MOVED,
        format!("note {} keeps changing on disk; try again", note.slug),
    )
    .with_meta("current_version_id", note.version_id.clone()))
}

fn check_version(note: &Note, version_id: Option<&str>) -> Result<()> {
    match version_id {
        Some(v) if v != note.version_id => Err(Error::new(
            Reason::VERSION_MOVED,
            format!(
                "note {} is at version {}, not {v}",
                note.slug, note.version_id
            ),
        )
        .with_meta("current_version_id", note.version_id.clone())),
        _ => Ok(()),
    }
}

/// Check a target slug for a new or moved note: safe, and creating folders at most one
/// level deep.
fn target_path(svc: &Service, slug: &str) -> Result<crate::vault::path::SafePath> {
    let rel = format!("{slug}.md");
    let safe = svc.paths.resolve(&rel)?;
    if let Some((folder, _)) = slug.rsplit_once('/') {
        if folder.contains('/') && !svc.paths.root.join(folder).is_dir() {
            return Err(Error::invalid_field(
                "folder",
                format!("folder {folder:?} does not exist and the API creates folders only one level deep"),
            ));
        }
    }
    Ok(safe)
}

/// What a write would do: the note it starts from (with the bytes it was read with),
/// where the note ends up, and its new content (`None` for a delete).
pub struct Plan {
    pub from: Option<(Arc<Note>, Vec<u8>)>,
    /// Vault-relative path after the write.
    pub to_rel: String,
    pub bytes: Option<Vec<u8>>,
    /// `create`, `update`, `move`, `delete`.
    pub kind: &'static str,
    pub renamed: bool,
    /// The note id a create restores (a rollback of a deleted note).
    pub restore_id: Option<String>,
}

impl Plan {
    /// The note's text before and after, for a diff preview.
    pub fn texts(&self) -> (String, String) {
        let text = |b: Option<&[u8]>| {
            b.map(|b| crate::vault::markdown::decode(b).0.into_owned())
                .unwrap_or_default()
        };
        (
            text(self.from.as_ref().map(|(_, b)| b.as_slice())),
            text(self.bytes.as_deref()),
        )
    }

    pub fn from_rel(&self) -> Option<&str> {
        self.from.as_ref().map(|(n, _)| n.path.as_str())
    }
}

/// Work out what `op` would do, reading the note and checking every precondition,
/// without writing anything. Used to apply a write and to preview a queued one.
pub fn plan(svc: &Service, op: &Op) -> Result<Plan> {
    match op {
        Op::Create { slug, body, keys } => {
            let safe = target_path(svc, slug)?;
            if svc.catalog.read().get(slug).is_some() || safe.abs.exists() {
                return Err(Error::new(
                    Reason::NAME_COLLISION,
                    format!("a note {slug} already exists"),
                )
                .with_meta("slug", slug.clone()));
            }
            let mut text = body.clone();
            for (key, value) in keys {
                text = frontmatter::set_key(&text, key, value)
                    .map_err(|e| Error::invalid_field(key.clone(), e.to_string()))?;
            }
            Ok(Plan {
                from: None,
                to_rel: safe.rel,
                bytes: Some(text.into_bytes()),
                kind: "create",
                renamed: false,
                restore_id: None,
            })
        }
        Op::Patch {
            note,
            version_id,
            changes,
        } => {
            let (current_note, bytes) = current(svc, note)?;
            check_version(&current_note, version_id.as_deref())?;
            let (text, lossy) = crate::vault::markdown::decode(&bytes);
            if lossy && changes.iter().any(|c| !matches!(c, PatchChange::Folder(_))) {
                return Err(not_utf8(&current_note));
            }
            let mut text = text.into_owned();
            let mut to_rel = current_note.path.clone();
            for change in changes {
                text = match change {
                    PatchChange::SetKey(key, value) => frontmatter::set_key(&text, key, value)
                        .map_err(|e| frontmatter_error(&current_note, e))?,
                    PatchChange::RemoveKey(key) => frontmatter::remove_key(&text, key)
                        .map_err(|e| frontmatter_error(&current_note, e))?,
                    PatchChange::Content(body) => frontmatter::replace_body(&text, body),
                    PatchChange::Folder(f) => {
                        to_rel = move_target(svc, &current_note, &folder_target(f, &current_note))?;
                        text
                    }
                };
            }
            let new_bytes = if lossy {
                bytes.clone()
            } else {
                text.into_bytes()
            };
            let kind = if to_rel != current_note.path {
                "move"
            } else {
                "update"
            };
            Ok(Plan {
                from: Some((current_note, bytes)),
                to_rel,
                bytes: Some(new_bytes),
                kind,
                renamed: false,
                restore_id: None,
            })
        }
        Op::Edit {
            note,
            version_id,
            old_string,
            new_string,
        } => {
            let (current_note, bytes) = current(svc, note)?;
            check_version(&current_note, Some(version_id))?;
            let (text, lossy) = crate::vault::markdown::decode(&bytes);
            if lossy {
                return Err(not_utf8(&current_note));
            }
            let starts: Vec<usize> = text
                .match_indices(old_string.as_str())
                .map(|(i, _)| i)
                .collect();
            match starts.len() {
                0 => {
                    return Err(Error::new(
                        Reason::EDIT_MATCH_NOT_FOUND,
                        format!("old_string does not occur in {}", current_note.slug),
                    ))
                }
                1 => {}
                n => {
                    let lines: Vec<String> = starts
                        .iter()
                        .map(|&i| (text[..i].matches('\n').count() + 1).to_string())
                        .collect();
                    return Err(Error::new(
                        Reason::EDIT_AMBIGUOUS,
                        format!("old_string occurs {n} times in {}", current_note.slug),
                    )
                    .with_meta("candidate_lines", lines.join(",")));
                }
            }
            let new_text = text.replacen(old_string.as_str(), new_string, 1);
            let to_rel = current_note.path.clone();
            Ok(Plan {
                from: Some((current_note, bytes)),
                to_rel,
                bytes: Some(new_text.into_bytes()),
                kind: "update",
                renamed: false,
                restore_id: None,
            })
        }
        Op::Delete { note, version_id } => {
            let (current_note, bytes) = current(svc, note)?;
            check_version(&current_note, version_id.as_deref())?;
            let to_rel = current_note.path.clone();
            Ok(Plan {
                from: Some((current_note, bytes)),
                to_rel,
                bytes: None,
                kind: "delete",
                renamed: false,
                restore_id: None,
            })
        }
        Op::Move {
            note,
            folder,
            version_id,
        } => {
            let (current_note, bytes) = current(svc, note)?;
            check_version(&current_note, version_id.as_deref())?;
            let to_rel = move_target(svc, &current_note, &folder_target(folder, &current_note))?;
            Ok(Plan {
                from: Some((current_note, bytes.clone())),
                to_rel,
                bytes: Some(bytes),
                kind: "move",
                renamed: false,
                restore_id: None,
            })
        }
        Op::Rollback {
            note,
            revision_id,
            version_id,
        } => plan_rollback(svc, note, revision_id, version_id.as_deref()),
        Op::Rename {
            note,
            name,
            version_id,
        } => {
            let (current_note, bytes) = current(svc, note)?;
            check_version(&current_note, version_id.as_deref())?;
            let target = match current_note.slug.rsplit_once('/') {
                Some((folder, _)) => format!("{folder}/{name}"),
                None => name.clone(),
            };
            let to_rel = move_target(svc, &current_note, &target)?;
            let renamed = to_rel != current_note.path;
            Ok(Plan {
                from: Some((current_note, bytes.clone())),
                to_rel,
                bytes: Some(bytes),
                kind: "move",
                renamed,
                restore_id: None,
            })
        }
    }
}

fn plan_rollback(
    svc: &Service,
    key: &str,
    revision_id: &str,
    version_id: Option<&str>,
) -> Result<Plan> {
    let current_note = match current(svc, key) {
        Ok(found) => Some(found),
        Err(e) if e.reason == Reason::NOTE_NOT_FOUND => None,
        Err(e) => return Err(e),
    };
    let note_id = match &current_note {
        Some((n, _)) => n.note_id.clone(),
        None => svc.history_of(key)?.note_id,
    };
    let not_found = |why: &str| {
        Error::new(
            Reason::VERSION_NOT_FOUND,
            format!("revision {revision_id} {why}"),
        )
        .with_meta("revision_id", revision_id)
    };
    let revision = svc
        .meta
        .revision(revision_id)?
        .ok_or_else(|| not_found("does not exist"))?;
    if revision.note_id != note_id {
        return Err(not_found("belongs to another note"));
    }
    if revision.content_hash.is_none() {
        return Err(Error::invalid_field(
            "revision_id",
            "is a delete and has no content; roll back to the revision before it",
        ));
    }
    let content = svc
        .revision_content(&revision)?
        .ok_or_else(|| not_found("has no content in history.git yet"))?;
    match current_note {
        Some((note, bytes)) => {
            check_version(&note, version_id)?;
            let to_rel = note.path.clone();
            Ok(Plan {
                from: Some((note, bytes)),
                to_rel,
                bytes: Some(content),
                kind: "update",
                renamed: false,
                restore_id: None,
            })
        }
        None => {
            let slug = slug_of(&revision.path).to_string();
            let safe = target_path(svc, &slug)?;
            if safe.abs.exists() {
                return Err(Error::new(
                    Reason::NAME_COLLISION,
                    format!("{} exists again; move it away first", revision.path),
                ));
            }
            Ok(Plan {
                from: None,
                to_rel: safe.rel,
                bytes: Some(content),
                kind: "create",
                renamed: false,
                restore_id: Some(note_id),
            })
        }
    }
}

/// Apply `op`: plan it, write it, then rewrite the links to a moved note.
pub(crate) fn apply(svc: &Service, op: &Op, agent_id: &str) -> Result<Receipt> {
    let actor = format!("agent:{agent_id}");
    let plan = plan(svc, op)?;
    let moved_from = plan
        .from
        .as_ref()
        .filter(|(n, _)| n.path != plan.to_rel && plan.bytes.is_some())
        .map(|(n, _)| n.clone());
    // The notes linking to it, found in the link graph before the move changes names.
    let linking: Vec<String> = match &moved_from {
        Some(old) => {
            let catalog = svc.catalog.read();
            let graph = crate::vault::graph::Graph::build(&catalog);
            graph
                .backlinks(old)
                .into_iter()
                .map(|(n, _)| n.slug.clone())
                .collect()
        }
        None => Vec::new(),
    };
    let mut receipt = commit_change(
        svc,
        plan.from.as_ref().map(|(n, b)| (n, b.as_slice())),
        &plan.to_rel,
        plan.bytes.clone(),
        &actor,
        plan.kind,
        plan.restore_id.as_deref(),
    )?;
    receipt.created = plan.from.is_none();
    receipt.renamed = plan.renamed;
    if let Some(old) = moved_from {
        let (updated, failed) = links::rewrite_links_to(svc, &old, &receipt.slug, &actor, &linking);
        receipt.links_updated = updated;
        receipt.links_failed = failed;
        if updated > 0 {
            receipt.committed_seq = svc.committed_seq();
        }
    }
    Ok(receipt)
}

fn not_utf8(note: &Note) -> Error {
    Error::invalid_field(
        "note",
        format!(
            "{} is not valid UTF-8; edit it in an editor that keeps its encoding",
            note.slug
        ),
    )
}

fn frontmatter_error(note: &Note, e: frontmatter::FmError) -> Error {
    Error::invalid_field(
        "frontmatter",
        format!(
            "{}: {e}; fix the frontmatter in an editor, or send a `content` change only",
            note.slug
        ),
    )
}

/// The slug of `note` moved into `folder`.
fn folder_target(folder: &str, note: &Note) -> String {
    let folder = folder.trim_matches('/');
    let name = note.slug.rsplit('/').next().unwrap_or(&note.slug);
    if folder.is_empty() {
        name.to_string()
    } else {
        format!("{folder}/{name}")
    }
}

/// Check the place a note moves to and return its vault-relative path.
fn move_target(svc: &Service, note: &Note, target_slug: &str) -> Result<String> {
    if target_slug == note.slug {
        return Ok(note.path.clone());
    }
    let target = target_path(svc, target_slug)?;
    if svc.catalog.read().get(target_slug).is_some() || target.abs.exists() {
        return Err(Error::new(
            Reason::NAME_COLLISION,
            format!("a note {target_slug} already exists"),
        )
        .with_meta("slug", target_slug));
    }
    Ok(target.rel)
}

/// Apply one change to one note: `from` is the note and the bytes it was read with
/// (`None` for a create), `to_rel` the path it ends at, `bytes` its new content (`None`
/// for a delete, which moves the file to `.trash/`). Writes the file, commits history,
/// records the revision and updates the catalog.
pub(crate) fn commit_change(
    svc: &Service,
    from: Option<(&Arc<Note>, &[u8])>,
    to_rel: &str,
    bytes: Option<Vec<u8>>,
    actor: &str,
    kind: &str,
    new_id: Option<&str>,
) -> Result<Receipt> {
    let root = &svc.paths.root;
    let same_place = from.is_none_or(|(n, _)| n.path == to_rel);
    // Identical content in the same place: no new version, no commit.
    if let (Some((note, old)), Some(new)) = (from, &bytes) {
        if same_place && old == new.as_slice() {
            return Ok(Receipt {
                unchanged: true,
                ..receipt_of(note, svc.committed_seq(), false)
            });
        }
    }
    // A note whose bytes are not kept (over 10 MiB) may still be waiting for a history
    // commit that reads the file late: let it read the version it records first.
    if from.is_some_and(|(n, _)| n.content.is_none()) {
        svc.history.flush(std::time::Duration::from_secs(30));
    }
    let expect_old = from.map(|(n, _)| Expect::Hash(n.content_hash.clone()));
    let mut history_changes = Vec::new();
    match (&bytes, from) {
        (Some(new), _) if same_place => {
            let expect = expect_old.clone().unwrap_or(Expect::Absent);
            fsio::atomic_write(&root.join(to_rel), new, &expect)?;
        }
        (Some(new), Some((note, old))) => {
            // A move (maybe with new content): rename first, then rewrite in place.
            let to = root.join(to_rel);
            fsio::atomic_move(
                &root.join(&note.path),
                &to,
                &Expect::Hash(note.content_hash.clone()),
            )?;
            if new.as_slice() != old {
                fsio::atomic_write(&to, new, &Expect::Hash(note.content_hash.clone()))?;
            }
            history_changes.push(Change {
                path: note.path.clone(),
                content: None,
            });
        }
        (None, Some((note, _))) => {
            let trash = trash_path(root, &note.path);
            fsio::atomic_move(
                &root.join(&note.path),
                &trash,
                &Expect::Hash(note.content_hash.clone()),
            )?;
        }
        (Some(_), None) | (None, None) => unreachable!("a create always has content"),
    }
    // One copy of the new bytes serves the history commit and the catalog.
    let shared = bytes.as_ref().map(|new| Arc::new(new.clone()));
    if let Some(new) = &shared {
        history_changes.push(Change {
            path: to_rel.to_string(),
            content: Some(Content::Bytes(new.clone())),
        });
    } else {
        history_changes.push(Change {
            path: to_rel.to_string(),
            content: None,
        });
    }

    let now = Utc::now();
    let seq = svc.committed_seq() + 1;
    let version_id = uuid::Uuid::now_v7().to_string();
    let note_id = from
        .map(|(n, _)| n.note_id.clone())
        .or_else(|| new_id.map(str::to_string))
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let history = svc.history.commit(CommitRequest {
        subject: format!("{kind} {}", slug_of(to_rel)),
        actor: actor.to_string(),
        changes: history_changes,
        trailers: vec![
            ("Notevault-Seq".into(), seq.to_string()),
            ("Notevault-Version".into(), version_id.clone()),
            ("Notevault-Note".into(), note_id.clone()),
        ],
        allow_empty: true,
    });
    let (commit_id, flow_back_error) = match history.recv() {
        Ok(Ok(id)) => (id, None),
        Ok(Err(e)) => (None, Some(format!("history commit failed: {}", e.message))),
        Err(_) => (
            None,
            Some("history commit failed: the history thread stopped".to_string()),
        ),
    };

    let content_hash = bytes.as_deref().map(scan::content_hash);
    let revision = RevisionRow {
        seq,
        version_id: version_id.clone(),
        note_id: note_id.clone(),
        path: to_rel.to_string(),
        prev_version_id: from.map(|(n, _)| n.version_id.clone()),
        content_hash: content_hash.clone(),
        actor: actor.to_string(),
        kind: kind.to_string(),
        created_at: timestamp(now),
        commit_id,
    };
    let mut catalog = svc.catalog.write();
    let note = match &bytes {
        Some(new) => {
            let created_at = from.map(|(n, _)| n.created_at).unwrap_or(now);
            let mtime = std::fs::metadata(root.join(to_rel))
                .and_then(|m| m.modified())
                .unwrap_or_else(|_| now.into());
            let observed = Observed {
                rel: to_rel.to_string(),
                size: new.len() as u64,
                mtime,
                created: created_at.into(),
                content_hash: content_hash.clone().unwrap_or_default(),
                facts: crate::vault::markdown::facts(new),
                content: shared.and_then(scan::keep_content),
            };
            let note = reconcile::note_from(
                observed,
                note_id.clone(),
                version_id.clone(),
                created_at,
                now,
            );
            let row = NoteRow {
                note_id: note_id.clone(),
                path: note.path.clone(),
                version_id: version_id.clone(),
                content_hash: note.content_hash.clone(),
                created_at: timestamp(created_at),
                observed_at: timestamp(now),
            };
            svc.meta.record(&[revision], &[row], &[])?;
            if let Some((old, _)) = from {
                if old.path != note.path {
                    catalog.remove(&old.slug);
                }
            }
            catalog.insert(note);
            catalog.get(slug_of(to_rel)).cloned()
        }
        None => {
            svc.meta
                .record(&[revision], &[], std::slice::from_ref(&note_id))?;
            catalog.remove(slug_of(to_rel))
        }
    };
    svc.set_committed_seq(seq);
    drop(catalog);
    let note = note.ok_or_else(|| Error::internal("the catalog lost a note it just recorded"))?;
    if bytes.is_some() {
        svc.index.upsert(note.clone(), seq);
    } else {
        svc.index.remove(&note.note_id, seq);
    }
    let mut receipt = receipt_of(&note, seq, false);
    receipt.version_id = version_id;
    receipt.content_hash = content_hash.unwrap_or_default();
    receipt.flow_back_error = flow_back_error;
    if bytes.is_none() {
        receipt.note = None;
    }
    Ok(receipt)
}

fn receipt_of(note: &Arc<Note>, seq: i64, created: bool) -> Receipt {
    Receipt {
        status: ReceiptStatus::Applied,
        slug: note.slug.clone(),
        note_id: note.note_id.clone(),
        version_id: note.version_id.clone(),
        content_hash: note.content_hash.clone(),
        committed_seq: seq,
        note: Some(note.clone()),
        renamed: false,
        unchanged: false,
        links_updated: 0,
        links_failed: Vec::new(),
        flow_back_error: None,
        pending_id: None,
        created,
    }
}

/// Where a deleted note goes: `.trash/<path>`, Obsidian's convention, with a numeric
/// suffix when a note of that name was trashed before.
fn trash_path(root: &std::path::Path, rel: &str) -> std::path::PathBuf {
    let base = root.join(".trash");
    let first = base.join(rel);
    if !first.exists() {
        return first;
    }
    let stem = rel.strip_suffix(".md").unwrap_or(rel);
    (2..)
        .map(|i| base.join(format!("{stem} {i}.md")))
        .find(|p| !p.exists())
        .unwrap_or(first)
}
