//! The edges of the HTTP layer, as a client or an attacker meets them on the socket:
//! requests the parser refuses, request targets and Host headers that try to get past the
//! Host guard, CORS preflights, rate-limit headers, malformed JSON-RPC on `/mcp`, slow and
//! idle connections and the connection cap.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use std::time::Duration;

use common::{assert_envelope, res_json, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A bound on waits for something that must happen (never a measure of speed).
const PATIENCE: Duration = Duration::from_secs(60);

/// An MCP request that needs no session.
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"http-edges","version":"0"}}}"#;

/// One answer read off the socket.
#[derive(Debug)]
struct Raw {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{}: not JSON ({e}): {:?}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

fn addr(server: &TestServer) -> String {
    server.base.trim_start_matches("http://").to_string()
}

/// Send `request` on a new connection (written by its own task, so a server that answers
/// before reading it all is not blocked) and read the answer up to the connection's end.
async fn raw(server: &TestServer, request: Vec<u8>) -> Raw {
    let stream = TcpStream::connect(addr(server)).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move {
        // The server may close before reading everything: that is its answer, not an error.
        let _ = write.write_all(&request).await;
        write
    });
    let mut bytes = Vec::new();
    tokio::time::timeout(PATIENCE, read.read_to_end(&mut bytes))
        .await
        .expect("the server ends the connection")
        .expect("the answer is read whole");
    drop(writer.await);
    parse(&bytes)
}

fn parse(bytes: &[u8]) -> Raw {
    let text_end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(bytes)));
    let head = std::str::from_utf8(&bytes[..text_end]).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let headers = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_string(), v.trim().to_string())
        })
        .collect();
    Raw {
        status,
        headers,
        body: bytes[text_end + 4..].to_vec(),
    }
}

fn assert_raw_envelope(answer: &Raw, status: u16, reason: &str) -> serde_json::Value {
    assert_eq!(answer.status, status, "{answer:?}");
    assert!(
        answer
            .header("content-type")
            .is_some_and(|v| v.starts_with("application/json")),
        "{answer:?}"
    );
    let body = answer.json();
    assert_envelope(&body, status, reason);
    assert_eq!(answer.header("x-request-id"), body["requestId"].as_str());
    body
}

#[tokio::test]
async fn requests_the_parser_refuses_are_answered_with_the_envelope() {
    let server = TestServer::start(Some("vault-example"), |_| {}).await;
    let host = format!("Host: {}\r\n", addr(&server));
    let long_query = "a".repeat(100_000);
    let big_header = "b".repeat(1_000_000);
    let many_headers: String = (0..200).map(|i| format!("X-H{i}: v\r\n")).collect();
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "100 KB query",
            format!("GET /v1/search?q={long_query} HTTP/1.1\r\n{host}\r\n").into_bytes(),
            414,
            "URI_TOO_LONG",
        ),
        // The head buffer (128 KiB) fills before the request line ends.
        (
            "1 MB query",
            format!("GET /v1/search?q={big_header} HTTP/1.1\r\n{host}\r\n").into_bytes(),
            431,
            "HEADERS_TOO_LARGE",
        ),
        (
            "1 MB header",
            format!("GET /v1/vault HTTP/1.1\r\n{host}X-Big: {big_header}\r\n\r\n").into_bytes(),
            431,
            "HEADERS_TOO_LARGE",
        ),
        (
            "200 headers",
            format!("GET /v1/vault HTTP/1.1\r\n{host}{many_headers}\r\n").into_bytes(),
            431,
            "HEADERS_TOO_LARGE",
        ),
        (
            "0xFF in the method",
            [
                b"G\xffT /v1/vault HTTP/1.1\r\n".as_slice(),
                host.as_bytes(),
                b"\r\n",
            ]
            .concat(),
            400,
            "MALFORMED_REQUEST",
        ),
        (
            "a header line without a colon",
            format!("GET /v1/vault HTTP/1.1\r\n{host}no colon here\r\n\r\n").into_bytes(),
            400,
            "MALFORMED_REQUEST",
        ),
    ];
    for (what, request, status, reason) in cases {
        let answer = raw(&server, request).await;
        assert_eq!(answer.status, status, "{what}: {answer:?}");
        let body = assert_raw_envelope(&answer, status, reason);
        assert_eq!(answer.header("connection"), Some("close"), "{what}");
        assert!(
            body["help"].as_str().unwrap().starts_with("https://"),
            "{what}"
        );
    }
    // The server is unharmed.
    server.get_json("/v1/vault", 200).await;
}

