//! `notevault check`: verify a stopped vault's state directory against its folder,
//! changing nothing. The metadata store is opened read-only (no migration), the index is
//! read without its writer, `history.git` goes through `git fsck` (or gix). What `--repair`
//! does with the report (remove leftovers, rebuild what is derived) is the CLI's: it opens
//! the daemon, which this module must not import.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::vault::catalog::note_from;
use crate::vault::note::key_of;
use crate::vault::path::VaultPaths;

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Finding {
    /// What was looked at: `vault`, `metadata`, `catalog`, `index`, `history`, `temp files`.
    pub area: &'static str,
    /// A problem (the exit status is then non-zero) or a plain fact.
    pub problem: bool,
    pub text: String,
}

/// What `check` found, and what `--repair` may do about it.
#[derive(Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// Our temp files left in the vault by an interrupted write.
    pub leftovers: Vec<PathBuf>,
    /// The index must be dropped and rebuilt.
    pub reindex: bool,
    /// Opening the daemon once (migrations, catalog, index, history) fixes something.
    pub reopen: bool,
    /// Problems `--repair` cannot fix (a damaged store or history, a newer schema).
    pub beyond_repair: usize,
}

impl Report {
    pub fn problems(&self) -> usize {
        self.findings.iter().filter(|f| f.problem).count()
    }

    fn fact(&mut self, area: &'static str, text: impl Into<String>) {
        self.findings.push(Finding {
            area,
            problem: false,
            text: text.into(),
        });
    }

    fn problem(&mut self, area: &'static str, text: impl Into<String>) {
        self.findings.push(Finding {
            area,
            problem: true,
            text: text.into(),
        });
    }
}

fn first(paths: &[String]) -> String {
    paths.first().cloned().unwrap_or_default()
}

