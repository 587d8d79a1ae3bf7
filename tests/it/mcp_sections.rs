//! Section-aware edits: the MCP tools `append_note`, `replace_section`,
//! `set_frontmatter`, `move_note`, `delete_note` and the `/v1` routes `:append` and
//! `:replaceSection`, each through the one pipeline (applied, replayed, version-guarded,
//! queued under review); and `read_note`'s `format: "text"`.

use crate::common;

use common::TestServer;
use notevault::auth::{Permission, StaticToken, TokenKind};
use reqwest::Method;
use serde_json::{json, Value};

const MODERN: &str = "2026-07-28";
const WRITER: &str = "writer-token-0123456789";
const NOTE: &str = "# Plan\n\nintro\n\n## Tasks\n\n- a\n\n## Log\n\nold\n";

async fn with_writer() -> TestServer {
    TestServer::start(Some("vault-example"), |c| {
        c.static_tokens = vec![StaticToken {
            token: WRITER.into(),
            permissions: vec![Permission::NotesWrite, Permission::NotesReview],
            kind: TokenKind::Session,
            vault_id: None,
        }]
    })
    .await
}

/// One stateless `tools/call` as the writer: the result.
async fn call(s: &TestServer, tool: &str, args: Value) -> Value {
    let params = json!({"name": tool, "arguments": args, "_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "notevault-tests", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    }});
    let res = s
        .client
        .post(s.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .bearer_auth(WRITER)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200, "{tool}");
    let answer: Value = res.json().await.unwrap();
    answer["result"].clone()
}

/// A tool's receipt, asserting it succeeded.
async fn ok(s: &TestServer, tool: &str, args: Value) -> Value {
    let result = call(s, tool, args.clone()).await;
    assert_ne!(result["isError"], true, "{tool}({args}): {result}");
    result["structuredContent"].clone()
}

/// A tool's error envelope, asserting its reason.
async fn refused(s: &TestServer, tool: &str, args: Value, reason: &str) -> Value {
    let result = call(s, tool, args.clone()).await;
    assert_eq!(result["isError"], true, "{tool}({args}): {result}");
    assert_eq!(result["structuredContent"]["reason"], reason, "{result}");
    result["structuredContent"].clone()
}

fn file(s: &TestServer, rel: &str) -> String {
    std::fs::read_to_string(s.vault.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[tokio::test]
async fn the_section_tools_edit_through_the_pipeline() {
    let s = with_writer().await;
    let written = ok(
        &s,
        "write_note",
        json!({"note": "work/plan", "content": NOTE}),
    )
    .await;
    let v1 = written["version_id"].as_str().unwrap().to_string();

    // Append at the end needs no version; under a heading, at the end of its section.
    let args = json!({"note": "work/plan", "content": "new"});
    let appended = ok(&s, "append_note", args.clone()).await;
    assert_eq!(appended["status"], "applied");
    assert_eq!(file(&s, "work/plan.md"), format!("{NOTE}new\n"));
    assert_eq!(
        ok(&s, "append_note", args).await,
        appended,
        "a retry replays"
    );
    let under = ok(
        &s,
        "append_note",
        json!({"note": "work/plan", "heading": "## Tasks", "content": "- b"}),
    )
    .await;
    assert!(file(&s, "work/plan.md").contains("## Tasks\n\n- a\n- b\n\n## Log"));

    // A stale version is refused; the current one replaces the section.
    refused(
        &s,
        "replace_section",
        json!({"note": "work/plan", "heading": "Log", "content": "x", "version_id": v1}),
        "VERSION_MOVED",
    )
    .await;
    ok(
        &s,
        "replace_section",
        json!({"note": "work/plan", "heading": "Tasks", "content": "- done",
               "version_id": under["version_id"]}),
    )
    .await;
    assert_eq!(
        file(&s, "work/plan.md"),
        "# Plan\n\nintro\n\n## Tasks\n- done\n\n## Log\n\nold\nnew\n"
    );
    let missing = refused(
        &s,
        "append_note",
        json!({"note": "work/plan", "heading": "Nope", "content": "x"}),
        "EDIT_MATCH_NOT_FOUND",
    )
    .await;
    assert!(
        missing["message"]
            .as_str()
            .unwrap()
            .contains("Plan, Tasks, Log"),
        "{missing}"
    );

    // One frontmatter key; the body stays byte for byte.
    let set = ok(
        &s,
        "set_frontmatter",
        json!({"note": "work/plan", "key": "status", "value": "done"}),
    )
    .await;
    assert_eq!(set["status"], "applied", "{set}");
    let text = file(&s, "work/plan.md");
    assert!(
        text.starts_with("---\nstatus: done\n---\n# Plan\n"),
        "{text}"
    );

    // Move (the note keeps its id), then delete.
    let moved = ok(
        &s,
        "move_note",
        json!({"note": "work/plan", "folder": "archive"}),
    )
    .await;
    assert_eq!(moved["slug"], "archive/plan", "{moved}");
    assert_eq!(moved["note_id"], written["note_id"]);
    assert!(!s.vault.join("work/plan.md").exists());
    refused(
        &s,
        "delete_note",
        json!({"note": "archive/plan", "version_id": v1}),
        "VERSION_MOVED",
    )
    .await;
    let deleted = ok(&s, "delete_note", json!({"note": "archive/plan"})).await;
    assert_eq!(deleted["status"], "applied", "{deleted}");
    assert!(!s.vault.join("archive/plan.md").exists());
}

#[tokio::test]
async fn under_review_the_section_tools_queue_and_leave_the_note() {
    let s = with_writer().await;
    ok(
        &s,
        "write_note",
        json!({"note": "work/plan", "content": NOTE}),
    )
    .await;
    let res = s
        .client
        .patch(s.url("/v1/vault/write-settings?update_mask=write_policy"))
        .bearer_auth(WRITER)
        .json(&json!({"write_policy": "review"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    for (tool, args) in [
        (
            "append_note",
            json!({"note": "work/plan", "content": "held"}),
        ),
        (
            "set_frontmatter",
            json!({"note": "work/plan", "key": "status", "value": "x"}),
        ),
        (
            "move_note",
            json!({"note": "work/plan", "folder": "archive"}),
        ),
        ("delete_note", json!({"note": "work/plan"})),
    ] {
        let receipt = ok(&s, tool, args).await;
        assert_eq!(receipt["status"], "queued", "{tool}: {receipt}");
        assert!(receipt["pending_id"].is_string(), "{tool}: {receipt}");
        assert_eq!(file(&s, "work/plan.md"), NOTE, "{tool}");
    }
}

#[tokio::test]
async fn the_v1_section_routes_append_and_replace() {
    let s = with_writer().await;
    let written = ok(
        &s,
        "write_note",
        json!({"note": "work/plan", "content": NOTE}),
    )
    .await;
    let auth = |m: Method, path: &str, key: &str, body: Value| {
        s.client
            .request(m, s.url(path))
            .bearer_auth(WRITER)
            .header("Idempotency-Key", key)
            .json(&body)
    };
    let res = auth(
        Method::POST,
        "/v1/notes/work%2Fplan:append",
        "k-append",
        json!({"heading": "Log", "content": "entry"}),
    )
    .send()
    .await
    .unwrap();
    let receipt = common::res_json(res, 200, ":append").await;
    assert!(file(&s, "work/plan.md").ends_with("## Log\n\nold\nentry\n"));
    let res = auth(
        Method::POST,
        "/v1/notes/work/plan:replaceSection",
        "k-stale",
        json!({"heading": "Tasks", "content": "x", "version_id": written["version_id"]}),
    )
    .send()
    .await
    .unwrap();
    let body = common::res_json(res, 409, ":replaceSection stale").await;
    common::assert_envelope(&body, 409, "VERSION_MOVED");
    let res = auth(
        Method::POST,
        "/v1/notes/work/plan:replaceSection",
        "k-replace",
        json!({"heading": "Tasks", "content": "- y", "version_id": receipt["version_id"]}),
    )
    .send()
    .await
    .unwrap();
    common::res_json(res, 200, ":replaceSection").await;
    assert!(file(&s, "work/plan.md").contains("## Tasks\n- y\n\n## Log"));
    let res = auth(
        Method::POST,
        "/v1/notes/work/plan:replaceSection",
        "k-bad",
        json!({"heading": "Tasks", "content": "- y"}),
    )
    .send()
    .await
    .unwrap();
    common::res_json(res, 400, ":replaceSection without a version").await;
}

#[tokio::test]
async fn read_note_as_text_costs_about_the_note() {
    let s = with_writer().await;
    let body: String = (1..=400)
        .map(|i| format!("line {i}: some words of a note, \"quoted\" and plain.\n"))
        .collect();
    ok(&s, "write_note", json!({"note": "big", "content": body})).await;
    let result = call(
        &s,
        "read_note",
        json!({"note": "big", "limit": 2000, "format": "text"}),
    )
    .await;
    let structured = &result["structuredContent"];
    let text = structured["lines"]["text"].as_str().unwrap();
    assert_eq!(format!("{text}\n"), body);
    assert!(structured["lines"].get("items").is_none());
    let sent = result["content"][0]["text"].as_str().unwrap().len();
    let ratio = sent as f64 / body.len() as f64;
    assert!(
        ratio < 1.1,
        "{sent} bytes for a note of {}: {ratio}",
        body.len()
    );
    let json = call(&s, "read_note", json!({"note": "big", "limit": 2000})).await;
    assert!(json["content"][0]["text"].as_str().unwrap().len() > sent);
}
