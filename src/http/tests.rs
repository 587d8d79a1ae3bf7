//! Unit tests of the parent module.

use super::*;
use axum::http::Method;
use axum::routing::get;
use tower::ServiceExt;

async fn boom() -> &'static str {
    if std::hint::black_box(true) {
        panic!("boom");
    }
    "unreachable"
}

#[tokio::test]
async fn a_panicking_handler_answers_internal_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::config::Config {
        vault: dir.path().to_path_buf(),
        ..Default::default()
    };
    let daemon = tokio::task::spawn_blocking(move || crate::daemon::open(config))
        .await
        .unwrap()
        .unwrap();
    let state = daemon.state.clone();
    let app = layered(
        Router::new().route("/boom", get(boom)).fallback(dispatch),
        AppState::new(state),
    );
    let request = |uri: &str| {
        axum::http::Request::builder()
            .uri(uri)
            .header("host", "127.0.0.1")
            .body(Body::empty())
            .unwrap()
    };
    let response = app.clone().oneshot(request("/boom")).await.unwrap();
    assert_eq!(response.status(), 500);
    let id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["reason"], "INTERNAL");
    assert_eq!(body["requestId"], id);
    let response = app.oneshot(request("/v1/notes")).await.unwrap();
    assert_eq!(response.status(), 200);
}

/// The app as `router` builds it, but with `credential` in place of the one the auth
/// layer gives (open local mode has only the open credential; the auth issue adds the
/// others).
fn app_with(app: AppState, credential: Credential) -> Router {
    let vault = app.default_vault().clone();
    let with = move |mut req: Request, next: Next| {
        let credential = credential.clone();
        let vault = vault.clone();
        async move {
            req.extensions_mut().insert(credential);
            req.extensions_mut().insert(vault.state.clone());
            req.extensions_mut().insert(vault);
            next.run(req).await
        }
    };
    Router::new()
        .route("/mcp", axum::routing::any(mcp))
        .fallback(dispatch)
        .layer(middleware::from_fn(with))
        .with_state(app)
}

async fn empty_vault() -> (tempfile::TempDir, AppState) {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::config::Config {
        vault: dir.path().to_path_buf(),
        ..Default::default()
    };
    let daemon = tokio::task::spawn_blocking(move || crate::daemon::open(config))
        .await
        .unwrap()
        .unwrap();
    (dir, AppState::new(daemon.state.clone()))
}

