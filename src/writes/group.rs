//! Group commit: writes that arrive together are applied together. Each write is queued
//! (`State::write_queue`); the leader takes every queued write and applies them, in
//! arrival order, under the write lock:
//!
//! 1. each write is planned (its preconditions checked against the catalog), its intent
//!    stored, its temp file written: a write that fails here (or when its file is put
//!    in place) gets its own error and the others go on;
//! 2. the temp files are fsynced at once, then each is put in place;
//! 3. the one recorder records them as one batch: one history commit, during which the
//!    folders they touched are fsynced once each, then (both done) one transaction of
//!    revisions and sync ops, each write its own seq and version, and each write's
//!    receipt (under its key), budget count and audit event;
//! 4. each write gets its receipt (or the batch's error).
//!
//! The writes of one group never touch the same note: a write naming a note that a
//! staged write touches (or a note the catalog does not know yet, which may be one just
//! staged) first has the group recorded, so it is planned against the catalog as it
//! would be alone. A write by another actor, a move or rename (its links are rewritten
//! once it is recorded), a folder or an attachment operation also has the group
//! recorded first, and is then applied alone as before. So every answer (conflicts,
//! preconditions, names taken) is the one the write would get one at a time.
//!
//! One leader at a time (`WriteQueue::lead`): it takes the write lock, then the queue
//! (the writes that came while the lock was waited for join the group: the wait for
//! another instance's change of a shared vault is paid once for all of them), applies
//! it, answers each write, and wakes the waiting threads; a thread whose write is still
//! queued then leads the next group. A write is never left for a later group, and its
//! thread is woken as soon as its group is recorded.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;

use crate::clock::timestamp;
use crate::error::{Error, Result};
use crate::record::crash_point;
use crate::state::{State, WriteLock, WriteQueue};
use crate::storage::files::Placements;

use super::apply::{record_staged, stage_change, Keep, Stage, Staged};
use super::{apply, plan, Applied, Change, IntentKey, Op, Receipt, Request};

/// One queued write and, once applied, its answer.
pub struct Job {
    request: Request,
    /// `(key, op_hash)` of its idempotency intent.
    intent: Option<(String, String)>,
    /// When it was asked for (what the write budget counts).
    at: DateTime<Utc>,
    answer: Mutex<Option<Result<Applied>>>,
}

/// Apply `request` with whatever writes are queued with it (see the module doc). The
/// caller has checked the budget; an applied write is counted against it here.
pub(crate) fn apply_grouped(
    state: &State,
    request: &Request,
    intent: Option<IntentKey<'_>>,
    at: DateTime<Utc>,
) -> Result<Applied> {
    let job = Arc::new(Job {
        request: request.clone(),
        intent: intent.map(|k| (k.key.to_string(), k.op_hash.to_string())),
        at,
        answer: Mutex::new(None),
    });
    let queue = &state.write_queue;
    queue.jobs.lock().push(job.clone());
    loop {
        let mut jobs = queue.jobs.lock();
        // Applied by a leader: its answer is here.
        if let Some(answer) = job.answer.lock().take() {
            return answer;
        }
        let Some(leading) = queue.lead.try_lock().map(|guard| StepDown {
            queue,
            leading: Some(guard),
        }) else {
            // A leader is at work (maybe on this write): wait for it to finish. It
            // notifies with `jobs` held, so the wake-up cannot be missed.
            queue.changed.wait(&mut jobs);
            continue;
        };
        // No leader, and this write is unanswered: it is still queued. Lead (the queue
        // is taken once the lock is held: the module doc). Only a leader takes from the
        // queue, so the writes queued now stay its first.
        let queued = jobs.len();
        drop(jobs);
        match state.lock_to_write() {
            Ok(write) => {
                let taken: Vec<Arc<Job>> = std::mem::take(&mut *queue.jobs.lock());
                lead(state, &write, &taken);
            }
            // The other processes' lock of a shared vault could not be had: the writes
            // that waited for it as long as this one get that answer, nothing was
            // written; those that came meanwhile stay queued and try for themselves.
            Err(e) => {
                let taken: Vec<Arc<Job>> = queue.jobs.lock().drain(..queued).collect();
                for job in &taken {
                    *job.answer.lock() = Some(Err(e.clone()));
                }
            }
        }
        drop(leading);
        let answer = job.answer.lock().take();
        return answer.unwrap_or_else(|| Err(Error::internal("a queued write was not applied")));
    }
}

/// A leader stepping down, also when it unwinds: the lead is let go and the waiting
/// threads woken with the queue held (so none misses it); a thread whose write was taken
/// and not answered then answers itself an error instead of waiting for ever.
struct StepDown<'a> {
    queue: &'a WriteQueue,
    leading: Option<parking_lot::MutexGuard<'a, ()>>,
}

