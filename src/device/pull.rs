//! Pulls: the snapshot, then the ops after the device's seq, put into the folder. A
//! change the device has not pushed is never overwritten: it is kept as a conflicted
//! copy before the daemon's version takes its place.

use anyhow::{bail, Context, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};

use super::crypto::decrypt_note;
use super::{conflict_name, local_of, remove_file, rename_file, write_file, Device, Synced};
use crate::vault::content_hash;

impl Device {
    /// Before a pulled change replaces `local`: an edit not pushed yet, or a file the
    /// device never synced, is kept as a conflicted copy.
    pub(super) fn keep_unpushed(&mut self, local: &str) -> Result<()> {
        let Some(now) = self.local_hash(local) else {
            return Ok(());
        };
        if self
            .state
            .files
            .get(local)
            .is_some_and(|s| s.local_hash == now)
        {
            return Ok(());
        }
        let copy = conflict_name(&self.root, local, &self.state.device_id);
        rename_file(&self.root.join(local), &self.root.join(&copy))?;
        self.kept.push((local.to_string(), copy));
        Ok(())
    }

    /// Record `local` as synced with the bytes the folder holds now.
    pub(super) fn track(
        &mut self,
        local: &str,
        server_path: &str,
        note_id: Option<String>,
        base: String,
        private: bool,
        attachment: bool,
    ) {
        let local_hash = self.local_hash(local).unwrap_or_default();
        self.track_as(
            local,
            server_path,
            note_id,
            base,
            local_hash,
            private,
            attachment,
        );
    }

