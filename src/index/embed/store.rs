//! The note vectors kept in the state directory: `<state dir>/vectors/<fingerprint>.vectors`,
//! one file per model (its fingerprint in the name and inside), derived state like the
//! search index (deleting it loses nothing: the vectors are computed again). Written whole
//! to a temp file, synced, renamed over the old one, so a reader finds one or the other,
//! never a torn file; a file whose checksum does not hold is ignored. Files of other
//! models are removed once a new one is in place.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::arena::{Entry, EntryRef, Notes};

const MAGIC: &[u8] = b"notevault vectors\n";
/// Bumped whenever the format or the way notes are cut into chunks changes (2: vectors
/// quantized to bytes).
pub const FORMAT: u32 = 2;
const SUFFIX: &str = ".vectors";

/// Every note's vectors, by note key, for one model.
#[derive(Debug, Default)]
pub struct Store {
    pub fingerprint: String,
    pub dim: usize,
    pub notes: Notes,
}

#[derive(Deserialize)]
struct Body {
    /// Read ahead of the rest (`Store::load`); here to keep the layout.
    _format: u32,
    fingerprint: String,
    dim: u32,
    entries: Vec<(u64, Entry)>,
}

/// [`Body`] as written: the entries by reference (the same bytes; no clone of every
/// entry before the encoding, which is itself one copy).
#[derive(Serialize)]
struct BodyRef<'a> {
    format: u32,
    fingerprint: &'a str,
    dim: u32,
    entries: Vec<(u64, EntryRef<'a>)>,
}

fn file_of(dir: &Path, fingerprint: &str) -> PathBuf {
    dir.join(format!("{fingerprint}{SUFFIX}"))
}

impl Store {
    /// A store of no vectors yet.
    pub fn empty(fingerprint: String, dim: usize) -> Store {
        Store {
            fingerprint,
            dim,
            notes: Notes::new(dim),
        }
    }

    /// The stored vectors of the model `fingerprint` in `dir` (`<state dir>/vectors`), or
    /// why there are none usable (then they are all computed).
    pub fn load(dir: &Path, fingerprint: &str, dim: usize) -> Result<Store, String> {
        let path = file_of(dir, fingerprint);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let other = std::fs::read_dir(dir).ok().is_some_and(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .any(|e| e.file_name().to_string_lossy().ends_with(SUFFIX))
                });
                return Err(if other {
                    "the stored vectors are of another model".to_string()
                } else {
                    "no stored vectors yet".to_string()
                });
            }
            Err(e) => return Err(format!("the stored vectors cannot be read ({e})")),
        };
        let damaged = || "the stored vectors are damaged".to_string();
        let body = bytes.strip_prefix(MAGIC).ok_or_else(damaged)?;
        let split = body.len().checked_sub(32).ok_or_else(damaged)?;
        let (body, sum) = body.split_at(split);
        if blake3::hash(body).as_bytes() != sum {
            return Err(damaged());
        }
        // The format first (the body's first field): another format's entries may not
        // decode as this one's.
        let (format, _) = postcard::take_from_bytes::<u32>(body).map_err(|_| damaged())?;
        if format != FORMAT {
            return Err(format!(
                "the stored vectors are of format {format} (this build uses {FORMAT})"
            ));
        }
        let body: Body = postcard::from_bytes(body).map_err(|_| damaged())?;
        if body.fingerprint != fingerprint || body.dim as usize != dim {
            return Err("the stored vectors are of another model".to_string());
        }
        if body.entries.iter().any(|(_, e)| {
            dim == 0 || e.vectors.len() % dim != 0 || e.scales.len() != e.vectors.len() / dim
        }) {
            return Err(damaged());
        }
        let mut store = Store::empty(body.fingerprint, dim);
        for (key, entry) in body.entries {
            store.notes.insert(key, entry);
        }
        store.notes.shrink();
        Ok(store)
    }

    /// Write the store in `dir` atomically (temp file, fsync, rename, folder fsync), then
    /// remove the files of other models.
    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        self.encode()?.write(dir)
    }

    /// The file's bytes, to be written by [`Encoded::write`] (the caller may let go of
    /// the store's lock in between: the disk is slow, the encoding is not).
    pub fn encode(&self) -> std::io::Result<Encoded> {
        let mut entries: Vec<(u64, EntryRef<'_>)> = self.notes.entries().collect();
        entries.sort_unstable_by_key(|(k, _)| *k);
        let body = postcard::to_stdvec(&BodyRef {
            format: FORMAT,
            fingerprint: &self.fingerprint,
            dim: self.dim as u32,
            entries,
        })
        .map_err(std::io::Error::other)?;
        Ok(Encoded {
            fingerprint: self.fingerprint.clone(),
            body,
        })
    }
}

