//! The one error type of notevault and the one table of reasons.
//!
//! Every failure a client can see is an [`Error`] carrying a [`Reason`]. The table in
//! [`reasons!`] gives each reason its HTTP status and its hint (one imperative sentence
//! naming the next request, per the interface specification). `surface::envelope` turns an
//! `Error` into the wire envelope in exactly one place; nothing else picks a status code.
//!
//! A hint reads right on every surface: it names each request it suggests as a `/v1` route
//! in backticks (`` `GET /v1/notes` ``), which each edge renders with [`render_hint`] (`/v1`
//! as written; MCP names the tool twin of a route beside it), and it names nothing only
//! one surface has (`Retry-After` comes with the `retryDelay` of `details`, which both
//! carry).

use std::collections::BTreeMap;
use std::fmt;

/// One row per reason of the interface specification: `Variant => (status, "hint")`.
macro_rules! reasons {
    ($($variant:ident => ($status:literal, $hint:literal),)*) => {
        /// The reasons of the interface specification (AIP-193 `ErrorInfo.reason`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Reason {
            $($variant,)*
        }

        impl Reason {
            /// Every reason, in table order.
            pub const ALL: &'static [Reason] = &[$(Reason::$variant,)*];

            /// The UPPER_SNAKE name sent as `reason`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$variant => stringify!($variant),)*
                }
            }

            /// The HTTP status this reason is answered with.
            pub fn status(self) -> u16 {
                match self {
                    $(Reason::$variant => $status,)*
                }
            }

            /// One imperative sentence naming the next request, routes as `/v1` names them
            /// (see [`render_hint`] for another surface).
            pub fn hint(self) -> &'static str {
                match self {
                    $(Reason::$variant => $hint,)*
                }
            }
        }
    };
}

