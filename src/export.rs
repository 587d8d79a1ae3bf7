//! The export archive: a `.tar.gz` of the vault's notes and attachments exactly as their
//! bytes are on disk, optionally with the history, and a small manifest. No HTTP here:
//! `notevault export` writes it to a file ([`to_file`]) and the `POST /v1/export` route
//! streams [`write_paths`] (with the daemon's `State::paths`) or [`write`] into a
//! response body from a blocking thread. A hosted vault's archive is the same layout,
//! its files read from the database through [`Archive`].
//!
//! Layout of the archive (gzip-compressed POSIX/GNU tar):
//!
//! ```text
//! vault/<path>          every note and attachment, vault-relative, bytes as on disk
//! history.bundle        with `history`: `git bundle create --all` of history.git
//!   or history.git/     the bare repository's files when the git CLI is absent
//! manifest.json         last: format, versions, counts, what was left out and why
//! ```
//!
//! Which files are the vault's is what the scan lists (`vault::scan::list_note_files` and
//! `vault::attachments::list_files`, one ignore rule): the state directory, `.git/`,
//! `.obsidian/`, `.trash/`, editor swap and temp files and our own temp files are never
//! in the archive; a symlinked file inside the vault is stored as the file it points at.
//! Empty folders are not stored.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::vault::path::VaultPaths;

/// What goes into the archive besides the vault's files.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Add the history (`history.git` as a git bundle, or its files without the git CLI).
    pub history: bool,
}

/// A file left out of the archive, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

/// The archive's `manifest.json` (its last entry), also returned by [`write`].
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    /// Always `notevault-export`.
    pub format: &'static str,
    /// Bumped when the layout changes.
    pub format_version: u32,
    pub notevault_version: &'static str,
    /// RFC 3339, when the export started.
    pub created_at: String,
    /// Note files (`.md`) stored under `vault/`.
    pub notes: u64,
    /// Other files stored under `vault/`.
    pub attachments: u64,
    /// Bytes of the files under `vault/` (before compression).
    pub bytes: u64,
    /// `bundle` (`history.bundle`), `bare` (`history.git/`), or `none`.
    pub history: &'static str,
    /// Files the scan lists but the archive could not hold (unreadable, a name that is
    /// not UTF-8, a symlink leaving the vault, a file that changed size while read).
    pub skipped: Vec<Skipped>,
}

/// Format version of the archive layout described in the module documentation.
pub const FORMAT_VERSION: u32 = 1;

/// Files up to this size are read whole before their tar header is written (so a file an
/// editor rewrites meanwhile is stored as one consistent version); larger ones are
/// streamed, and one that changes size while it is read stops the export.
const READ_WHOLE_BYTES: u64 = 64 * 1024 * 1024;

/// Write the archive of the vault at `vault_root` (whose state directory is `state_dir`,
/// left out) to `out`, streaming: nothing but one file at a time is held in memory.
/// Returns the manifest that ends the archive. Reading never changes the vault.
pub fn write(
    vault_root: &Path,
    state_dir: &Path,
    options: &Options,
    out: impl Write,
) -> io::Result<Manifest> {
    let root = vault_root.canonicalize().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("vault folder {} is not usable: {e}", vault_root.display()),
        )
    })?;
    if !root.is_dir() {
        return Err(io::Error::other(format!(
            "vault {} is not a folder",
            root.display()
        )));
    }
    let state_dir = state_dir
        .canonicalize()
        .unwrap_or_else(|_| state_dir.to_path_buf());
    write_paths(&VaultPaths::new(root, state_dir), options, out)
}

/// [`write`] for a vault whose paths are known already (a running daemon's
/// `State::paths`, canonical, its letter-case rule probed).
pub fn write_paths(paths: &VaultPaths, options: &Options, out: impl Write) -> io::Result<Manifest> {
    let root = &paths.root;
    let crate::vault::walk::Walk {
        notes,
        excluded,
        attachments: files,
        attachments_excluded: excluded_files,
        ..
    } = crate::vault::walk::walk(
        paths,
        crate::vault::walk::Want {
            notes: true,
            attachments: true,
            ..Default::default()
        },
    );
    let mut archive = Archive::new(out);
    for e in excluded.into_iter().chain(excluded_files) {
        archive.skip(e.path, e.reason);
    }
    let mut all: Vec<(String, bool)> = notes
        .into_iter()
        .map(|n| (n, true))
        .chain(files.into_iter().map(|f| (f, false)))
        .collect();
    all.sort();
    for (rel, is_note) in all {
        match append_file(&mut archive.tar, &root.join(&rel), &format!("vault/{rel}"))? {
            Ok(size) => archive.count(size, is_note),
            Err(reason) => archive.skip(rel, reason),
        }
    }
    if options.history {
        archive.history(&paths.state_dir.join("history.git"))?;
    }
    archive.finish()
}

