//! The command line as a user meets it: help, version, the contract, and one-line errors.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use std::process::Command;

use crate::common;

const BIN: &str = env!("CARGO_BIN_EXE_notevault");

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("NOTEVAULT_CONFIG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_one_line_error(args: &[&str], needle: &str) {
    let (ok, _, stderr) = run(args);
    assert!(!ok, "{args:?} must fail");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line for {args:?}: {stderr}");
    assert!(lines[0].starts_with("notevault: "), "{stderr}");
    assert!(lines[0].contains(needle), "{needle:?} in {stderr}");
    assert!(!stderr.contains("panicked"));
}

#[test]
fn version_help_and_openapi() {
    let (ok, out, _) = run(&["--version"]);
    assert!(ok && out.contains(env!("CARGO_PKG_VERSION")));
    let (ok, out, _) = run(&["serve", "--help"]);
    assert!(ok && out.contains("--listen") && out.contains("--state-dir"));
    let (ok, out, _) = run(&["openapi"]);
    assert!(ok);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["info"]["version"], "0.1.0");
}

#[test]
fn startup_failures_are_one_line_and_non_zero() {
    assert_one_line_error(&["serve", "/no/such/vault/folder"], "/no/such/vault/folder");
    let vault = tempfile::tempdir().unwrap();
    let v = vault.path().to_str().unwrap();
    let file = vault.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let state = file.join("state");
    assert_one_line_error(
        &[
            "serve",
            v,
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            state.to_str().unwrap(),
        ],
        "state dir",
    );
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    assert_one_line_error(&["serve", v, "--listen", &addr], "cannot listen");
    assert_one_line_error(&["serve", v, "--listen", "0.0.0.0:0"], "without auth");
    let bad_config = vault.path().join("bad.toml");
    std::fs::write(&bad_config, "listen = 5\n").unwrap();
    assert_one_line_error(
        &["serve", v, "--config", bad_config.to_str().unwrap()],
        "bad.toml",
    );
}

/// `serve` answers on the address it prints, and SIGTERM (what `systemctl stop` sends)
/// stops it as Ctrl-C does: exit status 0, and a state a `check` finds whole.
#[test]
fn serve_answers_on_the_address_it_prints_and_stops_on_sigterm() {
    let vault = tempfile::tempdir().unwrap();
    std::fs::write(vault.path().join("hello.md"), "# Hello\n").unwrap();
    let command = common::daemon::command(BIN, "127.0.0.1:0", vault.path(), None);
    let mut daemon = common::daemon::start(command).expect("the daemon prints its address");
    let addr = daemon.base.trim_start_matches("http://").to_string();
    let body: serde_json::Value =
        reqwest::blocking_get(&format!("http://{addr}/v1/notes/hello?limit=1"));
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(daemon.child.id() as i32, libc::SIGTERM) };
    let status = daemon.child.wait().unwrap();
    let log = daemon.rest();
    assert!(status.success(), "{status}: {log}");
    assert_eq!(body["title"], "Hello");
    assert!(vault.path().join(".notevault/history.git").is_dir());
    let (ok, out, err) = run(&["check", vault.path().to_str().unwrap()]);
    assert!(ok, "{out}{err}");
}

mod reqwest {
    /// A minimal blocking GET over a std TcpStream (the test needs no async runtime).
    pub fn blocking_get(url: &str) -> serde_json::Value {
        use std::io::{Read, Write};
        let rest = url.strip_prefix("http://").unwrap();
        let (host, path) = rest.split_once('/').unwrap();
        let mut stream = std::net::TcpStream::connect(host).unwrap();
        write!(
            stream,
            "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (_, body) = response.split_once("\r\n\r\n").unwrap();
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"))
    }
}

/// `man/` is generated from the clap definition: one page for the command and one for
/// every subcommand at any depth (`notevault-token-create.1`), each ending with the exit
/// statuses of `cli::exit::TABLE`. Regenerate with
/// `NOTEVAULT_WRITE_MAN=1 cargo test --test it cli::man_pages`.
#[test]
fn man_pages_are_current() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    let mut pages = Vec::new();
    collect_pages("notevault", notevault::cli::command(), &mut pages);
    let expected: std::collections::BTreeSet<String> =
        pages.iter().map(|(file, _)| file.clone()).collect();
    for (file, cmd) in pages {
        let mut rendered = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut rendered).unwrap();
        rendered.extend_from_slice(exit_status_section().as_bytes());
        let path = root.join(&file);
        if std::env::var_os("NOTEVAULT_WRITE_MAN").is_some() {
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(&path, &rendered).unwrap();
        }
        let checked_in = std::fs::read(&path).unwrap_or_default();
        assert!(
            checked_in == rendered,
            "man/{file} is stale: run NOTEVAULT_WRITE_MAN=1 cargo test --test it cli::man_pages"
        );
    }
    // No page of a subcommand that is gone.
    let present: std::collections::BTreeSet<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(present, expected, "man/ holds exactly one page per command");
}

