//! Folder operations in the write pipeline: create an empty folder, move or rename a
//! folder with everything in it, delete an empty folder or move a folder's files to
//! `.trash/`. They come through the same door as a note's write (idempotency, the review
//! queue, the budget) and are recorded by the one recorder: one history commit per
//! operation, named by a `Notevault-Folder` trailer, with one revision per note that
//! moved or went to the trash (an empty folder made or removed is a commit without
//! revisions: git keeps no empty folders, the trailer says what happened).
//!
//! The folder itself changes in one step (`mkdir`, one `rename` of the whole folder,
//! `rmdir`), so a crash leaves it before or after, never half moved. Like a note's write,
//! the operation stores its intent ([`FolderIntent`]) under its `Idempotency-Key` before
//! that step; the next start resolves it ([`resolve`]): one that landed is recorded as
//! this operation if the recorder had not done it, and its receipt stored, so the retry
//! gets the receipt instead of `FOLDER_NOT_FOUND` or `NAME_COLLISION`. Links to the notes of a moved folder are rewritten afterwards, as for a note's
//! move, each linking note its own revision.
//!
//! The API creates folders at most one level below the vault's top (`a/b`); deeper
//! folders that exist on disk are still served, moved and deleted.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Error, Reason, Result};
use crate::state::{State, WriteLock};
use crate::vault::fsio;
use crate::vault::note::Note;
use crate::vault::path::{slug_of, SafePath};

use super::{links, FolderFacts, FolderIntent, IntentKey, Op, Receipt, ReceiptStatus, Subject};

/// How deep the API makes folders: `a/b`, not `a/b/c`.
pub const MAX_DEPTH: usize = 2;

/// What a folder operation will do, worked out without changing anything.
pub struct FolderPlan {
    /// The folder the operation is on (for a create: the one it makes).
    pub path: String,
    /// Where it goes (a move) or where its files go (a delete with `trash_notes`).
    pub to: Option<String>,
    /// The notes inside it, at any depth.
    pub notes: Vec<Arc<Note>>,
}

impl FolderPlan {
    /// A readable account for a reviewer: what happens, and each note's path before and
    /// after.
    pub fn preview(&self, op: &Op) -> String {
        let mut out = match op {
            Op::CreateFolder { .. } => format!("create folder {}\n", self.path),
            Op::MoveFolder { .. } => format!(
                "move folder {} -> {} ({} notes; links to them are rewritten)\n",
                self.path,
                self.to.as_deref().unwrap_or_default(),
                self.notes.len()
            ),
            Op::DeleteFolder { .. } => match &self.to {
                Some(trash) => format!(
                    "delete folder {} ({} notes move to {trash})\n",
                    self.path,
                    self.notes.len()
                ),
                None => format!("delete empty folder {}\n", self.path),
            },
            _ => String::new(),
        };
        for note in &self.notes {
            match &self.to {
                Some(to) => out.push_str(&format!(
                    "  {} -> {}\n",
                    note.path,
                    moved_path(&note.path, &self.path, to)
                )),
                None => out.push_str(&format!("  {}\n", note.path)),
            }
        }
        out
    }
}

/// `path` (inside `from`) once `from` is at `to`.
fn moved_path(path: &str, from: &str, to: &str) -> String {
    match path
        .strip_prefix(from)
        .and_then(|rest| rest.strip_prefix('/'))
    {
        Some(rest) => format!("{to}/{rest}"),
        None => path.to_string(),
    }
}

/// A folder path as the API names it: `/`-separated, no trailing `/` (one is taken
/// off), not the vault itself.
fn clean(field: &str, path: &str) -> Result<String> {
    let path = path.trim_end_matches('/');
    if path.is_empty() {
        return Err(Error::invalid_field(
            field,
            "names the vault itself; give a folder path such as `projects/alpha`",
        ));
    }
    Ok(path.to_string())
}

