//! Hosted mode's PostgreSQL: the connection pool, its errors as the one `Error` type, the
//! schema ([`schema`]), the vault registry ([`registry`]) and one vault's metadata
//! ([`meta::PgMeta`], the storage seam's metadata traits).
//!
//! Infrastructure like `meta`: it names SQL tables and knows no request, route or
//! surface. Nothing here waits on a dead server for long: taking a connection is bounded
//! by [`Options::acquire_timeout`] (the TCP connect, TLS and start-up included), and a
//! database that cannot be reached answers `STORAGE_UNAVAILABLE` with `Retry-After`.

pub mod collect;
pub mod export;
pub mod fence;
pub mod files;
pub mod listen;
pub mod lookup;
pub mod meta;
pub mod presigned;
pub mod registry;
pub mod revisions;
pub mod schema;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::error::SqlState;

use crate::error::{Error, Reason, Result};

/// Seconds a client is told to wait before it retries against a database it could not
/// reach (`Retry-After`).
pub const RETRY_AFTER_SECONDS: u64 = 2;

/// How the pool behaves.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The longest a caller waits for a connection: a free one from the pool, or a new
    /// one made (connect, TLS, authentication).
    pub acquire_timeout: Duration,
    /// Connections kept open at most.
    pub max_connections: usize,
    /// The longest one statement runs, or waits for a lock (another instance's
    /// transaction on the vault's seq), before the server cancels it; also the longest a
    /// transaction may sit idle holding its locks. Set per connection unless the URL
    /// sets `options` itself.
    pub statement_timeout: Duration,
    /// The pool's name in the metrics (`pool` label): `stores` or `keys`.
    pub name: &'static str,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            acquire_timeout: Duration::from_secs(2),
            max_connections: 16,
            statement_timeout: Duration::from_secs(5),
            name: "stores",
        }
    }
}

/// A pool of connections to one PostgreSQL database. Cheap to clone.
#[derive(Clone)]
pub struct Database {
    pool: Pool,
    options: Options,
    /// What the pool connects with, for a connection of its own (`listen`).
    config: tokio_postgres::Config,
}

/// A connection taken from the pool; back to the pool when dropped.
pub type Client = deadpool_postgres::Object;

impl Database {
    /// A pool for `url` (`postgres://user:password@host:port/dbname?sslmode=…`, or the
    /// `key=value` form). Opens nothing yet: the first [`Database::client`] connects.
    pub fn open(url: &str, options: Options) -> Result<Self> {
        let mut config = tokio_postgres::Config::from_str(url).map_err(|e| {
            // The driver's message names the part it could not read, never the URL,
            // which may hold a password.
            Error::new(
                Reason::STORAGE_UNAVAILABLE,
                format!("database URL is invalid ({e}); expected postgres://USER:PASSWORD@HOST:PORT/DATABASE"),
            )
            .with_cause(e)
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.acquire_timeout);
        }
        // A peer gone without a word (a host down, a cut network) is noticed by keepalives.
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(30));
        // Nothing waits on the server without end: a statement stuck behind a lock, or a
        // transaction left open by an instance that froze, is cancelled (and answered
        // `STORAGE_UNAVAILABLE`, retried).
        if config.get_options().is_none() {
            let ms = options.statement_timeout.as_millis().max(1);
            config.options(format!(
                "-c statement_timeout={ms} -c idle_in_transaction_session_timeout={ms}"
            ));
        }
        if config.get_application_name().is_none() {
            config.application_name("notevault");
        }
        let manager = Manager::from_config(
            config.clone(),
            tls(),
            ManagerConfig {
                // A connection whose socket closed (a restart) is dropped, not handed out.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.acquire_timeout))
            .create_timeout(Some(options.acquire_timeout))
            .recycle_timeout(Some(options.acquire_timeout))
            .build()
            .map_err(|e| Error::internal(format!("database pool: {e}")))?;
        Ok(Self {
            pool,
            options,
            config,
        })
    }

    /// A connection, within [`Options::acquire_timeout`] or `STORAGE_UNAVAILABLE`.
    pub async fn client(&self) -> Result<Client> {
        let limit = self.options.acquire_timeout;
        let asked = std::time::Instant::now();
        let got = tokio::time::timeout(limit, self.pool.get()).await;
        crate::telemetry::pool_wait(self.options.name, asked.elapsed());
        match got {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(pool_error(e, limit)),
            Err(_) => Err(unreachable_after(limit)),
        }
    }

    /// Set the pool's gauges (connections in use and idle, callers waiting) for a scrape.
    pub fn sample_pool(&self) {
        let status = self.pool.status();
        crate::telemetry::set_pool(
            self.options.name,
            status.size.saturating_sub(status.available),
            status.available,
            status.waiting,
        );
    }
}

/// Run `work` to its end from synchronous code (the storage seam's traits are
/// synchronous: the pipeline runs on blocking threads). The futures run on hosted mode's
/// own runtime, entered here, so a pool's connection tasks live where no request blocks
/// them; this thread only waits. Safe from any thread, a runtime's worker included
/// (which it blocks for the call, as a SQLite call would).
pub fn block_on<F: std::future::Future>(work: F) -> F::Output {
    let _entered = runtime().enter();
    futures::executor::block_on(work)
}

/// The runtime of every database connection of a serving process.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("notevault-db")
            .enable_all()
            .build()
            .expect("a runtime for the database connections")
    })
}

