//! Authentication over HTTP: open local mode, static bearer tokens (from the config and
//! from `NOTEVAULT_STATIC_TOKENS`), every refusal with its envelope and its
//! `WWW-Authenticate`, permissions on writes and reviews, the vault a token is for, and
//! rate limits keyed on the credential.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::{assert_envelope_for, Mode, TestServer};
use notevault::auth::{Permission, StaticToken, TokenKind};
use notevault::config::{Config, Layer};
use reqwest::header::{HeaderValue, AUTHORIZATION};
use reqwest::Method;
use serde_json::{json, Value};

const REALM: &str = r#"Bearer realm="notevault""#;

fn token(token: &str, permissions: &[Permission]) -> StaticToken {
    StaticToken {
        token: token.into(),
        permissions: permissions.to_vec(),
        kind: TokenKind::Session,
        vault_id: None,
    }
}

/// The tokens most tests use: a reader, a writer, a reviewer, and one for another vault.
fn tokens() -> Vec<StaticToken> {
    vec![
        token("reader-token-0123456789", &[]),
        token("writer-token-0123456789", &[Permission::NotesWrite]),
        token("reviewer-token-0123456789", &[Permission::NotesReview]),
        StaticToken {
            vault_id: Some("another-vault".into()),
            ..token(
                "elsewhere-token-0123456789",
                &[Permission::NotesWrite, Permission::NotesReview],
            )
        },
    ]
}

async fn with_tokens(mode: Mode) -> TestServer {
    TestServer::start_as(mode, Some("vault-example"), |c| c.static_tokens = tokens()).await
}

