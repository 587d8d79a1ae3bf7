//! The Model Context Protocol endpoint at `/mcp`: a tool server over the same domain
//! calls as `/v1`, read tools for every caller and `write_note`/`edit_note` for a
//! credential `auth::mcp_write_tools` offers them to.
//!
//! The transport is rmcp's streamable HTTP service, mounted in the one axum app, so a
//! request to `/mcp` passes the same middleware as `/v1` (request id, Host/Origin guard,
//! read rate limit, panic catcher); rmcp's own Host check is switched off because the
//! guard is the one place that decides it. Both protocol eras are served by the same
//! service: the handshake era (`initialize`, `Mcp-Session-Id` sessions, GET as an SSE
//! stream of a session) and the stateless 2026-07-28 revision (`server/discover`,
//! per-request `_meta`, the `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` headers,
//! answered as plain JSON). A stateless `tools/call` or `tools/list` that passes every
//! check rmcp would make skips rmcp's per-request machinery: `direct.rs` answers it, with
//! the same bytes, from the same `NotesServer::call` and `NotesServer::tools_listed`.
//!
//! A tool answers the JSON `/v1` answers (the same function builds it), as
//! `structuredContent` and as text; its `outputSchema` is the utoipa schema of that
//! answer (`schema.rs`). A domain error becomes a tool result with `isError: true`
//! carrying the `/v1` error envelope (same `reason`, `message`; the `hint` names the tool
//! twin of each route it names, see `hint_for_agents`); an unknown tool is a JSON-RPC
//! error.

pub mod direct;
pub mod logging;
pub mod resources;
pub mod schema;
pub mod sessions;
pub mod tools;

use std::sync::Arc;

use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, Implementation, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SubscribeRequestParams, Tool,
    UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::auth::{Credential, WriteTools};
use crate::error::{render_hint, Error, Reason};
use crate::state::State;
use crate::surface::envelope::{envelope, RequestId, DOCS_URL, REQUEST_ID, VAULT_PREFIX};

/// What the server tells an agent at connection time.
const INSTRUCTIONS: &str = "notevault serves a folder of markdown notes (an Obsidian-style \
vault). Find notes with `search` (words, phrases, fields; best first) and `grep` (exact \
strings and regexes, line by line); browse with `list_notes` (path prefix, AIP-160 filter on \
tags, folder, status, frontmatter, links), `list_folders`, `list_tags` and \
`aggregate_properties`; follow links with `note_links`; see a note's history with \
`list_revisions`; `vault_summary` gives the size and freshness of the vault. These answer \
handles and line numbers, never bodies: read a note's text only with `read_note`, by line \
slices (follow `lines.next_offset`). Every search and list answer carries `coverage`: read \
it before treating a result as complete (`truncated` means more pages: pass \
`next_page_token` back as `page_token`; `excluded` says what was left out and why). A \
failed call answers `isError` with a `reason` and a `hint`: follow the hint. This local \
server is read-only.";

/// The `/mcp` service for `state`; `cancel` ends its sessions and streams (on shutdown).
pub fn service(state: Arc<State>, docs_url: Arc<str>, cancel: CancellationToken) -> McpService {
    let config = StreamableHttpServerConfig::default()
        // The guard middleware checks Host and Origin for every route, /mcp included.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_json_response(true)
        .with_cancellation_token(cancel);
    let server = NotesServer {
        vault_prefix: crate::surface::envelope::vault_prefix(&state.paths.root),
        state,
        docs_url,
        log_level: Default::default(),
        subscriptions: Default::default(),
    };
    // One server per session (its log level) or per stateless request rmcp serves.
    let template = server.clone();
    let factory = move || {
        Ok(NotesServer {
            log_level: Default::default(),
            subscriptions: Default::default(),
            ..template.clone()
        })
    };
    let (sessions, manager) = sessions::Sessions::new();
    McpService {
        rmcp: StreamableHttpService::new(factory, manager, config),
        server,
        sessions: Arc::new(sessions),
    }
}

/// The service as mounted: rmcp's streamable HTTP transport, the server that answers the
/// requests of the direct path (`direct.rs`) without it, and what the direct path knows
/// of rmcp's sessions.
#[derive(Clone)]
pub struct McpService {
    rmcp: StreamableHttpService<NotesServer, LocalSessionManager>,
    server: NotesServer,
    sessions: Arc<sessions::Sessions>,
}

