//! The route table: every route the daemon serves, in one list, matched on the raw
//! (still percent-encoded) request path.
//!
//! axum's router (matchit) cannot express the specification's routes: `{note}` is a slug
//! whose `/` may be raw or `%2F`, and custom methods follow it in the same segment
//! (`/v1/notes/{note}:edit`). So the table below is matched here, the OpenAPI document
//! lists the same paths (a test checks both directions), and nothing else routes.

use axum::http::Method;
use percent_encoding::percent_decode_str;

use crate::error::{Error, Reason};

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    OpenApi,
    ListNotes,
    ListFolders,
    GetNote,
    GetRaw,
    CreateNote,
    PatchNote,
    DeleteNote,
    EditNote,
    MoveNote,
    RenameNote,
    RollbackNote,
    NoteLinks,
    IndexStatus,
    Search,
    Grep,
    Tags,
    AggregateProperties,
    Vault,
    ListRevisions,
    DiffNote,
    GetWriteSettings,
    PatchWriteSettings,
    ListWrites,
    GetWrite,
    ApproveWrite,
    RejectWrite,
}

/// One served route: method, OpenAPI path template, operation, and for a deprecated
/// legacy form the template of its canonical successor.
pub struct Route {
    pub method: Method,
    pub template: &'static str,
    pub op: Op,
    pub successor: Option<&'static str>,
}

/// Every route, as the OpenAPI document names it.
pub fn routes() -> Vec<Route> {
    let r = |method: Method, template, op| Route {
        method,
        template,
        op,
        successor: None,
    };
    let legacy = |method, template, op, successor| Route {
        method,
        template,
        op,
        successor: Some(successor),
    };
    vec![
        r(Method::GET, "/openapi.json", Op::OpenApi),
        r(Method::GET, "/v1/notes", Op::ListNotes),
        r(Method::GET, "/v1/folders", Op::ListFolders),
        r(Method::POST, "/v1/notes", Op::CreateNote),
        r(Method::GET, "/v1/notes/{note}", Op::GetNote),
        r(Method::PATCH, "/v1/notes/{note}", Op::PatchNote),
        r(Method::DELETE, "/v1/notes/{note}", Op::DeleteNote),
        r(Method::GET, "/v1/notes/{note}/raw", Op::GetRaw),
        r(Method::POST, "/v1/notes/{note}:edit", Op::EditNote),
        r(Method::POST, "/v1/notes/{note}:move", Op::MoveNote),
        r(Method::POST, "/v1/notes/{note}:rename", Op::RenameNote),
        r(Method::POST, "/v1/notes/{note}:rollback", Op::RollbackNote),
        r(
            Method::GET,
            "/v1/notes/{note}:listRevisions",
            Op::ListRevisions,
        ),
        r(Method::GET, "/v1/notes/{note}:diff", Op::DiffNote),
        r(Method::GET, "/v1/notes/{note}:links", Op::NoteLinks),
        r(Method::GET, "/v1/index-status", Op::IndexStatus),
        r(Method::GET, "/v1/search", Op::Search),
        r(Method::GET, "/v1/grep", Op::Grep),
        r(Method::GET, "/v1/tags", Op::Tags),
        r(
            Method::POST,
            "/v1/properties:aggregate",
            Op::AggregateProperties,
        ),
        r(Method::GET, "/v1/vault", Op::Vault),
        r(
            Method::GET,
            "/v1/vault/write-settings",
            Op::GetWriteSettings,
        ),
        r(
            Method::PATCH,
            "/v1/vault/write-settings",
            Op::PatchWriteSettings,
        ),
        r(Method::GET, "/v1/writes", Op::ListWrites),
        r(Method::GET, "/v1/writes/{id}", Op::GetWrite),
        r(Method::POST, "/v1/writes/{id}:approve", Op::ApproveWrite),
        r(Method::POST, "/v1/writes/{id}:reject", Op::RejectWrite),
        legacy(
            Method::POST,
            "/v1/notes/{note}/edit",
            Op::EditNote,
            "/v1/notes/{note}:edit",
        ),
        legacy(
            Method::POST,
            "/v1/notes/{note}/move",
            Op::MoveNote,
            "/v1/notes/{note}:move",
        ),
        legacy(
            Method::POST,
            "/v1/notes/{note}/rename",
            Op::RenameNote,
            "/v1/notes/{note}:rename",
        ),
        legacy(
            Method::GET,
            "/v1/notes/{note}/versions",
            Op::ListRevisions,
            "/v1/notes/{note}:listRevisions",
        ),
        legacy(
            Method::POST,
            "/v1/writes/{id}/approve",
            Op::ApproveWrite,
            "/v1/writes/{id}:approve",
        ),
        legacy(
            Method::POST,
            "/v1/writes/{id}/reject",
            Op::RejectWrite,
            "/v1/writes/{id}:reject",
        ),
    ]
}

/// A matched route and its decoded path parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    pub op: Op,
    pub template: &'static str,
    pub param: Option<String>,
    /// The raw (still encoded) parameter, to build a successor link.
    pub raw_param: Option<String>,
    pub successor: Option<&'static str>,
}

struct Candidate {
    op: Op,
    template: &'static str,
    suffix_len: usize,
    raw_param: Option<String>,
    successor: Option<&'static str>,
}