/// `name` and each of its subcommands, depth first, as `(file, command named for its page)`.
fn collect_pages(name: &str, cmd: clap::Command, out: &mut Vec<(String, clap::Command)>) {
    for sub in cmd.get_subcommands() {
        let sub_name = format!("{name}-{}", sub.get_name());
        collect_pages(&sub_name, sub.clone(), out);
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    out.insert(0, (format!("{name}.1"), cmd.name(leaked)));
}

/// The EXIT STATUS section every page ends with, from the one table of statuses.
fn exit_status_section() -> String {
    let mut out = String::from(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in notevault::cli::exit::TABLE {
        out.push_str(&format!(".TP\n{code}\n{}\n", meaning.replace('\\', "\\\\")));
    }
    out
}

/// `completions/` holds what `notevault completions SHELL` prints, for packagers;
/// regenerate with `NOTEVAULT_WRITE_COMPLETIONS=1 cargo test --test it cli::completions`.
#[test]
fn completions_are_current() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    for (shell, file) in [
        ("bash", "notevault.bash"),
        ("zsh", "_notevault"),
        ("fish", "notevault.fish"),
        ("powershell", "_notevault.ps1"),
    ] {
        let out = Command::new(BIN)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "completions {shell}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("export"),
            "the {shell} script completes subcommands"
        );
        let path = root.join(file);
        if std::env::var_os("NOTEVAULT_WRITE_COMPLETIONS").is_some() {
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(&path, &out.stdout).unwrap();
        }
        let checked_in = std::fs::read(&path).unwrap_or_default();
        assert!(
            checked_in == out.stdout,
            "completions/{file} is stale: run NOTEVAULT_WRITE_COMPLETIONS=1 cargo test --test it cli::completions"
        );
    }
}

#[test]
fn completions_of_an_unknown_shell_are_one_line_and_a_usage_error() {
    let out = Command::new(BIN)
        .args(["completions", "nosuchshell"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(
            "notevault: unknown shell \"nosuchshell\": use bash, zsh, fish or powershell"
        ),
        "{err}"
    );
}

#[test]
fn reindex_rebuilds_the_index_and_refuses_while_a_daemon_serves() {
    let vault = tempfile::tempdir().unwrap();
    let v = vault.path().to_str().unwrap();
    std::fs::write(vault.path().join("a.md"), "# Alpha\nfirst note\n").unwrap();
    std::fs::write(vault.path().join("b.md"), "# Beta\nsecond note\n").unwrap();
    let (ok, out, err) = run(&["reindex", v]);
    assert!(ok, "{err}");
    assert!(out.starts_with("indexed 2 notes of "), "{out}");
    assert!(vault.path().join(".notevault/index/meta.json").is_file());
    // Again: the index is dropped and built anew.
    let (ok, out, err) = run(&["reindex", v]);
    assert!(ok && out.starts_with("indexed 2 notes"), "{out} {err}");

    let command = common::daemon::command(BIN, "127.0.0.1:0", vault.path(), None);
    let mut daemon = common::daemon::start(command).expect("the daemon prints its address");
    let refused = run(&["reindex", v]);
    daemon.child.kill().unwrap();
    let _ = daemon.child.wait();
    assert!(!refused.0, "reindex must refuse while serving");
    assert!(refused.2.contains("in use"), "{}", refused.2);
    assert!(
        vault.path().join(".notevault/index/meta.json").is_file(),
        "the index is untouched"
    );
}

/// The Debian package's user unit is the one in `packaging/`, with the packaged binary's
/// path (one source: an edit to one that misses the other fails here).
#[test]
fn packaged_unit_is_the_unit_with_the_packaged_binary() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging");
    let unit = std::fs::read_to_string(root.join("notevault.service")).unwrap();
    let packaged = std::fs::read_to_string(root.join("deb/notevault.service")).unwrap();
    let expected = unit
        .replace("%h/.cargo/bin/notevault", "/usr/bin/notevault")
        .replace(
            "# Install: cp notevault.service ~/.config/systemd/user/ && systemctl --user enable --now notevault",
            "# Installed by the Debian package in /usr/lib/systemd/user/: systemctl --user enable --now notevault",
        );
    assert_eq!(
        packaged, expected,
        "packaging/deb/notevault.service drifted"
    );
    assert!(packaged.contains("ExecStart=/usr/bin/notevault serve"));
}

/// Off a terminal, long start-up work (here through `reindex`) says how it goes in plain
/// log lines, never a bar's escape codes; a small vault says nothing of it.
#[test]
fn reindex_of_a_large_vault_logs_progress_off_a_terminal() {
    let vault = tempfile::tempdir().unwrap();
    for i in 0..notevault::progress::THRESHOLD {
        std::fs::write(
            vault.path().join(format!("n{i}.md")),
            format!("# Note {i}\n[[n{}]]\n", i + 1),
        )
        .unwrap();
    }
    let (ok, out, err) = run(&["reindex", vault.path().to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.starts_with("indexed 5000 notes"), "{out}");
    for task in ["scanning", "indexing", "history"] {
        assert!(
            err.lines()
                .any(|l| l.contains("finished") && l.contains(&format!("task=\"{task}\""))),
            "a finished line for {task} in {err}"
        );
    }
    assert!(
        !err.contains('\u{1b}'),
        "no escape codes off a terminal: {err:?}"
    );

    let small = tempfile::tempdir().unwrap();
    std::fs::write(small.path().join("a.md"), "# A\n").unwrap();
    let (ok, _, err) = run(&["reindex", small.path().to_str().unwrap()]);
    assert!(ok && !err.contains("task="), "{err}");
}
