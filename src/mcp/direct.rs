//! The direct path: a stateless 2026-07-28 `tools/call` or `tools/list`, or a read tool's
//! `tools/call` in a handshake-era session, answered in the request's own task, without
//! rmcp's per-request machinery (for a stateless request: a service, a one-shot transport,
//! a spawned task and channels, and the standard-header checks done on a JSON value copy
//! of the message; for a session's: the session worker's task and channels, and an SSE
//! stream with its priming event around the one answer).
//!
//! A request takes this path only when it passes every check rmcp would make (the same
//! body, parsed once by `handle`; `Accept` naming JSON and SSE; for a stateless request
//! `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` each given once and matching the
//! body, and the request's `_meta` naming 2026-07-28 with every key that revision
//! requires; for a session's, one `Mcp-Session-Id` of a session rmcp holds and saw lately
//! (`sessions.rs`), a handshake-era `MCP-Protocol-Version` or none, and no per-request
//! revision) and asks for nothing rmcp alone does (log messages, `Mcp-Param-*` headers,
//! `q` weights or quoted `Accept` parameters; in a session, a write tool, whose author is
//! the client named at `initialize`). Anything else goes to rmcp, which answers it,
//! errors included, as it always did. The answer is the JSON-RPC message rmcp would send,
//! byte for byte (`tests/it/mcp.rs` compares the two paths): built from the same server
//! functions (`NotesServer::call`, `NotesServer::tools_listed`) and rmcp's own types,
//! except that a tool's answer is serialized once and the same bytes are the text content
//! and `structuredContent`. A session's answer is that message as `application/json`
//! (which the protocol lets a server choose for any POST), where rmcp sends it as the one
//! event of an SSE stream.

use std::sync::OnceLock;

