//! Device pushes: a batch of ops, each checked against the device's base version and
//! sent through the one write pipeline (`writes::submit`: idempotency, policy and budget,
//! plan, apply or queue), so a push never goes around what an API write goes through.
//! A moved base answers `VERSION_MOVED` for that op and changes nothing; the device keeps
//! its edit as a conflicted copy.

use crate::error::{Error, Result};
use crate::state::State;
use crate::writes::{self, Idempotency, Receipt, Request};

/// One op a device pushes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOp {
    /// Create the note at `path` (no base), or replace its whole file (with the base
    /// version it was read at).
    Upsert {
        note: Option<String>,
        path: String,
        base_version_id: Option<String>,
        content: String,
    },
    /// Delete the note at its base version.
    Delete {
        note: String,
        base_version_id: String,
    },
    /// Create or replace a private note's file with a device's ciphertext envelope
    /// (base64); the base is the file's `sha256:<hex>` content hash.
    PutPrivate {
        path: String,
        base: Option<String>,
        ciphertext: String,
    },
    /// Delete a private note's file at its base (`sha256:<hex>`).
    DeletePrivate { path: String, base: String },
    /// Move or rename the note (one of the two per op: its folder or its name) from
    /// `path` at its base version.
    Move {
        note: Option<String>,
        path: String,
        to_path: String,
        base_version_id: String,
    },
}

impl PushOp {
    /// The note the op names: its id when the catalog knows the note (by id or by
    /// slug), else its slug; to refuse two ops on one note in a batch.
    fn target(&self, state: &State) -> String {
        let key = match self {
            PushOp::Upsert { note, path, .. } | PushOp::Move { note, path, .. } => note
                .clone()
                .unwrap_or_else(|| path.strip_suffix(".md").unwrap_or(path).to_string()),
            PushOp::Delete { note, .. } => note.clone(),
            PushOp::PutPrivate { path, .. } | PushOp::DeletePrivate { path, .. } => {
                return format!("private:{path}")
            }
        };
        let known = state.catalog.read().find(&key).map(|n| n.note_id.clone());
        known.unwrap_or(key)
    }
}

/// The largest batch.
pub const MAX_OPS: usize = 500;

fn slug_of(path: &str) -> Result<String> {
    path.strip_suffix(".md")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| Error::invalid_field("path", "must name a note: a path ending in .md"))
}

fn split(path: &str) -> (&str, &str) {
    crate::vault::path::split_path(path)
}

/// The pipeline operation of a pushed op.
fn write_op(op: &PushOp, at: usize) -> Result<writes::Op> {
    let named = |e: Error| -> Error {
        match e.field_violations.first() {
            Some(v) => {
                Error::invalid_field(format!("ops[{at}].{}", v.field), v.description.clone())
            }
            None => e,
        }
    };
    Ok(match op {
        PushOp::Upsert {
            note,
            path,
            base_version_id: None,
            content,
        } => {
            if note.is_some() {
                return Err(Error::invalid_field(
                    format!("ops[{at}].base_version_id"),
                    "is required to replace an existing note (omit note_id to create one)",
                ));
            }
            writes::Op::Create {
                slug: slug_of(path).map_err(named)?,
                body: content.clone(),
                keys: Vec::new(),
            }
        }
        PushOp::Upsert {
            note,
            path,
            base_version_id: Some(base),
            content,
        } => writes::Op::Replace {
            note: match note {
                Some(id) => id.clone(),
                None => slug_of(path).map_err(named)?,
            },
            version_id: base.clone(),
            content: content.clone(),
        },
        PushOp::PutPrivate {
            path,
            base,
            ciphertext,
        } => writes::Op::PutPrivate {
            path: path.clone(),
            ciphertext: ciphertext.clone(),
            base: base.clone(),
        },
        PushOp::DeletePrivate { path, base } => writes::Op::DeleteAttachment {
            path: path.clone(),
            sha256: Some(base.strip_prefix("sha256:").unwrap_or(base).to_string()),
        },
        PushOp::Delete {
            note,
            base_version_id,
        } => writes::Op::Delete {
            note: note.clone(),
            version_id: Some(base_version_id.clone()),
        },
        PushOp::Move {
            note,
            path,
            to_path,
            base_version_id,
        } => {
            let from = slug_of(path).map_err(named)?;
            slug_of(to_path).map_err(|_| {
                Error::invalid_field(format!("ops[{at}].to_path"), "must end in .md")
            })?;
            let key = note.clone().unwrap_or(from);
            let ((from_folder, from_name), (folder, name)) = (split(path), split(to_path));
            let version_id = Some(base_version_id.clone());
            match (from_folder == folder, from_name == name) {
                (true, true) => {
                    return Err(Error::invalid_field(
                        format!("ops[{at}].to_path"),
                        "is where the note is already",
                    ))
                }
                (true, false) => writes::Op::Rename {
                    note: key,
                    name: name.strip_suffix(".md").unwrap_or(name).to_string(),
                    version_id,
                },
                (false, true) => writes::Op::Move {
                    note: key,
                    folder: folder.to_string(),
                    version_id,
                },
                (false, false) => {
                    return Err(Error::invalid_field(
                        format!("ops[{at}].to_path"),
                        "changes both the folder and the name; push a move, then a rename",
                    ))
                }
            }
        }
    })
}

