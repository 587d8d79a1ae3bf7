//! The route table: every route the daemon serves, in one list, matched on the raw
//! (still percent-encoded) request path.
//!
//! axum's router (matchit) cannot express the specification's routes: `{note}` is a slug
//! whose `/` may be raw or `%2F`, and custom methods follow it in the same segment
//! (`/v1/notes/{note}:edit`). So the table below is matched here, the OpenAPI document
//! lists the same paths (a test checks both directions), and nothing else routes.
//!
//! Each row also says what the route is for the guards: its rate-limit [`Class`] and the
//! [`Need`] its caller must meet, which `dispatch` checks once through `auth::require`.
//! `/mcp` is served by rmcp beside the table; its access is [`MCP`].

use axum::http::Method;
use percent_encoding::percent_decode_str;

use crate::api::guard::Class;
use crate::auth::{self, Need, Permission};
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
    AppendNote,
    ReplaceSection,
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
    AuthToken,
    ResourceMetadata,
    McpResourceMetadata,
    CreateFolder,
    MoveFolder,
    RenameFolder,
    DeleteFolder,
    ListAttachments,
    UploadAttachment,
    PresignAttachment,
    GetAttachment,
    PutAttachment,
    DeleteAttachment,
    MoveAttachment,
    RenameAttachment,
    AuditEvents,
    Export,
    GetExport,
    PurgeVault,
    SyncOps,
    SyncPush,
    SyncSnapshot,
    SyncCheckpoint,
    SyncCompact,
    SyncE2ee,
    SyncE2eeEnable,
    SyncE2eeKeys,
}

/// Where the protected-resource metadata is served (RFC 9728 section 3); the MCP
/// endpoint's is this path followed by `/mcp`.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// What a route is for the guards: its rate-limit class (`None`: not limited; the spec
/// limits `/v1` and `/mcp` only) and what its caller needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub class: Option<Class>,
    pub need: Need,
}

/// The contract: unlimited, and served without a credential.
pub const PUBLIC: Access = Access {
    class: None,
    need: Need::Nothing,
};
/// A read: any credential (read access comes with every token).
pub const READ: Access = Access {
    class: Some(Class::Read),
    need: Need::Read,
};
/// A note mutation: `notes.write`.
pub const WRITE: Access = Access {
    class: Some(Class::Write),
    need: Need::Permission(Permission::NotesWrite),
};
/// A read of what only a reviewer may see (`GET /v1/writes/{id}`): `notes.review`.
pub const REVIEW_READ: Access = Access {
    class: Some(Class::Read),
    need: Need::Permission(Permission::NotesReview),
};
/// A review action (approve, reject, write-settings PATCH): `notes.review`.
pub const REVIEW: Access = Access {
    class: Some(Class::Write),
    need: Need::Permission(Permission::NotesReview),
};
/// `/mcp`: read rate limit, any credential; the tools it lists depend on the credential
/// (`auth::mcp_write_tools`).
pub const MCP: Access = READ;

/// A presigned link: any credential (a PUT link also needs `notes.write`, which the
/// handler asks `auth::require` about), limited as a write.
pub const PRESIGN: Access = Access {
    class: Some(Class::Write),
    need: Need::Read,
};

/// The key routes (`POST /v1/sync/e2ee:enable`, `PUT /v1/sync/e2ee/keys`): a session
/// (never a personal access token) with `notes.write` and `notes.review`
/// ([`auth::OWNER`]: a key change can lock every device out of the private notes, so an
/// agent's write token may not make one); limited as a write.
pub const KEYS: Access = Access {
    class: Some(Class::Write),
    need: Need::Session(auth::OWNER),
};
/// A session-only read (`GET /v1/audit-events`): a signed-in session, never a personal
/// access token.
pub const SESSION_READ: Access = Access {
    class: Some(Class::Read),
    need: Need::SignedIn(&[]),
};
/// Export: a signed-in session (what it reads, any credential may read), limited as a
/// write.
pub const EXPORT: Access = Access {
    class: Some(Class::Write),
    need: Need::SignedIn(&[]),
};
/// An export archive in the blob store: its presigned link (or a signed-in session),
/// limited as a read.
pub const EXPORT_LINK: Access = Access {
    class: Some(Class::Read),
    need: Need::Link,
};
/// Purge: a signed-in session with `notes.write` and `notes.review` ([`auth::OWNER`]),
/// limited as a write.
pub const PURGE: Access = Access {
    class: Some(Class::Write),
    need: Need::SignedIn(auth::OWNER),
};

