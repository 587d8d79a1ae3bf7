//! HTTPS: the daemon serves TLS with a certificate and key from the config, every answer
//! over TLS carries HSTS (and none over plain HTTP), auth works the same over TLS, a
//! failed handshake costs only its own connection, unusable files stop the binary with a
//! one-line error naming the file, and a non-loopback address is served only with auth
//! and TLS (or `--insecure-open`).

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the operator: they write certificate files and run the binary"
)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::TestServer;
use notevault::auth::{StaticToken, TokenKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_notevault");
const HSTS: &str = "max-age=31536000";
const TOKEN: &str = "tls-reader-token-0123456789";

/// A self-signed certificate for `localhost` and 127.0.0.1 and its key (PKCS#8), as PEM
/// files in `dir`; the certificate's PEM, for a client to trust.
fn certificate(dir: &Path) -> (PathBuf, PathBuf, String) {
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    let pem = generated.cert.pem();
    std::fs::write(&cert, &pem).unwrap();
    std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
    (cert, key, pem)
}

/// A client that trusts `pem` (and nothing it was not told to).
fn client(pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// A server of `vault-example` over HTTPS (`tweak` applied to its config), its client
/// trusting the certificate; the certificate's folder lives as long as the server.
async fn tls_server(
    tweak: impl FnOnce(&mut notevault::config::Config),
) -> (TestServer, tempfile::TempDir) {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key, pem) = certificate(certs.path());
    let mut s = TestServer::start(Some("vault-example"), |c| {
        c.tls_cert = Some(cert);
        c.tls_key = Some(key);
        tweak(c);
    })
    .await;
    s.base = s.base.replace("http://", "https://");
    s.client = client(&pem);
    (s, certs)
}

fn reader() -> StaticToken {
    StaticToken {
        token: TOKEN.into(),
        permissions: vec![],
        kind: TokenKind::Session,
        vault_id: None,
    }
}

#[tokio::test]
async fn https_answers_with_hsts() {
    let (s, _certs) = tls_server(|_| {}).await;
    let res = s.get("/v1/vault").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["strict-transport-security"], HSTS);
    // Error envelopes too.
    let res = s.get("/v1/no-such-route").await;
    assert_eq!(res.status(), 404);
    assert_eq!(res.headers()["strict-transport-security"], HSTS);
    // The client speaks HTTP/1.1 (ALPN), as the server does.
    assert_eq!(res.version(), reqwest::Version::HTTP_11);
}

#[tokio::test]
async fn no_hsts_over_plain_http() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let res = s.get("/v1/vault").await;
    assert_eq!(res.status(), 200);
    assert!(res.headers().get("strict-transport-security").is_none());
}

