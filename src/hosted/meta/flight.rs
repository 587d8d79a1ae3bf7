//! A change's transaction sent as one flight on one connection: BEGIN, the seq claim and
//! every row's statement go out together, in the order added, and COMMIT (or ROLLBACK)
//! follows once their answers are in. Two round trips however many rows, where
//! awaiting each statement took one apiece: PostgreSQL runs a connection's statements
//! in the order they arrive, each only after the one before it.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use futures::future::{try_join_all, MaybeDone};
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::error::{Error, Reason, Result};
use crate::hosted::db_error;

/// One bound parameter: a row's field by reference, or a value made for the statement.
pub(super) type Param<'a> = Box<dyn ToSql + Sync + 'a>;

/// A statement's parameters, each boxed ([`Param`]).
macro_rules! params {
    ($($p:expr),* $(,)?) => {
        vec![$(Box::new($p) as $crate::hosted::meta::flight::Param<'_>),*]
    };
}
pub(super) use params;

/// How a statement's failure is told (most: [`db_error`]).
type Told = fn(tokio_postgres::Error) -> Error;

struct Step<'a> {
    sql: &'static str,
    params: Vec<Param<'a>>,
    told: Told,
}

/// Moves the vault's `committed_seq` from the seq before the batch's first to its last,
/// and tells every listening instance (when the transaction commits): one row answered
/// when it moved, none when another instance recorded a change of this vault meanwhile
/// or the vault is gone. The counter's row lock queues writers of one vault.
const CLAIM: &str = "WITH moved AS (
       UPDATE vault_counters SET committed_seq = $2
       WHERE vault_id = $1 AND committed_seq = $3 RETURNING vault_id)
     SELECT pg_notify($4, $5) FROM moved";

/// The statements of one transaction, sent by [`Flight::commit`].
pub(super) struct Flight<'a> {
    vault: Uuid,
    /// Whether the first step is the seq claim.
    claims: bool,
    steps: Vec<Step<'a>>,
}

impl<'a> Flight<'a> {
    /// A transaction of `vault` that claims the seqs `span` (first and last) before its
    /// rows are written; `None`: a batch without seqs.
    pub fn claiming(vault: Uuid, span: Option<(i64, i64)>) -> Self {
        let mut flight = Self {
            vault,
            claims: span.is_some(),
            steps: Vec::new(),
        };
        if let Some((first, last)) = span {
            flight.push(
                CLAIM,
                params![
                    vault,
                    last,
                    first - 1,
                    crate::hosted::listen::CHANNEL,
                    crate::hosted::listen::payload(&vault, last)
                ],
            );
        }
        flight
    }

    /// Add one statement.
    pub fn push(&mut self, sql: &'static str, params: Vec<Param<'a>>) {
        self.push_told(sql, params, db_error);
    }

    /// Add one statement whose failure `told` tells.
    pub fn push_told(&mut self, sql: &'static str, params: Vec<Param<'a>>, told: Told) {
        self.steps.push(Step { sql, params, told });
    }

    /// Add `sql` once for each of `rows`, bound by `params`.
    pub fn each<T>(
        &mut self,
        sql: &'static str,
        rows: impl IntoIterator<Item = T>,
        params: impl Fn(T) -> Vec<Param<'a>>,
    ) {
        for row in rows {
            self.push(sql, params(row));
        }
    }