/// An archive being written: the vault's files in path order, the history, then the
/// manifest. A local vault's files come from its folder ([`write_paths`]), a hosted
/// vault's from its database; the layout is one.
pub struct Archive<W: Write> {
    tar: tar::Builder<flate2::write::GzEncoder<W>>,
    manifest: Manifest,
}

impl<W: Write> Archive<W> {
    pub fn new(out: W) -> Self {
        let gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
        Archive {
            tar: tar::Builder::new(gz),
            manifest: Manifest {
                format: "notevault-export",
                format_version: FORMAT_VERSION,
                notevault_version: env!("CARGO_PKG_VERSION"),
                created_at: crate::clock::timestamp(chrono::Utc::now()),
                notes: 0,
                attachments: 0,
                bytes: 0,
                history: "none",
                skipped: Vec::new(),
            },
        }
    }

    /// Store `bytes` as the vault file `rel` (mode 0644, modified at `mtime`, seconds).
    pub fn add(&mut self, rel: &str, is_note: bool, bytes: &[u8], mtime: u64) -> io::Result<()> {
        let mut header = regular_header(bytes.len() as u64, 0o644, mtime);
        self.tar
            .append_data(&mut header, format!("vault/{rel}"), bytes)?;
        self.count(bytes.len() as u64, is_note);
        Ok(())
    }

    /// Name a file of the vault the archive does not hold, and why.
    pub fn skip(&mut self, path: String, reason: String) {
        self.manifest.skipped.push(Skipped { path, reason });
    }

    /// Add the history of the bare repository `git_dir` (see [`append_history`]).
    pub fn history(&mut self, git_dir: &Path) -> io::Result<()> {
        self.manifest.history = append_history(&mut self.tar, git_dir)?;
        Ok(())
    }

    fn count(&mut self, size: u64, is_note: bool) {
        self.manifest.bytes += size;
        if is_note {
            self.manifest.notes += 1;
        } else {
            self.manifest.attachments += 1;
        }
    }

    /// Write the manifest, end the archive and flush the sink.
    pub fn finish(mut self) -> io::Result<Manifest> {
        let json = serde_json::to_vec_pretty(&self.manifest).map_err(io::Error::other)?;
        let mut header = regular_header(json.len() as u64, 0o644, now_secs());
        self.tar
            .append_data(&mut header, "manifest.json", json.as_slice())?;
        let gz = self.tar.into_inner()?;
        let mut out = gz.finish()?;
        out.flush()?;
        Ok(self.manifest)
    }
}

/// Write the archive to `dest` without ever leaving a torn file there: a temp file
/// beside it, fsync, then a link (refusing an existing `dest`) or, with `replace`, a
/// rename over it, and an fsync of the folder. An existing `dest` without `replace` is
/// refused before any work.
pub fn to_file(
    vault_root: &Path,
    state_dir: &Path,
    options: &Options,
    dest: &Path,
    replace: bool,
) -> io::Result<Manifest> {
    write_file(dest, replace, |out| {
        write(vault_root, state_dir, options, out)
    })
}

/// [`to_file`] with the archive written by `write_to` (a hosted vault's, say).
#[allow(
    clippy::disallowed_methods,
    reason = "the export's own output file, chosen by the operator, outside the vault's notes"
)]
pub fn write_file(
    dest: &Path,
    replace: bool,
    write_to: impl FnOnce(&mut dyn Write) -> io::Result<Manifest>,
) -> io::Result<Manifest> {
    if !replace && dest.symlink_metadata().is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists: pass --force to replace it", dest.display()),
        ));
    }
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = dest
        .file_name()
        .ok_or_else(|| io::Error::other(format!("{} names no file", dest.display())))?;
    let temp = dir.join(format!(
        "{}export-{}-{}",
        crate::vault::path::TEMP_PREFIX,
        name.to_string_lossy(),
        uuid::Uuid::new_v4().simple()
    ));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot write in {}: {e}", dir.display())))?;
    let placed = (|| {
        let mut out = io::BufWriter::with_capacity(1 << 20, file);
        let manifest = write_to(&mut out)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        if replace {
            std::fs::rename(&temp, dest)?;
        } else {
            // A link fails on an existing name: a file that appeared meanwhile is kept.
            std::fs::hard_link(&temp, dest).map_err(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    io::Error::new(
                        e.kind(),
                        format!("{} exists: pass --force to replace it", dest.display()),
                    )
                } else {
                    e
                }
            })?;
            std::fs::remove_file(&temp)?;
        }
        File::open(&dir)?.sync_all()?;
        Ok(manifest)
    })();
    if placed.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    placed
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn regular_header(size: u64, mode: u32, mtime: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(mode);
    header.set_mtime(mtime);
    header
}

