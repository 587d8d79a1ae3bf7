//! Review over HTTP: write settings, policies, budget, the queue and its decisions,
//! revisions, rollback and diffs.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::{assert_envelope, res_json, Mode, TestServer};
use reqwest::Method;
use serde_json::{json, Value};

async fn set_policy(s: &TestServer, policy: &str) {
    let r = s
        .call(
            Method::PATCH,
            "/v1/vault/write-settings?update_mask=write_policy",
            None,
            Some(json!({"write_policy": policy})),
            200,
        )
        .await;
    assert_eq!(r["write_policy"], policy);
}

/// `POST /v1/writes/{id}:{decision}`, answered 200: the decided write.
async fn decide(s: &TestServer, id: &str, decision: &str) -> Value {
    let path = format!("/v1/writes/{id}:{decision}");
    s.call(Method::POST, &path, None, None, 200).await
}

/// Set the write budget (applied writes per rolling hour; 0: unlimited).
async fn set_budget(s: &TestServer, budget: u64) {
    let path = "/v1/vault/write-settings?update_mask=write_budget";
    let body = json!({"write_budget": budget});
    let r = s.call(Method::PATCH, path, None, Some(body), 200).await;
    assert_eq!(r["write_budget"], budget);
}

/// The note file at `rel`, as the server holds it (the folder's, or hosted the
/// database's).
async fn read(s: &TestServer, rel: &str) -> String {
    s.note_file(rel)
        .await
        .unwrap_or_else(|| panic!("{rel} is absent"))
}

async fn write_settings_round_trip_and_refuse_bad_input(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let r = s.get_json("/v1/vault/write-settings", 200).await;
    assert_eq!(r, json!({"write_policy": "auto_apply", "write_budget": 0}));
    let r = s
        .call(
            Method::PATCH,
            "/v1/vault/write-settings?update_mask=write_policy,write_budget",
            None,
            Some(json!({"write_policy": "review_destructive", "write_budget": 5})),
            200,
        )
        .await;
    assert_eq!(
        r,
        json!({"write_policy": "review_destructive", "write_budget": 5})
    );
    #[rustfmt::skip]
    let cases = [
        ("an empty mask", "?update_mask=", json!({"write_policy": "review"}), "INVALID_UPDATE_MASK"),
        ("an unknown field", "?update_mask=nope", json!({"write_policy": "review"}), "INVALID_UPDATE_MASK"),
        ("a field of notes", "?update_mask=write_policy,title", json!({"write_policy": "review"}), "INVALID_UPDATE_MASK"),
        ("no mask", "", json!({"write_policy": "review"}), "INVALID_UPDATE_MASK"),
        ("a negative budget", "?update_mask=write_budget", json!({"write_budget": -1}), "VALIDATION_FAILED"),
        ("an unknown policy", "?update_mask=write_policy", json!({"write_policy": "yolo"}), "VALIDATION_FAILED"),
    ];
    for (what, query, body, reason) in cases {
        let path = format!("/v1/vault/write-settings{query}");
        s.refused(what, Method::PATCH, &path, None, Some(body), 400, reason)
            .await;
    }
    // Settings persist across a restart.
    let s = s.restart(|_| {}).await;
    let r = s.get_json("/v1/vault/write-settings", 200).await;
    assert_eq!(
        r,
        json!({"write_policy": "review_destructive", "write_budget": 5})
    );
}

