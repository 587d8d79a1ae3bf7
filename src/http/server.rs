//! The HTTP/1.1 server under the router: hyper's connection builder with an accept loop of
//! our own, so that a connection has bounds the router cannot give it.
//!
//! - A request head must arrive within `header_read_timeout` (hyper's timer, which starts
//!   when hyper waits for a head: also while a kept-alive connection waits for its next
//!   request). A head cut short is dropped without an answer.
//! - A connection on which no byte moves either way for `idle_timeout` is closed ([`Conn`]):
//!   a body that stalls, a client that stops reading its answer.
//! - At most `max_connections` connections are served at once. Past that a new connection
//!   is accepted and answered 503 `SERVER_BUSY` with `Retry-After` and closed, rather than
//!   left in the listen backlog, where a client waits on its own timeouts with no word of
//!   why. Those answers are bounded too ([`MAX_REFUSALS`] at once, each within
//!   [`REFUSAL_DEADLINE`]); past that a connection is closed at once.
//! - What hyper's parser refuses before a request exists (a request target over 64 KiB:
//!   414; a head over [`MAX_HEAD_BYTES`] or over 100 headers: 431; bytes that are not
//!   HTTP: 400) hyper answers itself, with an empty body and no hook. [`Conn`] recognises
//!   those answers on their way out (a bodiless 400, 414 or 431 whose only headers are
//!   `content-length: 0`, `date` and `connection`, which the router never sends) and sends
//!   the error envelope in their place.
//! - With TLS (`tls_cert`, `tls_key`), each connection's handshake runs in its own task,
//!   after it took a connection slot, within `header_read_timeout`; a failed one is
//!   logged at debug and closed. [`Conn`] then wraps the TLS stream, so its timeouts and
//!   envelopes see the plaintext, and every answer carries `Strict-Transport-Security`
//!   ([`mark`], the one place it is set).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::api::error::{ApiError, DOCS_URL, REQUEST_ID};
use crate::config::Config;
use crate::error::{Error, Reason};

/// The largest request head (request line and headers) hyper reads; past it, 431.
pub const MAX_HEAD_BYTES: usize = 128 * 1024;
/// Over-the-cap connections being answered 503 at once; past it they are closed at once.
pub const MAX_REFUSALS: usize = 64;
/// The time a refused connection gets to send its request and read the 503.
pub const REFUSAL_DEADLINE: Duration = Duration::from_secs(2);

/// The connection bounds, from the config.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl From<&Config> for Limits {
    fn from(config: &Config) -> Self {
        Self {
            header_read_timeout: config.header_read_timeout,
            idle_timeout: config.idle_timeout,
            max_connections: fit_to_open_files(config.max_connections.max(1)),
        }
    }
}

/// File descriptors kept for the daemon's own files (index segments, SQLite, history,
/// the watcher) and the refusals.
const RESERVED_FDS: u64 = 256;

/// `max` lowered to what the open-file limit allows: past it `accept` would fail with
/// EMFILE and a client would wait in the backlog instead of getting a clear 503.
fn fit_to_open_files(max: usize) -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given, which lives for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0
        || limit.rlim_cur == libc::RLIM_INFINITY
    {
        return max;
    }
    let fits =
        usize::try_from(limit.rlim_cur.saturating_sub(RESERVED_FDS).max(16)).unwrap_or(usize::MAX);
    if fits < max {
        tracing::warn!(
            max_connections = max,
            open_file_limit = limit.rlim_cur,
            serving = fits,
            "max_connections lowered to fit the open-file limit (raise it with ulimit -n or LimitNOFILE)"
        );
        return fits;
    }
    max
}

