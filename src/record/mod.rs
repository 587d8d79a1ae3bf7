//! The one recorder. Every change that is on disk, whoever made it (an API write, an
//! approval, a rollback, a link rewrite, a write recovered after a crash, the watcher, a
//! rescan, the start-up scan, a read that found an external edit), is recorded by
//! [`record`], in one order:
//!
//! 1. history commit (sent to the history thread; waited for when the batch is `durable`),
//! 2. revision rows and note rows (one SQLite transaction),
//! 3. catalog,
//! 4. `committed_seq`,
//! 5. search index.
//!
//! Step 2 also appends each change's sync op (`sync_ops`, at the change's seq, in the
//! same transaction as its revision or attachment change): this is the one place the op
//! log grows. The caller holds the write lock (a `WriteLock` argument), so seqs and
//! history commits advance together. A batch may be a group of API writes
//! (`writes::group`): one history commit carries them all (its `Notevault-Seq` a range),
//! each entry its own seq, revision and op.
//!
//! `reconcile` turns what was found on disk into a batch; `refresh` is reconcile on read
//! (find a note, read bytes that agree with its version).

pub mod files;
pub use files::{attachment_of, attachment_row};
pub mod follow;
pub mod reconcile;
pub mod refresh;

use std::sync::mpsc;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::clock::timestamp;
use crate::error::{Error, Result};
use crate::history::{self, CommitRequest, Content};
use crate::state::{State, WriteLock};
use crate::storage::rows::{AttachmentChangeRow, NoteRow, OpRow, RevisionRow, Settlement};
use crate::vault::attachments::Attachment;
use crate::vault::catalog::note_from;
use crate::vault::note::Note;
use crate::vault::observe::Observed;
use crate::vault::packed::Packed;

/// A commit names the version and note of each of its changes up to this many changes.
pub const NAMED_ENTRIES: usize = 64;

/// One change of one note, on disk already.
#[derive(Debug)]
pub struct Entry {
    /// The note as it was (`None`: a new note).
    pub from: Option<Arc<Note>>,
    /// The file as it is now (`None`: the note is gone).
    pub to: Option<Observed>,
    /// The bytes at `to` when the caller has them all (an API write): history commits
    /// these. Otherwise history commits the observed bytes, or reads a file whose bytes
    /// are not kept (over 10 MiB) when the commit is written.
    pub bytes: Option<Arc<[u8]>>,
    /// `create`, `update`, `move`, `delete`, ...
    pub kind: String,
    pub note_id: String,
    pub version_id: String,
    pub created_at: DateTime<Utc>,
}

/// One change of one attachment (a file that is not a note), on disk already. Its bytes
/// are streamed from the file when the history commit is written, never held here.
#[derive(Debug, Clone)]
pub struct FileEntry {
    pub path: String,
    /// The attachment as it is now (`None`: it is gone).
    pub to: Option<Attachment>,
    /// `create`, `update`, `delete`.
    pub kind: String,
}

/// Changes recorded together: one history commit, one transaction, one seq each.
pub struct Batch<'a> {
    pub actor: &'a str,
    /// The history commit's subject.
    pub subject: String,
    pub entries: Vec<Entry>,
    /// Attachment changes; each takes a seq after the entries'.
    pub files: Vec<FileEntry>,
    /// Commit the whole vault as found (the first start, or history found behind)
    /// instead of the entries' changes: the commit's tree is replaced.
    pub whole_vault: Option<Vec<history::Change>>,
    /// Wait until history has written the commit before anything else is recorded (a
    /// write's receipt leaves only once its change is in `history.git`). Otherwise the
    /// commit is queued and the revisions are recorded at once (what the folder shows is
    /// served without waiting for history).
    pub durable: bool,
    /// More trailers of the history commit: a folder operation names itself
    /// (`Notevault-Folder: create projects/alpha`). A batch with marks gets its commit
    /// even without entries (an empty folder made, or removed).
    pub marks: Vec<(String, String)>,
}

