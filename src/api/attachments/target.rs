//! Where an upload goes and what it is: its folder and name checked, its media type
//! sniffed and allowed.

use crate::error::{Error, Reason};
use crate::state::State;
use crate::vault::attachments as domain;

/// The folder an upload goes to when none is given: Obsidian's `attachmentFolderPath`
/// (`.obsidian/app.json`), read as a vault folder (`./x` has no note to be relative to
/// here, so it is `x`); the vault root otherwise.
pub(super) fn default_folder(state: &State) -> String {
    let Ok(text) = std::fs::read_to_string(state.paths.root.join(".obsidian/app.json")) else {
        return String::new();
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return String::new();
    };
    let raw = v
        .get("attachmentFolderPath")
        .and_then(|f| f.as_str())
        .unwrap_or("");
    raw.trim_start_matches("./")
        .trim_matches('/')
        .trim()
        .to_string()
}

/// Check an upload's folder (`""`: the vault root) and file name, and join them.
pub(super) fn target_path(state: &State, folder: &str, name: &str) -> Result<String, Error> {
    if name.is_empty() {
        return Err(Error::invalid_field("file", "has no file name"));
    }
    if name.contains('/') || name.contains('\\') || name.contains('\0') || name == ".." {
        return Err(Error::unsafe_path(format!(
            "the file name {name:?} is not a plain name"
        )));
    }
    if !crate::vault::path::is_attachment_name(name) {
        return Err(Error::invalid_field(
            "file",
            "a markdown file is a note: create it with `POST /v1/notes`",
        ));
    }
    let folder = folder.trim_end_matches('/');
    if !folder.is_empty() {
        let safe = state.paths.resolve_new(folder)?;
        if safe.abs.exists() && !safe.abs.is_dir() {
            return Err(Error::invalid_field("folder", "is a file, not a folder"));
        }
    }
    let path = if folder.is_empty() {
        name.to_string()
    } else {
        format!("{folder}/{name}")
    };
    let rel = state.paths.resolve_new(&path)?.rel;
    // The API makes folders one level deep, for attachments as for notes.
    crate::writes::folder_creatable(state, &rel)?;
    Ok(rel)
}

fn essence(t: &str) -> String {
    let t = t
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match t.as_str() {
        "image/jpg" => "image/jpeg".into(),
        _ => t,
    }
}

/// The upload's media type: the sniffed one, else the declared one, else the
/// extension's. A declared type the bytes contradict, or a type not allowed, is
/// `UNSUPPORTED_MEDIA_TYPE`.
pub(super) fn media_type(
    state: &State,
    head: &[u8],
    name: &str,
    declared: Option<&str>,
) -> Result<String, Error> {
    let declared = declared
        .map(essence)
        .filter(|d| !d.is_empty() && d != "application/octet-stream");
    let sniffed = domain::sniffed(head);
    if let (Some(d), Some(s)) = (&declared, &sniffed) {
        if d != s {
            return Err(Error::new(
                Reason::UNSUPPORTED_MEDIA_TYPE,
                format!("the file was declared {d} but its bytes are {s}"),
            )
            .with_meta("declared", d.clone())
            .with_meta("sniffed", s.clone()));
        }
    }
    let effective = sniffed
        .or(declared)
        .unwrap_or_else(|| domain::by_extension(name));
    let allowed = state.config.upload_types.iter().any(|a| {
        let a = a.to_ascii_lowercase();
        match a.strip_suffix("/*") {
            Some(family) => effective.split('/').next() == Some(family),
            None => a == effective,
        }
    });
    if !allowed {
        return Err(Error::new(
            Reason::UNSUPPORTED_MEDIA_TYPE,
            format!("uploads of type {effective} are not allowed here"),
        )
        .with_meta("content_type", effective.clone())
        .with_meta("allowed", state.config.upload_types.join(" ")));
    }
    Ok(effective)
}