impl Drop for StepDown<'_> {
    fn drop(&mut self) {
        let jobs = self.queue.jobs.lock();
        drop(self.leading.take());
        self.queue.changed.notify_all();
        drop(jobs);
    }
}

/// The writes staged so far (placed, not yet synced, not recorded).
struct Group<'a> {
    actor: Option<String>,
    staged: Vec<Staged>,
    jobs: Vec<Arc<Job>>,
    /// Writes prepared in `files`, to be settled (all at once), in this order.
    prepared: Vec<(Staged, Arc<Job>)>,
    files: Box<dyn Placements + 'a>,
    /// Lowercased paths and note ids the staged writes touch.
    paths: HashSet<String>,
    note_ids: HashSet<String>,
    /// When the first staged write was planned.
    since: Option<std::time::Instant>,
    /// Time spent planning and staging the writes (for the debug log).
    plan_us: u64,
    stage_us: u64,
}

impl<'a> Group<'a> {
    fn new(state: &'a State) -> Self {
        Self {
            actor: None,
            staged: Vec::new(),
            jobs: Vec::new(),
            prepared: Vec::new(),
            files: state.files.placements(),
            paths: HashSet::new(),
            note_ids: HashSet::new(),
            since: None,
            plan_us: 0,
            stage_us: 0,
        }
    }

    fn note(&mut self, actor: String, staged: &Staged) {
        self.paths.insert(staged.to_rel.to_lowercase());
        if let Some(from) = &staged.from {
            self.paths.insert(from.path.to_lowercase());
        }
        self.note_ids.insert(staged.identity.note_id.clone());
        self.actor = Some(actor);
    }

    fn push(&mut self, actor: String, staged: Staged, job: Arc<Job>) {
        self.note(actor, &staged);
        self.staged.push(staged);
        self.jobs.push(job);
    }

    fn push_prepared(&mut self, actor: String, staged: Staged, job: Arc<Job>) {
        self.note(actor, &staged);
        self.prepared.push((staged, job));
    }

    /// Settle the prepared writes (made durable at once, then each put in place); one
    /// that cannot be placed (an editor saved the note meanwhile) gets its own error.
    fn place_prepared(&mut self, state: &State) {
        let prepared = std::mem::take(&mut self.prepared);
        if prepared.is_empty() {
            return;
        }
        let settled = self.files.settle_prepared();
        for ((staged, job), settled) in prepared.into_iter().zip(settled) {
            match settled {
                Ok(()) => {
                    self.staged.push(staged);
                    self.jobs.push(job);
                }
                Err(e) => answer(state, &job, Err(e), false),
            }
        }
    }

    /// Whether `op` may touch a note a staged write touches (then the group is
    /// recorded before `op` is planned).
    fn touches(&self, state: &State, op: &Op) -> bool {
        if self.staged.is_empty() && self.prepared.is_empty() {
            return false;
        }
        let key = match op {
            Op::Create { slug, .. } => {
                return self.paths.contains(&format!("{slug}.md").to_lowercase())
            }
            Op::Patch { note, .. }
            | Op::Edit { note, .. }
            | Op::Replace { note, .. }
            | Op::Delete { note, .. }
            | Op::Rollback { note, .. } => note,
            _ => return true,
        };
        match state.catalog.read().find(key) {
            Some(n) => {
                self.note_ids.contains(&n.note_id) || self.paths.contains(&n.path.to_lowercase())
            }
            // Maybe a note staged in this group: planned once the group is recorded.
            None => true,
        }
    }

    /// Sync the staged writes' folders, record them as one batch, answer each.
    fn flush(&mut self, state: &State, write: &WriteLock<'_>) {
        self.place_prepared(state);
        if self.staged.is_empty() {
            self.actor = None;
            self.paths.clear();
            self.note_ids.clear();
            self.since = None;
            return;
        }
        let staged = std::mem::take(&mut self.staged);
        let jobs = std::mem::take(&mut self.jobs);
        let actor = self.actor.take().unwrap_or_default();
        self.paths.clear();
        self.note_ids.clear();
        let writes = staged.len();
        let started = std::time::Instant::now();
        crash_point(state, "after-file");
        // Each write keeps its receipt, budget count and audit event in the transaction
        // that records it.
        let keep: Vec<Keep<'_>> = jobs
            .iter()
            .map(|job| Keep {
                intent: job.intent.as_ref().map(|(key, op_hash)| IntentKey {
                    key,
                    op_hash,
                    legacy: None,
                }),
                agent: &job.request.agent_id,
                at: job.at,
            })
            .collect();
        let recorded = crate::record::full_point(state, "after-file")
            .and_then(|()| record_staged(state, write, &actor, staged, &mut *self.files, &keep));
        tracing::debug!(
            writes,
            staged_us = self.since.map_or(0, |t| (started - t).as_micros() as u64),
            recorded_us = started.elapsed().as_micros() as u64,
            plan_us = self.plan_us,
            stage_us = self.stage_us,
            "group recorded"
        );
        (self.plan_us, self.stage_us) = (0, 0);
        self.since = None;
        match recorded {
            Ok(receipts) => {
                for (job, receipt) in jobs.iter().zip(receipts) {
                    answer(state, job, Ok(receipt), true);
                }
            }
            Err(e) => {
                for job in &jobs {
                    answer(state, job, Err(e.clone()), false);
                }
            }
        }
    }
}

