//! One daemon serving two vaults (`serve A B`, `[[vaults]]`): the token selects the vault,
//! and nothing of one is seen, searched, written or recorded through the other, over
//! `/v1`, `/mcp` and the console, across a restart.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::daemon::{serve, start, Daemon};
use common::{assert_envelope, create_pat, git, BIN};
use serde_json::{json, Value};

/// Two vaults side by side: `alpha-vault` holding `alpha.md` (apples), `beta-vault`
/// holding `beta.md` (bananas).
fn two_folders() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("alpha-vault");
    let b = dir.path().join("beta-vault");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(a.join("alpha.md"), "# Alpha\n\napples grow here\n").unwrap();
    std::fs::write(b.join("beta.md"), "# Beta\n\nbananas grow here\n").unwrap();
    // One attachment path in both, with other bytes.
    std::fs::write(a.join("same.txt"), "alpha's bytes\n").unwrap();
    std::fs::write(b.join("same.txt"), "beta's bytes\n").unwrap();
    (dir, a, b)
}

/// `notevault serve ARGS...` as a user runs it (no config file or auth from this
/// process's environment), once it printed its address.
fn spawn_args(args: &[&OsStr]) -> Daemon {
    let mut command = serve(BIN);
    command.args(args);
    start(command).expect("the daemon serves")
}

fn stop(mut daemon: Daemon) {
    // SIGTERM: the graceful stop a service manager asks for.
    // SAFETY: a plain kill(2) of our own child.
    unsafe { libc::kill(daemon.child.id() as i32, libc::SIGTERM) };
    let status = daemon.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

async fn get(client: &reqwest::Client, url: String, token: Option<&str>) -> (u16, Value) {
    let mut req = client.get(url);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")),
    )
}

fn slugs(list: &Value) -> Vec<String> {
    list["notes"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|n| n["slug"].as_str().unwrap().to_string())
        .collect()
}