/// How a request presents itself.
#[derive(Clone, Copy)]
enum Auth<'a> {
    None,
    Bearer(&'a str),
    Header(&'a [u8]),
}

static NEXT_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

async fn send(
    s: &TestServer,
    auth: Auth<'_>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut req = s.anonymous().request(method.clone(), s.url(path));
    match auth {
        Auth::None => {}
        Auth::Bearer(t) => req = req.header(AUTHORIZATION, format!("Bearer {t}")),
        Auth::Header(bytes) => {
            req = req.header(AUTHORIZATION, HeaderValue::from_bytes(bytes).unwrap())
        }
    }
    if method != Method::GET {
        let n = NEXT_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        req = req.header("Idempotency-Key", format!("auth-{n}"));
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.unwrap()
}

/// Send, and assert the answer's status; the JSON body and the `WWW-Authenticate` value.
async fn answer(
    s: &TestServer,
    what: &str,
    auth: Auth<'_>,
    method: Method,
    path: &str,
    body: Option<Value>,
    status: u16,
) -> (Value, Option<String>) {
    let res = send(s, auth, method, path, body).await;
    let challenge = res
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    let got = res.status().as_u16();
    let text = res.text().await.unwrap();
    assert_eq!(got, status, "{what}: {text}");
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    (body, challenge)
}

/// Assert a refusal: the envelope of `reason` and the `WWW-Authenticate` value.
#[allow(clippy::too_many_arguments)]
async fn refused(
    s: &TestServer,
    what: &str,
    auth: Auth<'_>,
    method: Method,
    path: &str,
    body: Option<Value>,
    status: u16,
    reason: &str,
    challenge: &str,
) -> Value {
    let (body, got) = answer(s, what, auth, method, path, body, status).await;
    assert_envelope_for(what, &body, status, reason);
    assert_eq!(got.as_deref(), Some(challenge), "{what}");
    body
}

fn note(slug: &str) -> Value {
    json!({"slug": slug, "content": "# From a token\n", "agent_id": "auth-test"})
}

#[tokio::test]
async fn open_local_mode_needs_no_credential_and_checks_one_that_is_sent() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    for auth in [Auth::None, Auth::Header(b"Basic x")] {
        answer(&s, "open read", auth, Method::GET, "/v1/notes", None, 200).await;
    }
    // A bearer is authenticated as in auth mode: an unknown one is refused, not ignored.
    for auth in [Auth::Bearer("anything"), Auth::Header(b"Bearer ")] {
        refused(
            &s,
            "open, bad bearer",
            auth,
            Method::GET,
            "/v1/notes",
            None,
            401,
            "AUTH_INVALID",
            r#"Bearer realm="notevault", error="invalid_token""#,
        )
        .await;
    }
    let (_, challenge) = answer(
        &s,
        "open write",
        Auth::None,
        Method::POST,
        "/v1/notes",
        Some(note("open/one")),
        201,
    )
    .await;
    assert_eq!(challenge, None);
    let vault = s.get_json("/v1/vault", 200).await;
    assert!(
        vault["vault_id"].as_str().is_some_and(|v| v.len() >= 32),
        "{vault}"
    );
}

async fn requests_without_a_good_token_are_refused_with_the_envelope_and_the_challenge(mode: Mode) {
    let s = with_tokens(mode).await;
    let invalid = r#"Bearer realm="notevault", error="invalid_token""#;
    let long = format!("Bearer {}", "a".repeat(100 * 1024));
    let cases: Vec<(&str, Auth, Method, &str, u16, &str, &str)> = vec![
        (
            "no header",
            Auth::None,
            Method::GET,
            "/v1/notes",
            401,
            "AUTH_MISSING",
            REALM,
        ),
        (
            "no header, a write",
            Auth::None,
            Method::POST,
            "/v1/notes",
            401,
            "AUTH_MISSING",
            REALM,
        ),
        (
            "no header, /mcp",
            Auth::None,
            Method::POST,
            "/mcp",
            401,
            "AUTH_MISSING",
            REALM,
        ),
        (
            "another scheme",
            Auth::Header(b"Basic dXNlcjpwYXNz"),
            Method::GET,
            "/v1/vault",
            401,
            "AUTH_MISSING",
            REALM,
        ),
        (
            "an unknown token",
            Auth::Bearer("not-a-configured-token"),
            Method::GET,
            "/v1/notes",
            401,
            "AUTH_INVALID",
            invalid,
        ),
        (
            "an unknown token, /mcp",
            Auth::Bearer("not-a-configured-token"),
            Method::POST,
            "/mcp",
            401,
            "AUTH_INVALID",
            invalid,
        ),
        (
            "a prefix of a token",
            Auth::Bearer("reader-token"),
            Method::GET,
            "/v1/notes",
            401,
            "AUTH_INVALID",
            invalid,
        ),
        (
            "no token after Bearer",
            Auth::Header(b"Bearer"),
            Method::GET,
            "/v1/notes",
            401,
            "AUTH_INVALID",
            invalid,
        ),
        (
            "two tokens",
            Auth::Header(b"Bearer reader-token-0123456789 x"),
            Method::GET,
            "/v1/notes",
            401,
            "AUTH_INVALID",
            invalid,
        ),
        (
            "bytes that are not ASCII",
            Auth::Header(b"Bearer \xff\xfe\xfd"),
            Method::GET,
            "/v1/notes",
            401,
            "AUTH_INVALID",
            invalid,
        ),
        (
            "a 100 KB header",
            Auth::Header(long.as_bytes()),
            Method::GET,
            "/v1/notes",
            401,
            "AUTH_INVALID",
            invalid,
        ),
        (
            "a token for another vault",
            Auth::Bearer("elsewhere-token-0123456789"),
            Method::GET,
            "/v1/notes",
            403,
            "VAULT_FORBIDDEN",
            r#"Bearer realm="notevault", error="insufficient_scope""#,
        ),
    ];
    for (what, auth, method, path, status, reason, challenge) in cases {
        let body = refused(
            &s, what, auth, method, path, None, status, reason, challenge,
        )
        .await;
        let message = body["message"].as_str().unwrap();
        assert!(!message.contains("token-0123456789"), "{what}: {message}");
    }
    // Nothing was written, and the daemon keeps serving.
    assert!(!s.holds("open").await);
    answer(
        &s,
        "after",
        Auth::Bearer("reader-token-0123456789"),
        Method::GET,
        "/v1/notes",
        None,
        200,
    )
    .await;
    // The contract stays open.
    answer(
        &s,
        "contract",
        Auth::None,
        Method::GET,
        "/openapi.json",
        None,
        200,
    )
    .await;
    answer(
        &s,
        "contract, bad token",
        Auth::Bearer("nope"),
        Method::GET,
        "/openapi.json",
        None,
        200,
    )
    .await;
}

async fn writes_need_notes_write_and_reviews_need_notes_review(mode: Mode) {
    let s = with_tokens(mode).await;
    let reader = Auth::Bearer("reader-token-0123456789");
    let writer = Auth::Bearer("writer-token-0123456789");
    let reviewer = Auth::Bearer("reviewer-token-0123456789");
    let write_scope =
        r#"Bearer realm="notevault", error="insufficient_scope", scope="notes.write""#;
    let review_scope =
        r#"Bearer realm="notevault", error="insufficient_scope", scope="notes.review""#;

    // Every token reads.
    for auth in [reader, writer, reviewer] {
        answer(
            &s,
            "read",
            auth,
            Method::GET,
            "/v1/notes/Welcome?limit=1",
            None,
            200,
        )
        .await;
    }
    // A write needs notes.write: refused (nothing written), then applied.
    for (what, auth) in [("a reader", reader), ("a reviewer", reviewer)] {
        let body = refused(
            &s,
            what,
            auth,
            Method::POST,
            "/v1/notes",
            Some(note("tokens/one")),
            403,
            "PERMISSION_MISSING",
            write_scope,
        )
        .await;
        let info = common::detail(&body, "ErrorInfo");
        assert_eq!(info["metadata"]["scope"], "notes.write", "{what}");
    }
    assert!(!s.holds("tokens/one.md").await);
    let (receipt, _) = answer(
        &s,
        "the writer",
        writer,
        Method::POST,
        "/v1/notes",
        Some(note("tokens/one")),
        201,
    )
    .await;
    assert_eq!(receipt["status"], "applied");
    assert_eq!(
        s.note_file("tokens/one.md").await.unwrap(),
        "# From a token\n"
    );

    // The write settings PATCH needs notes.review.
    let settings = "/v1/vault/write-settings?update_mask=write_policy";
    let review = json!({"write_policy": "review"});
    refused(
        &s,
        "policy by a writer",
        writer,
        Method::PATCH,
        settings,
        Some(review.clone()),
        403,
        "PERMISSION_MISSING",
        review_scope,
    )
    .await;
    answer(
        &s,
        "policy by a reviewer",
        reviewer,
        Method::PATCH,
        settings,
        Some(review),
        200,
    )
    .await;

    // Under review a write is queued; reading it by id and approving need notes.review.
    let (queued, _) = answer(
        &s,
        "queued",
        writer,
        Method::POST,
        "/v1/notes",
        Some(note("tokens/two")),
        202,
    )
    .await;
    let id = queued["pending_id"].as_str().unwrap().to_string();
    let get = format!("/v1/writes/{id}");
    let approve = format!("/v1/writes/{id}:approve");
    refused(
        &s,
        "get by a writer",
        writer,
        Method::GET,
        &get,
        None,
        403,
        "PERMISSION_MISSING",
        review_scope,
    )
    .await;
    refused(
        &s,
        "approve by a writer",
        writer,
        Method::POST,
        &approve,
        None,
        403,
        "PERMISSION_MISSING",
        review_scope,
    )
    .await;
    refused(
        &s,
        "approve anonymously",
        Auth::None,
        Method::POST,
        &approve,
        None,
        401,
        "AUTH_MISSING",
        REALM,
    )
    .await;
    assert!(!s.holds("tokens/two.md").await);
    answer(
        &s,
        "get by a reviewer",
        reviewer,
        Method::GET,
        &get,
        None,
        200,
    )
    .await;
    let (decided, _) = answer(
        &s,
        "approve by a reviewer",
        reviewer,
        Method::POST,
        &approve,
        None,
        200,
    )
    .await;
    assert_eq!(decided["status"], "applied", "{decided}");
    assert!(s.holds("tokens/two.md").await);
}

async fn a_token_for_this_vault_is_accepted_and_one_for_another_is_not(mode: Mode) {
    // Learn the vault's id, then serve the same state with tokens bound to it.
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let id = s.get_json("/v1/vault", 200).await["vault_id"]
        .as_str()
        .unwrap()
        .to_string();
    let here = StaticToken {
        vault_id: Some(id.clone()),
        ..token("here-token-0123456789", &[Permission::NotesWrite])
    };
    let there = StaticToken {
        vault_id: Some(format!("{id}-not")),
        ..token("there-token-0123456789", &[Permission::NotesWrite])
    };
    let s = s.restart(|c| c.static_tokens = vec![here, there]).await;
    let (summary, _) = answer(
        &s,
        "here",
        Auth::Bearer("here-token-0123456789"),
        Method::GET,
        "/v1/vault",
        None,
        200,
    )
    .await;
    assert_eq!(
        summary["vault_id"], id,
        "the vault id is stable across restarts"
    );
    answer(
        &s,
        "write here",
        Auth::Bearer("here-token-0123456789"),
        Method::POST,
        "/v1/notes",
        Some(note("here")),
        201,
    )
    .await;
    refused(
        &s,
        "write there",
        Auth::Bearer("there-token-0123456789"),
        Method::POST,
        "/v1/notes",
        Some(note("there")),
        403,
        "VAULT_FORBIDDEN",
        r#"Bearer realm="notevault", error="insufficient_scope""#,
    )
    .await;
    assert!(!s.holds("there.md").await);
}

async fn auth_required_without_tokens_refuses_every_request_but_the_contract(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |c| c.auth_required = true).await;
    refused(
        &s,
        "read",
        Auth::None,
        Method::GET,
        "/v1/notes",
        None,
        401,
        "AUTH_MISSING",
        REALM,
    )
    .await;
    refused(
        &s,
        "a token",
        Auth::Bearer("whatever"),
        Method::GET,
        "/v1/notes",
        None,
        401,
        "AUTH_INVALID",
        r#"Bearer realm="notevault", error="invalid_token""#,
    )
    .await;
    answer(
        &s,
        "contract",
        Auth::None,
        Method::GET,
        "/openapi.json",
        None,
        200,
    )
    .await;
}

