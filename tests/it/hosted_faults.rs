//! A hosted vault on a database that refuses writes (a primary in recovery, a replica
//! promoted late, `default_transaction_read_only`): an instance still opens the vault and
//! answers reads and searches; a write is `503 STORAGE_UNAVAILABLE` with `Retry-After`,
//! nothing half-written; once the database takes writes again, the write's retry (same
//! `Idempotency-Key`, after `Retry-After`) lands once.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::common::hosted::Hosted;
use crate::common::postgres::query;
use crate::common::{assert_envelope, res_json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_database_serves_reads_refuses_writes_and_takes_the_retry_after() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let a = hosted.instance();
    a.call(
        Method::POST,
        "/v1/notes",
        Some("k-before"),
        Some(json!({"slug": "before", "content": "# Before\nquince marmalade\n"})),
        201,
    )
    .await;
    query(
        &hosted.db.url,
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = on', current_database()); END $$",
    );

    // A new instance: every connection it makes is read-only.
    let b = hosted.instance();
    let note = b.get("/v1/notes/before", 200).await;
    assert!(note.to_string().contains("quince"), "{note}");
    let found = b.get("/v1/search?q=quince&min_seq=1", 200).await;
    assert!(found.to_string().contains("before"), "{found}");
    let write = json!({"slug": "during", "content": "# During\n"});
    let res = b
        .send(
            Method::POST,
            "/v1/notes",
            Some("k-during"),
            Some(write.clone()),
        )
        .await;
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let refused = res_json(res, 503, "a write on a read-only database").await;
    assert_envelope(&refused, 503, "STORAGE_UNAVAILABLE");
    assert!(
        refused["message"].as_str().unwrap().contains("read-only"),
        "{refused}"
    );
    b.get("/v1/notes/during", 404).await;
    // A device's push whose every op the storage refused: the whole push is that 503
    // with Retry-After (a load balancer or the device retries it), not a 200 of failures.
    let push = json!({"device_id": "laptop", "ops": [
        {"kind": "upsert", "path": "pushed.md", "content_base64": "IyBQdXNoZWQK"},
    ]});
    let res = b
        .send(Method::POST, "/v1/sync/ops", Some("k-push"), Some(push))
        .await;
    assert!(res.headers().contains_key("retry-after"), "{res:?}");
    let refused = res_json(res, 503, "a push on a read-only database").await;
    assert_envelope(&refused, 503, "STORAGE_UNAVAILABLE");

    // Writable again, and the sessions of the read-only time ended (as a failover ends
    // them): the retry, sent as Retry-After says, lands once.
    query(
        &hosted.db.url,
        "BEGIN READ WRITE; DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET default_transaction_read_only', current_database()); END $$; COMMIT",
    );
    query(
        &hosted.db.url,
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()) AS cut",
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let made = loop {
        tokio::time::sleep(Duration::from_secs(retry)).await;
        let res = b
            .send(
                Method::POST,
                "/v1/notes",
                Some("k-during"),
                Some(write.clone()),
            )
            .await;
        if res.status() == 201 {
            break res.json::<serde_json::Value>().await.unwrap();
        }
        let status = res.status().as_u16();
        let body = res_json(res, status, "a retry").await;
        assert_envelope(&body, 503, "STORAGE_UNAVAILABLE");
        assert!(Instant::now() < deadline, "still refused: {body}");
    };
    let again = b
        .call(
            Method::POST,
            "/v1/notes",
            Some("k-during"),
            Some(write),
            201,
        )
        .await;
    assert_eq!(made["version_id"], again["version_id"]);
    assert_eq!(
        a.get("/v1/notes/during", 200).await["version_id"],
        made["version_id"]
    );
}

