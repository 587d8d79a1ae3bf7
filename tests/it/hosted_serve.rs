//! Hosted mode served: `notevault serve --database URL` instances on one real
//! PostgreSQL (`common::hosted`), reached over HTTP as a client would. A write answered
//! by one instance is read and found on another; the token selects the vault; an
//! instance started with an empty cache rebuilds it from the database.

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::hosted::{cli, Hosted, Instance, NO_VAULT_TOKEN};
use crate::common::{assert_envelope, res_json};

async fn create(on: &Instance, slug: &str, content: &str, key: &str) -> Value {
    on.call(
        Method::POST,
        "/v1/notes",
        Some(key),
        Some(json!({"slug": slug, "content": content})),
        201,
    )
    .await
}

/// The note as `on` reads it: its version and its lines' text.
async fn read(on: &Instance, slug: &str) -> (String, String) {
    let note = on.get(&format!("/v1/notes/{slug}"), 200).await;
    let text: Vec<&str> = note["lines"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    (
        note["version_id"].as_str().unwrap().to_string(),
        text.join("\n"),
    )
}

async fn found(on: &Instance, query: &str, seq: i64) -> Vec<String> {
    let res = on
        .get(&format!("/v1/search?q={query}&min_seq={seq}"), 200)
        .await;
    res["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["slug"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_on_one_instance_is_read_and_found_on_another() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let (a, b) = (hosted.instance(), hosted.instance());

    let made = create(&a, "plan", "# Plan\nalpha bravo charlie\n", "k-plan").await;
    let seq = made["committed_seq"].as_i64().unwrap();
    let version = made["version_id"].as_str().unwrap().to_string();
    // Read on B at once: reads see what the database committed.
    assert_eq!(
        read(&b, "plan").await,
        (version.clone(), "# Plan\nalpha bravo charlie".to_string())
    );
    assert_eq!(found(&b, "bravo", seq).await, ["plan"]);

    // An edit on B from A's version; A reads it.
    let edited = b
        .call(
            Method::POST,
            "/v1/notes/plan:edit",
            Some("k-edit"),
            Some(json!({"version_id": version, "old_string": "bravo", "new_string": "delta"})),
            200,
        )
        .await;
    let edited_version = edited["version_id"].as_str().unwrap().to_string();
    assert_eq!(
        read(&a, "plan").await,
        (
            edited_version.clone(),
            "# Plan\nalpha delta charlie".to_string()
        )
    );
    let seq = edited["committed_seq"].as_i64().unwrap();
    assert_eq!(found(&a, "delta", seq).await, ["plan"]);
    assert!(found(&a, "bravo", seq).await.is_empty());

    // Two instances writing from the same version: one applies, one is told it moved.
    let edit = |on: &'static str, key: &'static str| json!({"version_id": edited_version, "old_string": "alpha", "new_string": on, "agent_id": key});
    let (ra, rb) = tokio::join!(
        a.send(
            Method::POST,
            "/v1/notes/plan:edit",
            Some("k-race-a"),
            Some(edit("from-a", "a"))
        ),
        b.send(
            Method::POST,
            "/v1/notes/plan:edit",
            Some("k-race-b"),
            Some(edit("from-b", "b"))
        ),
    );
    let mut statuses = [ra.status().as_u16(), rb.status().as_u16()];
    let bodies = [
        ra.json::<Value>().await.unwrap(),
        rb.json::<Value>().await.unwrap(),
    ];
    statuses.sort();
    assert_eq!(statuses, [200, 409], "{bodies:?}");
    let refused = bodies.iter().find(|b| b["statusCode"] == 409).unwrap();
    assert_envelope(refused, 409, "VERSION_MOVED");

    // One Idempotency-Key sent to both at once: one write, one receipt, replayed.
    let body = json!({"slug": "once", "content": "exactly once\n"});
    let (ra, rb) = tokio::join!(
        a.send(
            Method::POST,
            "/v1/notes",
            Some("k-once"),
            Some(body.clone())
        ),
        b.send(
            Method::POST,
            "/v1/notes",
            Some("k-once"),
            Some(body.clone())
        ),
    );
    let ra = res_json(ra, 201, "create on A").await;
    let rb = res_json(rb, 201, "create on B").await;
    assert_eq!(ra["note_id"], rb["note_id"]);
    assert_eq!(ra["version_id"], rb["version_id"]);
    let revisions = b.get("/v1/notes/once:listRevisions", 200).await;
    assert_eq!(
        revisions["versions"].as_array().unwrap().len(),
        1,
        "{revisions}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_selects_the_vault_and_a_deleted_vault_is_refused() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let a = hosted.instance();
    create(&a, "kept", "kept\n", "k1").await;
    let client = reqwest::Client::new();

    // No credential: auth is always on in hosted mode; the contract stays public.
    let res = client.get(a.url("/v1/notes")).send().await.unwrap();
    assert_envelope(&res_json(res, 401, "no token").await, 401, "AUTH_MISSING");
    let res = client.get(a.url("/openapi.json")).send().await.unwrap();
    assert_eq!(res.status(), 200);

    // A token for a vault the database does not hold.
    let res = client
        .get(a.url("/v1/notes"))
        .bearer_auth(NO_VAULT_TOKEN)
        .send()
        .await
        .unwrap();
    assert_envelope(
        &res_json(res, 403, "no vault").await,
        403,
        "VAULT_FORBIDDEN",
    );

    // A personal access token made from the command line for the vault, then revoked.
    let pat = cli(
        &hosted.db.url,
        &[
            "token",
            "create",
            "--name",
            "ci",
            "--scope",
            "notes.write",
            "team",
        ],
    )
    .trim()
    .to_string();
    let with_pat = || client.get(a.url("/v1/notes/kept")).bearer_auth(&pat);
    assert_eq!(with_pat().send().await.unwrap().status(), 200);
    let listed = cli(&hosted.db.url, &["token", "list", "team"]);
    assert!(listed.contains("ci\tnvp_"), "{listed}");
    cli(&hosted.db.url, &["token", "revoke", "ci", "team"]);
    let res = with_pat().send().await.unwrap();
    assert_envelope(&res_json(res, 401, "revoked").await, 401, "AUTH_INVALID");

    // The export archive, from the database (no blob store: no attachment to hold).
    let res = a.send(Method::POST, "/v1/export", None, None).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/gzip");
    let unpacked = crate::console::unpack(&res.bytes().await.unwrap());
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(unpacked.path().join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["skipped"], serde_json::json!([]), "{manifest}");
    assert!(
        unpacked.path().join("vault/kept.md").is_file(),
        "{manifest}"
    );

    // The vault deleted: its token is refused at once, its rows are gone.
    cli(&hosted.db.url, &["vault", "delete", "team"]);
    let res = a.send(Method::GET, "/v1/notes/kept", None, None).await;
    assert_envelope(
        &res_json(res, 403, "deleted vault").await,
        403,
        "VAULT_FORBIDDEN",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_instance_rebuilds_its_cache_from_the_database() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let a = hosted.instance();
    let mut seq = 0;
    for (i, word) in ["marmalade", "quince", "rhubarb"].iter().enumerate() {
        let made = create(
            &a,
            &format!("jam-{i}"),
            &format!("# Jam {i}\n{word}\n"),
            word,
        )
        .await;
        seq = made["committed_seq"].as_i64().unwrap();
    }
    let deleted = a
        .call(Method::DELETE, "/v1/notes/jam-1", Some("k-del"), None, 200)
        .await;
    seq = deleted["committed_seq"].as_i64().unwrap_or(seq);
    drop(a);

    let c = hosted.instance();
    let list = c.get("/v1/notes", 200).await;
    let mut slugs: Vec<&str> = list["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["slug"].as_str().unwrap())
        .collect();
    slugs.sort();
    assert_eq!(slugs, ["jam-0", "jam-2"]);
    assert_eq!(found(&c, "rhubarb", seq).await, ["jam-2"]);
    assert!(found(&c, "quince", seq).await.is_empty());
    assert_eq!(read(&c, "jam-0").await.1, "# Jam 0\nmarmalade");

    // A cache named by a relative path serves writes too.
    let d = hosted.instance_relative();
    create(&d, "relative", "# Relative\n", "k-relative").await;
    assert_eq!(read(&c, "relative").await.1, "# Relative");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_down_is_storage_unavailable_at_once_and_recovered_from() {
    let Some(cluster) = crate::common::postgres::Cluster::start() else {
        return;
    };
    let hosted = Hosted::on(cluster.database());
    let a = hosted.instance();
    create(&a, "before", "before the fault\n", "k-before").await;

    cluster.stop_immediate();
    let body = json!({"slug": "during", "content": "written across the fault\n"});
    for (method, path, key, body) in [
        (Method::GET, "/v1/notes/before", None, None),
        (Method::GET, "/v1/search?q=fault", None, None),
        (
            Method::POST,
            "/v1/notes",
            Some("k-during"),
            Some(body.clone()),
        ),
    ] {
        let begin = std::time::Instant::now();
        let res = a.send(method.clone(), path, key, body).await;
        let took = begin.elapsed();
        let retry = res.headers().get("retry-after").cloned();
        let answer = res_json(res, 503, path).await;
        assert_envelope(&answer, 503, "STORAGE_UNAVAILABLE");
        assert!(retry.is_some(), "{method} {path}: Retry-After");
        assert!(
            took < std::time::Duration::from_secs(5),
            "{method} {path} answered in {took:?}"
        );
    }

    // Back: the instance recovers by itself; the retry is applied once.
    cluster.restart();
    let made = create(&a, "during", "written across the fault\n", "k-during").await;
    let again = create(&a, "during", "written across the fault\n", "k-during").await;
    assert_eq!(made["version_id"], again["version_id"]);
    assert_eq!(read(&a, "before").await.1, "before the fault");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_vault_comes_in_with_its_history() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    // A folder served in local mode, one of its notes edited there.
    let local = crate::common::TestServer::start(Some("vault-example"), |_| {}).await;
    let note = local.get_json("/v1/notes/Inbox?limit=1", 200).await;
    let first = note["version_id"].as_str().unwrap().to_string();
    let edited = local
        .call(
            Method::POST,
            "/v1/notes/Inbox:append",
            Some("k-append"),
            Some(json!({"content": "brought along\n", "version_id": first, "agent_id": "mover"})),
            200,
        )
        .await;
    let local_list = local.get_json("/v1/notes?page_size=500", 200).await;
    let local_revisions = local.get_json("/v1/notes/Inbox:listRevisions", 200).await;
    let (_dir, vault, state) = local.stop().await;

    let out = cli(
        &hosted.db.url,
        &[
            "import",
            vault.to_str().unwrap(),
            "--vault",
            "team",
            "--state-dir",
            state.to_str().unwrap(),
            "--skip-attachments",
        ],
    );
    assert!(out.starts_with("imported "), "{out}");

    let a = hosted.instance();
    let slugs = |list: &Value| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = list["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["slug"].as_str().unwrap().into(),
                    n["version_id"].as_str().unwrap().into(),
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        slugs(&a.get("/v1/notes?page_size=500", 200).await),
        slugs(&local_list)
    );
    let (version, text) = read(&a, "Inbox").await;
    assert_eq!(version, edited["version_id"].as_str().unwrap());
    assert!(text.ends_with("brought along"), "{text}");
    let revisions = a.get("/v1/notes/Inbox:listRevisions", 200).await;
    let ids = |r: &Value| -> Vec<(Value, Value, Value)> {
        r["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                (
                    x["version_id"].clone(),
                    x["actor"].clone(),
                    x["created_at"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(ids(&revisions), ids(&local_revisions));
    // The first version's bytes came from the folder's history.
    let diff = a
        .get(&format!("/v1/notes/Inbox:diff?from={first}"), 200)
        .await;
    assert!(
        diff["diff"].as_str().unwrap().contains("+brought along"),
        "{diff}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_killed_mid_write_loses_nothing_its_retries_land_once() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let unlimited = [("RATE_LIMIT_WRITE_PER_MINUTE", "100000")];
    let (mut a, b) = (
        hosted.instance_with(&unlimited),
        hosted.instance_with(&unlimited),
    );
    let pid = a.daemon.child.id() as i32;
    let body =
        |i: usize| json!({"slug": format!("burst/n{i}"), "content": format!("burst note {i}\n")});
    // Writes in flight on A when it is killed, once the first of them was answered.
    const WRITES: usize = 64;
    let first_answer = tokio::sync::Notify::new();
    let keys: Vec<String> = (0..WRITES).map(|i| format!("k-burst-{i}")).collect();
    let sends: Vec<_> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| {
            let (a, first_answer) = (&a, &first_answer);
            async move {
                let res = a
                    .try_send(Method::POST, "/v1/notes", Some(key), Some(body(i)))
                    .await;
                if res.as_ref().is_ok_and(|r| r.status() == 201) {
                    first_answer.notify_one();
                }
                res
            }
        })
        .collect();
    let killer = async {
        first_answer.notified().await;
        // SAFETY: the pid of our own child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    };
    let (answers, ()) = tokio::join!(futures::future::join_all(sends), killer);
    let _ = a.daemon.child.wait();
    let mut acknowledged = std::collections::HashMap::new();
    for (i, res) in answers.into_iter().enumerate() {
        let Ok(res) = res else {
            continue;
        };
        if res.status() == 201 {
            let r: Value = res.json().await.unwrap();
            acknowledged.insert(i, r["version_id"].clone());
        }
    }
    assert!(!acknowledged.is_empty());
    // Every write retried on B: one receipt each, an acknowledged one the same.
    for i in 0..WRITES {
        let r = b
            .call(
                Method::POST,
                "/v1/notes",
                Some(&format!("k-burst-{i}")),
                Some(body(i)),
                201,
            )
            .await;
        if let Some(version) = acknowledged.get(&i) {
            assert_eq!(
                &r["version_id"], version,
                "write {i} answered before the kill"
            );
        }
        let versions = b
            .get(&format!("/v1/notes/burst%2Fn{i}:listRevisions"), 200)
            .await;
        assert_eq!(
            versions["versions"].as_array().unwrap().len(),
            1,
            "write {i}: {versions}"
        );
    }
}

/// A stateless MCP call (the 2026-07-28 revision) on `on` with the vault's token: the
/// JSON-RPC result.
async fn mcp_call(on: &Instance, tool: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "hosted-test", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}
        }
    }});
    let res = reqwest::Client::new()
        .post(on.url("/mcp"))
        .bearer_auth(crate::common::hosted::TOKEN)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let text = res.text().await.unwrap();
    let answer: Value = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .chain(std::iter::once(text.as_str()))
        .find_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .unwrap_or_else(|| panic!("no JSON-RPC answer in {text}"));
    answer["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_and_mcp_run_across_instances() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let (a, b) = (hosted.instance(), hosted.instance());
    a.call(
        Method::PATCH,
        "/v1/vault/write-settings?update_mask=write_policy",
        None,
        Some(json!({"write_policy": "review"})),
        200,
    )
    .await;
    // Queued on A, seen and approved on B, applied for both.
    let queued = a
        .call(
            Method::POST,
            "/v1/notes",
            Some("k-queued"),
            Some(json!({"slug": "reviewed", "content": "# Reviewed\nsaffron pistachio\n", "agent_id": "bot"})),
            202,
        )
        .await;
    let id = queued["pending_id"].as_str().unwrap();
    assert_eq!(
        b.get(&format!("/v1/writes/{id}"), 200).await["status"],
        "pending"
    );
    a.get("/v1/notes/reviewed", 404).await;
    let decided = b
        .call(
            Method::POST,
            &format!("/v1/writes/{id}:approve"),
            None,
            None,
            200,
        )
        .await;
    assert_eq!(decided["status"], "applied", "{decided}");
    assert_eq!(
        read(&a, "reviewed").await.1,
        "# Reviewed\nsaffron pistachio"
    );

    // MCP on B finds and reads what was applied.
    let seq = decided["result"]["committed_seq"]
        .as_i64()
        .unwrap_or_else(|| panic!("the receipt's seq in {decided}"));
    let found = mcp_call(&b, "search", json!({"q": "pistachio", "min_seq": seq})).await;
    assert!(found.to_string().contains("reviewed"), "{found}");
    let note = mcp_call(&b, "read_note", json!({"note": "reviewed"})).await;
    assert!(note.to_string().contains("saffron"), "{note}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_reach_other_instances_by_listen_also_after_it_was_lost() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let follow = [(
        "NOTEVAULT_LOG",
        "notevault=info,notevault::daemon::hosted=debug",
    )];
    let (a, b) = (hosted.instance_with(&follow), hosted.instance());
    // A opens the vault; B's write reaches A without a request to A.
    create(&a, "first", "first\n", "k-first").await;
    let made = create(&b, "second", "second\n", "k-second").await;
    let seq = made["committed_seq"].as_i64().unwrap();
    let heard = |seq: i64| {
        format!(
            "took in other instances' changes vault={} seq={seq}",
            hosted.vault
        )
    };
    let within = std::time::Duration::from_secs(10);
    assert!(
        a.daemon.wait_logged(&heard(seq), within),
        "A heard B's commit"
    );

    // The server ends A's listening session (as a restart or a cut network would): A
    // makes it again, and hears the next commit.
    let cut = crate::common::postgres::query(
        &hosted.db.url,
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND query LIKE 'LISTEN%') AS cut",
    );
    assert_eq!(
        cut[0].get::<_, i64>(0),
        2,
        "one listening session per instance"
    );
    assert!(
        a.daemon.wait_logged("listening for commits again", within),
        "the listen connection is made again"
    );
    let made = create(&b, "third", "third\n", "k-third").await;
    let seq = made["committed_seq"].as_i64().unwrap();
    assert!(
        a.daemon.wait_logged(&heard(seq), within),
        "A heard B's next commit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_note_and_a_decision_race_across_instances() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let (a, b) = (hosted.instance(), hosted.instance());
    // Over the catalog's 10 MiB in-memory cap of local mode: a hosted vault has no file to
    // read it back from, so it is kept.
    let big = format!(
        "# Big\n{}\n",
        "lorem ipsum dolor sit amet ".repeat(12 * 1024 * 1024 / 27)
    );
    create(&a, "big", &big, "k-big").await;
    for on in [&a, &b] {
        let raw = on.get("/v1/notes/big/raw", 200).await;
        assert_eq!(raw["content"].as_str().unwrap().len(), big.len());
    }

    // One queued write approved on both instances at once: applied once.
    a.call(
        Method::PATCH,
        "/v1/vault/write-settings?update_mask=write_policy",
        None,
        Some(json!({"write_policy": "review"})),
        200,
    )
    .await;
    let queued = a
        .call(
            Method::POST,
            "/v1/notes/big:append",
            Some("k-append"),
            Some(json!({"content": "appended once\n", "agent_id": "bot"})),
            202,
        )
        .await;
    let path = format!(
        "/v1/writes/{}:approve",
        queued["pending_id"].as_str().unwrap()
    );
    let (ra, rb) = tokio::join!(
        a.send(Method::POST, &path, None, None),
        b.send(Method::POST, &path, None, None)
    );
    let mut statuses = [ra.status().as_u16(), rb.status().as_u16()];
    statuses.sort();
    assert_eq!(statuses, [200, 409]);
    let versions = a.get("/v1/notes/big:listRevisions", 200).await;
    assert_eq!(
        versions["versions"].as_array().unwrap().len(),
        2,
        "{versions}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_vault_leaves_memory_and_opens_again() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let a = hosted.instance_with(&[
        ("NOTEVAULT_VAULT_IDLE_SECONDS", "1"),
        (
            "NOTEVAULT_LOG",
            "notevault=info,notevault::daemon::hosted=debug",
        ),
    ]);
    let made = create(&a, "kept", "# Kept\nquokka\n", "k-kept").await;
    let closed = format!("closed an idle vault vault={}", hosted.vault);
    assert!(
        a.daemon
            .wait_logged(&closed, std::time::Duration::from_secs(10)),
        "the idle vault is closed"
    );
    // The next request opens it again from the database.
    let seq = made["committed_seq"].as_i64().unwrap();
    assert_eq!(read(&a, "kept").await.1, "# Kept\nquokka");
    assert_eq!(found(&a, "quokka", seq).await, ["kept"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_deletes_the_vault_for_every_instance() {
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let (a, b) = (hosted.instance(), hosted.instance());
    create(&a, "doomed", "doomed\n", "k-doomed").await;
    b.get("/v1/notes/doomed", 200).await;
    // Confirmed with the vault's name in the registry.
    let res = a
        .send(
            Method::POST,
            "/v1/vault/purge",
            None,
            Some(json!({"confirm": "vault"})),
        )
        .await;
    assert_envelope(
        &res_json(res, 400, "wrong name").await,
        400,
        "VALIDATION_FAILED",
    );
    let res = a
        .send(
            Method::POST,
            "/v1/vault/purge",
            None,
            Some(json!({"confirm": "team"})),
        )
        .await;
    assert_eq!(res.status(), 202);
    for on in [&a, &b] {
        let res = on.send(Method::GET, "/v1/notes/doomed", None, None).await;
        assert_envelope(&res_json(res, 403, "purged").await, 403, "VAULT_FORBIDDEN");
    }
    let left = crate::common::postgres::query(
        &hosted.db.url,
        "SELECT (SELECT count(*) FROM vaults) + (SELECT count(*) FROM notes) + (SELECT count(*) FROM contents)",
    );
    assert_eq!(left[0].get::<_, i64>(0), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwt_selects_its_vault_by_vault_id_or_org_id() {
    use crate::common::jwt::{es256, now, sign};
    let Some(hosted) = Hosted::new() else {
        return;
    };
    let other = cli(
        &hosted.db.url,
        &["vault", "create", "other", "--org", "acme"],
    )
    .trim()
    .to_string();
    let key = es256("k1");
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    #[allow(
        clippy::disallowed_methods,
        reason = "the identity provider's key set, in the test's temp dir"
    )]
    std::fs::write(&jwks, json!({"keys": [key.jwk.clone()]}).to_string()).unwrap();
    let a = hosted.instance_with(&[
        ("NOTEVAULT_AUTH_ISSUER", "https://idp.example/"),
        ("NOTEVAULT_AUTH_JWKS_FILE", jwks.to_str().unwrap()),
        ("NOTEVAULT_LOG", "debug"),
    ]);
    create(&a, "in-team", "team's\n", "k-team").await;
    let claims = |extra: Value| {
        let mut c = json!({"iss": "https://idp.example/", "exp": now() + 300, "sub": "u1"});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c
    };
    let notes = |token: String| {
        let url = a.url("/v1/notes");
        async move {
            let res = reqwest::Client::new()
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            let status = res.status().as_u16();
            (status, res.json::<Value>().await.unwrap())
        }
    };
    let slugs = |list: &Value| -> Vec<String> {
        list["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["slug"].as_str().unwrap().to_string())
            .collect()
    };
    // vault_id names the vault; org_id maps to the org's vault.
    let (status, list) = notes(sign(&key, &claims(json!({"vault_id": hosted.vault})))).await;
    assert_eq!((status, slugs(&list)), (200, vec!["in-team".to_string()]));
    let (status, list) = notes(sign(&key, &claims(json!({"org_id": "acme"})))).await;
    assert_eq!((status, slugs(&list)), (200, Vec::<String>::new()));
    let (status, list) = notes(sign(&key, &claims(json!({"vault_id": other})))).await;
    assert_eq!((status, slugs(&list)), (200, Vec::<String>::new()));
    // No such vault, no such org, a signature of another key.
    let (status, body) = notes(sign(
        &key,
        &claims(json!({"vault_id": "01000000-0000-7000-8000-00000000abcd"})),
    ))
    .await;
    assert_eq!(status, 403);
    assert_envelope(&body, 403, "VAULT_FORBIDDEN");
    let (status, body) = notes(sign(&key, &claims(json!({"org_id": "nobody"})))).await;
    assert_envelope(&body, status, "VAULT_FORBIDDEN");
    // A forged token opens nothing: the vault it names is loaded only for a good one.
    let third = cli(&hosted.db.url, &["vault", "create", "third"])
        .trim()
        .to_string();
    let stranger = es256("k1");
    let (status, body) = notes(sign(&stranger, &claims(json!({"vault_id": third})))).await;
    assert_envelope(&body, status, "AUTH_INVALID");
    let opened = || {
        let log = a.daemon.log.lock().unwrap();
        log.iter()
            .any(|l| l.contains("opened a vault") && l.contains(&third))
    };
    assert!(!opened(), "a forged token loaded its vault");
    let (status, _) = notes(sign(&key, &claims(json!({"vault_id": third})))).await;
    assert_eq!(status, 200);
    assert!(opened(), "a good token loads its vault");
}