#[allow(non_camel_case_types)]
mod table {
    reasons! {
        AUTH_MISSING => (401, "Send the request again with an `Authorization: Bearer <token>` header."),
        AUTH_INVALID => (401, "Get a new access token, then retry with the `Authorization: Bearer` header."),
        VAULT_FORBIDDEN => (403, "Use a token whose `vault_id` or mapped `org_id` matches a vault on this server."),
        PERMISSION_MISSING => (403, "Use a token with the permission named in `scope`, then retry."),
        AUTH_UNAVAILABLE => (503, "The identity provider's signing keys cannot be fetched right now; retry after `Retry-After` seconds with the same token."),
        GRANT_INVALID => (400, "The identity provider refused this code or refresh token: start the sign-in again for a new code, then retry `POST /v1/auth/token`."),
        IDP_UNAVAILABLE => (502, "The identity provider did not answer well; retry `POST /v1/auth/token` after `Retry-After` seconds."),
        IDP_NOT_CONFIGURED => (503, "This daemon has no identity provider for the token proxy: its operator sets `idp_token_url` and `IDP_API_KEY`; until then use a personal access token."),
        CREDENTIAL_FORBIDDEN => (403, "Call this route from a signed-in session: a personal access token may not call session-only routes or the key route."),
        NOTE_NOT_FOUND => (404, "List notes with `GET /v1/notes`, then retry with an existing slug or note_id."),
        VERSION_NOT_FOUND => (404, "List revisions with `GET /v1/notes/{note}:listRevisions`, then retry with a listed id."),
        FOLDER_NOT_FOUND => (404, "List folders with `GET /v1/folders`, then retry with an existing path."),
        ATTACHMENT_NOT_FOUND => (404, "List attachments with `GET /v1/attachments`, then retry with an existing name."),
        ATTACHMENT_AMBIGUOUS => (409, "Retry the attachment read with one `sha256` listed in the `details` metadata."),
        EXPORT_NOT_FOUND => (404, "Ask `POST /v1/export` again for a new archive and its link."),
        PENDING_WRITE_NOT_FOUND => (404, "List pending writes with `GET /v1/writes`, then retry with an existing id."),
        ROUTE_NOT_FOUND => (404, "Read `GET /openapi.json`, then call a documented route and method."),
        VALIDATION_FAILED => (400, "Fix the `fieldViolations` listed in `details`, then retry the same request."),
        INVALID_FILTER => (400, "Retry with a `filter` that uses only documented fields and operators."),
        INVALID_UPDATE_MASK => (400, "Retry the PATCH with an `update_mask` of only `title`, `content`, `folder`, `tags`, `status`, `frontmatter.<key>` (for write settings: `write_policy`, `write_budget`)."),
        UNSAFE_PATH => (400, "Retry with a vault-relative path that stays inside the vault (no `..`, no absolute path, no link leaving the vault)."),
        IDEMPOTENCY_KEY_MISSING => (400, "Retry the write with an `Idempotency-Key` header unique to the operation."),
        IDEMPOTENCY_KEY_REUSED => (422, "This key was used with a different request; retry with a fresh idempotency key."),
        REVISION_CONTENT_MISSING => (410, "This revision's bytes were never recorded in history (`details` says why); diff or roll back to another revision listed by `GET /v1/notes/{note}:listRevisions`."),
        HISTORY_BEHIND => (503, "History has not recorded this revision yet; read `history` in `GET /v1/index-status`, then retry after `Retry-After` seconds (the `retryDelay` in `details`)."),
        VERSION_MOVED => (409, "Read the note's current `version_id` with `GET /v1/notes/{note}`, then retry the write with it and a fresh idempotency key."),
        NAME_COLLISION => (409, "List notes with `GET /v1/notes` or folders with `GET /v1/folders`, then retry with a path that does not exist."),
        ALREADY_DECIDED => (409, "List writes with `GET /v1/writes?status=applied` or `status=rejected`; do not retry the same approve or reject."),
        ALREADY_ENABLED => (409, "Private notes are already enabled for this vault; read `GET /v1/sync/e2ee` instead."),
        EDIT_AMBIGUOUS => (422, "Retry `POST /v1/notes/{note}:edit` with a longer `old_string` that matches exactly one place (see `candidate_lines` in the ErrorInfo metadata)."),
        EDIT_MATCH_NOT_FOUND => (422, "Read the note with `GET /v1/notes/{note}`, then retry `POST /v1/notes/{note}:edit` with an `old_string` present in the current body."),
        WRITE_REFUSED => (422, "Read `write_policy` with `GET /v1/vault` and the queued writes with `GET /v1/writes`, then retry with a write the policy allows."),
        WRITE_BUDGET_EXCEEDED => (429, "Ask a reviewer to apply the remaining work, or wait `Retry-After` seconds (the `retryDelay` in `details`) and retry with a fresh idempotency key."),
        RATE_LIMITED => (429, "Wait `Retry-After` seconds, then retry the same request with the same `Idempotency-Key`."),
        SYNC_COMPACTED => (410, "Read `GET /v1/sync/snapshot`, then read `GET /v1/sync/ops` with `after_seq` set to `compacted_through_seq` from `details`."),
        STORAGE_UNAVAILABLE => (503, "Database storage is not configured or not running; configure it, then retry."),
        BLOB_STORE_UNAVAILABLE => (503, "Blob storage settings are missing; configure them, then retry the attachment read."),
        UNSUPPORTED_MEDIA_TYPE => (415, "Retry the upload with an allowed content type (`application/json` for JSON bodies)."),
        PAYLOAD_TOO_LARGE => (413, "Retry the upload with a body under the byte cap."),
        ORIGIN_FORBIDDEN => (403, "Call the daemon through a loopback address such as `http://127.0.0.1:4000`, or add this host or origin to `allowed_hosts` / `allowed_origins`."),
        URI_TOO_LONG => (414, "Retry with a shorter request target: narrow the query, or send a long query as the JSON body of a route that takes one."),
        RANGE_NOT_SATISFIABLE => (416, "Retry with a `Range` inside the attachment's `Content-Length`, or without a `Range`."),
        HEADERS_TOO_LARGE => (431, "Retry with fewer or smaller request headers."),
        MALFORMED_REQUEST => (400, "Send a well-formed HTTP/1.1 request (ASCII request line, `Name: value` header lines)."),
        REQUEST_TIMEOUT => (408, "Send the whole request body without long pauses, then retry."),
        SERVER_BUSY => (503, "Wait `Retry-After` seconds, then retry; reuse an open connection instead of opening many."),
        INSUFFICIENT_STORAGE => (507, "The disk holding the vault or its state directory is full, and a delete frees nothing (the note moves to `.trash/` on the same disk): free space on that disk outside the daemon (empty `.trash/`, say), then retry the write with the same idempotency key."),
        INTERNAL => (500, "Retry the request; if it persists, report it with the `requestId`."),
    }
}

