//! MCP logging: what a client that opts in hears about its tool calls.
//!
//! A handshake-era client opts in with `logging/setLevel` (kept per session); a
//! 2026-07-28 request opts in with `io.modelcontextprotocol/logLevel` in its `_meta`.
//! Nothing is sent to a client that did not. After a tool call the server sends, at or
//! above that level: `debug` (the tool, how long it took, whether it failed), `warning`
//! when files of the vault are left out of the answer (`coverage.excluded_count`), and
//! `error` when the call failed on the server's side (a 5xx reason). The feature is
//! deprecated by SEP-2577 in 2026-07-28, hence the `allow` below: it stays for the
//! revisions that have it.
#![allow(deprecated)]

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::{CallToolResult, LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::{json, Value};

/// The level a session set with `logging/setLevel`; `None` until it does.
#[derive(Debug, Clone, Default)]
pub struct SessionLevel(Arc<Mutex<Option<LoggingLevel>>>);

impl SessionLevel {
    pub fn set(&self, level: LoggingLevel) {
        *self.0.lock() = Some(level);
    }

    /// The level this request opted in to: its own `_meta` first, else the session's.
    pub fn of(&self, context: &RequestContext<RoleServer>) -> Option<LoggingLevel> {
        context.meta.log_level().or(*self.0.lock())
    }
}

fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// What to tell a client about one tool call.
pub fn messages(
    tool: &str,
    result: &CallToolResult,
    elapsed: Duration,
) -> Vec<(LoggingLevel, Value)> {
    let failed = result.is_error == Some(true);
    let structured = result.structured_content.as_ref();
    let mut out = vec![(
        LoggingLevel::Debug,
        json!({
            "tool": tool,
            "elapsed_ms": (elapsed.as_secs_f64() * 1e6).round() / 1e3,
            "is_error": failed,
        }),
    )];
    let excluded = structured
        .and_then(|s| s.pointer("/coverage/excluded_count"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if excluded > 0 {
        out.push((
            LoggingLevel::Warning,
            json!({
                "tool": tool,
                "message": format!("{excluded} file(s) of the vault are left out of this answer; coverage.excluded says which and why"),
                "excluded_count": excluded,
            }),
        ));
    }
    let server_side = structured
        .and_then(|s| s.get("statusCode"))
        .and_then(Value::as_u64)
        .is_some_and(|status| status >= 500);
    if failed && server_side {
        let s = structured.cloned().unwrap_or_default();
        out.push((
            LoggingLevel::Error,
            json!({
                "tool": tool,
                "reason": s["reason"],
                "message": s["message"],
                "requestId": s["requestId"],
            }),
        ));
    }
    out
}

/// Send the `messages` at or above `min` to the caller of `context` (on the stream of
/// its request).
pub async fn send(
    context: &RequestContext<RoleServer>,
    min: LoggingLevel,
    messages: Vec<(LoggingLevel, Value)>,
) {
    for (level, data) in messages {
        if severity(level) < severity(min) {
            continue;
        }
        let param = LoggingMessageNotificationParam::new(level, data).with_logger("notevault");
        if let Err(e) = context.peer.notify_logging_message(param).await {
            tracing::debug!(error = %e, "a log message to the MCP client was not delivered");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_told_at_their_severity() {
        let ok = CallToolResult::structured(json!({"coverage": {"excluded_count": 2}}));
        let levels: Vec<u8> = messages("list_notes", &ok, Duration::from_millis(3))
            .into_iter()
            .map(|(l, _)| severity(l))
            .collect();
        assert_eq!(levels, [0, 3]);
        let failed = CallToolResult::structured_error(
            json!({"statusCode": 500, "reason": "INTERNAL", "message": "boom"}),
        );
        let out = messages("read_note", &failed, Duration::ZERO);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].1["reason"], "INTERNAL");
        let not_found = CallToolResult::structured_error(json!({"statusCode": 404}));
        assert_eq!(messages("read_note", &not_found, Duration::ZERO).len(), 1);
    }
}