/// Serve `app` on `listener` until `shutdown` resolves, then stop accepting and wait for
/// the connections being served to finish their requests. With `tls`, every connection
/// is HTTPS: its handshake runs in the connection's own task (the accept loop never waits
/// on a client), within `header_read_timeout`, and holds a connection slot; a handshake
/// that fails (plain HTTP sent to the TLS port, a client that distrusts the certificate,
/// silence) is logged at debug and the connection closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    docs_url: Arc<str>,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let mut refuse_http = http.clone();
    refuse_http
        .keep_alive(false)
        .header_read_timeout(REFUSAL_DEADLINE);
    let graceful = GracefulShutdown::new();
    // Ends the handshakes under way at shutdown (a connection not yet served has no
    // request to finish).
    let stopping = CancellationToken::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS));
    let secure = tls.is_some();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
        };
        // Streamed answers (the SSE of an MCP session) are several small writes: without
        // TCP_NODELAY each waits for the client's delayed ACK (~40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let watcher = graceful.watcher();
        let stopping = stopping.clone();
        let tls = tls.clone();
        let docs_url = docs_url.clone();
        if let Ok(slot) = slots.clone().try_acquire_owned() {
            let app = app.clone();
            let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                let answer = app.clone().oneshot(req);
                async move {
                    let mut response = answer.await?;
                    mark(&mut response, secure);
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            let http = http.clone();
            tokio::spawn(async move {
                let served = match tls {
                    None => {
                        let io = TokioIo::new(Conn::new(tcp, limits.idle_timeout, docs_url, false));
                        watcher.watch(http.serve_connection(io, service)).await
                    }
                    Some(tls) => {
                        match handshake(&tls, tcp, peer, limits.header_read_timeout, &stopping)
                            .await
                        {
                            Some(stream) => {
                                let io = TokioIo::new(Conn::new(
                                    stream,
                                    limits.idle_timeout,
                                    docs_url,
                                    true,
                                ));
                                watcher.watch(http.serve_connection(io, service)).await
                            }
                            None => Ok(()),
                        }
                    }
                };
                if let Err(e) = served {
                    tracing::debug!(peer = %peer, error = %e, "connection ended with an error");
                }
                drop(slot);
            });
        } else if let Ok(refusing) = refusals.clone().try_acquire_owned() {
            tracing::warn!(
                peer = %peer,
                max_connections = limits.max_connections,
                "connection refused: too many connections"
            );
            let busy_docs_url = docs_url.clone();
            let service = hyper::service::service_fn(move |_req: hyper::Request<Incoming>| {
                let response = busy(&busy_docs_url, limits.max_connections, secure);
                async move { Ok::<_, std::convert::Infallible>(response) }
            });
            let refuse_http = refuse_http.clone();
            let refuse = async move {
                let idle = limits.idle_timeout;
                let _ = match tls {
                    None => {
                        let io = TokioIo::new(Conn::new(tcp, idle, docs_url, false));
                        watcher
                            .watch(refuse_http.serve_connection(io, service))
                            .await
                    }
                    Some(tls) => {
                        match handshake(&tls, tcp, peer, REFUSAL_DEADLINE, &stopping).await {
                            Some(stream) => {
                                let io = TokioIo::new(Conn::new(stream, idle, docs_url, true));
                                watcher
                                    .watch(refuse_http.serve_connection(io, service))
                                    .await
                            }
                            None => Ok(()),
                        }
                    }
                };
            };
            tokio::spawn(async move {
                let _ = tokio::time::timeout(REFUSAL_DEADLINE, refuse).await;
                drop(refusing);
            });
        } else {
            tracing::debug!(peer = %peer, "connection closed: too many connections and refusals");
        }
    }
    drop(listener);
    stopping.cancel();
    graceful.shutdown().await;
    Ok(())
}

/// The TLS handshake of a new connection, within `within`; `None` (logged at debug) when
/// it fails, takes too long, or the server is shutting down.
async fn handshake(
    tls: &TlsAcceptor,
    tcp: TcpStream,
    peer: std::net::SocketAddr,
    within: Duration,
    stopping: &CancellationToken,
) -> Option<TlsStream<TcpStream>> {
    let accepted = tokio::select! {
        () = stopping.cancelled() => return None,
        accepted = tokio::time::timeout(within, tls.accept(tcp)) => accepted,
    };
    match accepted {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(e)) => {
            tracing::debug!(peer = %peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(peer = %peer, within_ms = within.as_millis() as u64, "TLS handshake timed out");
            None
        }
    }
}

/// What every answer carries when the server speaks TLS, whoever made it (the router,
/// the 503 of a refused connection, the envelope in place of hyper's parse errors):
/// `Strict-Transport-Security`. Over plain HTTP nothing is added (RFC 6797 ignores it
/// there, and a loopback daemon must not pin a name to HTTPS).
fn mark(response: &mut Response, tls: bool) {
    if tls {
        response.headers_mut().insert(
            axum::http::header::STRICT_TRANSPORT_SECURITY,
            axum::http::HeaderValue::from_static(super::tls::HSTS),
        );
    }
}