/// An existing folder: safe (the one path-safety function) and a folder on disk.
fn existing(state: &State, field: &str, path: &str) -> Result<SafePath> {
    let path = clean(field, path)?;
    let safe = state.paths.resolve(&path)?;
    if !safe.abs.is_dir() {
        return Err(
            Error::new(Reason::FOLDER_NOT_FOUND, format!("no folder {path}"))
                .with_meta("path", path),
        );
    }
    Ok(safe)
}

/// A folder the API is about to make: a name it may create, at most [`MAX_DEPTH`]
/// deep, its parent existing, nothing there yet.
fn new_folder(state: &State, field: &str, path: &str) -> Result<SafePath> {
    let path = clean(field, path)?;
    let safe = state.paths.resolve_new(&path)?;
    if path.split('/').count() > MAX_DEPTH {
        return Err(Error::invalid_field(
            field,
            format!("{path:?} is deeper than one nested level: the API makes folders such as `a` or `a/b`, not `a/b/c`"),
        ));
    }
    if let Some((parent, _)) = path.rsplit_once('/') {
        if !state.paths.root.join(parent).is_dir() {
            return Err(Error::new(
                Reason::FOLDER_NOT_FOUND,
                format!("the parent folder {parent} does not exist; create it first"),
            )
            .with_meta("path", parent.to_string()));
        }
    }
    if std::fs::symlink_metadata(&safe.abs).is_ok() {
        return Err(
            Error::new(Reason::NAME_COLLISION, format!("{path} already exists"))
                .with_meta("path", path),
        );
    }
    Ok(safe)
}

/// The notes inside the folder `path`, at any depth.
fn notes_in(state: &State, path: &str) -> Vec<Arc<Note>> {
    let prefix = format!("{path}/");
    state
        .catalog
        .read()
        .iter()
        .filter(|n| n.path.starts_with(&prefix))
        .cloned()
        .collect()
}

/// Where a folder's files go in the trash: `.trash/<path>`, with a numeric suffix when
/// that was taken by an earlier delete.
fn trash_folder(state: &State, path: &str) -> String {
    let first = format!(".trash/{path}");
    if !state.paths.root.join(&first).exists() {
        return first;
    }
    (2..)
        .map(|i| format!(".trash/{path} {i}"))
        .find(|p| !state.paths.root.join(p).exists())
        .unwrap_or(first)
}

/// Work out `op` (a folder operation) without changing anything.
pub fn plan(state: &State, op: &Op) -> Result<FolderPlan> {
    match op {
        Op::CreateFolder { path } => {
            let safe = new_folder(state, "path", path)?;
            Ok(FolderPlan {
                path: safe.rel,
                to: None,
                notes: Vec::new(),
            })
        }
        Op::MoveFolder { path, to } => {
            let from = existing(state, "path", path)?;
            let target = clean("to", to)?;
            if target == from.rel || target.starts_with(&format!("{}/", from.rel)) {
                return Err(Error::invalid_field(
                    "to",
                    format!("{target:?} is the folder itself or inside it"),
                ));
            }
            let dest = new_folder(state, "to", &target)?;
            Ok(FolderPlan {
                notes: notes_in(state, &from.rel),
                path: from.rel,
                to: Some(dest.rel),
            })
        }
        Op::DeleteFolder { path, trash_notes } => {
            let folder = existing(state, "path", path)?;
            let empty = std::fs::read_dir(&folder.abs)
                .map_err(|e| {
                    Error::internal(format!("cannot read folder {}: {e}", folder.rel)).with_cause(e)
                })?
                .next()
                .is_none();
            let notes = notes_in(state, &folder.rel);
            if !empty && !trash_notes {
                return Err(Error::invalid_field(
                    "trash_notes",
                    format!(
                        "folder {} is not empty ({} notes); send `trash_notes: true` to move what it holds to .trash/",
                        folder.rel,
                        notes.len()
                    ),
                ));
            }
            Ok(FolderPlan {
                to: (!empty).then(|| trash_folder(state, &folder.rel)),
                path: folder.rel,
                notes,
            })
        }
        _ => Err(Error::internal("not a folder operation")),
    }
}

