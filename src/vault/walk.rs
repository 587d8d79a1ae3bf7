//! One walk of the vault folder, the folders side by side: the note files, the attachment
//! files, what was left out and why, and our own leftover temp files. Symlinked folders
//! are not followed; a symlinked file is kept only when it stays inside the vault and
//! ends at a file (`VaultPaths::resolve`). Ignored folders and temp files are the ones
//! `VaultPaths::is_ignored` names. Reading a folder never writes to it.
//!
//! A warm start wants a stat of every note file: taken here, relative to the open folder
//! (`fstatat`), it costs the kernel no walk of the whole path.

use std::fs::{DirEntry, Metadata};
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use rayon::prelude::*;

use crate::vault::observe::Excluded;
use crate::vault::path::VaultPaths;
use crate::vault::path::{is_attachment_name, is_note_name};

/// What a walk lists.
#[derive(Debug, Clone, Copy, Default)]
pub struct Want {
    pub notes: bool,
    /// A stat of each note file (following a symlink).
    pub note_stats: bool,
    pub attachments: bool,
}

/// What a walk found, each list sorted by path.
#[derive(Debug, Default)]
pub struct Walk {
    /// Note files (vault-relative, `/`-separated).
    pub notes: Vec<String>,
    /// With [`Want::note_stats`]: the stat of each of `notes`, in the same order (`None`
    /// when it failed).
    pub note_stats: Option<Vec<Option<Metadata>>>,
    /// Notes and folders left out (unreadable, a symlink that leaves the vault).
    pub excluded: Vec<Excluded>,
    /// Our own temp files left by an interrupted write (absolute paths).
    pub leftovers: Vec<PathBuf>,
    /// Attachment files (vault-relative).
    pub attachments: Vec<String>,
    /// Attachment files left out.
    pub attachments_excluded: Vec<Excluded>,
}

/// One folder's share of a walk, before the folders' shares are put together.
#[derive(Default)]
struct Found {
    notes: Vec<(String, Option<Metadata>)>,
    excluded: Vec<Excluded>,
    leftovers: Vec<PathBuf>,
    attachments: Vec<String>,
    attachments_excluded: Vec<Excluded>,
}

impl Found {
    fn append(&mut self, mut other: Found) {
        self.notes.append(&mut other.notes);
        self.excluded.append(&mut other.excluded);
        self.leftovers.append(&mut other.leftovers);
        self.attachments.append(&mut other.attachments);
        self.attachments_excluded
            .append(&mut other.attachments_excluded);
    }
}

/// Walk the vault for what `want` names.
pub fn walk(paths: &VaultPaths, want: Want) -> Walk {
    walk_from(paths, paths.root.clone(), String::new(), want)
}

/// Walk one folder of the vault (`dir`, absolute) for what `want` names, by the rules of
/// [`walk`]: what a folder created or moved in holds. Nothing for a folder outside the
/// vault, an ignored one or one that is no folder (a symlink to one is not followed).
pub fn walk_under(paths: &VaultPaths, dir: &Path, want: Want) -> Walk {
    let rel = dir
        .strip_prefix(&paths.root)
        .ok()
        .and_then(|r| r.to_str())
        .map(|r| r.replace('\\', "/"));
    let is_folder = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
    match rel {
        Some(rel) if is_folder && !paths.is_ignored(dir) => {
            walk_from(paths, dir.to_path_buf(), rel, want)
        }
        _ => Walk::default(),
    }
}

fn walk_from(paths: &VaultPaths, dir: PathBuf, rel: String, want: Want) -> Walk {
    let mut found = Found::default();
    // A vault inside its own state directory lists nothing (`VaultPaths::is_ignored`).
    if !paths.root.starts_with(&paths.state_dir) {
        // Each folder is a job of its own, not a call inside its parent's: a deep tree
        // never grows a thread's stack.
        let parts = Mutex::new(Vec::new());
        rayon::scope(|scope| walk_folder(scope, paths, dir, Some(rel), want, &parts));
        parts.into_inner().into_iter().for_each(|p| found.append(p));
    }
    found.notes.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
    found.attachments.sort_unstable();
    found.excluded.sort_by(|a, b| a.path.cmp(&b.path));
    found
        .attachments_excluded
        .sort_by(|a, b| a.path.cmp(&b.path));
    found.leftovers.sort();
    let (notes, stats): (Vec<String>, Vec<Option<Metadata>>) = found.notes.into_iter().unzip();
    Walk {
        notes,
        note_stats: want.note_stats.then_some(stats),
        excluded: found.excluded,
        leftovers: found.leftovers,
        attachments: found.attachments,
        attachments_excluded: found.attachments_excluded,
    }
}

