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
