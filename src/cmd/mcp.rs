//! `notevault mcp`: MCP over stdio. Every JSON-RPC line read from stdin becomes a POST to
//! an `/mcp` endpoint, and every message that endpoint answers or streams becomes a line
//! on stdout. The endpoint is the daemon serving the vault when one answers (the URL it
//! keeps in the metadata store), else the same application opened in this process and
//! called without a socket. Either way a message passes the one door (`http`:
//! Host guard, authenticate, rate limits) and the one MCP server, so the tools, their
//! answers and what a token may do are those of `/mcp`.

use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use futures::StreamExt as _;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc;

use crate::cli::McpArgs;
use crate::config::{Config, Layer};

use super::{config_file, logs};

/// How long the probe of a recorded daemon URL may take before the vault is opened here.
const PROBE: std::time::Duration = std::time::Duration::from_secs(2);

/// `notevault mcp [VAULT]`.
#[allow(
    clippy::disallowed_methods,
    reason = "the CLI hands the environment to Config::load"
)]
pub fn mcp(args: McpArgs) -> anyhow::Result<()> {
    logs();
    let flags = Layer {
        vault: args.vault.clone(),
        state_dir: args.state_dir.clone(),
        ..Layer::default()
    };
    let config = Config::load(
        config_file(args.config.clone()).as_deref(),
        |k| std::env::var(k).ok(),
        flags,
    )
    .map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let client = http_client(&args)?;
        let url = match (&args.url, args.no_daemon) {
            (Some(url), _) => Some(url.trim_end_matches('/').to_string()),
            (None, true) => None,
            (None, false) => daemon_url(&config, &client, args.token.as_deref()).await,
        };
        match url {
            Some(url) => {
                note(&format!("notevault mcp: through the daemon at {url}"));
                let backend = Backend::Remote {
                    client,
                    mcp: format!("{url}/mcp"),
                };
                proxy(backend, args.token).await
            }
            None => {
                let daemon = tokio::task::spawn_blocking(move || crate::daemon::open(config))
                    .await??;
                note(&format!(
                    "notevault mcp: serving {} from this process",
                    daemon.state.root().display()
                ));
                if let Err(e) = crate::api::writes::upgrade_legacy_pending(&daemon.state) {
                    tracing::warn!(error = %e.message, "cannot upgrade pending writes stored by an older version");
                }
                let vaults = crate::vaults::Vaults::new(vec![daemon.state.clone()])
                    .map_err(anyhow::Error::msg)?;
                let app = crate::http::AppState::new(vaults);
                let cancel = app.mcp_cancel.clone();
                let backend = Backend::Local(crate::http::router(app));
                let outcome = proxy(backend, args.token).await;
                cancel.cancel();
                tokio::task::spawn_blocking(move || daemon.stop()).await?;
                outcome
            }
        }
    })
}

/// One line on stderr (stdout carries the protocol); a closed stderr is no failure.
fn note(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

fn http_client(args: &McpArgs) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder().connect_timeout(PROBE);
    if let Some(file) = &args.cacert {
        let pem = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
        let cert = reqwest::Certificate::from_pem(&pem)
            .with_context(|| format!("{} is not a PEM certificate", file.display()))?;
        builder = builder.add_root_certificate(cert);
    }
    Ok(builder.build()?)
}

/// The base URL of the daemon serving this vault: the one it recorded when it started
/// (`reach::serving`, as the reading commands find it), if something there answers as notevault does (JSON, with the vault's
/// id when the answer names one). A vault never served, or a daemon gone, is `None`.
async fn daemon_url(
    config: &Config,
    client: &reqwest::Client,
    token: Option<&str>,
) -> Option<String> {
    let dir = config.state_dir_of_vault().ok()?;
    let (url, vault_id) = super::reach::serving(&dir).ok()??;
    let url = url.trim_end_matches('/').to_string();
    let mut request = client.get(format!("{url}/v1/vault")).timeout(PROBE);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let answer: Value = request.send().await.ok()?.json().await.ok()?;
    // A daemon that refuses the probe (no token yet) still serves the vault: its index
    // is locked, so opening the vault here could only fail.
    match (answer["vault_id"].as_str(), vault_id) {
        (Some(served), Some(ours)) if served != ours => None,
        (None, _) if answer["reason"].is_null() => None,
        _ => Some(url),
    }
}

/// Where the messages go: a daemon over HTTP, or the application of this process.
enum Backend {
    Remote {
        client: reqwest::Client,
        mcp: String,
    },
    Local(axum::Router),
}

