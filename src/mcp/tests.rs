//! Unit tests of the MCP server: tool twins and hints as agents read them.

use super::*;
use crate::api::routes;
use crate::auth::Need;
use crate::error::hint_routes;

/// Each tool's twin is a served `/v1` route, one tool per route; a read tool's twin
/// needs no permission.
#[test]
fn every_tool_twin_is_a_served_route() {
    let table = routes::table();
    for tool in tools::TOOLS {
        let route = table
            .iter()
            .find(|r| format!("{} {}", r.method, r.template) == tool.twin)
            .unwrap_or_else(|| panic!("{}: {} is not served", tool.name, tool.twin));
        if tool.access == tools::Access::Read {
            assert_eq!(route.access.need, Need::Read, "{}", tool.name);
        }
        assert_eq!(tools::twin_of(tool.twin), Some(tool.name));
    }
}

/// The reasons answered over HTTP before a request reaches a tool (the `/mcp`
/// request itself is refused), or only by `/v1` routes no tool calls.
const BEFORE_A_TOOL: &[Reason] = &[
    Reason::AUTH_MISSING,
    Reason::AUTH_INVALID,
    Reason::AUTH_UNAVAILABLE,
    Reason::VAULT_FORBIDDEN,
    Reason::ROUTE_NOT_FOUND,
    // The token proxy's: `/v1` only.
    Reason::GRANT_INVALID,
    Reason::IDP_UNAVAILABLE,
    Reason::IDP_NOT_CONFIGURED,
    Reason::IDEMPOTENCY_KEY_MISSING,
    Reason::RATE_LIMITED,
    Reason::ORIGIN_FORBIDDEN,
    Reason::URI_TOO_LONG,
    Reason::HEADERS_TOO_LARGE,
    Reason::RANGE_NOT_SATISFIABLE,
    Reason::MALFORMED_REQUEST,
    Reason::REQUEST_TIMEOUT,
    Reason::SERVER_BUSY,
];

/// Every reason's hint as an MCP caller reads it: the reasons whose hint names a route
/// with a tool twin, written out; every other hint reads as on `/v1`.
#[test]
fn every_hint_reads_right_over_mcp() {
    use Reason as R;
    let expected = [
        (R::NOTE_NOT_FOUND, "List notes with the `list_notes` tool (`GET /v1/notes` over HTTP), then retry with an existing slug or note_id."),
        (R::VERSION_NOT_FOUND, "List revisions with the `list_revisions` tool (`GET /v1/notes/{note}:listRevisions` over HTTP), then retry with a listed id."),
        (R::ATTACHMENT_NOT_FOUND, "List attachments with the `list_attachments` tool (`GET /v1/attachments` over HTTP), then retry with an existing name."),
        (R::FOLDER_NOT_FOUND, "List folders with the `list_folders` tool (`GET /v1/folders` over HTTP), then retry with an existing path."),
        (R::REVISION_CONTENT_MISSING, "This revision's bytes were never recorded in history (`details` says why); diff or roll back to another revision listed by the `list_revisions` tool (`GET /v1/notes/{note}:listRevisions` over HTTP)."),
        (R::VERSION_MOVED, "Read the note's current `version_id` with the `read_note` tool (`GET /v1/notes/{note}` over HTTP), then retry the write with it and a fresh idempotency key."),
        (R::NAME_COLLISION, "List notes with the `list_notes` tool (`GET /v1/notes` over HTTP) or folders with the `list_folders` tool (`GET /v1/folders` over HTTP), then retry with a path that does not exist."),
        (R::EDIT_MATCH_NOT_FOUND, "Read the note with the `read_note` tool (`GET /v1/notes/{note}` over HTTP), then retry the `edit_note` tool (`POST /v1/notes/{note}:edit` over HTTP) with an `old_string` present in the current body."),
        (R::EDIT_AMBIGUOUS, "Retry the `edit_note` tool (`POST /v1/notes/{note}:edit` over HTTP) with a longer `old_string` that matches exactly one place (see `candidate_lines` in the ErrorInfo metadata)."),
        (R::WRITE_REFUSED, "Read `write_policy` with the `vault_summary` tool (`GET /v1/vault` over HTTP) and the queued writes with `GET /v1/writes`, then retry with a write the policy allows."),
    ];
    for reason in Reason::ALL {
        let over_mcp = hint_for_agents(*reason);
        match expected.iter().find(|(r, _)| r == reason) {
            Some((_, hint)) => assert_eq!(over_mcp, *hint, "{reason}"),
            None => assert_eq!(over_mcp, reason.hint(), "{reason}"),
        }
        for route in hint_routes(reason.hint()) {
            if let Some(tool) = tools::twin_of(route) {
                let named = format!("the `{tool}` tool (`{route}` over HTTP)");
                assert!(over_mcp.contains(&named), "{reason}: {over_mcp}");
            }
        }
        // A hint a tool can answer names no HTTP header alone: `Retry-After` comes
        // with the `retryDelay` of `details`, and idempotency keys by their name.
        if !BEFORE_A_TOOL.contains(reason) {
            if over_mcp.contains("`Retry-After`") {
                assert!(over_mcp.contains("`retryDelay`"), "{reason}");
            }
            assert!(!over_mcp.contains("`Idempotency-Key`"), "{reason}");
        }
    }
}

/// The envelope of a tool error carries the MCP rendering of the hint, and the rest as
/// `/v1` answers it.
#[test]
fn a_tool_error_carries_the_hint_for_agents() {
    let err = Error::not_found("nope");
    let result = tool_error(&err).into_result();
    let body = result.structured_content.unwrap();
    assert_eq!(body["hint"], hint_for_agents(Reason::NOTE_NOT_FOUND));
    assert_eq!(body["reason"], "NOTE_NOT_FOUND");
    assert_eq!(body["message"], err.message);
    assert_eq!(result.is_error, Some(true));
}
