//! What `/mcp` knows of the handshake era's sessions beside rmcp, so that the direct path
//! (`direct.rs`) can answer a session's read tool call without rmcp's session worker: a
//! task, channels and an SSE stream for every request.
//!
//! rmcp owns the sessions (`LocalSessionManager`): it creates one at `initialize`, ends it
//! at `DELETE`, and closes one whose worker heard nothing for its keep-alive. A request
//! the direct path answers never reaches that worker, so it does not reset that timer.
//! Hence the direct path answers a session's request only when:
//! - rmcp still holds the session (asked of the manager, every time), and
//! - rmcp itself passed a message of that session to its worker (a request, a
//!   notification, the GET of its stream: [`Sessions::passed`]) less than [`WINDOW`] ago;
//!   the next request after that goes through rmcp and resets the worker's timer. The
//!   worker's keep-alive is [`IDLE`] + [`WINDOW`], so a session still lives at least
//!   [`IDLE`] after its last request, whichever path answered it, and
//! - the session never asked for log messages (`logging/setLevel`): its messages are
//!   sent by rmcp's worker, on the session's stream.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

/// How long a session lives, at least, after its last request (rmcp's default keep-alive).
pub const IDLE: Duration = Duration::from_secs(300);
/// How long after rmcp's worker last took a message of a session the direct path may
/// answer the session's requests.
pub const WINDOW: Duration = Duration::from_secs(150);
/// The worker's keep-alive: a session idles out this long after the worker's last
/// message.
const KEEP_ALIVE: Duration = IDLE.saturating_add(WINDOW);

/// The sessions rmcp holds, and what rmcp last did with each.
pub struct Sessions {
    manager: Arc<LocalSessionManager>,
    seen: Mutex<HashMap<Arc<str>, Seen>>,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    /// When rmcp last passed one of the session's messages to its worker.
    at: Instant,
    /// The session asked for log messages.
    logging: bool,
}

impl Sessions {
    /// The registry, and the session manager to give rmcp's service.
    pub fn new() -> (Self, Arc<LocalSessionManager>) {
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(KEEP_ALIVE);
        let manager = Arc::new(manager);
        let sessions = Self {
            manager: manager.clone(),
            seen: Mutex::default(),
        };
        (sessions, manager)
    }

    /// rmcp's worker took a message of session `id` (`sets_level`: a `logging/setLevel`).
    pub fn passed(&self, id: &str, sets_level: bool) {
        let now = Instant::now();
        let mut seen = self.seen.lock();
        // A session not seen for the worker's keep-alive is closed by now, unless its
        // stream kept it (a GET passed on another path); one that asked for log messages
        // is forgotten only once rmcp no longer holds it (or the manager is busy: later).
        let held = self.manager.sessions.try_read().ok();
        seen.retain(|id, s| {
            now.duration_since(s.at) < KEEP_ALIVE
                || (s.logging && held.as_ref().is_none_or(|held| held.contains_key(&**id)))
        });
        drop(held);
        seen.entry(Arc::from(id))
            .and_modify(|s| {
                s.at = now;
                s.logging |= sets_level;
            })
            .or_insert(Seen {
                at: now,
                logging: sets_level,
            });
    }

    /// Session `id` ended (`DELETE`).
    pub fn ended(&self, id: &str) {
        self.seen.lock().remove(id);
    }

    /// Whether the direct path may answer a request of session `id` now.
    pub async fn direct(&self, id: &str) -> bool {
        let fresh = self
            .seen
            .lock()
            .get(id)
            .is_some_and(|s| !s.logging && s.at.elapsed() < WINDOW);
        fresh && self.manager.sessions.read().await.contains_key(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_session_rmcp_holds_and_saw_lately_without_logging_is_direct() {
        use rmcp::transport::streamable_http_server::session::SessionManager;
        let (sessions, manager) = Sessions::new();
        let (held, _transport) = manager.create_session().await.unwrap();
        let (logs, _transport) = manager.create_session().await.unwrap();
        // Not yet seen passing through rmcp.
        assert!(!sessions.direct(&held).await);
        sessions.passed(&held, false);
        sessions.passed(&logs, true);
        sessions.passed("gone", false);
        assert!(sessions.direct(&held).await);
        // `logs` asked for log messages; rmcp does not hold `gone`.
        assert!(!sessions.direct(&logs).await);
        assert!(!sessions.direct("gone").await);
        // Seen too long ago: the next request goes to rmcp, which resets its idle timer.
        let long_ago = Instant::now().checked_sub(WINDOW).unwrap();
        sessions.seen.lock().get_mut(&*held).unwrap().at = long_ago;
        assert!(!sessions.direct(&held).await);
        sessions.passed(&held, false);
        assert!(sessions.direct(&held).await);
        // Logging once asked for stays, also past the keep-alive while rmcp holds the
        // session (its stream may keep it).
        sessions.passed(&logs, false);
        assert!(!sessions.direct(&logs).await);
        let past = Instant::now().checked_sub(KEEP_ALIVE).unwrap();
        sessions.seen.lock().get_mut(&*logs).unwrap().at = past;
        sessions.seen.lock().get_mut("gone").unwrap().at = past;
        sessions.passed(&held, false);
        assert!(sessions.seen.lock()[&*logs].logging);
        assert!(!sessions.seen.lock().contains_key("gone"));
        sessions.ended(&held);
        assert!(!sessions.direct(&held).await);
    }
}