    /// Send it on `client`, which it leaves idle: COMMIT when the claim moved the seq and
    /// every statement succeeded, else ROLLBACK and the reason: `VAULT_FORBIDDEN` for a
    /// vault deleted meanwhile, `SERVER_BUSY` for seqs another instance took, else the
    /// first statement's failure that is not "the transaction is aborted". A connection
    /// whose transaction did not end as asked (BEGIN, COMMIT or ROLLBACK unanswered or
    /// failed, or a panic in between) is closed, never handed out again.
    pub async fn commit(self, client: deadpool_postgres::Client) -> Result<()> {
        let mut open = Unsettled(Some(client));
        let client = open.0.as_ref().expect("just set");
        // Prepared first (once per connection: the pool's cache), so no statement waits
        // for its preparation inside the flight and all go out in the order added.
        let mut sqls: Vec<&str> = self.steps.iter().map(|s| s.sql).collect();
        sqls.sort_unstable();
        sqls.dedup();
        let prepared = try_join_all(sqls.iter().map(|sql| client.prepare_cached(sql)))
            .await
            .map_err(db_error)?;
        let statements = self.steps.iter().map(|step| {
            let stmt = &prepared[sqls.binary_search(&step.sql).expect("prepared above")];
            async move {
                let params: Vec<&(dyn ToSql + Sync)> =
                    step.params.iter().map(|p| p.as_ref() as _).collect();
                // Rows, not `execute`'s count: the claim's one row says it moved.
                client.query(stmt, &params).await.map(|rows| rows.len())
            }
        });
        let (begun, answers) = futures::join!(client.batch_execute("BEGIN"), in_order(statements));
        if let Err(e) = begun {
            // The statements may have run outside a transaction: say so, and the
            // connection is closed with whatever state it is in.
            if answers.iter().any(std::result::Result::is_ok) {
                tracing::error!(error = %e, "BEGIN failed while its statements ran");
            }
            return Err(db_error(e));
        }
        // Answered, and no row moved (a claim that failed is one of the failures).
        let refused = self.claims && matches!(answers.first(), Some(Ok(n)) if *n != 1);
        let failed: Vec<Error> = answers
            .into_iter()
            .zip(&self.steps)
            .filter_map(|(answer, step)| answer.err().map(step.told))
            .collect();
        if !refused && failed.is_empty() {
            client.batch_execute("COMMIT").await.map_err(db_error)?;
            open.settled();
            return Ok(());
        }
        client.batch_execute("ROLLBACK").await.map_err(db_error)?;
        // A claim that did not move explains the rows' failures (their seqs were taken).
        if !refused {
            open.settled();
            return Err(first_cause(failed));
        }
        let counter = client
            .query_opt(
                "SELECT 1 FROM vault_counters WHERE vault_id = $1",
                &[&self.vault],
            )
            .await
            .map_err(db_error)?;
        open.settled();
        Err(match counter {
            None => Error::new(
                Reason::VAULT_FORBIDDEN,
                "this vault was deleted; nothing was written",
            ),
            Some(_) => Error::new(
                Reason::SERVER_BUSY,
                "another instance recorded a change of this vault meanwhile; nothing was written",
            )
            .with_retry_after(1),
        })
    }
}

/// A flight's connection until its transaction has ended: dropped before that (an error
/// of BEGIN, COMMIT or ROLLBACK, a panic), the connection is closed rather than put back
/// in the pool inside a transaction.
struct Unsettled(Option<deadpool_postgres::Client>);

impl Unsettled {
    /// The transaction ended: the connection goes back to the pool.
    fn settled(&mut self) {
        self.0.take();
    }
}

impl Drop for Unsettled {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

/// Every future's output, each polled first in the order given (so each statement is
/// sent in that order: tokio-postgres sends a request when its future is first polled).
async fn in_order<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut all: Vec<Pin<Box<MaybeDone<F>>>> = futures
        .into_iter()
        .map(|f| Box::pin(futures::future::maybe_done(f)))
        .collect();
    futures::future::poll_fn(|cx| {
        let mut done = true;
        for f in &mut all {
            done &= f.as_mut().poll(cx).is_ready();
        }
        if done {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    all.iter_mut()
        .map(|f| f.as_mut().take_output().expect("each future is done"))
        .collect()
}

/// Once a statement of a transaction fails, the server answers each one after it
/// "current transaction is aborted" (25P02): the error to answer is the one that is not
/// that.
pub(super) fn first_cause(mut errors: Vec<Error>) -> Error {
    let aborted = |e: &Error| {
        std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<tokio_postgres::Error>())
            .and_then(tokio_postgres::Error::code)
            == Some(&tokio_postgres::error::SqlState::IN_FAILED_SQL_TRANSACTION)
    };
    let i = errors.iter().position(|e| !aborted(e)).unwrap_or(0);
    errors.swap_remove(i)
}
