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
pub mod receipt;
pub mod recover;
pub mod review;

pub use receipt::{Intent, NoteFacts, Receipt, ReceiptStatus};

use std::sync::Arc;

use chrono::Utc;
use serde::{Deserialize, Serialize};

use crate::clock::timestamp;
use crate::error::{Error, Reason, Result};
use crate::record::crash_point;
use crate::state::State;
use crate::vault::catalog::Note;
use crate::vault::frontmatter::{self, FmValue};
use crate::vault::fsio::{self, Expect};
use crate::vault::path::slug_of;
use crate::vault::scan::{self, Observed};

/// One change a PATCH asks for (in mask order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
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

/// A write as the pipeline takes it: the operation and the agent that asks for it.
/// A queued write keeps it (as JSON) and an approval applies it, through the same door
/// as a direct write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub op: Op,
    pub agent_id: String,
}

/// The idempotency of one request: its key and the hash of what it means (the caller
/// decides what makes two requests the same).
pub struct Idempotency<'a> {
    pub key: &'a str,
    pub op_hash: String,
}

/// The answer to a submitted write.
#[derive(Debug, Clone)]
pub enum Submitted {
    /// A receipt, new or replayed (the caller renders it the same way each time).
    Receipt(Box<Receipt>),
    /// A replay of a receipt stored rendered, by a version before receipts were stored
    /// as such: status and body as they were answered.
    Rendered(u16, String),
}

/// The key of a write being applied, which its intent is recorded under.
#[derive(Debug, Clone, Copy)]
pub struct IntentKey<'a> {
    pub key: &'a str,
    pub op_hash: &'a str,
}

/// Submit a write: replay it if this key already ran this operation, refuse a key reused
/// for another operation, else apply it (or queue it) and store its receipt under the key.
pub fn submit(svc: &State, request: Request, idem: Idempotency<'_>) -> Result<Submitted> {
    let key_lock = svc.key_locks.get(idem.key);
    let _key_guard = key_lock.lock();
    if let Some(row) = svc.meta.idempotency(idem.key)? {
        if row.op_hash != idem.op_hash {
            return Err(Error::new(
                Reason::IDEMPOTENCY_KEY_REUSED,
                "this Idempotency-Key was already used for a different request",
            )
            .with_meta("idempotency_key", idem.key));
        }
        return match row.receipt {
            Some(json) => serde_json::from_str(&json)
                .map(|r| Submitted::Receipt(Box::new(r)))
                .map_err(|e| Error::internal(format!("a stored receipt is corrupt: {e}"))),
            None => Ok(Submitted::Rendered(row.status, row.body)),
        };
    }
    let settings = review::settings(svc)?;
    let intent = IntentKey {
        key: idem.key,
        op_hash: &idem.op_hash,
    };
    let applied = if review::must_queue(&settings, &request.op)? {
        let _write = svc.write_lock.lock();
        review::queue(svc, &request)
    } else {
        apply_now(svc, &settings, &request, Some(intent))
    };
    let receipt = match applied {
        Ok(receipt) => receipt,
        Err(e) => {
            // Nothing of it is to be resolved later: the error is the answer.
            if let Err(forget) = svc.meta.forget_intent(idem.key) {
                tracing::warn!(error = %forget.message, "cannot forget a write intent");
            }
            return Err(e);
        }
    };
    crash_point(svc, "before-receipt");
    store_receipt(svc, intent, &receipt)?;
    Ok(Submitted::Receipt(Box::new(receipt)))
}

/// Apply a request now, spending the write budget: the one door of a direct write and of
/// an approved one. Past the budget it is `WRITE_BUDGET_EXCEEDED` and nothing changes.
pub(crate) fn apply_now(
    svc: &State,
    settings: &review::WriteSettings,
    request: &Request,
    intent: Option<IntentKey<'_>>,
) -> Result<Receipt> {
    let now = Utc::now();
    review::check_budget(svc, settings, now)?;
    let _write = svc.write_lock.lock();
    let receipt = apply(svc, &request.op, &request.agent_id, intent)?;
    if !receipt.unchanged {
        svc.meta.record_applied_write(&timestamp(now))?;
    }
    Ok(receipt)
}

/// Keep `receipt` under its key for replays, and let go of the key's intent, in one
/// transaction.
pub(crate) fn store_receipt(svc: &State, key: IntentKey<'_>, receipt: &Receipt) -> Result<()> {
    let json = serde_json::to_string(receipt)
        .map_err(|e| Error::internal(format!("cannot store a receipt: {e}")))?;
    svc.meta
        .store_receipt(key.key, key.op_hash, &json, &timestamp(Utc::now()))
}

