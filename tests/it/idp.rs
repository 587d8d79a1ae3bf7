//! The identity provider, end to end over HTTP on port 0: JWTs signed by a fake provider
//! the test starts on loopback (its JWK Set and token endpoint), every way a JWT is
//! refused, the protected-resource metadata (RFC 9728) and the `resource_metadata` of the
//! challenges, a JWK Set endpoint that hangs, and the token proxy `POST /v1/auth/token`
//! against the fake provider's token endpoint.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the operator: they write fixture files"
)]

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State as Shared;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use common::jwt::{b64, es256, now, rs256, sign, SigningKey};
use common::{assert_envelope_for, TestServer};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use parking_lot::Mutex;
use reqwest::Method;
use serde_json::{json, Value};

const AUDIENCE: &str = "notevault-api";
const ORG: &str = "org_42";
const API_KEY: &str = "sk_test_idp_api_key_0123456789";

/// An unsigned token (`alg: none`) with these claims.
fn unsigned(claims: &Value) -> String {
    let header = b64(br#"{"alg":"none","typ":"JWT"}"#);
    format!("{header}.{}.", b64(claims.to_string().as_bytes()))
}

/// What the fake provider was asked and answers.
#[derive(Default)]
struct Provider {
    jwks: Mutex<Value>,
    jwks_fetches: AtomicUsize,
    /// The forms posted to the token endpoint.
    grants: Mutex<Vec<HashMap<String, String>>>,
}

/// A fake identity provider on loopback: `GET /jwks`, `POST /token`.
struct FakeIdp {
    base: String,
    state: Arc<Provider>,
}

impl FakeIdp {
    async fn start(keys: &[&SigningKey]) -> Self {
        let state = Arc::new(Provider::default());
        *state.jwks.lock() =
            json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()});
        let app = axum::Router::new()
            .route("/jwks", get(jwks))
            .route("/token", post(token_endpoint))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { base, state }
    }

    fn issuer(&self) -> String {
        format!("{}/", self.base)
    }
}

async fn jwks(Shared(p): Shared<Arc<Provider>>) -> axum::Json<Value> {
    p.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    axum::Json(p.jwks.lock().clone())
}