async fn mcp_takes_a_token_and_refuses_without_one(mode: Mode) {
    let s = with_tokens(mode).await;
    // A body that is not JSON: past the auth check, the MCP edge answers its parse error.
    let res = s
        .client
        .post(s.url("/mcp"))
        .header(AUTHORIZATION, "Bearer reader-token-0123456789")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert!(res.headers().get("www-authenticate").is_none());
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32700, "{body}");
}

async fn tokens_from_the_environment_work_end_to_end(mode: Mode) {
    let json = r#"[{"token": "env-token-0123456789", "permissions": ["notes.write"]},
                   {"token": "env-pat-0123456789", "permissions": [], "kind": "pat"}]"#;
    let env = |k: &str| (k == "NOTEVAULT_STATIC_TOKENS").then(|| json.to_string());
    let loaded = Config::load(None, env, Layer::default()).unwrap();
    assert_eq!(loaded.static_tokens.len(), 2);
    let s = TestServer::start_as(mode, Some("vault-example"), |c| {
        c.static_tokens = loaded.static_tokens
    })
    .await;
    refused(
        &s,
        "none",
        Auth::None,
        Method::GET,
        "/v1/notes",
        None,
        401,
        "AUTH_MISSING",
        REALM,
    )
    .await;
    answer(
        &s,
        "env write",
        Auth::Bearer("env-token-0123456789"),
        Method::POST,
        "/v1/notes",
        Some(note("env")),
        201,
    )
    .await;
    refused(
        &s,
        "env pat write",
        Auth::Bearer("env-pat-0123456789"),
        Method::POST,
        "/v1/notes",
        Some(note("env2")),
        403,
        "PERMISSION_MISSING",
        r#"Bearer realm="notevault", error="insufficient_scope", scope="notes.write""#,
    )
    .await;
}

