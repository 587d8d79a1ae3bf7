//! Shared by the benches: the corpus, the daemon, percentiles.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

pub const BIN: &str = env!("CARGO_BIN_EXE_notevault");

pub struct Daemon {
    pub child: Child,
    pub base: String,
    /// Every stderr line after the address, for figures the daemon logs.
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start(vault: &Path, state: &Path) -> Result<Daemon> {
    let mut child = Command::new(BIN)
        .args([
            "serve",
            vault.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            state.to_str().unwrap(),
        ])
        .env("RATE_LIMIT_READ_PER_MINUTE", "0")
        .env("RATE_LIMIT_WRITE_PER_MINUTE", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let stderr = child.stderr.take().context("stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let addr = loop {
        let Some(line) = lines.next() else {
            bail!("the daemon exited before serving")
        };
        let line = line?;
        if let Ok(mut l) = log.lock() {
            l.push(line.clone());
        }
        if let Some(rest) = line.split("on http://").nth(1) {
            break rest.trim().to_string();
        }
    };
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Ok(mut l) = sink.lock() {
                l.push(line);
            }
        }
    });
    Ok(Daemon {
        child,
        base: format!("http://{addr}"),
        log,
    })
}

pub fn corpus() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let unpacked = root.join("target/bench-corpus/realvault");
    if unpacked.is_dir() {
        return Some(unpacked);
    }
    let tarball = std::env::var_os("NOTEVAULT_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/corpora/realvault.tar.gz"));
    if !tarball.exists() {
        return None;
    }
    std::fs::create_dir_all(root.join("target/bench-corpus")).ok()?;
    let ok = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(root.join("target/bench-corpus"))
        .status()
        .ok()?
        .success();
    ok.then_some(unpacked)
}

pub fn copy(from: &Path, to: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(to);
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status()?;
    if !status.success() {
        bail!("cp -a failed");
    }
    Ok(())
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn stats(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (percentile(&v, 0.5), percentile(&v, 0.99))
}

pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

pub fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let status = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("git {args:?} failed");
    }
    Ok(())
}

pub async fn wait_history(state: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(900);
    while Instant::now() < deadline {
        let ok = Command::new("git")
            .arg("--git-dir")
            .arg(state.join("history.git"))
            .args(["rev-parse", "-q", "--verify", "HEAD"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?
            .success();
        if ok {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("the history bootstrap did not finish")
}
