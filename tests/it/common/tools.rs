//! The outside tools some tests drive or compare with: a Python with the packages of
//! `.ci/requirements.txt` (the MCP SDK, openapi-spec-validator, schemathesis) and `rg`
//! (ripgrep, whose PyPI wheel the same file pins).
//!
//! `cargo test` on a fresh machine provisions them: when `NOTEVAULT_PYTHON` is unset, a
//! venv is made once under the target dir (`python3 -m venv`, then `pip install -r
//! .ci/requirements.txt`), shared by every test binary through a file lock and marked
//! ready only when the install has finished. A tool still missing fails its test, with
//! how to get it; a developer who wants to go without sets `NOTEVAULT_REQUIRE_TOOLS=0`,
//! and such tests then skip with a note (nothing is installed then).

#![allow(
    clippy::disallowed_methods,
    reason = "the tools' settings come from the environment; the venv is made under the target dir"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The Python packages, pinned; the venv is remade when this file changes.
const REQUIREMENTS: &str = include_str!("../../../.ci/requirements.txt");

/// True when the developer opted out of the tools (`NOTEVAULT_REQUIRE_TOOLS=0`).
fn opted_out() -> bool {
    std::env::var_os("NOTEVAULT_REQUIRE_TOOLS").is_some_and(|v| v == "0")
}

/// A tool is missing: the test fails saying how to get it, or, for a developer who
/// opted out, skips with a note (`None`).
fn missing<T>(tool: &str, why: &str) -> Option<T> {
    if opted_out() {
        eprintln!("skipped: {tool} is missing ({why}); NOTEVAULT_REQUIRE_TOOLS=0 skips its tests");
        return None;
    }
    panic!(
        "{tool} is missing: {why}\n\
         `cargo test` makes a venv with .ci/requirements.txt under the target dir when \
         NOTEVAULT_PYTHON is unset (it needs python3 with venv, on Debian the python3-venv \
         package, and PyPI once); `.ci/run` installs every test tool. To skip the tests \
         that need it, set NOTEVAULT_REQUIRE_TOOLS=0."
    )
}

/// A Python that can import every module of `modules`: `NOTEVAULT_PYTHON`, else the
/// venv this module provisions. `None`: the developer opted out and it is missing.
pub fn python(modules: &[&str]) -> Option<PathBuf> {
    let python = match std::env::var_os("NOTEVAULT_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => match provisioned() {
            Ok(p) => p,
            Err(why) => return missing("the test venv", &why),
        },
    };
    let import = format!("import {}", modules.join(", "));
    let out = Command::new(&python).args(["-c", &import]).output();
    match out {
        Ok(o) if o.status.success() => Some(python),
        Ok(o) => missing(
            &format!("`{import}`"),
            &format!(
                "{} cannot: {}",
                python.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            ),
        ),
        Err(e) => missing("python", &format!("{}: {e}", python.display())),
    }
}

/// A program installed beside [`python`]'s interpreter (a console script of a package).
pub fn python_script(modules: &[&str], name: &str) -> Option<PathBuf> {
    let python = python(modules)?;
    let script = python.with_file_name(name);
    if script.exists() {
        return Some(script);
    }
    missing(name, &format!("{} is absent", script.display()))
}

/// `rg` (ripgrep): the one on PATH, else the one the `ripgrep` wheel put beside the
/// test Python.
pub fn rg() -> Option<PathBuf> {
    if Command::new("rg").arg("--version").output().is_ok() {
        return Some(PathBuf::from("rg"));
    }
    let beside = match std::env::var_os("NOTEVAULT_PYTHON") {
        Some(p) => Ok(PathBuf::from(p)),
        None => provisioned(),
    };
    match beside {
        Ok(python) if python.with_file_name("rg").exists() => Some(python.with_file_name("rg")),
        Ok(python) => missing(
            "rg (ripgrep)",
            &format!(
                "not on PATH, nor beside {} (the `ripgrep` wheel of .ci/requirements.txt)",
                python.display()
            ),
        ),
        Err(why) => missing("rg (ripgrep)", &format!("not on PATH, and {why}")),
    }
}

/// `curl` and `bash`, which README.md's examples use (`tests/it/readme.rs` runs them).
pub fn curl() -> Option<PathBuf> {
    let runs = |tool: &str| Command::new(tool).arg("--version").output().is_ok();
    if runs("curl") && runs("bash") {
        return Some(PathBuf::from("curl"));
    }
    missing(
        "curl or bash",
        "README.md's examples run with them (Debian: apt-get install curl)",
    )
}

/// Debian's Chromium (`/usr/bin/chromium`, the package `.ci/run` installs) for the
/// console's browser test.
pub fn chromium() -> Option<PathBuf> {
    let path = PathBuf::from("/usr/bin/chromium");
    if path.exists() {
        return Some(path);
    }
    missing(
        "chromium",
        "/usr/bin/chromium is absent (Debian: apt-get install chromium)",
    )
}

/// The venv's python, made once per target dir (and again when `.ci/requirements.txt`
/// changes). With `NOTEVAULT_REQUIRE_TOOLS=0` only a venv already made is used.
fn provisioned() -> Result<PathBuf, String> {
    static VENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    VENV.get_or_init(|| {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let venv = root.join("notevault-test-venv");
        let python = venv.join("bin/python");
        let stamp = venv.join("requirements.txt");
        let ready = || std::fs::read_to_string(&stamp).is_ok_and(|s| s == REQUIREMENTS);
        if ready() {
            return Ok(python);
        }
        if opted_out() {
            return Err(format!("no venv at {}", venv.display()));
        }
        // Test binaries run one after another, but a developer may run two at once: the
        // lock makes the second wait for the first's venv.
        std::fs::create_dir_all(root).map_err(|e| e.to_string())?;
        let lock = std::fs::File::create(root.join("notevault-test-venv.lock"))
            .map_err(|e| format!("cannot create the venv lock: {e}"))?;
        lock.lock()
            .map_err(|e| format!("cannot lock the venv: {e}"))?;
        if ready() {
            return Ok(python);
        }
        eprintln!(
            "making the test venv at {} (once: .ci/requirements.txt from PyPI)",
            venv.display()
        );
        let _ = std::fs::remove_dir_all(&venv);
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
        run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg("-r")
            .arg(super::repo_path(".ci/requirements.txt")))?;
        // The stamp goes in last, whole: a venv without it is remade.
        let temp = venv.join("requirements.txt.tmp");
        std::fs::write(&temp, REQUIREMENTS)
            .and_then(|()| std::fs::rename(&temp, &stamp))
            .map_err(|e| format!("cannot mark the venv ready: {e}"))?;
        Ok(python)
    })
    .clone()
}

fn run(command: &mut Command) -> Result<(), String> {
    let what = format!("{command:?}");
    let out = command
        .output()
        .map_err(|e| format!("{what} did not run: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
    Err(format!(
        "{what} failed ({}):\n{}",
        out.status,
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    ))
}