/// rustls with the web PKI roots: `sslmode=prefer` (the default) and `require` work
/// against a server with a public certificate; a server without TLS is reached in the
/// clear unless the URL says `sslmode=require`.
fn tls() -> tokio_postgres_rustls::MakeRustlsConnect {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_postgres_rustls::MakeRustlsConnect::new(config)
}

fn unreachable_after(limit: Duration) -> Error {
    Error::new(
        Reason::STORAGE_UNAVAILABLE,
        format!(
            "database storage did not answer within {} ms; check that PostgreSQL is running and reachable",
            limit.as_millis()
        ),
    )
    .with_retry_after(RETRY_AFTER_SECONDS)
}

fn pool_error(err: deadpool_postgres::PoolError, limit: Duration) -> Error {
    use deadpool_postgres::PoolError;
    match err {
        PoolError::Backend(e) => db_error(e),
        PoolError::Timeout(_) => unreachable_after(limit),
        other => Error::new(
            Reason::STORAGE_UNAVAILABLE,
            format!("database storage: {other}"),
        )
        .with_retry_after(RETRY_AFTER_SECONDS),
    }
}

/// A driver error as the one `Error`: a server that cannot be reached, is starting,
/// stopping, read-only or full of connections, or a statement it cancelled at
/// [`Options::statement_timeout`], is `STORAGE_UNAVAILABLE` with `Retry-After`; a
/// refused login or a missing database is `STORAGE_UNAVAILABLE` too (storage not
/// configured), without; anything else is a bug here (`INTERNAL`).
pub fn db_error(err: tokio_postgres::Error) -> Error {
    let Some(db) = err.as_db_error() else {
        // No answer from the server: IO, TLS, a closed connection, a timeout.
        // The driver's message names the step ("error connecting to server"), its
        // source the cause ("Connection refused").
        let cause = std::error::Error::source(&err)
            .map(|c| format!(": {c}"))
            .unwrap_or_default();
        let message = format!(
            "database storage is unreachable: {err}{cause}; check that PostgreSQL is running and reachable"
        );
        return Error::new(Reason::STORAGE_UNAVAILABLE, message)
            .with_retry_after(RETRY_AFTER_SECONDS)
            .with_cause(err);
    };
    let code = db.code().clone();
    let message = format!("database storage: {} ({})", db.message(), code.code());
    let retry = code.code().starts_with("08") // connection exception
        || code.code().starts_with("57P") // shutting down, cannot connect now
        || code.code().starts_with("53") // too many connections, out of memory or disk
        || code == SqlState::READ_ONLY_SQL_TRANSACTION
        || code == SqlState::QUERY_CANCELED // statement_timeout
        || code == SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT
        || code == SqlState::T_R_SERIALIZATION_FAILURE
        || code == SqlState::T_R_DEADLOCK_DETECTED;
    let configured = code.code().starts_with("28") // authentication
        || code == SqlState::INVALID_CATALOG_NAME; // no such database
    let err_out = if retry {
        Error::new(Reason::STORAGE_UNAVAILABLE, message).with_retry_after(RETRY_AFTER_SECONDS)
    } else if configured {
        Error::new(Reason::STORAGE_UNAVAILABLE, message)
    } else {
        Error::new(Reason::INTERNAL, message)
    };
    err_out.with_cause(err)
}

/// Whether `err` is the violation of a unique constraint (a name taken).
pub fn is_unique_violation(err: &tokio_postgres::Error) -> bool {
    err.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_url_is_refused_without_echoing_it() {
        let err = Database::open("postgres://u:hunter2@[::1", Options::default())
            .err()
            .expect("refused");
        assert_eq!(err.reason, Reason::STORAGE_UNAVAILABLE);
        assert!(!err.message.contains("hunter2"), "{}", err.message);
        assert!(err.retry_after.is_none());
    }

    #[test]
    fn block_on_waits_from_plain_and_runtime_threads() {
        assert_eq!(block_on(async { 1 + 1 }), 2);
        let slept = block_on(async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            "slept"
        });
        assert_eq!(slept, "slept");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let inside = rt.block_on(async {
            tokio::spawn(async {
                block_on(async {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    3
                })
            })
            .await
            .unwrap()
        });
        assert_eq!(inside, 3);
    }
}