/// An answer's status, headers and body, read chunk by chunk (an SSE stream may stay
/// open).
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Body,
}

enum Body {
    Remote(reqwest::Response),
    Local(axum::body::BodyDataStream),
}

impl Body {
    async fn chunk(&mut self) -> anyhow::Result<Option<Bytes>> {
        match self {
            Body::Remote(response) => Ok(response.chunk().await?),
            Body::Local(stream) => stream.next().await.transpose().map_err(Into::into),
        }
    }

    async fn all(mut self) -> anyhow::Result<Vec<u8>> {
        let mut all = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            all.extend_from_slice(&chunk);
        }
        Ok(all)
    }
}

impl Backend {
    async fn send(
        &self,
        method: Method,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<Reply> {
        match self {
            Backend::Remote { client, mcp } => {
                let mut request = client.request(method, mcp).headers(headers);
                if let Some(body) = body {
                    request = request.body(body);
                }
                let response = request
                    .send()
                    .await
                    .with_context(|| format!("the daemon at {mcp} does not answer"))?;
                Ok(Reply {
                    status: response.status(),
                    headers: response.headers().clone(),
                    body: Body::Remote(response),
                })
            }
            Backend::Local(router) => {
                use tower::ServiceExt as _;
                let mut request = axum::http::Request::builder()
                    .method(method)
                    .uri("http://127.0.0.1/mcp")
                    .body(axum::body::Body::from(body.unwrap_or_default()))?;
                *request.headers_mut() = headers;
                // A loopback Host, as a local client's request has.
                request.headers_mut().insert(
                    axum::http::header::HOST,
                    HeaderValue::from_static("127.0.0.1"),
                );
                let response = router.clone().oneshot(request).await?;
                let (parts, body) = response.into_parts();
                Ok(Reply {
                    status: parts.status,
                    headers: parts.headers,
                    body: Body::Local(body.into_data_stream()),
                })
            }
        }
    }
}

/// What the proxy learns of the session from the handshake.
#[derive(Default)]
struct Session {
    id: Option<String>,
    protocol: Option<String>,
}

struct Proxy {
    backend: Backend,
    token: Option<String>,
    session: Mutex<Session>,
    out: mpsc::UnboundedSender<String>,
}

/// Pump stdin to the endpoint and its answers to stdout until stdin ends; then wait for
/// the calls under way and end the session.
async fn proxy(backend: Backend, token: Option<String>) -> anyhow::Result<()> {
    let (out, mut lines) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = lines.recv().await {
            let written = async {
                stdout.write_all(line.as_bytes()).await?;
                stdout.write_all(b"\n").await?;
                stdout.flush().await
            };
            if written.await.is_err() {
                break;
            }
        }
    });
    let proxy = Arc::new(Proxy {
        backend,
        token,
        session: Mutex::new(Session::default()),
        out,
    });
    let mut calls = tokio::task::JoinSet::new();
    let mut stream: Option<tokio::task::JoinHandle<()>> = None;
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = stdin.next_line().await? {
        let line = line.trim().to_string();
        if line.is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(&line) {
            Ok(message) => message,
            Err(e) => {
                let error = json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32700, "message": format!("parse error: {e}")}});
                let _ = proxy.out.send(error.to_string());
                continue;
            }
        };
        let method = message["method"].as_str().unwrap_or_default().to_string();
        // The handshake goes in order: the session it opens names every later message.
        if method == "initialize" || method == "notifications/initialized" {
            proxy.forward(line, &message).await;
            if method == "notifications/initialized" && stream.is_none() {
                let p = proxy.clone();
                stream = Some(tokio::spawn(async move { p.listen().await }));
            }
            continue;
        }
        let p = proxy.clone();
        calls.spawn(async move { p.forward(line, &message).await });
    }
    while calls.join_next().await.is_some() {}
    if let Some(stream) = stream {
        stream.abort();
    }
    proxy.end().await;
    drop(proxy);
    let _ = writer.await;
    Ok(())
}