/// A failed accept: a connection that went away is nothing; anything else (out of file
/// descriptors, say) is logged and the loop pauses briefly instead of spinning.
async fn accept_failed(e: io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::warn!(error = %e, "accept failed");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// The error envelope of `err` as the router would send it, with a fresh request id:
/// for answers given outside the router (its middleware sets the id there).
fn envelope_response(err: Error, docs_url: &Arc<str>, tls: bool) -> Response {
    let id = uuid::Uuid::now_v7().simple().to_string();
    let mut response = REQUEST_ID.sync_scope(id.clone(), || {
        DOCS_URL.sync_scope(docs_url.clone(), || ApiError(err).into_response())
    });
    if let Ok(v) = axum::http::HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", v);
    }
    mark(&mut response, tls);
    response
}

fn busy(docs_url: &Arc<str>, max: usize, tls: bool) -> Response {
    envelope_response(
        Error::new(
            Reason::SERVER_BUSY,
            format!("the server is serving its limit of {max} connections"),
        )
        .with_retry_after(1)
        .with_meta("max_connections", max.to_string()),
        docs_url,
        tls,
    )
}

/// A served connection (TCP, or TLS over TCP: `S`): closes itself after `idle` without a
/// byte either way, and puts the error envelope in place of hyper's own bodiless
/// parse-error answers.
pub struct Conn<S = TcpStream> {
    io: S,
    /// The connection is TLS: answers made here carry HSTS too.
    tls: bool,
    idle: Duration,
    last_progress: Instant,
    timer: Pin<Box<Sleep>>,
    docs_url: Arc<str>,
    /// The envelope being written in place of hyper's answer, and how much of it is out.
    replacement: Option<(Vec<u8>, usize)>,
    /// The idle timer fired: nothing more is read or written (an answer to a request cut
    /// short by it would be a lie about that request).
    timed_out: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    pub fn new(io: S, idle: Duration, docs_url: Arc<str>, tls: bool) -> Self {
        let now = Instant::now();
        Self {
            io,
            tls,
            idle,
            last_progress: now,
            timer: Box::pin(tokio::time::sleep_until(now + idle)),
            docs_url,
            replacement: None,
            timed_out: false,
        }
    }

    /// A write to the socket went through: progress resets the idle clock; a write that
    /// is pending is refused once nothing moved for `idle`.
    fn after_write(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match written {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    self.last_progress = Instant::now();
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.poll_idle(cx).map(Err),
        }
    }

    /// Ready with an error once nothing moved for `idle`; call when the socket is pending
    /// (the timer's waker then wakes the connection's task).
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        if self.timed_out {
            return Poll::Ready(idle_error());
        }
        loop {
            let deadline = self.last_progress + self.idle;
            if self.timer.deadline() != deadline {
                self.timer.as_mut().reset(deadline);
            }
            ready!(self.timer.as_mut().poll(cx));
            if self.last_progress + self.idle <= Instant::now() {
                self.timed_out = true;
                return Poll::Ready(idle_error());
            }
        }
    }

    /// Write the replacement out; `Ready` once all of it is.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, written)) = &mut self.replacement {
            if *written == bytes.len() {
                return Poll::Ready(Ok(()));
            }
            let n = match Pin::new(&mut self.io).poll_write(cx, &bytes[*written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    return match self.poll_idle(cx) {
                        Poll::Ready(e) => Poll::Ready(Err(e)),
                        Poll::Pending => Poll::Pending,
                    }
                }
            };
            *written += n;
            self.last_progress = Instant::now();
        }
        Poll::Ready(Ok(()))
    }

    /// `buf` is hyper's automatic answer to a request it could not parse: start writing
    /// the envelope in its place.
    fn replace(&mut self, buf: &[u8]) -> bool {
        if self.replacement.is_some() {
            return false;
        }
        let Some(reason) = automatic_answer(buf) else {
            return false;
        };
        let message = match reason {
            Reason::URI_TOO_LONG => "the request target is longer than 65,534 bytes".to_string(),
            Reason::HEADERS_TOO_LARGE => format!(
                "the request head is larger than {MAX_HEAD_BYTES} bytes or has more than 100 headers"
            ),
            _ => "the request is not well-formed HTTP/1.1".to_string(),
        };
        let response = envelope_response(Error::new(reason, message), &self.docs_url, self.tls);
        self.replacement = Some((raw_response(response), 0));
        true
    }
}