/// What one entry became.
#[derive(Debug, Clone)]
pub struct RecordedEntry {
    pub revision: RevisionRow,
    /// The note as recorded; for a delete, the note as it was.
    pub note: Arc<Note>,
}

/// What [`record`] did.
#[derive(Debug, Default)]
pub struct Recorded {
    /// In the order of the batch's entries.
    pub entries: Vec<RecordedEntry>,
    /// The history commit still on its way (a batch that is not durable).
    pub commit: Option<mpsc::Receiver<Result<history::Written>>>,
    /// For a durable batch: what went wrong in history (a file left out, a failed
    /// commit that is retried), to report beside the receipt.
    pub history_problem: Option<String>,
    /// The seq of each of the batch's attachment changes, in order.
    pub file_seqs: Vec<i64>,
}

/// Record a batch of changes that are on disk (see the module doc for the order). The
/// caller proves it holds this vault's write lock with `write`. An empty batch without a
/// whole-vault commit records nothing.
pub fn record(state: &State, write: &WriteLock<'_>, batch: Batch<'_>) -> Result<Recorded> {
    record_with(state, write, batch, || Ok(()))
}

/// [`record`], running `meanwhile` once the history commit is sent and before anything
/// else is recorded, while the history thread writes it: the folder fsyncs of the
/// batch's writes. Its error is answered once the batch is recorded (the changes are on
/// disk and in history by then, so they are recorded all the same).
pub fn record_with(
    state: &State,
    write: &WriteLock<'_>,
    batch: Batch<'_>,
    meanwhile: impl FnOnce() -> Result<()>,
) -> Result<Recorded> {
    record_settling(state, write, batch, meanwhile, None, None)
}

/// What a batch's writes keep in the transaction that records them (`rows::Settlement`,
/// one per entry or none), made from each entry's revision and its note as recorded (as it
/// was, for a delete), and what went wrong in history (`Recorded::history_problem`).
pub type Settle<'a> = &'a dyn Fn(&[(&RevisionRow, &Note)], Option<&str>) -> Result<Vec<Settlement>>;

/// What a batch's file changes keep in the transaction that records them, one per file
/// or none, made from each file's seq and what went wrong in history.
pub type SettleFiles<'a> = &'a dyn Fn(&[i64], Option<&str>) -> Result<Vec<Settlement>>;

