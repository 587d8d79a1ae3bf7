//! The web console and the session-only routes: sign-in links and sessions, CSRF, the
//! pages a person uses (over HTTP, and in a real browser: headless Chromium driven by
//! Playwright, `tests/console/browser.py`), `GET /v1/audit-events` and
//! `POST /v1/vault/purge` with a session, a personal access token and nothing.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they read the vault and the environment"
)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{cookie_of, res_json, spawn, temp_vault, TestServer};
use reqwest::Method;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_notevault");
const SESSION: &str = "session-token-for-console-tests";
const PAT: &str = "pat-kind-token-for-console-tests";
/// A session token that holds no permission (a JWT without a permissions claim is the same).
const BARE_SESSION: &str = "bare-session-token-for-console-tests";

fn with_tokens(c: &mut notevault::config::Config) {
    let tokens: Vec<notevault::auth::StaticToken> = serde_json::from_value(json!([
        {"token": SESSION, "permissions": ["notes.write", "notes.review"]},
        {"token": PAT, "permissions": ["notes.write", "notes.review"], "kind": "pat"},
    ]))
    .unwrap();
    c.static_tokens = tokens;
}

/// A client that keeps no cookies and follows no redirects: each step is seen.
fn plain_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Sign in with a fresh link: the session cookie (`name=value`) and the page's CSRF token.
pub(crate) async fn sign_in(s: &TestServer) -> (String, String) {
    let link = notevault::console::sign_in_link(&*s.svc.meta, &s.base).unwrap();
    let client = plain_client();
    let res = client.get(&link).send().await.unwrap();
    // A page that goes on to `/` by itself (a redirect would drop the SameSite=Strict
    // cookie after a cross-site click on the link).
    assert_eq!(res.status(), 200);
    let set = res.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(res
        .text()
        .await
        .unwrap()
        .contains(r#"<meta http-equiv="refresh" content="0; url=/">"#));
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set}");
    }
    assert!(!set.contains("Secure"), "no TLS, no Secure: {set}");
    let cookie = set.split(';').next().unwrap().to_string();
    let page = client
        .get(s.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a form with the CSRF token")
        .to_string();
    (cookie, csrf)
}

pub(crate) async fn post_form(
    s: &TestServer,
    path: &str,
    cookie: Option<&str>,
    form: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = plain_client().post(s.url(path)).form(form);
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn a_sign_in_link_works_once_and_the_session_ends_at_sign_out() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let client = plain_client();
    // Open local mode: the console still needs a sign-in.
    let res = client.get(s.url("/")).send().await.unwrap();
    assert_eq!(res.status(), 401);
    let csp = res.headers()["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert!(res.text().await.unwrap().contains("notevault login-link"));

    let link = notevault::console::sign_in_link(&*s.svc.meta, &s.base).unwrap();
    let first = client.get(&link).send().await.unwrap();
    assert_eq!(first.status(), 200);
    assert!(cookie_of(&first, "notevault_session").is_some());
    let second = client.get(&link).send().await.unwrap();
    assert_eq!(second.status(), 401, "a link signs in once");
    assert!(second.text().await.unwrap().contains("used already"));

    for bad in [
        "/sign-in",
        "/sign-in?code=short",
        "/sign-in?code=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    ] {
        let res = client.get(s.url(bad)).send().await.unwrap();
        assert_eq!(res.status(), 401, "{bad}");
        assert!(res.headers().get("set-cookie").is_none(), "{bad}");
    }
    // A forged cookie is no session.
    let res = client
        .get(s.url("/tokens"))
        .header(
            "cookie",
            "notevault_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert!(res.text().await.unwrap().contains("Your session has ended"));

    let (cookie, csrf) = sign_in(&s).await;
    for page in [
        "/",
        "/pending",
        "/tokens",
        "/settings",
        "/activity",
        "/vault",
    ] {
        let res = client
            .get(s.url(page))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{page}");
        assert_eq!(res.headers()["cache-control"], "no-store", "{page}");
    }
    // Sign-out needs the CSRF token too.
    let res = post_form(&s, "/sign-out", Some(&cookie), &[]).await;
    assert_eq!(res.status(), 403);
    let res = post_form(&s, "/sign-out", Some(&cookie), &[("csrf", &csrf)]).await;
    assert_eq!(res.status(), 200);
    assert!(res.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));
    let res = client
        .get(s.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401, "the session ended on the server");
}

#[tokio::test]
async fn console_posts_need_the_csrf_token_and_a_same_origin() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let (cookie, csrf) = sign_in(&s).await;
    let settings = || async { s.get_json("/v1/vault/write-settings", 200).await };
    let before = settings().await;
    let form = [("write_policy", "read_only"), ("write_budget", "5")];
    // No token, a wrong token: refused, nothing changes.
    let res = post_form(&s, "/settings", Some(&cookie), &form).await;
    assert_eq!(res.status(), 403);
    let mut wrong = form.to_vec();
    wrong.push(("csrf", "not-the-token"));
    let res = post_form(&s, "/settings", Some(&cookie), &wrong).await;
    assert_eq!(res.status(), 403);
    // The right token without a session: the sign-in page.
    let mut right = form.to_vec();
    right.push(("csrf", &csrf));
    let res = post_form(&s, "/settings", None, &right).await;
    assert_eq!(res.status(), 401);
    // A cross-origin form post (the browser sends its Origin) is refused by the guard.
    let res = plain_client()
        .post(s.url("/settings"))
        .header("cookie", &cookie)
        .header("origin", "https://evil.example")
        .form(&right)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(settings().await, before, "nothing changed");
    // Bad values: a clear message, nothing changes.
    let res = post_form(
        &s,
        "/settings",
        Some(&cookie),
        &[
            ("csrf", &csrf),
            ("write_policy", "sometimes"),
            ("write_budget", "x"),
        ],
    )
    .await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("Nothing saved"));
    assert_eq!(settings().await, before);
    // The right token: saved, and the activity says so.
    let res = post_form(&s, "/settings", Some(&cookie), &right).await;
    assert_eq!(res.status(), 303);
    let now = settings().await;
    assert_eq!(now["write_policy"], "read_only");
    assert_eq!(now["write_budget"], 5);
}

