//! What a write would do, worked out without changing anything: the note it starts from
//! (read so that the bytes agree with its version), the checks of its preconditions, and
//! the bytes and place it ends with. Used to apply a write and to preview a queued one.

use std::sync::Arc;

use crate::error::{Error, Reason, Result};
use crate::state::{State, WriteLock};
use crate::vault::frontmatter;
use crate::vault::note::Note;
use crate::vault::path::slug_of;

use super::{Op, PatchChange};

/// The note `key` names, with its current bytes; an external edit the catalog has not
/// seen yet is recorded first (a `filesystem` revision), so preconditions see it. The
/// bytes are always the version answered (the refresh may record other bytes than were
/// read: an in-place save caught half done is recorded once it is whole); a note that
/// keeps changing under the reads is `VERSION_MOVED`.
fn current(
    state: &State,
    write: &WriteLock<'_>,
    key: &str,
) -> Result<crate::record::refresh::NoteBytes> {
    crate::record::refresh::read_agreeing(state, key, crate::record::refresh::Lock::Held(write))?
        .map_err(|note| {
            Error::new(
                Reason::VERSION_MOVED,
                format!("note {} keeps changing on disk; try again", note.slug()),
            )
            .with_meta("current_version_id", note.version_id.clone())
        })
}

fn check_version(note: &Note, version_id: Option<&str>) -> Result<()> {
    match version_id {
        Some(v) if v != note.version_id => Err(Error::new(
            Reason::VERSION_MOVED,
            format!(
                "note {} is at version {}, not {v}",
                note.slug(),
                note.version_id
            ),
        )
        .with_meta("current_version_id", note.version_id.clone())),
        _ => Ok(()),
    }
}

/// Check a target slug for a new or moved note: safe, a name the API may create, and
/// creating folders at most one level deep.
fn target_path(state: &State, slug: &str) -> Result<crate::vault::path::SafePath> {
    let rel = format!("{slug}.md");
    let safe = state.paths.resolve_new(&rel)?;
    folder_creatable(state, &rel)?;
    Ok(safe)
}

/// A shared vault has no folder beside it: its folders are those its notes are in.
fn folder_exists(state: &State, folder: &str) -> bool {
    match state.shared {
        None => state.paths.root.join(folder).is_dir(),
        Some(_) => state
            .catalog
            .read()
            .iter_prefix(&format!("{folder}/"))
            .next()
            .is_some(),
    }
}

/// The folder of the vault path `rel` exists, or is one the API may make on the way
/// (one level deep at most).
pub fn folder_creatable(state: &State, rel: &str) -> Result<()> {
    if let Some((folder, _)) = rel.rsplit_once('/') {
        if folder.contains('/') && !folder_exists(state, folder) {
            return Err(Error::invalid_field(
                "folder",
                format!("folder {folder:?} does not exist and the API creates folders only one level deep"),
            ));
        }
    }
    Ok(())
}

/// What a write would do: the note it starts from (with the bytes it was read with),
/// where the note ends up, and its new content (`None` for a delete).
pub struct Plan {
    pub from: Option<crate::record::refresh::NoteBytes>,
    /// Vault-relative path after the write.
    pub to_rel: String,
    /// Shared, so the change it becomes (and a move's unchanged bytes) are not copies.
    pub bytes: Option<Arc<[u8]>>,
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
            text(self.from.as_ref().map(|(_, b)| &b[..])),
            text(self.bytes.as_deref()),
        )
    }

    pub fn from_rel(&self) -> Option<&str> {
        self.from.as_ref().map(|(n, _)| n.path.as_str())
    }
}