    /// Record `local` as synced with the bytes whose hash is `local_hash` (what a push
    /// sent: an edit made since it was read stays an edit).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn track_as(
        &mut self,
        local: &str,
        server_path: &str,
        note_id: Option<String>,
        base: String,
        local_hash: String,
        private: bool,
        attachment: bool,
    ) {
        self.state.files.insert(
            local.to_string(),
            Synced {
                server_path: server_path.to_string(),
                note_id,
                base,
                local_hash,
                private,
                attachment,
            },
        );
    }

    fn by_note(&self, note_id: &str) -> Option<String> {
        self.state
            .files
            .iter()
            .find(|(_, s)| s.note_id.as_deref() == Some(note_id))
            .map(|(p, _)| p.clone())
    }

    /// Put one note (standard or private) or attachment as the daemon has it.
    async fn put(&mut self, e: &Value) -> Result<()> {
        let server_path = e["path"].as_str().unwrap_or_default().to_string();
        let private = e["visibility"] == "private";
        let note_id = e["note_id"].as_str().map(str::to_string);
        let mut local = local_of(&server_path, private);
        let hash = e["content_hash"].as_str().unwrap_or_default().to_string();
        let is_note = note_id.is_some() || private;
        // What the device last synced of the file (its bytes' hash), carried over when no
        // bytes come with this entry.
        let mut prior = self.state.files.get(&local).map(|s| s.local_hash.clone());
        // A note moved: its file follows; but a file the device renamed whose rename is
        // not on the daemon yet (tracked at this daemon path) stays where the user put it.
        if let Some(old) = note_id.as_deref().and_then(|id| self.by_note(id)) {
            if old != local && self.state.files[&old].server_path == server_path {
                prior = Some(self.state.files[&old].local_hash.clone());
                local = old;
            } else if old != local {
                prior = Some(self.state.files[&old].local_hash.clone());
                self.keep_unpushed(&old)?;
                let from = self.root.join(&old);
                let synced = self.state.files.remove(&old);
                if from.exists() {
                    self.keep_unpushed(&local)?;
                    rename_file(&from, &self.root.join(&local))?;
                    // The synced bytes moved with the file: new bytes for it below replace
                    // them, not an edit of the device's.
                    if let Some(synced) = synced {
                        self.state.files.insert(local.clone(), synced);
                    }
                }
            }
        }
        let bytes = match e["content_base64"].as_str() {
            Some(b64) => Some(STANDARD.decode(b64).context("content is not base64")?),
            // An attachment whose bytes the device has synced is not fetched again.
            None if !is_note
                && self.state.files.get(&local).is_some_and(|s| {
                    s.base == hash && Some(&s.local_hash) == self.local_hash(&local).as_ref()
                }) =>
            {
                None
            }
            None if !is_note => match self.attachment_bytes(&server_path).await? {
                Some(bytes) => Some(bytes),
                None => return Ok(()),
            },
            None => None,
        };
        let carried = bytes.is_some();
        if let Some(bytes) = bytes {
            let plain = if private {
                let dek = self.key_for(&server_path, &bytes)?;
                decrypt_note(&dek, &server_path, &bytes)?
            } else {
                bytes
            };
            if self.local_hash(&local) != Some(content_hash(&plain)) {
                self.keep_unpushed(&local)?;
                write_file(&self.root.join(&local), &plain)?;
            }
        }
        let base = match (&note_id, e["version_id"].as_str()) {
            (Some(_), Some(v)) => v.to_string(),
            _ => hash,
        };
        if carried {
            self.track(&local, &server_path, note_id, base, private, !is_note);
        } else {
            // No bytes (a version superseded by a later op, a file gone): the folder's
            // bytes are not the daemon's, so an edit not pushed yet stays an edit (the
            // later op then keeps it as a conflicted copy instead of overwriting it).
            let kept = prior
                .filter(|_| self.root.join(&local).exists())
                .unwrap_or_default();
            self.track_as(&local, &server_path, note_id, base, kept, private, !is_note);
        }
        Ok(())
    }

    /// The daemon removed `local`: so does the device, but for an edit not pushed yet
    /// (kept as a conflicted copy) and a file it never synced (left alone).
    fn forget(&mut self, local: &str) -> Result<()> {
        if !self.state.files.contains_key(local) {
            return Ok(());
        }
        self.keep_unpushed(local)?;
        self.state.files.remove(local);
        remove_file(&self.root.join(local));
        Ok(())
    }

    async fn apply(&mut self, op: &Value) -> Result<()> {
        let server_path = op["path"].as_str().unwrap_or_default();
        let private = op["visibility"] == "private";
        match op["kind"].as_str().unwrap_or_default() {
            "upsert" | "move" | "attachment_upsert" => self.put(op).await,
            "delete" => {
                let local = match op["note_id"].as_str() {
                    Some(id) => self.by_note(id),
                    None => Some(local_of(server_path, private)),
                };
                match local {
                    Some(local) => self.forget(&local),
                    None => Ok(()),
                }
            }
            "attachment_delete" => self.forget(server_path),
            _ => Ok(()),
        }
    }

    async fn snapshot(&mut self) -> Result<()> {
        let mut token: Option<String> = None;
        let mut seen = std::collections::BTreeSet::new();
        let seq = loop {
            let path = match &token {
                Some(t) => format!("/v1/sync/snapshot?page_size=200&page_token={t}"),
                None => "/v1/sync/snapshot?page_size=200".to_string(),
            };
            let page = self.ok(reqwest::Method::GET, &path, None, None).await?;
            for e in page["entries"].as_array().cloned().unwrap_or_default() {
                let private = e["visibility"] == "private";
                seen.insert(local_of(e["path"].as_str().unwrap_or_default(), private));
                self.put(&e).await?;
            }
            match page["next_page_token"].as_str() {
                Some(t) => token = Some(t.to_string()),
                None => break page["seq"].as_i64().unwrap_or(0),
            }
        };
        // What the device tracked and the daemon no longer has.
        let gone: Vec<String> = self
            .state
            .files
            .keys()
            .filter(|p| !seen.contains(*p))
            .cloned()
            .collect();
        for local in gone {
            self.forget(&local)?;
        }
        self.state.seq = Some(seq);
        Ok(())
    }

    /// Bring the folder up to the daemon: the snapshot first (or again after
    /// compaction), then the ops after the device's seq. Answers how many ops applied.
    pub async fn pull(&mut self) -> Result<usize> {
        if self.state.seq.is_none() {
            self.snapshot().await?;
            self.save()?;
        }
        let mut applied = 0;
        loop {
            let after = self.state.seq.unwrap_or(0);
            let path = format!("/v1/sync/ops?after_seq={after}&page_size=200");
            let page = match self.call(reqwest::Method::GET, &path, None, None).await? {
                (200, page) => page,
                (410, _) => {
                    // Compacted past the device: the snapshot, then ops after it.
                    self.snapshot().await?;
                    self.save()?;
                    continue;
                }
                (status, v) => bail!("GET {path}: {status} {}", v["reason"]),
            };
            for op in page["ops"].as_array().cloned().unwrap_or_default() {
                self.apply(&op).await?;
                applied += 1;
            }
            self.state.seq = page["next_after_seq"].as_i64();
            self.save()?;
            if page["has_more"] != true {
                break;
            }
        }
        let seq = self.state.seq.unwrap_or(0);
        let device = self.state.device_id.clone();
        self.ok(
            reqwest::Method::POST,
            "/v1/sync/checkpoint",
            Some(json!({"device_id": device, "seq": seq})),
            Some(&format!("checkpoint-{device}-{seq}")),
        )
        .await?;
        Ok(applied)
    }
}