/// One folder (`rel`: its vault-relative path, `None` when it is not valid UTF-8): its
/// files into `parts`, its subfolders as jobs of `scope`.
fn walk_folder<'s>(
    scope: &rayon::Scope<'s>,
    paths: &'s VaultPaths,
    dir: PathBuf,
    rel: Option<String>,
    want: Want,
    parts: &'s Mutex<Vec<Found>>,
) {
    let mut found = Found::default();
    let mut folders = Vec::new();
    match std::fs::read_dir(&dir) {
        Ok(entries) => {
            for entry in entries {
                match entry {
                    Ok(entry) => take_entry(
                        paths,
                        rel.as_deref(),
                        &entry,
                        want,
                        &mut folders,
                        &mut found,
                    ),
                    Err(err) => unreadable(paths, &dir, &err, want, &mut found),
                }
            }
        }
        Err(err) => unreadable(paths, &dir, &err, want, &mut found),
    }
    parts.lock().push(found);
    for (abs, rel) in folders {
        scope.spawn(move |scope| walk_folder(scope, paths, abs, rel, want, parts));
    }
}

fn unreadable(paths: &VaultPaths, at: &Path, err: &std::io::Error, want: Want, found: &mut Found) {
    if want.notes {
        found.excluded.push(Excluded {
            path: paths.rel_lossy(at),
            reason: format!("unreadable: {err}"),
        });
    }
}

