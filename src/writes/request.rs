//! The constructors of [`Request`]: each validates its operation (lengths, UUIDs, names,
//! frontmatter values) the one way, whichever door asks; an error names the field as
//! `/v1` and MCP name it. Checks run in a fixed order, so the first problem reported is
//! the same everywhere.

use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::error::{Error, Reason, Result};
use crate::vault::frontmatter::FmValue;

use super::op::validated as request;
use super::{Op, PatchChange, Request};

/// Largest request body (a whole note plus JSON), and so the longest content.
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// `agent_id`: 1..100 characters, default `unknown`; it grants nothing.
pub fn agent_id(value: Option<String>) -> Result<String> {
    match value {
        None => Ok("unknown".into()),
        Some(a) if (1..=100).contains(&a.chars().count()) && !a.chars().any(char::is_control) => {
            Ok(a)
        }
        Some(_) => Err(Error::invalid_field(
            "agent_id",
            "must be 1 to 100 characters, without control characters",
        )),
    }
}

/// The spec's UUID pattern: versions 1-8, variant 8/9/a/b, or the nil or all-f UUID.
pub fn is_spec_uuid(s: &str) -> bool {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(
            r"^(?i:[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$",
        )
        .expect("valid regex")
    })
    .is_match(s)
}

fn version_field(field: &str, value: Option<String>) -> Result<Option<String>> {
    match value {
        Some(v) if !is_spec_uuid(&v) => Err(Error::invalid_field(
            field,
            "must be a UUID (versions 1-8, or the nil or max UUID)",
        )),
        other => Ok(other.map(|v| v.to_lowercase())),
    }
}

fn check_len(field: &str, value: &str, min: usize, max: usize) -> Result<()> {
    let n = value.chars().count();
    if n < min || n > max {
        return Err(Error::invalid_field(
            field,
            format!("must be {min} to {max} characters, got {n}"),
        ));
    }
    Ok(())
}

/// Turn a JSON value into a frontmatter value: strings quoted as needed, numbers and
/// booleans plain, lists of scalars as lists. `None` for null (remove the key).
fn fm_value(field: &str, value: &Value) -> Result<Option<FmValue>> {
    Ok(Some(match value {
        Value::Null => return Ok(None),
        Value::String(s) => FmValue::Scalar(s.clone()),
        Value::Number(n) => FmValue::Plain(n.to_string()),
        Value::Bool(b) => FmValue::Plain(b.to_string()),
        Value::Array(items) => FmValue::List(
            items
                .iter()
                .map(|i| match i {
                    Value::String(s) => Ok(s.clone()),
                    Value::Number(n) => Ok(n.to_string()),
                    Value::Bool(b) => Ok(b.to_string()),
                    _ => Err(Error::invalid_field(
                        field,
                        "list items must be strings, numbers or booleans",
                    )),
                })
                .collect::<Result<_>>()?,
        ),
        Value::Object(_) => {
            return Err(Error::invalid_field(
                field,
                "nested mappings are not supported; set scalar or list values",
            ))
        }
    }))
}

fn check_fm_key(field: &str, key: &str) -> Result<()> {
    if key.is_empty()
        || key.len() > 200
        || key.contains(['\n', '\r'])
        || key.trim() != key
        || key.starts_with('#')
    {
        return Err(Error::invalid_field(
            field,
            "a frontmatter key must be 1 to 200 characters, without newlines or surrounding spaces",
        ));
    }
    Ok(())
}

/// Characters a file name may not hold (Obsidian's set plus the path separators).
fn file_name_of(title: &str) -> String {
    let name: String = title
        .chars()
        .map(|c| {
            if "/\\:*?\"<>|#^[]".contains(c) || c.is_control() {
                '-'
            } else {
                c
            }
        })
        .collect();
    name.trim().trim_matches('.').to_string()
}

/// A new note as asked for: where (`slug`, or `title` and `folder`), its body and
/// frontmatter.
#[derive(Debug, Default)]
pub struct NewNote {
    pub slug: Option<String>,
    pub folder: Option<String>,
    pub title: Option<String>,
    pub content: String,
    pub tags: Option<Vec<String>>,
    pub status: Option<String>,
    pub frontmatter: Option<Map<String, Value>>,
    pub agent_id: Option<String>,
}