#[tokio::test]
async fn the_review_page_decides_writes_and_escapes_what_agents_wrote() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let (cookie, csrf) = sign_in(&s).await;
    s.call(
        Method::PATCH,
        "/v1/vault/write-settings?update_mask=write_policy",
        None,
        Some(json!({"write_policy": "review"})),
        200,
    )
    .await;
    let queued = s
        .call(
            Method::POST,
            "/v1/notes",
            Some("k1"),
            Some(json!({"slug": "x", "content": "# <img src=x onerror=alert(1)>\n", "agent_id": "<b>agent</b>"})),
            202,
        )
        .await;
    let id = queued["pending_id"].as_str().unwrap().to_string();
    let page = plain_client()
        .get(s.url("/pending"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(&format!("id=\"write-{id}\"")), "{page}");
    assert!(
        page.contains("&#60;img src=x onerror=alert(1)&#62;"),
        "{page}"
    );
    assert!(!page.contains("<img src=x"), "{page}");
    assert!(page.contains("&#60;b&#62;agent&#60;/b&#62;"), "{page}");

    // The page polls with its list's version: 204 while nothing changed, the new list
    // (and the poller with the new version) when a write arrives.
    let review = plain_client()
        .get(s.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let poll_url = review
        .split("hx-get=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_string();
    assert!(poll_url.starts_with("/pending?version="), "{poll_url}");
    let poll = || {
        plain_client()
            .get(s.url(&poll_url))
            .header("cookie", &cookie)
            .send()
    };
    assert_eq!(poll().await.unwrap().status(), 204);
    s.call(
        Method::POST,
        "/v1/notes",
        Some("k2"),
        Some(json!({"slug": "y", "content": "another\n"})),
        202,
    )
    .await;
    let res = poll().await.unwrap();
    assert_eq!(res.status(), 200);
    let fragment = res.text().await.unwrap();
    assert!(fragment.contains("hx-swap-oob=\"true\""), "{fragment}");
    assert_eq!(fragment.matches("class=\"write\"").count(), 2, "{fragment}");

    // Approve (htmx: the card's answer), then a second approve: already decided.
    let approve = |extra_header: bool| {
        let mut req = plain_client()
            .post(s.url(&format!("/writes/{id}/approve")))
            .header("cookie", &cookie)
            .form(&[("csrf", csrf.as_str())]);
        if extra_header {
            req = req.header("hx-request", "true");
        }
        req.send()
    };
    let res = approve(true).await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("Approved"));
    assert!(s.vault.join("x.md").exists());
    let res = approve(false).await.unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], "/?done=already");
    let res = approve(true).await.unwrap();
    assert!(res.text().await.unwrap().contains("already decided"));
    let row = s.get_json(&format!("/v1/writes/{id}"), 200).await;
    assert_eq!(row["status"], "applied");

    // A made-up id and action change nothing.
    let res = post_form(
        &s,
        "/writes/not-a-uuid/approve",
        Some(&cookie),
        &[("csrf", &csrf)],
    )
    .await;
    assert_eq!(res.status(), 404);
    let res = post_form(
        &s,
        &format!("/writes/{id}/explode"),
        Some(&cookie),
        &[("csrf", &csrf)],
    )
    .await;
    assert_eq!(res.status(), 404);
}

#[tokio::test]
async fn tokens_made_in_the_console_work_once_shown_and_revoke() {
    let s = TestServer::start(Some("vault-example"), |c| c.auth_required = true).await;
    let (cookie, csrf) = sign_in(&s).await;
    let res = post_form(
        &s,
        "/tokens",
        Some(&cookie),
        &[
            ("csrf", &csrf),
            ("name", "agent-1"),
            ("scope", "notes.write"),
            ("expires_in", "30d"),
        ],
    )
    .await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    let token = html
        .split("id=\"new-token\">")
        .nth(1)
        .and_then(|r| r.split('<').next())
        .unwrap()
        .to_string();
    assert!(token.starts_with("nvp_"), "{token}");
    assert!(html.contains(&format!("Bearer {token}")), "the MCP snippet");
    let use_it = |path: &'static str| plain_client().get(s.url(path)).bearer_auth(&token).send();
    assert_eq!(use_it("/v1/notes?page_size=1").await.unwrap().status(), 200);
    // A taken name: a message, no second token.
    let res = post_form(
        &s,
        "/tokens",
        Some(&cookie),
        &[("csrf", &csrf), ("name", "agent-1")],
    )
    .await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("exists"));
    let res = post_form(
        &s,
        "/tokens",
        Some(&cookie),
        &[
            ("csrf", &csrf),
            ("name", "bad"),
            ("scope", "notes.everything"),
        ],
    )
    .await;
    assert_eq!(res.status(), 400);
    assert_eq!(s.svc.meta.pats().unwrap().len(), 1);
    // The list never shows the token again.
    let listing = plain_client()
        .get(s.url("/tokens"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!listing.contains(&token));
    let prefix = &token[..12];
    assert!(listing.contains(prefix));
    let res = post_form(
        &s,
        &format!("/tokens/{prefix}/revoke"),
        Some(&cookie),
        &[("csrf", &csrf)],
    )
    .await;
    assert_eq!(res.status(), 303);
    assert_eq!(use_it("/v1/notes?page_size=1").await.unwrap().status(), 401);
    let res = post_form(
        &s,
        &format!("/tokens/{prefix}/revoke"),
        Some(&cookie),
        &[("csrf", &csrf)],
    )
    .await;
    assert_eq!(res.status(), 404);
}