pub use table::Reason;

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a backticked span of a hint names a route: an HTTP method, a space, a path.
fn is_route(span: &str) -> bool {
    span.split_once(' ').is_some_and(|(method, path)| {
        ["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&method) && path.starts_with('/')
    })
}

/// The routes `hint` names (its backticked spans `METHOD /path`), in order.
pub fn hint_routes(hint: &str) -> Vec<&str> {
    hint.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| is_route(span))
        .collect()
}

/// `hint` as a surface shows it: each route it names (a backticked `METHOD /path`) is
/// replaced by what `route` answers for it (given without backticks), or kept as written
/// when `route` answers `None`. The `/v1` envelope shows hints as written; the MCP edge
/// names a route's tool twin.
pub fn render_hint(hint: &str, route: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(hint.len() + 64);
    for (i, part) in hint.split('`').enumerate() {
        if i % 2 == 0 {
            out.push_str(part);
        } else if let Some(rendered) = is_route(part).then(|| route(part)).flatten() {
            out.push_str(&rendered);
        } else {
            out.push('`');
            out.push_str(part);
            out.push('`');
        }
    }
    out
}

/// One violated field of a request (`BadRequest.fieldViolations`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    pub field: String,
    pub description: String,
}

/// The error every layer returns. The message is lowercase, without a trailing period.
#[derive(Debug, Clone)]
pub struct Error {
    pub reason: Reason,
    pub message: String,
    /// `ErrorInfo.metadata`: string values, per AIP-193.
    pub metadata: BTreeMap<String, String>,
    /// `BadRequest.fieldViolations`, for `VALIDATION_FAILED`.
    pub field_violations: Vec<FieldViolation>,
    /// Seconds to wait before a retry (`Retry-After`, `RetryInfo`), for 429s.
    pub retry_after: Option<u64>,
    /// What caused it (an IO, SQLite or git error), for logs and `source()`; never part
    /// of an answer.
    pub cause: Option<std::sync::Arc<dyn std::error::Error + Send + Sync>>,
}