/// The slugs a search for `q` finds.
async fn found(client: &reqwest::Client, base: &str, q: &str, token: Option<&str>) -> Vec<String> {
    let (status, body) = get(client, format!("{base}/v1/search?q={q}"), token).await;
    assert_eq!(status, 200, "{body}");
    body["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|r| r["slug"].as_str().unwrap().to_string())
        .collect()
}

/// A stateless 2026-07-28 `tools/call` over `/mcp` with `token`: its structured answer.
async fn mcp_tool(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    tool: &str,
    args: Value,
) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool,
        "arguments": args,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "notevault-tests", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}
        }
    }});
    let res = client
        .post(format!("{base}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let answer: Value = res.json().await.unwrap();
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    answer["result"]["structuredContent"].clone()
}

/// `notevault login-link` for the vault at `vault`: the one-time link it printed.
fn login_link(vault: &Path) -> String {
    let out = Command::new(BIN)
        .arg("login-link")
        .arg(vault)
        .env_remove("NOTEVAULT_CONFIG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_vaults_one_daemon_each_sees_only_its_own() {
    let (dir, a, b) = two_folders();
    let state_a = a.join(".notevault");
    let state_b = b.join(".notevault");
    let token_a = create_pat(&a, &state_a, "agent-a", &["notes.write"]);
    let token_b = create_pat(&b, &state_b, "agent-b", &["notes.write"]);
    let daemon = spawn_args(&[
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
    ]);
    let base = daemon.base.clone();
    let client = reqwest::Client::new();

    // Without a bearer: the default (first) vault.
    let (_, open_vault) = get(&client, format!("{base}/v1/vault"), None).await;
    let (_, vault_a) = get(&client, format!("{base}/v1/vault"), Some(&token_a)).await;
    let (_, vault_b) = get(&client, format!("{base}/v1/vault"), Some(&token_b)).await;
    let (id_a, id_b) = (vault_a["vault_id"].clone(), vault_b["vault_id"].clone());
    assert!(id_a.is_string() && id_b.is_string(), "{vault_a} {vault_b}");
    assert_ne!(id_a, id_b);
    assert_eq!(open_vault["vault_id"], id_a);

    // Reads: each token lists and reads its own vault only.
    let (_, list) = get(&client, format!("{base}/v1/notes"), Some(&token_b)).await;
    assert_eq!(slugs(&list), ["beta"]);
    let (_, list) = get(&client, format!("{base}/v1/notes"), Some(&token_a)).await;
    assert_eq!(slugs(&list), ["alpha"]);
    let (status, body) = get(&client, format!("{base}/v1/notes/alpha"), Some(&token_b)).await;
    assert_envelope(&body, 404, "NOTE_NOT_FOUND");
    assert_eq!(status, 404);

    // A write with B's token lands in B's folder and B's history, nowhere in A.
    let res = client
        .post(format!("{base}/v1/notes"))
        .bearer_auth(&token_b)
        .header("Idempotency-Key", "0194d3a5-c0de-7000-a000-00000000000b")
        .json(&json!({"slug": "cherry", "content": "cherries only in beta\n"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    assert!(b.join("cherry.md").is_file());
    assert!(!a.join("cherry.md").exists());

    // Search: each vault's index is its own. Once each index holds its own notes, the
    // other's words find nothing in it.
    common::eventually("B's index holds cherry", || async {
        found(&client, &base, "cherries", Some(&token_b)).await == ["cherry"]
    })
    .await;
    common::eventually("A's index holds alpha", || async {
        found(&client, &base, "apples", None).await == ["alpha"]
    })
    .await;
    assert!(found(&client, &base, "cherries", Some(&token_a))
        .await
        .is_empty());
    assert!(found(&client, &base, "apples", Some(&token_b))
        .await
        .is_empty());

    // MCP: the tools of B's token see B.
    let hits = mcp_tool(&client, &base, &token_b, "search", json!({"q": "grow"})).await;
    let text = hits.to_string();
    assert!(text.contains("beta") && !text.contains("alpha"), "{text}");
    let listed = mcp_tool(&client, &base, &token_a, "list_notes", json!({})).await;
    let text = listed.to_string();
    assert!(
        text.contains("alpha") && !text.contains("beta") && !text.contains("cherry"),
        "{text}"
    );

    // A presigned link is a credential of the vault whose key signed it: B's link serves
    // B's bytes without a bearer, and a tampered one is refused.
    let res = client
        .post(format!("{base}/v1/attachments:presign"))
        .bearer_auth(&token_b)
        .json(&json!({"path": "same.txt"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let url = res.json::<Value>().await.unwrap()["url"]
        .as_str()
        .unwrap()
        .to_string();
    let res = reqwest::get(&url).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), "beta's bytes\n");
    let tampered = url.replace("expires=", "expires=9");
    let res = reqwest::get(&tampered).await.unwrap();
    assert_eq!(res.status(), 401);
    assert_envelope(&res.json().await.unwrap(), 401, "AUTH_INVALID");

    // The console: B's sign-in link opens B's console, and its session stays in B.
    let link = login_link(&b);
    assert!(link.starts_with(&format!("{base}/sign-in?code=")), "{link}");
    let res = client.get(&link).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let cookie = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap().to_string())
        .find(|v| !v.ends_with('='))
        .expect("a session cookie");
    let page = client
        .get(format!("{base}/vault"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("beta-vault"), "{page}");
    assert!(!page.contains("alpha-vault"), "{page}");

    // Each vault's history holds its own changes.
    common::eventually("B's history records cherry", || async {
        git(&state_b, &["log", "--name-only", "--format="]).contains("cherry.md")
    })
    .await;
    let history_a = git(&state_a, &["log", "--name-only", "--format="]);
    assert!(
        history_a.contains("alpha.md") && !history_a.contains("cherry.md"),
        "{history_a}"
    );
    stop(daemon);

    // A restart from a config file with `[[vaults]]` keeps both apart, each with its id;
    // a static token names its vault by id, and one naming a vault not served is refused.
    let config = dir.path().join("notevault.toml");
    std::fs::write(
        &config,
        format!(
            r#"listen = "127.0.0.1:0"

[[vaults]]
path = {a:?}

[[vaults]]
path = {b:?}

[[static_tokens]]
token = "static-for-beta"
permissions = ["notes.write"]
vault_id = {id_b}

[[static_tokens]]
token = "static-for-nowhere"
permissions = []
vault_id = "0194d3a5-0000-7000-8000-000000000000"
"#,
            id_b = id_b,
        ),
    )
    .unwrap();
    let daemon = spawn_args(&["--config".as_ref(), config.as_os_str()]);
    let base = daemon.base.clone();
    let (_, vault) = get(&client, format!("{base}/v1/vault"), Some("static-for-beta")).await;
    assert_eq!(vault["vault_id"], id_b);
    let (_, list) = get(&client, format!("{base}/v1/notes"), Some("static-for-beta")).await;
    assert_eq!(slugs(&list), ["beta", "cherry"]);
    let (_, vault) = get(&client, format!("{base}/v1/vault"), Some(&token_a)).await;
    assert_eq!(vault["vault_id"], id_a);
    let (status, body) = get(
        &client,
        format!("{base}/v1/notes"),
        Some("static-for-nowhere"),
    )
    .await;
    assert_eq!(status, 403);
    assert_envelope(&body, 403, "VAULT_FORBIDDEN");
    // Auth is on (static tokens): no bearer is no access, to either vault.
    let (status, body) = get(&client, format!("{base}/v1/notes"), None).await;
    assert_eq!(status, 401);
    assert_envelope(&body, 401, "AUTH_MISSING");
    stop(daemon);
}

/// Folders that overlap, or one state directory for several vaults, are refused at start
/// with a line that says why; nothing is served.
#[test]
fn overlapping_vaults_and_a_shared_state_dir_are_refused() {
    let (dir, a, b) = two_folders();
    let inner = a.join("inner");
    std::fs::create_dir_all(&inner).unwrap();
    let refused = |args: &[&OsStr], why: &str| {
        let out = serve(BIN)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(why), "{stderr}");
    };
    refused(&[a.as_os_str(), inner.as_os_str()], "overlap");
    refused(&[a.as_os_str(), a.as_os_str()], "overlap");
    let shared = dir.path().join("state");
    refused(
        &[
            "--state-dir".as_ref(),
            shared.as_os_str(),
            a.as_os_str(),
            b.as_os_str(),
        ],
        "names one vault's",
    );
    // Nothing was opened: no state directory appeared in either folder.
    assert!(!a.join(".notevault").exists());
    assert!(!b.join(".notevault").exists());
}