/// The fields an update mask names (absent ones are cleared).
#[derive(Debug, Default)]
pub struct NotePatch {
    pub title: Option<String>,
    pub content: Option<String>,
    pub folder: Option<String>,
    pub tags: Option<Vec<String>>,
    pub status: Option<String>,
    pub frontmatter: Option<Map<String, Value>>,
    pub version_id: Option<String>,
    pub agent_id: Option<String>,
}

/// The entries of an update mask, comma-separated; at least one.
pub fn mask_entries(mask: &str) -> Result<Vec<&str>> {
    let entries: Vec<&str> = mask
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    if entries.is_empty() {
        return Err(Error::new(
            Reason::INVALID_UPDATE_MASK,
            "update_mask is required",
        ));
    }
    Ok(entries)
}

impl Request {
    /// Create a note.
    pub fn create(n: NewNote) -> Result<Request> {
        let agent = agent_id(n.agent_id)?;
        check_len("content", &n.content, 0, MAX_BODY)?;
        let mut keys = Vec::new();
        let slug = match (&n.slug, &n.title) {
            (Some(slug), _) => {
                if n.folder.is_some() {
                    return Err(Error::invalid_field(
                        "folder",
                        "give either `slug` or `folder` with `title`, not both",
                    ));
                }
                let slug = slug
                    .strip_suffix(".md")
                    .unwrap_or(slug)
                    .trim_end_matches('/')
                    .to_string();
                check_len("slug", &slug, 1, 512)?;
                if let Some(title) = &n.title {
                    keys.push(("title".to_string(), FmValue::Scalar(title.clone())));
                }
                slug
            }
            (None, Some(title)) => {
                let name = file_name_of(title);
                if name.is_empty() {
                    return Err(Error::invalid_field("title", "gives an empty file name"));
                }
                if name != *title {
                    keys.push(("title".to_string(), FmValue::Scalar(title.clone())));
                }
                match n.folder.as_deref().map(|f| f.trim_end_matches('/')) {
                    Some(folder) if !folder.is_empty() => format!("{folder}/{name}"),
                    _ => name,
                }
            }
            (None, None) => {
                return Err(Error::invalid_field(
                    "slug",
                    "give `slug`, or `title` (and `folder`)",
                ))
            }
        };
        if let Some(tags) = n.tags {
            keys.push(("tags".into(), FmValue::List(tags)));
        }
        if let Some(status) = n.status {
            keys.push(("status".into(), FmValue::Scalar(status)));
        }
        for (key, value) in n.frontmatter.iter().flatten() {
            let field = format!("frontmatter.{key}");
            check_fm_key(&field, key)?;
            if let Some(v) = fm_value(&field, value)? {
                keys.push((key.clone(), v));
            }
        }
        let op = Op::Create {
            slug,
            body: n.content,
            keys,
        };
        Ok(request(op, agent))
    }

    /// Update the fields of `note` that `mask` names (see [`mask_entries`]).
    pub fn patch(note: String, mask: &str, p: NotePatch) -> Result<Request> {
        let entries = mask_entries(mask)?;
        let agent = agent_id(p.agent_id)?;
        let version_id = version_field("version_id", p.version_id)?;
        let mut changes = Vec::new();
        for entry in entries {
            let change = match entry {
                "title" => match &p.title {
                    Some(t) => PatchChange::SetKey("title".into(), FmValue::Scalar(t.clone())),
                    None => PatchChange::RemoveKey("title".into()),
                },
                "status" => match &p.status {
                    Some(s) => PatchChange::SetKey("status".into(), FmValue::Scalar(s.clone())),
                    None => PatchChange::RemoveKey("status".into()),
                },
                "tags" => match &p.tags {
                    Some(t) => PatchChange::SetKey("tags".into(), FmValue::List(t.clone())),
                    None => PatchChange::RemoveKey("tags".into()),
                },
                "content" => {
                    let content = p.content.clone().unwrap_or_default();
                    check_len("content", &content, 0, MAX_BODY)?;
                    PatchChange::Content(content)
                }
                "folder" => PatchChange::Folder(p.folder.clone().unwrap_or_default()),
                other => match other.strip_prefix("frontmatter.") {
                    Some(key) => {
                        let field = format!("frontmatter.{key}");
                        check_fm_key(&field, key)
                            .map_err(|e| Error::new(Reason::INVALID_UPDATE_MASK, e.message))?;
                        match p.frontmatter.as_ref().and_then(|m| m.get(key)) {
                            Some(v) => match fm_value(&field, v)? {
                                Some(v) => PatchChange::SetKey(key.to_string(), v),
                                None => PatchChange::RemoveKey(key.to_string()),
                            },
                            None => PatchChange::RemoveKey(key.to_string()),
                        }
                    }
                    None => {
                        return Err(Error::new(
                            Reason::INVALID_UPDATE_MASK,
                            format!("{other:?} cannot be updated; the mask lists only title, content, folder, tags, status, frontmatter.<key>"),
                        )
                        .with_meta("update_mask", mask))
                    }
                },
            };
            changes.push(change);
        }
        let op = Op::Patch {
            note,
            version_id,
            changes,
        };
        Ok(request(op, agent))
    }

