//! A fake identity provider on loopback for the console's sign-in (OAuth 2.0
//! authorization code with PKCE): `/authorize` signs the person in at once, `/token`
//! checks the code, its verifier, the redirect URI and the daemon's API key, and answers
//! an ES256 access token with the claims the test sets; `/jwks` serves its key.

use std::sync::Arc;

use serde_json::{json, Value};

use super::jwt;

/// A running fake provider: its state (what it was asked, the claims it issues) and URL.
pub struct FakeIdp {
    pub idp: Arc<Idp>,
    pub url: String,
}

impl FakeIdp {
    pub async fn start() -> Self {
        let key = Arc::new(jwt::es256("console-k1"));
        let idp = Arc::new(Idp::default());
        let jwks_body = json!({"keys": [key.jwk.clone()]});
        let app = axum::Router::new()
            .route("/authorize", axum::routing::get(authorize))
            .with_state(idp.clone())
            .merge(
                axum::Router::new()
                    .route("/token", axum::routing::post(idp_token))
                    .with_state((idp.clone(), key.clone())),
            )
            .route(
                "/jwks",
                axum::routing::get(move || {
                    let body = jwks_body.clone();
                    async move { axum::Json(body) }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        *idp.issuer.lock() = format!("{url}/");
        Self { idp, url }
    }

    /// The daemon's settings for this provider, as environment variables.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let p = &self.url;
        vec![
            ("NOTEVAULT_AUTH_ISSUER", format!("{p}/")),
            ("NOTEVAULT_AUTH_JWKS_URL", format!("{p}/jwks")),
            ("NOTEVAULT_IDP_TOKEN_URL", format!("{p}/token")),
            ("NOTEVAULT_IDP_AUTHORIZE_URL", format!("{p}/authorize")),
            ("NOTEVAULT_IDP_API_KEY", IDP_KEY.to_string()),
            ("NOTEVAULT_IDP_CLIENT_ID", "notevault-console".to_string()),
        ]
    }
}

/// The same settings in a daemon's configuration.
pub fn configure(c: &mut notevault::config::Config, p: &str) {
    c.auth_issuer = Some(format!("{p}/"));
    c.auth_jwks_url = Some(format!("{p}/jwks"));
    c.idp_token_url = Some(format!("{p}/token"));
    c.idp_authorize_url = Some(format!("{p}/authorize"));
    c.idp_api_key = Some(notevault::auth::Secret::new(IDP_KEY));
    c.idp_client_id = Some("notevault-console".into());
}

/// The fake identity provider of the PKCE sign-in: what `/authorize` was asked (the
/// challenge by state) and the keys it signs with.
#[derive(Default)]
pub struct Idp {
    pub challenges: parking_lot::Mutex<std::collections::HashMap<String, (String, String)>>,
    pub issuer: parking_lot::Mutex<String>,
    /// The `vault_id` claim of the tokens it issues (none when empty).
    pub vault_id: parking_lot::Mutex<String>,
    /// The `org_id` claim of the tokens it issues.
    pub org_id: parking_lot::Mutex<Option<String>>,
    /// The `permissions` claim of the tokens it issues.
    pub permissions: parking_lot::Mutex<Value>,
    /// The `client_id` of each token request.
    pub client_ids: parking_lot::Mutex<Vec<Option<String>>>,
}

pub const IDP_KEY: &str = "sk_test_console_idp_key";

/// `GET /authorize`: the person "signs in" at once; back to `redirect_uri` with a code.
async fn authorize(
    axum::extract::State(idp): axum::extract::State<Arc<Idp>>,
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["code_challenge_method"], "S256");
    let code = format!("code-{}", q["state"].len() + idp.challenges.lock().len());
    idp.challenges.lock().insert(
        code.clone(),
        (q["code_challenge"].clone(), q["redirect_uri"].clone()),
    );
    let to = format!("{}?code={code}&state={}", q["redirect_uri"], q["state"]);
    (axum::http::StatusCode::FOUND, [("location", to)]).into_response()
}

/// `POST /token`: the code, its verifier (S256 of it must be the challenge), the same
/// redirect URI, and the daemon's API key; answers an ES256 access token.
async fn idp_token(
    axum::extract::State((idp, key)): axum::extract::State<(Arc<Idp>, Arc<jwt::SigningKey>)>,
    axum::Form(form): axum::Form<std::collections::HashMap<String, String>>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    use sha2::Digest;
    let refuse = || {
        (
            axum::http::StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_grant"})),
        )
            .into_response()
    };
    if form.get("client_secret").map(String::as_str) != Some(IDP_KEY) {
        return refuse();
    }
    idp.client_ids.lock().push(form.get("client_id").cloned());
    let Some((challenge, redirect)) = idp.challenges.lock().remove(&form["code"]) else {
        return refuse();
    };
    let computed = jwt::b64(&sha2::Sha256::digest(form["code_verifier"].as_bytes()));
    if computed != challenge || form["redirect_uri"] != redirect {
        return refuse();
    }
    let mut claims = json!({"iss": *idp.issuer.lock(), "sub": "user_1", "exp": jwt::now() + 600,
                            "permissions": *idp.permissions.lock()});
    let vault = idp.vault_id.lock().clone();
    if !vault.is_empty() {
        claims["vault_id"] = json!(vault);
    }
    if let Some(org) = idp.org_id.lock().clone() {
        claims["org_id"] = json!(org);
    }
    let token = jwt::sign(&key, &claims);
    axum::Json(json!({"access_token": token, "expires_in": 600})).into_response()
}
