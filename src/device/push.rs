//! Pushes: the folder's changes since the last sync, each op sent under its own
//! Idempotency-Key, kept in the outbox (`outbox.json`) until the op is settled.
//!
//! What a push never does: lose or invent a change. Only `VERSION_MOVED` (the note
//! changed on the daemon since the device's base) makes a conflicted copy. Any other
//! refusal (budget, rate limit, policy, a note gone meanwhile, 4xx, 5xx, the daemon
//! unreachable mid-batch) leaves the file and `state.json` as they were; the next push
//! builds the same op and sends it under the same key, so the daemon replays what it
//! already did (a queued op is never queued twice). A queued op is pending, not applied:
//! once a reviewer approves it, a pull records it. A delete is pushed only for a file
//! the device had synced and the user removed.

use std::collections::BTreeMap;

use anyhow::{anyhow, Context, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::crypto::encrypt_note;
use super::{conflict_name, refusal_text, rename_file, server_of, write_file, Device, STATE_DIR};
use crate::vault::content_hash;

const OUTBOX: &str = "outbox.json";
/// The daemon's largest batch.
pub(super) const BATCH: usize = 500;

/// An op sent and not settled yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    /// What the op does (kind, path, base, note, the hash of the device's bytes): the
    /// same op again is sent under the same key.
    pub what: String,
    pub key: String,
    /// A private note's envelope as sent: its nonce is random, and a retry must send
    /// the same bytes under the key (ciphertext only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<String>,
    /// The pending write the daemon queued it as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_id: Option<String>,
}

/// The ops in flight, by device path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outbox {
    pub ops: BTreeMap<String, Sent>,
}

/// An op the daemon refused (not a conflict): the file and its state are unchanged.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub local: String,
    /// The daemon's answer (status, reason, message, hint) and what to do on the device.
    pub text: String,
}

/// What a push did.
#[derive(Debug, Default)]
pub struct PushReport {
    pub applied: usize,
    /// Conflicted copies made: (the file, its copy).
    pub conflicts: Vec<(String, String)>,
    /// Ops queued for review: (the file, the pending write's id).
    pub pending: Vec<(String, String)>,
    pub refused: Vec<Refusal>,
}

impl PushReport {
    /// Every change is on the daemon (nothing pending, nothing refused).
    pub fn settled(&self) -> bool {
        self.pending.is_empty() && self.refused.is_empty()
    }
}

/// One op of this push.
struct Planned {
    local: String,
    /// Where the daemon has it once the op applies.
    server_path: String,
    private: bool,
    delete: bool,
    /// A move or rename: the device path the note was synced at, when it changed.
    moving: bool,
    from_local: Option<String>,
    /// The hash of the bytes sent (recorded as synced once applied).
    local_hash: String,
    what: String,
    op: Value,
}

/// What the device does next after a refusal the daemon's hint does not cover.
fn next_step(reason: &str, p: &Planned) -> &'static str {
    match reason {
        "VERSION_MOVED" => {
            "the note changed on the daemon since: `notevault device pull` brings its \
             version to the old path; your renamed file stays and is pushed as a new note"
        }
        "NOTE_NOT_FOUND" if !p.delete => {
            "the daemon no longer has this note: `notevault device pull` keeps your edit as a \
             conflicted copy, which the next push creates"
        }
        "NAME_COLLISION" => {
            "the daemon has another note at this path: `notevault device pull` brings it and \
             keeps your file as a conflicted copy"
        }
        _ => "your file and the device state are unchanged; push again to retry the same op",
    }
}

impl Device {
    fn outbox_file(&self) -> std::path::PathBuf {
        self.root.join(STATE_DIR).join(OUTBOX)
    }