/// The token proxy: open, limited as a write.
pub const PROXY: Access = Access {
    class: Some(Class::Write),
    need: Need::Nothing,
};

/// One served route: method, OpenAPI path template, operation, access, and for a
/// deprecated legacy form the template of its canonical successor.
#[derive(Debug, Clone)]
pub struct Route {
    pub method: Method,
    pub template: &'static str,
    pub op: Op,
    pub access: Access,
    pub successor: Option<&'static str>,
}

/// Every route, as the OpenAPI document names it, with its access.
pub fn routes() -> Vec<Route> {
    table().to_vec()
}

/// The route table, built once. Session-only routes (audit events, export, purge) need
/// `Need::SignedIn`; the key routes are [`KEYS`].
///
/// | route | credential | permissions |
/// |---|---|---|
/// | `GET /v1/audit-events` | signed-in session | any |
/// | `POST /v1/export` | signed-in session | any (read) |
/// | `POST /v1/vault/purge` | signed-in session | `notes.write` + `notes.review` |
/// | `POST /v1/sync/e2ee:enable`, `PUT /v1/sync/e2ee/keys` | session (open mode passes) | `notes.write` + `notes.review` |
pub fn table() -> &'static [Route] {
    static TABLE: std::sync::OnceLock<Vec<Route>> = std::sync::OnceLock::new();
    TABLE.get_or_init(build)
}

