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