/// Work out what `op` would do, reading the note and checking every precondition,
/// without writing anything. Used to apply a write and to preview a queued one.
pub fn plan(state: &State, write: &WriteLock<'_>, op: &Op) -> Result<Plan> {
    match op {
        Op::CreateFolder { .. } | Op::MoveFolder { .. } | Op::DeleteFolder { .. } => Err(
            Error::internal("a folder operation has no note plan (see writes::folders)"),
        ),
        Op::PutAttachment { .. }
        | Op::PutPrivate { .. }
        | Op::DeleteAttachment { .. }
        | Op::MoveAttachment { .. } => Err(crate::error::Error::internal(
            "an attachment change has no note plan",
        )),
        Op::Write { .. } => Err(Error::internal(
            "a write_note is resolved into a create or a patch before it is planned",
        )),
        Op::Create { slug, body, keys } => {
            let safe = target_path(state, slug)?;
            if let Some(existing) = taken(state, slug) {
                return Err(Error::new(
                    Reason::NAME_COLLISION,
                    format!("a note {existing} already exists"),
                )
                .with_meta("slug", existing));
            }
            let mut text = body.clone();
            for (key, value) in keys {
                text = frontmatter::set_key(&text, key, value)
                    .map_err(|e| Error::invalid_field(key.clone(), e.to_string()))?;
            }
            Ok(Plan {
                from: None,
                to_rel: safe.rel,
                bytes: Some(text.into_bytes().into()),
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
            let (current_note, bytes) = current(state, write, note)?;
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
                        to_rel =
                            move_target(state, &current_note, &folder_target(f, &current_note))?;
                        text
                    }
                };
            }
            let new_bytes: Arc<[u8]> = if lossy {
                bytes.clone()
            } else {
                text.into_bytes().into()
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
            let (current_note, bytes) = current(state, write, note)?;
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
                        format!("old_string does not occur in {}", current_note.slug()),
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
                        format!("old_string occurs {n} times in {}", current_note.slug()),
                    )
                    .with_meta("candidate_lines", lines.join(",")));
                }
            }
            let new_text = text.replacen(old_string.as_str(), new_string, 1);
            let to_rel = current_note.path.clone();
            Ok(Plan {
                from: Some((current_note, bytes)),
                to_rel,
                bytes: Some(new_text.into_bytes().into()),
                kind: "update",
                renamed: false,
                restore_id: None,
            })
        }
        Op::Section {
            note,
            version_id,
            heading,
            content,
            replace,
        } => {
            let (current_note, bytes) = current(state, write, note)?;
            check_version(&current_note, version_id.as_deref())?;
            let (text, lossy) = crate::vault::markdown::decode(&bytes);
            if lossy {
                return Err(not_utf8(&current_note));
            }
            let new_text = match (replace, heading) {
                (true, Some(heading)) => super::sections::replace(&text, heading, content)?,
                _ => super::sections::append(&text, heading.as_deref(), content)?,
            };
            let to_rel = current_note.path.clone();
            Ok(Plan {
                from: Some((current_note, bytes)),
                to_rel,
                bytes: Some(new_text.into_bytes().into()),
                kind: "update",
                renamed: false,
                restore_id: None,
            })
        }
        Op::Replace {
            note,
            version_id,
            content,
        } => {
            let (current_note, bytes) = current(state, write, note)?;
            check_version(&current_note, Some(version_id))?;
            let to_rel = current_note.path.clone();
            Ok(Plan {
                from: Some((current_note, bytes)),
                to_rel,
                bytes: Some(content.clone().into_bytes().into()),
                kind: "update",
                renamed: false,
                restore_id: None,
            })
        }
        Op::Delete { note, version_id } => {
            let (current_note, bytes) = current(state, write, note)?;
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
            let (current_note, bytes) = current(state, write, note)?;
            check_version(&current_note, version_id.as_deref())?;
            let to_rel = move_target(state, &current_note, &folder_target(folder, &current_note))?;
            Ok(Plan {
                from: Some((current_note, bytes.clone())),
                to_rel,
                bytes: Some(bytes.clone()),
                kind: "move",
                renamed: false,
                restore_id: None,
            })
        }
        Op::Rollback {
            note,
            revision_id,
            version_id,
        } => plan_rollback(state, write, note, revision_id, version_id.as_deref()),
        Op::Rename {
            note,
            name,
            version_id,
        } => {
            let (current_note, bytes) = current(state, write, note)?;
            check_version(&current_note, version_id.as_deref())?;
            let target = crate::vault::path::sibling(current_note.slug(), name);
            let to_rel = move_target(state, &current_note, &target)?;
            let renamed = to_rel != current_note.path;
            Ok(Plan {
                from: Some((current_note, bytes.clone())),
                to_rel,
                bytes: Some(bytes.clone()),
                kind: "move",
                renamed,
                restore_id: None,
            })
        }
    }
}

