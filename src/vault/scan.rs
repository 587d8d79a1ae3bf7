//! The startup scan: find every note file of the vault and observe it (read, hash, facts),
//! in parallel. Reading never writes: no file, no mtime, no atime beyond the OS default.

use std::collections::HashSet;
use std::time::SystemTime;

use rayon::prelude::*;

use crate::vault::observe::{observe_sharing, Excluded, FileStamp, Observed, Reading};
use crate::vault::path::VaultPaths;
use crate::vault::scan_cache::ScanCache;
use crate::vault::walk::{walk, Walk, Want};

/// What a scan found.
#[derive(Debug, Default)]
pub struct ScanResult {
    pub observed: Vec<Observed>,
    pub excluded: Vec<Excluded>,
    /// Our own temp files left by an interrupted write (absolute paths).
    pub leftovers: Vec<std::path::PathBuf>,
    /// The files whose hash and facts came from the scan cache, unread: their
    /// observations carry no bytes (`content: None`) until the verify reads them.
    pub recalled: HashSet<String>,
}

/// Walk the vault and list the note files (vault-relative, sorted), what was left out,
/// and our own leftover temp files.
pub fn list_note_files(paths: &VaultPaths) -> Walk {
    walk(
        paths,
        Want {
            notes: true,
            ..Want::default()
        },
    )
}

/// Scan the whole vault, with a progress bar on stderr when it is a terminal and the
/// vault is large enough for the scan to take a moment.
pub fn scan(paths: &VaultPaths) -> ScanResult {
    scan_with(paths, list_note_files(paths), None)
}

use crate::vault::observe::Known;

/// [`scan`] that keeps the caller's packed copy of bytes it already holds (`known`)
/// instead of packing the one it read (a rescan of a vault whose bytes the catalog keeps
/// then holds one copy of them, not two, and packs only what changed), and hands each
/// observation to `take` on the scan's workers as soon as it is made, keeping what
/// `take` returns (in path order): a rescan keeps what changed and a little of the rest,
/// never every note's facts at once.
pub fn scan_taking<T: Send>(
    paths: &VaultPaths,
    known: Known<'_>,
    take: impl Fn(Observed) -> T + Sync,
) -> (Vec<T>, Vec<Excluded>) {
    let Walk {
        notes, excluded, ..
    } = list_note_files(paths);
    read_all(paths, &notes, Some(known), take, excluded)
}

/// [`scan`] of the files `listed` by [`list_note_files`], taking from `cache` the hash
/// and facts of every file whose stamp is the cached one (a stat instead of a read;
/// listed in [`ScanResult::recalled`]); the other files are read.
pub fn scan_with(paths: &VaultPaths, listed: Walk, cache: Option<ScanCache>) -> ScanResult {
    scan_observing(paths, listed, cache)
}

fn scan_observing(paths: &VaultPaths, listed: Walk, cache: Option<ScanCache>) -> ScanResult {
    let Walk {
        notes: files,
        note_stats,
        excluded,
        leftovers,
        ..
    } = listed;
    let mut observed = Vec::new();
    let mut recalled = HashSet::new();
    let to_read = match cache {
        None => files,
        Some(mut cache) => {
            // Taken by the walk when it was asked to (relative to each folder), else now.
            let stats: Vec<Option<std::fs::Metadata>> = note_stats.unwrap_or_else(|| {
                files
                    .par_iter()
                    .map(|rel| std::fs::metadata(paths.root.join(rel)).ok())
                    .collect()
            });
            let mut to_read = Vec::new();
            observed.reserve(files.len());
            for (rel, meta) in files.into_iter().zip(stats) {
                let Some(meta) = meta.filter(|m| m.is_file()) else {
                    to_read.push(rel);
                    continue;
                };
                let stamp = FileStamp::of(&meta);
                match cache.take(&rel, &stamp) {
                    Some((content_hash, facts)) => {
                        let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                        recalled.insert(rel.clone());
                        observed.push(Observed {
                            rel,
                            size: stamp.size,
                            mtime,
                            created: meta.created().unwrap_or(mtime).min(mtime),
                            content_hash,
                            facts,
                            content: None,
                            stamp: Some(stamp),
                        });
                    }
                    None => to_read.push(rel),
                }
            }
            to_read
        }
    };
    let (read, excluded) = read_all(paths, &to_read, None, |o| o, excluded);
    if observed.is_empty() {
        observed = read;
    } else {
        observed.extend(read);
    }
    ScanResult {
        observed,
        excluded,
        leftovers,
        recalled,
    }
}

/// Read and observe the files `rel` (in parallel, with a progress bar), each observation
/// handed to `take`; what `take` returns in `rel`'s order, and `excluded` with the files
/// that could not be read.
fn read_all<T: Send>(
    paths: &VaultPaths,
    rel: &[String],
    known: Option<Known<'_>>,
    take: impl Fn(Observed) -> T + Sync,
    mut excluded: Vec<Excluded>,
) -> (Vec<T>, Vec<Excluded>) {
    let progress = crate::progress::Progress::start("scanning", "notes", rel.len() as u64);
    let results: Vec<Result<T, Excluded>> = rel
        .par_iter()
        .map_init(Reading::default, |reading, rel| {
            let out = observe_sharing(&paths.root, rel, known, reading)
                .map(&take)
                .map_err(|err| Excluded {
                    path: rel.clone(),
                    reason: format!("unreadable: {err}"),
                });
            progress.inc(1);
            out
        })
        .collect();
    progress.finish();
    // Collected in place (one buffer, not two).
    let taken = results
        .into_iter()
        .filter_map(|r| r.map_err(|e| excluded.push(e)).ok())
        .collect();
    (taken, excluded)
}
