//! Attachments: every file of the vault that is not a note (`.md`), outside the ignored
//! folders, the state directory and our temp files. Facts only (no HTTP, no JSON): its
//! place, size, SHA-256, media type (sniffed from the first bytes with `infer`, else
//! guessed from the extension), and modification time; and the in-memory catalog of them
//! by path, with a lower-case file name index for `![[name.png]]` and downloads by name.
//!
//! A warm start does not hash every file again: the caller hands [`observe`] the facts it
//! stored, and a file whose size, mtime and inode are the same keeps its hash and type.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use chrono::{DateTime, Utc};

use crate::vault::links::RawLink;
use crate::vault::observe::{hash_file, Excluded};
use crate::vault::path::{file_name_of, VaultPaths};

/// What makes a file look unchanged without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    pub size: u64,
    /// Nanoseconds since the epoch.
    pub mtime_ns: i64,
    pub inode: u64,
}

impl Stamp {
    pub fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i64);
        Self {
            size: meta.len(),
            mtime_ns,
            inode,
        }
    }
}

/// One attachment as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Vault-relative, `/`-separated.
    pub path: String,
    pub size: u64,
    /// Lower-case hex.
    pub sha256: String,
    pub content_type: String,
    pub modified_at: DateTime<Utc>,
    pub stamp: Stamp,
}

impl Attachment {
    pub fn file_name(&self) -> &str {
        file_name_of(&self.path)
    }

    /// The folder holding it (`""`: the vault root).
    pub fn folder(&self) -> &str {
        crate::vault::path::folder_of(&self.path)
    }
}

/// The media type of a file: what its first bytes say (`infer`), else what its
/// extension says, else `application/octet-stream`.
pub fn sniff(head: &[u8], name: &str) -> String {
    sniffed(head).unwrap_or_else(|| by_extension(name))
}

/// The media type the bytes show by their signature, if any.
pub fn sniffed(head: &[u8]) -> Option<String> {
    infer::get(head).map(|t| t.mime_type().to_string())
}

/// The media type the extension names (`application/octet-stream` when none).
pub fn by_extension(name: &str) -> String {
    mime_guess::from_path(name)
        .first_or_octet_stream()
        .essence_str()
        .to_string()
}

/// Observe one attachment. With `known` facts whose stamp matches the file's, nothing is
/// read: the stored hash and type stand.
pub fn observe(root: &Path, rel: &str, known: Option<&Attachment>) -> std::io::Result<Attachment> {
    let abs = root.join(rel);
    let meta = std::fs::metadata(&abs)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a file"));
    }
    let stamp = Stamp::of(&meta);
    let modified_at: DateTime<Utc> = meta
        .modified()
        .map(DateTime::<Utc>::from)
        .unwrap_or_default();
    if let Some(k) = known.filter(|k| k.stamp == stamp && k.path == rel) {
        return Ok(Attachment {
            modified_at,
            ..k.clone()
        });
    }
    let (sha256, size, head) = hash_file(&abs)?;
    Ok(Attachment {
        path: rel.to_string(),
        size,
        sha256,
        content_type: sniff(&head, rel),
        modified_at,
        stamp: Stamp { size, ..stamp },
    })
}

/// Walk the vault for attachment files (vault-relative, sorted), without following
/// symlinked folders; a symlinked file is kept only when it stays inside the vault.
pub fn list_files(paths: &VaultPaths) -> (Vec<String>, Vec<Excluded>) {
    let walk = crate::vault::walk::walk(
        paths,
        crate::vault::walk::Want {
            attachments: true,
            ..Default::default()
        },
    );
    (walk.attachments, walk.attachments_excluded)
}

/// Observe many files in parallel (the first scan), reusing `known` facts by stamp.
pub fn observe_all(
    root: &Path,
    files: &[String],
    known: &HashMap<String, Attachment>,
) -> (Vec<Attachment>, Vec<Excluded>) {
    use rayon::prelude::*;
    let results: Vec<Result<Attachment, Excluded>> = files
        .par_iter()
        .map(|rel| {
            observe(root, rel, known.get(rel)).map_err(|e| Excluded {
                path: rel.clone(),
                reason: format!("unreadable: {e}"),
            })
        })
        .collect();
    let mut ok = Vec::with_capacity(results.len());
    let mut bad = Vec::new();
    for r in results {
        match r {
            Ok(a) => ok.push(a),
            Err(e) => bad.push(e),
        }
    }
    (ok, bad)
}

/// The attachments of the vault, by path, with a lower-case file name index. Changed
/// only by `insert` and `remove` (the recorder's).
#[derive(Debug, Default)]
pub struct AttachmentCatalog {
    by_path: BTreeMap<String, Arc<Attachment>>,
    by_name: HashMap<String, Vec<String>>,
    /// Files that could not be read, for coverage.
    pub excluded: Vec<Excluded>,
}

impl AttachmentCatalog {
    pub fn len(&self) -> usize {
        self.by_path.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }

