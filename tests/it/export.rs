//! `notevault export` as an operator meets it: the archive unpacks (with the system `tar`)
//! to the vault's notes and attachments byte for byte, leaves out what the daemon ignores,
//! carries a bundle of the history that git accepts, and never replaces or tears a file.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_notevault");

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("NOTEVAULT_CONFIG")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every regular file under `dir`, vault-relative, with its bytes.
fn files_under(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap();
            (
                rel.to_str().unwrap().to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// A vault with what must be exported (notes with CRLF, BOM, unicode names, nested
/// folders, a binary attachment, an empty file) and what must not (the state directory,
/// `.git/`, `.obsidian/`, `.trash/`, editor swap files, our temp files).
fn vault() -> (tempfile::TempDir, BTreeMap<String, Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut expected = BTreeMap::new();
    let mut keep = |rel: &str, bytes: &[u8]| {
        write(root, rel, bytes);
        expected.insert(rel.to_string(), bytes.to_vec());
    };
    keep("hello.md", b"# Hello\n\nfirst note\n");
    keep("crlf.md", b"---\r\ntitle: CRLF\r\n---\r\nbody\r\n");
    keep("bom.md", b"\xEF\xBB\xBF# BOM\n");
    keep(
        "deep/er/still/n\u{e9}e caf\u{e9}.md".to_string().as_str(),
        "# Café\n".as_bytes(),
    );
    keep(
        "attachments/pixel.png",
        &[0x89, b'P', b'N', b'G', 0, 1, 2, 255, 0, 13, 10],
    );
    keep("empty.md", b"");
    keep("docs/report.pdf", &vec![7u8; 70_000]);
    for ignored in [
        ".git/config",
        ".obsidian/app.json",
        ".trash/old.md",
        ".hello.md.swp",
        "hello.md~",
        ".notevault-tmp-leftover",
    ] {
        write(root, ignored, b"not exported\n");
    }
    (dir, expected)
}

fn unpack(archive: &Path) -> tempfile::TempDir {
    let out = tempfile::tempdir().unwrap();
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(out.path())
        .status()
        .unwrap();
    assert!(status.success(), "tar -xzf must read the archive");
    out
}

#[test]
fn export_unpacks_to_the_vaults_files_byte_for_byte() {
    let (vault, expected) = vault();
    let v = vault.path().to_str().unwrap();
    // A served vault has a state directory (history, metadata, index): reindex makes one.
    let (code, _, err) = run(&["reindex", v]);
    assert_eq!(code, 0, "{err}");
    assert!(vault.path().join(".notevault/history.git").is_dir());
    let before = files_under(vault.path());

    let out = tempfile::tempdir().unwrap();
    let archive = out.path().join("notes.tar.gz");
    let (code, stdout, err) = run(&["export", v, "-o", archive.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.starts_with("exported 5 notes and 2 attachments"),
        "{stdout}"
    );
    let unpacked = unpack(&archive);
    assert_eq!(files_under(&unpacked.path().join("vault")), expected);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(unpacked.path().join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["format"], "notevault-export");
    assert_eq!(manifest["format_version"], 1);
    assert_eq!(manifest["notes"], 5);
    assert_eq!(manifest["attachments"], 2);
    assert_eq!(manifest["history"], "none");
    let bytes: usize = expected.values().map(Vec::len).sum();
    assert_eq!(manifest["bytes"], bytes);
    assert!(!unpacked.path().join("history.bundle").exists());
    // Only the archive is left beside it (no temp file), and the vault is unchanged.
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1);
    assert_eq!(files_under(vault.path()), before);
}

#[test]
fn export_with_history_carries_a_bundle_git_accepts() {
    let (vault, _) = vault();
    let v = vault.path().to_str().unwrap();
    let (code, _, err) = run(&["reindex", v]);
    assert_eq!(code, 0, "{err}");
    let out = tempfile::tempdir().unwrap();
    let archive = out.path().join("with-history.tar.gz");
    let (code, stdout, err) = run(&["export", v, "-o", archive.to_str().unwrap(), "--history"]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("history as a git bundle"), "{stdout}");
    let unpacked = unpack(&archive);
    let manifest = std::fs::read_to_string(unpacked.path().join("manifest.json")).unwrap();
    assert!(manifest.contains("\"history\": \"bundle\""), "{manifest}");
    let clone = unpacked.path().join("history");
    let status = Command::new("git")
        .args(["clone", "--quiet", "--bare"])
        .arg(unpacked.path().join("history.bundle"))
        .arg(&clone)
        .status()
        .unwrap();
    assert!(status.success(), "git clones the bundle");
    let log = Command::new("git")
        .arg("--git-dir")
        .arg(&clone)
        .args(["log", "--all", "--format=%B"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(log.contains("Notevault-Seq"), "{log}");
}

#[test]
fn export_refuses_an_existing_file_unless_forced_and_never_tears_one() {
    let (vault, expected) = vault();
    let v = vault.path().to_str().unwrap();
    let out = tempfile::tempdir().unwrap();
    let archive = out.path().join("notes.tar.gz");
    std::fs::write(&archive, b"precious").unwrap();
    let a = archive.to_str().unwrap();

    let (code, stdout, err) = run(&["export", v, "-o", a]);
    assert_eq!(code, 1);
    assert!(stdout.is_empty());
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("notevault: ") && lines[0].contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(&archive).unwrap(), b"precious");

    let (code, _, err) = run(&["export", v, "-o", a, "--force"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        files_under(&unpack(&archive).path().join("vault")),
        expected
    );
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1);

    // A folder that does not exist: one line, nothing written.
    let missing = out.path().join("no/such/folder/x.tar.gz");
    let (code, _, err) = run(&["export", v, "-o", missing.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot write in"), "{err}");
    // A vault that does not exist.
    let (code, _, err) = run(&["export", "/no/such/vault", "-o", a, "--force"]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("/no/such/vault"), "{err}");
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1);
}

#[test]
fn export_into_the_vault_does_not_archive_itself() {
    let (vault, expected) = vault();
    let v = vault.path().to_str().unwrap();
    let archive = vault.path().join("backup.tar.gz");
    let (code, _, err) = run(&["export", v, "-o", archive.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        files_under(&unpack(&archive).path().join("vault")),
        expected
    );
}
