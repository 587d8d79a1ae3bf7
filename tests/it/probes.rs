//! `GET /healthz` and `GET /readyz` as a load balancer asks them: no token, no Host
//! check, no rate limit; readiness names each part and why it is not ready.

use std::time::Duration;

use serde_json::Value;

use crate::common::{self, TestServer};

#[tokio::test]
async fn probes_answer_without_a_token_past_the_rate_limit_and_name_the_index() {
    let s = TestServer::start(Some("vault-example"), |c| {
        c.auth_required = true;
        c.rate_limit_read_per_minute = 2;
    })
    .await;
    let client = reqwest::Client::new();
    // Until the start-up index sync is done, not ready and why; then ready.
    common::eventually_within(Duration::from_secs(30), "the daemon is ready", || {
        let (client, url) = (client.clone(), s.url("/readyz"));
        async move {
            let res = client.get(url).send().await.unwrap();
            let status = res.status().as_u16();
            let body: Value = res.json().await.unwrap();
            match status {
                200 => {
                    assert_eq!(body["status"], "ready", "{body}");
                    assert_eq!(body["checks"]["index"], "ok", "{body}");
                    true
                }
                503 => {
                    assert_eq!(body["status"], "not_ready", "{body}");
                    assert!(body["checks"]["index"].as_str().unwrap() != "ok", "{body}");
                    false
                }
                other => panic!("/readyz answered {other}: {body}"),
            }
        }
    })
    .await;
    // Far past the read limit, from a foreign Host, without a token: still answered.
    for _ in 0..10 {
        for path in ["/healthz", "/readyz"] {
            let res = client
                .get(s.url(path))
                .header("host", "balancer.internal")
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "{path}");
        }
    }
    let health: Value = client
        .get(s.url("/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "serving");
    // The API itself still wants a token.
    s.get_error("/v1/notes", 401, "AUTH_MISSING").await;
}

/// `serve --log-format json`: every line on stderr after the address is one JSON object,
/// and each request has its line with its id, vault, route template, status and latency,
/// never its path, token or the note's text.
#[tokio::test]
async fn json_logs_have_one_line_per_request_and_no_token_or_text() {
    const TOKEN: &str = "json-log-token-0123456789abcdef";
    let (_dir, vault, state) = common::temp_vault(Some("vault-example"));
    let tokens = serde_json::json!([{"token": TOKEN, "permissions": ["notes.write"]}]).to_string();
    let mut daemon = common::spawn(
        &vault,
        &state,
        &[
            ("NOTEVAULT_LOG_FORMAT", "json"),
            ("AUTH_REQUIRED", "true"),
            ("NOTEVAULT_STATIC_TOKENS", &tokens),
        ],
    );
    let client = reqwest::Client::new();
    let read = client
        .get(format!("{}/v1/notes/Welcome?limit=20", daemon.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    let id = read.headers()["x-request-id"].to_str().unwrap().to_string();
    assert!(read
        .text()
        .await
        .unwrap()
        .contains("made-up personal knowledge base"));
    let refused = client
        .get(format!("{}/v1/notes/Welcome", daemon.base))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let refused_id = refused.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(daemon.wait_logged(&refused_id, Duration::from_secs(10)));
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();
    let lines = daemon.rest();
    let mut requests = Vec::new();
    for line in lines.lines().filter(|l| !l.trim().is_empty()) {
        let entry: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            entry["level"].is_string() && entry["timestamp"].is_string(),
            "{line}"
        );
        if entry["target"] == "notevault::access" {
            requests.push(entry["fields"].clone());
        }
    }
    let of = |id: &str| {
        requests
            .iter()
            .find(|f| f["request_id"] == id)
            .unwrap_or_else(|| panic!("no line for {id} in {requests:?}"))
            .clone()
    };
    let ok = of(&id);
    assert_eq!(ok["route"], "/v1/notes/{note}", "{ok}");
    assert_eq!(ok["method"], "GET");
    assert_eq!(ok["status"], 200);
    assert!(ok["latency_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(
        ok["vault"].as_str().unwrap().len(),
        36,
        "the vault's id: {ok}"
    );
    assert_eq!(of(&refused_id)["status"], 401);
    for secret in [TOKEN, "made-up personal knowledge base", "Welcome"] {
        assert!(!lines.contains(secret), "the log holds {secret:?}");
    }
}

/// SIGTERM with `drain_seconds`: `/readyz` turns 503 `drain` at once while requests are
/// still answered, then the listener closes and the process exits 0.
#[tokio::test]
async fn sigterm_drains_not_ready_first_still_serving_then_exits_cleanly() {
    let (_dir, vault, state) = common::temp_vault(Some("vault-example"));
    let mut daemon = common::spawn(&vault, &state, &[("NOTEVAULT_DRAIN_SECONDS", "5")]);
    let client = reqwest::Client::new();
    let ready = |client: reqwest::Client, url: String| async move {
        let res = client.get(url).send().await.unwrap();
        let status = res.status().as_u16();
        (status, res.json::<Value>().await.unwrap())
    };
    let url = format!("{}/readyz", daemon.base);
    common::eventually_within(Duration::from_secs(30), "ready", || {
        let (client, url) = (client.clone(), url.clone());
        async move { ready(client, url).await.0 == 200 }
    })
    .await;

    // SAFETY: a signal to our own child, whose pid we hold.
    let sent = unsafe { libc::kill(daemon.child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0);
    common::eventually_within(
        Duration::from_secs(4),
        "not ready once told to stop",
        || {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let (status, body) = ready(client, url).await;
                status == 503 && body["checks"]["drain"].is_string()
            }
        },
    )
    .await;
    let read = client
        .get(format!("{}/v1/notes/Welcome?limit=1", daemon.base))
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200, "still served while draining");
    let status = tokio::task::spawn_blocking(move || {
        let status = daemon.child.wait().unwrap();
        (status, daemon.rest())
    })
    .await
    .unwrap();
    assert!(status.0.success(), "exit {:?}: {}", status.0, status.1);
}