    pub fn get(&self, path: &str) -> Option<&Arc<Attachment>> {
        self.by_path.get(path)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Attachment>> {
        self.by_path.values()
    }

    /// Attachments named `name` (letter case ignored), shortest path first.
    pub fn named(&self, name: &str) -> Vec<&Arc<Attachment>> {
        let mut out: Vec<&Arc<Attachment>> = self
            .by_name
            .get(&name.to_lowercase())
            .into_iter()
            .flatten()
            .filter_map(|p| self.by_path.get(p))
            .collect();
        out.sort_by(|a, b| {
            a.path
                .len()
                .cmp(&b.path.len())
                .then_with(|| a.path.cmp(&b.path))
        });
        out
    }

    pub fn insert(&mut self, attachment: Attachment) {
        let path = attachment.path.clone();
        let key = attachment.file_name().to_lowercase();
        let names = self.by_name.entry(key).or_default();
        if !names.contains(&path) {
            names.push(path.clone());
        }
        self.by_path.insert(path, Arc::new(attachment));
    }

    pub fn remove(&mut self, path: &str) -> Option<Arc<Attachment>> {
        let removed = self.by_path.remove(path)?;
        let key = removed.file_name().to_lowercase();
        if let Some(names) = self.by_name.get_mut(&key) {
            names.retain(|p| p != path);
            if names.is_empty() {
                self.by_name.remove(&key);
            }
        }
        Some(removed)
    }

    /// The attachment a link from a note in `from_folder` points at, the way Obsidian
    /// resolves it: a relative markdown link from the note's folder; a wikilink by exact
    /// path, by the end of a path, or by file name anywhere (shortest path on ties);
    /// letter case ignored.
    pub fn resolve(&self, from_folder: &str, link: &RawLink) -> Option<&Arc<Attachment>> {
        if link.markdown {
            let path = relative_path(from_folder, &link.target)?;
            return self.get(&path).or_else(|| {
                self.named(file_name_of(&path))
                    .into_iter()
                    .find(|a| a.path.eq_ignore_ascii_case(&path))
            });
        }
        let target = link.target.trim().trim_start_matches('/');
        let lower = target.to_lowercase();
        let candidates = self.named(file_name_of(target));
        if target.contains('/') {
            let suffix = format!("/{lower}");
            return candidates.into_iter().find(|a| {
                let p = a.path.to_lowercase();
                p == lower || p.ends_with(&suffix)
            });
        }
        candidates.into_iter().next()
    }
}

/// A relative markdown link's target from `from_folder`, as a vault path (percent-decoded,
/// `.` and `..` applied; `None` when it climbs out of the vault).
pub fn relative_path(from_folder: &str, target: &str) -> Option<String> {
    let target = percent_encoding::percent_decode_str(target)
        .decode_utf8()
        .ok()?;
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        from_folder.split('/').filter(|p| !p.is_empty()).collect()
    };
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// Whether a link names an attachment rather than a note: a target whose extension is
/// not `.md`.
pub fn links_attachment(link: &RawLink) -> bool {
    let name = file_name_of(&link.target);
    name.rsplit_once('.').is_some_and(|(_, ext)| {
        !ext.eq_ignore_ascii_case("md") && !ext.is_empty() && !ext.contains(' ') && ext.len() <= 5
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn att(path: &str) -> Attachment {
        Attachment {
            path: path.into(),
            size: 1,
            sha256: "x".into(),
            content_type: "image/png".into(),
            modified_at: Utc::now(),
            stamp: Stamp::default(),
        }
    }

    fn wiki(target: &str) -> RawLink {
        RawLink {
            target: target.into(),
            line: 1,
            markdown: false,
            embed: true,
        }
    }

    #[test]
    fn resolves_like_obsidian() {
        let mut c = AttachmentCatalog::default();
        c.insert(att("projects/alpha/diagram.png"));
        c.insert(att("diagram.png"));
        c.insert(att("docs/a.pdf"));
        assert_eq!(
            c.resolve("x", &wiki("Diagram.PNG")).unwrap().path,
            "diagram.png"
        );
        assert_eq!(
            c.resolve("", &wiki("alpha/diagram.png")).unwrap().path,
            "projects/alpha/diagram.png"
        );
        let md = RawLink {
            target: "../docs/a.pdf".into(),
            line: 1,
            markdown: true,
            embed: false,
        };
        assert_eq!(c.resolve("notes", &md).unwrap().path, "docs/a.pdf");
        assert!(c.resolve("", &md).is_none());
        c.remove("diagram.png");
        assert_eq!(
            c.resolve("", &wiki("diagram.png")).unwrap().path,
            "projects/alpha/diagram.png"
        );
    }

    #[test]
    fn sniffs_bytes_before_the_extension() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        assert_eq!(sniff(png, "a.txt"), "image/png");
        assert_eq!(sniff(b"hello", "a.txt"), "text/plain");
        assert_eq!(sniff(b"hello", "a.zzz"), "application/octet-stream");
    }
}