/// Dispatch checks each row's need once, before the handler reads anything: a
/// credential without the permission gets the envelope (403 `PERMISSION_MISSING`, the
/// permission in `scope`) and the spec's `WWW-Authenticate`; no credential gets 401
/// `AUTH_MISSING`; a credential that has what the row needs reaches the handler.
#[tokio::test]
async fn dispatch_refuses_a_credential_that_lacks_the_routes_permission() {
    use crate::auth::Permission::{NotesReview, NotesWrite};
    let (_dir, app) = empty_vault().await;
    let token = |permissions: &[crate::auth::Permission]| Credential::Token {
        permissions: permissions.to_vec(),
    };
    let pat = |permissions: &[crate::auth::Permission]| Credential::Pat {
        permissions: permissions.to_vec(),
    };
    let id = "0190a5c2-7e3f-7c1a-9b2e-0123456789ab";
    let write = r#"Bearer realm="notevault", error="insufficient_scope", scope="notes.write""#;
    let review = r#"Bearer realm="notevault", error="insufficient_scope", scope="notes.review""#;
    let missing = r#"Bearer realm="notevault""#;
    // (credential, method, path, refused with: status, reason, WWW-Authenticate)
    let refused: Vec<(Credential, Method, String, u16, &str, &str)> = vec![
        (
            token(&[]),
            Method::POST,
            "/v1/notes".into(),
            403,
            "PERMISSION_MISSING",
            write,
        ),
        (
            pat(&[NotesReview]),
            Method::PATCH,
            "/v1/notes/a".into(),
            403,
            "PERMISSION_MISSING",
            write,
        ),
        (
            token(&[]),
            Method::DELETE,
            "/v1/notes/a".into(),
            403,
            "PERMISSION_MISSING",
            write,
        ),
        (
            token(&[NotesReview]),
            Method::POST,
            "/v1/notes/a:edit".into(),
            403,
            "PERMISSION_MISSING",
            write,
        ),
        (
            token(&[]),
            Method::POST,
            "/v1/notes/a/edit".into(),
            403,
            "PERMISSION_MISSING",
            write,
        ),
        (
            token(&[]),
            Method::POST,
            "/v1/notes/a:rollback".into(),
            403,
            "PERMISSION_MISSING",
            write,
        ),
        (
            token(&[NotesWrite]),
            Method::GET,
            format!("/v1/writes/{id}"),
            403,
            "PERMISSION_MISSING",
            review,
        ),
        (
            pat(&[NotesWrite]),
            Method::POST,
            format!("/v1/writes/{id}:approve"),
            403,
            "PERMISSION_MISSING",
            review,
        ),
        (
            token(&[NotesWrite]),
            Method::POST,
            format!("/v1/writes/{id}/reject"),
            403,
            "PERMISSION_MISSING",
            review,
        ),
        (
            token(&[NotesWrite]),
            Method::PATCH,
            "/v1/vault/write-settings?update_mask=write_budget".into(),
            403,
            "PERMISSION_MISSING",
            review,
        ),
        (
            Credential::Anonymous,
            Method::GET,
            "/v1/notes".into(),
            401,
            "AUTH_MISSING",
            missing,
        ),
        (
            Credential::Anonymous,
            Method::POST,
            "/v1/notes".into(),
            401,
            "AUTH_MISSING",
            missing,
        ),
        (
            Credential::Anonymous,
            Method::POST,
            "/mcp".into(),
            401,
            "AUTH_MISSING",
            missing,
        ),
    ];
    for (credential, method, path, status, reason, challenge) in refused {
        let what = format!("{credential:?} {method} {path}");
        let request = axum::http::Request::builder()
            .method(method)
            .uri(&path)
            .header("content-type", "application/json")
            .body(Body::from("{not json"))
            .unwrap();
        let response = app_with(app.clone(), credential)
            .oneshot(request)
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{what}");
        assert_eq!(response.headers()["www-authenticate"], challenge, "{what}");
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["reason"], reason, "{what}");
        assert_eq!(body["statusCode"], status, "{what}");
        for field in ["error", "message", "requestId", "hint", "help", "details"] {
            assert!(!body[field].is_null(), "{what}: {field} in {body}");
        }
        if status == 403 {
            let scope = body["details"][0]["metadata"]["scope"].as_str().unwrap();
            assert!(challenge.ends_with(&format!("scope=\"{scope}\"")), "{what}");
        }
    }
    // What the row needs, held: the handler answers (here: the body is not JSON, or
    // no such note or write), never a 401 or 403.
    let allowed: Vec<(Credential, Method, String)> = vec![
        (token(&[]), Method::GET, "/v1/notes".into()),
        (pat(&[]), Method::GET, "/v1/writes".into()),
        (pat(&[]), Method::POST, "/v1/properties:aggregate".into()),
        (token(&[NotesWrite]), Method::POST, "/v1/notes".into()),
        (pat(&[NotesWrite]), Method::POST, "/v1/notes/a:edit".into()),
        (
            token(&[NotesReview]),
            Method::GET,
            format!("/v1/writes/{id}"),
        ),
        (
            pat(&[NotesReview]),
            Method::POST,
            format!("/v1/writes/{id}:approve"),
        ),
        (Credential::Anonymous, Method::GET, "/openapi.json".into()),
        (
            Credential::Open,
            Method::POST,
            format!("/v1/writes/{id}:reject"),
        ),
        (token(&[]), Method::POST, "/mcp".into()),
    ];
    for (credential, method, path) in allowed {
        let what = format!("{credential:?} {method} {path}");
        let request = axum::http::Request::builder()
            .method(method)
            .uri(&path)
            .header("content-type", "application/json")
            .body(Body::from("{not json"))
            .unwrap();
        let response = app_with(app.clone(), credential)
            .oneshot(request)
            .await
            .unwrap();
        assert!(
            ![401, 403].contains(&response.status().as_u16()),
            "{what}: {}",
            response.status()
        );
        assert!(
            response.headers().get("www-authenticate").is_none(),
            "{what}"
        );
    }
}

/// A router built without the auth layer serves nothing: no credential is not the
/// open credential.
#[tokio::test]
async fn without_the_auth_layer_nothing_is_served() {
    let (_dir, app) = empty_vault().await;
    let app = Router::new().fallback(dispatch).with_state(app);
    let request = axum::http::Request::builder()
        .uri("/v1/notes")
        .body(Body::empty())
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 500);
}
