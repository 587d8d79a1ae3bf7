//! `/mcp` over real HTTP: both protocol eras, the tools against their `/v1` twins, tool
//! errors with the envelope's reason and hint, and the guards `/v1` has.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::{Mode, TestServer};
use serde_json::{json, Value};

const LEGACY: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";

/// The tools a credential with `notes.write` is offered beside the read tools.
const WRITE_TOOLS: [&str; 7] = [
    "write_note",
    "edit_note",
    "append_note",
    "replace_section",
    "set_frontmatter",
    "move_note",
    "delete_note",
];

/// The body of an MCP answer: plain JSON, or the last `data:` event of an SSE stream.
async fn rpc_body(res: reqwest::Response) -> Value {
    let is_sse = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let text = res.text().await.unwrap();
    if !is_sse {
        return serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC answer in {text}"))
}

/// Every JSON-RPC message of an SSE answer.
async fn sse_messages(res: reqwest::Response) -> Vec<Value> {
    let text = res.text().await.unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .collect()
}

/// A handshake-era session: `initialize`, `notifications/initialized`, then requests
/// carrying `Mcp-Session-Id`.
struct Session<'a> {
    s: &'a TestServer,
    id: String,
    next: u64,
}

impl<'a> Session<'a> {
    async fn open(s: &'a TestServer) -> (Session<'a>, Value) {
        let res = s
            .client
            .post(s.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&json!({
                "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY,
                    "capabilities": {},
                    "clientInfo": {"name": "notevault-tests", "version": "0"}
                }
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let id = res.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let init = rpc_body(res).await;
        let session = Session { s, id, next: 1 };
        let res = session
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(res.status(), 202);
        (session, init)
    }

    async fn post(&self, body: Value) -> reqwest::Response {
        self.s
            .client
            .post(self.s.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", LEGACY)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// End the session (DELETE).
    async fn delete(&self) -> reqwest::Response {
        self.s
            .client
            .delete(self.s.url("/mcp"))
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", LEGACY)
            .send()
            .await
            .unwrap()
    }

    /// The session's standalone SSE stream (GET).
    async fn stream(&self) -> reqwest::Response {
        self.s
            .client
            .get(self.s.url("/mcp"))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", LEGACY)
            .send()
            .await
            .unwrap()
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let res = self
            .post(json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}))
            .await;
        assert_eq!(res.status(), 200, "{method}");
        rpc_body(res).await
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = self
            .request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await;
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{tool}: {answer}"))
    }
}

/// A stateless 2026-07-28 request: per-request `_meta` (added to any `_meta` of `params`)
/// and the standard headers.
async fn modern_request(
    s: &TestServer,
    method: &str,
    params: Value,
    name: Option<&str>,
) -> reqwest::Response {
    let mut params = params;
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "notevault-tests", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    if let Some(extra) = params["_meta"].as_object() {
        for (k, v) in extra {
            meta[k] = v.clone();
        }
    }
    params["_meta"] = meta;
    let mut req = s
        .client
        .post(s.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method);
    if let Some(name) = name {
        req = req.header("mcp-name", name);
    }
    req.json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
        .send()
        .await
        .unwrap()
}

/// [`modern_request`], answered: the status and the JSON-RPC answer.
async fn modern(s: &TestServer, method: &str, params: Value, name: Option<&str>) -> (u16, Value) {
    let res = modern_request(s, method, params, name).await;
    let status = res.status().as_u16();
    (status, rpc_body(res).await)
}

async fn vault_example(mode: Mode) -> TestServer {
    TestServer::start_as(mode, Some("vault-example"), |c| {
        c.rate_limit_read_per_minute = 0;
    })
    .await
}

async fn the_handshake_names_notevault_and_lists_read_only_tools(mode: Mode) {
    let s = vault_example(mode).await;
    let (mut session, init) = Session::open(&s).await;
    let result = &init["result"];
    assert_eq!(result["protocolVersion"], LEGACY);
    assert_eq!(result["serverInfo"]["name"], "notevault");
    assert_eq!(result["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(result["capabilities"]["tools"].is_object());
    assert!(result["instructions"]
        .as_str()
        .unwrap()
        .contains("read_note"));

    let list = session.request("tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for expected in [
        "search",
        "grep",
        "list_notes",
        "read_note",
        "list_folders",
        "list_attachments",
        "attachment_link",
        "list_revisions",
        "note_links",
        "list_tags",
        "aggregate_properties",
        "vault_summary",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    // Open local mode is read-only: no write tool is offered. Hosted mode's token may
    // write: the authenticated tool server adds the write tools (spec, mcp_writes.rs).
    let writes = WRITE_TOOLS;
    match s.mode {
        Mode::Local => assert!(!names.iter().any(|n| writes.contains(n)), "{names:?}"),
        Mode::Hosted => assert!(writes.iter().all(|w| names.contains(w)), "{names:?}"),
    }
    for tool in tools {
        let read_only = !writes.contains(&tool["name"].as_str().unwrap());
        assert_eq!(tool["annotations"]["readOnlyHint"], read_only, "{tool}");
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{tool}");
        assert!(tool["description"].as_str().unwrap().len() > 200, "{tool}");
    }
    let read = tools.iter().find(|t| t["name"] == "read_note").unwrap();
    assert_eq!(read["inputSchema"]["required"], json!(["note"]));
}

async fn tools_answer_what_v1_answers(mode: Mode) {
    let s = vault_example(mode).await;
    let (mut session, _) = Session::open(&s).await;

    let result = session
        .call(
            "read_note",
            json!({"note": "projects/roadmap", "offset": 2, "limit": 3}),
        )
        .await;
    assert_eq!(result["isError"], false);
    let v1 = s
        .get_json("/v1/notes/projects%2Froadmap?offset=2&limit=3", 200)
        .await;
    assert_eq!(result["structuredContent"], v1);
    // The same JSON as text, for clients that read only content.
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, v1);
    assert_eq!(v1["lines"]["items"][0]["n"], 2);

    let result = session
        .call("list_notes", json!({"prefix": "daily/", "page_size": 2}))
        .await;
    let v1 = s.get_json("/v1/notes?prefix=daily/&page_size=2", 200).await;
    let structured = &result["structuredContent"];
    assert_eq!(structured["notes"], v1["notes"]);
    assert_eq!(structured["coverage"], v1["coverage"]);
    assert_eq!(structured["coverage"]["notes_matched"], 3);
    assert_eq!(structured["coverage"]["truncated"], true);
    // Its page token pages the tool too.
    let token = structured["next_page_token"].as_str().unwrap();
    let next = session
        .call(
            "list_notes",
            json!({"prefix": "daily/", "page_size": 2, "page_token": token}),
        )
        .await;
    assert_eq!(
        next["structuredContent"]["notes"].as_array().unwrap().len(),
        1
    );
    assert_eq!(
        next["structuredContent"]["notes"][0]["slug"],
        "daily/2026-11-21"
    );

    let result = session
        .call("list_notes", json!({"filter": "tags:recipe"}))
        .await;
    let v1 = s.get_json("/v1/notes?filter=tags%3Arecipe", 200).await;
    assert_eq!(result["structuredContent"]["notes"], v1["notes"]);

    let result = session.call("list_folders", json!({})).await;
    let v1 = s.get_json("/v1/folders", 200).await;
    assert_eq!(result["structuredContent"], v1);

    // An attachment's bytes stay an HTTP download: the tool answers a presigned link,
    // which works without a bearer. (Hosted mode has no attachments until blob storage.)
    if s.mode == Mode::Local {
        let result = session
            .call("attachment_link", json!({"file_name": "diagram.png"}))
            .await;
        let url = result["structuredContent"]["url"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(url.starts_with(&s.base), "{url}");
        assert_eq!(result["structuredContent"]["method"], "GET");
        let res = reqwest::get(&url).await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-type"], "image/png");
    }

    let result = session
        .call("list_revisions", json!({"note": "Welcome"}))
        .await;
    let v1 = s.get_json("/v1/notes/Welcome:listRevisions", 200).await;
    assert_eq!(result["structuredContent"], v1);

    let result = session.call("note_links", json!({"note": "Welcome"})).await;
    let v1 = s.get_json("/v1/notes/Welcome:links", 200).await;
    assert_eq!(result["structuredContent"], v1);
    // Search, grep, tags, properties and the summary: the functions /v1 calls. The
    // index catches up with the start-up scan in the background: `min_seq` waits for it.
    let seq = s.svc.committed_seq();
    let result = session
        .call(
            "search",
            json!({"q": "sourdough", "page_size": 3, "min_seq": seq}),
        )
        .await;
    let v1 = s
        .get_json(
            &format!("/v1/search?q=sourdough&page_size=3&min_seq={seq}"),
            200,
        )
        .await;
    assert_eq!(result["structuredContent"], v1);
    // Byte for byte, scores' digits and field order included.
    let raw = s
        .get(&format!("/v1/search?q=sourdough&page_size=3&min_seq={seq}"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(result["content"][0]["text"].as_str().unwrap(), raw);
    assert!(raw.contains("\"score\":"), "{raw}");
    // `query`, as other notes servers call it, is `q` too.
    let by_query = session
        .call(
            "search",
            json!({"query": "sourdough", "page_size": 3, "min_seq": seq}),
        )
        .await;
    assert_eq!(by_query["structuredContent"]["results"], v1["results"]);
    let hits = v1["results"].as_array().unwrap();
    assert!(
        hits.iter().any(|h| h["slug"] == "recipes/sourdough"),
        "{v1}"
    );
    assert!(v1["coverage"]["notes_searched"].as_u64().unwrap() > 0);

    let result = session
        .call(
            "grep",
            json!({"pattern": "todo", "case": "insensitive", "page_size": 5}),
        )
        .await;
    let v1 = s
        .get_json("/v1/grep?pattern=todo&case=insensitive&page_size=5", 200)
        .await;
    assert_eq!(result["structuredContent"], v1);
    assert!(v1["lines_returned"].as_u64().unwrap() > 0, "{v1}");

    let result = session
        .call("list_tags", json!({"order_by": "count desc"}))
        .await;
    let v1 = s.get_json("/v1/tags?order_by=count%20desc", 200).await;
    assert_eq!(result["structuredContent"], v1);

    let result = session
        .call("aggregate_properties", json!({"key": "status"}))
        .await;
    let res = s
        .client
        .post(s.url("/v1/properties:aggregate"))
        .json(&json!({"key": "status"}))
        .send()
        .await
        .unwrap();
    let v1 = common::res_json(res, 200, "aggregate").await;
    assert_eq!(result["structuredContent"], v1);

    let result = session.call("vault_summary", json!({})).await;
    let v1 = s.get_json("/v1/vault", 200).await;
    assert_eq!(result["structuredContent"], v1);
    assert_eq!(v1["notes"], 24);
}

async fn tool_errors_carry_the_reason_and_hint_of_the_v1_envelope(mode: Mode) {
    let s = vault_example(mode).await;
    let (mut session, _) = Session::open(&s).await;

    let result = session
        .call("read_note", json!({"note": "no-such-note"}))
        .await;
    assert_eq!(result["isError"], true);
    let err = &result["structuredContent"];
    let v1 = s
        .get_error("/v1/notes/no-such-note", 404, "NOTE_NOT_FOUND")
        .await;
    common::assert_envelope(err, 404, "NOTE_NOT_FOUND");
    // The hint names the next step an agent can take: the tool, with the /v1 route beside
    // it (the /v1 hint names only the route).
    assert_eq!(
        err["hint"],
        "List notes with the `list_notes` tool (`GET /v1/notes` over HTTP), then retry with an existing slug or note_id."
    );
    assert!(v1["hint"]
        .as_str()
        .unwrap()
        .contains("List notes with `GET /v1/notes`"));
    assert_eq!(err["message"], v1["message"]);
    assert_eq!(err["help"], v1["help"]);
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(&text, err);

    // Arguments that do not fit the tool: a tool error naming the argument, so an agent
    // can correct itself.
    for (arguments, field) in [
        (json!({"note": "Welcome", "limit": 0}), "limit"),
        (json!({"note": "Welcome", "limit": "ten"}), "limit"),
        (json!({"note": "Welcome", "offset": 999}), "offset"),
        (json!({"note": "Welcome", "colour": "red"}), "colour"),
        (json!({}), "note"),
    ] {
        let result = session.call("read_note", arguments.clone()).await;
        assert_eq!(result["isError"], true, "{arguments}");
        let err = &result["structuredContent"];
        common::assert_envelope_for(&arguments.to_string(), err, 400, "VALIDATION_FAILED");
        assert_eq!(common::violated_field(err), field, "{err}");
    }
    for (tool, arguments, reason) in [
        ("list_notes", json!({"filter": "tags:"}), "INVALID_FILTER"),
        ("search", json!({"q": ""}), "VALIDATION_FAILED"),
        ("grep", json!({"pattern": "("}), "VALIDATION_FAILED"),
        (
            "vault_summary",
            json!({"verbose": true}),
            "VALIDATION_FAILED",
        ),
        (
            "read_note",
            json!({"note": "../../etc/passwd"}),
            "UNSAFE_PATH",
        ),
    ] {
        let result = session.call(tool, arguments.clone()).await;
        let what = format!("{tool} {arguments}");
        common::assert_envelope_for(&what, &result["structuredContent"], 400, reason);
    }

    // An unknown tool is a protocol error.
    let answer = session
        .request(
            "tools/call",
            json!({"name": "delete_everything", "arguments": {}}),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("delete_everything"));
}

async fn the_stateless_revision_discovers_and_calls_without_a_session(mode: Mode) {
    let s = vault_example(mode).await;
    let (status, answer) = modern(&s, "server/discover", json!({}), None).await;
    assert_eq!(status, 200, "{answer}");
    let result = &answer["result"];
    assert!(result["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&json!(MODERN)));
    assert!(result["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&json!(LEGACY)));
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "notevault"
    );
    assert!(result["capabilities"]["tools"].is_object());

    let (status, answer) = modern(&s, "tools/list", json!({}), None).await;
    assert_eq!(status, 200, "{answer}");
    // Hosted mode's token may write: the write tools are listed too.
    let listed = match s.mode {
        Mode::Local => 12,
        Mode::Hosted => 12 + WRITE_TOOLS.len(),
    };
    assert_eq!(answer["result"]["tools"].as_array().unwrap().len(), listed);

    let (status, answer) = modern(
        &s,
        "tools/call",
        json!({"name": "read_note", "arguments": {"note": "Welcome", "limit": 2}}),
        Some("read_note"),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let v1 = s.get_json("/v1/notes/Welcome?limit=2", 200).await;
    assert_eq!(answer["result"]["structuredContent"], v1);
    assert_eq!(answer["result"]["resultType"], "complete");

    // The Mcp-Name header must agree with the body.
    let (status, answer) = modern(
        &s,
        "tools/call",
        json!({"name": "read_note", "arguments": {"note": "Welcome"}}),
        Some("list_notes"),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer["error"].is_object(), "{answer}");

    // Without its `_meta`, a 2026-07-28 request is malformed.
    let res = s
        .client
        .post(s.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/list")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
}

/// A stateless request sent as [`modern_request`] sends it, with `extra` headers,
/// answered as [`raw_answer`] reads it.
async fn modern_raw(
    s: &TestServer,
    method: &str,
    params: Value,
    name: Option<&str>,
    extra: &[(&str, &str)],
) -> (u16, String, String) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "notevault-tests", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let mut req = s
        .client
        .post(s.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method);
    if let Some(name) = name {
        req = req.header("mcp-name", name);
    }
    for (header, value) in extra {
        req = req.header(*header, *value);
    }
    let res = req
        .json(&json!({"jsonrpc": "2.0", "id": "a-7", "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    raw_answer(res).await
}

/// An `/mcp` answer as two requests can compare it: the status, the content type and the
/// JSON-RPC message (an SSE stream's message with an `id`), with the request id as
/// `<request id>` (a tool error names its request's id; two requests have two).
async fn raw_answer(res: reqwest::Response) -> (u16, String, String) {
    let status = res.status().as_u16();
    let content_type = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let request_id = res.headers()["x-request-id"].to_str().unwrap().to_string();
    let text = res.text().await.unwrap();
    let message = if content_type.starts_with("text/event-stream") {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|d| d.starts_with('{') && d.contains(r#""id":"#))
            .unwrap_or_else(|| panic!("no JSON-RPC answer in {text}"))
            .to_string()
    } else {
        text
    };
    (
        status,
        content_type,
        message.replace(&request_id, "<request id>"),
    )
}

/// A plain stateless `tools/call` or `tools/list` is answered without rmcp's per-request
/// service (the direct path); one with a header only rmcp reads (`Mcp-Param-*`, which no
/// tool's schema names, so rmcp ignores it) goes through rmcp. Both answer the same bytes:
/// a result, a tool error, a tool this server does not have, the tool list.
async fn a_stateless_call_answers_the_same_bytes_with_or_without_rmcp(mode: Mode) {
    let s = vault_example(mode).await;
    let seq = s.svc.committed_seq();
    let calls = [
        (
            "tools/call",
            json!({"name": "search", "arguments": {"q": "sourdough", "page_size": 3, "min_seq": seq}}),
            Some("search"),
        ),
        (
            "tools/call",
            json!({"name": "read_note", "arguments": {"note": "Welcome", "limit": 3}}),
            Some("read_note"),
        ),
        (
            "tools/call",
            json!({"name": "read_note", "arguments": {"note": "no/such/note"}}),
            Some("read_note"),
        ),
        (
            "tools/call",
            json!({"name": "search", "arguments": {"q": 3}}),
            Some("search"),
        ),
        (
            "tools/call",
            json!({"name": "delete_everything", "arguments": {}}),
            Some("delete_everything"),
        ),
        ("tools/list", json!({}), None),
    ];
    for (method, params, name) in calls {
        let direct = modern_raw(&s, method, params.clone(), name, &[]).await;
        let rmcp = modern_raw(
            &s,
            method,
            params.clone(),
            name,
            &[("mcp-param-probe", "1")],
        )
        .await;
        assert_eq!(direct, rmcp, "{method} {params}");
        assert_eq!(direct.0, 200, "{method} {params}: {}", direct.2);
        assert_eq!(direct.1, "application/json");
    }
}

/// A request of the handshake-era `session` with `extra` headers, answered as
/// [`raw_answer`] reads it.
async fn session_raw(
    s: &TestServer,
    session: &str,
    body: &Value,
    extra: &[(&str, &str)],
) -> (u16, String, String) {
    let mut req = s
        .client
        .post(s.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", LEGACY);
    for (header, value) in extra {
        req = req.header(*header, *value);
    }
    raw_answer(req.json(body).send().await.unwrap()).await
}

/// A session's read tool call is answered without rmcp's session worker (the direct path:
/// plain JSON) with the message rmcp sends as the event of its SSE stream; a call with a
/// header only rmcp reads, a write tool, a tool that does not exist, and every call of a
/// session that asked for log messages go through rmcp. A session rmcp does not hold is
/// 404 either way.
async fn a_session_call_answers_the_same_message_with_or_without_rmcp(mode: Mode) {
    let s = vault_example(mode).await;
    let seq = s.svc.committed_seq();
    let (session, _) = Session::open(&s).await;
    let calls = [
        json!({"name": "search", "arguments": {"q": "sourdough", "page_size": 3, "min_seq": seq}}),
        json!({"name": "read_note", "arguments": {"note": "Welcome", "limit": 3}}),
        json!({"name": "read_note", "arguments": {"note": "no/such/note"}}),
        json!({"name": "search", "arguments": {"q": 3}}),
        json!({"name": "list_notes", "arguments": {"page_size": 2}}),
    ];
    for (i, params) in calls.iter().enumerate() {
        let body = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params});
        let direct = session_raw(&s, &session.id, &body, &[]).await;
        let rmcp = session_raw(&s, &session.id, &body, &[("mcp-param-probe", "1")]).await;
        assert_eq!(direct.0, 200, "{params}: {}", direct.2);
        assert_eq!(direct.1, "application/json", "{params}");
        assert!(
            rmcp.1.starts_with("text/event-stream"),
            "{params}: {rmcp:?}"
        );
        assert_eq!(direct.2, rmcp.2, "{params}");
    }
    for name in ["write_note", "delete_everything"] {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": name, "arguments": {}}});
        let answer = session_raw(&s, &session.id, &body, &[]).await;
        assert!(
            answer.1.starts_with("text/event-stream"),
            "{name}: {answer:?}"
        );
        assert!(answer.2.contains(r#""error""#), "{name}: {answer:?}");
    }
    let search = json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
        "params": {"name": "search", "arguments": {"q": "sourdough"}}});
    let unknown = session_raw(&s, "no-such-session", &search, &[]).await;
    assert_eq!(unknown.0, 404, "{unknown:?}");
    // Once a session asks for log messages, rmcp's worker answers its calls (and sends
    // them).
    let (mut logging, _) = Session::open(&s).await;
    let before = session_raw(&s, &logging.id, &search, &[]).await;
    assert_eq!(before.1, "application/json");
    logging
        .request("logging/setLevel", json!({"level": "error"}))
        .await;
    let after = session_raw(&s, &logging.id, &search, &[]).await;
    assert!(after.1.starts_with("text/event-stream"), "{after:?}");
    assert_eq!(after.2, before.2);
    // The first session is unchanged, and after a DELETE it is unknown.
    let again = session_raw(&s, &session.id, &search, &[]).await;
    assert_eq!(again.1, "application/json");
    assert_eq!(session.delete().await.status(), 204);
    let gone = session_raw(&s, &session.id, &search, &[]).await;
    assert_eq!(gone.0, 404, "{gone:?}");
}

/// Both eras answer a `search` with what `GET /v1/search` answers for the same query: the
/// same results, and the same bytes as text.
async fn search_answers_what_v1_search_answers_in_both_eras(mode: Mode) {
    let s = vault_example(mode).await;
    let seq = s.svc.committed_seq();
    let (mut session, _) = Session::open(&s).await;
    for q in [
        "sourdough",
        "\"meeting notes\"",
        "title:roadmap",
        "proj*",
        "nothing-matches-this",
    ] {
        let arguments = json!({"q": q, "page_size": 5, "min_seq": seq});
        let path = format!("/v1/search?q={}&page_size=5&min_seq={seq}", url_encode(q));
        let raw = s.get(&path).await.text().await.unwrap();
        let v1: Value = serde_json::from_str(&raw).unwrap();
        let legacy = session.call("search", arguments.clone()).await;
        let (status, modern_answer) = modern(
            &s,
            "tools/call",
            json!({"name": "search", "arguments": arguments}),
            Some("search"),
        )
        .await;
        assert_eq!(status, 200, "{modern_answer}");
        for result in [&legacy, &modern_answer["result"]] {
            assert_eq!(result["isError"], false, "{q}: {result}");
            assert_eq!(result["structuredContent"], v1, "{q}");
            assert_eq!(result["content"][0]["text"].as_str().unwrap(), raw, "{q}");
        }
    }
    // `mode` is the same argument: without an embedding model, hybrid answers the lexical
    // results and says why; a mode that does not exist is the /v1 error.
    let arguments = json!({"q": "sourdough", "mode": "hybrid", "min_seq": seq});
    let raw = s
        .get(&format!("/v1/search?q=sourdough&mode=hybrid&min_seq={seq}"))
        .await
        .text()
        .await
        .unwrap();
    let v1: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        v1["coverage"]["retrievers"][1]["retriever"], "vector",
        "{v1}"
    );
    assert_eq!(v1["coverage"]["retrievers"][1]["ran"], false, "{v1}");
    let answer = session.call("search", arguments).await;
    assert_eq!(answer["structuredContent"], v1);
    let bad = session
        .call("search", json!({"q": "sourdough", "mode": "semantic"}))
        .await;
    assert_eq!(bad["isError"], true, "{bad}");
    assert_eq!(
        bad["structuredContent"]["reason"], "VALIDATION_FAILED",
        "{bad}"
    );
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn get_is_a_session_stream_or_405(mode: Mode) {
    let s = vault_example(mode).await;
    let (session, _) = Session::open(&s).await;
    let res = session.stream().await;
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    drop(res);

    // The stateless revision has no standalone stream.
    let res = s
        .client
        .get(s.url("/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405);

    // A session ends with DELETE; it is then unknown.
    assert_eq!(session.delete().await.status(), 204);
    let res = session
        .post(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
        .await;
    assert_eq!(res.status(), 404);
}

async fn foreign_origins_and_hosts_are_refused_like_on_v1(mode: Mode) {
    let s = vault_example(mode).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "evil", "version": "0"}}});
    // (case, header, value, status, reason of the refusal)
    let cases = [
        (
            "a foreign origin",
            "origin",
            "http://evil.example",
            403,
            Some("ORIGIN_FORBIDDEN"),
        ),
        (
            "a foreign host",
            "host",
            "evil.example",
            403,
            Some("ORIGIN_FORBIDDEN"),
        ),
        (
            "a loopback origin is a local client",
            "origin",
            "http://localhost:5173",
            200,
            None,
        ),
    ];
    for (what, header, value, status, reason) in cases {
        let res = s
            .client
            .post(s.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header(header, value)
            .json(&body)
            .send()
            .await
            .unwrap();
        match reason {
            Some(reason) => {
                let err = common::res_json(res, status, what).await;
                common::assert_envelope_for(what, &err, status, reason);
            }
            None => assert_eq!(res.status(), status, "{what}"),
        }
    }
}

async fn mcp_requests_count_against_the_read_rate_limit(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |c| {
        c.rate_limit_read_per_minute = 2;
    })
    .await;
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let (status, _) = match modern(&s, "tools/list", json!({}), None).await {
            (429, body) => (429, body),
            other => other,
        };
        statuses.push(status);
    }
    assert_eq!(statuses, [200, 200, 429]);
}

#[tokio::test]
async fn a_client_that_opts_in_to_logging_hears_about_its_calls() {
    let (dir, vault, state) = common::temp_vault(Some("vault-example"));
    // A symlink leaving the vault is excluded from every answer: a warning.
    std::os::unix::fs::symlink("/etc/hostname", vault.join("outside.md")).unwrap();
    let s = TestServer::start_in(dir, vault, state, |c| c.rate_limit_read_per_minute = 0).await;
    let call = json!({"name": "list_notes", "arguments": {"page_size": 1}});

    // 2026-07-28: a request opts in with `_meta` logLevel; its answer stream carries the
    // messages before the result.
    let mut params = call.clone();
    params["_meta"] = json!({"io.modelcontextprotocol/logLevel": "debug"});
    let res = modern_request(&s, "tools/call", params, Some("list_notes")).await;
    assert_eq!(res.status(), 200);
    let messages = sse_messages(res).await;
    let levels: Vec<&str> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| m["params"]["level"].as_str().unwrap())
        .collect();
    assert_eq!(levels, ["debug", "warning"], "{messages:?}");
    assert_eq!(messages[0]["params"]["logger"], "notevault");
    assert_eq!(messages[0]["params"]["data"]["tool"], "list_notes");
    assert_eq!(messages[1]["params"]["data"]["excluded_count"], 1);
    assert!(messages.last().unwrap()["result"]["structuredContent"].is_object());
    // Without the opt-in: the answer alone, as plain JSON.
    let (status, answer) = modern(&s, "tools/call", call.clone(), Some("list_notes")).await;
    assert_eq!(status, 200);
    assert!(answer["result"]["structuredContent"].is_object());

    // A handshake-era session opts in with logging/setLevel; rmcp sends a session's log
    // messages on its standalone GET stream.
    let (mut session, _) = Session::open(&s).await;
    let answer = session
        .request("logging/setLevel", json!({"level": "warning"}))
        .await;
    assert_eq!(answer["result"], json!({}), "{answer}");
    let mut stream = session.stream().await;
    assert_eq!(stream.status(), 200);
    let answer = session.request("tools/call", call).await;
    assert!(answer["result"]["structuredContent"].is_object());
    let mut seen = String::new();
    let log = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let chunk = stream
                .chunk()
                .await
                .unwrap()
                .expect("the stream stays open");
            seen.push_str(&String::from_utf8_lossy(&chunk));
            let found = seen
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m["method"] == "notifications/message");
            if let Some(m) = found {
                return m;
            }
        }
    })
    .await
    .expect("a log message on the session stream");
    // `debug` is below the session's level: the first message is the warning.
    assert_eq!(log["params"]["level"], "warning", "{log}");
    assert_eq!(log["params"]["data"]["excluded_count"], 1);
}

/// The official MCP Python SDK (`mcp` on PyPI, pinned in `.ci/requirements.txt`) in its
/// `legacy` (initialize handshake) and `auto` (server/discover, 2026-07-28) modes:
/// `tests/mcp/e2e.py` lists the tools, checks their annotations, calls them and validates
/// each `structuredContent` against its `outputSchema` with `jsonschema`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_accepts_the_server_in_both_modes() {
    // A missing SDK fails the test (common::tools provisions it, or says how to get it),
    // unless the developer opted out with NOTEVAULT_REQUIRE_TOOLS=0.
    let Some(python) = common::tools::python(&["mcp.client.client", "jsonschema"]) else {
        return;
    };
    let s = vault_example(Mode::Local).await;
    let url = s.url("/mcp");
    let script = common::repo_path("tests/mcp/e2e.py");
    for mode in ["legacy", "auto"] {
        let (python, url, script) = (python.clone(), url.clone(), script.clone());
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(python)
                .arg(script)
                .args([url.as_str(), mode])
                .output()
                .expect("python runs")
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}:\n{stdout}\n{stderr}");
        assert!(stdout.contains(&format!("mcp e2e {mode}:")), "{stdout}");
        // The SDK warns on anything it did not expect (a session ending badly, say).
        assert!(!stderr.contains("failed"), "{mode}: {stderr}");
    }
}

/// A tool error's hint, read by an MCP caller: every route it names that has a tool twin is
/// named as the tool (the route beside it, "over HTTP"); the others read as on `/v1`. The
/// errors a read tool can meet, one row each: the tool, its arguments, the reason and the
/// hint the caller reads.
async fn tool_error_hints_name_the_tool_to_call_next(mode: Mode) {
    let s = vault_example(mode).await;
    let (mut session, _) = Session::open(&s).await;
    let not_found = "List notes with the `list_notes` tool (`GET /v1/notes` over HTTP), then retry with an existing slug or note_id.";
    let cases = [
        ("read_note", json!({"note": "no-such-note"}), "NOTE_NOT_FOUND", not_found),
        ("note_links", json!({"note": "no-such-note"}), "NOTE_NOT_FOUND", not_found),
        ("list_revisions", json!({"note": "no-such-note"}), "NOTE_NOT_FOUND", not_found),
        (
            "list_notes",
            json!({"filter": "colour = red"}),
            "INVALID_FILTER",
            "Retry with a `filter` that uses only documented fields and operators.",
        ),
        (
            "read_note",
            json!({"note": "../../etc/passwd"}),
            "UNSAFE_PATH",
            "Retry with a vault-relative path that stays inside the vault (no `..`, no absolute path, no link leaving the vault).",
        ),
        (
            "search",
            json!({"q": "x", "page_token": "forged"}),
            "VALIDATION_FAILED",
            "Fix the `fieldViolations` listed in `details`, then retry the same request.",
        ),
    ];
    for (tool, arguments, reason, hint) in cases {
        let result = session.call(tool, arguments.clone()).await;
        let err = &result["structuredContent"];
        assert_eq!(result["isError"], true, "{tool} {arguments}");
        assert_eq!(err["reason"], reason, "{tool} {arguments}: {err}");
        assert_eq!(err["hint"], hint, "{tool} {arguments}");
        // The text content is the same envelope, hint included.
        let text: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text["hint"], hint, "{tool} {arguments}");
    }
}

crate::test_in_both_modes!(
    the_handshake_names_notevault_and_lists_read_only_tools,
    tools_answer_what_v1_answers,
    tool_errors_carry_the_reason_and_hint_of_the_v1_envelope,
    the_stateless_revision_discovers_and_calls_without_a_session,
    a_stateless_call_answers_the_same_bytes_with_or_without_rmcp,
    a_session_call_answers_the_same_message_with_or_without_rmcp,
    search_answers_what_v1_search_answers_in_both_eras,
    get_is_a_session_stream_or_405,
    foreign_origins_and_hosts_are_refused_like_on_v1,
    mcp_requests_count_against_the_read_rate_limit,
    tool_error_hints_name_the_tool_to_call_next,
);