/// [`record_with`], the batch's writes keeping what `settle` (its notes') and
/// `settle_files` (its files') make in the transactions that record them.
pub fn record_settling(
    state: &State,
    write: &WriteLock<'_>,
    batch: Batch<'_>,
    meanwhile: impl FnOnce() -> Result<()>,
    settle: Option<Settle<'_>>,
    settle_files: Option<SettleFiles<'_>>,
) -> Result<Recorded> {
    if !state.holds(write) {
        return Err(crate::error::Error::internal(
            "a change was to be recorded under another vault's write lock",
        ));
    }
    let Batch {
        actor,
        subject,
        entries,
        files,
        whole_vault,
        durable,
        marks,
    } = batch;
    if entries.is_empty() && files.is_empty() && whole_vault.is_none() && marks.is_empty() {
        return Ok(Recorded::default());
    }
    let now = Utc::now();
    let now_s = timestamp(now);
    let first_seq = state.committed_seq() + 1;
    let last_note_seq = state.committed_seq() + entries.len() as i64;
    let last_seq = last_note_seq + files.len() as i64;

    // 1. History.
    let catalog_has = |note: &Note| {
        state
            .catalog
            .read()
            .get(note.slug())
            .is_some_and(|n| n.note_id == note.note_id)
    };
    // The old place of a note leaves history's tree when the note leaves it now (a
    // note found again after an earlier batch recorded its delete has left already).
    let vacated: Vec<bool> = entries
        .iter()
        .map(|e| {
            e.from.as_ref().is_some_and(|from| {
                e.to.as_ref().is_none_or(|to| to.rel != from.path) && catalog_has(from)
            })
        })
        .collect();
    let whole = whole_vault.is_some();
    let changes = match whole_vault {
        Some(all) => all,
        None => {
            let mut changes = Vec::new();
            for (e, vacated) in entries.iter().zip(&vacated) {
                if let (true, Some(from)) = (vacated, &e.from) {
                    changes.push(history::Change {
                        path: from.path.clone(),
                        content: None,
                    });
                }
                if let Some(to) = &e.to {
                    changes.push(history_change(state, to, e.bytes.as_ref()));
                }
            }
            for f in &files {
                changes.push(file_change(state, &f.path, f.to.is_some()));
            }
            changes
        }
    };
    let mut trailers = Vec::new();
    if !entries.is_empty() || !files.is_empty() {
        let range = if first_seq == last_seq {
            first_seq.to_string()
        } else {
            format!("{first_seq}-{last_seq}")
        };
        trailers.push(("Notevault-Seq".to_string(), range));
    }
    // Each note change names its version and its note, in seq order (a group commit of
    // API writes one pair per write), so `git log --grep` finds a version's commit; a
    // larger batch (a rescan, the first start) is told by its seq range alone.
    if !whole && entries.len() <= NAMED_ENTRIES {
        for entry in &entries {
            trailers.push(("Notevault-Version".to_string(), entry.version_id.clone()));
            trailers.push(("Notevault-Note".to_string(), entry.note_id.clone()));
        }
    }
    if let ([], [only]) = (entries.as_slice(), files.as_slice()) {
        trailers.push(("Notevault-Attachment".to_string(), only.path.clone()));
    }
    if whole {
        // Every change up to `last_seq` is accounted for, in this commit or an earlier
        // one, or known to be missing.
        trailers.push(("Notevault-Through".to_string(), last_seq.to_string()));
    }
    trailers.extend(marks);
    let commit = state.history.commit(CommitRequest {
        subject,
        actor: actor.to_string(),
        changes,
        trailers,
        // Every recorded revision has a commit that carries it, also when the tree did
        // not change (the bytes were already in history): a read of it must find them.
        allow_empty: true,
        replace: whole,
        at: None,
    });
    let started = std::time::Instant::now();
    let meanwhile = meanwhile();
    let (commit, commit_id, history_problem) = if durable {
        let (id, problem) = match commit.recv() {
            Ok(Ok(written)) if written.left_out.is_empty() => (written.id, None),
            Ok(Ok(written)) => {
                let why: Vec<String> = written
                    .left_out
                    .iter()
                    .map(|(path, why)| format!("{path:?} was left out of history: {why}"))
                    .collect();
                (written.id, Some(why.join("; ")))
            }
            Ok(Err(e)) => (None, Some(format!("history commit failed: {}", e.message))),
            Err(_) => (
                None,
                Some("history commit failed: the history thread stopped".to_string()),
            ),
        };
        crash_point(state, "after-history");
        (None, id, problem)
    } else {
        (Some(commit), None, None)
    };

    // 2. Revision rows and notes, then the sync ops and note rows the store takes, a part
    // at a time (a first start's are the whole vault's: benches/README.md, "rows in
    // parts").
    let mut revisions = Vec::with_capacity(entries.len());
    let mut deleted = Vec::new();
    let mut notes = Vec::with_capacity(entries.len());
    for (seq, e) in (first_seq..).zip(entries) {
        let Entry {
            from,
            to,
            kind,
            note_id,
            version_id,
            created_at,
            ..
        } = e;
        revisions.push(RevisionRow {
            seq,
            version_id: version_id.clone(),
            note_id: note_id.clone(),
            path: to
                .as_ref()
                .map(|o| o.rel.clone())
                .or_else(|| from.as_ref().map(|n| n.path.clone()))
                .unwrap_or_default(),
            prev_version_id: from.as_ref().map(|n| n.version_id.clone()),
            content_hash: to.as_ref().map(|o| o.content_hash.clone()),
            actor: actor.to_string(),
            kind,
            created_at: now_s.clone(),
            commit_id: commit_id.clone(),
        });
        match to {
            Some(observed) => {
                // Shared from here on: the catalog takes this very allocation.
                let note = note_from(observed, note_id, version_id, created_at, now);
                notes.push((from, Some(Arc::new(note))));
            }
            None => {
                deleted.push(note_id);
                notes.push((from, None));
            }
        }
    }
    let history_us = started.elapsed().as_micros() as u64;
    // The sync ops and note rows of `revisions[range]`.
    let part = |range: std::ops::Range<usize>| {
        let ops = revisions[range.clone()]
            .iter()
            .zip(&notes[range.clone()])
            .map(|(r, (from, to))| op_of(r, from.as_deref(), to.as_deref()))
            .collect::<Vec<_>>();
        let rows = notes[range]
            .iter()
            .filter_map(|(_, to)| to.as_ref())
            .map(|note| NoteRow {
                note_id: note.note_id.clone(),
                path: note.path.clone(),
                version_id: note.version_id.clone(),
                content_hash: note.content_hash.clone(),
                created_at: timestamp(note.created_at),
                observed_at: now_s.clone(),
            })
            .collect::<Vec<_>>();
        (ops, rows)
    };
    let settled = match settle {
        Some(settle) => {
            let mut view = Vec::with_capacity(revisions.len());
            for (r, (from, to)) in revisions.iter().zip(&notes) {
                let note = to.as_deref().or(from.as_deref()).ok_or_else(|| {
                    Error::internal("a recorded change has no note before or after it")
                })?;
                view.push((r, note));
            }
            settle(&view, history_problem.as_deref())?
        }
        None => Vec::new(),
    };
    if settled.is_empty() {
        // Ops and note rows a part at a time (a first start's are the whole vault's).
        state
            .meta
            .record_parts(&revisions, &deleted, &mut |range| part(range))?;
    } else {
        let (ops, rows) = part(0..revisions.len());
        state
            .meta
            .record_settled(&revisions, &ops, &rows, &deleted, &settled)?;
    }
    let meta_us = started.elapsed().as_micros() as u64 - history_us;

    // 3. Catalog.
    let mut recorded = Vec::with_capacity(revisions.len());
    let file_seqs_out;
    {
        let mut catalog = state.catalog.write();
        for (((from, to), revision), vacated) in notes.into_iter().zip(revisions).zip(vacated) {
            if let (true, Some(from)) = (vacated, &from) {
                catalog.remove(from.slug());
            }
            let note = match (to, from) {
                (Some(note), _) => catalog.insert(note),
                (None, Some(from)) => from,
                (None, None) => {
                    return Err(Error::internal("the catalog lost a note it just recorded"))
                }
            };
            recorded.push(RecordedEntry { revision, note });
        }
        // Attachments: their rows (a second transaction), then their catalog.
        let file_seqs: Vec<i64> = (last_note_seq + 1..=last_seq).collect();
        if !files.is_empty() {
            let settled = match settle_files {
                Some(settle) => settle(&file_seqs, history_problem.as_deref())?,
                None => Vec::new(),
            };
            record_files(
                state,
                (&files, &file_seqs),
                actor,
                &now_s,
                commit_id.as_deref(),
                &settled,
            )?;
        }
        // 4. The seq, while readers of the catalog wait: they never see a note newer
        // than the seq they are answered with.
        if !recorded.is_empty() || !files.is_empty() {
            state.set_committed_seq(last_seq);
        }
        file_seqs_out = file_seqs;
    }

    // 5. Search index. Attachment changes take seqs too: the index is told it reflects
    // them, so `indexed_seq` reaches `committed_seq`.
    for entry in &recorded {
        if entry.revision.content_hash.is_some() {
            state.index.upsert(entry.note.clone(), entry.revision.seq);
        } else {
            state
                .index
                .remove(&entry.revision.note_id, entry.revision.seq);
        }
    }
    if let Some(last) = file_seqs_out.last() {
        state.index.advance(*last);
    }
    tracing::debug!(
        entries = recorded.len(),
        durable,
        history_us,
        meta_us,
        total_us = started.elapsed().as_micros() as u64,
        "recorded"
    );
    meanwhile?;
    Ok(Recorded {
        entries: recorded,
        commit,
        history_problem,
        file_seqs: file_seqs_out,
    })
}

