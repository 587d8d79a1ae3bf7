//! The one path-safety function. Every client-supplied path or slug goes through
//! [`VaultPaths::resolve`] (to read) or [`VaultPaths::resolve_new`] (to create a name)
//! before anything touches the disk.
//!
//! Refused with `UNSAFE_PATH` everywhere: empty paths, NUL, absolute paths, backslashes,
//! `.` and `..` components, the state directory, `.git/` (and the other ignored folders;
//! in any letter case where the file system ignores case), and paths whose existing part
//! resolves through a symlink to a place outside the vault.
//!
//! Refused too when the API would create the name ([`name_problem`]): the ignored folder
//! names and `git~1` in any letter case, control characters (C0, DEL, C1), bidirectional
//! controls and marks, invisible characters (a zero-width joiner or non-joiner only
//! between visible ones), components made only of dots or spaces in any Unicode form,
//! a trailing dot or space, components over 255 bytes, and any name `history.git` could
//! not store. The user's folder may still hold such names: they are read and served.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// Folder names the daemon never serves or writes as notes.
pub const IGNORED_DIRS: &[&str] = &[".git", ".obsidian", ".trash", ".notevault"];

/// Longest path component most file systems accept, in bytes.
pub const MAX_COMPONENT_BYTES: usize = 255;

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
    /// The vault's file system ignores letter case (macOS and Windows defaults): `.GIT/`
    /// is the user's `.git/` there, and is ignored like it.
    pub case_insensitive: bool,
}

impl VaultPaths {
    /// Paths of a vault, probing whether its file system ignores letter case.
    pub fn new(root: PathBuf, state_dir: PathBuf) -> Self {
        let case_insensitive = probe_case_insensitive(&root, &state_dir);
        Self {
            root,
            state_dir,
            case_insensitive,
        }
    }

    /// Whether a path component is one of the folders the daemon ignores, in any letter
    /// case where the file system ignores case.
    pub fn is_ignored_dir(&self, name: &str) -> bool {
        IGNORED_DIRS.iter().any(|d| {
            if self.case_insensitive {
                d.eq_ignore_ascii_case(name)
            } else {
                *d == name
            }
        })
    }

    /// Check a vault-relative path the API is about to create (a new note, or the place a
    /// note moves to): [`VaultPaths::resolve`] plus the naming rules of [`name_problem`].
    pub fn resolve_new(&self, rel: &str) -> Result<SafePath> {
        if let Some(why) = name_problem(rel) {
            return Err(Error::unsafe_path(why));
        }
        self.resolve(rel)
    }

    /// Check a listing's path prefix (`projects/`, `proj`, or empty for the whole vault)
    /// by the same rules as a path: `../` or an absolute prefix is `UNSAFE_PATH`, never an
    /// empty list.
    pub fn check_prefix(&self, prefix: &str) -> Result<()> {
        match prefix.strip_suffix('/').unwrap_or(prefix) {
            "" if prefix.is_empty() => Ok(()),
            trimmed => self.resolve(trimmed).map(drop),
        }
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
                    if self.is_ignored_dir(&name) {
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
        // `Path::components` drops a `.` that is not the first component (`a/./b`, `a/.`):
        // the components are checked as written too (found by tests/it/fuzz.rs).
        if rel.split('/').any(|c| c == "." || c == "..") {
            return Err(Error::unsafe_path(
                "the path contains a `.` or `..` component",
            ));
        }
        let abs = self.root.join(rel);
        self.check_inside(&abs)?;
        Ok(SafePath {
            rel: rel.to_string(),
            abs,
        })
    }

    /// Where a catalog note's file is, for a `stat` whose answer is only compared with
    /// the stamp its kept bytes were read under (a catalog path passed [`Self::resolve`]
    /// when it was read). Nothing is read or written through this path: a symlink or
    /// folder swapped in since shows up as another file (device, inode, times), and the
    /// caller then takes [`Self::resolve`]'s checks before it reads.
    pub fn stamp_path(&self, catalog_rel: &str) -> PathBuf {
        self.root.join(catalog_rel)
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

    /// The vault-relative, `/`-separated form of `abs` (lossily as text); `abs` itself when
    /// it is not in the vault.
    pub fn rel_lossy(&self, abs: &Path) -> String {
        abs.strip_prefix(&self.root)
            .unwrap_or(abs)
            .to_string_lossy()
            .replace('\\', "/")
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
            Component::Normal(name) => self.is_ignored_name(&name.to_string_lossy()),
            _ => false,
        })
    }