#[tokio::test]
async fn absolute_form_targets_and_two_host_headers_are_refused_on_v1_and_mcp() {
    let server = TestServer::start(Some("vault-example"), |_| {}).await;
    let here = addr(&server);
    let mcp_body = INITIALIZE;
    let mcp = |target: &str, hosts: &[&str]| {
        let hosts: String = hosts.iter().map(|h| format!("Host: {h}\r\n")).collect();
        format!(
            "POST {target} HTTP/1.1\r\n{hosts}Content-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{mcp_body}",
            mcp_body.len()
        )
    };
    let v1 = |target: &str, hosts: &[&str]| {
        let hosts: String = hosts.iter().map(|h| format!("Host: {h}\r\n")).collect();
        format!("GET {target} HTTP/1.1\r\n{hosts}Connection: close\r\n\r\n")
    };
    let evil = "http://evil.example/v1/vault".to_string();
    let evil_mcp = "http://evil.example/mcp".to_string();
    let refused = [
        ("absolute-form /v1", v1(&evil, &[&here])),
        ("absolute-form /mcp", mcp(&evil_mcp, &[&here])),
        (
            "absolute-form naming another loopback port",
            v1("http://127.0.0.1:1/v1/vault", &[&here]),
        ),
        (
            "two Host headers /v1",
            v1("/v1/vault", &[&here, "evil.example"]),
        ),
        (
            "two Host headers /mcp",
            mcp("/mcp", &[&here, "evil.example"]),
        ),
        (
            "two loopback Host headers",
            v1("/v1/vault", &[&here, &here]),
        ),
    ];
    for (what, request) in refused {
        let answer = raw(&server, request.into_bytes()).await;
        assert_eq!(answer.status, 403, "{what}: {answer:?}");
        assert_raw_envelope(&answer, 403, "ORIGIN_FORBIDDEN");
    }
    // An absolute-form target naming this daemon is still served (RFC 9112 says a server
    // must accept the form).
    let own = format!("http://{here}/v1/vault");
    let answer = raw(&server, v1(&own, &[&here]).into_bytes()).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let answer = raw(
        &server,
        mcp(&format!("http://{here}/mcp"), &[&here]).into_bytes(),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
}

#[tokio::test]
async fn a_preflight_from_an_origin_not_on_the_list_is_refused() {
    let server = TestServer::start(Some("vault-example"), |c| {
        c.allowed_origins = vec!["https://app.example".into()];
        c.rate_limit_read_per_minute = 1;
    })
    .await;
    let preflight = |origin: &'static str| {
        server
            .client
            .request(reqwest::Method::OPTIONS, server.url("/v1/notes"))
            .header("origin", origin)
            .header("access-control-request-method", "GET")
            .header("access-control-request-headers", "authorization")
            .send()
    };
    let res = preflight("https://evil.example").await.unwrap();
    for name in [
        "access-control-allow-origin",
        "access-control-allow-methods",
        "access-control-allow-headers",
    ] {
        assert!(res.headers().get(name).is_none(), "{name}: {res:?}");
    }
    let body = res_json(res, 403, "foreign preflight").await;
    assert_envelope(&body, 403, "ORIGIN_FORBIDDEN");

    let res = preflight("https://app.example").await.unwrap();
    assert!(res.status().is_success(), "{res:?}");
    assert_eq!(
        res.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    // A listed origin's answers carry CORS headers, its 429s too (preflights are not
    // counted): a page can read the wait.
    for status in [200, 429] {
        let res = server
            .client
            .get(server.url("/v1/vault"))
            .header("origin", "https://app.example")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), status);
        assert_eq!(
            res.headers()["access-control-allow-origin"],
            "https://app.example"
        );
    }
}