/// The sync op of a note's revision: `delete` when the note is gone, `move` when its
/// path changed (its content may have changed too), else `upsert`.
fn op_of(r: &RevisionRow, from: Option<&Note>, to: Option<&Note>) -> OpRow {
    let moved_from = match (from, to) {
        (Some(from), Some(to)) if from.path != to.path => Some(from.path.clone()),
        _ => None,
    };
    let kind = match (to, &moved_from) {
        (None, _) => "delete",
        (Some(_), Some(_)) => "move",
        (Some(_), None) => "upsert",
    };
    let visibility = to.or(from).map_or("standard", |n| n.visibility.as_str());
    OpRow {
        seq: r.seq,
        kind: kind.to_string(),
        note_id: Some(r.note_id.clone()),
        path: r.path.clone(),
        from_path: moved_from,
        version_id: Some(r.version_id.clone()),
        prev_version_id: r.prev_version_id.clone(),
        content_hash: r.content_hash.clone(),
        visibility: visibility.to_string(),
        actor: r.actor.clone(),
        created_at: r.created_at.clone(),
    }
}

/// Record a change of the wrapped key of private notes (`hierarchy`, JSON of ciphertext
/// and public parameters only): in the recorder's order, a history commit that carries
/// its seq (no file changes: `Notevault-E2ee-Key-Version`), the hierarchy and its
/// `e2ee_key` op in one transaction, the seq, the index told. The caller holds the
/// write lock. Answers the seq.
pub fn record_key(state: &State, actor: &str, key_version: u32, hierarchy: &str) -> Result<i64> {
    let seq = state.committed_seq() + 1;
    let now = timestamp(Utc::now());
    let commit = state.history.commit(CommitRequest {
        subject: format!("private notes: key version {key_version}"),
        actor: actor.to_string(),
        changes: Vec::new(),
        trailers: vec![
            ("Notevault-Seq".to_string(), seq.to_string()),
            (
                "Notevault-E2ee-Key-Version".to_string(),
                key_version.to_string(),
            ),
        ],
        allow_empty: true,
        replace: false,
        at: None,
    });
    match commit.recv() {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e.message, "history commit of a key change failed"),
        Err(_) => {
            tracing::warn!("history commit of a key change failed: the history thread stopped")
        }
    }
    let op = OpRow {
        seq,
        kind: "e2ee_key".to_string(),
        note_id: None,
        path: String::new(),
        from_path: None,
        version_id: Some(key_version.to_string()),
        prev_version_id: None,
        content_hash: None,
        visibility: "private".to_string(),
        actor: actor.to_string(),
        created_at: now.clone(),
    };
    state.meta.record_key(&op, hierarchy, &now)?;
    {
        // Readers of the catalog see the seq move with the op, as for any change.
        let _catalog = state.catalog.write();
        state.set_committed_seq(seq);
    }
    state.index.advance(seq);
    Ok(seq)
}