/// The token endpoint: the grant's `code` (or `refresh_token`) picks the answer.
async fn token_endpoint(
    Shared(p): Shared<Arc<Provider>>,
    axum::Form(form): axum::Form<HashMap<String, String>>,
) -> axum::response::Response {
    p.grants.lock().push(form.clone());
    if form.get("client_secret").map(String::as_str) != Some(API_KEY) {
        return (
            axum::http::StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    let what = form
        .get("code")
        .or_else(|| form.get("refresh_token"))
        .cloned()
        .unwrap_or_default();
    let access = format!(
        "{}.{}.sig",
        b64(br#"{"alg":"RS256"}"#),
        b64(json!({"exp": now() + 600, "org_id": "org_from_token"})
            .to_string()
            .as_bytes())
    );
    match what.as_str() {
        "good-code" => axum::Json(json!({
            "access_token": "provider-access-token",
            "refresh_token": "provider-refresh-token",
            "expires_in": 3600,
            "organization_id": ORG,
            "user": {"id": "user_1"}
        }))
        .into_response(),
        "good-refresh" => axum::Json(json!({"access_token": access})).into_response(),
        "used-code" => (
            axum::http::StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_grant", "error_description": "code used-code was already used"})),
        )
            .into_response(),
        "slow-code" => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            axum::Json(json!({"access_token": "late"})).into_response()
        }
        _ => (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "provider stack trace: PROVIDER-INTERNAL-DETAIL",
        )
            .into_response(),
    }
}

/// A daemon with auth on and the fake provider as its issuer.
async fn daemon(idp: &FakeIdp, tweak: impl FnOnce(&mut notevault::config::Config)) -> TestServer {
    let issuer = idp.issuer();
    let jwks = format!("{}/jwks", idp.base);
    TestServer::start(Some("vault-example"), move |c| {
        c.auth_required = true;
        c.auth_issuer = Some(issuer);
        c.auth_jwks_url = Some(jwks);
        c.auth_audience = Some(AUDIENCE.into());
        c.org_id = Some(ORG.into());
        tweak(c);
    })
    .await
}

/// Claims that pass, for the daemon `s`: its vault, the issuer, the audience, an hour.
fn claims(s: &TestServer, idp: &FakeIdp, permissions: &[&str]) -> Value {
    json!({
        "iss": idp.issuer(),
        "sub": "user_1",
        "aud": AUDIENCE,
        "exp": now() + 3600,
        "iat": now(),
        "vault_id": s.svc.vault_id,
        "permissions": permissions,
    })
}

fn with(mut claims: Value, changes: Value) -> Value {
    for (k, v) in changes.as_object().unwrap() {
        if v.is_null() {
            claims.as_object_mut().unwrap().remove(k);
        } else {
            claims[k] = v.clone();
        }
    }
    claims
}

async fn send(s: &TestServer, method: Method, path: &str, bearer: &str) -> reqwest::Response {
    let mut req = s
        .client
        .request(method.clone(), s.url(path))
        .bearer_auth(bearer);
    if method == Method::POST {
        req = req
            .header("Idempotency-Key", format!("k-{}", uuid::Uuid::new_v4()))
            .json(&json!({"title": format!("From a JWT {}", uuid::Uuid::new_v4())}));
    }
    req.send().await.unwrap()
}

/// Signed JWTs are session credentials with the permissions of their claim; every way a
/// token can be wrong is refused with its reason and challenge, and nothing is written.
#[tokio::test]
async fn jwts_are_verified_and_every_bad_one_is_refused() {
    let ec = es256("ec-1");
    let rsa = rs256("rsa-1");
    let idp = FakeIdp::start(&[&ec, &rsa]).await;
    let s = daemon(&idp, |_| {}).await;
    let good = claims(&s, &idp, &["notes.write"]);
    let metadata = format!(
        r#"resource_metadata="{}/.well-known/oauth-protected-resource""#,
        s.base
    );

    // A writer's ES256 token reads and writes; it lacks notes.review.
    let writer = sign(&ec, &good);
    let res = send(&s, Method::GET, "/v1/vault", &writer).await;
    assert_eq!(res.status(), 200);
    let res = send(&s, Method::POST, "/v1/notes", &writer).await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let res = send(&s, Method::GET, "/v1/vault/write-settings", &writer).await;
    assert_eq!(res.status(), 200);
    let res = s
        .client
        .patch(s.url("/v1/vault/write-settings?update_mask=write_policy"))
        .bearer_auth(&writer)
        .json(&json!({"write_policy": "review"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let challenge = res.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        challenge.contains(r#"error="insufficient_scope", scope="notes.review""#)
            && challenge.contains(&metadata),
        "{challenge}"
    );
    // An RS256 token for the configured organization, with both permissions as one string.
    let rsa_token = sign(
        &rsa,
        &with(
            good.clone(),
            json!({"vault_id": null, "org_id": ORG, "permissions": "notes.write notes.review"}),
        ),
    );
    let res = send(&s, Method::GET, "/v1/writes", &rsa_token).await;
    assert_eq!(res.status(), 200);
    // Within the leeway, an expired token still passes.
    let res = send(
        &s,
        Method::GET,
        "/v1/vault",
        &sign(&ec, &with(good.clone(), json!({"exp": now() - 5}))),
    )
    .await;
    assert_eq!(res.status(), 200);

    let count = || async {
        let res = send(&s, Method::GET, "/v1/notes?page_size=500", &writer).await;
        let body: Value = res.json().await.unwrap();
        body["notes"].as_array().unwrap().len()
    };
    let before = count().await;
    let other = es256("ec-1"); // the same kid, another key: a forged signature
    let hs256 = jsonwebtoken::encode(
        &Header {
            kid: Some("ec-1".into()),
            ..Header::new(Algorithm::HS256)
        },
        &good,
        &EncodingKey::from_secret(ec.jwk["x"].as_str().unwrap().as_bytes()),
    )
    .unwrap();
    let cases: Vec<(&str, String, u16, &str)> = vec![
        ("alg none", unsigned(&good), 401, "AUTH_INVALID"),
        (
            "HS256 keyed with the public key",
            hs256,
            401,
            "AUTH_INVALID",
        ),
        (
            "a wrong signature",
            sign(&other, &good),
            401,
            "AUTH_INVALID",
        ),
        (
            "expired",
            sign(&ec, &with(good.clone(), json!({"exp": now() - 120}))),
            401,
            "AUTH_INVALID",
        ),
        (
            "not yet valid",
            sign(&ec, &with(good.clone(), json!({"nbf": now() + 600}))),
            401,
            "AUTH_INVALID",
        ),
        (
            "another issuer",
            sign(
                &ec,
                &with(good.clone(), json!({"iss": "https://evil.example/"})),
            ),
            401,
            "AUTH_INVALID",
        ),
        (
            "another audience",
            sign(&ec, &with(good.clone(), json!({"aud": "someone-else"}))),
            401,
            "AUTH_INVALID",
        ),
        (
            "no exp",
            sign(&ec, &with(good.clone(), json!({"exp": null}))),
            401,
            "AUTH_INVALID",
        ),
        // An audience is configured: a token minted for none is not for this daemon.
        (
            "no audience",
            sign(&ec, &with(good.clone(), json!({"aud": null}))),
            401,
            "AUTH_INVALID",
        ),
        (
            "an unpublished kid",
            sign(&es256("ec-unknown"), &good),
            401,
            "AUTH_INVALID",
        ),
        (
            "a payload that is not JSON",
            format!(
                "{}.bm90IGpzb24.c2ln",
                b64(br#"{"alg":"ES256","kid":"ec-1"}"#)
            ),
            401,
            "AUTH_INVALID",
        ),
        (
            "another vault",
            sign(
                &ec,
                &with(good.clone(), json!({"vault_id": "another-vault"})),
            ),
            403,
            "VAULT_FORBIDDEN",
        ),
        (
            "another organization",
            sign(
                &ec,
                &with(
                    good.clone(),
                    json!({"vault_id": null, "org_id": "org_other"}),
                ),
            ),
            403,
            "VAULT_FORBIDDEN",
        ),
        // A token that names a vault is for that vault alone, whatever its org_id.
        (
            "another vault of this organization",
            sign(
                &ec,
                &with(
                    good.clone(),
                    json!({"vault_id": "another-vault", "org_id": ORG}),
                ),
            ),
            403,
            "VAULT_FORBIDDEN",
        ),
        (
            "no vault at all",
            sign(&ec, &with(good.clone(), json!({"vault_id": null}))),
            403,
            "VAULT_FORBIDDEN",
        ),
    ];
    for (what, token, status, reason) in cases {
        for (method, path) in [(Method::GET, "/v1/notes"), (Method::POST, "/v1/notes")] {
            let res = send(&s, method.clone(), path, &token).await;
            let challenge = res
                .headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            let text = res.text().await.unwrap();
            let body: Value =
                serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: {text}"));
            assert_envelope_for(what, &body, status, reason);
            let error = if status == 401 {
                "invalid_token"
            } else {
                "insufficient_scope"
            };
            assert!(
                challenge.starts_with(r#"Bearer realm="notevault""#)
                    && challenge.contains(&format!(r#"error="{error}""#))
                    && challenge.contains(&metadata),
                "{what}: {challenge}"
            );
            assert!(!text.contains(&token), "{what}: the body holds the token");
        }
    }
    assert_eq!(before, count().await, "a refused token wrote nothing");
}

/// A storm of unknown `kid`s costs the provider one fetch, not one per request.
#[tokio::test]
async fn unknown_kids_do_not_hammer_the_provider() {
    let ec = es256("ec-1");
    let idp = FakeIdp::start(&[&ec]).await;
    let s = daemon(&idp, |_| {}).await;
    let good = claims(&s, &idp, &[]);
    assert_eq!(
        send(&s, Method::GET, "/v1/vault", &sign(&ec, &good))
            .await
            .status(),
        200
    );
    assert_eq!(idp.state.jwks_fetches.load(Ordering::SeqCst), 1);
    let forged: Vec<String> = (0..20)
        .map(|i| sign(&es256(&format!("kid-{i}")), &good))
        .collect();
    let answers =
        futures::future::join_all(forged.iter().map(|t| send(&s, Method::GET, "/v1/vault", t)))
            .await;
    for res in answers {
        assert_eq!(res.status(), 401);
    }
    assert_eq!(
        idp.state.jwks_fetches.load(Ordering::SeqCst),
        1,
        "a fetch ran within the last 30 s: no refetch"
    );
}

/// A rotated key is fetched when a token names it (once the refetch interval allows).
#[tokio::test]
async fn a_rotated_key_is_fetched_on_its_first_use() {
    let old = es256("2026-old");
    let new = rs256("2026-new");
    let idp = FakeIdp::start(&[&old]).await;
    let issuer = idp.issuer();
    let dir = tempfile::tempdir().unwrap();
    let config = notevault::config::Config {
        vault: dir.path().to_path_buf(),
        auth_issuer: Some(issuer),
        auth_jwks_url: Some(format!("{}/jwks", idp.base)),
        org_id: Some(ORG.into()),
        ..Default::default()
    };
    let verifier = config
        .jwt_verifier()
        .unwrap()
        .with_refetch_every(Duration::ZERO);
    let claims = json!({"iss": idp.issuer(), "exp": now() + 60, "org_id": ORG, "permissions": ["notes.write"]});
    verifier.verify(&sign(&old, &claims), "v").await.unwrap();
    let refused = verifier
        .verify(&sign(&new, &claims), "v")
        .await
        .unwrap_err();
    assert_eq!(refused.reason.as_str(), "AUTH_INVALID");
    *idp.state.jwks.lock() = json!({"keys": [old.jwk.clone(), new.jwk.clone()]});
    let verified = verifier.verify(&sign(&new, &claims), "v").await.unwrap();
    assert_eq!(
        verified.credential,
        notevault::auth::Credential::Token {
            permissions: vec![notevault::auth::Permission::NotesWrite]
        }
    );
    // Offline: the same set from a file.
    let file = dir.path().join("jwks.json");
    std::fs::write(&file, json!({"keys": [new.jwk.clone()]}).to_string()).unwrap();
    let offline = notevault::config::Config {
        auth_jwks_url: None,
        auth_jwks_file: Some(file),
        ..config
    };
    let verifier = offline.jwt_verifier().unwrap();
    verifier.verify(&sign(&new, &claims), "v").await.unwrap();
}

/// A JWK Set endpoint that accepts and never answers: the request is answered 503
/// `AUTH_UNAVAILABLE` with `Retry-After` within the fetch timeout, later requests do not
/// wait again, and the daemon keeps serving.
#[tokio::test]
async fn a_hanging_jwks_endpoint_answers_503_and_the_daemon_keeps_serving() {
    let hang = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = hang.local_addr().unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = held.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = hang.accept().await {
            keep.lock().push(conn);
        }
    });
    let s = TestServer::start(Some("vault-example"), |c| {
        c.auth_required = true;
        c.auth_issuer = Some("https://idp.example/".into());
        c.auth_jwks_url = Some(format!("http://{addr}/jwks"));
    })
    .await;
    let ec = es256("k");
    let token = sign(
        &ec,
        &json!({"iss": "https://idp.example/", "exp": now() + 60, "vault_id": s.svc.vault_id}),
    );
    let started = Instant::now();
    let (res, open) = tokio::join!(send(&s, Method::GET, "/v1/vault", &token), async {
        // Meanwhile the daemon serves others.
        tokio::time::sleep(Duration::from_millis(200)).await;
        s.client
            .get(s.url("/openapi.json"))
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(open, 200);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(res.status(), 503);
    assert!(res.headers().contains_key("retry-after"));
    let body: Value = res.json().await.unwrap();
    assert_envelope_for("hanging JWKS", &body, 503, "AUTH_UNAVAILABLE");
    let again = Instant::now();
    let res = send(&s, Method::GET, "/v1/vault", &token).await;
    assert_eq!(res.status(), 503);
    assert!(
        again.elapsed() < Duration::from_secs(2),
        "no second wait: {:?}",
        again.elapsed()
    );
}

/// RFC 9728: the metadata documents with an issuer, the 404 envelope without.
#[tokio::test]
async fn protected_resource_metadata_is_served_with_an_issuer() {
    let ec = es256("k");
    let idp = FakeIdp::start(&[&ec]).await;
    let s = daemon(&idp, |_| {}).await;
    for (path, resource) in [
        ("/.well-known/oauth-protected-resource", s.base.clone()),
        (
            "/.well-known/oauth-protected-resource/mcp",
            format!("{}/mcp", s.base),
        ),
    ] {
        // Open: no bearer.
        let doc = s.get_json(path, 200).await;
        assert_eq!(doc["resource"], resource.as_str(), "{path}");
        assert_eq!(doc["authorization_servers"], json!([idp.issuer()]));
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
        assert_eq!(
            doc["scopes_supported"],
            json!(["notes.write", "notes.review"])
        );
    }
    // The MCP endpoint's challenge names the MCP document.
    let res = s
        .client
        .post(s.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.headers()["www-authenticate"],
        format!(
            r#"Bearer realm="notevault", resource_metadata="{}/.well-known/oauth-protected-resource/mcp""#,
            s.base
        )
        .as_str()
    );

    // Without an issuer: no document, and challenges name none.
    let plain = TestServer::start(Some("vault-example"), |c| c.auth_required = true).await;
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        plain.get_error(path, 404, "ROUTE_NOT_FOUND").await;
    }
    let res = plain.get("/v1/notes").await;
    assert_eq!(
        res.headers()["www-authenticate"],
        r#"Bearer realm="notevault""#
    );
}

async fn exchange(s: &TestServer, body: Value) -> reqwest::Response {
    s.client
        .post(s.url("/v1/auth/token"))
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// The token proxy forwards both grants with the server's API key, answers the four
/// fields, and turns every provider failure into an envelope that leaks nothing.
#[tokio::test]
async fn the_token_proxy_exchanges_grants_at_the_provider() {
    let ec = es256("k");
    let idp = FakeIdp::start(&[&ec]).await;
    let token_url = format!("{}/token", idp.base);
    let s = daemon(&idp, |c| {
        c.idp_token_url = Some(token_url);
        c.idp_api_key = Some(notevault::config::Secret::new(API_KEY));
        c.idp_client_id = Some("client_123".into());
    })
    .await;

    // The authorization-code grant, open (no bearer) although auth is required.
    let res = exchange(
        &s,
        json!({"grant_type": "authorization_code", "code": "good-code",
        "code_verifier": "verifier-abc", "redirect_uri": "http://127.0.0.1:9999/callback"}),
    )
    .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        body,
        json!({"access_token": "provider-access-token", "refresh_token": "provider-refresh-token",
               "expires_in": 3600, "organization_id": ORG})
    );
    let sent = idp.state.grants.lock().last().cloned().unwrap();
    for (k, v) in [
        ("grant_type", "authorization_code"),
        ("code", "good-code"),
        ("code_verifier", "verifier-abc"),
        ("redirect_uri", "http://127.0.0.1:9999/callback"),
        ("client_id", "client_123"),
        ("client_secret", API_KEY),
    ] {
        assert_eq!(sent.get(k).map(String::as_str), Some(v), "{k}");
    }

    // The refresh grant, form-encoded as OAuth clients send it: `expires_in` and
    // `organization_id` come from the access token when the provider omits them.
    let res = s
        .client
        .post(s.url("/v1/auth/token"))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", "good-refresh"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    let expires = body["expires_in"].as_i64().unwrap();
    assert!((590..=600).contains(&expires), "{body}");
    assert_eq!(body["organization_id"], "org_from_token");
    assert_eq!(body["refresh_token"], Value::Null);

    // Bad requests, refused grants and provider failures.
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        (
            "no code_verifier",
            json!({"grant_type": "authorization_code", "code": "good-code", "redirect_uri": "x"}),
            400,
            "VALIDATION_FAILED",
        ),
        (
            "an unknown grant",
            json!({"grant_type": "password", "username": "u"}),
            400,
            "VALIDATION_FAILED",
        ),
        (
            "a stray field",
            json!({"grant_type": "refresh_token", "refresh_token": "r", "code": "c"}),
            400,
            "VALIDATION_FAILED",
        ),
        (
            "an empty refresh token",
            json!({"grant_type": "refresh_token", "refresh_token": ""}),
            400,
            "VALIDATION_FAILED",
        ),
        (
            "a used code",
            json!({"grant_type": "authorization_code", "code": "used-code", "code_verifier": "v", "redirect_uri": "x"}),
            400,
            "GRANT_INVALID",
        ),
        (
            "a provider error",
            json!({"grant_type": "refresh_token", "refresh_token": "boom"}),
            502,
            "IDP_UNAVAILABLE",
        ),
    ];
    for (what, body, status, reason) in cases {
        let res = exchange(&s, body).await;
        let text = res.text().await.unwrap();
        let body: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: {text}"));
        assert_envelope_for(what, &body, status, reason);
        for secret in [API_KEY, "PROVIDER-INTERNAL-DETAIL", "already used"] {
            assert!(!text.contains(secret), "{what}: {text}");
        }
    }
    let res = exchange(
        &s,
        json!({"grant_type": "refresh_token", "refresh_token": "boom"}),
    )
    .await;
    assert!(res.headers().contains_key("retry-after"));
}

/// Each way the proxy cannot work: no provider, no key, a wrong key, a provider that does
/// not listen; and the proxy counts against the write rate limit.
#[tokio::test]
async fn the_token_proxy_refuses_what_it_cannot_do() {
    let ec = es256("k");
    let idp = FakeIdp::start(&[&ec]).await;
    let grant = json!({"grant_type": "refresh_token", "refresh_token": "good-refresh"});
    let (_held, closed) = common::closed_port();
    type Tweak = Box<dyn FnOnce(&mut notevault::config::Config) + Send>;
    let token_url = format!("{}/token", idp.base);
    let cases: Vec<(&str, Tweak, u16, &str)> = vec![
        ("no provider", Box::new(|_| {}), 503, "IDP_NOT_CONFIGURED"),
        (
            "no API key",
            {
                let u = token_url.clone();
                Box::new(move |c| c.idp_token_url = Some(u))
            },
            503,
            "IDP_NOT_CONFIGURED",
        ),
        (
            "a wrong API key",
            {
                let u = token_url.clone();
                Box::new(move |c| {
                    c.idp_token_url = Some(u);
                    c.idp_api_key = Some(notevault::config::Secret::new("wrong-key"));
                })
            },
            502,
            "IDP_UNAVAILABLE",
        ),
        (
            "a provider that does not listen",
            Box::new(move |c| {
                c.idp_token_url = Some(format!("http://{closed}/token"));
                c.idp_api_key = Some(notevault::config::Secret::new(API_KEY));
            }),
            502,
            "IDP_UNAVAILABLE",
        ),
    ];
    for (what, tweak, status, reason) in cases {
        let s = daemon(&idp, tweak).await;
        let res = exchange(&s, grant.clone()).await;
        let text = res.text().await.unwrap();
        let body: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: {text}"));
        assert_envelope_for(what, &body, status, reason);
        assert!(
            !text.contains("wrong-key") && !text.contains(API_KEY),
            "{what}: {text}"
        );
    }

    let u = token_url.clone();
    let s = daemon(&idp, move |c| {
        c.idp_token_url = Some(u);
        c.idp_api_key = Some(notevault::config::Secret::new(API_KEY));
        c.rate_limit_write_per_minute = 2;
    })
    .await;
    for _ in 0..2 {
        assert_eq!(exchange(&s, grant.clone()).await.status(), 200);
    }
    let res = exchange(&s, grant.clone()).await;
    assert_eq!(res.status(), 429);
    assert!(res.headers().contains_key("retry-after"));
}

/// A provider slower than the proxy's timeout: 502 `IDP_UNAVAILABLE`, not a hung request.
#[tokio::test]
async fn a_slow_provider_is_cut_off() {
    let ec = es256("k");
    let idp = FakeIdp::start(&[&ec]).await;
    let token_url = format!("{}/token", idp.base);
    let s = daemon(&idp, |c| {
        c.idp_token_url = Some(token_url);
        c.idp_api_key = Some(notevault::config::Secret::new(API_KEY));
    })
    .await;
    let started = Instant::now();
    let res = exchange(&s, json!({"grant_type": "authorization_code", "code": "slow-code", "code_verifier": "v", "redirect_uri": "x"})).await;
    let body: Value = res.json().await.unwrap();
    assert_envelope_for("a slow provider", &body, 502, "IDP_UNAVAILABLE");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}
