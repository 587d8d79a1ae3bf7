//! What an upload is: its media type sniffed and allowed. Where it goes (its folder and
//! name checked) is `surface::attachments`, shared with presigned PUT links.

use crate::error::{Error, Reason};
use crate::state::State;
use crate::vault::attachments as domain;

pub(super) use crate::surface::attachments::{default_folder, target_path};

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
    crate::surface::attachments::allowed_type(state, &effective)?;
    Ok(effective)
}