async fn review_queues_and_approval_applies_after_a_restart(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    set_policy(&s, "review").await;
    let before = read(&s, "Inbox.md").await;
    let v = s.get_json("/v1/notes/Inbox?limit=1", 200).await["version_id"].clone();
    let line = before.lines().find(|l| l.len() > 5).unwrap().to_string();
    let body =
        json!({"version_id": v, "old_string": line, "new_string": "REVIEWED", "agent_id": "bot"});
    let r = s
        .call(
            Method::POST,
            "/v1/notes/Inbox:edit",
            Some("q1"),
            Some(body.clone()),
            202,
        )
        .await;
    assert_eq!(r["status"], "queued");
    let id = r["pending_id"].as_str().unwrap().to_string();
    assert_eq!(
        read(&s, "Inbox.md").await,
        before,
        "a queued write changes nothing"
    );
    // The replay returns the same pending id.
    assert_eq!(
        s.call(
            Method::POST,
            "/v1/notes/Inbox:edit",
            Some("q1"),
            Some(body),
            202
        )
        .await,
        r
    );
    let pending = s.get_json(&format!("/v1/writes/{id}"), 200).await;
    for field in [
        "id",
        "kind",
        "status",
        "agent_id",
        "created_at",
        "decided_at",
        "error",
        "payload",
        "result",
    ] {
        assert!(pending.get(field).is_some(), "{field} in {pending}");
    }
    assert_eq!(pending["kind"], "edit");
    assert_eq!(pending["status"], "pending");
    assert_eq!(pending["agent_id"], "bot");
    assert!(
        pending["diff"].as_str().unwrap().contains("+REVIEWED"),
        "{pending}"
    );
    let list = s.get_json("/v1/writes?status=pending", 200).await;
    assert_eq!(list["writes"].as_array().unwrap().len(), 1);

    // The queue survives a restart.
    let s = s.restart(|_| {}).await;
    let decided = decide(&s, &id, "approve").await;
    assert_eq!(decided["status"], "applied");
    assert!(decided["decided_at"].is_string());
    assert_eq!(decided["result"]["status"], "applied");
    assert!(read(&s, "Inbox.md").await.contains("REVIEWED"));
    for decision in ["approve", "reject"] {
        let path = format!("/v1/writes/{id}:{decision}");
        s.refused(
            decision,
            Method::POST,
            &path,
            None,
            None,
            409,
            "ALREADY_DECIDED",
        )
        .await;
    }
    let applied = s.get_json("/v1/writes?status=applied", 200).await;
    assert_eq!(applied["writes"][0]["id"], id.as_str());
    // Like every list, the queue says how complete its answer is.
    let coverage = &applied["coverage"];
    assert_eq!(coverage["notes_matched"], 1, "{coverage}");
    assert_eq!(coverage["notes_returned"], 1, "{coverage}");
    assert_eq!(coverage["truncated"], false, "{coverage}");
    assert!(coverage["notes_total"].as_u64().unwrap() >= 1, "{coverage}");
    let paged = s.get_json("/v1/writes?page_size=1", 200).await;
    assert_eq!(
        paged["coverage"]["truncated"],
        paged["next_page_token"].is_string()
    );
    assert_eq!(
        s.get_json("/v1/writes?filter=agent_id%3Dbot%20AND%20kind%3Dedit", 200)
            .await["total_size"],
        1
    );
}

async fn rejection_legacy_forms_and_bad_ids(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    set_policy(&s, "review").await;
    let r = s
        .call(
            Method::POST,
            "/v1/notes",
            Some("c1"),
            Some(json!({"slug": "proposal", "content": "x\n"})),
            202,
        )
        .await;
    let id = r["pending_id"].as_str().unwrap().to_string();
    let res = s
        .send(Method::POST, &format!("/v1/writes/{id}/reject"), None, None)
        .await;
    assert_eq!(res.headers()["deprecation"], "true");
    assert_eq!(
        res.headers()["link"].to_str().unwrap(),
        format!("</v1/writes/{id}:reject>; rel=\"successor-version\"")
    );
    assert_eq!(res_json(res, 200, "reject").await["status"], "rejected");
    assert!(!s.holds("proposal.md").await);
    let unknown = "01a202ab-b1eb-71ad-8075-4bd827459e8f";
    #[rustfmt::skip]
    let cases = [
        ("the legacy approve of a decided write", Method::POST, format!("/v1/writes/{id}/approve"), 409, "ALREADY_DECIDED"),
        ("approve a bad id", Method::POST, "/v1/writes/not-a-uuid:approve".into(), 400, "VALIDATION_FAILED"),
        ("get a bad id", Method::GET, "/v1/writes/not-a-uuid".into(), 400, "VALIDATION_FAILED"),
        ("approve an unknown id", Method::POST, format!("/v1/writes/{unknown}:approve"), 404, "PENDING_WRITE_NOT_FOUND"),
        ("get an unknown id", Method::GET, format!("/v1/writes/{unknown}"), 404, "PENDING_WRITE_NOT_FOUND"),
        ("an unknown status", Method::GET, "/v1/writes?status=maybe".into(), 400, "VALIDATION_FAILED"),
        ("an unknown filter field", Method::GET, "/v1/writes?filter=bogus%3D1".into(), 400, "INVALID_FILTER"),
    ];
    for (what, method, path, status, reason) in cases {
        s.refused(what, method, &path, None, None, status, reason)
            .await;
    }
}