    /// Whether one component of a path makes the daemon ignore it: an ignored folder's
    /// name, an editor's swap or temp file, ours. A walk that checked a folder with
    /// [`is_ignored`](Self::is_ignored) checks the entries in it by name alone.
    pub fn is_ignored_name(&self, name: &str) -> bool {
        self.is_ignored_dir(name) || is_temp_name(name)
    }
}

/// Why the API must not create `rel` (a vault-relative path, `/`-separated), or `None`.
/// Each component is checked, and a note's file name also without its `.md`, so the slug
/// `..` (file `...md`) is refused like the component `..`.
pub fn name_problem(rel: &str) -> Option<String> {
    let components: Vec<&str> = rel.split('/').collect();
    let last = components.len() - 1;
    for (i, component) in components.iter().enumerate() {
        if let Some(why) = component_problem(component) {
            return Some(why);
        }
        if i == last {
            if let Some(stem) = component.strip_suffix(".md") {
                if let Some(why) = component_problem(stem) {
                    return Some(why);
                }
            }
        }
    }
    if let Some(why) = unstorable(rel) {
        return Some(format!("{rel:?} cannot be kept in history: {why}"));
    }
    None
}

/// Why `path` (vault-relative, `/`-separated) cannot be a path in `history.git` (a git tree), or
/// `None`: the names git refuses (`.git` in any case, `git~1`, NTFS tricks, `.`/`..`,
/// empty components), with the checks gix applies when it writes a tree here.
pub fn unstorable(path: &str) -> Option<String> {
    use gix::validate::path::component::Options;
    let options = Options {
        protect_windows: cfg!(windows),
        protect_hfs: cfg!(target_os = "macos"),
        protect_ntfs: true,
    };
    for component in path.split('/') {
        if let Err(e) = gix::validate::path::component(component.into(), None, options) {
            return Some(format!("git cannot store the name {component:?}: {e}"));
        }
    }
    None
}

/// Why one component (a folder name, a file name or a note's name without `.md`) is not
/// one the API creates.
fn component_problem(name: &str) -> Option<String> {
    use unicode_normalization::UnicodeNormalization;
    if name.is_empty() {
        return Some("the path contains an empty component".into());
    }
    if name.len() > MAX_COMPONENT_BYTES {
        return Some(format!(
            "a name is {} bytes long; at most {MAX_COMPONENT_BYTES} bytes per folder or file name",
            name.len()
        ));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Some(format!(
            "a name contains the control character U+{:04X}",
            c as u32
        ));
    }
    if let Some(c) = name.chars().find(|c| is_bidi_control(*c)) {
        return Some(format!(
            "a name contains the bidirectional control U+{:04X}, which makes it display as something else",
            c as u32
        ));
    }
    if let Some(c) = invisible_char(name) {
        return Some(format!(
            "a name contains the invisible character U+{:04X}, which makes it look like another name",
            c as u32
        ));
    }
    // Compatibility forms fold to what they look like: fullwidth `．` is `.`, `‥` is `..`.
    let folded: String = name.nfkc().collect();
    if folded.chars().all(|c| c == '.' || c.is_whitespace()) {
        return Some(format!("{name:?} is only dots or spaces"));
    }
    if folded.ends_with('.') || folded.ends_with(|c: char| c.is_whitespace()) {
        return Some(format!("{name:?} ends with a dot or a space"));
    }
    let reserved = IGNORED_DIRS.iter().chain(&["git~1"]);
    if let Some(r) = reserved
        .into_iter()
        .find(|r| r.eq_ignore_ascii_case(&folded))
    {
        return Some(format!(
            "`{name}` is reserved (it names `{r}` on some file systems) and not part of the notes"
        ));
    }
    None
}