    /// Delete a note (it goes to `.trash/`).
    pub fn delete(
        note: String,
        version_id: Option<String>,
        agent: Option<String>,
    ) -> Result<Request> {
        let version_id = version_field("version_id", version_id)?;
        let agent = agent_id(agent)?;
        Ok(request(Op::Delete { note, version_id }, agent))
    }

    /// Replace the one occurrence of `old_string` in the note at `version_id`.
    pub fn edit(
        note: String,
        version_id: String,
        old_string: String,
        new_string: String,
        agent: Option<String>,
    ) -> Result<Request> {
        let version_id = version_field("version_id", Some(version_id))?.unwrap_or_default();
        check_len("old_string", &old_string, 1, 100_000)?;
        check_len("new_string", &new_string, 0, 100_000)?;
        let agent = agent_id(agent)?;
        let op = Op::Edit {
            note,
            version_id,
            old_string,
            new_string,
        };
        Ok(request(op, agent))
    }

    /// Append `content` to a note (under `heading` when given), or with `replace` put it
    /// in place of `heading`'s section, which then needs the `version_id` read.
    pub fn section(
        note: String,
        version_id: Option<String>,
        heading: Option<String>,
        content: String,
        replace: bool,
        agent: Option<String>,
    ) -> Result<Request> {
        let version_id = version_field("version_id", version_id)?;
        if replace && version_id.is_none() {
            return Err(Error::invalid_field(
                "version_id",
                "required to replace a section: the version read",
            ));
        }
        match &heading {
            Some(h) => check_len("heading", h, 1, 1000)?,
            None if replace => {
                return Err(Error::invalid_field(
                    "heading",
                    "required to replace a section",
                ))
            }
            None => {}
        }
        check_len("content", &content, usize::from(!replace), 100_000)?;
        let agent = agent_id(agent)?;
        let op = Op::Section {
            note,
            version_id,
            heading,
            content,
            replace,
        };
        Ok(request(op, agent))
    }

    /// Move a note into `folder` (`""`: the vault's top).
    pub fn move_note(
        note: String,
        folder: String,
        version_id: Option<String>,
        agent: Option<String>,
    ) -> Result<Request> {
        let version_id = version_field("version_id", version_id)?;
        let agent = agent_id(agent)?;
        check_len("folder", &folder, 0, 512)?;
        let op = Op::Move {
            note,
            folder,
            version_id,
        };
        Ok(request(op, agent))
    }

    /// Rename a note in its folder (`.md` optional).
    pub fn rename(
        note: String,
        name: String,
        version_id: Option<String>,
        agent: Option<String>,
    ) -> Result<Request> {
        let version_id = version_field("version_id", version_id)?;
        let agent = agent_id(agent)?;
        let name = name.strip_suffix(".md").unwrap_or(&name).to_string();
        check_len("name", &name, 1, 255)?;
        if name.contains('/') || name.contains('\\') {
            return Err(Error::unsafe_path(
                "a new name holds no folder; use :move to change folders",
            ));
        }
        let op = Op::Rename {
            note,
            name,
            version_id,
        };
        Ok(request(op, agent))
    }

    /// Restore a listed revision of `note` as a new revision.
    pub fn rollback(
        note: String,
        revision_id: String,
        version_id: Option<String>,
        agent: Option<String>,
    ) -> Result<Request> {
        let revision_id = version_field("revision_id", Some(revision_id))?.unwrap_or_default();
        let version_id = version_field("version_id", version_id)?;
        let agent = agent_id(agent)?;
        let op = Op::Rollback {
            note,
            revision_id,
            version_id,
        };
        Ok(request(op, agent))
    }