/// The note `key` names, with its current bytes; an external edit the catalog has not
/// seen yet is recorded first (a `filesystem` revision), so preconditions see it. The
/// bytes are always the version answered (the refresh may record other bytes than were
/// read: an in-place save caught half done is recorded once it is whole); a note that
/// keeps changing under the reads is `VERSION_MOVED`.
fn current(svc: &State, key: &str) -> Result<(Arc<Note>, Vec<u8>)> {
    crate::record::refresh::read_agreeing(svc, key, crate::record::refresh::Lock::Held)?.map_err(
        |note| {
            Error::new(
                Reason::VERSION_MOVED,
                format!("note {} keeps changing on disk; try again", note.slug),
            )
            .with_meta("current_version_id", note.version_id.clone())
        },
    )
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

/// Check a target slug for a new or moved note: safe, a name the API may create, and
/// creating folders at most one level deep.
fn target_path(svc: &State, slug: &str) -> Result<crate::vault::path::SafePath> {
    let rel = format!("{slug}.md");
    let safe = svc.paths.resolve_new(&rel)?;
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
pub fn plan(svc: &State, op: &Op) -> Result<Plan> {
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
    svc: &State,
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
        None => crate::queries::history::history_of(&svc, key)?.note_id,
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
    let content = crate::queries::history::revision_content(svc, &revision)?
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

/// Apply `op`: plan it, write it, then rewrite the links to a moved note. With `intent`,
/// the write is recorded under that key before the file changes (see [`Intent`]).
pub(crate) fn apply(
    svc: &State,
    op: &Op,
    agent_id: &str,
    intent: Option<IntentKey<'_>>,
) -> Result<Receipt> {
    let actor = format!("agent:{agent_id}");
    let plan = plan(svc, op)?;
    let moved_from = plan
        .from
        .as_ref()
        .filter(|(n, _)| n.path != plan.to_rel && plan.bytes.is_some())
        .map(|(n, _)| n.clone());
    // The notes linking to it, found in the link graph before the move changes names.
    let linking = match &moved_from {
        Some(old) => linking_to(svc, old),
        None => Vec::new(),
    };
    let mut receipt = commit_change(
        svc,
        Change {
            from: plan.from.as_ref().map(|(n, b)| (n, b.as_slice())),
            to_rel: &plan.to_rel,
            bytes: plan.bytes.clone(),
            actor: &actor,
            kind: plan.kind,
            new_id: plan.restore_id.as_deref(),
            renamed: plan.renamed,
        },
        intent,
    )?;
    if let Some(old) = moved_from {
        rewrite_links(svc, &mut receipt, &old, &actor, &linking);
    }
    Ok(receipt)
}

/// The slugs of the notes whose links resolve to `note`.
pub(crate) fn linking_to(svc: &State, note: &Note) -> Vec<String> {
    let catalog = svc.catalog.read();
    let graph = crate::vault::graph::Graph::build(&catalog);
    graph
        .backlinks(note)
        .into_iter()
        .map(|(n, _)| n.slug.clone())
        .collect()
}

/// Rewrite the links of `linking` that pointed at `old` to the receipt's note.
pub(crate) fn rewrite_links(
    svc: &State,
    receipt: &mut Receipt,
    old: &Note,
    actor: &str,
    linking: &[String],
) {
    let (updated, failed) = links::rewrite_links_to(svc, old, &receipt.slug, actor, linking);
    receipt.links_updated = updated;
    receipt.links_failed = failed;
    if updated > 0 {
        receipt.committed_seq = svc.committed_seq();
    }
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
fn move_target(svc: &State, note: &Note, target_slug: &str) -> Result<String> {
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

/// One change to one note, as the pipeline applies it.
pub(crate) struct Change<'a> {
    /// The note and the bytes it was read with (`None` for a create).
    pub from: Option<(&'a Arc<Note>, &'a [u8])>,
    /// The path it ends at.
    pub to_rel: &'a str,
    /// Its new content (`None` for a delete, which moves the file to `.trash/`).
    pub bytes: Option<Vec<u8>>,
    pub actor: &'a str,
    /// `create`, `update`, `move`, `delete`.
    pub kind: &'a str,
    /// The note id a create restores (a rollback of a deleted note).
    pub new_id: Option<&'a str>,
    /// The note got a new name in its folder (the receipt says so).
    pub renamed: bool,
}

/// The identity a recorded change gets.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub note_id: String,
    pub version_id: String,
}

/// Apply one change: write the file (atomically, checking that the file is still the
/// version that was read), then [`record`] it. With `intent`, the write's intent is stored
/// under its key before the folder changes.
pub(crate) fn commit_change(
    svc: &State,
    change: Change<'_>,
    intent: Option<IntentKey<'_>>,
) -> Result<Receipt> {
    let root = &svc.paths.root;
    let Change {
        from,
        to_rel,
        bytes,
        ..
    } = &change;
    let (from, to_rel) = (*from, *to_rel);
    let same_place = from.is_none_or(|(n, _)| n.path == to_rel);
    // Identical content in the same place: no new version, no commit.
    if let (Some((note, old)), Some(new)) = (from, bytes) {
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
    let identity = Identity {
        note_id: from
            .map(|(n, _)| n.note_id.clone())
            .or_else(|| change.new_id.map(str::to_string))
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
        version_id: uuid::Uuid::now_v7().to_string(),
    };
    if let Some(key) = intent {
        let recorded = Intent {
            actor: change.actor.to_string(),
            kind: change.kind.to_string(),
            note_id: identity.note_id.clone(),
            version_id: identity.version_id.clone(),
            from_path: from.map(|(n, _)| n.path.clone()),
            from_version: from.map(|(n, _)| n.version_id.clone()),
            to_rel: to_rel.to_string(),
            content_hash: bytes.as_deref().map(scan::content_hash),
            renamed: change.renamed,
        };
        let json = serde_json::to_string(&recorded)
            .map_err(|e| Error::internal(format!("cannot record a write intent: {e}")))?;
        svc.meta.store_intent(key.key, key.op_hash, &json)?;
        crash_point(svc, "before-file");
    }
    let expect_old = from.map(|(n, _)| Expect::Hash(n.content_hash.clone()));
    match (bytes, from) {
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
    crash_point(svc, "after-file");
    let Change {
        actor,
        kind,
        renamed,
        bytes,
        ..
    } = change;
    record_change(
        svc,
        Recorded {
            from: from.map(|(n, _)| n),
            to_rel,
            bytes: bytes.map(Arc::new),
            actor,
            kind,
            renamed,
        },
        identity,
    )
}

/// A change that is on disk, to be recorded.
pub(crate) struct Recorded<'a> {
    pub from: Option<&'a Arc<Note>>,
    pub to_rel: &'a str,
    /// The bytes now at `to_rel` (`None` for a delete).
    pub bytes: Option<Arc<Vec<u8>>>,
    pub actor: &'a str,
    pub kind: &'a str,
    pub renamed: bool,
}

/// Record a write whose change is on disk, through the one recorder (durably: its
/// history commit is written first), and make its receipt. The caller holds the write
/// lock.
pub(crate) fn record_change(
    svc: &State,
    change: Recorded<'_>,
    identity: Identity,
) -> Result<Receipt> {
    let Recorded {
        from,
        to_rel,
        bytes,
        actor,
        kind,
        renamed,
    } = change;
    let now = Utc::now();
    let created_at = from.map_or(now, |n| n.created_at);
    let to = bytes.as_ref().map(|new| {
        let mtime = std::fs::metadata(svc.paths.root.join(to_rel))
            .and_then(|m| m.modified())
            .unwrap_or_else(|_| now.into());
        Observed {
            rel: to_rel.to_string(),
            size: new.len() as u64,
            mtime,
            created: created_at.into(),
            content_hash: crate::vault::content_hash(new),
            facts: crate::vault::markdown::facts(new),
            content: scan::keep_content(new.clone()),
        }
    });
    let Identity {
        note_id,
        version_id,
    } = identity;
    let recorded = crate::record::record(
        svc,
        crate::record::Batch {
            actor,
            subject: format!("{kind} {}", slug_of(to_rel)),
            entries: vec![crate::record::Entry {
                from: from.cloned(),
                to,
                bytes,
                kind: kind.to_string(),
                note_id,
                version_id,
                created_at,
            }],
            whole_vault: None,
            durable: true,
        },
    )?;
    let entry = recorded
        .entries
        .into_iter()
        .next()
        .ok_or_else(|| Error::internal("the recorder recorded nothing"))?;
    let deleted = entry.revision.content_hash.is_none();
    let mut receipt = receipt_of(&entry.note, entry.revision.seq, from.is_none());
    receipt.version_id = entry.revision.version_id;
    receipt.content_hash = entry.revision.content_hash.unwrap_or_default();
    receipt.flow_back_error = recorded.history_problem;
    receipt.renamed = renamed;
    if deleted {
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
        note: Some(NoteFacts::from(note.as_ref())),
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
