//! The MCP write tools over `/mcp` (the stateless 2026-07-28 revision) with bearer tokens:
//! offered to a writing token only, applied through the pipeline (the file on disk, the
//! receipt of the `/v1` twin), replayed on a retried call, queued under review, refused
//! with the envelope for a token without `notes.write`, absent in open local mode.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::TestServer;
use notevault::auth::{Permission, StaticToken, TokenKind};
use serde_json::{json, Value};

const MODERN: &str = "2026-07-28";
const WRITER: &str = "writer-token-0123456789";
const READER: &str = "reader-token-0123456789";

fn token(token: &str, permissions: &[Permission]) -> StaticToken {
    StaticToken {
        token: token.into(),
        permissions: permissions.to_vec(),
        kind: TokenKind::Session,
        vault_id: None,
    }
}

async fn with_tokens() -> TestServer {
    TestServer::start(Some("vault-example"), |c| {
        c.static_tokens = vec![
            token(WRITER, &[Permission::NotesWrite, Permission::NotesReview]),
            token(READER, &[]),
        ]
    })
    .await
}

/// One JSON-RPC request over `/mcp` with `bearer` (none in open mode): the answer.
async fn rpc(s: &TestServer, bearer: Option<&str>, method: &str, params: Value) -> Value {
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
    if let Some(name) = params["name"].as_str() {
        req = req.header("mcp-name", name);
    }
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    let res = req
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200, "{method}");
    let text = res.text().await.unwrap();
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .unwrap_or(&text);
    serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {text}"))
}

async fn tool_names(s: &TestServer, bearer: Option<&str>) -> Vec<String> {
    let answer = rpc(s, bearer, "tools/list", json!({})).await;
    // The list depends on the caller: no cache may share it with another (SEP-2549).
    assert_eq!(answer["result"]["cacheScope"], "private", "{answer}");
    answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// `GET` a `/v1` path as the writer.
async fn get(s: &TestServer, path: &str) -> Value {
    let res = s
        .client
        .get(s.url(path))
        .bearer_auth(WRITER)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200, "{path}");
    res.json().await.unwrap()
}

async fn call(s: &TestServer, bearer: Option<&str>, tool: &str, args: Value) -> Value {
    rpc(
        s,
        bearer,
        "tools/call",
        json!({"name": tool, "arguments": args}),
    )
    .await
}

#[tokio::test]
async fn write_tools_are_offered_to_a_writing_token_only() {
    let s = with_tokens().await;
    let writer = tool_names(&s, Some(WRITER)).await;
    let reader = tool_names(&s, Some(READER)).await;
    for tool in ["write_note", "edit_note"] {
        assert!(writer.contains(&tool.to_string()), "{tool} in {writer:?}");
        assert!(!reader.contains(&tool.to_string()), "{tool} in {reader:?}");
    }
    // write_note, edit_note, append_note, replace_section, set_frontmatter, move_note,
    // delete_note.
    assert_eq!(writer.len(), reader.len() + 7);

    // Open local mode: the local tool server is read-only.
    let open = TestServer::start(Some("vault-example"), |_| {}).await;
    let names = tool_names(&open, None).await;
    assert!(!names.iter().any(|n| n == "write_note"), "{names:?}");
    let answer = call(
        &open,
        None,
        "write_note",
        json!({"note": "open/x", "content": "x\n"}),
    )
    .await;
    assert!(answer["error"].is_object(), "{answer}");
    assert!(!open.vault.join("open/x.md").exists());
}