use axum::http::header::{HeaderMap, ACCEPT, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetMeta, JsonObject, JsonRpcMessage, ProtocolVersion,
    RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::ServerHandler;

use super::{tools, NotesServer, Reply};

/// The revision the direct path serves.
const REVISION: &str = "2026-07-28";

/// A request the direct path answers.
pub struct Direct {
    id: RequestId,
    kind: Kind,
    /// The handshake-era session the request belongs to; `None`: a stateless request.
    session: Option<String>,
}

enum Kind {
    Call {
        name: String,
        arguments: Option<JsonObject>,
        client: Option<String>,
    },
    List,
}

impl Direct {
    /// `message` (with its HTTP `headers`) when the direct path answers it exactly as rmcp
    /// would; `None` hands it to rmcp.
    pub fn of(
        server: &NotesServer,
        headers: &HeaderMap,
        message: ClientJsonRpcMessage,
    ) -> Option<Self> {
        let JsonRpcMessage::Request(request) = message else {
            return None;
        };
        let meta = request.request.get_meta();
        if let Some(session) = session_fits(headers) {
            // A session's read tool call, without a revision or a log level of its own.
            if meta.protocol_version().is_some() || meta.log_level().is_some() {
                return None;
            }
            let ClientRequest::CallToolRequest(call) = request.request else {
                return None;
            };
            let name = call.params.name.into_owned();
            if !matches!(tools::find(&name), Some((tools::Access::Read, _))) {
                return None;
            }
            return Some(Self {
                id: request.id,
                kind: Kind::Call {
                    name,
                    arguments: call.params.arguments,
                    client: None,
                },
                session: Some(session),
            });
        }
        let revision = ProtocolVersion::V_2026_07_28;
        if meta.protocol_version().as_ref() != Some(&revision)
            || !meta.missing_required_keys(&revision).is_empty()
            // Log messages make the answer a stream of several messages: rmcp's.
            || meta.log_level().is_some()
            || !server.supported_protocol_versions().contains(&revision)
        {
            return None;
        }
        let client = meta
            .client_info()
            .map(|info| info.name)
            .filter(|name| !name.is_empty());
        let (method, kind) = match request.request {
            ClientRequest::CallToolRequest(call) => (
                "tools/call",
                Kind::Call {
                    name: call.params.name.into_owned(),
                    arguments: call.params.arguments,
                    client,
                },
            ),
            ClientRequest::ListToolsRequest(_) => ("tools/list", Kind::List),
            _ => return None,
        };
        let name = match &kind {
            Kind::Call { name, .. } => Some(name.as_str()),
            Kind::List => None,
        };
        headers_fit(headers, method, name).then_some(Self {
            id: request.id,
            kind,
            session: None,
        })
    }

    /// The handshake-era session of the request, if it has one: the direct path answers
    /// it only while [`super::sessions::Sessions::direct`] says so.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// The answer: HTTP 200 with the JSON-RPC response (a tool this caller is not offered
    /// gets rmcp's JSON-RPC error, also with 200, as rmcp answers it on this revision).
    pub async fn answer(self, server: &NotesServer, parts: &Parts) -> Response {
        let body = match self.kind {
            Kind::List => {
                let listed = tools_list_result(server.offers_writes(Some(parts)), server);
                envelope(&self.id, listed)
            }
            Kind::Call {
                name,
                arguments,
                client,
            } => {
                match server
                    .call(&name, arguments, Some(parts), client, tools::Form::Text)
                    .await
                {
                    Ok(reply) => call_result(&self.id, &reply, self.session.is_none()),
                    Err(error) => serde_json::to_vec(&ServerJsonRpcMessage::error(
                        error,
                        Some(self.id.clone()),
                    )),
                }
            }
        };
        match body {
            Ok(body) => {
                (StatusCode::OK, [(CONTENT_TYPE, "application/json")], body).into_response()
            }
            // Not reached: the id, an error and a result's parts serialize into a buffer.
            Err(e) => {
                tracing::error!(error = %e, "an MCP answer could not be serialized");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        }
    }
}

/// Whether the headers are ones rmcp accepts for `method` (and the tool `name`) on this
/// revision, written in the plain form the direct path checks without rmcp's parsers.
fn headers_fit(headers: &HeaderMap, method: &str, name: Option<&str>) -> bool {
    let only = |header: &str| only(headers, header);
    let name_fits = match name {
        Some(name) => only("mcp-name") == Some(name),
        None => !headers.contains_key("mcp-name"),
    };
    only("mcp-protocol-version") == Some(REVISION)
        && only("mcp-method") == Some(method)
        && name_fits
        && !headers.contains_key("mcp-session-id")
        && !headers
            .keys()
            .any(|key| key.as_str().starts_with("mcp-param-"))
        && accepts_json_and_sse(headers)
}

/// The session id of a handshake-era request whose headers are ones rmcp accepts on
/// every revision before 2026-07-28: one `Mcp-Session-Id`, at most one
/// `MCP-Protocol-Version` naming such a revision, none of the 2026-07-28 standard headers,
/// and the plain `Accept` of [`accepts_json_and_sse`].
fn session_fits(headers: &HeaderMap) -> Option<String> {
    let id = only(headers, "mcp-session-id")?;
    let version_fits = handshake_era(headers);
    let standard = headers.keys().any(|key| {
        let key = key.as_str();
        key == "mcp-method" || key == "mcp-name" || key.starts_with("mcp-param-")
    });
    (version_fits && !standard && accepts_json_and_sse(headers)).then(|| id.to_owned())
}

/// The value of `header` when it is given once, as text.
fn only<'a>(headers: &'a HeaderMap, header: &str) -> Option<&'a str> {
    let mut values = headers.get_all(header).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => value.to_str().ok(),
        _ => None,
    }
}

/// The request's `MCP-Protocol-Version` is a revision of the handshake era, given once,
/// or there is none (rmcp then serves it as such a request).
pub fn handshake_era(headers: &HeaderMap) -> bool {
    let mut versions = headers.get_all("mcp-protocol-version").iter();
    match (versions.next(), versions.next()) {
        (None, _) => true,
        (Some(version), None) => ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .any(|known| known.has_initialize() && version.as_bytes() == known.as_str().as_bytes()),
        (Some(_), Some(_)) => false,
    }
}

