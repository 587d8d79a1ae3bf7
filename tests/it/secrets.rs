//! Secrets stay secret: the real binary serves with every log on (`NOTEVAULT_LOG=debug`),
//! a static token, a personal access token, identity-provider JWTs and the token proxy's
//! API key, and is sent good and bad credentials of each kind. Afterwards no secret is
//! in its logs, in any answer, or in any file of the state directory (metadata store,
//! history, index); the refusals are logged, with the request id and at most a personal
//! access token's public prefix.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the operator: they write fixture files and read the environment"
)]

use crate::common;

use std::process::Command;

use common::jwt::{es256, now, sign};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_notevault");
const STATIC: &str = "static-secret-token-S7x9Q2w4";
const WRONG: &str = "wrong-secret-token-K3v8P1z6";
const API_KEY: &str = "idp-api-key-secret-M5n2B8c4";
const REFRESH: &str = "refresh-secret-R4t7Y1u3";
const CODE: &str = "code-secret-C9d2F6g8";

/// Every file under `dir`, read whole.
fn files(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path().to_path_buf(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn no_secret_reaches_a_log_an_answer_or_the_state_dir() {
    let (_dir, vault, state) = common::temp_vault(Some("vault-example"));
    // A fake provider token endpoint that accepts anything.
    let provider = axum::Router::new().route(
        "/token",
        axum::routing::post(|| async {
            axum::Json(json!({"access_token": "issued-by-provider", "expires_in": 60}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let provider_addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, provider).await.unwrap() });

    // A personal access token, made as a user makes one.
    let out = Command::new(BIN)
        .args([
            "token",
            "create",
            "--name",
            "agent",
            "--scope",
            "notes.write",
            "--state-dir",
        ])
        .arg(&state)
        .arg(&vault)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pat = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(pat.starts_with("nvp_"), "{pat}");
    let mut garbled = pat.clone();
    garbled.replace_range(20..21, if &pat[20..21] == "a" { "b" } else { "a" });

    let key = es256("k1");
    let jwks = state.parent().unwrap().join("jwks.json");
    std::fs::write(&jwks, json!({"keys": [key.jwk.clone()]}).to_string()).unwrap();
    let config = state.parent().unwrap().join("notevault.toml");
    std::fs::write(
        &config,
        format!(
            "auth_issuer = \"https://idp.example/\"\nauth_jwks_file = {jwks:?}\nidp_token_url = \"http://{provider_addr}/token\"\n\n[[static_tokens]]\ntoken = \"{STATIC}\"\npermissions = [\"notes.write\"]\n"
        ),
    )
    .unwrap();

    let mut command = common::daemon::command(BIN, "127.0.0.1:0", &vault, Some(&state));
    command
        .arg("--no-watch")
        .arg("--config")
        .arg(&config)
        .env("NOTEVAULT_LOG", "debug")
        .env("AUTH_REQUIRED", "true")
        .env("IDP_API_KEY", API_KEY);
    // Its stderr is read on a thread until it ends (`Daemon::whole_log`).
    let mut daemon = common::daemon::start(command).expect("the daemon serves");
    let base = daemon.base.clone();
    let client = reqwest::Client::new();

    let vault_id = {
        let res = client
            .get(format!("{base}/v1/vault"))
            .bearer_auth(STATIC)
            .send()
            .await
            .unwrap();
        let status = res.status();
        let body: serde_json::Value = res.json().await.unwrap();
        assert_eq!(status, 200, "{body}");
        body["vault_id"].as_str().unwrap().to_string()
    };
    let good_jwt = sign(
        &key,
        &json!({"iss": "https://idp.example/", "exp": now() + 600, "vault_id": vault_id, "permissions": ["notes.write"]}),
    );
    let bad_jwt = sign(
        &es256("k1"),
        &json!({"iss": "https://idp.example/", "exp": now() + 600, "vault_id": vault_id}),
    );
    let mut answers = String::new();
    let mut created = 0;
    for (bearer, writes) in [
        (STATIC, true),
        (pat.as_str(), true),
        (good_jwt.as_str(), true),
        (WRONG, false),
        (garbled.as_str(), false),
        (bad_jwt.as_str(), false),
    ] {
        let res = client
            .get(format!("{base}/v1/notes?page_size=1"))
            .bearer_auth(bearer)
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status().is_success(),
            writes,
            "read with {}",
            &bearer[..8]
        );
        answers.push_str(&format!("{:?}", res.headers()));
        answers.push_str(&res.text().await.unwrap());
        let res = client
            .post(format!("{base}/v1/notes"))
            .bearer_auth(bearer)
            .header(
                "Idempotency-Key",
                format!("secret-test-{created}-{}", &bearer[..4]),
            )
            .json(
                &json!({"title": format!("Written with credential {created}"), "content": "body"}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status().is_success(),
            writes,
            "write with {}",
            &bearer[..8]
        );
        created += usize::from(writes);
        answers.push_str(&format!("{:?}", res.headers()));
        answers.push_str(&res.text().await.unwrap());
    }
    for body in [
        json!({"grant_type": "refresh_token", "refresh_token": REFRESH}),
        json!({"grant_type": "authorization_code", "code": CODE, "code_verifier": "v", "redirect_uri": "http://127.0.0.1/cb"}),
    ] {
        let res = client
            .post(format!("{base}/v1/auth/token"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        answers.push_str(&res.text().await.unwrap());
    }
    // Everything asked was recorded: stop the daemon as a user does.
    unsafe { libc::kill(daemon.child.id() as i32, libc::SIGINT) };
    let (status, log) = tokio::task::spawn_blocking(move || {
        let status = daemon.child.wait().unwrap();
        (status, daemon.whole_log().join("\n").into_bytes())
    })
    .await
    .unwrap();
    assert!(status.success(), "{status:?}");
    let log_text = String::from_utf8_lossy(&log);
    assert!(
        log_text.contains("credential refused") && log_text.contains(&pat[..12]),
        "refusals are logged with a PAT's public prefix: {log_text}"
    );
    let secrets = [
        STATIC,
        WRONG,
        API_KEY,
        REFRESH,
        CODE,
        &pat,
        &pat[12..],
        &garbled,
        &good_jwt,
        &bad_jwt,
    ];
    for secret in secrets {
        assert!(
            !contains(&log, secret),
            "a secret in the log: {}…",
            &secret[..6]
        );
        assert!(
            !answers.contains(secret),
            "a secret in an answer: {}…",
            &secret[..6]
        );
        for (path, bytes) in files(&state) {
            assert!(!contains(&bytes, secret), "a secret in {}", path.display());
        }
    }
    // The JWT's signature part alone, too (a log might cut the token at a dot).
    let signature = good_jwt.rsplit('.').next().unwrap();
    assert!(!contains(&log, signature));
    assert_eq!(created, 3);
}