/// Open local mode with a personal access token made for an agent: the token counts (its
/// write tools are offered and work), and a bad bearer is refused, never ignored.
#[tokio::test]
async fn in_open_mode_a_token_counts_and_a_bad_one_is_refused() {
    let open = TestServer::start(Some("vault-example"), |_| {}).await;
    let agent = common::create_pat(&open.vault, &open.state, "agent", &["notes.write"]);
    let names = tool_names(&open, Some(&agent)).await;
    assert!(names.iter().any(|n| n == "write_note"), "{names:?}");
    let answer = call(
        &open,
        Some(&agent),
        "write_note",
        json!({"note": "open/by-token", "content": "by a token\n", "agent_id": "agent"}),
    )
    .await;
    assert!(answer["error"].is_null(), "{answer}");
    assert_eq!(
        std::fs::read_to_string(open.vault.join("open/by-token.md")).unwrap(),
        "by a token\n"
    );
    // A token with a wrong checksum, and one this daemon never made: 401, not ignored.
    let mut mistyped = agent.clone();
    mistyped.pop();
    mistyped.push(if agent.ends_with('A') { 'B' } else { 'A' });
    for bad in [mistyped.as_str(), "not-a-token-of-this-daemon"] {
        for path in ["/v1/notes", "/mcp"] {
            let res = open
                .client
                .get(open.url(path))
                .bearer_auth(bad)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 401, "{path} {bad}");
            let body: Value = res.json().await.unwrap();
            if path == "/v1/notes" {
                assert_eq!(body["reason"], "AUTH_INVALID", "{body}");
            }
        }
    }
    // Without a bearer, open local mode is unchanged.
    let res = open.client.get(open.url("/v1/notes")).send().await.unwrap();
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn write_note_creates_replaces_and_replays_through_the_pipeline() {
    let s = with_tokens().await;
    let args = json!({"note": "agents/plan", "content": "# Plan\n\nfirst\n", "agent_id": "claude"});
    let created = call(&s, Some(WRITER), "write_note", args.clone()).await;
    let receipt = &created["result"]["structuredContent"];
    assert_eq!(created["result"]["isError"], json!(false), "{created}");
    assert_eq!(receipt["status"], "applied", "{created}");
    assert_eq!(receipt["slug"], "agents/plan", "{created}");
    assert_eq!(
        std::fs::read_to_string(s.vault.join("agents/plan.md")).unwrap(),
        "# Plan\n\nfirst\n"
    );
    // The same call again (a client's retry): the first receipt, nothing written twice.
    let again = call(&s, Some(WRITER), "write_note", args).await;
    assert_eq!(again["result"]["structuredContent"], *receipt);
    let revisions = get(&s, "/v1/notes/agents%2Fplan:listRevisions").await;
    assert_eq!(
        revisions["versions"].as_array().unwrap().len(),
        1,
        "{revisions}"
    );

    // Replace the body of the note that exists, guarded by its version.
    let version = receipt["version_id"].as_str().unwrap();
    let replaced = call(
        &s,
        Some(WRITER),
        "write_note",
        json!({"note": "agents/plan", "content": "second\n", "version_id": version}),
    )
    .await;
    assert_eq!(
        replaced["result"]["structuredContent"]["status"], "applied",
        "{replaced}"
    );
    assert_eq!(
        std::fs::read_to_string(s.vault.join("agents/plan.md")).unwrap(),
        "second\n"
    );
    // A stale version is the envelope of the /v1 twin, and the file stays.
    let stale = call(
        &s,
        Some(WRITER),
        "write_note",
        json!({"note": "agents/plan", "content": "third\n", "version_id": version}),
    )
    .await;
    assert_eq!(stale["result"]["isError"], json!(true), "{stale}");
    assert_eq!(
        stale["result"]["structuredContent"]["reason"], "VERSION_MOVED",
        "{stale}"
    );
    assert_eq!(
        std::fs::read_to_string(s.vault.join("agents/plan.md")).unwrap(),
        "second\n"
    );
}

#[tokio::test]
async fn edit_note_applies_the_edit_contract() {
    let s = with_tokens().await;
    let read = get(&s, "/v1/notes/Inbox?limit=1").await;
    let version = read["version_id"].as_str().unwrap().to_string();
    let before = std::fs::read_to_string(s.vault.join("Inbox.md")).unwrap();
    let line = before.lines().find(|l| l.len() > 5).unwrap().to_string();
    let edited = call(
        &s,
        Some(WRITER),
        "edit_note",
        json!({"note": "Inbox", "version_id": version, "old_string": line, "new_string": "EDITED BY AN AGENT"}),
    )
    .await;
    assert_eq!(
        edited["result"]["structuredContent"]["status"], "applied",
        "{edited}"
    );
    let after = std::fs::read_to_string(s.vault.join("Inbox.md")).unwrap();
    assert_eq!(after, before.replacen(&line, "EDITED BY AN AGENT", 1));

    // Text that is not in the note: the /v1 envelope as a tool error, nothing written.
    let missing = call(
        &s,
        Some(WRITER),
        "edit_note",
        json!({"note": "Inbox", "version_id": edited["result"]["structuredContent"]["version_id"], "old_string": "no such text anywhere", "new_string": "x"}),
    )
    .await;
    assert_eq!(missing["result"]["isError"], json!(true), "{missing}");
    assert_eq!(
        std::fs::read_to_string(s.vault.join("Inbox.md")).unwrap(),
        after
    );
}