fn build() -> Vec<Route> {
    let r = |method: Method, template, op, access| Route {
        method,
        template,
        op,
        access,
        successor: None,
    };
    let legacy = |method, template, op, access, successor| Route {
        method,
        template,
        op,
        access,
        successor: Some(successor),
    };
    use Method as M;
    vec![
        r(M::GET, "/openapi.json", Op::OpenApi, PUBLIC),
        r(M::GET, METADATA_PATH, Op::ResourceMetadata, PUBLIC),
        r(
            M::GET,
            "/.well-known/oauth-protected-resource/mcp",
            Op::McpResourceMetadata,
            PUBLIC,
        ),
        r(M::POST, "/v1/auth/token", Op::AuthToken, PROXY),
        r(M::GET, "/v1/notes", Op::ListNotes, READ),
        r(M::GET, "/v1/folders", Op::ListFolders, READ),
        r(M::POST, "/v1/folders", Op::CreateFolder, WRITE),
        r(M::POST, "/v1/folders:move", Op::MoveFolder, WRITE),
        r(M::POST, "/v1/folders:rename", Op::RenameFolder, WRITE),
        r(M::POST, "/v1/folders:delete", Op::DeleteFolder, WRITE),
        r(M::POST, "/v1/notes", Op::CreateNote, WRITE),
        r(M::GET, "/v1/notes/{note}", Op::GetNote, READ),
        r(M::PATCH, "/v1/notes/{note}", Op::PatchNote, WRITE),
        r(M::DELETE, "/v1/notes/{note}", Op::DeleteNote, WRITE),
        r(M::GET, "/v1/notes/{note}/raw", Op::GetRaw, READ),
        r(M::POST, "/v1/notes/{note}:edit", Op::EditNote, WRITE),
        r(M::POST, "/v1/notes/{note}:append", Op::AppendNote, WRITE),
        r(
            M::POST,
            "/v1/notes/{note}:replaceSection",
            Op::ReplaceSection,
            WRITE,
        ),
        r(M::POST, "/v1/notes/{note}:move", Op::MoveNote, WRITE),
        r(M::POST, "/v1/notes/{note}:rename", Op::RenameNote, WRITE),
        r(
            M::POST,
            "/v1/notes/{note}:rollback",
            Op::RollbackNote,
            WRITE,
        ),
        r(
            M::GET,
            "/v1/notes/{note}:listRevisions",
            Op::ListRevisions,
            READ,
        ),
        r(M::GET, "/v1/notes/{note}:diff", Op::DiffNote, READ),
        r(M::GET, "/v1/notes/{note}:links", Op::NoteLinks, READ),
        r(M::GET, "/v1/index-status", Op::IndexStatus, READ),
        r(M::GET, "/v1/search", Op::Search, READ),
        r(M::GET, "/v1/grep", Op::Grep, READ),
        r(M::GET, "/v1/tags", Op::Tags, READ),
        // A query sent as POST (its filter can be long): a read.
        r(
            M::POST,
            "/v1/properties:aggregate",
            Op::AggregateProperties,
            READ,
        ),
        r(M::GET, "/v1/vault", Op::Vault, READ),
        r(
            M::GET,
            "/v1/vault/write-settings",
            Op::GetWriteSettings,
            READ,
        ),
        r(
            M::PATCH,
            "/v1/vault/write-settings",
            Op::PatchWriteSettings,
            REVIEW,
        ),
        r(M::GET, "/v1/attachments", Op::ListAttachments, READ),
        r(M::POST, "/v1/attachments", Op::UploadAttachment, WRITE),
        r(
            M::POST,
            "/v1/attachments/{file_name}:move",
            Op::MoveAttachment,
            WRITE,
        ),
        r(
            M::POST,
            "/v1/attachments/{file_name}:rename",
            Op::RenameAttachment,
            WRITE,
        ),
        // A GET link needs read access, a PUT link `notes.write` (checked in the
        // handler); as a POST it is limited as a write.
        r(
            M::POST,
            "/v1/attachments:presign",
            Op::PresignAttachment,
            PRESIGN,
        ),
        r(
            M::GET,
            "/v1/attachments/{file_name}",
            Op::GetAttachment,
            READ,
        ),
        r(
            M::PUT,
            "/v1/attachments/{file_name}",
            Op::PutAttachment,
            WRITE,
        ),
        r(
            M::DELETE,
            "/v1/attachments/{file_name}",
            Op::DeleteAttachment,
            WRITE,
        ),
        r(M::GET, "/v1/audit-events", Op::AuditEvents, SESSION_READ),
        r(M::POST, "/v1/export", Op::Export, EXPORT),
        r(M::GET, "/v1/exports/{export}", Op::GetExport, EXPORT_LINK),
        r(M::POST, "/v1/vault/purge", Op::PurgeVault, PURGE),
        r(M::GET, "/v1/sync/ops", Op::SyncOps, READ),
        r(M::POST, "/v1/sync/ops", Op::SyncPush, WRITE),
        r(M::GET, "/v1/sync/snapshot", Op::SyncSnapshot, READ),
        r(M::POST, "/v1/sync/checkpoint", Op::SyncCheckpoint, WRITE),
        // Compaction drops what devices could still read: a reviewer's action.
        r(M::POST, "/v1/sync:compact", Op::SyncCompact, REVIEW),
        r(M::GET, "/v1/sync/e2ee", Op::SyncE2ee, READ),
        r(M::POST, "/v1/sync/e2ee:enable", Op::SyncE2eeEnable, KEYS),
        r(M::PUT, "/v1/sync/e2ee/keys", Op::SyncE2eeKeys, KEYS),
        r(M::GET, "/v1/writes", Op::ListWrites, READ),
        r(M::GET, "/v1/writes/{id}", Op::GetWrite, REVIEW_READ),
        r(M::POST, "/v1/writes/{id}:approve", Op::ApproveWrite, REVIEW),
        r(M::POST, "/v1/writes/{id}:reject", Op::RejectWrite, REVIEW),
        legacy(
            M::POST,
            "/v1/notes/{note}/edit",
            Op::EditNote,
            WRITE,
            "/v1/notes/{note}:edit",
        ),
        legacy(
            M::POST,
            "/v1/notes/{note}/move",
            Op::MoveNote,
            WRITE,
            "/v1/notes/{note}:move",
        ),
        legacy(
            M::POST,
            "/v1/notes/{note}/rename",
            Op::RenameNote,
            WRITE,
            "/v1/notes/{note}:rename",
        ),
        legacy(
            M::GET,
            "/v1/notes/{note}/versions",
            Op::ListRevisions,
            READ,
            "/v1/notes/{note}:listRevisions",
        ),
        legacy(
            M::POST,
            "/v1/writes/{id}/approve",
            Op::ApproveWrite,
            REVIEW,
            "/v1/writes/{id}:approve",
        ),
        legacy(
            M::POST,
            "/v1/writes/{id}/reject",
            Op::RejectWrite,
            REVIEW,
            "/v1/writes/{id}:reject",
        ),
    ]
}

