//! A real PostgreSQL for the tests of hosted mode.
//!
//! `NOTEVAULT_TEST_DATABASE_URL` names a server to use (its user may create databases);
//! else the first test that asks starts a throwaway cluster (`initdb`, then `postgres` on
//! a free loopback port, in a temp dir; as root, run as the `postgres` user), shared by
//! every test of this run and removed when the process exits. Each test gets a database
//! of its own ([`database`]). A test that must stop its server takes a cluster of its
//! own ([`Cluster::start`]), stopped and removed when dropped.
//!
//! The server binaries are found through `NOTEVAULT_PG_BIN`, `pg_config --bindir` or
//! Debian's `/usr/lib/postgresql/<version>/bin`; missing, a test fails saying so (a
//! developer may set `NOTEVAULT_REQUIRE_TOOLS=0` to skip such tests instead).

#![allow(
    clippy::disallowed_methods,
    reason = "the harness reads its settings from the environment and removes its own temp dir"
)]

use std::io::Read;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The user the server runs as when the tests run as root (PostgreSQL refuses root).
const SERVER_USER: &str = "postgres";

fn opted_out() -> bool {
    std::env::var_os("NOTEVAULT_REQUIRE_TOOLS").is_some_and(|v| v == "0")
}

/// A missing tool: the test fails with how to get it, or skips for a developer who
/// opted out (`None`).
fn missing<T>(why: &str) -> Option<T> {
    if opted_out() {
        eprintln!(
            "skipped: PostgreSQL is missing ({why}); NOTEVAULT_REQUIRE_TOOLS=0 skips its tests"
        );
        return None;
    }
    panic!(
        "PostgreSQL is missing: {why}\n\
         The hosted-mode tests start their own cluster from the server binaries (on \
         Debian: apt-get install postgresql; or set NOTEVAULT_PG_BIN to their folder), or \
         use the server NOTEVAULT_TEST_DATABASE_URL names. To skip them, set \
         NOTEVAULT_REQUIRE_TOOLS=0."
    )
}

/// The folder holding `initdb`, `postgres`.
fn bin_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("NOTEVAULT_PG_BIN") {
        let dir = PathBuf::from(dir);
        if !dir.join("initdb").exists() {
            return Err(format!(
                "NOTEVAULT_PG_BIN={} holds no initdb",
                dir.display()
            ));
        }
        return Ok(dir);
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && dir.join("initdb").exists() {
            return Ok(dir);
        }
    }
    // Debian's layout: the newest version installed.
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| format!("no pg_config on PATH and /usr/lib/postgresql: {e}"))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| "no initdb under /usr/lib/postgresql/*/bin".into())
}

/// The uid and gid to run the server as: the `postgres` user when root, else none.
fn server_user() -> Result<Option<(u32, u32)>, String> {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return Ok(None);
    }
    let name = std::ffi::CString::new(SERVER_USER).unwrap();
    // SAFETY: a valid C string; the entry is read at once, before another getpw* call.
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    if entry.is_null() {
        return Err(format!(
            "running as root, and there is no `{SERVER_USER}` user to run the server as"
        ));
    }
    // SAFETY: non-null, as returned by getpwnam.
    let (uid, gid) = unsafe { ((*entry).pw_uid, (*entry).pw_gid) };
    Ok(Some((uid, gid)))
}

/// A PostgreSQL cluster of this process: its folder, port and server.
pub struct Cluster {
    dir: PathBuf,
    pub port: u16,
    server: Mutex<Option<Child>>,
    /// How long `initdb` and the start took.
    pub started_in: Duration,
}

impl Cluster {
    /// A new cluster, up and accepting connections; `None` when the binaries are missing
    /// and the developer opted out.
    pub fn start() -> Option<Cluster> {
        let bin = match bin_dir() {
            Ok(bin) => bin,
            Err(why) => return missing(&why),
        };
        let user = match server_user() {
            Ok(user) => user,
            Err(why) => return missing(&why),
        };
        Some(Self::start_with(&bin, user, false))
    }

