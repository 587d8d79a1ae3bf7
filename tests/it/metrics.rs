//! `GET /metrics` as a Prometheus scraper reads it: the text format parses, the counters
//! move with writes, replays and refusals, and no label holds a token, a vault name or a
//! note's name. Local mode: on the daemon's listener without a token. Hosted mode: on
//! `metrics_listen` only; the public listener refuses it with an envelope naming the key.
//!
//! The recorder is global to a process, and the local tests share this one with every
//! other test's servers: they assert deltas and presence, never totals. A hosted
//! instance is a process of its own: its counts are exact.

use std::time::Duration;

use notevault::auth::{Permission, StaticToken, TokenKind};
use reqwest::Method;
use serde_json::json;

use crate::common::hosted::{Hosted, TOKEN as HOSTED_TOKEN};
use crate::common::{assert_envelope, TestServer};

const TOKEN: &str = "metrics-test-token-0123456789abcdef";

/// One sample of a scrape.
#[derive(Debug, serde::Deserialize)]
struct Sample {
    name: String,
    labels: std::collections::HashMap<String, String>,
    value: f64,
}

/// What the official Prometheus client's text parser reads in a scrape (`None`: the
/// developer opted out of the test tools and it is missing). It refuses what is not the
/// text format.
const PARSE: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
samples = [
    {"name": s.name, "labels": s.labels, "value": s.value}
    for family in text_string_to_metric_families(sys.stdin.read())
    for s in family.samples
]
json.dump(samples, sys.stdout)
"#;