/// The notes linking to each note a move takes along, from the link graph before the
/// move (by note id).
fn linking_of(state: &State, op: &Op, plan: &FolderPlan) -> HashMap<String, Vec<String>> {
    if !matches!(op, Op::MoveFolder { .. }) || plan.to.is_none() || plan.notes.is_empty() {
        return HashMap::new();
    }
    let catalog = state.catalog.read();
    let graph = crate::vault::graph::Graph::build(&catalog);
    plan.notes
        .iter()
        .map(|n| {
            let from: Vec<String> = graph
                .backlinks(n)
                .into_iter()
                .map(|(l, _)| l.slug().to_string())
                .collect();
            (n.note_id.clone(), from)
        })
        .collect()
}

fn verb_of(op: &Op) -> &'static str {
    match op {
        Op::CreateFolder { .. } => "create",
        Op::MoveFolder { .. } => "move",
        _ => "delete",
    }
}

/// Apply a folder operation (under the write lock, `write`): its intent (with
/// `intent`), the one step on disk, then one recorded batch, then the link rewrites of
/// a move.
pub(crate) fn apply(
    state: &State,
    write: &WriteLock<'_>,
    op: &Op,
    actor: &str,
    intent: Option<IntentKey<'_>>,
) -> Result<Receipt> {
    let plan = plan(state, op)?;
    let root = &state.paths.root;
    let linking = linking_of(state, op, &plan);
    // The attachments inside it move or go to the trash with it.
    let inside: Vec<Arc<crate::vault::attachments::Attachment>> = {
        let prefix = format!("{}/", plan.path);
        state
            .attachments
            .read()
            .iter()
            .filter(|a| a.path.starts_with(&prefix))
            .cloned()
            .collect()
    };
    // Each note's revision id, chosen before the step: a start after a crash tells by
    // it whether the operation was recorded.
    let versions: Vec<String> = plan
        .notes
        .iter()
        .map(|_| uuid::Uuid::now_v7().to_string())
        .collect();
    if let Some(key) = intent {
        let recorded = FolderIntent {
            actor: actor.to_string(),
            folder_op: op.clone(),
            path: plan.path.clone(),
            to: plan.to.clone(),
            notes: plan
                .notes
                .iter()
                .zip(&versions)
                .map(|(n, v)| (n.note_id.clone(), v.clone()))
                .collect(),
        };
        let json = serde_json::to_string(&recorded).map_err(|e| {
            Error::internal(format!("cannot record a write intent: {e}")).with_cause(e)
        })?;
        state.meta.store_intent(key.key, key.op_hash, &json)?;
        crate::record::crash_point(state, "before-file");
    }
    match (op, &plan.to) {
        (Op::CreateFolder { .. }, _) => fsio::create_folder(&root.join(&plan.path))?,
        (_, Some(to)) => fsio::move_folder(&root.join(&plan.path), &root.join(to))?,
        (_, None) => fsio::remove_empty_folder(&root.join(&plan.path))?,
    }
    crate::record::crash_point(state, "after-file");
    finish(state, write, op, &plan, actor, &versions, &linking, &inside)
}