    /// MCP's `write_note`: create the note at the slug `note`, or replace the body of the
    /// note it names (resolved by the pipeline, see [`Op::Write`]).
    pub fn write_note(
        note: String,
        content: String,
        version_id: Option<String>,
        agent: Option<String>,
    ) -> Result<Request> {
        let agent = agent_id(agent)?;
        let version_id = version_field("version_id", version_id)?;
        check_len("content", &content, 0, MAX_BODY)?;
        let op = Op::Write {
            note,
            content,
            version_id,
        };
        Ok(request(op, agent))
    }

    /// Make an empty folder.
    pub fn create_folder(path: String, agent: Option<String>) -> Result<Request> {
        check_len("path", &path, 1, 512)?;
        let agent = agent_id(agent)?;
        Ok(request(Op::CreateFolder { path }, agent))
    }

    /// Move a folder into `folder` (`""`: the vault's top).
    pub fn move_folder(path: String, folder: String, agent: Option<String>) -> Result<Request> {
        check_len("path", &path, 1, 512)?;
        check_len("folder", &folder, 0, 512)?;
        let agent = agent_id(agent)?;
        let path = path.trim_end_matches('/');
        let name = crate::vault::path::file_name_of(path);
        let parent = folder.trim_end_matches('/');
        let to = if parent.is_empty() {
            name.to_string()
        } else {
            format!("{parent}/{name}")
        };
        let op = Op::MoveFolder {
            path: path.to_string(),
            to,
        };
        Ok(request(op, agent))
    }

    /// Rename a folder in its parent.
    pub fn rename_folder(path: String, name: String, agent: Option<String>) -> Result<Request> {
        check_len("path", &path, 1, 512)?;
        check_len("name", &name, 1, 255)?;
        if name.contains('/') {
            return Err(Error::invalid_field(
                "name",
                "is a name, without `/`; move the folder with `POST /v1/folders:move`",
            ));
        }
        let agent = agent_id(agent)?;
        let path = path.trim_end_matches('/');
        let to = crate::vault::path::sibling(path, &name);
        let op = Op::MoveFolder {
            path: path.to_string(),
            to,
        };
        Ok(request(op, agent))
    }

    /// Delete a folder: an empty one, or with `trash_notes` one whose files go to the trash.
    pub fn delete_folder(
        path: String,
        trash_notes: bool,
        agent: Option<String>,
    ) -> Result<Request> {
        check_len("path", &path, 1, 512)?;
        let agent = agent_id(agent)?;
        Ok(request(Op::DeleteFolder { path, trash_notes }, agent))
    }

    /// Put an upload, staged in the vault as `staged` (one of our temp files), at `path`.
    pub fn put_attachment(
        path: String,
        staged: String,
        sha256: String,
        size: u64,
        content_type: String,
        agent: Option<String>,
    ) -> Result<Request> {
        let agent = agent_id(agent)?;
        let op = Op::PutAttachment {
            path,
            staged,
            sha256,
            size,
            content_type,
        };
        Ok(request(op, agent))
    }

    /// Remove the attachment at `path`, if it still has the bytes `sha256` names.
    pub fn delete_attachment(
        path: String,
        sha256: Option<String>,
        agent: Option<String>,
    ) -> Result<Request> {
        let agent = agent_id(agent)?;
        Ok(request(Op::DeleteAttachment { path, sha256 }, agent))
    }

    /// Move or rename the attachment at `path` to `to`.
    pub fn move_attachment(
        path: String,
        to: String,
        sha256: Option<String>,
        agent: Option<String>,
    ) -> Result<Request> {
        let agent = agent_id(agent)?;
        Ok(request(Op::MoveAttachment { path, to, sha256 }, agent))
    }

    /// A device's pushed op, on behalf of `device:<device_id>`. Its shape is the sync
    /// protocol's and `sync::push` validates it (base versions as the device read them,
    /// paths ending in `.md`); the agent is the device, never a client's string.
    pub fn pushed(device_id: &str, op: Op) -> Request {
        request(op, format!("device:{device_id}"))
    }
}
