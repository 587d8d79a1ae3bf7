//! The hosted bench's PostgreSQL 15 cluster, run as a user would run it: `initdb`, then
//! `pg_ctl start` with the server's defaults (fsync, synchronous_commit and
//! full_page_writes on, 128 MB of shared buffers), as the `postgres` user when root, its
//! data under `target/bench-hosted/` (the benches' disk, not a tmpfs). Not the tests'
//! harness (`tests/it/common/postgres.rs`): that one shrinks shared buffers and turns
//! durability off for its shared cluster, which would flatter both sides here.
//! `pg_stat_statements` is loaded so a missed target can say where the time goes.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The server binaries: `NOTEVAULT_PG_BIN`, else Debian's PostgreSQL 15.
fn bin_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("NOTEVAULT_PG_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"));
    dir.join("pg_ctl").exists().then_some(dir)
}

/// The uid and gid of `postgres` when this runs as root (the server refuses root).
fn server_user() -> Result<Option<(u32, u32)>> {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return Ok(None);
    }
    let name = std::ffi::CString::new("postgres")?;
    // SAFETY: a valid C string; the entry is read at once.
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    if entry.is_null() {
        bail!("running as root, and there is no `postgres` user to run the server as");
    }
    // SAFETY: non-null, as returned by getpwnam.
    Ok(Some(unsafe { ((*entry).pw_uid, (*entry).pw_gid) }))
}

pub struct Pg {
    pub dir: PathBuf,
    pub port: u16,
    bin: PathBuf,
    user: Option<(u32, u32)>,
}

impl Pg {
    /// A new cluster in `dir` (emptied first), up; `None` when the binaries are missing.
    pub fn start(dir: &Path) -> Result<Option<Pg>> {
        let Some(bin) = bin_dir() else {
            return Ok(None);
        };
        let user = server_user()?;
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(dir, Some(uid), Some(gid))?;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let pg = Pg {
            dir: dir.to_path_buf(),
            port,
            bin,
            user,
        };
        let out = pg
            .as_server("initdb")
            .args(["-D", "data", "-U", "postgres", "-A", "trust", "-E", "UTF8"])
            .args(["--locale=C", "--no-instructions"])
            .output()?;
        if !out.status.success() {
            bail!("initdb: {}", String::from_utf8_lossy(&out.stderr));
        }
        pg.start_again()?;
        Ok(Some(pg))
    }

    fn as_server(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        cmd.current_dir(&self.dir).env_remove("PGDATA");
        if let Some((uid, gid)) = self.user {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    /// `pg_ctl start -w` on the cluster's data and port (after a stop: it recovers from
    /// its WAL).
    pub fn start_again(&self) -> Result<()> {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} \
             -c max_connections=200 -c shared_preload_libraries=pg_stat_statements",
            self.port,
            self.dir.display()
        );
        let out = self
            .as_server("pg_ctl")
            .args(["-D", "data", "-l", "server.log", "-w", "-t", "60", "-o"])
            .arg(options)
            .arg("start")
            .output()?;
        if !out.status.success() {
            bail!(
                "pg_ctl start: {}{}",
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
            );
        }
        Ok(())
    }

    /// `pg_ctl stop -m immediate`: every connection cut, no checkpoint.
    pub fn stop_immediate(&self) -> Result<()> {
        let out = self
            .as_server("pg_ctl")
            .args(["-D", "data", "-m", "immediate", "-w", "stop"])
            .output()?;
        if !out.status.success() {
            bail!("pg_ctl stop: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// `psql -Atc SQL` on `database`: its output, trimmed.
    pub fn psql(&self, database: &str, sql: &str) -> Result<String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-v", "ON_ERROR_STOP=1", "-At", "-h", "127.0.0.1"])
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                database,
            ])
            .args(["-c", sql])
            .output()
            .context("psql")?;
        if !out.status.success() {
            bail!("psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// `pgbench` against `database` with these arguments (`-n` and the connection added).
    pub fn pgbench(&self, database: &str, cwd: &Path, args: &[&str]) -> Result<String> {
        let out = Command::new(self.bin.join("pgbench"))
            .current_dir(cwd)
            .args(["-n", "-h", "127.0.0.1", "-U", "postgres"])
            .args(["-p", &self.port.to_string()])
            .args(args)
            .arg(database)
            .output()
            .context("pgbench")?;
        if !out.status.success() {
            bail!("pgbench {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = self.stop_immediate();
        if std::env::var_os("NOTEVAULT_BENCH_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