    /// `initdb` in a fresh temp dir, then the server; `detached`: started from a thread
    /// that lives as long as the process (the server gets SIGQUIT when the thread that
    /// started it ends, so a killed test run leaves no server behind).
    fn start_with(bin: &Path, user: Option<(u32, u32)>, detached: bool) -> Cluster {
        let begin = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("notevault-pg-")
            .tempdir()
            .unwrap()
            .keep();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).unwrap();
        }
        let as_server = |program: &str| {
            let mut cmd = Command::new(bin.join(program));
            cmd.current_dir(&dir).env_remove("PGDATA");
            if let Some((uid, gid)) = user {
                cmd.uid(uid).gid(gid);
            }
            cmd
        };
        let out = as_server("initdb")
            .args(["-D", "data", "-U", "postgres", "-A", "trust", "-E", "UTF8"])
            .args(["--locale=C", "--no-sync", "--no-instructions"])
            .output()
            .expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for _ in 0..5 {
            let port = free_port();
            let child = spawn_server(bin, user, &dir, port, detached);
            let mut cluster = Cluster {
                dir: dir.clone(),
                port,
                server: Mutex::new(Some(child)),
                started_in: Duration::ZERO,
            };
            if cluster.wait_ready() {
                cluster.started_in = begin.elapsed();
                eprintln!(
                    "postgres harness: cluster on port {port} up in {} ms",
                    cluster.started_in.as_millis()
                );
                return cluster;
            }
            // Most likely the port was taken between the probe and the bind: again.
            // Stopped, but its folder kept (forget skips `Drop`) for the next try.
            cluster.stop_immediate();
            std::mem::forget(cluster);
        }
        panic!(
            "postgres did not start; its log:\n{}",
            std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
        );
    }

    /// Start the server again on its data and port (after [`Self::stop_immediate`]),
    /// as an operator's `pg_ctl start` would; it recovers from its WAL.
    pub fn restart(&self) {
        let (bin, user) = (bin_dir().unwrap(), server_user().unwrap());
        let child = spawn_server(&bin, user, &self.dir, self.port, false);
        *self.server.lock().unwrap() = Some(child);
        assert!(
            self.wait_ready(),
            "postgres did not start again: {}",
            self.log()
        );
    }

    /// Wait until the server accepts a connection, or has exited.
    fn wait_ready(&self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(child) = self.server.lock().unwrap().as_mut() {
                if child.try_wait().unwrap().is_some() {
                    return false;
                }
            }
            if try_query(&self.admin_url(), "SELECT 1").is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// A fresh, empty database on this cluster.
    pub fn database(&self) -> TestDb {
        let admin = self.admin_url();
        query(&admin, "CREATE DATABASE notevault");
        TestDb {
            url: with_database(&admin, "notevault"),
            admin,
            name: "notevault".into(),
        }
    }

    /// The superuser's URL to its `postgres` database.
    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Stop the server as `pg_ctl stop -m immediate` does (SIGQUIT to the postmaster:
    /// no checkpoint, every connection cut), and wait for it.
    pub fn stop_immediate(&self) {
        if let Some(mut child) = self.server.lock().unwrap().take() {
            // SAFETY: a pid of our own child, not yet reaped.
            unsafe { libc::kill(child.id() as i32, libc::SIGQUIT) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().unwrap().is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.join("server.log")) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop_immediate();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `postgres` on `dir`'s data at `port`, its output appended to `dir`'s `server.log`;
/// `detached`: started from a thread that lives as long as the process (the server gets
/// SIGQUIT when the thread that started it ends).
fn spawn_server(
    bin: &Path,
    user: Option<(u32, u32)>,
    dir: &Path,
    port: u16,
    detached: bool,
) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .unwrap();
    let mut cmd = Command::new(bin.join("postgres"));
    cmd.current_dir(dir).env_remove("PGDATA");
    if let Some((uid, gid)) = user {
        cmd.uid(uid).gid(gid);
    }
    // The shared throwaway cluster is never stopped under a test: durability buys
    // nothing there. A cluster of a test's own is stopped and started again, and must
    // keep what it committed, as a real server does.
    if detached {
        cmd.args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off"]);
    }
    cmd.args(["-D", "data", "-p", &port.to_string()])
        .args(["-c", "listen_addresses=127.0.0.1"])
        .arg("-c")
        .arg(format!("unix_socket_directories={}", dir.display()))
        .args(["-c", "shared_buffers=16MB"])
        .args(["-c", "max_connections=200"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    // SAFETY: prctl is async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT);
            Ok(())
        });
    }
    if detached {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            tx.send(cmd.spawn()).unwrap();
            loop {
                std::thread::park();
            }
        });
        rx.recv().unwrap()
    } else {
        cmd.spawn()
    }
    .expect("postgres starts")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Where the shared databases are made: the URL given, or the shared cluster's.
enum Server {
    External(String),
    Own(Cluster),
}

static SHARED: OnceLock<Option<Server>> = OnceLock::new();

/// Stops the shared cluster and removes its folder when the test process exits.
extern "C" fn stop_shared() {
    if let Some(Some(Server::Own(cluster))) = SHARED.get() {
        cluster.stop_immediate();
        let _ = std::fs::remove_dir_all(&cluster.dir);
    }
}

fn shared() -> Option<&'static Server> {
    SHARED
        .get_or_init(|| {
            if let Some(url) = std::env::var("NOTEVAULT_TEST_DATABASE_URL")
                .ok()
                .filter(|u| !u.is_empty())
            {
                return Some(Server::External(url));
            }
            let bin = match bin_dir() {
                Ok(bin) => bin,
                Err(why) => return missing(&why),
            };
            let user = match server_user() {
                Ok(user) => user,
                Err(why) => return missing(&why),
            };
            let cluster = Cluster::start_with(&bin, user, true);
            // SAFETY: registers a plain function, run once at exit.
            unsafe { libc::atexit(stop_shared) };
            Some(Server::Own(cluster))
        })
        .as_ref()
}