/// `/readyz` of a hosted instance names the database while it is down (`/healthz` still
/// answers: the process serves), and is ready again once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_names_the_database_while_it_is_down() {
    let Some(cluster) = crate::common::postgres::Cluster::start() else {
        return;
    };
    let hosted = Hosted::on(cluster.database());
    let a = hosted.instance();
    let probe = |path: &'static str| {
        let url = a.url(path);
        async move {
            let res = reqwest::get(url).await.unwrap();
            let status = res.status().as_u16();
            (status, res.json::<serde_json::Value>().await.unwrap())
        }
    };
    let (status, ready) = probe("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["checks"]["database"], "ok");
    assert_eq!(ready["checks"]["schema"], "ok");

    cluster.stop_immediate();
    let begin = Instant::now();
    let (status, ready) = probe("/readyz").await;
    assert!(
        begin.elapsed() < Duration::from_secs(5),
        "{:?}",
        begin.elapsed()
    );
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["status"], "not_ready");
    let why = ready["checks"]["database"].as_str().unwrap();
    assert!(why.contains("unreachable"), "{ready}");
    assert_eq!(probe("/healthz").await.0, 200);

    cluster.restart();
    let (status, ready) = probe("/readyz").await;
    assert_eq!(status, 200, "{ready}");
}

/// The database refusing new connections (the role's connection limit reached, as a
/// cluster's `max_connections` would): a request that needs one is `503
/// STORAGE_UNAVAILABLE` with `Retry-After`, its message naming the limit; nothing is
/// half-written; once connections are allowed again the retry lands once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_limit_reached_is_unavailable_then_served_again() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let role = format!("nv_limited_{}", uuid::Uuid::new_v4().simple());
    query(
        &hosted.db.url,
        &format!(
            "CREATE ROLE {role} LOGIN PASSWORD 'limited-pw';
             GRANT ALL ON ALL TABLES IN SCHEMA public TO {role};
             GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}"
        ),
    );
    let (scheme, rest) = hosted.db.url.split_once("://").unwrap();
    let host = rest.split_once('@').map_or(rest, |(_, host)| host);
    let a = hosted.instance_at(&format!("{scheme}://{role}:limited-pw@{host}"));
    a.call(
        Method::POST,
        "/v1/notes",
        Some("k-before"),
        Some(json!({"slug": "before", "content": "# Before\n"})),
        201,
    )
    .await;

    // No new connection for the role, and the ones it has cut.
    let cut = |limit: i32| {
        query(
            &hosted.db.url,
            &format!(
                "ALTER ROLE {role} CONNECTION LIMIT {limit};
                 SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE usename = '{role}') AS cut"
            ),
        )
    };
    cut(0);
    // A pooled connection cut under a request answers first (as a restart would); then
    // every new one is refused for the limit. Each answer is the envelope.
    let write = json!({"slug": "during", "content": "# During\n"});
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let res = a
            .send(
                Method::POST,
                "/v1/notes",
                Some("k-during"),
                Some(write.clone()),
            )
            .await;
        assert!(res.headers().contains_key("retry-after"), "{res:?}");
        let refused = res_json(res, 503, "a write past the connection limit").await;
        assert_envelope(&refused, 503, "STORAGE_UNAVAILABLE");
        if refused["message"]
            .as_str()
            .unwrap()
            .contains("too many connections")
        {
            break;
        }
        assert!(Instant::now() < deadline, "never the limit: {refused}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rows = query(
        &hosted.db.url,
        "SELECT count(*) FROM notes WHERE path = 'during.md'",
    );
    assert_eq!(rows[0].get::<_, i64>(0), 0, "nothing half-written");

    // Allowed again: the retry lands, once.
    query(
        &hosted.db.url,
        &format!("ALTER ROLE {role} CONNECTION LIMIT -1"),
    );
    let made = a
        .call(
            Method::POST,
            "/v1/notes",
            Some("k-during"),
            Some(write.clone()),
            201,
        )
        .await;
    let again = a
        .call(
            Method::POST,
            "/v1/notes",
            Some("k-during"),
            Some(write),
            201,
        )
        .await;
    assert_eq!(made["version_id"], again["version_id"]);
    drop(a);
    query(
        &hosted.db.url,
        &format!(
            "REASSIGN OWNED BY {role} TO CURRENT_USER; DROP OWNED BY {role}; DROP ROLE {role}"
        ),
    );
}