fn plan_rollback(
    state: &State,
    write: &WriteLock<'_>,
    key: &str,
    revision_id: &str,
    version_id: Option<&str>,
) -> Result<Plan> {
    let current_note = match current(state, write, key) {
        Ok(found) => Some(found),
        Err(e) if e.reason == Reason::NOTE_NOT_FOUND => None,
        Err(e) => return Err(e),
    };
    let note_id = match &current_note {
        Some((n, _)) => n.note_id.clone(),
        None => crate::queries::history::history_of(state, key)?.note_id,
    };
    let not_found = |why: &str| {
        Error::new(
            Reason::VERSION_NOT_FOUND,
            format!("revision {revision_id} {why}"),
        )
        .with_meta("revision_id", revision_id)
    };
    let revision = state
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
    let content = crate::queries::history::revision_content(state, &revision)?
        .ok_or_else(|| not_found("has no content in history.git yet"))?;
    match current_note {
        Some((note, bytes)) => {
            check_version(&note, version_id)?;
            let to_rel = note.path.clone();
            Ok(Plan {
                from: Some((note, bytes)),
                to_rel,
                bytes: Some(content.into()),
                kind: "update",
                renamed: false,
                restore_id: None,
            })
        }
        None => {
            let slug = slug_of(&revision.path).to_string();
            let safe = target_path(state, &slug)?;
            if safe.abs.exists() {
                return Err(Error::new(
                    Reason::NAME_COLLISION,
                    format!("{} exists again; move it away first", revision.path),
                ));
            }
            Ok(Plan {
                from: None,
                to_rel: safe.rel,
                bytes: Some(content.into()),
                kind: "create",
                renamed: false,
                restore_id: Some(note_id),
            })
        }
    }
}

fn not_utf8(note: &Note) -> Error {
    Error::invalid_field(
        "note",
        format!(
            "{} is not valid UTF-8; edit it in an editor that keeps its encoding",
            note.slug()
        ),
    )
}

fn frontmatter_error(note: &Note, e: frontmatter::FmError) -> Error {
    Error::invalid_field(
        "frontmatter",
        format!(
            "{}: {e}; fix the frontmatter in an editor, or send a `content` change only",
            note.slug()
        ),
    )
}

/// The slug of `note` moved into `folder`.
fn folder_target(folder: &str, note: &Note) -> String {
    let folder = folder.trim_end_matches('/');
    let name = crate::vault::path::file_name_of(note.slug());
    if folder.is_empty() {
        name.to_string()
    } else {
        format!("{folder}/{name}")
    }
}

/// Check the place a note moves to and return its vault-relative path.
fn move_target(state: &State, note: &Note, target_slug: &str) -> Result<String> {
    if target_slug == note.slug() {
        return Ok(note.path.clone());
    }
    let target = target_path(state, target_slug)?;
    if let Some(existing) = taken(state, target_slug).filter(|s| s != note.slug()) {
        return Err(Error::new(
            Reason::NAME_COLLISION,
            format!("a note {existing} already exists"),
        )
        .with_meta("slug", existing));
    }
    Ok(target.rel)
}

/// The slug of a note that already holds the name `slug`: the same slug, or the same name
/// in the other Unicode normalization form (NFC or NFD: macOS writes one, most editors
/// the other, and both would show as one name), in the catalog or on disk.
fn taken(state: &State, slug: &str) -> Option<String> {
    use unicode_normalization::UnicodeNormalization;
    let mut forms = vec![slug.to_string()];
    if !slug.is_ascii() {
        for form in [slug.nfc().collect::<String>(), slug.nfd().collect()] {
            if !forms.contains(&form) {
                forms.push(form);
            }
        }
    }
    let catalog = state.catalog.read();
    forms.into_iter().find(|form| {
        catalog.get(form).is_some() || state.paths.root.join(format!("{form}.md")).exists()
    })
}
