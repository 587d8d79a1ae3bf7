//! The daemon as a user runs it: `notevault serve` in a child process, its address read
//! from the line it prints, its stderr kept. The one spawning helper of the tests
//! (`common::spawn`) and the benches (`benches/common` includes this file by path), so
//! that a change to how the daemon starts or says where it listens is made once.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The notevault binary of this build.
pub const BIN: &str = env!("CARGO_BIN_EXE_notevault");

/// `bin serve --listen LISTEN [--state-dir STATE] VAULT`, with nothing of this process's
/// environment that would configure it (a config file, auth, static tokens): a caller adds
/// its own arguments and variables before [`start`].
pub fn command(bin: &str, listen: &str, vault: &Path, state: Option<&Path>) -> Command {
    let mut command = serve(bin);
    command.args(["--listen", listen]);
    if let Some(state) = state {
        command.arg("--state-dir").arg(state);
    }
    command.arg(vault);
    command
}

/// `bin serve`, without this process's configuring environment; the caller adds the
/// arguments (several vaults, a config file).
pub fn serve(bin: &str) -> Command {
    let mut command = Command::new(bin);
    command
        .arg("serve")
        .env_remove("NOTEVAULT_CONFIG")
        .env_remove("AUTH_REQUIRED")
        .env_remove("NOTEVAULT_AUTH_REQUIRED")
        .env_remove("NOTEVAULT_STATIC_TOKENS");
    command
}

/// A daemon started by [`start`]: killed when dropped (also when a test fails).
pub struct Daemon {
    pub child: Child,
    /// `http://ADDR` or `https://ADDR`, as the daemon printed it.
    pub base: String,
    /// Every line of its stderr so far, the address line included (at `address_line`).
    pub log: Arc<Mutex<Vec<String>>>,
    address_line: usize,
    reader: Option<JoinHandle<()>>,
}

/// Spawn `command` (a `notevault serve` command line, see [`command`]) with its stderr
/// piped and wait for the line that says where it serves. Its stderr is then read to the
/// end on a thread, so that the daemon never blocks on a full pipe. An error: it could
/// not be spawned, or it ended before serving (its stderr in the message).
pub fn start(mut command: Command) -> std::io::Result<Daemon> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr is piped"));
    let mut seen = Vec::new();
    let base = loop {
        let Some(line) = next_line(&mut stderr)? else {
            let _ = child.wait();
            return Err(std::io::Error::other(format!(
                "the daemon ended before serving: {}",
                seen.join("\n")
            )));
        };
        let base = served_at(&line);
        seen.push(line);
        if let Some(base) = base {
            break base;
        }
    };
    let address_line = seen.len() - 1;
    let log = Arc::new(Mutex::new(seen));
    let sink = log.clone();
    let reader = std::thread::spawn(move || {
        while let Ok(Some(line)) = next_line(&mut stderr) {
            if let Ok(mut log) = sink.lock() {
                log.push(line);
            }
        }
    });
    Ok(Daemon {
        child,
        base,
        log,
        address_line,
        reader: Some(reader),
    })
}

/// The next line of `from`, without its end; bytes that are not UTF-8 replaced, so that
/// one such byte in a log does not end the reading (and block the daemon on a full pipe).
fn next_line(from: &mut impl BufRead) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    if from.read_until(b'\n', &mut line)? == 0 {
        return Ok(None);
    }
    if line.ends_with(b"\n") {
        line.pop();
    }
    Ok(Some(String::from_utf8_lossy(&line).into_owned()))
}

/// `http://ADDR` of `notevault: serving VAULT on http://ADDR` (or https).
fn served_at(line: &str) -> Option<String> {
    ["http", "https"].into_iter().find_map(|scheme| {
        let rest = line.split(&format!(" on {scheme}://")).nth(1)?;
        Some(format!("{scheme}://{}", rest.split_whitespace().next()?))
    })
}

impl Daemon {
    /// Wait, at most `limit`, until a line of its stderr holds `needle`: whether one did.
    /// (A thread's wait: the benches and the tests without a runtime call it too.)
    pub fn wait_logged(&self, needle: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let seen = self
                .log
                .lock()
                .is_ok_and(|l| l.iter().any(|line| line.contains(needle)));
            if seen {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every line of its stderr, once it has closed it: call once the daemon has ended
    /// (or is ending), or this waits for that.
    pub fn whole_log(&mut self) -> Vec<String> {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// What it wrote to stderr after its address, once it has ended: see
    /// [`Daemon::whole_log`].
    pub fn rest(&mut self) -> String {
        let start = self.address_line + 1;
        self.whole_log().get(start..).unwrap_or_default().join("\n")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
