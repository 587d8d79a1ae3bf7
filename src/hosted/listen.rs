//! Commits as they happen: each metadata transaction that records a change of a vault
//! sends `NOTIFY notevault_commits, '<vault id> <seq>'` (the seq it committed), and every instance listens on a
//! connection of its own, so a vault it serves catches up at once rather than at its
//! next request. A lost connection is made again (each second at most); what was
//! missed meanwhile is caught up by the `*` that follows a new connection.

use std::time::Duration;

use futures::{FutureExt, StreamExt};
use tokio_postgres::AsyncMessage;

use super::{runtime, Database};

/// The channel of commit notifications.
pub const CHANNEL: &str = "notevault_commits";

/// What `on` is told after a connection is (re)made: every vault may have changed.
pub const EVERY_VAULT: &str = "*";

/// A notification's payload: the vault id and, when it names one, the seq committed
/// (a payload of the vault id alone, or `*`, names none).
pub fn parse(payload: &str) -> (&str, Option<i64>) {
    match payload.split_once(' ') {
        Some((id, seq)) => (id, seq.parse().ok()),
        None => (payload, None),
    }
}

/// What a commit of `vault` that moved its seq to `seq` notifies.
pub fn payload(vault: &uuid::Uuid, seq: i64) -> String {
    format!("{vault} {seq}")
}

/// Listen until the process ends or the handle returned is aborted (an instance
/// stopped inside a longer process, as the tests run them), calling `on` with each
/// notification's payload (see [`parse`]; or [`EVERY_VAULT`]). `on` runs on the database runtime: it must
/// hand work off, not do it.
pub fn follow(
    db: &Database,
    on: impl Fn(&str) + Send + Sync + 'static,
) -> tokio::task::AbortHandle {
    let config = db.config.clone();
    let listening = runtime().spawn(async move {
        let mut connected_before = false;
        loop {
            match config.connect(super::tls()).await {
                Ok((client, mut connection)) => {
                    let (tx, mut rx) = futures::channel::mpsc::unbounded();
                    let pump = futures::stream::poll_fn(move |cx| connection.poll_message(cx))
                        .map(Ok)
                        .forward(tx)
                        .map(|_| ());
                    let pump = tokio::spawn(pump);
                    match client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
                        Ok(()) => {
                            if connected_before {
                                tracing::info!("listening for commits again");
                            }
                            connected_before = true;
                            on(EVERY_VAULT);
                            while let Some(message) = rx.next().await {
                                if let Ok(AsyncMessage::Notification(n)) = message {
                                    on(n.payload());
                                }
                            }
                            tracing::warn!(
                                "the connection listening for commits was lost; making it again"
                            );
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot listen for commits; trying again")
                        }
                    }
                    pump.abort();
                }
                Err(e) => tracing::debug!(error = %e, "cannot connect to listen for commits"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    listening.abort_handle()
}