/// Check a batch before anything is applied: its size, each op's shape, and one op per
/// note (a duplicate op, or an op on a note another op of the batch deletes or moves,
/// is refused). Answers the pipeline operations.
pub fn prepare(state: &State, ops: &[PushOp]) -> Result<Vec<writes::Op>> {
    if ops.is_empty() || ops.len() > MAX_OPS {
        return Err(Error::invalid_field(
            "ops",
            format!("must hold 1 to {MAX_OPS} ops, got {}", ops.len()),
        ));
    }
    sealed_with_current_key(state, ops)?;
    let mut seen = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        if let Some(first) = seen.insert(op.target(state), i) {
            return Err(Error::invalid_field(
                format!("ops[{i}]"),
                format!("changes the same note as ops[{first}]; push one op per note in a batch"),
            ));
        }
        out.push(write_op(op, i)?);
    }
    Ok(out)
}

/// Submit each op of a prepared batch through the pipeline under its own key
/// (`op_keys[i]`), else `key#<index>`: a retry with the same keys replays each op's
/// receipt. One result per op.
pub fn push(
    state: &State,
    device_id: &str,
    key: &str,
    op_keys: &[Option<String>],
    ops: Vec<writes::Op>,
) -> Vec<Result<Receipt>> {
    ops.into_iter()
        .enumerate()
        .map(|(i, op)| {
            let request = Request::pushed(device_id, op);
            // What an older version bound the key to: the request's JSON.
            let legacy = serde_json::to_string(&request)
                .map(|json| blake3::hash(json.as_bytes()).to_hex().to_string())
                .ok();
            let key = match op_keys.get(i) {
                Some(Some(own)) => own.clone(),
                _ => format!("{key}#{i}"),
            };
            writes::submit(state, request, Idempotency { key: &key, legacy })
        })
        .collect()
}

/// The `key-version` an envelope (base64) names, when it names one.
fn envelope_key_version(ciphertext: &str) -> Option<u64> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(ciphertext)
        .ok()?;
    let rest = bytes.strip_prefix(crate::vault::PRIVATE_MAGIC)?;
    let line = rest.split(|b| *b == b'\n').next()?;
    std::str::from_utf8(line)
        .ok()?
        .strip_prefix("key-version: ")?
        .trim()
        .parse()
        .ok()
}

/// A private note sealed under a data key older than the vault's (a device that has not
/// read the rotated key hierarchy) is refused: once a rotation ends, nothing is sealed
/// under a key the hierarchy no longer holds.
fn sealed_with_current_key(state: &State, ops: &[PushOp]) -> Result<()> {
    let mut current = None;
    for (i, op) in ops.iter().enumerate() {
        let PushOp::PutPrivate { ciphertext, .. } = op else {
            continue;
        };
        if current.is_none() {
            let keys = crate::sync::e2ee::key_state(state)?;
            current = Some(keys.hierarchy.map_or(0, |h| u64::from(h.key_version)));
        }
        let now = current.unwrap_or(0);
        match envelope_key_version(ciphertext) {
            // Older: a device that missed a rotation; newer: no device holds that key.
            Some(v) if v == now => {}
            sealed => {
                return Err(Error::invalid_field(
                    format!("ops[{i}].content_base64"),
                    format!(
                        "is sealed with keyVersion {}, but the vault's data key is keyVersion {now}: \
                         run `notevault device pull` to read the new key hierarchy, then push again",
                        sealed.map_or("(none)".to_string(), |v| v.to_string())
                    ),
                ))
            }
        }
    }
    Ok(())
}