/// Append one vault file as `name`. The outer error stops the export (the sink failed,
/// or a large file changed size under the reader); the inner one leaves the file out.
fn append_file<W: Write>(
    tar: &mut tar::Builder<W>,
    abs: &Path,
    name: &str,
) -> io::Result<Result<u64, String>> {
    use std::os::unix::fs::PermissionsExt;
    let mut file = match File::open(abs) {
        Ok(f) => f,
        Err(e) => return Ok(Err(format!("unreadable: {e}"))),
    };
    let meta = match file.metadata() {
        Ok(m) if m.is_file() => m,
        Ok(_) => return Ok(Err("not a regular file".into())),
        Err(e) => return Ok(Err(format!("unreadable: {e}"))),
    };
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mode = meta.permissions().mode() & 0o777;
    if meta.len() <= READ_WHOLE_BYTES {
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        if let Err(e) = file.read_to_end(&mut bytes) {
            return Ok(Err(format!("unreadable: {e}")));
        }
        let mut header = regular_header(bytes.len() as u64, mode, mtime);
        tar.append_data(&mut header, name, bytes.as_slice())?;
        return Ok(Ok(bytes.len() as u64));
    }
    let size = meta.len();
    let mut header = regular_header(size, mode, mtime);
    let exact = Exact {
        inner: file.take(size),
        left: size,
        path: abs,
    };
    tar.append_data(&mut header, name, exact)?;
    Ok(Ok(size))
}

/// A reader that must yield exactly `left` bytes: a file that shrank while it was being
/// streamed would tear the archive, so it fails instead.
struct Exact<'a, R> {
    inner: R,
    left: u64,
    path: &'a Path,
}

impl<R: Read> Read for Exact<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && self.left > 0 && !buf.is_empty() {
            return Err(io::Error::other(format!(
                "{} changed size while it was exported: export again",
                self.path.display()
            )));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Append the history: a bundle of every ref when the git CLI is there, else the bare
/// repository's files (refs before objects, so every ref copied names objects that are
/// copied too: objects are only ever added). Returns the manifest's `history` value.
fn append_history<W: Write>(tar: &mut tar::Builder<W>, git_dir: &Path) -> io::Result<&'static str> {
    if !git_dir.join("HEAD").is_file() {
        return Err(io::Error::other(format!(
            "no history at {}: serve the vault once, or export without --history",
            git_dir.display()
        )));
    }
    if let Some(bundle) = git_bundle(git_dir)? {
        let result = (|| {
            let file = File::open(&bundle)?;
            let size = file.metadata()?.len();
            let mut header = regular_header(size, 0o644, now_secs());
            tar.append_data(
                &mut header,
                "history.bundle",
                Exact {
                    inner: file.take(size),
                    left: size,
                    path: &bundle,
                },
            )
        })();
        #[allow(clippy::disallowed_methods, reason = "our own temp bundle")]
        let _ = std::fs::remove_file(&bundle);
        result?;
        return Ok("bundle");
    }
    for part in ["HEAD", "config", "packed-refs", "refs", "objects"] {
        let path = git_dir.join(part);
        let name = format!("history.git/{part}");
        if path.is_dir() {
            tar.append_dir_all(&name, &path)?;
        } else if path.is_file() {
            tar.append_path_with_name(&path, &name)?;
        }
    }
    Ok("bare")
}

/// `git bundle create --all` into a temp file beside the repository (in the state
/// directory: nothing is written outside the vault and the state directory); `None` when
/// the git CLI is absent or the history has no commit yet (then the bare files are
/// stored).
fn git_bundle(git_dir: &Path) -> io::Result<Option<PathBuf>> {
    let beside = git_dir.parent().unwrap_or(git_dir);
    let bundle = beside.join(format!(
        ".notevault-export-{}.bundle",
        uuid::Uuid::new_v4().simple()
    ));
    let out = match Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["bundle", "create", "--quiet"])
        .arg(&bundle)
        .arg("--all")
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if out.status.success() && bundle.is_file() {
        return Ok(Some(bundle));
    }
    #[allow(clippy::disallowed_methods, reason = "our own temp bundle")]
    let _ = std::fs::remove_file(&bundle);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("empty bundle") {
        return Ok(None);
    }
    Err(io::Error::other(format!(
        "git bundle of {} failed: {}",
        git_dir.display(),
        stderr.trim()
    )))
}
