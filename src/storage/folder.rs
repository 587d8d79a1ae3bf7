//! Local mode's note bytes behind the seam: the vault folder. Every change goes through
//! `vault::fsio` (atomic, checked against the version read, never over an editor's
//! save); a deleted note goes to `.trash/`, Obsidian's convention.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::files::{NoteFiles, Placements};
use crate::error::Result;
use crate::vault::fsio::{self, DirSyncs, Expect, Temp};

/// The vault folder at `root`.
pub struct Folder {
    root: PathBuf,
}

impl Folder {
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }
}

impl NoteFiles for Folder {
    fn placements(&self) -> Box<dyn Placements + '_> {
        Box::new(FolderPlacements {
            root: &self.root,
            dirs: DirSyncs::default(),
            prepared: Vec::new(),
        })
    }

    fn modified(&self, rel: &str) -> Option<SystemTime> {
        std::fs::metadata(self.root.join(rel))
            .and_then(|m| m.modified())
            .ok()
    }
}

/// Placements in the folder: the folders whose fsync is owed, and the temp files of
/// prepared writes.
struct FolderPlacements<'a> {
    root: &'a Path,
    dirs: DirSyncs,
    prepared: Vec<Temp>,
}

fn expect_of(expect: Option<&str>) -> Expect {
    expect.map_or(Expect::Absent, |h| Expect::Hash(h.to_string()))
}

impl Placements for FolderPlacements<'_> {
    fn write(&mut self, rel: &str, bytes: &[u8], expect: Option<&str>) -> Result<()> {
        fsio::atomic_write_deferred(
            &self.root.join(rel),
            bytes,
            &expect_of(expect),
            &mut self.dirs,
        )
    }

    fn prepare(&mut self, rel: &str, bytes: &[u8], expect: Option<&str>) -> Result<()> {
        let temp = fsio::prepare(&self.root.join(rel), bytes, &expect_of(expect))?;
        self.prepared.push(temp);
        Ok(())
    }

    fn settle_prepared(&mut self) -> Vec<Result<()>> {
        let prepared = std::mem::take(&mut self.prepared);
        let synced = sync_all(&prepared);
        prepared
            .into_iter()
            .zip(synced)
            .map(|(temp, synced)| synced.and_then(|()| temp.place(&mut self.dirs)))
            .collect()
    }

    fn move_note(
        &mut self,
        from: &str,
        to: &str,
        expect: &str,
        rewrite: Option<&[u8]>,
    ) -> Result<()> {
        let root = self.root;
        let (from_abs, to) = (root.join(from), root.join(to));
        // The folders the move creates (deepest first), to take away if the rewrite is
        // refused and the move undone.
        let created: Vec<PathBuf> = if rewrite.is_some() {
            to.ancestors()
                .skip(1)
                .take_while(|d| *d != root && !d.exists())
                .map(Path::to_path_buf)
                .collect()
        } else {
            Vec::new()
        };
        let expect = Expect::Hash(expect.to_string());
        fsio::atomic_move_deferred(&from_abs, &to, &expect, &mut self.dirs)?;
        let Some(new) = rewrite else {
            return Ok(());
        };
        let Err(e) = fsio::atomic_write_deferred(&to, new, &expect, &mut self.dirs) else {
            return Ok(());
        };
        // Refused (an editor saved it, or has it open for writing): the note goes back
        // where it was, whatever it holds now (a rename loses no bytes), with the folders
        // the move made, so the write answered with an error has changed nothing.
        match fsio::move_unchanged(&to, &from_abs, &|_| true) {
            Ok(()) => {
                for dir in &created {
                    if fsio::remove_empty_folder(dir).is_err() {
                        break;
                    }
                }
            }
            Err(back) => tracing::warn!(
                note = %from, error = %back.message,
                "a refused move with new content could not be undone"
            ),
        }
        let _ = self.dirs.sync();
        Err(e)
    }

    fn trash(&mut self, rel: &str, expect: &str) -> Result<()> {
        let trash = trash_path(self.root, rel);
        fsio::atomic_move_deferred(
            &self.root.join(rel),
            &trash,
            &Expect::Hash(expect.to_string()),
            &mut self.dirs,
        )
    }

    fn sync(&mut self) -> Result<()> {
        self.dirs.sync()
    }
}

/// Fsync each prepared temp file, up to eight at once (the disk serves concurrent
/// fsyncs together).
fn sync_all(prepared: &[Temp]) -> Vec<Result<()>> {
    if prepared.len() <= 1 {
        return prepared.iter().map(Temp::sync).collect();
    }
    let chunk = prepared.len().div_ceil(8);
    std::thread::scope(|scope| {
        let handles: Vec<_> = prepared
            .chunks(chunk)
            .map(|part| {
                let handle = scope.spawn(move || part.iter().map(Temp::sync).collect::<Vec<_>>());
                (part.len(), handle)
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|(n, h)| {
                h.join().unwrap_or_else(|_| {
                    vec![Err(crate::error::Error::internal("a file sync failed")); n]
                })
            })
            .collect()
    })
}

/// Where a deleted note (or attachment) goes: `.trash/<path>`, Obsidian's convention,
/// with a numeric suffix before the extension when a file of that name was trashed before
/// (`a 2.md`, `chart 2.png`).
pub fn trash_path(root: &Path, rel: &str) -> PathBuf {
    let base = root.join(".trash");
    let first = base.join(rel);
    if !first.exists() {
        return first;
    }
    let (stem, ext) = match rel.strip_suffix(".md") {
        Some(stem) => (stem, ".md"),
        None => {
            let name_at = rel.rfind('/').map_or(0, |i| i + 1);
            match rel[name_at..].rfind('.').filter(|dot| *dot > 0) {
                Some(dot) => rel.split_at(name_at + dot),
                None => (rel, ""),
            }
        }
    };
    (2..)
        .map(|i| base.join(format!("{stem} {i}{ext}")))
        .find(|p| !p.exists())
        .unwrap_or(first)
}