/// `Accept` names both `application/json` and `text/event-stream`, in the plain form
/// (no quoted strings, no `q` weights) where rmcp's reading and this one agree.
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        if value.contains('"') {
            return false;
        }
        for entry in value.split(',') {
            let mut pieces = entry.split(';');
            let essence = pieces.next().unwrap_or_default().trim();
            for parameter in pieces {
                let name = parameter
                    .split_once('=')
                    .map_or(parameter, |(name, _)| name);
                if name.trim().eq_ignore_ascii_case("q") {
                    return false;
                }
            }
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// `{"jsonrpc":"2.0","id":…,"result":…}` around a serialized `result`.
fn envelope(id: &RequestId, result: &[u8]) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(result.len() + 48);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    serde_json::to_writer(&mut out, id)?;
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result);
    out.push(b'}');
    Ok(out)
}

/// A tool call's JSON-RPC response as rmcp writes it (`ServerResult::CallToolResult` of
/// `Reply::into_result`; on 2026-07-28, `modern`, cache hints filled; before it, in a
/// session, without `resultType`), with the answer's text serialized once: escaped as
/// the text content, and as it is for `structuredContent` (rmcp would print the value
/// parsed from it: the same bytes; it is always an object, so no revision drops it).
fn call_result(id: &RequestId, reply: &Reply, modern: bool) -> serde_json::Result<Vec<u8>> {
    let text = &reply.text;
    let mut out = Vec::with_capacity(2 * text.len() + 160);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    serde_json::to_writer(&mut out, id)?;
    out.extend_from_slice(if modern {
        br#","result":{"resultType":"complete","content":[{"type":"text","text":"#
    } else {
        br#","result":{"content":[{"type":"text","text":"#
    });
    serde_json::to_writer(&mut out, text)?;
    out.extend_from_slice(br#"}],"structuredContent":"#);
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(if reply.is_error {
        br#","isError":true}}"#
    } else {
        br#","isError":false}}"#
    });
    Ok(out)
}

/// The `tools/list` result as rmcp writes it on this revision (cache hints filled), for a
/// caller offered the write tools or not: serialized once per daemon, it never changes.
fn tools_list_result(with_writes: bool, server: &NotesServer) -> &'static [u8] {
    static LISTS: [OnceLock<Vec<u8>>; 2] = [OnceLock::new(), OnceLock::new()];
    LISTS[usize::from(with_writes)].get_or_init(|| {
        let mut result = ServerResult::ListToolsResult(server.tools_listed(with_writes));
        result.fill_missing_cache_hints();
        serde_json::to_vec(&result).unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolResponse, NumberOrString};

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    const PLAIN: &[(&str, &str)] = &[
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "search"),
    ];

    #[test]
    fn only_plain_matching_headers_take_the_direct_path() {
        assert!(headers_fit(&headers(PLAIN), "tools/call", Some("search")));
        assert!(!headers_fit(&headers(PLAIN), "tools/call", Some("grep")));
        assert!(!headers_fit(&headers(PLAIN), "tools/list", None));
        let with = |extra: (&'static str, &'static str)| {
            let mut pairs = PLAIN.to_vec();
            pairs.push(extra);
            headers_fit(&headers(&pairs), "tools/call", Some("search"))
        };
        assert!(!with(("mcp-name", "search")), "a header given twice");
        assert!(!with(("mcp-session-id", "x")));
        assert!(!with(("mcp-param-q", "x")));
        assert!(!with(("accept", "application/json;q=0")));
        assert!(!with(("accept", r#"text/html;a="x""#)));
        assert!(with(("accept", "text/html; charset=utf-8")));
        let no_sse = headers(&[
            ("accept", "application/json"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "search"),
        ]);
        assert!(!headers_fit(&no_sse, "tools/call", Some("search")));
    }

    #[test]
    fn a_session_takes_the_direct_path_only_with_handshake_era_headers() {
        const SESSION: &[(&str, &str)] = &[
            ("accept", "application/json, text/event-stream"),
            ("mcp-session-id", "s-1"),
            ("mcp-protocol-version", "2025-11-25"),
        ];
        let with = |changes: &[(&'static str, &'static str)]| {
            let mut pairs = SESSION.to_vec();
            for change in changes {
                if change.1.is_empty() {
                    pairs.retain(|(name, _)| *name != change.0);
                } else {
                    pairs.push(*change);
                }
            }
            session_fits(&headers(&pairs))
        };
        assert_eq!(with(&[]).as_deref(), Some("s-1"));
        assert_eq!(
            with(&[("mcp-protocol-version", "")]).as_deref(),
            Some("s-1")
        );
        for older in ["2024-11-05", "2025-03-26", "2025-06-18"] {
            let mut pairs = vec![SESSION[0], SESSION[1]];
            pairs.push(("mcp-protocol-version", older));
            assert_eq!(session_fits(&headers(&pairs)).as_deref(), Some("s-1"));
        }
        let mut modern = vec![SESSION[0], SESSION[1]];
        modern.push(("mcp-protocol-version", "2026-07-28"));
        assert_eq!(session_fits(&headers(&modern)), None);
        let mut unknown = vec![SESSION[0], SESSION[1]];
        unknown.push(("mcp-protocol-version", "1999-01-01"));
        assert_eq!(session_fits(&headers(&unknown)), None);
        assert_eq!(with(&[("mcp-session-id", "")]), None);
        assert_eq!(with(&[("mcp-session-id", "s-2")]), None, "two ids");
        assert_eq!(
            with(&[("mcp-protocol-version", "2025-11-25")]),
            None,
            "two versions"
        );
        assert_eq!(with(&[("mcp-method", "tools/call")]), None);
        assert_eq!(with(&[("mcp-name", "search")]), None);
        assert_eq!(with(&[("mcp-param-q", "x")]), None);
        assert_eq!(with(&[("accept", "application/json;q=0")]), None);
    }

    /// The bytes of a tool result are rmcp's serialization of the same result, for an
    /// answer and for an error, with a number id and a string id.
    #[test]
    fn a_call_result_is_what_rmcp_writes() {
        let answers = [
            (
                r#"{"results":[{"slug":"a \"b\"\n","score":7.25,"tags":[]}],"coverage":{"x":1}}"#,
                false,
            ),
            (
                r#"{"error":"Not Found","statusCode":404,"hint":"ünïcode \\ \u0001"}"#,
                true,
            ),
        ];
        for id in [
            NumberOrString::Number(7),
            NumberOrString::String("x\"y".into()),
        ] {
            for (text, is_error) in answers {
                let reply = Reply {
                    text: serde_json::to_string(
                        &serde_json::from_str::<serde_json::Value>(text).unwrap(),
                    )
                    .unwrap(),
                    json: None,
                    is_error,
                };
                let mut result = ServerResult::from(CallToolResponse::from(
                    Reply {
                        text: reply.text.clone(),
                        json: None,
                        is_error,
                    }
                    .into_result(),
                ));
                // As rmcp's handler shapes it for each era.
                let mut legacy = result.clone();
                legacy.strip_result_type_for_legacy_peer();
                legacy.strip_non_object_output_for_legacy_peer();
                result.fill_missing_cache_hints();
                for (modern, result) in [(true, result), (false, legacy)] {
                    let rmcp =
                        serde_json::to_vec(&ServerJsonRpcMessage::response(result, id.clone()))
                            .unwrap();
                    let direct = call_result(&id, &reply, modern).unwrap();
                    assert_eq!(
                        String::from_utf8(direct).unwrap(),
                        String::from_utf8(rmcp).unwrap(),
                        "modern: {modern}"
                    );
                }
            }
        }
    }
}
