//! Every reason the read surface can answer, over HTTP, with the full envelope.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

mod common;

use common::{assert_envelope, assert_envelope_for, detail, res_json, violated_field, TestServer};
use reqwest::Method;

#[tokio::test]
async fn unknown_routes_and_methods_are_route_not_found() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    for (method, path) in [
        (Method::GET, "/v2/notes"),
        (Method::GET, "/v1/nothing-here"),
        (Method::GET, "/v1/notes/Welcome:frobnicate"),
        (Method::DELETE, "/openapi.json"),
    ] {
        let body = s
            .refused(
                path,
                method.clone(),
                path,
                None,
                None,
                404,
                "ROUTE_NOT_FOUND",
            )
            .await;
        // A known path with another method says which methods it has.
        if method == Method::DELETE {
            assert!(body["message"].as_str().unwrap().contains("GET"), "{body}");
        }
    }
}

#[tokio::test]
async fn bad_query_values_name_their_field() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    for (path, field) in [
        ("/v1/notes/Welcome?offset=0", "offset"),
        ("/v1/notes/Welcome?offset=abc", "offset"),
        ("/v1/notes/Welcome?limit=0", "limit"),
        ("/v1/notes/Welcome?limit=2001", "limit"),
        ("/v1/notes/Welcome?offset=100000", "offset"),
        ("/v1/notes/Welcome?bogus=1", "bogus"),
        ("/v1/notes?page_size=0", "page_size"),
        ("/v1/notes?page_size=501", "page_size"),
        ("/v1/notes?page_token=", "page_token"),
        ("/v1/notes?order_by=colour%20desc", "order_by"),
        ("/v1/notes/Welcome/raw?limit=1", "limit"),
    ] {
        let body = s.get_error(path, 400, "VALIDATION_FAILED").await;
        assert_eq!(violated_field(&body), field, "{path}");
    }
}

#[tokio::test]
async fn bad_filters_are_invalid_filter_with_a_position() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    for (filter, position) in [
        ("tags", "4"),
        ("bogus%3Dx", "0"),
        ("tags%3Aa%20AND", "10"),
        ("(status%3Ddone", "12"),
    ] {
        let body = s
            .get_error(&format!("/v1/notes?filter={filter}"), 400, "INVALID_FILTER")
            .await;
        let info = detail(&body, "ErrorInfo");
        assert_eq!(info["metadata"]["position"], position, "{filter}: {body}");
    }
}

#[tokio::test]
async fn missing_notes_and_notes_removed_between_list_and_read() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    for path in ["/v1/notes/does-not-exist", "/v1/notes/does-not-exist/raw"] {
        s.get_error(path, 404, "NOTE_NOT_FOUND").await;
    }
    s.get_json("/v1/notes?prefix=Inbox", 200).await;
    std::fs::remove_file(s.vault.join("Inbox.md")).unwrap();
    for path in ["/v1/notes/Inbox", "/v1/notes/Inbox/raw"] {
        s.get_error(path, 404, "NOTE_NOT_FOUND").await;
    }
    let list = s.get_json("/v1/notes?prefix=Inbox", 200).await;
    assert_eq!(
        list["coverage"]["notes_matched"], 0,
        "a vanished note leaves the listing"
    );
}

#[tokio::test]
async fn traversal_is_unsafe_path_and_reads_nothing_outside() {
    let s = TestServer::start(Some("fixtures/edge"), |_| {}).await;
    for path in [
        "/v1/notes/..%2F..%2Fetc%2Fpasswd",
        "/v1/notes/%2e%2e%2foutside%2fsecret",
        "/v1/notes/%2Fetc%2Fpasswd",
        "/v1/notes/a%00b",
        "/v1/notes/link-outside",
        "/v1/notes/link-outside/raw",
        "/v1/notes/.notevault%2Fmeta.sqlite",
        "/v1/notes/.trash%2Fold",
    ] {
        let res = s.get(path).await;
        let text = res.text().await.unwrap();
        assert!(!text.contains("TOP SECRET"), "{path} leaked: {text}");
        let body: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["reason"], "UNSAFE_PATH", "{path}: {body}");
        assert_envelope_for(path, &body, 400, "UNSAFE_PATH");
    }
}

#[tokio::test]
async fn foreign_hosts_and_origins_are_refused() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    // (method, path, header, value, status: 403 is the ORIGIN_FORBIDDEN envelope)
    let cases = [
        (Method::GET, "/v1/notes", "host", "evil.example", 403),
        (
            Method::GET,
            "/v1/notes",
            "host",
            "127.0.0.1.evil.example:4000",
            403,
        ),
        (
            Method::GET,
            "/v1/notes",
            "origin",
            "http://evil.example",
            403,
        ),
        (Method::GET, "/v1/notes", "origin", "null", 403),
        // The same guard stands before /mcp.
        (Method::POST, "/mcp", "origin", "http://evil.example", 403),
        // A local origin passes.
        (
            Method::GET,
            "/v1/notes",
            "origin",
            "http://localhost:5173",
            200,
        ),
    ];
    for (method, path, name, value, status) in cases {
        let what = format!("{method} {path} with {name}: {value}");
        let res = s
            .client
            .request(method, s.url(path))
            .header(name, value)
            .send()
            .await
            .unwrap();
        if status == 200 {
            assert_eq!(res.status(), status, "{what}");
            continue;
        }
        assert!(
            res.headers().get("access-control-allow-origin").is_none(),
            "{what}"
        );
        let body = res_json(res, status, &what).await;
        assert_envelope_for(&what, &body, status, "ORIGIN_FORBIDDEN");
    }
}

#[tokio::test]
async fn rate_limit_headers_and_429() {
    let s = TestServer::start(Some("vault-example"), |c| c.rate_limit_read_per_minute = 3).await;
    for remaining in [2, 1, 0] {
        let res = s.get("/v1/notes?page_size=1").await;
        assert_eq!(res.status(), 200);
        let h = |n: &str| res.headers()[n].to_str().unwrap().parse::<u64>().unwrap();
        assert_eq!(h("ratelimit-limit"), 3);
        assert_eq!(h("ratelimit-remaining"), remaining);
        assert!(h("ratelimit-reset") <= 60);
    }
    let res = s.get("/v1/notes?page_size=1").await;
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=20).contains(&retry), "{retry}");
    assert_eq!(res.headers()["ratelimit-remaining"], "0");
    let body = res_json(res, 429, "429").await;
    assert_envelope(&body, 429, "RATE_LIMITED");
    detail(&body, "RetryInfo");
    // The contract is not limited.
    assert_eq!(s.get("/openapi.json").await.status(), 200);
}

#[tokio::test]
async fn zero_disables_the_limit() {
    let s = TestServer::start(Some("vault-example"), |c| c.rate_limit_read_per_minute = 0).await;
    for _ in 0..5 {
        let res = s.get("/v1/notes?page_size=1").await;
        assert_eq!(res.status(), 200);
        assert!(res.headers().get("ratelimit-limit").is_none());
    }
}

#[tokio::test]
async fn help_links_follow_the_configured_docs_url() {
    let s = TestServer::start(Some("vault-example"), |c| {
        c.docs_url = "http://docs.test/nv/".into()
    })
    .await;
    let body = s.get_error("/v1/notes/nope", 404, "NOTE_NOT_FOUND").await;
    assert_eq!(
        body["help"],
        "http://docs.test/nv/api/errors#note_not_found"
    );
}
