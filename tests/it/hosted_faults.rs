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