#[tokio::test]
async fn audit_events_answer_a_session_refuse_a_pat_and_hold_no_content() {
    let s = TestServer::start(Some("vault-example"), with_tokens).await;
    let client = plain_client();
    let get = |token: Option<&'static str>, path: &str| {
        let mut req = client.get(s.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    let secret_text = "a canary sentence that must not reach the audit log";
    for i in 0..3 {
        let res = client
            .post(s.url("/v1/notes"))
            .bearer_auth(SESSION)
            .header("Idempotency-Key", format!("audit-{i}"))
            .json(&json!({"slug": format!("audit-{i}"), "content": secret_text, "agent_id": "bot"}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
    }
    let res = get(Some(PAT), "/v1/audit-events").await.unwrap();
    assert_eq!(res.status(), 403);
    assert!(res.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .contains("insufficient_scope"));
    let body = res_json(res, 403, "pat").await;
    assert_eq!(body["reason"], "CREDENTIAL_FORBIDDEN");
    let res = get(None, "/v1/audit-events").await.unwrap();
    assert_eq!(res_json(res, 401, "none").await["reason"], "AUTH_MISSING");

    let res = get(Some(SESSION), "/v1/audit-events?page_size=2")
        .await
        .unwrap();
    let page: Value = res_json(res, 200, "session").await;
    let events = page["audit_events"].as_array().unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["kind"], "write.applied");
    assert_eq!(events[0]["actor"], "bot");
    let id = |e: &Value| e["id"].as_str().unwrap().parse::<i64>().unwrap();
    assert!(id(&events[0]) > id(&events[1]));
    let token = page["next_page_token"].as_str().unwrap();
    let res = get(
        Some(SESSION),
        &format!("/v1/audit-events?page_size=2&page_token={token}"),
    )
    .await
    .unwrap();
    let rest: Value = res_json(res, 200, "page 2").await;
    assert_eq!(rest["audit_events"].as_array().unwrap().len(), 1);
    assert!(rest["next_page_token"].is_null());
    let all = format!("{page}{rest}");
    assert!(!all.contains("canary"), "{all}");

    let res = get(
        Some(SESSION),
        "/v1/audit-events?filter=kind%20%3D%20%22token.created%22",
    )
    .await
    .unwrap();
    assert_eq!(
        res_json(res, 200, "filter").await["audit_events"],
        json!([])
    );
    let res = get(
        Some(SESSION),
        "/v1/audit-events?filter=title%20%3D%20%22x%22",
    )
    .await
    .unwrap();
    assert_eq!(
        res_json(res, 400, "bad field").await["reason"],
        "INVALID_FILTER"
    );
    let res = get(Some(SESSION), "/v1/audit-events?page_token=forged")
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let res = get(Some(SESSION), "/v1/audit-events?page_size=0")
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
}

/// Every file under `dir` (but the state dir) and its bytes.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            let rel = entry.path().strip_prefix(dir).unwrap().to_path_buf();
            out.push((rel, std::fs::read(entry.path()).unwrap()));
        }
    }
    out
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    for _ in 0..600 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("the daemon did not stop within 30 s after a purge");
}

async fn purge(base: &str, token: Option<&str>, body: Value) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(format!("{base}/v1/vault/purge"))
        .json(&body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json::<Value>().await.unwrap())
}

#[tokio::test]
async fn purge_needs_a_session_and_the_name_then_removes_the_state_and_leaves_the_notes() {
    let (_dir, vault, state) = temp_vault(Some("vault-example"));
    let before = tree(&vault);
    let tokens = json!([
        {"token": SESSION, "permissions": ["notes.write", "notes.review"]},
        {"token": PAT, "kind": "pat", "permissions": ["notes.write", "notes.review"]},
        {"token": BARE_SESSION},
        {"token": "writer-session", "permissions": ["notes.write"]},
    ])
    .to_string();
    let mut daemon = spawn(
        &vault,
        &state,
        &[("NOTEVAULT_STATIC_TOKENS", tokens.as_str())],
    );
    let base = daemon.base.clone();
    let (status, body) = purge(&base, Some(PAT), json!({"confirm": "vault"})).await;
    assert_eq!(
        (status, &body["reason"]),
        (403, &json!("CREDENTIAL_FORBIDDEN"))
    );
    let (status, body) = purge(&base, None, json!({"confirm": "vault"})).await;
    assert_eq!((status, &body["reason"]), (401, &json!("AUTH_MISSING")));
    // A session is not enough: purging needs an owner's permissions (it could not create
    // a note, so it may not wipe the vault either).
    for (token, missing) in [
        (BARE_SESSION, "notes.write"),
        ("writer-session", "notes.review"),
    ] {
        let (status, body) = purge(&base, Some(token), json!({"confirm": "vault"})).await;
        assert_eq!(
            (status, &body["reason"]),
            (403, &json!("PERMISSION_MISSING")),
            "{body}"
        );
        assert!(
            body["message"].as_str().unwrap().contains(missing),
            "{body}"
        );
    }
    let (status, body) = purge(&base, Some(SESSION), json!({"confirm": "Vault"})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["reason"], "VALIDATION_FAILED");
    assert!(
        body["message"].as_str().unwrap().contains("confirm"),
        "{body}"
    );
    let (status, body) = purge(
        &base,
        Some(SESSION),
        json!({"confirm": "vault", "extra": 1}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    // Still serving, nothing removed.
    assert!(state.join("history.git").exists() && state.join("meta.sqlite").exists());
    let res = reqwest::Client::new()
        .get(format!("{base}/v1/notes?page_size=1"))
        .bearer_auth(SESSION)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    let (status, body) = purge(&base, Some(SESSION), json!({"confirm": "vault"})).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "stopping");
    let exit = wait_exit(&mut daemon.child);
    let stderr = daemon.rest();
    assert!(exit.success(), "{stderr}");
    assert!(stderr.contains("purged the daemon's data"), "{stderr}");
    assert!(!state.join("history.git").exists());
    assert!(!state.join("index").exists());
    assert_eq!(tree(&vault), before, "the notes folder is untouched");
    // One audit row stays: that a purge happened.
    use notevault::storage::metadata::{Audit, Settings, Tokens};
    let meta = notevault::meta::Meta::open(&state.join("meta.sqlite")).unwrap();
    let (rows, more) = meta.audit_page(None, None, &|_| true, 10).unwrap();
    assert!(!more);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].kind, "vault.purged");
    assert!(meta.pats().unwrap().is_empty());
    assert_eq!(meta.setting("vault_id").unwrap(), None);
}