/// The largest JSON-RPC body `/mcp` reads (rmcp's own default cap).
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// Serve one `/mcp` request. A POST's JSON body is read here first (within
/// `body_timeout`, at most [`MAX_BODY`]) so that a body that is not JSON, or not a
/// JSON-RPC message, gets the JSON-RPC error a client expects (`-32700` parse error,
/// `-32600` invalid request) rather than rmcp's plain-text 415. A stateless 2026-07-28
/// `tools/call` or `tools/list` that passes every check rmcp would make is answered by
/// the direct path (`direct.rs`) with the bytes rmcp would send; everything else goes to
/// rmcp. rmcp answers a session's DELETE with 202 once the session is closed; it is done,
/// so the answer is 204, which clients (the Python SDK) expect.
pub async fn handle(
    service: &McpService,
    request: axum::extract::Request,
    body_timeout: std::time::Duration,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let delete = request.method() == axum::http::Method::DELETE;
    let post = request.method() == axum::http::Method::POST;
    let get = request.method() == axum::http::Method::GET;
    let handshake_era = direct::handshake_era(request.headers());
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut sets_level = false;
    let request = if post && is_json(request.headers()) {
        let (parts, body) = request.into_parts();
        let bytes = match crate::surface::input::read_body(body, MAX_BODY, body_timeout).await {
            Ok(bytes) => bytes,
            Err(err) => return crate::surface::envelope::ApiError(err).into_response(),
        };
        let message = match serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(&bytes) {
            Ok(message) => message,
            Err(e) => return json_rpc_error(&bytes, &e),
        };
        sets_level = matches!(
            &message,
            rmcp::model::JsonRpcMessage::Request(request)
                if matches!(request.request, rmcp::model::ClientRequest::SetLevelRequest(_))
        );
        if let Some(call) = direct::Direct::of(&service.server, &parts.headers, message) {
            let answer = match call.session() {
                Some(id) => service.sessions.direct(id).await,
                None => true,
            };
            if answer {
                return call.answer(&service.server, &parts).await;
            }
        }
        axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes))
    } else {
        request
    };
    let response = service.rmcp.handle(request).await.into_response();
    if delete && response.status().is_success() {
        if let Some(id) = &session {
            service.sessions.ended(id);
        }
    }
    // rmcp's session worker took the message: a notification's 202, a request's SSE
    // stream or a GET's (its refusals are JSON or plain text), of a handshake-era request
    // (a 2026-07-28 one is served without a session); an `initialize` names the session
    // it opened.
    let streamed = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let status = response.status();
    if (post || get)
        && handshake_era
        && (status == axum::http::StatusCode::ACCEPTED
            || (status == axum::http::StatusCode::OK && streamed))
    {
        let opened = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok());
        if let Some(id) = session.as_deref().or(opened) {
            service.sessions.passed(id, sets_level);
        }
    }
    if delete && response.status() == axum::http::StatusCode::ACCEPTED {
        return axum::http::StatusCode::NO_CONTENT.into_response();
    }
    as_json_rpc(response).await
}

/// rmcp refuses some requests in plain text (a GET or DELETE without a session, say): the
/// same status with a JSON-RPC error carrying that text, which a client can parse.
async fn as_json_rpc(response: axum::response::Response) -> axum::response::Response {
    use axum::response::IntoResponse;
    let plain = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_none_or(|v| v.as_bytes().starts_with(b"text/plain"));
    if !(response.status().is_client_error() || response.status().is_server_error()) || !plain {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let message = if text.is_empty() {
        parts
            .status
            .canonical_reason()
            .unwrap_or("refused")
            .to_string()
    } else {
        text
    };
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": rmcp::model::ErrorCode::INVALID_REQUEST.0, "message": message },
    });
    let mut answer = (parts.status, axum::Json(body)).into_response();
    for (name, value) in &parts.headers {
        if name != axum::http::header::CONTENT_TYPE && name != axum::http::header::CONTENT_LENGTH {
            answer.headers_mut().append(name, value.clone());
        }
    }
    answer
}

fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split_once(';').map_or(v, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        })
}