#[tokio::test]
async fn a_token_without_notes_write_hears_which_permission_it_lacks() {
    let s = with_tokens().await;
    let answer = call(
        &s,
        Some(READER),
        "write_note",
        json!({"note": "reader/x", "content": "x\n"}),
    )
    .await;
    let envelope = &answer["result"]["structuredContent"];
    assert_eq!(answer["result"]["isError"], json!(true), "{answer}");
    assert_eq!(envelope["reason"], "PERMISSION_MISSING", "{answer}");
    assert!(!s.vault.join("reader/x.md").exists());
}

#[tokio::test]
async fn under_review_a_tool_write_is_queued_and_the_note_is_untouched() {
    let s = with_tokens().await;
    let res = s
        .client
        .patch(s.url("/v1/vault/write-settings?update_mask=write_policy"))
        .bearer_auth(WRITER)
        .json(&json!({"write_policy": "review"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let queued = call(
        &s,
        Some(WRITER),
        "write_note",
        json!({"note": "agents/queued", "content": "# Held\n"}),
    )
    .await;
    let receipt = &queued["result"]["structuredContent"];
    assert_eq!(receipt["status"], "queued", "{queued}");
    assert!(receipt["pending_id"].is_string(), "{queued}");
    assert!(!s.vault.join("agents/queued.md").exists());
}

/// The official MCP Python SDK in both eras (`legacy`: the initialize handshake; `auto`:
/// the stateless 2026-07-28 revision) with the writer's token: `tests/mcp/e2e_writes.py`
/// finds the write tools, writes and edits a note, validates each answer against its
/// `outputSchema`, and checks that a retried call replays; the files are on disk after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_writes_and_edits_in_both_modes() {
    let Some(python) = common::tools::python(&["mcp.client.client", "jsonschema", "httpx2"]) else {
        return;
    };
    let s = with_tokens().await;
    let url = s.url("/mcp");
    let script = common::repo_path("tests/mcp/e2e_writes.py");
    for mode in ["legacy", "auto"] {
        let (python, url, script) = (python.clone(), url.clone(), script.clone());
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(python)
                .arg(script)
                .args([url.as_str(), mode, WRITER])
                .output()
                .expect("python runs")
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}:\n{stdout}\n{stderr}");
        assert!(
            stdout.contains(&format!("mcp e2e writes {mode}:")),
            "{stdout}"
        );
        assert_eq!(
            std::fs::read_to_string(s.vault.join(format!("sdk/{mode}.md"))).unwrap(),
            "# Written by the SDK\n\nedited line\n",
            "{mode}"
        );
    }
}

/// A tool call an older version recorded (its key derived from the call, bound to the
/// hash of the tool and its arguments) replays after the upgrade, even though the note
/// now exists; another call under that key is refused.
#[tokio::test]
async fn a_tool_call_recorded_by_an_older_version_still_replays() {
    let s = with_tokens().await;
    let args = json!({"note": "agents/old", "content": "kept\n"});
    let first = call(&s, Some(WRITER), "write_note", args.clone()).await;
    let receipt = first["result"]["structuredContent"].clone();
    assert_eq!(receipt["status"], "applied", "{first}");
    let (dir, vault, state) = s.stop().await;
    let called = r#"{"note":"agents/old","content":"kept\n","version_id":null,"agent_id":null,"idempotency_key":null}"#;
    let legacy = blake3::hash(format!("write_note\0{called}").as_bytes());
    let key = format!("mcp-{}", &legacy.to_hex()[..32]);
    {
        let db = rusqlite::Connection::open(state.join("meta.sqlite")).unwrap();
        let changed = db
            .execute(
                "UPDATE idempotency SET op_hash = ?1 WHERE key = ?2",
                [legacy.to_hex().to_string(), key.clone()],
            )
            .unwrap();
        assert_eq!(changed, 1, "the key is derived as before");
    }
    let s = TestServer::start_in(dir, vault, state, |c| {
        c.static_tokens = vec![token(
            WRITER,
            &[Permission::NotesWrite, Permission::NotesReview],
        )]
    })
    .await;
    let again = call(&s, Some(WRITER), "write_note", args).await;
    assert_eq!(again["result"]["structuredContent"], receipt, "{again}");
    let other = call(
        &s,
        Some(WRITER),
        "write_note",
        json!({"note": "agents/old", "content": "other\n", "idempotency_key": key}),
    )
    .await;
    assert_eq!(
        other["result"]["structuredContent"]["reason"], "IDEMPOTENCY_KEY_REUSED",
        "{other}"
    );
    assert_eq!(
        std::fs::read_to_string(s.vault.join("agents/old.md")).unwrap(),
        "kept\n"
    );
}