#[tokio::test]
async fn purge_with_trash_notes_moves_the_notes_to_the_trash() {
    let (_dir, vault, state) = temp_vault(Some("vault-example"));
    let inbox = std::fs::read(vault.join("Inbox.md")).unwrap();
    let mut daemon = spawn(&vault, &state, &[]);
    // Open local mode signs nobody in: the route needs a session.
    let (status, body) = purge(&daemon.base, None, json!({"confirm": "vault"})).await;
    assert_eq!((status, &body["reason"]), (401, &json!("AUTH_MISSING")));
    assert!(
        body["message"].as_str().unwrap().contains("login-link"),
        "{body}"
    );
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();
    let tokens =
        json!([{"token": SESSION, "permissions": ["notes.write", "notes.review"]}]).to_string();
    let mut daemon = spawn(
        &vault,
        &state,
        &[("NOTEVAULT_STATIC_TOKENS", tokens.as_str())],
    );
    let (status, body) = purge(
        &daemon.base,
        Some(SESSION),
        json!({"confirm": "vault", "trash_notes": true}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["trash_notes"], true);
    assert!(wait_exit(&mut daemon.child).success());
    assert!(!vault.join("Inbox.md").exists());
    assert_eq!(std::fs::read(vault.join(".trash/Inbox.md")).unwrap(), inbox);
    assert!(vault.join(".trash/projects").is_dir());
    // Attachments are not notes: they stay.
    assert!(vault.join("attachments").is_dir());
}

/// The console in a real browser: sign in with the printed link, see an agent's write
/// arrive, approve one (the note changes on disk; the counts and the decided list follow
/// without a reload), reject another, decide one twice from two tabs, approve selected
/// writes at once, create a token and use it, every page at phone width, sign out. Screenshots go to
/// `target/console-screenshots/`.
#[test]
fn the_console_in_a_browser() {
    let agent = "agent-static-token-for-the-browser-test";
    let tokens = json!([{"token": agent, "kind": "pat", "permissions": ["notes.write"]}]);
    let shots = common::repo_path("target/console-screenshots");
    let shots_env = shots.to_string_lossy().into_owned();
    if in_a_browser(
        "tests/console/browser.py",
        &tokens,
        &[("NV_AGENT_TOKEN", agent), ("NV_SHOTS", &shots_env)],
    )
    .is_none()
    {
        return;
    }
    for page in [
        "review",
        "review-escaping",
        "tokens",
        "activity",
        "activity-phone",
        "vault",
        "review-phone",
    ] {
        assert!(shots.join(format!("{page}.png")).exists(), "{page}");
    }
}

#[tokio::test]
async fn the_console_signs_in_through_the_identity_provider_with_pkce() {
    let fake = common::idp::FakeIdp::start().await;
    let (idp, provider) = (fake.idp.clone(), fake.url.clone());
    let p = provider.clone();
    let s = TestServer::start(Some("vault-example"), move |c| {
        common::idp::configure(c, &p)
    })
    .await;
    *idp.vault_id.lock() = s.svc.vault_id.clone();
    *idp.permissions.lock() = json!(["notes.write", "notes.review"]);
    let client = plain_client();

    // The sign-in page offers the provider.
    let page = client.get(s.url("/")).send().await.unwrap();
    assert!(page.text().await.unwrap().contains("/sign-in/idp"));

    // One whole sign-in: daemon → provider → back, with the nonce cookie.
    let sign_in = || async {
        let res = client.get(s.url("/sign-in/idp")).send().await.unwrap();
        let status = res.status();
        if status != 303 {
            panic!("{}", res.text().await.unwrap());
        }
        let nonce = cookie_of(&res, "notevault_sign_in").expect("the nonce cookie");
        let to = res.headers()["location"].to_str().unwrap().to_string();
        assert!(to.starts_with(&format!("{provider}/authorize?")), "{to}");
        assert!(!to.contains(common::idp::IDP_KEY));
        let res = client.get(&to).send().await.unwrap();
        assert_eq!(res.status(), 302);
        let back = res.headers()["location"].to_str().unwrap().to_string();
        assert!(back.starts_with(&s.url("/sign-in/callback?")), "{back}");
        (nonce, back)
    };
    let (nonce, back) = sign_in().await;
    let res = client
        .get(&back)
        .header("cookie", &nonce)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let session = cookie_of(&res, "notevault_session").expect("a session");
    assert_eq!(
        *idp.client_ids.lock(),
        [Some("notevault-console".to_string())],
        "the exchange names the client the authorization request named"
    );
    let res = client
        .get(s.url("/"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // The state works once.
    let res = client
        .get(&back)
        .header("cookie", &nonce)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert!(res.text().await.unwrap().contains("finished already"));

    // A callback in a browser that did not start the sign-in (no nonce): refused, and
    // the code is not exchanged.
    let (_, back) = sign_in().await;
    let res = client.get(&back).send().await.unwrap();
    assert_eq!(res.status(), 401);
    assert!(res.text().await.unwrap().contains("another browser"));
    assert_eq!(idp.challenges.lock().len(), 1, "the code was not used");

    // A forged code: the provider refuses the grant; no session.
    let (nonce, back) = sign_in().await;
    let forged = back.replacen("code=code-", "code=forged-", 1);
    let res = client
        .get(&forged)
        .header("cookie", &nonce)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_client_error(), "{}", res.status());
    assert!(cookie_of(&res, "notevault_session").is_none());
    assert!(res.text().await.unwrap().contains("not accepted"));

    // A token that may not review (an organization member without the permission):
    // no session, whatever else it may do.
    *idp.permissions.lock() = json!(["notes.write"]);
    let (nonce, back) = sign_in().await;
    let res = client
        .get(&back)
        .header("cookie", &nonce)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert!(cookie_of(&res, "notevault_session").is_none());
    assert!(res.text().await.unwrap().contains("notes.review"));
    // A token for another vault: refused too.
    *idp.permissions.lock() = json!(["notes.review"]);
    *idp.vault_id.lock() = "another-vault".into();
    let (nonce, back) = sign_in().await;
    let res = client
        .get(&back)
        .header("cookie", &nonce)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert!(cookie_of(&res, "notevault_session").is_none());
    // A wrong nonce (not just a missing one).
    let (_, back) = sign_in().await;
    let res = client
        .get(&back)
        .header(
            "cookie",
            "notevault_sign_in=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);

    // The provider says no.
    let res = client
        .get(s.url("/sign-in/callback?error=access_denied&error_description=%3Cscript%3E"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let text = res.text().await.unwrap();
    assert!(
        text.contains("access_denied") && !text.contains("<script>"),
        "{text}"
    );
}

/// `notevault serve` on a terminal prints a one-time sign-in link, and the link signs in
/// (util-linux `script` gives the daemon a pseudo-terminal); off a terminal it prints how
/// to get one instead (a service's output goes to a journal, and a link is a secret).
#[tokio::test]
async fn serve_prints_a_sign_in_link_on_a_terminal_only() {
    let (_dir, vault, state) = temp_vault(Some("vault-example"));
    let command = format!(
        "exec {BIN} serve --listen 127.0.0.1:0 --no-watch --state-dir '{}' '{}'",
        state.display(),
        vault.display()
    );
    let mut child = OnTerminal(
        Command::new("script")
            .args(["-qfec", &command, "/dev/null"])
            .env_remove("NOTEVAULT_CONFIG")
            .env_remove("AUTH_REQUIRED")
            .env_remove("NOTEVAULT_STATIC_TOKENS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("util-linux script runs"),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let link = loop {
        let line = lines
            .next()
            .expect("the daemon prints a sign-in link")
            .unwrap();
        if let Some(rest) = line.split("(one use, 15 minutes): ").nth(1) {
            break rest.trim().to_string();
        }
    };
    let res = plain_client().get(&link).send().await.unwrap();
    let status = res.status();
    drop(child);
    assert_eq!(status, 200, "{link}");
    assert!(cookie_of(&res, "notevault_session").is_some());

    // Off a terminal: no link, the way to get one.
    let mut daemon = spawn(&vault, &state, &[]);
    let res = reqwest::get(format!("{}/v1/vault", daemon.base))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();
    let stderr = daemon.rest();
    assert!(stderr.contains("notevault login-link"), "{stderr}");
    assert!(!stderr.contains("sign-in?code="), "{stderr}");
}

/// `script` and the daemon it runs on its pseudo-terminal, both killed when dropped: the
/// hang-up of the terminal does not stop a daemon whose parent ignores SIGHUP (a test
/// run under `nohup`).
struct OnTerminal(std::process::Child);

impl Drop for OnTerminal {
    fn drop(&mut self) {
        let pid = self.0.id();
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
            // SAFETY: a signal to a process of this test (`script`'s child).
            unsafe { libc::kill(child, libc::SIGKILL) };
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every state-changing console route refuses a post without the session's CSRF token, or
/// with a wrong one, or from a page on another loopback port (same host, so the Origin
/// guard lets it through: the token is what stops it); nothing changes.
#[tokio::test]
async fn every_console_post_needs_the_csrf_token() {
    let s = TestServer::start(Some("vault-example"), |c| c.auth_required = true).await;
    let (cookie, csrf) = sign_in(&s).await;
    let (token, row) = s
        .svc
        .meta
        .create_pat("kept", &[], None, chrono::Utc::now())
        .unwrap();
    let before_settings = s.svc.meta.setting("write_policy").unwrap();
    let pending_id = "01a202ab-b1eb-71ad-8075-4bd827459e8f";
    let posts = [
        (
            "/settings",
            vec![("write_policy", "read_only"), ("write_budget", "1")],
        ),
        (
            "/tokens",
            vec![("name", "sneaky"), ("scope", "notes.review")],
        ),
        (&*format!("/tokens/{}/revoke", row.prefix), vec![]),
        (&*format!("/writes/{pending_id}/approve"), vec![]),
        (&*format!("/writes/{pending_id}/reject"), vec![]),
        (
            "/writes/bulk",
            vec![("id", pending_id), ("action", "approve")],
        ),
        ("/purge", vec![("confirm", "vault")]),
        ("/sign-out", vec![]),
    ]
    .map(|(p, f)| (p.to_string(), f));
    for (path, form) in &posts {
        for (csrf_field, origin) in [
            (None, None),
            (Some("wrong-token"), None),
            (None, Some("http://127.0.0.1:1")),
        ] {
            let mut fields = form.clone();
            if let Some(t) = csrf_field {
                fields.push(("csrf", t));
            }
            let mut req = plain_client()
                .post(s.url(path))
                .header("cookie", &cookie)
                .form(&fields);
            if let Some(o) = origin {
                req = req.header("origin", o);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 403, "{path} {csrf_field:?} {origin:?}");
        }
    }
    // Nothing changed: settings, tokens, the daemon still serving, the session alive.
    assert_eq!(s.svc.meta.setting("write_policy").unwrap(), before_settings);
    let names: Vec<String> = s
        .svc
        .meta
        .pats()
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["kept"]);
    assert!(s.svc.purge.get().is_none() && !s.svc.stop.is_cancelled());
    let res = plain_client()
        .get(s.url("/v1/notes?page_size=1"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = plain_client()
        .get(s.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let _ = csrf;
}

/// A note whose title holds markup is text on every page that names it.
#[tokio::test]
async fn titles_with_markup_are_escaped_on_the_review_page() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    s.call(
        Method::POST,
        "/v1/notes",
        Some("t1"),
        Some(json!({"slug": "markup", "content": "# <script>alert(1)</script> & co\n\nbody\n"})),
        201,
    )
    .await;
    s.call(
        Method::PATCH,
        "/v1/vault/write-settings?update_mask=write_policy",
        None,
        Some(json!({"write_policy": "review"})),
        200,
    )
    .await;
    let v = s.get_json("/v1/notes/markup?limit=1", 200).await["version_id"].clone();
    for (key, new) in [("t2", "text"), ("t3", "other")] {
        s.call(
            Method::POST,
            "/v1/notes/markup:edit",
            Some(key),
            Some(json!({"version_id": v, "old_string": "body", "new_string": new})),
            202,
        )
        .await;
    }
    let (cookie, csrf) = sign_in(&s).await;
    let page = |path: &'static str| {
        let cookie = cookie.clone();
        let url = s.url(path);
        async move {
            plain_client()
                .get(url)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let html = page("/").await;
    assert!(
        html.contains("&#60;script&#62;alert(1)&#60;/script&#62; &#38; co"),
        "{html}"
    );
    assert!(!html.contains("<script>alert"), "{html}");
    // Decide one: the decided table names it escaped too.
    let id = html
        .split("id=\"write-")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_string();
    let res = post_form(
        &s,
        &format!("/writes/{id}/reject"),
        Some(&cookie),
        &[("csrf", &csrf)],
    )
    .await;
    assert_eq!(res.status(), 303);
    let html = page("/").await;
    assert!(html.contains("class=\"status-rejected\""), "{html}");
    assert!(!html.contains("<script>alert"), "{html}");
}

/// The console's purge: a wrong name is a message and nothing else; the right one stops
/// the daemon (here, in-process: serving ends and the purge is asked for).
#[tokio::test]
async fn the_console_purge_needs_the_typed_name() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let (cookie, csrf) = sign_in(&s).await;
    let res = post_form(
        &s,
        "/purge",
        Some(&cookie),
        &[("csrf", &csrf), ("confirm", "Vault ")],
    )
    .await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("Nothing purged"));
    assert!(s.svc.purge.get().is_none() && !s.svc.stop.is_cancelled());
    let res = post_form(
        &s,
        "/purge",
        Some(&cookie),
        &[("csrf", &csrf), ("confirm", "vault")],
    )
    .await;
    assert_eq!(res.status(), 200);
    assert!(res
        .text()
        .await
        .unwrap()
        .contains("notes folder is untouched"));
    let asked = s.svc.purge.get().expect("a purge asked");
    assert!(!asked.trash_notes);
    assert_eq!(asked.actor, "console");
    assert!(s.svc.stop.is_cancelled());
}

/// Unpack a `.tar.gz` into a new folder with the system `tar`.
pub(crate) fn unpack(archive: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.tar.gz");
    std::fs::write(&file, archive).unwrap();
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&file)
        .arg("-C")
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::remove_file(&file).unwrap();
    dir
}

/// `POST /v1/export`: a session gets the vault's files byte for byte (a private note's
/// ciphertext file too), dated and named; with `history` a bundle git can clone; a PAT
/// and open local mode are refused; the audit log counts it; the console downloads the
/// same archive.
#[tokio::test]
async fn export_streams_the_vault_byte_for_byte_to_a_session() {
    let s = TestServer::start(Some("vault-example"), with_tokens).await;
    // A private note as a device leaves it: ciphertext in its own file type.
    std::fs::write(
        s.vault.join("diary.nvpriv"),
        "notevault-private v1\nAAECAwQFBgcICQoLDA0ODw==\n",
    )
    .unwrap();
    let client = plain_client();
    let export = |token: Option<&'static str>, body: Option<Value>| {
        let mut req = client.post(s.url("/v1/export"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        req.send()
    };
    let res = export(Some(PAT), None).await.unwrap();
    assert_eq!(
        res_json(res, 403, "pat").await["reason"],
        "CREDENTIAL_FORBIDDEN"
    );
    let res = export(None, None).await.unwrap();
    assert_eq!(res_json(res, 401, "none").await["reason"], "AUTH_MISSING");
    let res = export(Some(SESSION), Some(json!({"history": "yes"})))
        .await
        .unwrap();
    assert_eq!(
        res_json(res, 400, "bad body").await["reason"],
        "VALIDATION_FAILED"
    );

    let res = export(Some(SESSION), None).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/gzip");
    let disposition = res.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .to_string();
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    assert_eq!(
        disposition,
        format!("attachment; filename=\"notevault-vault-{today}.tar.gz\"")
    );
    let unpacked = unpack(&res.bytes().await.unwrap());
    assert_eq!(tree(&unpacked.path().join("vault")), tree(&s.vault));
    assert!(unpacked.path().join("manifest.json").exists());
    assert!(!unpacked.path().join("history.bundle").exists());

    let res = export(Some(SESSION), Some(json!({"history": true})))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let unpacked = unpack(&res.bytes().await.unwrap());
    let bundle = unpacked.path().join("history.bundle");
    assert!(bundle.exists());
    let clone = unpacked.path().join("clone.git");
    let status = Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(&bundle)
        .arg(&clone)
        .status()
        .unwrap();
    assert!(status.success());
    let log = Command::new("git")
        .arg("--git-dir")
        .arg(&clone)
        .args(["log", "--format=%B", "-1"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&log.stdout).contains("Notevault-Seq"),
        "{log:?}"
    );

    let res = client
        .get(s.url("/v1/audit-events?filter=kind%20%3D%20%22vault.exported%22"))
        .bearer_auth(SESSION)
        .send()
        .await
        .unwrap();
    let rows = res_json(res, 200, "audit").await["audit_events"].clone();
    assert_eq!(rows.as_array().unwrap().len(), 2, "{rows}");
    assert!(rows[0]["counts"]["notes"].as_i64().unwrap() > 10, "{rows}");

    // The console's download: the same archive, behind its CSRF token.
    let (cookie, csrf) = sign_in(&s).await;
    let res = post_form(&s, "/export", Some(&cookie), &[]).await;
    assert_eq!(res.status(), 403);
    let res = post_form(&s, "/export", Some(&cookie), &[("csrf", &csrf)]).await;
    assert_eq!(res.status(), 200);
    let unpacked = unpack(&res.bytes().await.unwrap());
    assert_eq!(tree(&unpacked.path().join("vault")), tree(&s.vault));
}

/// A key change is in the audit log as its version and whether a recovery wrap is set:
/// never the salt or a wrapped key. The vault page shows the state, no key material.
#[tokio::test]
async fn key_changes_are_audited_without_key_material() {
    use base64::Engine as _;
    let s = TestServer::start(Some("vault-example"), with_tokens).await;
    let wrapped = base64::engine::general_purpose::STANDARD.encode([7u8; 72]);
    let res = plain_client()
        .post(s.url("/v1/sync/e2ee:enable"))
        .bearer_auth(SESSION)
        .json(&json!({
            "keyVersion": 3,
            "kdf": {"salt": "c2FsdHNhbHRzYWx0c2FsdA==", "N": 131072, "r": 8, "p": 1},
            "wrappedDek": wrapped,
            "recovery": null,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let res = plain_client()
        .get(s.url("/v1/audit-events?filter=kind%20%3D%20%22e2ee.keys_changed%22"))
        .bearer_auth(SESSION)
        .send()
        .await
        .unwrap();
    let body = res_json(res, 200, "audit").await;
    let rows = body["audit_events"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{body}");
    assert_eq!(rows[0]["counts"], json!({"key_version": 3, "recovery": 0}));
    let text = body.to_string();
    assert!(
        !text.contains("c2FsdHNh") && !text.contains(&wrapped[..16]),
        "{text}"
    );

    let (cookie, _) = sign_in(&s).await;
    let page = plain_client()
        .get(s.url("/vault"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("<dt>Key version</dt><dd>3</dd>"), "{page}");
    assert!(page.contains("without a recovery key"), "{page}");
    assert!(!page.contains("c2FsdHNh") && !page.contains(&wrapped[..16]));
}

/// The console's pages count against the rate limits like `/v1` (by method), so one
/// client cannot, say, start sign-ins without bound.
#[tokio::test]
async fn console_requests_are_rate_limited() {
    let s = TestServer::start(Some("vault-example"), |c| {
        c.rate_limit_read_per_minute = 3;
    })
    .await;
    let client = plain_client();
    for _ in 0..3 {
        let res = client.get(s.url("/")).send().await.unwrap();
        assert_eq!(res.status(), 401);
        assert!(res.headers().contains_key("ratelimit-remaining"));
    }
    let res = client.get(s.url("/")).send().await.unwrap();
    assert!(res.headers().contains_key("retry-after"));
    assert_eq!(
        res_json(res, 429, "limited").await["reason"],
        "RATE_LIMITED"
    );
}

/// Every decision records who made it; with `signed_in` decisions (the console's switch)
/// an unauthenticated local request can neither decide nor loosen the settings, while a
/// person in the console and a `notes.review` token can.
#[tokio::test]
async fn decisions_record_their_decider_and_signed_in_decisions_refuse_a_local_request() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    s.call(
        Method::PATCH,
        "/v1/vault/write-settings?update_mask=write_policy",
        None,
        Some(json!({"write_policy": "review"})),
        200,
    )
    .await;
    let mut queued = Vec::new();
    for i in 0..3 {
        let r = s
            .call(
                Method::POST,
                "/v1/notes",
                Some(&format!("decider-{i}")),
                Some(
                    json!({"slug": format!("decided/{i}"), "content": "x\n", "agent_id": "agent"}),
                ),
                202,
            )
            .await;
        queued.push(r["pending_id"].as_str().unwrap().to_string());
    }
    // Open local mode, the spec's rule: anyone local decides, and the row says so.
    let row = s
        .call(
            Method::POST,
            &format!("/v1/writes/{}:approve", queued[0]),
            None,
            None,
            200,
        )
        .await;
    assert_eq!(
        row["decided_by"], "an unauthenticated local request",
        "{row}"
    );

    // The owner turns on signed-in decisions in the console.
    let (cookie, csrf) = sign_in(&s).await;
    let res = post_form(
        &s,
        "/settings",
        Some(&cookie),
        &[
            ("csrf", &csrf),
            ("write_policy", "review"),
            ("write_budget", "0"),
            ("signed_in_decisions", "on"),
        ],
    )
    .await;
    assert_eq!(res.status(), 303);
    for (method, path, body) in [
        (
            Method::POST,
            format!("/v1/writes/{}:approve", queued[1]),
            None,
        ),
        (
            Method::POST,
            format!("/v1/writes/{}:reject", queued[1]),
            None,
        ),
        (
            Method::PATCH,
            "/v1/vault/write-settings?update_mask=write_policy".to_string(),
            Some(json!({"write_policy": "auto_apply"})),
        ),
    ] {
        let body = s
            .refused(
                "unsigned decision",
                method,
                &path,
                None,
                body,
                403,
                "PERMISSION_MISSING",
            )
            .await;
        assert_eq!(
            common::detail(&body, "ErrorInfo")["metadata"]["scope"],
            "notes.review"
        );
    }
    let settings = s.get_json("/v1/vault/write-settings", 200).await;
    assert_eq!(settings["write_policy"], "review", "nothing loosened");
    let row = s.get_json(&format!("/v1/writes/{}", queued[1]), 200).await;
    assert_eq!(row["status"], "pending");
    assert!(!s.vault.join("decided/1.md").exists());

    // A person in the console decides.
    let res = plain_client()
        .post(s.url(&format!("/writes/{}/approve", queued[1])))
        .header("cookie", &cookie)
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let row = s.get_json(&format!("/v1/writes/{}", queued[1]), 200).await;
    assert_eq!(row["status"], "applied");
    assert_eq!(
        row["decided_by"], "a person signed in to the console",
        "{row}"
    );
    assert!(s.vault.join("decided/1.md").exists());

    // So does a token with notes.review, named in the row.
    let token = common::create_pat(&s.vault, &s.state, "reviewer", &["notes.review"]);
    let res = s
        .client
        .post(s.url(&format!("/v1/writes/{}:reject", queued[2])))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let row = res_json(res, 200, "token reject").await;
    assert_eq!(
        row["decided_by"],
        format!("token reviewer ({})", &token[..12]),
        "{row}"
    );
    // The console's queue shows who decided each.
    let page = plain_client()
        .get(s.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for who in [
        "an unauthenticated local request",
        "a person signed in to the console",
        "token reviewer",
    ] {
        assert!(page.contains(who), "{who} not on the review page");
    }
}

/// The chain an uploaded SVG opened: an agent with `notes.write` alone queues a delete,
/// uploads an SVG whose script approves every pending write and makes a reviewer's token,
/// and hands a signed-in person a presigned link. In Chromium the link is a download, and
/// nothing is approved or made (`tests/console/svg_chain.py`).
#[test]
fn an_uploaded_svg_cannot_approve_writes_in_a_browser() {
    let agent = "agent-token-for-the-svg-chain";
    let owner = "owner-token-for-the-svg-chain";
    let tokens = json!([
        {"token": agent, "kind": "pat", "permissions": ["notes.write"]},
        {"token": owner, "permissions": ["notes.write", "notes.review"]},
    ]);
    let Some((_dir, vault)) = in_a_browser(
        "tests/console/svg_chain.py",
        &tokens,
        &[("NV_AGENT_TOKEN", agent), ("NV_OWNER_TOKEN", owner)],
    ) else {
        return;
    };
    assert!(vault.join("Inbox.md").exists());
}

/// Run a Playwright script of `tests/console/` against a daemon with auth required and
/// `tokens`, with a one-time sign-in link (`NV_URL`, `NV_LINK`, `NV_VAULT`,
/// `NV_CHROMIUM`, and `env`); asserts it succeeded. `None`: the developer opted out of
/// the outside tools (`NOTEVAULT_REQUIRE_TOOLS=0`) and Chromium or Playwright is missing.
fn in_a_browser(
    script: &str,
    tokens: &Value,
    env: &[(&str, &str)],
) -> Option<(tempfile::TempDir, PathBuf)> {
    let python = common::tools::python(&["playwright"])?;
    let chromium = common::tools::chromium()?;
    let (dir, vault, state) = temp_vault(Some("vault-example"));
    let tokens = tokens.to_string();
    let mut daemon = spawn(
        &vault,
        &state,
        &[
            ("AUTH_REQUIRED", "true"),
            ("NOTEVAULT_STATIC_TOKENS", tokens.as_str()),
        ],
    );
    // The daemon keeps the URL `login-link` needs just after its address line, then says
    // where its console is: a link asked for before that finds none.
    assert!(
        daemon.wait_logged("notevault: web console at", common::PATIENCE),
        "the daemon says where its console is"
    );
    let link = Command::new(BIN)
        .args(["login-link", "--state-dir"])
        .arg(&state)
        .arg(&vault)
        .env_remove("NOTEVAULT_CONFIG")
        .output()
        .unwrap();
    assert!(link.status.success(), "{link:?}");
    let link = String::from_utf8(link.stdout).unwrap().trim().to_string();
    assert!(
        link.starts_with(&format!("{}/sign-in?code=", daemon.base)),
        "{link}"
    );
    let out = Command::new(python)
        .arg(common::repo_path(script))
        .env("NV_URL", &daemon.base)
        .env("NV_LINK", &link)
        .env("NV_VAULT", &vault)
        .env("NV_CHROMIUM", chromium)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();
    assert!(
        out.status.success(),
        "{script} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((dir, vault))
}