/// File one entry of the folder `parent` (its vault-relative path): a folder to walk, a
/// note, an attachment, a leftover, or nothing.
fn take_entry(
    paths: &VaultPaths,
    parent: Option<&str>,
    entry: &DirEntry,
    want: Want,
    folders: &mut Vec<(PathBuf, Option<String>)>,
    found: &mut Found,
) {
    let os_name = entry.file_name();
    let name = os_name.to_string_lossy();
    // A `\` in a name is read as a separator, as the watcher reads it.
    let rel = match (parent, os_name.to_str().map(|n| n.replace('\\', "/"))) {
        (Some(""), Some(name)) => Some(name),
        (Some(parent), Some(name)) => Some(format!("{parent}/{name}")),
        _ => None,
    };
    let file_type = match entry.file_type() {
        Ok(file_type) => file_type,
        Err(err) => return unreadable(paths, &entry.path(), &err, want, found),
    };
    if file_type.is_dir() {
        let abs = entry.path();
        if !paths.is_ignored(&abs) {
            folders.push((abs, rel));
        }
        return;
    }
    if name.starts_with(crate::vault::path::TEMP_PREFIX) {
        if want.notes && file_type.is_file() {
            found.leftovers.push(entry.path());
        }
        return;
    }
    let note = want.notes && is_note_name(&name);
    let attachment = want.attachments && is_attachment_name(&name);
    // The folder passed `is_ignored`: what is left to check is the name.
    if !(note || attachment) || paths.is_ignored_name(&name) {
        return;
    }
    let Some(rel) = rel else {
        if note {
            found.excluded.push(Excluded {
                path: paths.rel_lossy(&entry.path()),
                reason: "unreadable: the file name is not valid UTF-8".into(),
            });
        }
        return;
    };
    let symlink = file_type.is_symlink();
    if note {
        if symlink {
            // A link is served only when it stays inside the vault and ends at a file.
            if let Err(err) = paths.resolve(&rel) {
                found.excluded.push(Excluded {
                    path: rel,
                    reason: format!("symlink: {}", err.message),
                });
                return;
            }
            if !entry.path().is_file() {
                return;
            }
        }
        let stat = want.note_stats.then(|| {
            if symlink {
                std::fs::metadata(entry.path()).ok()
            } else {
                entry.metadata().ok()
            }
        });
        found.notes.push((rel, stat.flatten()));
        return;
    }
    if symlink && (paths.resolve(&rel).is_err() || !entry.path().is_file()) {
        found.attachments_excluded.push(Excluded {
            path: rel,
            reason: "symlink: it does not end at a file inside the vault".into(),
        });
        return;
    }
    found.attachments.push(rel);
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests write fixture files")]
mod tests {
    use super::*;

    #[test]
    fn one_walk_lists_notes_with_their_stats_and_attachments() {
        let dir = tempfile::tempdir().unwrap();
        let (root, state) = (dir.path().join("vault"), dir.path().join("state"));
        let outside = dir.path().join("outside");
        for d in [&root, &state, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        let write = |rel: &str| {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, rel).unwrap();
        };
        for rel in [
            "b.md",
            "a/deep/c.md",
            "a/img.png",
            "a/notes.txt",
            ".obsidian/x.md",
            ".trash/gone.md",
            "a/.notevault-tmp-123",
            "folder.md/inside.md",
        ] {
            write(rel);
        }
        std::fs::write(outside.join("secret.md"), "out").unwrap();
        std::fs::write(outside.join("secret.png"), "out").unwrap();
        let link =
            |target: &Path, rel: &str| std::os::unix::fs::symlink(target, root.join(rel)).unwrap();
        link(&outside.join("secret.md"), "leak.md");
        link(&outside.join("secret.png"), "leak.png");
        link(&root.join("b.md"), "a/alias.md");
        link(&outside, "linked-folder");
        let paths = VaultPaths::new(root.clone(), state);

        let w = walk(
            &paths,
            Want {
                notes: true,
                note_stats: true,
                attachments: true,
            },
        );
        assert_eq!(
            w.notes,
            ["a/alias.md", "a/deep/c.md", "b.md", "folder.md/inside.md"]
        );
        let stats = w.note_stats.unwrap();
        for (rel, stat) in w.notes.iter().zip(&stats) {
            let want = std::fs::metadata(root.join(rel)).unwrap();
            let got = stat.as_ref().unwrap();
            assert_eq!(
                (got.len(), got.modified().unwrap()),
                (want.len(), want.modified().unwrap()),
                "{rel}"
            );
            assert!(got.is_file(), "{rel}: the stat follows a link");
        }
        assert_eq!(w.attachments, ["a/img.png", "a/notes.txt"]);
        let reasons: Vec<(&str, bool)> = w
            .excluded
            .iter()
            .map(|e| (e.path.as_str(), e.reason.starts_with("symlink:")))
            .collect();
        assert_eq!(reasons, [("leak.md", true)]);
        let files_out: Vec<&str> = w
            .attachments_excluded
            .iter()
            .map(|e| e.path.as_str())
            .collect();
        assert_eq!(files_out, ["leak.png", "linked-folder"], "not followed");
        assert_eq!(w.leftovers, [root.join("a/.notevault-tmp-123")]);

        // Only what is asked for.
        let notes_only = walk(
            &paths,
            Want {
                notes: true,
                ..Want::default()
            },
        );
        assert_eq!(notes_only.notes, w.notes);
        assert!(notes_only.note_stats.is_none() && notes_only.attachments.is_empty());
        let files_only = walk(
            &paths,
            Want {
                attachments: true,
                ..Want::default()
            },
        );
        assert!(files_only.notes.is_empty() && files_only.leftovers.is_empty());
        assert_eq!(files_only.attachments, w.attachments);

        // A `\` in a name is a separator, as the watcher reads it.
        write("x\\y.md");
        let named = walk(
            &paths,
            Want {
                notes: true,
                ..Want::default()
            },
        );
        assert!(
            named.notes.contains(&"x/y.md".to_string()),
            "{:?}",
            named.notes
        );
    }

    #[test]
    fn a_large_folder_is_listed_whole_with_each_notes_own_stat() {
        let dir = tempfile::tempdir().unwrap();
        let (root, state) = (dir.path().join("vault"), dir.path().join("state"));
        std::fs::create_dir_all(&root).unwrap();
        let count = 1543;
        for i in 0..count {
            // Each note's size names it, so a stat paired with another note shows.
            std::fs::write(root.join(format!("n{i}.md")), "x".repeat(i)).unwrap();
            if i % 100 == 0 {
                std::fs::write(root.join(format!("f{i}.pdf")), b"%PDF").unwrap();
            }
        }
        let paths = VaultPaths::new(root, state);
        let w = walk(
            &paths,
            Want {
                notes: true,
                note_stats: true,
                attachments: true,
            },
        );
        assert_eq!(w.notes.len(), count);
        assert!(w.notes.is_sorted());
        for (rel, stat) in w.notes.iter().zip(w.note_stats.unwrap()) {
            let i: u64 = rel[1..rel.len() - 3].parse().unwrap();
            assert_eq!(stat.unwrap().len(), i, "{rel}");
        }
        assert_eq!(w.attachments.len(), count.div_ceil(100));
    }

    #[test]
    fn a_deep_tree_is_walked_and_a_vault_inside_its_state_dir_lists_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (root, state) = (dir.path().join("vault"), dir.path().join("state"));
        // 1,500 folders deep: each is a job of its own, no thread's stack grows with it.
        let deep: PathBuf = std::iter::repeat_n("d", 1500).collect();
        std::fs::create_dir_all(root.join(&deep)).unwrap();
        std::fs::write(root.join(&deep).join("bottom.md"), "# Bottom\n").unwrap();
        std::fs::write(root.join("top.md"), "# Top\n").unwrap();
        let want = Want {
            notes: true,
            note_stats: true,
            attachments: true,
        };
        let w = walk(&VaultPaths::new(root.clone(), state), want);
        let bottom = format!("{}/bottom.md", deep.display());
        assert_eq!(w.notes, [bottom.as_str(), "top.md"]);
        assert!(w.excluded.is_empty(), "{:?}", w.excluded);

        // The state directory is the vault's parent: everything in it is the daemon's.
        let inside = walk(&VaultPaths::new(root, dir.path().to_path_buf()), want);
        assert!(inside.notes.is_empty() && inside.attachments.is_empty());
        assert_eq!(inside.note_stats.map(|s| s.len()), Some(0));
    }
}