async fn a_concurrent_double_approve_has_exactly_one_winner(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |c| {
        c.rate_limit_write_per_minute = 0
    })
    .await;
    set_policy(&s, "review").await;
    let r = s
        .call(
            Method::POST,
            "/v1/notes",
            Some("d1"),
            Some(json!({"slug": "double", "content": "x\n"})),
            202,
        )
        .await;
    let id = r["pending_id"].as_str().unwrap().to_string();
    let seq = s.svc.committed_seq();
    let mut tasks = Vec::new();
    for i in 0..6 {
        let url = s.url(&format!(
            "/v1/writes/{id}:{}",
            if i % 2 == 0 { "approve" } else { "reject" }
        ));
        let client = s.client.clone();
        tasks.push(tokio::spawn(async move {
            client.post(url).send().await.unwrap().status().as_u16()
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        5,
        "{statuses:?}"
    );
    assert!(s.svc.committed_seq() <= seq + 1);
}

#[tokio::test]
async fn an_approval_of_a_note_that_moved_is_decided_with_an_error() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    set_policy(&s, "review").await;
    let v = s.get_json("/v1/notes/Inbox?limit=1", 200).await["version_id"].clone();
    let text = read(&s, "Inbox.md").await;
    let line = text.lines().find(|l| l.len() > 5).unwrap().to_string();
    let r = s
        .call(
            Method::POST,
            "/v1/notes/Inbox:edit",
            Some("m1"),
            Some(json!({"version_id": v, "old_string": line, "new_string": "LATE"})),
            202,
        )
        .await;
    let id = r["pending_id"].as_str().unwrap().to_string();
    std::fs::write(
        s.vault.join("Inbox.md"),
        format!("{text}an editor's line\n"),
    )
    .unwrap();
    let decided = decide(&s, &id, "approve").await;
    assert_eq!(decided["status"], "rejected");
    assert!(
        decided["error"]
            .as_str()
            .unwrap()
            .starts_with("VERSION_MOVED"),
        "{decided}"
    );
    assert_eq!(
        read(&s, "Inbox.md").await,
        format!("{text}an editor's line\n")
    );
}

async fn policies_read_only_and_review_destructive_and_the_budget(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    set_policy(&s, "read_only").await;
    s.refused(
        "a create under read_only",
        Method::POST,
        "/v1/notes",
        Some("r1"),
        Some(json!({"slug": "no", "content": ""})),
        422,
        "WRITE_REFUSED",
    )
    .await;
    assert!(!s.holds("no.md").await);
    set_policy(&s, "review_destructive").await;
    s.call(
        Method::POST,
        "/v1/notes",
        Some("r2"),
        Some(json!({"slug": "yes", "content": ""})),
        201,
    )
    .await;
    let r = s
        .call(Method::DELETE, "/v1/notes/yes", Some("r3"), None, 202)
        .await;
    assert_eq!(r["status"], "queued");
    assert!(s.holds("yes.md").await);
    let r = s
        .call(
            Method::POST,
            "/v1/notes/yes:rename",
            Some("r4"),
            Some(json!({"name": "maybe"})),
            202,
        )
        .await;
    assert_eq!(r["status"], "queued");
    set_policy(&s, "auto_apply").await;
    set_budget(&s, 2).await;
    s.call(
        Method::POST,
        "/v1/notes",
        Some("b1"),
        Some(json!({"slug": "b1", "content": ""})),
        201,
    )
    .await;
    let res = s
        .send(
            Method::POST,
            "/v1/notes",
            Some("b2"),
            Some(json!({"slug": "b2", "content": ""})),
        )
        .await;
    // Two applied writes in the hour already: r2 and b1.
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((3000..=3600).contains(&retry), "{retry}");
    assert_envelope(
        &res_json(res, 429, "budget").await,
        429,
        "WRITE_BUDGET_EXCEEDED",
    );
    assert!(!s.holds("b2.md").await);
    set_budget(&s, 0).await;
    s.call(
        Method::POST,
        "/v1/notes",
        Some("b2"),
        Some(json!({"slug": "b2", "content": ""})),
        201,
    )
    .await;
}

async fn revisions_rollback_and_diffs(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let original = read(&s, "Inbox.md").await;
    let mut version = s.get_json("/v1/notes/Inbox?limit=1", 200).await["version_id"]
        .as_str()
        .unwrap()
        .to_string();
    for i in 0..3 {
        let old = if i == 0 {
            original.lines().next().unwrap().to_string()
        } else {
            format!("line {}", i - 1)
        };
        let r = s.call(Method::POST, "/v1/notes/Inbox:edit", Some(&format!("e{i}")), Some(json!({"version_id": version, "old_string": old, "new_string": format!("line {i}"), "agent_id": "writer"})), 200).await;
        version = r["version_id"].as_str().unwrap().to_string();
    }
    let list = s.get_json("/v1/notes/Inbox:listRevisions", 200).await;
    assert_eq!(list["slug"], "Inbox");
    assert_eq!(list["current_version_id"], version.as_str());
    let versions = list["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 4);
    assert_eq!(versions[0]["version_id"], version.as_str(), "newest first");
    assert_eq!(versions[3]["actor"], "filesystem");
    assert_eq!(versions[0]["actor"], "agent:writer");
    for v in versions {
        assert_eq!(v["revision_id"], v["version_id"]);
        assert_eq!(v["id"], v["version_id"]);
        assert_eq!(v["revision_create_time"], v["created_at"]);
    }
    assert_eq!(versions[0]["prev_version_id"], versions[1]["version_id"]);
    // Paging, legacy names, filter and order.
    let page = s
        .get_json("/v1/notes/Inbox:listRevisions?page_size=3", 200)
        .await;
    assert_eq!(page["versions"].as_array().unwrap().len(), 3);
    let token = page["next_page_token"].as_str().unwrap();
    assert_eq!(page["next_cursor"], token);
    let rest = s
        .get_json(
            &format!("/v1/notes/Inbox/versions?limit=3&cursor={token}"),
            200,
        )
        .await;
    assert_eq!(rest["versions"].as_array().unwrap().len(), 1);
    assert_eq!(rest["versions"][0]["actor"], "filesystem");
    let fs = s
        .get_json(
            "/v1/notes/Inbox:listRevisions?filter=actor%3Dfilesystem",
            200,
        )
        .await;
    assert_eq!(fs["versions"].as_array().unwrap().len(), 1);
    let asc = s
        .get_json(
            "/v1/notes/Inbox:listRevisions?order_by=created_at%20asc",
            200,
        )
        .await;
    assert_eq!(asc["versions"][0]["actor"], "filesystem");
    for (path, reason) in [
        (
            "/v1/notes/Inbox:listRevisions?page_size=501",
            "VALIDATION_FAILED",
        ),
        (
            "/v1/notes/Inbox:listRevisions?order_by=title",
            "VALIDATION_FAILED",
        ),
        (
            "/v1/notes/Inbox:listRevisions?filter=title%3Dx",
            "INVALID_FILTER",
        ),
        ("/v1/notes/Inbox:diff", "VALIDATION_FAILED"),
    ] {
        s.get_error(path, 400, reason).await;
    }

    // A diff from the first revision to the current file.
    let first = versions[3]["version_id"].as_str().unwrap();
    let d = s
        .get_json(&format!("/v1/notes/Inbox:diff?from={first}"), 200)
        .await;
    assert!(d["diff"].as_str().unwrap().contains("+line 2"), "{d}");
    assert_eq!(d["to"], "current");

    // Roll back to the first revision: a new revision with the original content.
    let r = s
        .call(
            Method::POST,
            "/v1/notes/Inbox:rollback",
            Some("rb1"),
            Some(json!({"revision_id": first, "version_id": version})),
            200,
        )
        .await;
    assert_eq!(read(&s, "Inbox.md").await, original);
    assert_ne!(r["version_id"], first);
    let other = s.get_json("/v1/notes/Welcome?limit=1", 200).await["version_id"]
        .as_str()
        .unwrap()
        .to_string();
    #[rustfmt::skip]
    let cases = [
        ("the version before the rollback", json!({"revision_id": first, "version_id": version}), 409, "VERSION_MOVED"),
        ("an unknown revision", json!({"revision_id": "01a202ab-b1eb-71ad-8075-4bd827459e8f"}), 404, "VERSION_NOT_FOUND"),
        ("a revision of another note", json!({"revision_id": other}), 404, "VERSION_NOT_FOUND"),
    ];
    let path = "/v1/notes/Inbox:rollback";
    s.refuse_all(cases.map(|(what, body, status, reason)| {
        (what, Method::POST, path, Some(body), status, reason)
    }))
    .await;

    // A deleted note comes back with its note_id.
    let id = s.get_json("/v1/notes/Welcome?limit=1", 200).await["note_id"]
        .as_str()
        .unwrap()
        .to_string();
    let welcome = read(&s, "Welcome.md").await;
    s.call(Method::DELETE, "/v1/notes/Welcome", Some("del"), None, 200)
        .await;
    let gone = s
        .get_json(&format!("/v1/notes/{id}:listRevisions"), 200)
        .await;
    assert_eq!(gone["current_version_id"], Value::Null);
    assert_eq!(gone["versions"][0]["kind"], "delete");
    let restored = s
        .call(
            Method::POST,
            "/v1/notes/Welcome:rollback",
            Some("rb5"),
            Some(json!({"revision_id": other})),
            201,
        )
        .await;
    assert_eq!(restored["note_id"], id.as_str());
    assert_eq!(read(&s, "Welcome.md").await, welcome);
    common::wait_history(&s.svc).await;
}

/// An approved write is an applied write: it spends the write budget like a direct one,
/// and once the budget is spent an approval answers `WRITE_BUDGET_EXCEEDED` and leaves
/// the write pending (it was approved without counting once).
async fn an_approved_write_counts_against_the_budget(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    s.call(
        Method::PATCH,
        "/v1/vault/write-settings?update_mask=write_policy,write_budget",
        None,
        Some(json!({"write_policy": "review", "write_budget": 1})),
        200,
    )
    .await;
    let mut ids = Vec::new();
    for i in 0..2 {
        let r = s
            .call(
                Method::POST,
                "/v1/notes",
                Some(&format!("q{i}")),
                Some(json!({"slug": format!("queued {i}"), "content": "x\n"})),
                202,
            )
            .await;
        ids.push(r["pending_id"].as_str().unwrap().to_string());
    }
    let first = decide(&s, &ids[0], "approve").await;
    assert_eq!(first["status"], "applied", "{first}");
    assert!(s.holds("queued 0.md").await);
    // The one applied write of the hour was the approval: the next one is refused.
    let res = s
        .send(
            Method::POST,
            &format!("/v1/writes/{}:approve", ids[1]),
            None,
            None,
        )
        .await;
    assert!(res.headers().contains_key("retry-after"));
    assert_envelope(
        &res_json(res, 429, "approve past the budget").await,
        429,
        "WRITE_BUDGET_EXCEEDED",
    );
    assert!(!s.holds("queued 1.md").await);
    let second = s.get_json(&format!("/v1/writes/{}", ids[1]), 200).await;
    assert_eq!(second["status"], "pending", "{second}");
}

/// A pending write queued by a version that stored the HTTP request (before migration 6)
/// is upgraded at start: the listing shows the pipeline's request, an approval applies it
/// (the note is on disk with its content) and the decided row shows the receipt.
#[tokio::test]
async fn a_pending_write_queued_by_an_older_version_is_approved_after_the_upgrade() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    set_policy(&s, "review").await;
    let (dir, vault, state) = s.stop().await;
    let legacy = json!({
        "route": "POST /v1/notes",
        "note": null,
        "query": "",
        "body": {"slug": "legacy/queued", "content": "# Queued before the upgrade\n", "agent_id": "old"},
        "agent_id": "old",
    });
    let id = "01a202ab-b1eb-71ad-8075-4bd827459e8f";
    {
        let db = rusqlite::Connection::open(state.join("meta.sqlite")).unwrap();
        db.execute(
            "INSERT INTO pending_writes (id, kind, status, agent_id, created_at, payload, preview, slug, domain)
             VALUES (?1, 'write', 'pending', 'old', '2026-11-01T00:00:00.000Z', ?2, '', 'legacy/queued', 0)",
            rusqlite::params![id, legacy.to_string()],
        )
        .unwrap();
    }
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    let pending = s
        .call(Method::GET, &format!("/v1/writes/{id}"), None, None, 200)
        .await;
    assert_eq!(pending["payload"]["op"]["op"], "create", "{pending}");
    assert_eq!(pending["payload"]["agent_id"], "old", "{pending}");
    let decided = s
        .call(
            Method::POST,
            &format!("/v1/writes/{id}:approve"),
            None,
            None,
            200,
        )
        .await;
    assert_eq!(decided["status"], "applied", "{decided}");
    assert_eq!(decided["result"]["status"], "applied", "{decided}");
    assert_eq!(decided["result"]["slug"], "legacy/queued", "{decided}");
    assert_eq!(
        read(&s, "legacy/queued.md").await,
        "# Queued before the upgrade\n"
    );
}

crate::test_in_both_modes!(
    write_settings_round_trip_and_refuse_bad_input,
    review_queues_and_approval_applies_after_a_restart,
    rejection_legacy_forms_and_bad_ids,
    a_concurrent_double_approve_has_exactly_one_winner(flavor = "multi_thread", worker_threads = 4),
    policies_read_only_and_review_destructive_and_the_budget,
    revisions_rollback_and_diffs,
    an_approved_write_counts_against_the_budget,
);