/// The JSON-RPC answer to a body rmcp cannot take: HTTP 400 with a `-32700` parse error
/// (not JSON, or nested too deep) or a `-32600` invalid request (JSON, but not a JSON-RPC
/// message; its `id` is echoed when it has one).
fn json_rpc_error(body: &[u8], err: &serde_json::Error) -> axum::response::Response {
    use axum::response::IntoResponse;
    use serde_json::error::Category;
    let (code, message, id) = match err.classify() {
        Category::Syntax | Category::Eof | Category::Io => (
            rmcp::model::ErrorCode::PARSE_ERROR,
            format!("parse error: the body is not JSON ({err})"),
            serde_json::Value::Null,
        ),
        Category::Data => {
            let id = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("id").cloned())
                .filter(|id| id.is_string() || id.is_number())
                .unwrap_or(serde_json::Value::Null);
            (
                rmcp::model::ErrorCode::INVALID_REQUEST,
                format!("invalid request: the body is not a JSON-RPC message ({err})"),
                id,
            )
        }
    };
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code.0, "message": message },
    });
    (axum::http::StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// The tool server: one per session (or per stateless request), cheap to clone.
#[derive(Clone)]
pub struct NotesServer {
    state: Arc<State>,
    docs_url: Arc<str>,
    /// The vault's folder, as error messages leave it out.
    vault_prefix: Arc<str>,
    log_level: logging::SessionLevel,
    /// The notes this session subscribed to (`resources/subscribe`).
    subscriptions: resources::Subscriptions,
}

/// The HTTP request behind an MCP request (rmcp hands its parts to the handler).
fn http_parts(extensions: &rmcp::model::Extensions) -> Option<&Parts> {
    extensions.get::<Parts>()
}

impl NotesServer {
    /// Whether the caller holding `credential` is offered the write tools.
    fn write_tools(&self, credential: Option<&Credential>) -> WriteTools {
        // The auth layer put the request's credential into the HTTP request (`api`), the
        // one way every surface gets it; without one, no write tool is offered.
        let Some(credential) = credential else {
            return WriteTools::Unlisted;
        };
        // Only a credential that could get them costs a read of the write settings.
        let unless_read_only = crate::auth::mcp_write_tools(credential, true);
        if !matches!(unless_read_only, WriteTools::Offered) {
            return unless_read_only;
        }
        let writes_possible = crate::writes::review::settings(&self.state)
            .map(|s| s.policy != crate::writes::review::WritePolicy::ReadOnly)
            .unwrap_or(false);
        crate::auth::mcp_write_tools(credential, writes_possible)
    }

    /// Whether the caller of the HTTP request `parts` is offered the write tools.
    fn offers_writes(&self, parts: Option<&Parts>) -> bool {
        matches!(self.write_tools(credential(parts)), WriteTools::Offered)
    }

    /// The answer to `tools/list`, as both paths send it: the read tools, and the write
    /// tools `with_writes`.
    fn tools_listed(&self, with_writes: bool) -> ListToolsResult {
        // The list depends on the caller's credential (the write tools): a cache may keep
        // it for that caller only (2026-07-28, SEP-2549; rmcp drops the hint for older
        // revisions).
        ListToolsResult::with_all_items(tools::listed(with_writes))
            .with_cache_scope(rmcp::model::CacheScope::Private)
    }

    /// One `tools/call` as both paths answer it (rmcp's handler for sessions, `direct`
    /// for stateless requests): the tool's answer or its domain error as a [`Reply`], or
    /// the JSON-RPC error for a tool this server does not offer to the caller. `parts` is
    /// the HTTP request (its credential, request id and the base URL links name),
    /// `client` the name the client gave, `form` what the caller needs of the answer.
    async fn call(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        parts: Option<&Parts>,
        client: Option<String>,
        form: tools::Form,
    ) -> Result<Reply, McpError> {
        // A write tool is served to a writing token while writes are possible; a token
        // without `notes.write` hears which permission it lacks; otherwise (open local
        // mode, a read-only vault) it is not a tool of this server.
        let (offered, refused) = match tools::find(name) {
            Some((tools::Access::Read, _)) => (true, None),
            Some((tools::Access::Write, _)) => match self.write_tools(credential(parts)) {
                WriteTools::Offered => (true, None),
                WriteTools::Refused(err) => (true, Some(err)),
                WriteTools::Unlisted => (false, None),
            },
            None => (false, None),
        };
        let unknown = || {
            McpError::invalid_params(
                format!("unknown tool `{name}`; call tools/list for the tools this server offers"),
                None,
            )
        };
        if !offered {
            return Err(unknown());
        }
        let request_id = parts
            .and_then(|p| p.extensions.get::<RequestId>())
            .map(|r| r.0.clone())
            .unwrap_or_else(|| uuid::Uuid::now_v7().simple().to_string());
        // Links the tools hand out name this daemon as the request did.
        let base = parts
            .map(|p| crate::surface::origin::public_base(&self.state.config, &p.headers))
            .unwrap_or_else(|| {
                format!(
                    "{}://{}",
                    self.state.config.scheme(),
                    self.state.config.listen
                )
            });
        let state = self.state.clone();
        let outcome = REQUEST_ID
            .scope(
                request_id,
                DOCS_URL.scope(
                    self.docs_url.clone(),
                    VAULT_PREFIX.scope(self.vault_prefix.clone(), async move {
                        if let Some(err) = refused {
                            return Ok(tool_error(&err));
                        }
                        match tools::call(state, name, arguments, client, base, form).await {
                            Some(Ok(answer)) => Ok(Reply {
                                text: answer.text,
                                json: answer.json,
                                is_error: false,
                            }),
                            Some(Err(err)) => Ok(tool_error(&err)),
                            None => Err(()),
                        }
                    }),
                ),
            )
            .await;
        outcome.map_err(|()| unknown())
    }
}

/// The credential the auth layer put into the HTTP request, if any.
fn credential(parts: Option<&Parts>) -> Option<&Credential> {
    parts.and_then(|p| p.extensions.get::<Credential>())
}

/// A tool call's result before it goes on the wire: the JSON text of the answer (the JSON
/// its `/v1` twin answers) or of the error envelope, the same as a value when it was asked
/// for, and whether the call failed.
#[derive(Debug)]
pub struct Reply {
    pub text: String,
    pub json: Option<Value>,
    pub is_error: bool,
}

impl Reply {
    /// As rmcp's result: the text as text content, the value as `structuredContent`
    /// (parsed from the text when the reply has none).
    pub fn into_result(self) -> CallToolResult {
        let json = match self.json {
            Some(json) => json,
            None => serde_json::from_str(&self.text).unwrap_or_default(),
        };
        let mut result = if self.is_error {
            CallToolResult::structured_error(json)
        } else {
            CallToolResult::structured(json)
        };
        result.content = vec![ContentBlock::text(self.text)];
        result
    }
}

impl ServerHandler for NotesServer {
    #[allow(deprecated)] // logging: deprecated by SEP-2577, still part of 2025-11-25
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
            .with_server_info(
                Implementation::new("notevault", env!("CARGO_PKG_VERSION"))
                    .with_title("notevault")
                    .with_description(
                        "A folder of markdown notes, served to agents: search, grep, list, read by line slices, links, revisions",
                    ),
            )
            .with_instructions(INSTRUCTIONS)
    }

    #[allow(deprecated)] // logging: deprecated by SEP-2577, still part of 2025-11-25
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.log_level.set(request.level);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(self.tools_listed(self.offers_writes(http_parts(&context.extensions))))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let cursor = request.and_then(|r| r.cursor);
        // Private, like `tools/list`: a cache keeps it for this caller only (SEP-2549).
        Ok(resources::list(self.state.clone(), cursor)
            .await?
            .with_cache_scope(rmcp::model::CacheScope::Private))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(resources::templates().with_cache_scope(rmcp::model::CacheScope::Private))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        Ok(resources::read(self.state.clone(), request.uri)
            .await?
            .into())
    }

    #[allow(deprecated)] // resources/subscribe: the handshake era's subscriptions
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions
            .subscribe(self.state.clone(), request.uri, context.peer.clone())
    }

    #[allow(deprecated)] // resources/unsubscribe: the handshake era's subscriptions
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions.unsubscribe(&request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(resources::accepted(requested))
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        resources::listen(self.state.clone(), context).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(resources::prompts().with_cache_scope(rmcp::model::CacheScope::Private))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        Ok(resources::prompt(&request.name, request.arguments.as_ref())?.into())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::find(name).map(|(_, tool)| tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let started = std::time::Instant::now();
        // The name the client gave: in the request's `_meta` (2026-07-28), else at the
        // session's `initialize`.
        let client = context
            .client_info()
            .map(|info| info.name)
            .filter(|n| !n.is_empty());
        let reply = self
            .call(
                &request.name,
                request.arguments,
                http_parts(&context.extensions),
                client,
                tools::Form::Value,
            )
            .await?;
        let result = reply.into_result();
        if let Some(min) = self.log_level.of(&context) {
            let messages = logging::messages(&request.name, &result, started.elapsed());
            logging::send(&context, min, messages).await;
        }
        Ok(result.into())
    }
}

/// A domain error as a tool result: `isError`, the `/v1` error envelope as
/// `structuredContent` and as text. Call inside the request's `REQUEST_ID` scope.
pub fn tool_error(err: &Error) -> Reply {
    if err.reason.status() >= 500 {
        tracing::error!(
            request_id = %crate::surface::envelope::current_request_id(),
            reason = %err.reason,
            message = %err.message,
            "tool call failed"
        );
    }
    let mut body = serde_json::to_value(envelope(err)).unwrap_or_default();
    body["hint"] = serde_json::Value::String(hint_for_agents(err.reason));
    Reply {
        text: body.to_string(),
        json: Some(body),
        is_error: true,
    }
}

/// A reason's hint as an MCP caller reads it: each route it names that has a tool twin
/// (`ToolSpec::twin`) is named as that tool, with the route beside it, e.g.
/// ``the `list_notes` tool (`GET /v1/notes` over HTTP)``; routes without a twin stay as
/// written.
fn hint_for_agents(reason: Reason) -> String {
    render_hint(reason.hint(), |route| {
        tools::twin_of(route).map(|tool| format!("the `{tool}` tool (`{route}` over HTTP)"))
    })
}

#[cfg(test)]
mod tests;