/// Whether `op` may join a group (a note's write in place; a move found by its plan
/// still goes alone).
fn groupable(op: &Op) -> bool {
    !op.is_folder() && !op.is_attachment() && !matches!(op, Op::Move { .. } | Op::Rename { .. })
}

/// Apply the queued `jobs` in order, as few groups as their conflicts allow.
fn lead(state: &State, write: &WriteLock<'_>, jobs: &[Arc<Job>]) {
    // The daemon is stopping (`Daemon::stop` holds or held the write lock): nothing more
    // is written; the caller may retry against the next start.
    if state.closed() {
        for job in jobs {
            *job.answer.lock() = Some(Err(crate::state::stopping()));
        }
        return;
    }
    let mut group = Group::new(state);
    for job in jobs {
        let Request { op, agent_id, .. } = &job.request;
        let intent = job.intent.as_ref().map(|(key, op_hash)| IntentKey {
            key,
            op_hash,
            legacy: None,
        });
        let actor = format!("agent:{agent_id}");
        if !groupable(op) {
            group.flush(state, write);
            if op.is_attachment() {
                // Its receipt, budget count and audit event go in with its rows.
                let keep = Keep {
                    intent,
                    agent: agent_id,
                    at: job.at,
                };
                let applied = super::attachments::apply(state, write, op, &actor, Some(&keep));
                match applied {
                    Ok((receipt, settled)) => answer(state, job, Ok(receipt), settled),
                    Err(e) => answer(state, job, Err(e), false),
                }
                continue;
            }
            answer(state, job, apply(state, write, op, agent_id, intent), false);
            continue;
        }
        if group.actor.as_ref().is_some_and(|a| *a != actor) || group.touches(state, op) {
            group.flush(state, write);
        }
        group.since.get_or_insert_with(std::time::Instant::now);
        let t = std::time::Instant::now();
        let mut planned = plan(state, write, op);
        // The place it names may be one a staged write takes under another spelling:
        // record the group, and plan again against what is then on disk.
        if planned
            .as_ref()
            .is_ok_and(|p| group.paths.contains(&p.to_rel.to_lowercase()))
        {
            group.flush(state, write);
            planned = plan(state, write, op);
        }
        group.plan_us += t.elapsed().as_micros() as u64;
        let planned = match planned {
            Ok(planned) => planned,
            Err(e) => {
                answer(state, job, Err(e), false);
                continue;
            }
        };
        if planned
            .from
            .as_ref()
            .is_some_and(|(n, _)| n.path != planned.to_rel)
        {
            // A move: the links to it are rewritten once it is recorded; alone.
            group.flush(state, write);
            answer(state, job, apply(state, write, op, agent_id, intent), false);
            continue;
        }
        let super::Plan {
            from,
            to_rel,
            bytes,
            kind,
            renamed,
            restore_id,
        } = planned;
        let change = Change {
            from: from.as_ref().map(|(n, b)| (n, &b[..])),
            to_rel: &to_rel,
            bytes,
            actor: &actor,
            kind,
            new_id: restore_id.as_deref(),
            renamed,
        };
        let t = std::time::Instant::now();
        // Where nothing lands before its record, the receipt kept in the record's
        // transaction is all a retry needs: no intent ahead of it.
        let stage_intent = intent.filter(|_| !state.files.lands_with_record());
        let staged = stage_change(state, write, change, stage_intent, &mut *group.files, true);
        group.stage_us += t.elapsed().as_micros() as u64;
        match staged {
            Ok(Stage::Unchanged(receipt)) => answer(state, job, Ok(*receipt), false),
            Ok(Stage::Staged(staged)) => group.push(actor, staged, job.clone()),
            Ok(Stage::Prepared(staged)) => group.push_prepared(actor, staged, job.clone()),
            Err(e) => answer(state, job, Err(e), false),
        }
    }
    group.flush(state, write);
}

/// Give `job` its answer. An applied write is counted against the write budget, unless
/// it was `settled` (counted, and its receipt kept, in the transaction that recorded it).
fn answer(state: &State, job: &Job, result: Result<Receipt>, settled: bool) {
    let result = result.and_then(|receipt| {
        if !settled && !receipt.unchanged {
            state.meta.record_applied_write(&timestamp(job.at))?;
        }
        Ok(Applied { receipt, settled })
    });
    *job.answer.lock() = Some(result);
}