impl Error {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            metadata: BTreeMap::new(),
            field_violations: Vec::new(),
            retry_after: None,
            cause: None,
        }
    }

    /// `VALIDATION_FAILED` naming one field.
    pub fn invalid_field(field: impl Into<String>, description: impl Into<String>) -> Self {
        let field = field.into();
        let description = description.into();
        let mut err = Self::new(
            Reason::VALIDATION_FAILED,
            format!("invalid `{field}`: {description}"),
        );
        err.field_violations
            .push(FieldViolation { field, description });
        err
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(
            Reason::NOTE_NOT_FOUND,
            format!("no note `{what}` in this vault"),
        )
        .with_meta("note", what)
    }

    /// An IO failure of an operation on one kind of thing: a missing file answers
    /// `missing`, the not-found reason of what the operation reads (`NOTE_NOT_FOUND` for a
    /// note's file, `VERSION_NOT_FOUND` for a revision, `FOLDER_NOT_FOUND`,
    /// `ATTACHMENT_NOT_FOUND`); any other failure is `INTERNAL`.
    pub fn io(missing: Reason, err: std::io::Error) -> Self {
        match err.kind() {
            std::io::ErrorKind::NotFound => Self::new(missing, err.to_string()),
            _ => Self::io_write(&err, &err),
        }
        .with_cause(err)
    }

    /// An IO failure with `message`: `INSUFFICIENT_STORAGE` when the disk (or the quota)
    /// is full, else `INTERNAL`.
    pub fn io_write(err: &std::io::Error, message: impl fmt::Display) -> Self {
        if storage_full(err) {
            Self::new(Reason::INSUFFICIENT_STORAGE, message.to_string())
        } else {
            Self::internal(message)
        }
    }

    /// [`Error::io`] for reading a note's file: missing is `NOTE_NOT_FOUND`.
    pub fn io_note(err: std::io::Error) -> Self {
        Self::io(Reason::NOTE_NOT_FOUND, err)
    }

    pub fn unsafe_path(message: impl Into<String>) -> Self {
        Self::new(Reason::UNSAFE_PATH, message)
    }

    pub fn internal(message: impl fmt::Display) -> Self {
        Self::new(Reason::INTERNAL, message.to_string())
    }

    /// An internal error whose message is `cause`'s text, kept as its source.
    pub fn internal_cause(cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::internal(&cause).with_cause(cause)
    }

    /// Keep `cause` as this error's source (the message already says what a client
    /// may read of it).
    pub fn with_cause(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.cause = Some(std::sync::Arc::new(cause));
        self
    }

    pub fn with_meta(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Transitional: `?` on an `io::Error` still answers as [`Error::io_note`] for the one
/// call site that relies on it (`Service::read`, reading a note's file again, being moved
/// to the queries module; a note is what is missing there). That site should call
/// `Error::io_note` and this impl go: an IO error answers the reason of what the operation
/// was reading ([`Error::io`]), never `NOTE_NOT_FOUND` by default.
impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        let full = matches!(&err, rusqlite::Error::SqliteFailure(e, _) if e.code == rusqlite::ErrorCode::DiskFull);
        let reason = if full {
            Reason::INSUFFICIENT_STORAGE
        } else {
            Reason::STORAGE_UNAVAILABLE
        };
        Self::new(reason, format!("metadata store: {err}")).with_cause(err)
    }
}