/// Record a folder operation whose step on disk is done: one entry per note that moved
/// (observed at its new place) or went to the trash, each attachment inside, then the
/// link rewrites of a move. Answers its receipt.
#[allow(
    clippy::too_many_arguments,
    reason = "the write lock is one more argument: the proof it is held"
)]
fn finish(
    state: &State,
    write: &WriteLock<'_>,
    op: &Op,
    plan: &FolderPlan,
    actor: &str,
    versions: &[String],
    linking: &HashMap<String, Vec<String>>,
    inside: &[Arc<crate::vault::attachments::Attachment>],
) -> Result<Receipt> {
    let root = &state.paths.root;
    let verb = verb_of(op);
    let mut entries = Vec::new();
    for (note, version_id) in plan.notes.iter().zip(versions) {
        let to = match (op, &plan.to) {
            (Op::MoveFolder { .. }, Some(to)) => {
                let rel = moved_path(&note.path, &plan.path, to);
                match crate::vault::observe::observe(root, &rel) {
                    Ok(observed) => Some(observed),
                    // Unreadable where it went: the next reconcile of the folder finds it.
                    Err(e) => {
                        tracing::warn!(path = %rel, error = %e, "a moved note could not be read; the watcher records it");
                        continue;
                    }
                }
            }
            _ => None,
        };
        entries.push(crate::record::Entry {
            kind: if to.is_some() { "move" } else { "delete" }.to_string(),
            from: Some(note.clone()),
            to,
            bytes: None,
            note_id: note.note_id.clone(),
            version_id: version_id.clone(),
            created_at: note.created_at,
        });
    }
    let mut files = Vec::new();
    for a in inside {
        if let (Op::MoveFolder { .. }, Some(to)) = (op, &plan.to) {
            let rel = moved_path(&a.path, &plan.path, to);
            // A rename keeps the file's stamp: its facts stand without a read.
            let known = crate::vault::attachments::Attachment {
                path: rel.clone(),
                ..(**a).clone()
            };
            match crate::vault::attachments::observe(root, &rel, Some(&known)) {
                Ok(now) => files.push(crate::record::FileEntry {
                    path: rel,
                    to: Some(now),
                    kind: "create".into(),
                }),
                Err(e) => {
                    tracing::warn!(path = %rel, error = %e, "a moved attachment could not be read; the watcher records it");
                }
            }
        }
        files.push(crate::record::FileEntry {
            path: a.path.clone(),
            to: None,
            kind: "delete".into(),
        });
    }
    let mark = match &plan.to {
        Some(to) if verb == "move" => format!("move {} -> {to}", plan.path),
        Some(to) => format!("delete {} -> {to}", plan.path),
        None => format!("{verb} {}", plan.path),
    };
    let recorded = crate::record::record(
        state,
        write,
        crate::record::Batch {
            actor,
            subject: format!("{verb} folder {}", plan.path),
            entries,
            files,
            whole_vault: None,
            durable: true,
            marks: vec![("Notevault-Folder".to_string(), mark)],
        },
    )?;
    let mut receipt = receipt_of(state, op, plan, recorded.history_problem);
    // Links to the moved notes, from notes outside the folder and inside it (a linking
    // note that moved along is found at its new slug).
    if let (Op::MoveFolder { .. }, Some(to)) = (op, &plan.to) {
        let new_slug_of = |slug: &str| {
            let path = format!("{slug}.md");
            slug_of(&moved_path(&path, &plan.path, to)).to_string()
        };
        for note in &plan.notes {
            let Some(from) = linking.get(&note.note_id).filter(|l| !l.is_empty()) else {
                continue;
            };
            let from: Vec<String> = from.iter().map(|s| new_slug_of(s)).collect();
            let new_slug = new_slug_of(note.slug());
            let (updated, failed) =
                links::rewrite_links_to(state, write, note, &new_slug, actor, &from);
            receipt.links_updated += updated;
            receipt.links_failed.extend(failed);
        }
        receipt.committed_seq = state.committed_seq();
    }
    Ok(receipt)
}