fn idle_error() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "connection idle for too long")
}

/// The reason of hyper's own answer to an unparsable request, if `buf` is one: a head
/// alone, status 400, 414 or 431, with no header but `content-length: 0`, `date` and
/// `connection`. Every answer of the router has a body and a `content-type`.
fn automatic_answer(buf: &[u8]) -> Option<Reason> {
    let head = std::str::from_utf8(buf).ok()?.strip_suffix("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.strip_prefix("HTTP/1.1 ")?;
    let reason = match status.get(..4)? {
        "400 " => Reason::MALFORMED_REQUEST,
        "414 " => Reason::URI_TOO_LONG,
        "431 " => Reason::HEADERS_TOO_LARGE,
        _ => return None,
    };
    let mut empty = false;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        match name.to_ascii_lowercase().as_str() {
            "content-length" => empty = value.trim() == "0",
            "date" | "connection" => {}
            _ => return None,
        }
    }
    empty.then_some(reason)
}

/// `response` (a small envelope, its body already whole) as HTTP/1.1 bytes that close the
/// connection.
fn raw_response(response: Response) -> Vec<u8> {
    use http_body_util::BodyExt;
    let (parts, body) = response.into_parts();
    // The envelope's body is one in-memory buffer: it is ready at once.
    let body = futures::FutureExt::now_or_never(body.collect())
        .and_then(Result::ok)
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let mut out = format!(
        "HTTP/1.1 {} {}\r\n",
        parts.status.as_u16(),
        parts.status.canonical_reason().unwrap_or("")
    )
    .into_bytes();
    for (name, value) in &parts.headers {
        if name == axum::http::header::CONTENT_LENGTH || name == axum::http::header::CONNECTION {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(
        format!(
            "content-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    out.extend_from_slice(&body);
    out
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Conn<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.timed_out {
            return Poll::Ready(Err(idle_error()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.last_progress = Instant::now();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.poll_idle(cx) {
                Poll::Ready(e) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Conn<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.timed_out {
            return Poll::Ready(Err(idle_error()));
        }
        // After the replacement hyper closes the connection: it writes nothing more.
        if this.replacement.is_some() || this.replace(buf) {
            // hyper's answer counts as written once the envelope is.
            ready!(this.poll_replacement(cx))?;
            return Poll::Ready(Ok(buf.len()));
        }
        let written = Pin::new(&mut this.io).poll_write(cx, buf);
        this.after_write(cx, written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.timed_out {
            return Poll::Ready(Err(idle_error()));
        }
        // hyper's automatic answer is a head alone: one buffer.
        let mut nonempty = bufs.iter().filter(|b| !b.is_empty());
        if let (Some(only), None) = (nonempty.next(), nonempty.next()) {
            if this.replacement.is_some() || automatic_answer(only).is_some() {
                return Pin::new(this).poll_write(cx, only);
            }
        }
        let written = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.after_write(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_bodiless_parse_error_answers_are_replaced() {
        let date = "date: Mon, 23 Nov 2026 14:08:31 GMT";
        for (head, reason) in [
            ("HTTP/1.1 414 URI Too Long", Some(Reason::URI_TOO_LONG)),
            (
                "HTTP/1.1 431 Request Header Fields Too Large",
                Some(Reason::HEADERS_TOO_LARGE),
            ),
            ("HTTP/1.1 400 Bad Request", Some(Reason::MALFORMED_REQUEST)),
            ("HTTP/1.1 404 Not Found", None),
        ] {
            let answer = format!("{head}\r\ncontent-length: 0\r\n{date}\r\n\r\n");
            assert_eq!(automatic_answer(answer.as_bytes()), reason, "{head}");
        }
        for not_hypers in [
            // A body, a content type, or any other header: the router's answer.
            format!("HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n{date}\r\n\r\n"),
            format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: 0\r\n{date}\r\n\r\n"
            ),
            format!("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n{date}\r\n\r\n{{}}"),
            "HTTP/1.1 400 Bad Request\r\nx-request-id: 1\r\ncontent-length: 0\r\n\r\n".into(),
        ] {
            assert_eq!(automatic_answer(not_hypers.as_bytes()), None, "{not_hypers}");
        }
    }
}
