//! Every reason the read surface can answer, over HTTP, with the full envelope.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

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

/// The small holes of the shield issue, each answered with its envelope: a repeated JSON
/// key, a `../` listing prefix, a query value that is not UTF-8, a second Unicode form of
/// an existing name, a declared body over the cap (at once, not after the body timeout),
/// an upload two new folders deep, and `GET /mcp` without a session (JSON-RPC, not text).
#[tokio::test]
async fn small_holes_get_their_envelopes() {
    let s = TestServer::start(Some("vault-example"), |c| {
        c.rate_limit_write_per_minute = 0;
        c.rate_limit_read_per_minute = 0;
        // Far from the bound below: a 413 that waited for the body would take this long.
        c.body_read_timeout = std::time::Duration::from_secs(300);
    })
    .await;
    let raw = |method: Method, path: &str, body: &'static str| {
        s.client
            .request(method, s.url(path))
            .header("content-type", "application/json")
            .header("Idempotency-Key", format!("raw-{path}-{}", body.len()))
            .body(body)
            .send()
    };
    // A key named twice: refused naming it, nothing written.
    let res = raw(
        Method::POST,
        "/v1/notes",
        r#"{"slug": "dup", "content": "a\n", "content": "b\n"}"#,
    )
    .await
    .unwrap();
    let body = res_json(res, 400, "duplicate key").await;
    assert_envelope_for("duplicate key", &body, 400, "VALIDATION_FAILED");
    assert_eq!(violated_field(&body), "content", "{body}");
    assert!(!s.vault.join("dup.md").exists());

    // A listing prefix that climbs out is UNSAFE_PATH, not an empty list.
    for path in [
        "/v1/notes?prefix=../../",
        "/v1/notes?prefix=%2Fetc",
        "/v1/folders?prefix=../",
    ] {
        s.refused(path, Method::GET, path, None, None, 400, "UNSAFE_PATH")
            .await;
    }
    s.get_json("/v1/notes?prefix=daily/", 200).await;

    // A grep pattern (or any query value) that is not UTF-8 is refused, not decoded lossily.
    let body = s
        .refused(
            "grep not utf-8",
            Method::GET,
            "/v1/grep?pattern=%FF%FE",
            None,
            None,
            400,
            "VALIDATION_FAILED",
        )
        .await;
    assert_eq!(violated_field(&body), "pattern", "{body}");

    // One note per name under Unicode normalization: Café in NFC, then in NFD.
    let nfc = "Caf\u{e9}";
    let nfd = "Cafe\u{301}";
    s.call(
        Method::POST,
        "/v1/notes",
        Some("nfc"),
        Some(serde_json::json!({"slug": nfc, "content": "x\n"})),
        201,
    )
    .await;
    let body = s
        .refused(
            "nfd twin",
            Method::POST,
            "/v1/notes",
            Some("nfd"),
            Some(serde_json::json!({"slug": nfd, "content": "y\n"})),
            409,
            "NAME_COLLISION",
        )
        .await;
    assert!(body["message"].as_str().unwrap().contains(nfc), "{body}");
    assert!(!s.vault.join(format!("{nfd}.md")).exists());
    // ... and a move onto the other form of another note's name.
    let body = s
        .refused(
            "move onto nfd twin",
            Method::POST,
            "/v1/notes/Welcome:rename",
            Some("nfd-rename"),
            Some(serde_json::json!({"name": nfd})),
            409,
            "NAME_COLLISION",
        )
        .await;
    assert_envelope(&body, 409, "NAME_COLLISION");

    // A body declared over the cap is 413 at once: the client sends 12 bytes of 100 MB
    // and keeps the connection open; the answer comes without the body timeout.
    let started = std::time::Instant::now();
    let answer = tokio::task::spawn_blocking({
        let addr = s.base.trim_start_matches("http://").to_string();
        move || {
            use std::io::{Read, Write};
            let mut c = std::net::TcpStream::connect(&addr).unwrap();
            c.set_read_timeout(Some(std::time::Duration::from_secs(120)))
                .unwrap();
            write!(
                c,
                "POST /v1/notes HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nIdempotency-Key: big\r\nContent-Length: 104857600\r\n\r\n{{\"slug\": \"x"
            )
            .unwrap();
            let mut buf = [0u8; 4096];
            let n = c.read(&mut buf).unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        }
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("PAYLOAD_TOO_LARGE"), "{answer}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(100),
        "413 came only after {:?}",
        started.elapsed()
    );

    // An upload into two new folders: the API makes folders one level deep.
    let boundary = "XnvBoundaryX";
    let form = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"folder\"\r\n\r\nnew/deeper\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--{boundary}--\r\n"
    );
    let res = s
        .client
        .post(s.url("/v1/attachments"))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .header("Idempotency-Key", "deep-upload")
        .body(form)
        .send()
        .await
        .unwrap();
    let body = res_json(res, 400, "deep upload").await;
    assert_envelope_for("deep upload", &body, 400, "VALIDATION_FAILED");
    assert!(!s.vault.join("new").exists());

    // `GET /mcp` without a session: a JSON-RPC error a client can parse.
    let res = s
        .client
        .get(s.url("/mcp"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert!(res.status().is_client_error(), "{}", res.status());
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"),
        "{:?}",
        res.headers()
    );
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
}