    fn load_outbox(&self) -> Result<Outbox> {
        match std::fs::read(self.outbox_file()) {
            Ok(bytes) => serde_json::from_slice(&bytes).context("the device outbox is unreadable"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Outbox::default()),
            Err(e) => Err(e).context("cannot read the device outbox"),
        }
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "the device client changes its own folder, not a vault"
    )]
    fn save_outbox(&self, outbox: &Outbox) -> Result<()> {
        let file = self.outbox_file();
        if outbox.ops.is_empty() {
            return match std::fs::remove_file(&file) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(e).context("cannot clear the device outbox")
                }
                _ => Ok(()),
            };
        }
        let json = serde_json::to_vec_pretty(outbox)?;
        if std::fs::read(&file).is_ok_and(|old| old == json) {
            return Ok(());
        }
        write_file(&file, &json)
    }

    /// Every note file of the folder (device paths), its own state left out.
    fn local_notes(&self) -> Vec<String> {
        walkdir::WalkDir::new(&self.root)
            .into_iter()
            .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'))
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
            .filter_map(|e| {
                let rel = e
                    .path()
                    .strip_prefix(&self.root)
                    .ok()?
                    .to_string_lossy()
                    .replace('\\', "/");
                crate::vault::path::is_note_name(&rel).then_some(rel)
            })
            .collect()
    }

    /// Notes the user renamed or moved: a synced standard note gone from its path whose
    /// bytes are now, unchanged, at one new path the device does not track (and no
    /// other note gone has those bytes). `new path -> old path`. (An edited and moved
    /// note is found by `moves`.)
    fn renames(&self, hashed: &[(String, String)]) -> BTreeMap<String, String> {
        let present: std::collections::HashSet<&str> =
            hashed.iter().map(|(l, _)| l.as_str()).collect();
        let mut gone: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
        for (local, s) in &self.state.files {
            if !s.private
                && !s.attachment
                && s.note_id.is_some()
                && !s.local_hash.is_empty()
                && !present.contains(local.as_str())
            {
                gone.entry(s.local_hash.as_str()).or_default().push(local);
            }
        }
        let mut new: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
        for (local, hash) in hashed {
            if !self.state.files.contains_key(local) && !server_of(local).1 {
                new.entry(hash.as_str()).or_default().push(local);
            }
        }
        gone.into_iter()
            .filter_map(
                |(hash, from)| match (from.as_slice(), new.get(hash)?.as_slice()) {
                    ([from], [to]) => Some(((*to).clone(), (*from).clone())),
                    _ => None,
                },
            )
            .collect()
    }

    /// The move of the note synced at `from` (a device path) to the device path `local`.
    /// The daemon takes a new folder or a new name per op: both go as a move into the
    /// new folder now, and the rename in the next round.
    fn move_op(&self, local: &str, from: &str, hash: String) -> Planned {
        let s = &self.state.files[from];
        let target = server_of(local).0;
        let split = |p: &str| -> (String, String) {
            let (dir, name) = crate::vault::path::split_path(p);
            (dir.to_string(), name.to_string())
        };
        let ((from_dir, from_name), (to_dir, to_name)) = (split(&s.server_path), split(&target));
        let to_path = if from_dir != to_dir && from_name != to_name {
            match to_dir.as_str() {
                "" => from_name,
                dir => format!("{dir}/{from_name}"),
            }
        } else {
            target
        };
        let note_id = s.note_id.clone().unwrap_or_default();
        Planned {
            local: local.to_string(),
            private: false,
            delete: false,
            moving: true,
            from_local: (from != local).then(|| from.to_string()),
            what: format!(
                "move {} -> {to_path} base={} note={note_id} {hash}",
                s.server_path, s.base
            ),
            op: json!({"kind": "move", "note_id": note_id, "path": s.server_path,
                       "to_path": to_path, "base_version_id": s.base}),
            server_path: to_path,
            local_hash: hash,
        }
    }

    /// The ops of the folder's changes since the last sync; a private note's envelope
    /// is the outbox's when the same op is retried.
    fn plan(
        &self,
        version: u64,
        outbox: &Outbox,
        edited: &BTreeMap<String, String>,
    ) -> Result<Vec<Planned>> {
        let mut out = Vec::new();
        let present = self.local_notes();
        let mut hashed = Vec::with_capacity(present.len());
        for local in &present {
            hashed.push((
                local.clone(),
                content_hash(&std::fs::read(self.root.join(local))?),
            ));
        }
        let mut moves = self.renames(&hashed);
        for (to, from) in edited {
            if !moves.contains_key(to) && !moves.values().any(|f| f == from) {
                moves.insert(to.clone(), from.clone());
            }
        }
        for (local, hash) in hashed {
            if let Some(old) = moves.get(&local) {
                // An edited move records the bytes synced before the edit: the edit
                // stays unpushed, and the next round sends it on the moved note.
                let synced = match edited.get(&local) {
                    Some(_) => self.state.files[old].local_hash.clone(),
                    None => hash,
                };
                out.push(self.move_op(&local, old, synced));
                continue;
            }
            let synced = self.state.files.get(&local);
            if let Some(s) = synced.filter(|s| s.local_hash == hash) {
                // Synced, but at another path on the daemon: the second step of a move
                // and rename.
                if !s.private
                    && !s.attachment
                    && s.note_id.is_some()
                    && server_of(&local).0 != s.server_path
                {
                    out.push(self.move_op(&local, &local, hash));
                }
                continue;
            }
            let local = &local;
            let bytes = std::fs::read(self.root.join(local))?;
            let (server_path, private) = server_of(local);
            let base = synced.map(|s| s.base.clone());
            let note_id = synced.and_then(|s| s.note_id.clone()).filter(|_| !private);
            // A private op names its key version: after a rotation the outbox's envelope (and
            // its Idempotency-Key) is not sent again, the note is sealed anew.
            let sealed = if private {
                format!(" key={version}")
            } else {
                String::new()
            };
            let what = format!(
                "upsert {server_path} base={} note={} {hash}{sealed}",
                base.as_deref().unwrap_or("-"),
                note_id.as_deref().unwrap_or("-")
            );
            let mut op = if private {
                let again = outbox
                    .ops
                    .get(local)
                    .filter(|s| s.what == what)
                    .and_then(|s| s.envelope.clone());
                let envelope = match again {
                    Some(e) => e,
                    None => {
                        let dek = self.dek.ok_or_else(|| {
                            anyhow!("{local} is private: private notes are not enabled (run `notevault device init`)")
                        })?;
                        STANDARD.encode(encrypt_note(&dek, version, &server_path, &bytes)?)
                    }
                };
                json!({"kind": "upsert", "visibility": "private", "path": server_path,
                       "content_base64": envelope})
            } else {
                json!({"kind": "upsert", "path": server_path, "content_base64": STANDARD.encode(&bytes)})
            };
            if let Some(base) = base {
                op["base_version_id"] = json!(base);
            }
            if let Some(id) = note_id {
                op["note_id"] = json!(id);
            }
            out.push(Planned {
                local: local.clone(),
                server_path,
                private,
                delete: false,
                moving: false,
                from_local: None,
                local_hash: hash,
                what,
                op,
            });
        }
        let moved: std::collections::HashSet<&String> = moves.values().collect();
        for (local, s) in &self.state.files {
            // Only a file the device had (a hash recorded) and the user removed.
            if s.attachment
                || s.local_hash.is_empty()
                || present.contains(local)
                || moved.contains(local)
            {
                continue;
            }
            let mut op =
                json!({"kind": "delete", "path": s.server_path, "base_version_id": s.base});
            if s.private {
                op["visibility"] = json!("private");
            } else {
                op["note_id"] = json!(s.note_id);
            }
            out.push(Planned {
                local: local.clone(),
                server_path: s.server_path.clone(),
                private: s.private,
                delete: true,
                moving: false,
                from_local: None,
                local_hash: String::new(),
                what: format!("delete {} base={}", s.server_path, s.base),
                op,
            });
        }
        Ok(out)
    }

    /// Push the folder's changes since the last sync (new, edited and deleted notes;
    /// private notes encrypted), then pull when nothing was refused.
    pub async fn push(&mut self) -> Result<PushReport> {
        // The version of the key this device unlocked, never one read again now: a rotation
        // in between would label an envelope sealed with the old key as the new version.
        let version = if self.dek.is_some() {
            self.ring_version
        } else {
            self.key_version().await?
        };
        let mut report = PushReport::default();
        // Later rounds send the renames of notes that moved to a new folder under a new
        // name (the first round moved them) and ops going again on a new base (see
        // `rebase`); bounded, so a daemon that keeps moving cannot hold a push.
        for _ in 0..4 {
            let more = self.round(version, &mut report).await?;
            if !more || !report.refused.is_empty() || !report.pending.is_empty() {
                break;
            }
        }
        if report.refused.is_empty() && report.pending.is_empty() {
            self.push_attachments(&mut report).await?;
        }
        if report.refused.is_empty() {
            self.pull().await?;
            // A queued op a reviewer approved since is on the device now: settled.
            let mut outbox = self.load_outbox()?;
            let pending = std::mem::take(&mut report.pending);
            for (local, id) in pending {
                let now = self.local_hash(&local);
                let synced = self.state.files.get(&local).map(|s| s.local_hash.clone());
                if now == synced {
                    report.applied += 1;
                    outbox.ops.remove(&local);
                } else if self.rejected(&id).await {
                    // Its key stays: the same op again is not queued again.
                    report.refused.push(Refusal {
                        local,
                        text: format!(
                            "a reviewer rejected it (pending write {id}); your file stays as \
                             it is here: change it to push a new version"
                        ),
                    });
                } else {
                    report.pending.push((local, id));
                }
            }
            self.save_outbox(&outbox)?;
        }
        report.conflicts = std::mem::take(&mut self.kept);
        Ok(report)
    }

    /// Whether the pending write `id` was rejected (unknown when the credential may not
    /// read it: then it is still pending to the device).
    async fn rejected(&self, id: &str) -> bool {
        let path = format!("/v1/writes/{id}");
        matches!(
            self.call(reqwest::Method::GET, &path, None, None).await,
            Ok((200, v)) if v["status"] == "rejected"
        )
    }

    /// Plan, key and send the folder's changes; answers whether another round is due (a
    /// move applied that still needs its rename, an op going again on a new base).
    async fn round(&mut self, version: u64, report: &mut PushReport) -> Result<bool> {
        let old = self.load_outbox()?;
        let edited = self.edited_moves(&self.local_notes()).await?;
        let mut planned = self.plan(version, &old, &edited)?;
        // The same op keeps its key; an op no longer planned (settled, or changed since)
        // leaves the outbox.
        let mut outbox = Outbox::default();
        for p in &mut planned {
            let sent = match old.ops.get(&p.local) {
                Some(s) if s.what == p.what => s.clone(),
                _ => Sent {
                    what: p.what.clone(),
                    key: format!("device-op-{}", uuid::Uuid::now_v7()),
                    envelope: p
                        .private
                        .then(|| p.op["content_base64"].as_str().map(str::to_string))
                        .flatten(),
                    pending_id: None,
                },
            };
            p.op["idempotency_key"] = json!(sent.key);
            outbox.ops.insert(p.local.clone(), sent);
        }
        // Kept before anything is sent: a retry after any failure sends the same keys.
        self.save_outbox(&outbox)?;
        let settled_before = report.applied + report.pending.len();
        let mut again = false;
        for chunk in planned.chunks(BATCH) {
            let device = self.state.device_id.clone();
            let ops: Vec<&Value> = chunk.iter().map(|p| &p.op).collect();
            let batch_key = format!("push-{}", uuid::Uuid::now_v7());
            let sent = self
                .call(
                    reqwest::Method::POST,
                    "/v1/sync/ops",
                    Some(json!({"device_id": device, "ops": ops})),
                    Some(&batch_key),
                )
                .await;
            let answer = match sent {
                Ok((200..=299, v)) => v,
                failed => {
                    let why = match failed {
                        Ok((status, v)) => refusal_text(status, &v),
                        Err(e) => format!("{e:#}"),
                    };
                    return Err(anyhow!(
                        "push stopped: {why}; {} change(s) not settled here, files and \
                         device state unchanged for them: push again (the same ops go \
                         with the same keys, so nothing is applied twice)",
                        (planned.len() + settled_before)
                            .saturating_sub(report.applied + report.pending.len())
                    ));
                }
            };
            let results = answer["results"].as_array().cloned().unwrap_or_default();
            if results.len() != chunk.len() {
                return Err(anyhow!(
                    "push stopped: the daemon answered {} results for {} ops; push again",
                    results.len(),
                    chunk.len()
                ));
            }
            for (result, p) in results.iter().zip(chunk) {
                let moved = result["error"]["reason"] == "VERSION_MOVED" && !p.delete;
                if let Some(note_id) = super::rebase::note_of(&p.op).filter(|_| moved) {
                    let m = super::rebase::Moved {
                        local: p.local.clone(),
                        synced_at: p.from_local.clone().unwrap_or_else(|| p.local.clone()),
                        note_id,
                        moving: p.moving,
                    };
                    if self.rebase(&m).await? {
                        // Planned again on the new base (a new op, a new key).
                        outbox.ops.remove(&m.local);
                        again = true;
                        continue;
                    }
                }
                self.settle(p, result, &mut outbox, report)?;
            }
            self.save()?;
            self.save_outbox(&outbox)?;
        }
        Ok(again
            || planned.iter().any(|p| {
                // An edited move: its edit goes next.
                p.moving
                    && self.state.files.get(&p.local).is_some_and(|s| {
                        s.local_hash == p.local_hash
                            && self.local_hash(&p.local).as_ref() != Some(&s.local_hash)
                    })
            })
            || planned.iter().any(|p| {
                // Still at another path on the daemon (a move that needs its rename,
                // also after the edit of an edited move).
                !p.delete
                    && !p.private
                    && self
                        .state
                        .files
                        .get(&p.local)
                        .is_some_and(|s| s.server_path != server_of(&p.local).0)
            }))
    }

    /// Record what the daemon answered for one op.
    fn settle(
        &mut self,
        p: &Planned,
        result: &Value,
        outbox: &mut Outbox,
        report: &mut PushReport,
    ) -> Result<()> {
        let r = &result["receipt"];
        match result["status"].as_str().unwrap_or_default() {
            "applied" => {
                report.applied += 1;
                outbox.ops.remove(&p.local);
                if p.delete {
                    self.state.files.remove(&p.local);
                } else if p.moving {
                    // The note keeps its id at its new path.
                    if let Some(from) = &p.from_local {
                        self.state.files.remove(from);
                    }
                    let id = r["note_id"].as_str().map(str::to_string);
                    let base = r["version_id"].as_str().unwrap_or_default().to_string();
                    let hash = p.local_hash.clone();
                    self.track_as(&p.local, &p.server_path, id, base, hash, false, false);
                } else if p.private {
                    let base = r["content_hash"].as_str().unwrap_or_default().to_string();
                    let hash = p.local_hash.clone();
                    self.track_as(&p.local, &p.server_path, None, base, hash, true, false);
                } else {
                    let id = r["note_id"].as_str().map(str::to_string);
                    let base = r["version_id"].as_str().unwrap_or_default().to_string();
                    let hash = p.local_hash.clone();
                    // An edit keeps the note where the daemon has it: a move still due
                    // (the edit of an edited move) goes next; one made elsewhere comes
                    // with the pull.
                    let at = self
                        .state
                        .files
                        .get(&p.local)
                        .map_or(p.server_path.clone(), |s| s.server_path.clone());
                    self.track_as(&p.local, &at, id, base, hash, false, false);
                }
            }
            "queued" => {
                let id = r["pending_id"].as_str().unwrap_or_default().to_string();
                if let Some(sent) = outbox.ops.get_mut(&p.local) {
                    sent.pending_id = Some(id.clone());
                }
                report.pending.push((p.local.clone(), id));
            }
            _ => {
                let e = &result["error"];
                let reason = e["reason"].as_str().unwrap_or_default();
                let status = e["statusCode"].as_u64().unwrap_or(0) as u16;
                match reason {
                    "VERSION_MOVED" if !p.moving => {
                        // A real concurrent change: the device's bytes become a
                        // conflicted copy (pushed as a new note), and the pull brings the
                        // daemon's version to the path.
                        outbox.ops.remove(&p.local);
                        let from = self.root.join(&p.local);
                        if from.exists() {
                            let copy = conflict_name(&self.root, &p.local, &self.state.device_id);
                            rename_file(&from, &self.root.join(&copy))?;
                            self.kept.push((p.local.clone(), copy));
                        }
                        self.state.files.remove(&p.local);
                    }
                    "NOTE_NOT_FOUND" | "ATTACHMENT_NOT_FOUND" if p.delete => {
                        // Deleted on the daemon too: what the user wanted.
                        report.applied += 1;
                        outbox.ops.remove(&p.local);
                        self.state.files.remove(&p.local);
                    }
                    _ => report.refused.push(Refusal {
                        local: p.local.clone(),
                        text: format!("{}; {}", refusal_text(status, e), next_step(reason, p)),
                    }),
                }
            }
        }
        Ok(())
    }
}