/// Check the vault at `root` whose state directory is `state_dir`. An error (one line)
/// means the check could not run: no vault, no state directory, a daemon serving it.
pub fn check(root: &Path, state_dir: &Path) -> Result<Report, String> {
    let root = root
        .canonicalize()
        .map_err(|e| format!("vault folder {} is not usable: {e}", root.display()))?;
    if !root.is_dir() {
        return Err(format!("vault {} is not a folder", root.display()));
    }
    if !state_dir.join("meta.sqlite").is_file() {
        return Err(format!(
            "no state directory at {} (no meta.sqlite): the vault was never served; `notevault serve` makes one, or pass --state-dir",
            state_dir.display()
        ));
    }
    let state_dir = state_dir
        .canonicalize()
        .map_err(|e| format!("state dir {} is not usable: {e}", state_dir.display()))?;
    if crate::index::verify::in_use(&state_dir) {
        return Err(format!(
            "a notevault daemon serves {} (its index is locked): stop it first, or ask it with `notevault status`",
            root.display()
        ));
    }
    let mut report = Report::default();
    let paths = VaultPaths::new(root.clone(), state_dir.clone());
    let scan = crate::vault::scan::scan(&paths);
    report.fact(
        "vault",
        format!(
            "{} ({} notes, {} left out)",
            root.display(),
            scan.observed.len(),
            scan.excluded.len()
        ),
    );
    for excluded in scan.excluded.iter().take(5) {
        report.fact(
            "vault",
            format!("left out {}: {}", excluded.path, excluded.reason),
        );
    }

    // Temp files of an interrupted write: the next start clears them too (one that holds
    // a note swapped out by the write goes back to the note's path).
    report.leftovers = scan.leftovers.clone();
    if report.leftovers.is_empty() {
        report.fact("temp files", "none left");
    } else {
        report.problem(
            "temp files",
            format!(
                "{} leftover temp files of interrupted writes (first: {}); `--repair` clears them",
                report.leftovers.len(),
                report.leftovers[0].display()
            ),
        );
    }

    // The metadata store, read-only.
    let meta_path = state_dir.join("meta.sqlite");
    let inspection = match crate::meta::inspect(&meta_path) {
        Ok(i) => i,
        Err(e) => {
            report.problem(
                "metadata",
                format!(
                    "{} cannot be read ({e}): restore it from a backup, or move it aside (the next start makes a new one: notes keep their files and history, not their ids)",
                    meta_path.display()
                ),
            );
            report.beyond_repair += 1;
            return Ok(report);
        }
    };
    if !inspection.damage.is_empty() {
        report.problem(
            "metadata",
            format!(
                "{} is damaged ({}): restore it from a backup, or move it aside (the next start makes a new one: notes keep their files and history, not their ids)",
                meta_path.display(),
                inspection.damage[0]
            ),
        );
        report.beyond_repair += 1;
        return Ok(report);
    }
    let current = crate::meta::SCHEMA_VERSION;
    if inspection.schema > current {
        report.problem(
            "metadata",
            format!(
                "schema {} is newer than this notevault's ({current}): upgrade notevault",
                inspection.schema
            ),
        );
        report.beyond_repair += 1;
        return Ok(report);
    }
    if inspection.schema < current {
        report.problem(
            "metadata",
            format!(
                "schema {} is older than this notevault's ({current}): the next start upgrades it, or `--repair` now",
                inspection.schema
            ),
        );
        report.reopen = true;
    }
    let bad_ids: Vec<String> = inspection
        .notes
        .iter()
        .filter(|n| uuid::Uuid::parse_str(&n.note_id).is_err())
        .map(|n| n.path.clone())
        .collect();
    if !bad_ids.is_empty() {
        report.problem(
            "metadata",
            format!(
                "{} note rows have a note_id that is not a UUID (first: {})",
                bad_ids.len(),
                first(&bad_ids)
            ),
        );
        report.beyond_repair += 1;
    }
    if !inspection.unversioned.is_empty() {
        report.problem(
            "metadata",
            format!(
                "{} note rows name a version that is not one of their revisions (first: {})",
                inspection.unversioned.len(),
                first(&inspection.unversioned)
            ),
        );
        report.beyond_repair += 1;
    }
    if bad_ids.is_empty() && inspection.unversioned.is_empty() {
        report.fact(
            "metadata",
            format!(
                "ids consistent: {} notes, {} revisions, schema {}, committed seq {}",
                inspection.notes.len(),
                inspection.revisions,
                inspection.schema,
                inspection.committed_seq
            ),
        );
    }

    // The catalog (note rows) against the folder.
    let rows: HashMap<&str, &crate::storage::rows::NoteRow> = inspection
        .notes
        .iter()
        .map(|r| (r.path.as_str(), r))
        .collect();
    let on_disk: HashSet<&str> = scan.observed.iter().map(|o| o.rel.as_str()).collect();
    let (mut changed, mut new) = (Vec::new(), Vec::new());
    let mut current_notes = Vec::new();
    let now = chrono::Utc::now();
    for observed in &scan.observed {
        match rows.get(observed.rel.as_str()) {
            Some(row) if row.content_hash == observed.content_hash => {
                current_notes.push(note_from(
                    observed.clone(),
                    row.note_id.clone(),
                    row.version_id.clone(),
                    now,
                    now,
                ))
            }
            Some(_) => changed.push(observed.rel.clone()),
            None => new.push(observed.rel.clone()),
        }
    }
    let removed: Vec<String> = inspection
        .notes
        .iter()
        .filter(|r| !on_disk.contains(r.path.as_str()))
        .map(|r| r.path.clone())
        .collect();
    if changed.is_empty() && new.is_empty() && removed.is_empty() {
        report.fact("catalog", format!("{} notes, as on disk", rows.len()));
    } else {
        // Edits made while the daemon was stopped are normal: its next start records them.
        report.reopen = true;
        report.fact(
            "catalog",
            format!(
                "since the daemon last ran: {} changed, {} new, {} removed (first: {}); the next start records them, or `--repair` now",
                changed.len(),
                new.len(),
                removed.len(),
                first(changed.iter().chain(&new).chain(&removed).cloned().collect::<Vec<_>>().as_slice())
            ),
        );
    }

    // The search index against the notes whose file is as recorded.
    let known: HashSet<u64> = inspection
        .notes
        .iter()
        .map(|r| key_of(&r.note_id))
        .collect();
    match crate::index::verify::verify(&state_dir, &current_notes, &known) {
        Err(why) => {
            report.problem(
                "index",
                format!("{why}: `--repair` rebuilds it (or `notevault reindex`)"),
            );
            report.reindex = true;
        }
        Ok(index) if index.missing.is_empty() && index.stale.is_empty() && index.extra == 0 => {
            report.fact(
                "index",
                format!("{} documents, every recorded note in it", index.documents),
            );
        }
        Ok(index) => {
            report.problem(
                "index",
                format!(
                    "{} notes missing, {} out of date, {} documents of no note (first: {}): `--repair` rebuilds it",
                    index.missing.len(),
                    index.stale.len(),
                    index.extra,
                    first(if index.missing.is_empty() { &index.stale } else { &index.missing })
                ),
            );
            report.reindex = true;
        }
    }

    // History.
    let git_dir = state_dir.join("history.git");
    if !git_dir.exists() {
        report.problem(
            "history",
            format!(
                "there is no {}: the next start makes it and records the vault as its first commit, or `--repair` now",
                git_dir.display()
            ),
        );
        report.reopen = true;
        return Ok(report);
    }
    match crate::history::verify(&git_dir) {
        Ok(v) if v.head_seq >= inspection.committed_seq => {
            report.fact(
                "history",
                format!("sound ({}), through seq {}", v.how, v.head_seq),
            );
        }
        Ok(v) => {
            report.reopen = true;
            report.fact(
                "history",
                format!(
                    "sound ({}), through seq {} of {}: the next start commits the rest, or `--repair` now",
                    v.how, v.head_seq, inspection.committed_seq
                ),
            );
        }
        Err(why) => {
            report.problem(
                "history",
                format!(
                    "{}: {why}; move it aside and start the daemon: it records the vault as a new first commit (older revisions' bytes are lost)",
                    git_dir.display()
                ),
            );
            report.beyond_repair += 1;
        }
    }
    Ok(report)
}