#[tokio::test]
async fn auth_over_tls_refuses_without_a_token_and_serves_with_one() {
    let (s, _certs) = tls_server(|c| {
        c.auth_required = true;
        c.static_tokens = vec![reader()];
    })
    .await;
    let res = s.get("/v1/vault").await;
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.headers()["www-authenticate"],
        r#"Bearer realm="notevault""#
    );
    assert_eq!(res.headers()["strict-transport-security"], HSTS);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["reason"], "AUTH_MISSING");
    let res = s
        .client
        .get(s.url("/v1/vault"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

/// Plain HTTP to the TLS port gets no answer (the handshake fails and the connection is
/// closed), a client that never speaks holds only its own connection, and the daemon
/// goes on serving HTTPS.
#[tokio::test]
async fn a_failed_handshake_costs_only_its_connection() {
    let (s, _certs) = tls_server(|_| {}).await;
    let addr = s.base.trim_start_matches("https://").to_string();
    // A client that connects and says nothing: its handshake waits in its own task.
    let _silent = tokio::net::TcpStream::connect(&addr).await.unwrap();

    let mut plain = tokio::net::TcpStream::connect(&addr).await.unwrap();
    plain
        .write_all(format!("GET /v1/vault HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), plain.read_to_end(&mut answer))
        .await
        .expect("the connection is closed, not left open");
    // Closed, at most with a TLS alert record (content type 21): never an HTTP answer.
    assert!(
        read.is_err() || answer.is_empty() || answer[0] == 21,
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    assert!(!answer.starts_with(b"HTTP/"));
    let plain_client = reqwest::Client::new();
    assert!(plain_client
        .get(format!("http://{addr}/v1/vault"))
        .send()
        .await
        .is_err());

    let res = s.get("/v1/vault").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["strict-transport-security"], HSTS);
    // Shutting down does not wait for the silent client's handshake (10 s bound).
    tokio::time::timeout(Duration::from_secs(5), s.stop())
        .await
        .expect("shutdown ends the handshakes under way");
}

/// A connection in its handshake holds a connection slot: past `max_connections` a new
/// one is answered 503 `SERVER_BUSY`, over TLS and with HSTS; the slot comes back when
/// the handshake fails.
#[tokio::test]
async fn a_handshake_counts_against_the_connection_cap() {
    let (s, _certs) = tls_server(|c| c.max_connections = 1).await;
    let addr = s.base.trim_start_matches("https://").to_string();
    let silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    common::eventually("the silent connection holds the one slot", || async {
        s.get("/v1/vault").await.status() == 503
    })
    .await;
    let res = s.get("/v1/vault").await;
    assert_eq!(res.status(), 503);
    assert_eq!(res.headers()["strict-transport-security"], HSTS);
    assert_eq!(res.headers()["retry-after"], "1");
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["reason"], "SERVER_BUSY");
    drop(silent);
    common::eventually("the slot is free again", || async {
        s.get("/v1/vault").await.status() == 200
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// The binary

fn serve(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let mut command = Command::new(BIN);
    command
        .arg("serve")
        .args(args)
        .env_remove("NOTEVAULT_CONFIG")
        .env_remove("AUTH_REQUIRED")
        .env_remove("NOTEVAULT_AUTH_REQUIRED")
        .env_remove("NOTEVAULT_STATIC_TOKENS");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The binary refuses, with one line on stderr holding each of `needles`.
fn assert_refused(args: &[&str], env: &[(&str, &str)], needles: &[&str]) {
    let (ok, stderr) = serve(args, env);
    assert!(!ok, "{args:?} must fail: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line for {args:?}: {stderr}");
    assert!(lines[0].starts_with("notevault: "), "{stderr}");
    for needle in needles {
        assert!(lines[0].contains(needle), "{needle:?} in {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn unusable_certificate_or_key_files_stop_the_binary_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let vault = dir.path().join("vault");
    std::fs::create_dir(&vault).unwrap();
    let (cert, key, _) = certificate(dir.path());
    let other = tempfile::tempdir().unwrap();
    let (_, other_key, _) = certificate(other.path());
    let not_pem = dir.path().join("not-pem.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let missing = dir.path().join("missing.pem");
    let p = |p: &Path| p.to_str().unwrap().to_string();
    let v = p(&vault);
    for (cert, key, named, words) in [
        (&missing, &key, &missing, "cannot read TLS certificate"),
        (&not_pem, &key, &not_pem, "holds no PEM certificate"),
        (&key, &key, &key, "holds no PEM certificate"),
        (&cert, &cert, &cert, "holds no unencrypted PEM private key"),
        (
            &cert,
            &other_key,
            &other_key,
            "does not belong to the certificate",
        ),
    ] {
        assert_refused(
            &[
                &v,
                "--listen",
                "127.0.0.1:0",
                "--tls-cert",
                &p(cert),
                "--tls-key",
                &p(key),
            ],
            &[],
            &[&p(named), words],
        );
    }
    // One without the other.
    assert_refused(
        &[&v, "--listen", "127.0.0.1:0", "--tls-cert", &p(&cert)],
        &[],
        &["without tls_key", "--tls-key"],
    );
    assert_refused(
        &[&v, "--listen", "127.0.0.1:0"],
        &[("NOTEVAULT_TLS_KEY", &p(&key))],
        &["without tls_cert", "--tls-cert"],
    );
    // Nothing was opened: the files were checked before the vault.
    assert!(!vault.join(".notevault").exists());
}

#[test]
fn a_non_loopback_address_needs_auth_and_tls_and_the_refusal_says_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let vault = dir.path().join("vault");
    std::fs::create_dir(&vault).unwrap();
    let (cert, key, _) = certificate(dir.path());
    let v = vault.to_str().unwrap();
    let (c, k) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let both_ways = [
        "refusing to serve 0.0.0.0:0",
        "--tls-cert",
        "--tls-key",
        "AUTH_REQUIRED=true",
        "static_tokens",
        "127.0.0.1",
        "--insecure-open",
    ];
    let listen = ["--listen", "0.0.0.0:0"];
    for (extra, env, missing) in [
        (vec![], vec![], "without auth and over plain HTTP"),
        (vec![], vec![("AUTH_REQUIRED", "true")], "over plain HTTP"),
        (
            vec!["--tls-cert", c, "--tls-key", k],
            vec![],
            "without auth:",
        ),
    ] {
        let args: Vec<&str> = [v].into_iter().chain(listen).chain(extra).collect();
        let needles: Vec<&str> = both_ways.iter().copied().chain([missing]).collect();
        assert_refused(&args, &env, &needles);
    }
}

/// With TLS and a static token, `--listen 0.0.0.0:0` serves: the printed URL is https,
/// and a request over loopback with the token is answered with HSTS.
#[tokio::test]
async fn a_non_loopback_address_with_tls_and_a_token_serves_https() {
    let dir = tempfile::tempdir().unwrap();
    let vault = dir.path().join("vault");
    std::fs::create_dir(&vault).unwrap();
    std::fs::write(vault.join("hello.md"), "# Hello\n").unwrap();
    let (cert, key, pem) = certificate(dir.path());
    let tokens = format!(r#"[{{"token": "{TOKEN}"}}]"#);
    let mut command = common::daemon::command(BIN, "0.0.0.0:0", &vault, None);
    command
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .env("NOTEVAULT_STATIC_TOKENS", tokens);
    let mut daemon = tokio::task::spawn_blocking(move || common::daemon::start(command))
        .await
        .unwrap()
        .expect("the daemon prints its address");
    let port = daemon
        .base
        .strip_prefix("https://0.0.0.0:")
        .unwrap_or_else(|| panic!("an https URL on 0.0.0.0: {}", daemon.base))
        .to_string();
    // Only loopback traffic: the daemon listens on every address, the test calls 127.0.0.1.
    let client = client(&pem);
    let res = client
        .get(format!("https://127.0.0.1:{port}/v1/notes/hello"))
        .bearer_auth(TOKEN)
        .send()
        .await;
    let without = client
        .get(format!("https://127.0.0.1:{port}/v1/notes/hello"))
        .send()
        .await;
    daemon.child.kill().unwrap();
    let _ = daemon.child.wait();
    let res = res.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["strict-transport-security"], HSTS);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["title"], "Hello");
    assert_eq!(without.unwrap().status(), 401);
}

/// Under TLS the console's session cookie is `__Host-` and `Secure`, and only that name
/// signs in (a plain-named cookie, as another local service could set, is no session).
#[tokio::test]
async fn the_console_cookie_is_host_prefixed_and_secure_under_tls() {
    let (s, _certs) = tls_server(|_| {}).await;
    let link = notevault::console::sign_in_link(&*s.svc.meta, &s.base).unwrap();
    assert!(link.starts_with("https://"), "{link}");
    let res = s.client.get(&link).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let set = res.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(set.starts_with("__Host-notevault_session="), "{set}");
    for attribute in ["; Secure", "; HttpOnly", "; SameSite=Strict", "; Path=/"] {
        assert!(set.contains(attribute), "{set}");
    }
    let secret = set
        .split(';')
        .next()
        .unwrap()
        .split_once('=')
        .unwrap()
        .1
        .to_string();
    let page = |cookie: String| s.client.get(s.url("/")).header("cookie", cookie).send();
    assert_eq!(
        page(format!("__Host-notevault_session={secret}"))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        page(format!("notevault_session={secret}"))
            .await
            .unwrap()
            .status(),
        401
    );
}