impl Proxy {
    fn headers(&self, message: Option<&Value>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let mut put = |name: &'static str, value: &str| {
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.insert(name, v);
            }
        };
        put("content-type", "application/json");
        put("accept", "application/json, text/event-stream");
        if let Some(token) = &self.token {
            put("authorization", &format!("Bearer {token}"));
        }
        let session = self.session.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(id) = &session.id {
            put("mcp-session-id", id);
        }
        // A stateless (2026-07-28) message names its version and method in headers too.
        let meta = message
            .and_then(|m| m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str());
        if let Some(version) = meta.or(session.protocol.as_deref()) {
            put("mcp-protocol-version", version);
        }
        if let (Some(message), Some(_)) = (message, meta) {
            if let Some(method) = message["method"].as_str() {
                put("mcp-method", method);
            }
            if let Some(name) = message["params"]["name"].as_str() {
                put("mcp-name", name);
            }
        }
        headers
    }

    /// One message to the endpoint; what it answers to stdout. A request the endpoint
    /// cannot answer gets a JSON-RPC error, so the client never waits forever.
    async fn forward(&self, line: String, message: &Value) {
        let headers = self.headers(Some(message));
        let initialize = message["method"] == "initialize";
        let reply = match self
            .backend
            .send(Method::POST, headers, Some(line.into_bytes()))
            .await
        {
            Ok(reply) => reply,
            Err(e) => return self.fail(message, &format!("{e:#}")),
        };
        if initialize {
            let mut session = self.session.lock().unwrap_or_else(|e| e.into_inner());
            session.id = reply
                .headers
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
        }
        let status = reply.status;
        let sent = self.relay(reply, initialize).await;
        match sent {
            Ok(0) if status != StatusCode::ACCEPTED && !status.is_success() => {
                self.fail(message, &format!("the endpoint answered {status}"))
            }
            Ok(_) => {}
            Err(e) => self.fail(message, &format!("{e:#}")),
        }
    }

    /// The messages of an answer (one JSON body or an SSE stream) to stdout; how many.
    async fn relay(&self, reply: Reply, initialize: bool) -> anyhow::Result<usize> {
        let streamed = reply
            .headers
            .get(axum::http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        let mut sent = 0;
        if !streamed {
            let body = reply.body.all().await?;
            if !body.iter().all(u8::is_ascii_whitespace) {
                sent += self.emit(&body, initialize);
            }
            return Ok(sent);
        }
        let mut body = reply.body;
        let mut pending: Vec<u8> = Vec::new();
        while let Some(chunk) = body.chunk().await? {
            pending.extend_from_slice(&chunk);
            while let Some((event, rest)) = split_event(&pending) {
                let data = event_data(&event);
                pending = rest;
                if !data.is_empty() {
                    sent += self.emit(&data, initialize);
                }
            }
        }
        Ok(sent)
    }

    /// One message to stdout, on one line; the handshake's answer also tells the session's
    /// protocol version.
    fn emit(&self, data: &[u8], initialize: bool) -> usize {
        let Ok(value) = serde_json::from_slice::<Value>(data) else {
            return 0;
        };
        if initialize {
            if let Some(version) = value["result"]["protocolVersion"].as_str() {
                let mut session = self.session.lock().unwrap_or_else(|e| e.into_inner());
                session.protocol = Some(version.to_string());
            }
        }
        usize::from(self.out.send(value.to_string()).is_ok())
    }

    fn fail(&self, message: &Value, why: &str) {
        let Some(id) = message.get("id").filter(|id| !id.is_null()) else {
            tracing::warn!(error = why, "a notification was not delivered");
            return;
        };
        let error = json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32603, "message": why}});
        let _ = self.out.send(error.to_string());
    }

    /// The session's stream of server messages (resource updates, log messages), while
    /// the session lasts.
    async fn listen(&self) {
        if self.session.lock().map(|s| s.id.is_none()).unwrap_or(true) {
            return;
        }
        let mut headers = self.headers(None);
        headers.remove("content-type");
        headers.insert("accept", HeaderValue::from_static("text/event-stream"));
        if let Ok(reply) = self.backend.send(Method::GET, headers, None).await {
            if reply.status.is_success() {
                let _ = self.relay(reply, false).await;
            }
        }
    }

    /// Close the session, if the handshake opened one.
    async fn end(&self) {
        if self.session.lock().map(|s| s.id.is_none()).unwrap_or(true) {
            return;
        }
        let mut headers = self.headers(None);
        headers.remove("content-type");
        let _ = self.backend.send(Method::DELETE, headers, None).await;
    }
}

/// The first whole SSE event of `pending` and what follows it.
fn split_event(pending: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let text = pending;
    for (i, w) in text.windows(2).enumerate() {
        if w == b"\n\n" {
            return Some((text[..i].to_vec(), text[i + 2..].to_vec()));
        }
        if i + 4 <= text.len() && &text[i..i + 4] == b"\r\n\r\n" {
            return Some((text[..i].to_vec(), text[i + 4..].to_vec()));
        }
    }
    None
}

/// The `data:` lines of one SSE event, joined.
fn event_data(event: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(event);
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    data.join("\n").into_bytes()
}
