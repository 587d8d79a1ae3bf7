//! Attachments (every file of the folder that is not a note: images, PDFs, ...), pushed
//! with the daemon's attachment routes: `PUT /v1/attachments/{path}` creates one (raw
//! bytes), `DELETE /v1/attachments/{path}?sha256=` removes the bytes the device synced.
//! A changed attachment is a delete of the synced bytes, then a put of the new ones.
//!
//! The device's state records each attachment's daemon hash (`sha256:<hex>`, as `base`)
//! and the hash of the folder's bytes when synced (`local_hash`): bytes the daemon has
//! already are never sent again, and a pull does not fetch them again.
//!
//! Both routes are safe to repeat without a kept key: a put only creates (a file at the
//! path answers 409, and when its bytes are the device's, the put had applied), a delete
//! names the bytes it removes (gone already answers 404, which is what the user wanted).
//! So a retry after any failure never applies twice, and each request has a fresh key.
//! A refusal leaves the file and the state as they were.

use anyhow::Result;

use super::push::{PushReport, Refusal};
use super::{refusal_text, Device, LOCAL_PRIVATE};
use crate::vault::content_hash;

/// Characters a path segment keeps as they are (`/` separates segments).
const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The daemon's hash of an attachment's bytes.
pub(super) fn sha256_of(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::vault::observe::sha256_hex(bytes))
}

/// The route of the attachment at `path`.
pub(super) fn route(path: &str) -> String {
    format!(
        "/v1/attachments/{}",
        percent_encoding::utf8_percent_encode(path, KEEP)
    )
}

/// Whether a device path is an attachment (not a note, not a private note).
pub(super) fn is_attachment(local: &str) -> bool {
    !crate::vault::path::is_note_name(local) && !local.ends_with(LOCAL_PRIVATE)
}

impl Device {
    /// Every attachment of the folder (device paths), hidden files and folders left out.
    fn local_attachments(&self) -> Vec<String> {
        walkdir::WalkDir::new(&self.root)
            .into_iter()
            .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'))
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
            .filter_map(|e| {
                let rel = e.path().strip_prefix(&self.root).ok()?;
                Some(rel.to_string_lossy().replace('\\', "/"))
            })
            .filter(|rel| is_attachment(rel))
            .collect()
    }

    /// One request to an attachment route under a fresh key: status and JSON body.
    async fn attachment_call(
        &self,
        method: reqwest::Method,
        path: &str,
        query: &str,
        bytes: Option<Vec<u8>>,
    ) -> Result<(u16, serde_json::Value)> {
        let agent = format!("device:{}", self.state.device_id);
        let query = match query {
            "" => format!(
                "agent_id={}",
                percent_encoding::utf8_percent_encode(&agent, KEEP)
            ),
            q => format!(
                "{q}&agent_id={}",
                percent_encoding::utf8_percent_encode(&agent, KEEP)
            ),
        };
        let mut req = self
            .http
            .request(method, self.url(&format!("{}?{query}", route(path))))
            .header(
                "Idempotency-Key",
                format!("device-attachment-{}", uuid::Uuid::now_v7()),
            );
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = bytes {
            req = req.body(b);
        }
        let res = req.send().await?;
        let status = res.status().as_u16();
        Ok((status, res.json().await.unwrap_or(serde_json::Value::Null)))
    }

    /// The daemon's bytes of the attachment at `path` (`None`: it has none there).
    pub(super) async fn attachment_bytes(&self, path: &str) -> Result<Option<Vec<u8>>> {
        let mut req = self.http.get(self.url(&route(path)));
        // No token, no header: an empty bearer is refused, not taken as none.
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let res = req.send().await?;
        match res.status().as_u16() {
            404 => Ok(None),
            200..=299 => Ok(Some(res.bytes().await?.to_vec())),
            status => {
                let v = res.json().await.unwrap_or(serde_json::Value::Null);
                anyhow::bail!("GET {}: {}", route(path), refusal_text(status, &v))
            }
        }
    }

    /// Push the folder's attachment changes since the last sync: new and changed files
    /// (their bytes, once) and removed ones.
    pub(super) async fn push_attachments(&mut self, report: &mut PushReport) -> Result<()> {
        let present = self.local_attachments();
        let mut put_refused = false;
        for local in &present {
            let bytes = std::fs::read(self.root.join(local))?;
            let (hash, sha) = (content_hash(&bytes), sha256_of(&bytes));
            let synced = self.state.files.get(local).cloned();
            if let Some(s) = &synced {
                if s.local_hash == hash || s.base == sha {
                    // The daemon has these bytes already: nothing to send.
                    if s.local_hash != hash {
                        self.track_as(local, local, None, sha, hash, false, true);
                        self.save()?;
                    }
                    continue;
                }
                // Changed: the synced bytes go first (a 404: gone or changed meanwhile;
                // the put below finds out which).
                let query = format!("sha256={}", s.base.trim_start_matches("sha256:"));
                let (status, v) = self
                    .attachment_call(reqwest::Method::DELETE, local, &query, None)
                    .await?;
                if !matches!(status, 200..=299 | 404) {
                    report.refused.push(refused(local, status, &v));
                    continue;
                }
                // The daemon no longer has the synced bytes: the file is unsynced from here
                // on, so a refused put below leaves a new file to push, never a local change
                // for the pull of this very delete to set aside as a conflict.
                self.state.files.remove(local);
                self.save()?;
            }
            let (status, v) = self
                .attachment_call(reqwest::Method::PUT, local, "", Some(bytes))
                .await?;
            let applied = match status {
                200..=299 => true,
                // A file is there: the device's own earlier put when it has these bytes.
                409 => self
                    .attachment_bytes(local)
                    .await?
                    .is_some_and(|b| sha256_of(&b) == sha),
                _ => false,
            };
            if applied {
                report.applied += 1;
                self.track_as(local, local, None, sha, hash, false, true);
                self.save()?;
            } else {
                put_refused = true;
                report.refused.push(refused(local, status, &v));
            }
        }
        // A refused put may be the new name of a file that is gone: its old bytes stay on
        // the daemon until that put lands.
        if put_refused {
            return Ok(());
        }
        let gone: Vec<(String, String)> = self
            .state
            .files
            .iter()
            .filter(|(l, s)| s.attachment && !s.local_hash.is_empty() && !present.contains(l))
            .map(|(l, s)| (l.clone(), s.base.clone()))
            .collect();
        for (local, base) in gone {
            let query = format!("sha256={}", base.trim_start_matches("sha256:"));
            let (status, v) = self
                .attachment_call(reqwest::Method::DELETE, &local, &query, None)
                .await?;
            if matches!(status, 200..=299 | 404) {
                // Removed, or gone from the daemon already: what the user wanted.
                report.applied += 1;
                self.state.files.remove(&local);
                self.save()?;
            } else {
                report.refused.push(refused(&local, status, &v));
            }
        }
        Ok(())
    }
}

fn refused(local: &str, status: u16, v: &serde_json::Value) -> Refusal {
    let next = match v["reason"].as_str().unwrap_or_default() {
        "NAME_COLLISION" => {
            "the daemon has another file at this path: `notevault device pull` brings it and \
             keeps yours as a conflicted copy"
        }
        _ => "your file and the device state are unchanged; push again to retry",
    };
    Refusal {
        local: local.to_string(),
        text: format!("{}; {next}", refusal_text(status, v)),
    }
}