async fn rate_limits_count_per_credential(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |c| {
        c.static_tokens = tokens();
        c.rate_limit_read_per_minute = 2;
    })
    .await;
    let reader = Auth::Bearer("reader-token-0123456789");
    let writer = Auth::Bearer("writer-token-0123456789");
    for _ in 0..2 {
        answer(&s, "reader", reader, Method::GET, "/v1/notes", None, 200).await;
    }
    let (body, _) = answer(
        &s,
        "reader, third",
        reader,
        Method::GET,
        "/v1/notes",
        None,
        429,
    )
    .await;
    assert_envelope_for("reader, third", &body, 429, "RATE_LIMITED");
    // Another token from the same address has its own allowance.
    let res = send(&s, writer, Method::GET, "/v1/notes", None).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["ratelimit-remaining"], "1");
}

/// Where `notevault token` finds the server's tokens: the flag and its value, then the
/// vault (local: the state dir and the folder; hosted: the database and the vault's id).
fn token_store(s: &TestServer) -> (&'static str, String, String) {
    match s.mode {
        Mode::Local => (
            "--state-dir",
            s.state.to_str().unwrap().into(),
            s.vault.to_str().unwrap().into(),
        ),
        Mode::Hosted => {
            let hosted = s.hosted();
            let url = hosted.db.as_ref().unwrap().url.clone();
            ("--database", url, hosted.vault_id.clone())
        }
    }
}