/// The receipt of a folder operation as planned (before its link rewrites).
fn receipt_of(state: &State, op: &Op, plan: &FolderPlan, history: Option<String>) -> Receipt {
    let verb = verb_of(op);
    Receipt {
        status: ReceiptStatus::Applied,
        slug: plan
            .to
            .clone()
            .filter(|_| verb == "move")
            .unwrap_or_else(|| plan.path.clone()),
        note_id: String::new(),
        version_id: String::new(),
        content_hash: String::new(),
        committed_seq: state.committed_seq(),
        renamed: false,
        unchanged: false,
        links_updated: 0,
        links_failed: Vec::new(),
        flow_back_error: history,
        pending_id: None,
        created: verb == "create",
        subject: Subject::Folder(FolderFacts {
            path: match (verb, &plan.to) {
                ("move", Some(to)) => to.clone(),
                _ => plan.path.clone(),
            },
            from_path: (verb == "move").then(|| plan.path.clone()),
            notes: plan.notes.len(),
            trashed_to: plan.to.clone().filter(|_| verb == "delete"),
        }),
    }
}

/// At start, the intent of a folder operation the daemon stopped in (the caller holds
/// the write lock; the catalog holds the notes as stored). One that landed answers its
/// receipt, recorded now as that operation (and its links rewritten) when the stop came
/// before the recorder, and what the scan found of it is taken out of `changed` and
/// `removed`; one that did not land answers `None` (the retry applies it).
pub(crate) fn resolve(
    state: &State,
    write: &WriteLock<'_>,
    intent: &FolderIntent,
    changed: &mut Vec<crate::vault::observe::Observed>,
    removed: &mut Vec<String>,
) -> Result<Option<Receipt>> {
    let root = &state.paths.root;
    let gone = |p: &str| std::fs::symlink_metadata(root.join(p)).is_err();
    let there = |p: &str| root.join(p).is_dir();
    let op = &intent.folder_op;
    let landed = match op {
        Op::CreateFolder { .. } => there(&intent.path),
        Op::MoveFolder { .. } => gone(&intent.path) && intent.to.as_deref().is_some_and(there),
        Op::DeleteFolder { .. } => gone(&intent.path) && intent.to.as_deref().is_none_or(there),
        _ => false,
    };
    if !landed {
        return Ok(None);
    }
    // The batch is one transaction: its first revision tells whether it was recorded.
    let recorded = match intent.notes.first() {
        Some((_, version)) => state.meta.revision(version)?.is_some(),
        // No note inside: nothing of it for the recorder but its commit.
        None => true,
    };
    let (notes, versions): (Vec<Arc<Note>>, Vec<String>) = {
        let catalog = state.catalog.read();
        intent
            .notes
            .iter()
            .filter_map(|(id, v)| catalog.get_by_id(id).map(|n| (n.clone(), v.clone())))
            .unzip()
    };
    let plan = FolderPlan {
        path: intent.path.clone(),
        to: intent.to.clone(),
        notes,
    };
    if recorded {
        let mut receipt = receipt_of(state, op, &plan, None);
        if let Subject::Folder(facts) = &mut receipt.subject {
            facts.notes = intent.notes.len();
        }
        if matches!(op, Op::MoveFolder { .. }) && !intent.notes.is_empty() {
            receipt.flow_back_error = Some(
                "the daemon stopped while it rewrote links to this folder's notes; check them with GET /v1/notes/{note}:links".to_string(),
            );
        }
        return Ok(Some(receipt));
    }
    for note in &plan.notes {
        removed.retain(|r| *r != note.path);
        if let (Op::MoveFolder { .. }, Some(to)) = (op, &plan.to) {
            let rel = moved_path(&note.path, &plan.path, to);
            changed.retain(|o| o.rel != rel);
        }
    }
    let linking = linking_of(state, op, &plan);
    finish(
        state,
        write,
        op,
        &plan,
        &intent.actor,
        &versions,
        &linking,
        &[],
    )
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_inside_a_moved_folder_follow_it() {
        assert_eq!(moved_path("a/b/x.md", "a/b", "c"), "c/x.md");
        assert_eq!(moved_path("a/b/d/x.md", "a/b", "c/e"), "c/e/d/x.md");
        assert_eq!(moved_path("z.md", "a/b", "c"), "z.md");
        assert_eq!(moved_path("a/bc/x.md", "a/b", "c"), "a/bc/x.md");
    }
}
