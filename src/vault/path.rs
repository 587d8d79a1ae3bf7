//! The one path-safety function. Every client-supplied path or slug goes through
//! [`VaultPaths::resolve`] before anything touches the disk.
//!
//! Refused with `UNSAFE_PATH`: empty paths, NUL, absolute paths, backslashes, `.` and `..`
//! components, the state directory, `.git/` (and the other ignored folders), and paths
//! whose existing part resolves through a symlink to a place outside the vault.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// Folder names the daemon never serves or writes as notes.
pub const IGNORED_DIRS: &[&str] = &[".git", ".obsidian", ".trash", ".notevault"];

/// A path inside the vault that passed the safety checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SafePath {
    /// Vault-relative, `/`-separated.
    pub rel: String,
    /// Absolute path on disk.
    pub abs: PathBuf,
}

/// The vault root and the state directory, canonicalised once.
#[derive(Debug, Clone)]
pub struct VaultPaths {
    pub root: PathBuf,
    pub state_dir: PathBuf,
}

impl VaultPaths {
    pub fn new(root: PathBuf, state_dir: PathBuf) -> Self {
        Self { root, state_dir }
    }

    /// Check a vault-relative path and return where it lives on disk.
    pub fn resolve(&self, rel: &str) -> Result<SafePath> {
        if rel.is_empty() {
            return Err(Error::unsafe_path("the path is empty"));
        }
        if rel.contains('\0') {
            return Err(Error::unsafe_path("the path contains a NUL byte"));
        }
        if rel.contains('\\') {
            return Err(Error::unsafe_path(
                "the path contains a backslash; use `/` between folders",
            ));
        }
        if rel.starts_with('/') || Path::new(rel).is_absolute() {
            return Err(Error::unsafe_path("the path is absolute"));
        }
        for component in Path::new(rel).components() {
            match component {
                Component::Normal(name) => {
                    let name = name.to_string_lossy();
                    if IGNORED_DIRS.contains(&name.as_ref()) {
                        return Err(Error::unsafe_path(format!(
                            "`{name}` is reserved and not part of the notes"
                        )));
                    }
                }
                Component::CurDir | Component::ParentDir => {
                    return Err(Error::unsafe_path(
                        "the path contains a `.` or `..` component",
                    ))
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(Error::unsafe_path("the path is absolute"))
                }
            }
        }
        if rel.split('/').any(str::is_empty) {
            return Err(Error::unsafe_path("the path contains an empty component"));
        }
        let abs = self.root.join(rel);
        self.check_inside(&abs)?;
        Ok(SafePath {
            rel: rel.to_string(),
            abs,
        })
    }

    /// Follow symlinks through the deepest existing ancestor of `abs` and refuse the
    /// path if that lands outside the vault or inside the state directory.
    fn check_inside(&self, abs: &Path) -> Result<()> {
        let mut existing = abs;
        let canonical = loop {
            match existing.canonicalize() {
                Ok(c) => break c,
                Err(_) => match existing.parent() {
                    Some(parent) => existing = parent,
                    None => return Err(Error::unsafe_path("the path has no existing parent")),
                },
            }
        };
        if !canonical.starts_with(&self.root) {
            return Err(Error::unsafe_path(
                "the path leaves the vault through a symlink",
            ));
        }
        if canonical.starts_with(&self.state_dir) {
            return Err(Error::unsafe_path(
                "the path points into the state directory",
            ));
        }
        Ok(())
    }

    /// Whether a path found while walking the vault is one the daemon ignores
    /// (state dir, ignored folders, editor swap and temp files).
    pub fn is_ignored(&self, abs: &Path) -> bool {
        if abs.starts_with(&self.state_dir) {
            return true;
        }
        let Ok(rel) = abs.strip_prefix(&self.root) else {
            return true;
        };
        rel.components().any(|c| match c {
            Component::Normal(name) => {
                let name = name.to_string_lossy();
                IGNORED_DIRS.contains(&name.as_ref()) || is_temp_name(&name)
            }
            _ => false,
        })
    }
}

/// Editor swap and temp files: `.*.swp`, `*~`, `.#*`, vim's `4913` probe, our own temp files.
pub fn is_temp_name(name: &str) -> bool {
    name.ends_with('~')
        || name.starts_with(".#")
        || name == "4913"
        || (name.starts_with('.') && (name.ends_with(".swp") || name.ends_with(".swx")))
        || name.starts_with(".notevault-tmp")
}

/// The slug of a vault-relative note path: without `.md`, `/`-separated.
pub fn slug_of(rel: &str) -> &str {
    rel.strip_suffix(".md").unwrap_or(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> (tempfile::TempDir, VaultPaths) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("notes")).unwrap();
        std::fs::write(root.join("notes/a.md"), "a").unwrap();
        let state = root.join(".notevault");
        (dir, VaultPaths::new(root, state))
    }

    #[test]
    fn refuses_every_escape() {
        let (_dir, p) = paths();
        for bad in [
            "",
            "../x.md",
            "notes/../../x.md",
            "/etc/passwd",
            "a\0b.md",
            "notes\\a.md",
            ".git/config",
            ".notevault/meta.sqlite",
            "./notes/a.md",
            "notes//a.md",
        ] {
            let err = p.resolve(bad).unwrap_err();
            assert_eq!(err.reason, crate::error::Reason::UNSAFE_PATH, "{bad:?}");
        }
    }

    #[test]
    fn accepts_inside_paths_existing_or_not() {
        let (_dir, p) = paths();
        assert!(p.resolve("notes/a.md").is_ok());
        assert!(p.resolve("new folder/Zoë.md").is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn refuses_symlinks_leaving_the_vault() {
        let (_dir, p) = paths();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.md"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), p.root.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.md"), p.root.join("s.md")).unwrap();
        assert!(p.resolve("out/secret.md").is_err());
        assert!(p.resolve("s.md").is_err());
        assert!(p.resolve("out/new.md").is_err());
    }
}