/// The rows of one change of a file kept by path at `seq`: its attachment change and
/// its op (`import` writes them too).
pub fn file_rows(
    f: &FileEntry,
    seq: i64,
    actor: &str,
    now: &str,
    commit_id: Option<&str>,
) -> (AttachmentChangeRow, OpRow) {
    let change = AttachmentChangeRow {
        seq,
        path: f.path.clone(),
        sha256: f.to.as_ref().map(|a| a.sha256.clone()),
        kind: f.kind.clone(),
        actor: actor.to_string(),
        created_at: now.to_string(),
        commit_id: commit_id.map(str::to_string),
    };
    // A private note's file is kept by path like an attachment, but its ops are a
    // note's (`upsert`, `delete`) with visibility `private`.
    let private = crate::vault::is_private_note(&f.path);
    let op = OpRow {
        seq,
        kind: match (private, f.to.is_some()) {
            (true, true) => "upsert",
            (true, false) => "delete",
            (false, true) => "attachment_upsert",
            (false, false) => "attachment_delete",
        }
        .to_string(),
        note_id: None,
        path: f.path.clone(),
        from_path: None,
        version_id: None,
        prev_version_id: None,
        content_hash: f.to.as_ref().map(|a| format!("sha256:{}", a.sha256)),
        visibility: if private { "private" } else { "standard" }.to_string(),
        actor: actor.to_string(),
        created_at: now.to_string(),
    };
    (change, op)
}