/// `notevault token ...` on the command line: success, stdout, stderr.
fn token_cli(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_notevault"))
        .arg("token")
        .args(args)
        .env_remove("NOTEVAULT_CONFIG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn personal_access_tokens_from_the_cli_count_at_once(mode: Mode) {
    let (dir, vault, state) = common::temp_vault(Some("vault-example"));
    let s = TestServer::start_in_as(mode, dir, vault.clone(), state.clone(), |c| {
        c.auth_required = true
    })
    .await;
    let (flag, st, v) = token_store(&s);
    let (st, v) = (st.as_str(), v.as_str());
    let invalid = r#"Bearer realm="notevault", error="invalid_token""#;
    let write_scope =
        r#"Bearer realm="notevault", error="insufficient_scope", scope="notes.write""#;
    // Created while the daemon serves: the token works at once.
    let (ok, out, err) = token_cli(&[
        "create",
        "--name",
        "agent",
        "--scope",
        "notes.write",
        "--expires-in",
        "30d",
        flag,
        st,
        v,
    ]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 1, "the token alone: {out}");
    let agent = out.trim().to_string();
    assert!(agent.starts_with("nvp_") && agent.len() == 42, "{agent}");
    let (ok, out, _) = token_cli(&["create", "--name", "reader", flag, st, v]);
    assert!(ok);
    let reader = out.trim().to_string();
    refused(
        &s,
        "no token now",
        Auth::None,
        Method::GET,
        "/v1/notes",
        None,
        401,
        "AUTH_MISSING",
        REALM,
    )
    .await;
    answer(
        &s,
        "pat write",
        Auth::Bearer(&agent),
        Method::POST,
        "/v1/notes",
        Some(note("pat/one")),
        201,
    )
    .await;
    answer(
        &s,
        "pat read",
        Auth::Bearer(&reader),
        Method::GET,
        "/v1/notes",
        None,
        200,
    )
    .await;
    refused(
        &s,
        "pat reader write",
        Auth::Bearer(&reader),
        Method::POST,
        "/v1/notes",
        Some(note("pat/two")),
        403,
        "PERMISSION_MISSING",
        write_scope,
    )
    .await;

    // A mistyped token (its checksum fails) and an unknown well-formed one.
    let mut typo = agent.clone().into_bytes();
    typo[20] = if typo[20] == b'x' { b'y' } else { b'x' };
    let typo = String::from_utf8(typo).unwrap();
    refused(
        &s,
        "typo",
        Auth::Bearer(&typo),
        Method::GET,
        "/v1/notes",
        None,
        401,
        "AUTH_INVALID",
        invalid,
    )
    .await;
    let unknown = notevault::auth::pat::generate().unwrap();
    refused(
        &s,
        "unknown",
        Auth::Bearer(&unknown),
        Method::GET,
        "/v1/notes",
        None,
        401,
        "AUTH_INVALID",
        invalid,
    )
    .await;

    // The list shows names, prefixes, scopes and use, never a token.
    let (ok, list, _) = token_cli(&["list", flag, st, v]);
    assert!(ok);
    for shown in [
        "agent",
        "reader",
        &agent[..12],
        &reader[..12],
        "notes.write",
    ] {
        assert!(list.contains(shown), "{shown} in {list}");
    }
    assert!(!list.contains(&agent) && !list.contains(&reader), "{list}");
    let agent_line = list.lines().find(|l| l.starts_with("agent")).unwrap();
    assert!(
        !agent_line.ends_with("\t-"),
        "last used is noted: {agent_line}"
    );
    // The metadata store holds no token (local: its files; hosted: its rows).
    let stored: Vec<(String, String)> = match s.mode {
        Mode::Local => ["meta.sqlite", "meta.sqlite-wal"]
            .map(|file| {
                let bytes = std::fs::read(state.join(file)).unwrap_or_default();
                (file.into(), String::from_utf8_lossy(&bytes).into_owned())
            })
            .into(),
        Mode::Hosted => ["personal_tokens", "audit_events"]
            .map(|table| {
                let sql = format!("SELECT coalesce(string_agg(t::text, ' '), '') FROM {table} t");
                let rows = common::postgres::query(st, &sql);
                (table.into(), rows[0].get::<_, String>(0))
            })
            .into(),
    };
    for (place, text) in stored {
        assert!(!text.contains(&agent[12..]), "{place} holds a token");
    }

    // A name is taken once; a bad lifetime is refused.
    let (ok, _, err) = token_cli(&["create", "--name", "agent", flag, st, v]);
    assert!(!ok && err.contains("agent"), "{err}");
    let (ok, _, err) = token_cli(&["create", "--name", "x", "--expires-in", "soon", flag, st, v]);
    assert!(!ok && err.contains("soon"), "{err}");

    // Revoked while the daemon serves: refused at once (by name, then by prefix).
    let (ok, _, err) = token_cli(&["revoke", "agent", flag, st, v]);
    assert!(ok, "{err}");
    refused(
        &s,
        "revoked",
        Auth::Bearer(&agent),
        Method::GET,
        "/v1/notes",
        None,
        401,
        "AUTH_INVALID",
        invalid,
    )
    .await;
    assert!(!s.holds("pat/two.md").await);
    let (ok, _, _) = token_cli(&["revoke", "agent", flag, st, v]);
    assert!(!ok, "revoking twice fails");
    let (ok, _, err) = token_cli(&["revoke", &reader[..12], flag, st, v]);
    assert!(ok, "{err}");
    refused(
        &s,
        "revoked by prefix",
        Auth::Bearer(&reader),
        Method::GET,
        "/v1/notes",
        None,
        401,
        "AUTH_INVALID",
        invalid,
    )
    .await;
}

async fn a_revoked_token_stays_refused_when_auth_is_required(mode: Mode) {
    let (dir, vault, state) = common::temp_vault(Some("vault-example"));
    let s = TestServer::start_in_as(mode, dir, vault.clone(), state.clone(), |c| {
        c.auth_required = true
    })
    .await;
    let (flag, st, v) = token_store(&s);
    let (st, v) = (st.as_str(), v.as_str());
    let (ok, out, err) = token_cli(&["create", "--name", "only", flag, st, v]);
    assert!(ok, "{err}");
    let token = out.trim().to_string();
    answer(
        &s,
        "accepted",
        Auth::Bearer(&token),
        Method::GET,
        "/v1/notes",
        None,
        200,
    )
    .await;
    assert!(token_cli(&["revoke", "only", flag, st, v]).0);
    // A token past its lifetime is refused too.
    let (ok, out, err) = token_cli(&[
        "create",
        "--name",
        "brief",
        "--expires-in",
        "1s",
        flag,
        st,
        v,
    ]);
    assert!(ok, "{err}");
    let brief = out.trim().to_string();
    common::eventually("the token expires", || async {
        send(&s, Auth::Bearer(&brief), Method::GET, "/v1/notes", None)
            .await
            .status()
            == 401
    })
    .await;
    let body = refused(
        &s,
        "expired",
        Auth::Bearer(&brief),
        Method::GET,
        "/v1/notes",
        None,
        401,
        "AUTH_INVALID",
        r#"Bearer realm="notevault", error="invalid_token""#,
    )
    .await;
    assert!(
        body["message"].as_str().unwrap().contains("expired"),
        "{body}"
    );
    refused(
        &s,
        "revoked",
        Auth::Bearer(&token),
        Method::GET,
        "/v1/notes",
        None,
        401,
        "AUTH_INVALID",
        r#"Bearer realm="notevault", error="invalid_token""#,
    )
    .await;
}

crate::test_in_both_modes!(
    requests_without_a_good_token_are_refused_with_the_envelope_and_the_challenge,
    writes_need_notes_write_and_reviews_need_notes_review,
    a_token_for_this_vault_is_accepted_and_one_for_another_is_not,
    auth_required_without_tokens_refuses_every_request_but_the_contract,
    mcp_takes_a_token_and_refuses_without_one,
    tokens_from_the_environment_work_end_to_end,
    rate_limits_count_per_credential,
    personal_access_tokens_from_the_cli_count_at_once,
    a_revoked_token_stays_refused_when_auth_is_required,
);