/// A database of one test, on the shared server; dropped at the end of the test.
pub struct TestDb {
    pub url: String,
    admin: String,
    name: String,
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = try_query(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

/// `url` with its database replaced by `name` (the query string kept).
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let authority_end = base[scheme_end..]
        .find('/')
        .map(|i| scheme_end + i)
        .unwrap_or(base.len());
    let mut out = format!("{}/{name}", &base[..authority_end]);
    if !query.is_empty() {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// A fresh, empty database for one test; `None` when PostgreSQL is missing and the
/// developer opted out.
pub fn database() -> Option<TestDb> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let admin = match shared()? {
        Server::External(url) => url.clone(),
        Server::Own(cluster) => cluster.admin_url(),
    };
    let name = format!(
        "nv_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    query(&admin, &format!("CREATE DATABASE {name}"));
    Some(TestDb {
        url: with_database(&admin, &name),
        admin,
        name,
    })
}

/// Run `sql` against `url`, on a thread and runtime of its own (a test may be inside a
/// runtime already): the rows of a single `SELECT`, else nothing.
pub fn try_query(url: &str, sql: &str) -> Result<Vec<tokio_postgres::Row>, String> {
    let (url, sql) = (url.to_string(), sql.to_string());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            // One query answers its rows; several statements run as a batch.
            let single = !sql.trim().trim_end_matches(';').contains(';');
            if single && sql.trim_start().to_ascii_uppercase().starts_with("SELECT") {
                return client.query(&sql, &[]).await.map_err(|e| format!("{e:?}"));
            }
            client
                .batch_execute(&sql)
                .await
                .map_err(|e| format!("{e:?}"))?;
            Ok(Vec::new())
        })
    })
    .join()
    .unwrap()
}

/// [`try_query`], failing the test on an error.
pub fn query(url: &str, sql: &str) -> Vec<tokio_postgres::Row> {
    try_query(url, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[test]
fn a_url_takes_another_database() {
    assert_eq!(
        with_database("postgres://u:p@h:5/postgres?sslmode=disable", "x"),
        "postgres://u:p@h:5/x?sslmode=disable"
    );
    assert_eq!(with_database("postgres://h", "x"), "postgres://h/x");
}

/// `pg_dump` of the database at `url` (data and schema, plain SQL): every byte the
/// server keeps of it, as an operator's backup would hold it.
pub fn dump(url: &str) -> Vec<u8> {
    let bin = bin_dir().expect("the PostgreSQL binaries");
    let out = Command::new(bin.join("pg_dump"))
        .arg("--dbname")
        .arg(url)
        .output()
        .unwrap();
    assert!(out.status.success(), "pg_dump: {out:?}");
    out.stdout
}