/// The bidirectional controls: embeddings, overrides, isolates and the marks (LRM, RLM,
/// ALM), each of which can make a name display as another.
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// The first character of `name` that shows as nothing where it stands: zero-width
/// spaces, joiners, the BOM, invisible operators, fillers, tags. A zero-width non-joiner
/// or joiner between two visible characters is kept: Persian words and emoji sequences
/// need them, and there they change how the name looks, never what it is.
fn invisible_char(name: &str) -> Option<char> {
    let chars: Vec<char> = name.chars().collect();
    let visible = |c: Option<&char>| {
        c.is_some_and(|c| !c.is_whitespace() && !c.is_ascii_punctuation() && !is_ignorable(*c))
    };
    chars.iter().enumerate().find_map(|(i, &c)| {
        let joiner = matches!(c, '\u{200C}' | '\u{200D}');
        let kept = joiner && i > 0 && visible(chars.get(i - 1)) && visible(chars.get(i + 1));
        (is_ignorable(c) && !kept).then_some(c)
    })
}

/// Characters a renderer shows as nothing (Unicode's default-ignorable code points, but
/// the variation selectors, which emoji need and which only pick a glyph's form).
fn is_ignorable(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200D}'
            | '\u{2060}'..='\u{2064}'
            | '\u{206A}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// Whether the vault's file system ignores letter case: the state directory (ours, and
/// usually inside the vault) gets a probe file whose name is then looked up in the other
/// case. A state directory on another device is not the vault's file system: then an
/// entry of the vault root is looked up in the other case instead.
#[allow(
    clippy::disallowed_methods,
    reason = "a probe file in the state directory"
)]
fn probe_case_insensitive(root: &Path, state_dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let same_device = match (std::fs::metadata(root), std::fs::metadata(state_dir)) {
        (Ok(r), Ok(s)) => r.dev() == s.dev(),
        _ => false,
    };
    if same_device {
        let probe = state_dir.join(".notevault-tmp-case-probe");
        if std::fs::write(&probe, b"").is_ok() {
            let folded = state_dir
                .join(".NOTEVAULT-TMP-CASE-PROBE")
                .symlink_metadata()
                .is_ok();
            let _ = std::fs::remove_file(&probe);
            return folded;
        }
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return false;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let swapped: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_lowercase() {
                    c.to_ascii_uppercase()
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect();
        if swapped == name {
            continue;
        }
        let (Ok(a), Ok(b)) = (
            entry.path().symlink_metadata(),
            root.join(&swapped).symlink_metadata(),
        ) else {
            return false;
        };
        return a.ino() == b.ino() && a.dev() == b.dev();
    }
    false
}

/// Prefix of our temp files (ignored by the scan, removed at start).
pub const TEMP_PREFIX: &str = ".notevault-tmp-";

/// A vault-relative path split at its last `/`: (folder, file name); the folder is
/// empty at the top of the vault.
pub fn split_path(rel: &str) -> (&str, &str) {
    rel.rsplit_once('/').unwrap_or(("", rel))
}

/// The folders holding a vault-relative path, nearest first (`a/b/c` → `a/b`, `a`).
pub fn ancestors(rel: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(rel.rsplit_once('/').map(|(p, _)| p), |p| {
        p.rsplit_once('/').map(|(parent, _)| parent)
    })
}

/// The path of `name` in the folder holding `rel` (`a/b.md`, `c.md` → `a/c.md`).
pub fn sibling(rel: &str, name: &str) -> String {
    match folder_of(rel) {
        "" => name.to_string(),
        folder => format!("{folder}/{name}"),
    }
}

/// The folder part of a vault-relative path (empty at the top).
pub fn folder_of(rel: &str) -> &str {
    split_path(rel).0
}

/// The file name of a vault-relative path.
pub fn file_name_of(rel: &str) -> &str {
    split_path(rel).1
}

/// Whether a file name (not a path) is a note's: it ends in `.md`.
pub fn is_note_name(name: &str) -> bool {
    name.ends_with(".md")
}

/// Whether a file name (not a path) is an attachment's: not a note, not a temp file.
pub fn is_attachment_name(name: &str) -> bool {
    !is_note_name(name) && !is_temp_name(name)
}

/// Editor swap and temp files: `.*.swp`, `*~`, `.#*`, vim's `4913` probe, our own temp files.
pub fn is_temp_name(name: &str) -> bool {
    name.ends_with('~')
        || name.starts_with(".#")
        || name == "4913"
        || (name.starts_with('.') && (name.ends_with(".swp") || name.ends_with(".swx")))
        || name.starts_with(TEMP_PREFIX.trim_end_matches('-'))
}

/// The slug of a vault-relative note path: without `.md`, `/`-separated.
pub fn slug_of(rel: &str) -> &str {
    rel.strip_suffix(".md").unwrap_or(rel)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests write fixture files")]
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
    fn ancestors_are_the_holding_folders_nearest_first() {
        assert_eq!(ancestors("a/b/c.md").collect::<Vec<_>>(), ["a/b", "a"]);
        assert_eq!(ancestors("c.md").count(), 0);
        assert_eq!(split_path("a/b/c.md"), ("a/b", "c.md"));
        assert_eq!(split_path("c.md"), ("", "c.md"));
        assert_eq!(sibling("a/b.md", "c.md"), "a/c.md");
        assert_eq!(sibling("b.md", "c.md"), "c.md");
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
    fn the_api_never_creates_a_name_of_these() {
        let (_dir, p) = paths();
        let long = format!("{}.md", "a".repeat(256));
        for bad in [
            ".GIT/x.md",
            ".Git/x.md",
            ".git/x.md",
            "git~1/x.md",
            "GIT~1/x.md",
            ".NOTEVAULT/x.md",
            ".Obsidian/x.md",
            ".TRASH/x.md",
            "sub/new\nline.md",
            "tab\there.md",
            "del\u{7f}.md",
            "c1\u{85}.md",
            "evil\u{202E}dm.txt.md",
            "iso\u{2066}late.md",
            "lrm\u{200E}.md",
            "rlm\u{200F}x.md",
            "alm\u{061C}x.md",
            "..\u{200B}/x.md",
            "\u{200B}.md",
            "zw\u{200B}sp.md",
            "bom\u{FEFF}.md",
            "wj\u{2060}x.md",
            "\u{200D}lead.md",
            "trail\u{200C}.md",
            "dot.\u{200D}x.md",
            "tag\u{E0041}.md",
            "\u{FF0E}\u{FF0E}/x.md",
            "\u{2025}/x.md",
            "\u{2024}.md",
            "...md",
            "..md",
            " .md",
            "trailing./x.md",
            "trailing /x.md",
            "name .md",
            "name..md",
            long.as_str(),
        ] {
            let err = p.resolve_new(bad).unwrap_err();
            assert_eq!(err.reason, crate::error::Reason::UNSAFE_PATH, "{bad:?}");
        }
        for good in [
            "notes/a.md",
            "Zoë/Café.md",
            "می\u{200C}خواهم.md",
            "\u{1F468}\u{200D}\u{1F469}.md",
            "\u{2764}\u{FE0F}.md",
            "a.b/c.md",
            ".hidden/x.md",
            "git/x.md",
            "東京/メモ.md",
            "v1.2 notes.md",
        ] {
            assert!(p.resolve_new(good).is_ok(), "{good:?}");
        }
        // Reads of names already on disk are not held to the naming rules.
        assert!(p.resolve("sub/new\nline.md").is_ok());
    }

    #[test]
    fn ignored_folders_follow_the_file_systems_case_rule() {
        let (_dir, mut p) = paths();
        assert!(
            !p.case_insensitive,
            "the test machine's file system keeps case"
        );
        assert!(p.is_ignored(&p.root.join(".git/x.md")));
        assert!(!p.is_ignored(&p.root.join(".GIT/x.md")));
        assert!(p.resolve(".GIT/x.md").is_ok());
        p.case_insensitive = true;
        for name in [
            ".GIT/x.md",
            ".Obsidian/x.md",
            ".Trash/x.md",
            ".NOTEVAULT/x.md",
        ] {
            assert!(p.is_ignored(&p.root.join(name)), "{name}");
            assert!(p.resolve(name).is_err(), "{name}");
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