/// Match `method` and the raw `path`. `exists` tells whether a note key names an existing
/// note, to settle `/v1/notes/a/raw` (the raw body of `a`, or the note `a/raw`?): the
/// action wins unless only the longer slug names a note.
pub fn recognize(
    method: &Method,
    path: &str,
    exists: impl Fn(&str) -> bool,
) -> Result<Matched, Error> {
    let mut candidates = Vec::new();
    let mut other_methods = Vec::new();
    for route in routes() {
        let Some(raw_param) = match_template(route.template, path) else {
            continue;
        };
        if route.method != *method && !(*method == Method::HEAD && route.method == Method::GET) {
            other_methods.push(route.method.to_string());
            continue;
        }
        let suffix_len = route
            .template
            .rsplit_once('}')
            .map_or(0, |(_, suffix)| suffix.len());
        candidates.push(Candidate {
            op: route.op,
            template: route.template,
            suffix_len,
            raw_param,
            successor: route.successor,
        });
    }
    if candidates.is_empty() {
        let message = if other_methods.is_empty() {
            format!("no route {path}")
        } else {
            format!(
                "{method} is not served on {path}; it answers {}",
                other_methods.join(", ")
            )
        };
        return Err(Error::new(Reason::ROUTE_NOT_FOUND, message)
            .with_meta("method", method.as_str())
            .with_meta("path", path));
    }
    // Longest suffix first: the most specific action.
    candidates.sort_by_key(|c| std::cmp::Reverse(c.suffix_len));
    let mut decoded = Vec::with_capacity(candidates.len());
    for c in &candidates {
        decoded.push(match &c.raw_param {
            Some(raw) => Some(decode(raw)?),
            None => None,
        });
    }
    let mut pick = 0;
    if candidates.len() > 1 {
        if let (Some(Some(short)), Some(Some(long))) = (decoded.first(), decoded.last()) {
            if !exists(short) && exists(long) {
                pick = candidates.len() - 1;
            }
        }
    }
    let c = &candidates[pick];
    Ok(Matched {
        op: c.op,
        template: c.template,
        param: decoded[pick].clone(),
        raw_param: c.raw_param.clone(),
        successor: c.successor,
    })
}

fn decode(raw: &str) -> Result<String, Error> {
    percent_decode_str(raw)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| Error::invalid_field("note", "is not valid UTF-8 once percent-decoded"))
}

/// Match one template (at most one `{param}`) against a raw path; `Some(param)` on a match.
fn match_template(template: &str, path: &str) -> Option<Option<String>> {
    let Some((prefix, rest)) = template.split_once('{') else {
        return (template == path).then_some(None);
    };
    let (name, suffix) = rest.split_once('}')?;
    let middle = path.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if middle.is_empty() {
        return None;
    }
    // Only a note slug may hold raw slashes.
    if name != "note" && middle.contains('/') {
        return None;
    }
    // A colon method must not be swallowed by the bare `{note}` route.
    if suffix.is_empty() && name == "note" && has_custom_method(middle) {
        return None;
    }
    Some(Some(middle.to_string()))
}

/// `projects%2Fa:edit` ends in a custom method; `a:b` with an unknown verb does not.
fn has_custom_method(raw: &str) -> bool {
    let last = raw.rsplit('/').next().unwrap_or(raw);
    last.rsplit_once(':')
        .is_some_and(|(_, verb)| !verb.is_empty() && verb.chars().all(|c| c.is_ascii_alphabetic()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(method: Method, path: &str) -> Result<Matched, Error> {
        recognize(&method, path, |k| k == "a" || k == "dir/raw")
    }

    #[test]
    fn notes_with_raw_and_encoded_slashes() {
        let got = m(Method::GET, "/v1/notes/projects/roadmap").unwrap();
        assert_eq!(
            (got.op, got.param.as_deref()),
            (Op::GetNote, Some("projects/roadmap"))
        );
        let got = m(Method::GET, "/v1/notes/projects%2Froadmap").unwrap();
        assert_eq!(got.param.as_deref(), Some("projects/roadmap"));
        let got = m(Method::GET, "/v1/notes/a%20b%C3%A9").unwrap();
        assert_eq!(got.param.as_deref(), Some("a bé"));
    }

    #[test]
    fn raw_action_versus_a_note_named_raw() {
        let got = m(Method::GET, "/v1/notes/a/raw").unwrap();
        assert_eq!((got.op, got.param.as_deref()), (Op::GetRaw, Some("a")));
        let got = m(Method::GET, "/v1/notes/dir/raw").unwrap();
        assert_eq!(
            (got.op, got.param.as_deref()),
            (Op::GetNote, Some("dir/raw"))
        );
    }

    #[test]
    fn unknown_routes_and_methods() {
        assert_eq!(
            m(Method::GET, "/v2/x").unwrap_err().reason,
            Reason::ROUTE_NOT_FOUND
        );
        assert_eq!(
            m(Method::DELETE, "/openapi.json").unwrap_err().reason,
            Reason::ROUTE_NOT_FOUND
        );
        assert_eq!(
            m(Method::GET, "/v1/notes/").unwrap_err().reason,
            Reason::ROUTE_NOT_FOUND
        );
        assert_eq!(
            m(Method::GET, "/v1/notes/a:frobnicate").unwrap_err().reason,
            Reason::ROUTE_NOT_FOUND
        );
        assert_eq!(
            m(Method::GET, "/v1/notes/%FF").unwrap_err().reason,
            Reason::VALIDATION_FAILED
        );
    }
}
