//! The device client as a person runs it: `notevault device <args> <dir>`, and what a
//! device folder holds for its user.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Run `notevault device <args> <dir>` with no token (open mode) and `passphrase` (none:
/// the variable unset); its stdout and stderr, asserting success or failure.
pub fn device(args: &[&str], dir: &Path, passphrase: Option<&str>, ok: bool) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_notevault"));
    command
        .arg("device")
        .args(args)
        .arg(dir)
        .env_remove("NOTEVAULT_TOKEN");
    match passphrase {
        Some(p) => command.env("NOTEVAULT_PASSPHRASE", p),
        None => command.env_remove("NOTEVAULT_PASSPHRASE"),
    };
    let o = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.success(), ok, "device {args:?}: {text}");
    text
}

/// The user's files of a device folder (its state folder left out), with their bytes.
pub fn user_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".notevault-device")
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().to_string_lossy();
            (rel.into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// `notevault device <args> <dir>` with the bearer `token` and `env` (the passphrase
/// variables unset unless `env` sets them): its stdout; its stdout and stderr are also
/// appended to `out` (what a test checks holds no secret). Success must be `ok`.
pub fn device_as(
    token: &str,
    args: &[&str],
    dir: &Path,
    env: &[(&str, &str)],
    ok: bool,
    out: &mut Vec<u8>,
) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_notevault"));
    command
        .arg("device")
        .args(args)
        .arg(dir)
        .env("NOTEVAULT_TOKEN", token);
    for var in [
        "NOTEVAULT_PASSPHRASE",
        "NOTEVAULT_NEW_PASSPHRASE",
        "NOTEVAULT_RECOVERY_KEY",
    ] {
        command.env_remove(var);
    }
    command.envs(env.iter().copied());
    let o = command.output().unwrap();
    out.extend_from_slice(&o.stdout);
    out.extend_from_slice(&o.stderr);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.success(), ok, "device {args:?}: {text}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}