/// A store's file, encoded.
pub struct Encoded {
    fingerprint: String,
    body: Vec<u8>,
}

impl Encoded {
    /// See [`Store::save`].
    #[allow(
        clippy::disallowed_methods,
        reason = "the note vectors are a derived file of the state directory"
    )]
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let body = &self.body;
        let path = file_of(dir, &self.fingerprint);
        let temp = dir.join(format!("{}{SUFFIX}.tmp", self.fingerprint));
        let written = (|| {
            let mut file = std::fs::File::create(&temp)?;
            file.write_all(MAGIC)?;
            file.write_all(body)?;
            file.write_all(blake3::hash(body).as_bytes())?;
            file.sync_all()?;
            drop(file);
            std::fs::rename(&temp, &path)?;
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(())
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
            return written;
        }
        for entry in std::fs::read_dir(dir)?.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path() != path && (name.ends_with(SUFFIX) || name.ends_with(".tmp")) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_comes_back_and_another_model_or_damage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::empty("abc".into(), 2);
        s.notes.insert(
            7,
            Entry::quantize("blake3:1 a.md".into(), &[1.0, 0.0, 0.0, -0.5], 2),
        );
        assert_eq!(
            Store::load(dir.path(), "abc", 2).unwrap_err(),
            "no stored vectors yet"
        );
        s.save(dir.path()).unwrap();
        let back = Store::load(dir.path(), "abc", 2).unwrap();
        let (key, entry) = back.notes.entries().next().unwrap();
        assert_eq!(key, 7);
        assert_eq!(entry.stamp, "blake3:1 a.md");
        assert_eq!(entry.vectors, [127, 0, 0, -127]);
        assert_eq!(entry.scales, [1.0 / 127.0, 0.5 / 127.0]);
        assert_eq!(
            Store::load(dir.path(), "def", 2).unwrap_err(),
            "the stored vectors are of another model"
        );
        // A new model's store replaces the old file.
        let t = Store::empty("def".into(), 2);
        t.save(dir.path()).unwrap();
        assert!(!dir.path().join("abc.vectors").exists());
        // A flipped byte is found.
        let path = dir.path().join("def.vectors");
        let mut bytes = std::fs::read(&path).unwrap();
        let at = MAGIC.len() + 1;
        bytes[at] ^= 0xff;
        #[allow(clippy::disallowed_methods, reason = "a test file")]
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(
            Store::load(dir.path(), "def", 2).unwrap_err(),
            "the stored vectors are damaged"
        );
        // A file of another format (checksum whole) says so, whatever its entries hold.
        t.save(dir.path()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let mut body = bytes[MAGIC.len()..bytes.len() - 32].to_vec();
        assert_eq!(body[0], FORMAT as u8, "the format is the body's first byte");
        body[0] = 1;
        body.extend_from_slice(&[9; 40]);
        let old = [MAGIC, &body, blake3::hash(&body).as_bytes()].concat();
        #[allow(clippy::disallowed_methods, reason = "a test file")]
        std::fs::write(&path, old).unwrap();
        assert_eq!(
            Store::load(dir.path(), "def", 2).unwrap_err(),
            format!("the stored vectors are of format 1 (this build uses {FORMAT})")
        );
    }
}