/// Whether an IO error says the disk or the quota is full (ENOSPC, EDQUOT).
pub fn storage_full(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_keeps_its_cause_as_source_and_out_of_its_message() {
        use std::error::Error as _;
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let err = Error::io(Reason::NOTE_NOT_FOUND, io);
        assert_eq!(err.reason, Reason::INTERNAL);
        let source = err.source().expect("the IO error is kept");
        let io = source.downcast_ref::<std::io::Error>().unwrap();
        assert_eq!(io.kind(), std::io::ErrorKind::PermissionDenied);
        let sqlite = Error::from(rusqlite::Error::InvalidQuery);
        assert!(sqlite.source().unwrap().is::<rusqlite::Error>());
        assert!(Error::internal("plain").source().is_none());
    }

    #[test]
    fn the_table_holds_all_33_reasons_of_the_spec() {
        const SPEC: [&str; 33] = [
            "AUTH_MISSING",
            "AUTH_INVALID",
            "VAULT_FORBIDDEN",
            "PERMISSION_MISSING",
            "CREDENTIAL_FORBIDDEN",
            "NOTE_NOT_FOUND",
            "VERSION_NOT_FOUND",
            "FOLDER_NOT_FOUND",
            "ATTACHMENT_NOT_FOUND",
            "ATTACHMENT_AMBIGUOUS",
            "PENDING_WRITE_NOT_FOUND",
            "ROUTE_NOT_FOUND",
            "VALIDATION_FAILED",
            "INVALID_FILTER",
            "INVALID_UPDATE_MASK",
            "UNSAFE_PATH",
            "IDEMPOTENCY_KEY_MISSING",
            "IDEMPOTENCY_KEY_REUSED",
            "VERSION_MOVED",
            "NAME_COLLISION",
            "ALREADY_DECIDED",
            "ALREADY_ENABLED",
            "EDIT_AMBIGUOUS",
            "EDIT_MATCH_NOT_FOUND",
            "WRITE_REFUSED",
            "WRITE_BUDGET_EXCEEDED",
            "RATE_LIMITED",
            "SYNC_COMPACTED",
            "STORAGE_UNAVAILABLE",
            "BLOB_STORE_UNAVAILABLE",
            "UNSUPPORTED_MEDIA_TYPE",
            "PAYLOAD_TOO_LARGE",
            "INTERNAL",
        ];
        for name in SPEC {
            assert!(
                Reason::ALL.iter().any(|r| r.as_str() == name),
                "{name} is missing"
            );
        }
        // Extensions: ORIGIN_FORBIDDEN for the Host/Origin guard; REVISION_CONTENT_MISSING
        // and HISTORY_BEHIND for a revision whose bytes history does not hold.
        // URI_TOO_LONG, HEADERS_TOO_LARGE, MALFORMED_REQUEST, REQUEST_TIMEOUT and
        // SERVER_BUSY for what the HTTP server refuses before a route (api::server).
        // AUTH_UNAVAILABLE (an issuer's keys cannot be fetched), GRANT_INVALID,
        // IDP_UNAVAILABLE and IDP_NOT_CONFIGURED: the token proxy's refusals.
        // RANGE_NOT_SATISFIABLE: an attachment download's `Range` past its end.
        // INSUFFICIENT_STORAGE (507): a write on a full disk.
        // EXPORT_NOT_FOUND: an export link whose archive is gone from the blob store.
        assert_eq!(Reason::ALL.len(), 48);
        for reason in Reason::ALL {
            let hint = reason.hint();
            assert!(hint.ends_with('.'), "{reason}: a hint is one sentence");
            assert!((400..600).contains(&reason.status()), "{reason}");
        }
    }

    #[test]
    fn io_errors_answer_the_reason_of_what_was_read() {
        use std::io::{Error as IoError, ErrorKind};
        let missing = || IoError::new(ErrorKind::NotFound, "gone");
        assert_eq!(Error::io_note(missing()).reason, Reason::NOTE_NOT_FOUND);
        for reason in [
            Reason::VERSION_NOT_FOUND,
            Reason::FOLDER_NOT_FOUND,
            Reason::ATTACHMENT_NOT_FOUND,
        ] {
            assert_eq!(Error::io(reason, missing()).reason, reason);
        }
        let full = IoError::from_raw_os_error(libc::ENOSPC);
        assert_eq!(
            Error::io(Reason::NOTE_NOT_FOUND, full).reason,
            Reason::INSUFFICIENT_STORAGE
        );
        let quota = IoError::from_raw_os_error(libc::EDQUOT);
        assert_eq!(
            Error::io_write(&quota, "x").reason,
            Reason::INSUFFICIENT_STORAGE
        );
        let denied = IoError::new(ErrorKind::PermissionDenied, "no");
        assert_eq!(
            Error::io(Reason::FOLDER_NOT_FOUND, denied).reason,
            Reason::INTERNAL
        );
    }

    #[test]
    fn hints_render_their_routes_per_surface() {
        let hint = "List notes with `GET /v1/notes` or `x`, then `GET /v1/writes?status=applied`.";
        assert_eq!(
            hint_routes(hint),
            ["GET /v1/notes", "GET /v1/writes?status=applied"]
        );
        assert_eq!(render_hint(hint, |_| None), hint);
        assert_eq!(
            render_hint(hint, |route| (route == "GET /v1/notes")
                .then(|| "the tool".into())),
            "List notes with the tool or `x`, then `GET /v1/writes?status=applied`."
        );
    }

    #[test]
    fn statuses_follow_the_design() {
        assert_eq!(Reason::INVALID_UPDATE_MASK.status(), 400);
        assert_eq!(Reason::VERSION_MOVED.status(), 409);
        assert_eq!(Reason::ALREADY_DECIDED.status(), 409);
        assert_eq!(Reason::EDIT_AMBIGUOUS.status(), 422);
        assert_eq!(Reason::RATE_LIMITED.status(), 429);
        assert_eq!(Reason::WRITE_BUDGET_EXCEEDED.status(), 429);
        assert_eq!(Reason::STORAGE_UNAVAILABLE.status(), 503);
        assert_eq!(Reason::SYNC_COMPACTED.status(), 410);
    }
}