/// Attachment rows and catalog, for changes that are in history's queue already. The
/// caller holds the notes' catalog lock, so readers see notes and attachments move on
/// together.
fn record_files(
    state: &State,
    (files, seqs): (&[FileEntry], &[i64]),
    actor: &str,
    now: &str,
    commit_id: Option<&str>,
    settled: &[Settlement],
) -> Result<()> {
    let mut changes = Vec::with_capacity(files.len());
    let mut ops = Vec::with_capacity(files.len());
    let mut upserts = Vec::new();
    let mut removed = Vec::new();
    for (f, seq) in files.iter().zip(seqs) {
        let (change, op) = file_rows(f, *seq, actor, now, commit_id);
        changes.push(change);
        ops.push(op);
        match &f.to {
            Some(a) => upserts.push(attachment_row(a)),
            None => removed.push(f.path.clone()),
        }
    }
    state
        .meta
        .record_attachments_settled(&changes, &ops, &upserts, &removed, settled)?;
    let mut catalog = state.attachments.write();
    for f in files {
        match &f.to {
            Some(a) => catalog.insert(a.clone()),
            None => {
                catalog.remove(&f.path);
            }
        }
    }
    Ok(())
}

/// What a history commit records of an attachment: the file, streamed when the commit
/// is written (`present`), or its removal.
pub fn file_change(state: &State, path: &str, present: bool) -> history::Change {
    history::Change {
        path: path.to_string(),
        content: present.then(|| Content::File(state.paths.root.join(path))),
    }
}

/// What a history commit records of an observed file: the caller's bytes, else the
/// bytes the scan kept, else the file itself (over 10 MiB; see [`Content::File`]).
pub fn history_change(
    state: &State,
    observed: &Observed,
    bytes: Option<&Arc<[u8]>>,
) -> history::Change {
    let content = match (bytes, &observed.content) {
        (Some(bytes), _) => Content::Bytes(Packed::plain(bytes.clone())),
        (None, Some(kept)) => Content::Bytes(kept.clone()),
        (None, None) => Content::File(state.paths.root.join(&observed.rel)),
    };
    history::Change {
        path: observed.rel.clone(),
        content: Some(content),
    }
}

/// A step of a write where a test makes the first write that reaches it fail as on a
/// full disk (`NOTEVAULT_TEST_CRASH_AT=full:step`, or `full:step#n` for the n-th; never
/// set outside tests): what a write that fills the disk after its file landed answers.
pub(crate) fn full_point(state: &State, step: &str) -> Result<()> {
    static REACHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let Some(at) = (state.config.test_crash_at.as_deref()).and_then(|a| a.strip_prefix("full:"))
    else {
        return Ok(());
    };
    let (at, nth) = match at.split_once('#') {
        Some((at, n)) => (at, n.parse().unwrap_or(1)),
        None => (at, 1),
    };
    if at == step && REACHED.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == nth {
        return Err(Error::new(
            crate::error::Reason::INSUFFICIENT_STORAGE,
            format!("test: the disk is full at {step}"),
        ));
    }
    Ok(())
}

/// A step of a write where a test stops the daemon as `kill -9` would
/// (`NOTEVAULT_TEST_CRASH_AT`; never set outside tests): `step` stops the first write
/// that reaches it, `step#n` the n-th (a crash in the middle of a device's batch).
pub(crate) fn crash_point(state: &State, step: &str) {
    static REACHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let Some(at) = state.config.test_crash_at.as_deref() else {
        return;
    };
    let (at, nth) = match at.split_once('#') {
        Some((at, n)) => (at, n.parse().unwrap_or(1)),
        None => (at, 1),
    };
    if at == step && REACHED.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 >= nth {
        eprintln!("notevault: stopping at test crash point {step}");
        std::process::abort();
    }
}