fn parse(text: &str) -> Option<Vec<Sample>> {
    use std::io::Write;
    let python = crate::common::tools::python(&["prometheus_client.parser"])?;
    let mut child = std::process::Command::new(python)
        .args(["-c", PARSE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the Prometheus parser refused the scrape: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// The sum of `metric`'s samples whose labels include `labels` (0 when absent: a
/// counter not yet moved).
fn value(scrape: &[Sample], metric: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .iter()
        .filter(|s| s.name == metric)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
        .sum()
}

fn has(scrape: &[Sample], metric: &str) -> bool {
    scrape.iter().any(|s| s.name == metric)
}

async fn scrape_text(client: &reqwest::Client, url: &str) -> String {
    let res = client.get(url).send().await.unwrap();
    assert_eq!(res.status(), 200, "GET {url}");
    let kind = res.headers()["content-type"].to_str().unwrap().to_string();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    res.text().await.unwrap()
}

#[tokio::test]
async fn local_metrics_parse_move_with_writes_and_name_no_token_or_note() {
    let s = TestServer::start(Some("vault-example"), |c| {
        c.auth_required = true;
        c.static_tokens = vec![StaticToken {
            token: TOKEN.into(),
            permissions: vec![Permission::NotesWrite],
            kind: TokenKind::Session,
            vault_id: None,
        }];
    })
    .await;
    // No token, any Host: served like the probes.
    let anonymous = reqwest::Client::new();
    let url = s.url("/metrics");
    let Some(before) = parse(&scrape_text(&anonymous, &url).await) else {
        return;
    };

    let write = |key: &'static str, slug: &'static str| {
        s.client
            .post(s.url("/v1/notes"))
            .bearer_auth(TOKEN)
            .header("Idempotency-Key", key)
            .json(&json!({"slug": slug, "content": "# Merger talks\nconfidential\n"}))
            .send()
    };
    assert_eq!(
        write("metrics-k1", "merger-talks-q3")
            .await
            .unwrap()
            .status(),
        201
    );
    // The same key and request: its receipt again.
    assert_eq!(
        write("metrics-k1", "merger-talks-q3")
            .await
            .unwrap()
            .status(),
        201
    );
    // Another key for the same slug: refused.
    assert_eq!(
        write("metrics-k2", "merger-talks-q3")
            .await
            .unwrap()
            .status(),
        409
    );
    let read = s
        .client
        .get(s.url("/v1/notes/merger-talks-q3"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);

    let text = scrape_text(&anonymous, &url).await;
    let after = parse(&text).unwrap();
    let moved = |metric: &str, labels: &[(&str, &str)]| {
        value(&after, metric, labels) - value(&before, metric, labels)
    };
    assert!(
        moved("notevault_writes_total", &[("outcome", "applied")]) >= 1.0,
        "{text}"
    );
    assert!(
        moved(
            "notevault_writes_total",
            &[("outcome", "refused"), ("reason", "NAME_COLLISION")]
        ) >= 1.0,
        "{text}"
    );
    assert!(
        moved("notevault_idempotent_replays_total", &[]) >= 1.0,
        "{text}"
    );
    assert!(
        moved(
            "notevault_http_requests_total",
            &[("route", "/v1/notes"), ("status", "201")]
        ) >= 2.0,
        "{text}"
    );
    assert!(
        moved(
            "notevault_http_requests_total",
            &[("route", "/v1/notes/{note}"), ("status", "200")]
        ) >= 1.0,
        "{text}"
    );
    for metric in [
        "notevault_http_request_duration_seconds_bucket",
        "notevault_review_queue_depth",
        "notevault_oplog_lag",
        "notevault_vaults_open",
    ] {
        assert!(has(&after, metric), "{metric} missing:\n{text}");
    }
    assert!(
        text.contains("# TYPE notevault_http_request_duration_seconds histogram"),
        "{text}"
    );
    assert!(value(&after, "notevault_process_resident_memory_bytes", &[]) > 0.0);
    // Never a token, a note's name or its text; a route only as its template.
    for secret in [TOKEN, "merger", "confidential", s.svc.vault_id.as_str()] {
        assert!(!text.contains(secret), "{secret} in the scrape:\n{text}");
    }
    // The API still wants the token.
    let refused = anonymous.get(s.url("/v1/notes")).send().await.unwrap();
    assert_eq!(refused.status(), 401);
}

/// The address of `notevault: metrics at http://ADDR/metrics` in the instance's log.
fn metrics_url(daemon: &crate::common::Daemon) -> String {
    assert!(
        daemon.wait_logged("metrics at http://", Duration::from_secs(10)),
        "no metrics line"
    );
    let log = daemon.log.lock().unwrap();
    let line = log
        .iter()
        .find(|l| l.contains("metrics at http://"))
        .unwrap();
    line.split("metrics at ").nth(1).unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosted_metrics_are_on_metrics_listen_only() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let on = hosted.instance_with(&[("NOTEVAULT_METRICS_LISTEN", "127.0.0.1:0")]);
    let url = metrics_url(&on.daemon);
    let client = reqwest::Client::new();

    // The public listener: an envelope naming the key, token or not.
    let res = client.get(on.url("/metrics")).send().await.unwrap();
    let body = crate::common::res_json(res, 404, "GET /metrics").await;
    assert_envelope(&body, 404, "ROUTE_NOT_FOUND");
    assert!(body.to_string().contains("metrics_listen"), "{body}");
    let with_token = on.send(Method::GET, "/metrics", None, None).await;
    assert_eq!(with_token.status(), 404);

    let body = json!({"slug": "board-minutes", "content": "# Board minutes\nquiet\n"});
    on.call(
        Method::POST,
        "/v1/notes",
        Some("hk-1"),
        Some(body.clone()),
        201,
    )
    .await;
    on.call(Method::POST, "/v1/notes", Some("hk-1"), Some(body), 201)
        .await;

    // Then review: the next write waits in the queue.
    on.call(
        Method::PATCH,
        "/v1/vault/write-settings?update_mask=write_policy",
        None,
        Some(json!({"write_policy": "review"})),
        200,
    )
    .await;
    let queued = json!({"slug": "board-agenda", "content": "# Agenda\n", "agent_id": "bot"});
    on.call(Method::POST, "/v1/notes", Some("hk-2"), Some(queued), 202)
        .await;

    let text = scrape_text(&client, &url).await;
    let Some(scrape) = parse(&text) else {
        return;
    };
    // A process of its own: exact counts.
    assert_eq!(
        value(&scrape, "notevault_writes_total", &[("outcome", "applied")]),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(&scrape, "notevault_writes_total", &[("outcome", "queued")]),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(&scrape, "notevault_idempotent_replays_total", &[]),
        1.0,
        "{text}"
    );
    assert!(
        value(&scrape, "notevault_vault_cache_misses_total", &[]) >= 1.0,
        "{text}"
    );
    assert!(
        value(&scrape, "notevault_vault_cache_hits_total", &[]) >= 1.0,
        "{text}"
    );
    assert_eq!(value(&scrape, "notevault_vaults_open", &[]), 1.0, "{text}");
    assert_eq!(
        value(&scrape, "notevault_review_queue_depth", &[]),
        1.0,
        "{text}"
    );
    for pool in ["stores", "keys"] {
        assert!(
            scrape
                .iter()
                .any(|s| s.name == "notevault_db_pool_connections"
                    && s.labels.get("pool").map(String::as_str) == Some(pool)),
            "pool {pool}:\n{text}"
        );
    }
    assert!(
        value(&scrape, "notevault_db_pool_wait_seconds_count", &[]) >= 1.0,
        "{text}"
    );
    assert!(has(&scrape, "notevault_db_pool_waiting"), "{text}");
    assert!(value(&scrape, "notevault_process_resident_memory_bytes", &[]) > 0.0);
    for secret in [
        HOSTED_TOKEN,
        "board",
        "quiet",
        "agenda",
        "team",
        hosted.vault.as_str(),
    ] {
        assert!(!text.contains(secret), "{secret} in the scrape:\n{text}");
    }
    // The metrics listener serves nothing else.
    let other = client
        .get(url.replace("/metrics", "/v1/notes"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404);
}

/// `serve --metrics-listen` in local mode: `/metrics` on both listeners, its line on
/// stderr before the address line (after which a JSON log has only JSON lines).
#[tokio::test]
async fn local_metrics_listen_serves_beside_the_daemons_listener() {
    let (_dir, vault, state) = crate::common::temp_vault(Some("vault-example"));
    let daemon = crate::common::spawn(
        &vault,
        &state,
        &[
            ("NOTEVAULT_METRICS_LISTEN", "127.0.0.1:0"),
            ("NOTEVAULT_LOG_FORMAT", "json"),
        ],
    );
    let url = metrics_url(&daemon);
    let at = |needle: &str| {
        let log = daemon.log.lock().unwrap();
        log.iter().position(|l| l.contains(needle)).unwrap()
    };
    assert!(at("metrics at http://") < at(" on http://"));
    let client = reqwest::Client::new();
    for url in [url, format!("{}/metrics", daemon.base)] {
        let text = scrape_text(&client, &url).await;
        let Some(scrape) = parse(&text) else {
            return;
        };
        assert!(has(&scrape, "notevault_vaults_open"), "{url}:\n{text}");
    }
}