#[tokio::test]
async fn a_429_says_the_same_wait_in_ratelimit_reset_and_retry_after() {
    let server = TestServer::start(Some("vault-example"), |c| {
        c.rate_limit_read_per_minute = 2;
    })
    .await;
    for _ in 0..2 {
        assert_eq!(server.get("/v1/vault").await.status(), 200);
    }
    let res = server.get("/v1/vault").await;
    let header = |name: &str| -> u64 {
        res.headers()[name]
            .to_str()
            .unwrap()
            .parse()
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let (reset, retry_after) = (header("ratelimit-reset"), header("retry-after"));
    assert_eq!(reset, retry_after);
    // Two per minute: the next token comes within 30 s.
    assert!((1..=30).contains(&retry_after), "{retry_after}");
    let body = res_json(res, 429, "third read").await;
    assert_envelope(&body, 429, "RATE_LIMITED");
    let retry_info = body["details"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["@type"].as_str().unwrap().ends_with("RetryInfo"))
        .expect("RetryInfo");
    assert_eq!(retry_info["retryDelay"], format!("{retry_after}s"));
}

#[tokio::test]
async fn mcp_answers_a_body_it_cannot_parse_with_a_json_rpc_error() {
    let server = TestServer::start(Some("vault-example"), |_| {}).await;
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let cases: [(&str, String, i64, serde_json::Value); 5] = [
        (
            "not JSON",
            "{not json".into(),
            -32700,
            serde_json::Value::Null,
        ),
        ("empty", String::new(), -32700, serde_json::Value::Null),
        ("nested too deep", deep, -32700, serde_json::Value::Null),
        (
            "JSON but not JSON-RPC",
            r#"{"hello": "world"}"#.into(),
            -32600,
            serde_json::Value::Null,
        ),
        (
            "a request whose method is not a string",
            r#"{"jsonrpc": "2.0", "id": 7, "method": 7}"#.into(),
            -32600,
            serde_json::json!(7),
        ),
    ];
    for (what, body, code, id) in cases {
        let res = server
            .client
            .post(server.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(
            res.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json"),
            "{what}"
        );
        let answer = res_json(res, 400, what).await;
        assert_eq!(answer["jsonrpc"], "2.0", "{what}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{what}: {answer}");
        assert_eq!(answer["id"], id, "{what}: {answer}");
        assert!(answer["error"]["message"].is_string(), "{what}: {answer}");
    }
}

/// Read until the server closes the connection; what it sent before, if anything.
async fn until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut bytes = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut bytes))
        .await
        .expect("the server closes the connection")
        .expect("a clean close");
    bytes
}