/// The rate-limit class of a request, before it is routed: the class of the row that
/// serves `method` on the raw `path` (`/mcp`: [`MCP`]). A request no row serves is limited
/// as the spec's limits say by area: a GET under `/v1` is a read; a POST, PATCH, PUT or
/// DELETE under `/v1` a write; anything under `/mcp` a read. Everything else (the web
/// console's pages, its sign-in, anything not found) is limited the same way by method:
/// an unauthenticated `GET /sign-in/idp` stores a sign-in under way, and nothing should
/// let one client store those without bound.
pub fn class(method: &Method, path: &str) -> Option<Class> {
    if path == "/mcp" {
        return MCP.class;
    }
    let served = table()
        .iter()
        .find(|route| serves(route, method) && match_template(route.template, path).is_some());
    if let Some(route) = served {
        return route.access.class;
    }
    if path.starts_with("/mcp/") {
        return Some(Class::Read);
    }
    match *method {
        Method::GET | Method::HEAD => Some(Class::Read),
        Method::POST | Method::PATCH | Method::PUT | Method::DELETE => Some(Class::Write),
        _ => None,
    }
}

/// Whether `route` answers `method` (a HEAD is served by the GET row).
fn serves(route: &Route, method: &Method) -> bool {
    route.method == *method || (*method == Method::HEAD && route.method == Method::GET)
}

/// A matched route and its decoded path parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    pub op: Op,
    pub template: &'static str,
    pub access: Access,
    pub param: Option<String>,
    /// The raw (still encoded) parameter, to build a successor link.
    pub raw_param: Option<String>,
    pub successor: Option<&'static str>,
}

struct Candidate {
    op: Op,
    template: &'static str,
    access: Access,
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
    for route in table() {
        let Some(raw_param) = match_template(route.template, path) else {
            continue;
        };
        if !serves(route, method) {
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
            access: route.access,
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
        access: c.access,
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
    // Only a note slug and an attachment path may hold raw slashes.
    let pathlike = name == "note" || name == "file_name";
    if !pathlike && middle.contains('/') {
        return None;
    }
    // A colon method must not be swallowed by the bare `{note}` route.
    if suffix.is_empty() && pathlike && has_custom_method(middle) {
        return None;
    }
    Some(Some(middle.to_string()))
}

/// `projects%2Fa:edit` ends in a custom method; `a:b` with an unknown verb does not.
fn has_custom_method(raw: &str) -> bool {
    let last = crate::vault::path::file_name_of(raw);
    last.rsplit_once(':')
        .is_some_and(|(_, verb)| !verb.is_empty() && verb.chars().all(|c| c.is_ascii_alphabetic()))
}

#[cfg(test)]
mod tests;