#[tokio::test]
async fn slow_heads_idle_connections_and_slow_bodies_are_closed() {
    let server = TestServer::start(Some("vault-example"), |c| {
        c.header_read_timeout = Duration::from_millis(300);
        c.body_read_timeout = Duration::from_millis(300);
        c.idle_timeout = Duration::from_secs(30);
    })
    .await;
    let host = addr(&server);

    // A head that never ends: closed without an answer.
    let mut slow_head = TcpStream::connect(&host).await.unwrap();
    slow_head
        .write_all(format!("GET /v1/vault HTTP/1.1\r\nHost: {host}\r\n").as_bytes())
        .await
        .unwrap();
    assert!(until_closed(&mut slow_head).await.is_empty());

    // A kept-alive connection that sends nothing after its first answer.
    let mut idle = TcpStream::connect(&host).await.unwrap();
    idle.write_all(format!("GET /v1/vault HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let answer = parse(&until_closed(&mut idle).await);
    assert_eq!(answer.status, 200);

    // A body that stops short of its Content-Length: 408 with the envelope.
    let mut slow_body = TcpStream::connect(&host).await.unwrap();
    slow_body
        .write_all(
            format!(
                "POST /v1/notes HTTP/1.1\r\nHost: {host}\r\nIdempotency-Key: slow\r\n\
                 Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"slug\""
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let answer = parse(&until_closed(&mut slow_body).await);
    assert_raw_envelope(&answer, 408, "REQUEST_TIMEOUT");
    assert!(!server.vault.join("slow.md").exists());

    server.get_json("/v1/vault", 200).await;
}

#[tokio::test]
async fn a_connection_stalled_mid_body_is_closed_after_the_idle_timeout() {
    let server = TestServer::start(Some("vault-example"), |c| {
        c.body_read_timeout = Duration::from_secs(60);
        c.idle_timeout = Duration::from_millis(300);
    })
    .await;
    let host = addr(&server);
    let mut stalled = TcpStream::connect(&host).await.unwrap();
    stalled
        .write_all(
            format!(
                "POST /v1/notes HTTP/1.1\r\nHost: {host}\r\nIdempotency-Key: stall\r\n\
                 Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    // The idle timer ends the connection long before the 60 s body timeout would answer.
    assert!(until_closed(&mut stalled).await.is_empty());
}

#[tokio::test]
async fn a_client_is_served_while_a_thousand_slow_connections_are_held() {
    // Default limits: 1,024 connections, a 10 s head timeout.
    let server = TestServer::start(Some("vault-example"), |_| {}).await;
    let host = addr(&server);
    let partial = format!("GET /v1/vault HTTP/1.1\r\nHost: {host}\r\n");
    let mut held = Vec::with_capacity(1000);
    for _ in 0..1000 {
        let mut stream = TcpStream::connect(&host).await.unwrap();
        stream.write_all(partial.as_bytes()).await.unwrap();
        held.push(stream);
    }
    server.get_json("/v1/vault", 200).await;
    let res = server
        .client
        .post(server.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(INITIALIZE)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // The held connections were kept, not dropped: the last one finishes its head and is
    // answered.
    let mut last = held.pop().unwrap();
    last.write_all(b"Connection: close\r\n\r\n").await.unwrap();
    assert_eq!(parse(&until_closed(&mut last).await).status, 200);
}

#[tokio::test]
async fn past_the_connection_cap_a_client_gets_503_with_retry_after() {
    let server = TestServer::start(Some("vault-example"), |c| {
        c.max_connections = 2;
    })
    .await;
    let host = addr(&server);
    let partial = format!("GET /v1/vault HTTP/1.1\r\nHost: {host}\r\n");
    // Accepted in order: these two take both places.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(&host).await.unwrap();
        stream.write_all(partial.as_bytes()).await.unwrap();
        held.push(stream);
    }
    let request = format!("GET /v1/vault HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let answer = raw(&server, request.clone().into_bytes()).await;
    let body = assert_raw_envelope(&answer, 503, "SERVER_BUSY");
    assert_eq!(answer.header("retry-after"), Some("1"));
    assert_eq!(body["details"][0]["metadata"]["max_connections"], "2");

    // One held connection finishes and is answered; its place frees up.
    let mut first = held.remove(0);
    first.write_all(b"Connection: close\r\n\r\n").await.unwrap();
    assert_eq!(parse(&until_closed(&mut first).await).status, 200);
    // The server lets the place go once that connection's task ends, which the client
    // cannot observe: until then a new client is refused, clearly, and then served.
    let mut attempts = 0;
    loop {
        let answer = raw(&server, request.clone().into_bytes()).await;
        if answer.status == 200 {
            break;
        }
        assert_raw_envelope(&answer, 503, "SERVER_BUSY");
        attempts += 1;
        assert!(attempts < 1000, "the place never came free");
        tokio::task::yield_now().await;
    }
}
