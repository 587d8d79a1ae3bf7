//! What the last full scan saw of each note file, kept in `<state dir>/scan.cache`, so a
//! warm start can stat a file instead of reading, hashing and parsing it.
//!
//! An entry is the file's [`FileStamp`] (size, modification and change times, device,
//! inode), the hash of the bytes read under that stamp, and the facts parsed from them
//! (`markdown::facts`). A walked start takes a file's hash and facts from here only when
//! the file's stamp now is the entry's: any save moves the change time (and a rename the
//! inode), so a file edited while the daemon was stopped is read as before. A start after
//! a clean stop walks nothing and takes every entry whose hash the store holds
//! (`daemon::trusted`); its verify finds what changed. The bytes themselves are
//! not kept here: they are read by the verify that follows the start (the full rescan),
//! which also hashes every file again, so even a change the stamp cannot show is found and
//! recorded then. The cache is derived data: a missing, torn, foreign or outdated file is
//! ignored (every note is read), and it is rewritten after each full scan.
//!
//! Format: a magic line, a checksummed postcard body (a format number, the crate version
//! that wrote it, the entries in path order, in chunks decoded side by side). Frontmatter
//! is kept as a YAML value tree; an entry whose frontmatter does not come back equal is
//! left out.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_norway::{Mapping, Number, Value};

use crate::vault::links::RawLink;
use crate::vault::markdown::NoteFacts;
use crate::vault::observe::{FileStamp, Observed};

/// The cache file in the state directory.
pub const FILE_NAME: &str = "scan.cache";
/// Where a new cache is written before it is renamed over the old one.
pub const TEMP_NAME: &str = "scan.cache.tmp";

const MAGIC: &[u8] = b"notevault scan cache\n";
/// Bumped whenever the entry format changes. A new crate version also discards the cache
/// (what `markdown::facts` derives may have changed).
const FORMAT: u32 = 2;

/// The cached view of one note file.
#[derive(Debug, Serialize, Deserialize)]
pub struct Entry {
    pub stamp: FileStamp,
    pub content_hash: String,
    facts: Facts,
}

/// The cache as loaded: entries by vault-relative path.
#[derive(Debug, Default)]
pub struct ScanCache {
    entries: HashMap<String, Entry>,
}

/// The file's body: the entries in chunks, each chunk postcard's encoding of its list of
/// `(path, entry)`, so a start decodes them in parallel.
#[derive(Serialize, Deserialize)]
struct Body<'a> {
    format: u32,
    version: &'a str,
    #[serde(borrow)]
    chunks: Vec<&'a [u8]>,
}

/// Entries in a chunk.
const CHUNK: usize = 4096;

impl ScanCache {
    /// The cache of the state directory `dir`; `None` when there is none, or it is torn,
    /// from another format or version, or unreadable (then every note is read).
    pub fn load(dir: &Path) -> Option<Self> {
        Some(Self {
            entries: Self::load_chunks(dir)?.into_iter().flatten().collect(),
        })
    }

    /// [`load`](Self::load)'s entries in chunks, by path: each chunk in order, and every
    /// path of a chunk before the next chunk's (one chunk when the file was not written
    /// in path order).
    pub fn load_chunks(dir: &Path) -> Option<Vec<Vec<(String, Entry)>>> {
        let bytes = std::fs::read(dir.join(FILE_NAME)).ok()?;
        let body = bytes.strip_prefix(MAGIC)?;
        let (body, sum) = body.split_at_checked(body.len().checked_sub(32)?)?;
        if blake3::hash(body).as_bytes() != sum {
            tracing::warn!("the scan cache is damaged; every note is read");
            return None;
        }
        let body: Body = postcard::from_bytes(body).ok()?;
        if body.format != FORMAT || body.version != env!("CARGO_PKG_VERSION") {
            return None;
        }
        let chunks = body
            .chunks
            .par_iter()
            .map(|chunk| postcard::from_bytes::<Vec<(String, Entry)>>(chunk).ok())
            .filter(|chunk| chunk.as_ref().is_none_or(|c| !c.is_empty()))
            .collect::<Option<Vec<_>>>()?;
        let in_order = chunks.iter().all(|c| c.is_sorted_by(|a, b| a.0 < b.0))
            && chunks
                .windows(2)
                .all(|w| w[0][w[0].len() - 1].0 < w[1][0].0);
        if in_order {
            return Some(chunks);
        }
        let mut entries: Vec<(String, Entry)> = chunks.into_iter().flatten().collect();
        entries.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Some(vec![entries])
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The hash and facts of `rel` when its stamp now is `stamp` (the entry is taken).
    pub fn take(&mut self, rel: &str, stamp: &FileStamp) -> Option<(String, NoteFacts)> {
        match self.entries.get(rel) {
            Some(e) if e.stamp == *stamp => {}
            _ => return None,
        }
        let e = self.entries.remove(rel)?;
        Some((e.content_hash, e.facts.into_facts()?))
    }

    /// Write the cache of `observed` (files read with a stable stamp) into `dir`.
    pub fn save<'a>(
        dir: &Path,
        observed: impl IntoIterator<Item = &'a Observed>,
    ) -> std::io::Result<()> {
        Self::store(dir, &Self::encode(observed)?)
    }

    /// The cache file's bytes for `observed`: the same bytes as postcard's encoding of the
    /// whole [`Body`], written an entry at a time (each entry's owned form lives only while
    /// it is written) into the one buffer that is returned, so encoding holds no second
    /// copy of every note's facts, nor of the encoded entries.
    pub fn encode<'a>(
        observed: impl IntoIterator<Item = &'a Observed>,
    ) -> std::io::Result<Vec<u8>> {
        // In path order, so a start pairs each chunk with the stored notes of its range.
        let mut observed: Vec<&Observed> = observed.into_iter().collect();
        observed.sort_unstable_by(|a, b| a.rel.cmp(&b.rel));
        Self::encode_entries(observed.into_iter().filter_map(Self::entry_of))
    }

    /// One note's encoded entry ([`encode_entries`](Self::encode_entries) takes them);
    /// `None` when the note is not cached: not kept in memory (too large: it is read at
    /// every start anyway), read while it changed, or facts the cache cannot hold.
    pub fn entry_of(o: &Observed) -> Option<std::io::Result<Vec<u8>>> {
        let (Some(stamp), Some(_)) = (o.stamp, o.content.as_ref()) else {
            return None;
        };
        let facts = Facts::of(&o.facts)?;
        let entry = Entry {
            stamp,
            content_hash: o.content_hash.clone(),
            facts,
        };
        Some(postcard::to_stdvec(&(&o.rel, &entry)).map_err(std::io::Error::other))
    }

    /// The cache file's bytes of `entries` ([`entry_of`](Self::entry_of)), in path order.
    pub fn encode_entries<E: AsRef<[u8]>>(
        entries: impl IntoIterator<Item = std::io::Result<E>>,
    ) -> std::io::Result<Vec<u8>> {
        let mut out = MAGIC.to_vec();
        let mut chunks: usize = 0;
        let mut start = out.len();
        let mut count: usize = 0;
        // A chunk is a byte string (its length, a varint) holding a sequence (its count,
        // a varint, then its entries): both go before the chunk once it is complete (only
        // that chunk's bytes shift).
        let close = |out: &mut Vec<u8>, start: usize, count: usize| -> std::io::Result<()> {
            let count = postcard::to_stdvec(&count).map_err(std::io::Error::other)?;
            let len = postcard::to_stdvec(&(out.len() - start + count.len()))
                .map_err(std::io::Error::other)?;
            out.splice(start..start, len.into_iter().chain(count));
            Ok(())
        };
        for entry in entries {
            out.extend_from_slice(entry?.as_ref());
            count += 1;
            if count == CHUNK {
                close(&mut out, start, count)?;
                (chunks, start, count) = (chunks + 1, out.len(), 0);
            }
        }
        if count > 0 {
            close(&mut out, start, count)?;
            chunks += 1;
        }
        // The body's two first fields and the chunks' count go before the chunks (they
        // shift once).
        let head = postcard::to_stdvec(&(FORMAT, env!("CARGO_PKG_VERSION"), chunks))
            .map_err(std::io::Error::other)?;
        out.reserve_exact(head.len() + 32);
        out.splice(MAGIC.len()..MAGIC.len(), head);
        let sum = blake3::hash(&out[MAGIC.len()..]);
        out.extend_from_slice(sum.as_bytes());
        Ok(out)
    }

    /// Put `bytes` (from [`encode`](Self::encode)) in place as the cache of `dir`: a temp
    /// file, then a rename over the old cache, so a reader sees one or the other. One
    /// writer at a time (the caller's).
    #[allow(
        clippy::disallowed_methods,
        reason = "the scan cache is a derived file of the state directory"
    )]
    pub fn store(dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
        let temp: PathBuf = dir.join(TEMP_NAME);
        let written = (|| {
            let mut file = std::fs::File::create(&temp)?;
            file.write_all(bytes)?;
            drop(file);
            std::fs::rename(&temp, dir.join(FILE_NAME))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    }
}

impl Entry {
    /// The observation of `rel` this entry vouches for while the file's stamp is the
    /// entry's: no bytes (the verify reads them); `None` when its frontmatter does not
    /// come back.
    pub fn into_observed(self, rel: String) -> Option<Observed> {
        let mtime = std::time::UNIX_EPOCH
            .checked_add(std::time::Duration::new(
                u64::try_from(self.stamp.mtime.0).ok()?,
                u32::try_from(self.stamp.mtime.1).ok()?,
            ))
            .unwrap_or(std::time::UNIX_EPOCH);
        Some(Observed {
            rel,
            size: self.stamp.size,
            mtime,
            created: mtime,
            content_hash: self.content_hash,
            facts: self.facts.into_facts()?,
            content: None,
            stamp: Some(self.stamp),
        })
    }
}

/// How long a request waits for the verify of a start that walked nothing.
const WALK_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// What the start took from the scan cache, and whether the verify that reads those
/// notes' bytes is still to come. Whatever needs every note's bytes (grep, the start of
/// the search index) waits here until it is done.
#[derive(Debug, Default)]
pub struct Unread {
    start: parking_lot::Mutex<StartScan>,
    done: parking_lot::Condvar,
}

/// How the last start observed the notes (`GET /v1/index-status`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StartScan {
    /// Notes whose hash and facts came from the scan cache (their stamp was unchanged).
    pub recalled: usize,
    /// Notes read, hashed and parsed.
    pub read: usize,
    /// The verify is still to come or under way: the recalled notes' bytes are being
    /// read, and after a start that walked nothing, the folder walked.
    pub verifying: bool,
    /// The start walked nothing (after a clean stop): until the verify is done, files
    /// created, removed or renamed while stopped are not yet in the catalog.
    pub unwalked: bool,
}

impl Unread {
    /// The start observed `read` notes by reading them and recalled `recalled`, and
    /// walked the folder or not: when it recalled any or walked nothing, the verify is to
    /// come.
    pub fn begin(&self, read: usize, recalled: usize, walked: bool) {
        *self.start.lock() = StartScan {
            recalled,
            read,
            verifying: recalled > 0 || !walked,
            unwalked: !walked,
        };
    }

    pub fn start_scan(&self) -> StartScan {
        *self.start.lock()
    }

    /// Whether the verify is still to come.
    pub fn pending(&self) -> bool {
        self.start.lock().verifying
    }

    /// Whether the start walked nothing and the verify has not walked the folder yet.
    pub fn unwalked(&self) -> bool {
        self.start.lock().unwalked
    }

    /// While the start has walked nothing, wait for the verify (at most [`WALK_WAIT`]):
    /// for a read or write that may meet a rename made while stopped, which the verify
    /// pairs by content. Never with the write lock held (the verify takes it). Whether
    /// it waited.
    pub fn wait_walk(&self) -> bool {
        let unwalked = self.unwalked();
        if unwalked {
            self.wait(std::time::Instant::now() + WALK_WAIT);
        }
        unwalked
    }

    pub fn finish(&self) {
        let mut start = self.start.lock();
        start.verifying = false;
        start.unwalked = false;
        drop(start);
        self.done.notify_all();
    }

    /// Wait until every recalled note was read, at most until `deadline`; `false` when
    /// some still are not.
    pub fn wait(&self, deadline: std::time::Instant) -> bool {
        let mut start = self.start.lock();
        while start.verifying {
            if self.done.wait_until(&mut start, deadline).timed_out() {
                return !start.verifying;
            }
        }
        true
    }
}

/// [`NoteFacts`] in a form postcard can write (frontmatter as a value tree).
#[derive(Debug, Serialize, Deserialize)]
struct Facts {
    title: Option<String>,
    status: Option<String>,
    tags: Vec<String>,
    frontmatter: Option<Vec<(Yaml, Yaml)>>,
    frontmatter_error: Option<String>,
    lossy_utf8: bool,
    aliases: Vec<String>,
    links: Vec<(String, u64, bool, bool)>,
}

impl Facts {
    /// `None` when the frontmatter would not come back equal.
    fn of(f: &NoteFacts) -> Option<Self> {
        let frontmatter = f.frontmatter.as_ref().map(map_tree);
        if let Some(tree) = &frontmatter {
            if tree_map(tree.clone()).as_ref() != f.frontmatter.as_ref() {
                return None;
            }
        }
        Some(Self {
            title: f.title.clone(),
            status: f.status.clone(),
            tags: f.tags.clone(),
            frontmatter,
            frontmatter_error: f.frontmatter_error.clone(),
            lossy_utf8: f.lossy_utf8,
            aliases: f.aliases.clone(),
            links: f
                .links
                .iter()
                .map(|l| (l.target.clone(), l.line as u64, l.markdown, l.embed))
                .collect(),
        })
    }

    fn into_facts(self) -> Option<NoteFacts> {
        let frontmatter = match self.frontmatter {
            Some(tree) => Some(tree_map(tree)?),
            None => None,
        };
        Some(NoteFacts {
            title: self.title,
            status: self.status,
            tags: self.tags,
            frontmatter,
            frontmatter_error: self.frontmatter_error,
            lossy_utf8: self.lossy_utf8,
            aliases: self.aliases,
            links: self
                .links
                .into_iter()
                .map(|(target, line, markdown, embed)| RawLink {
                    target,
                    line: line as usize,
                    markdown,
                    embed,
                })
                .collect(),
        })
    }
}

/// A YAML value as postcard can write it (it has no self-describing `any`).
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Yaml {
    Null,
    Bool(bool),
    Uint(u64),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Yaml>),
    Map(Vec<(Yaml, Yaml)>),
    Tagged(String, Box<Yaml>),
}

fn map_tree(m: &Mapping) -> Vec<(Yaml, Yaml)> {
    m.iter().map(|(k, v)| (tree(k), tree(v))).collect()
}

fn tree(v: &Value) -> Yaml {
    match v {
        Value::Null => Yaml::Null,
        Value::Bool(b) => Yaml::Bool(*b),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                Yaml::Uint(u)
            } else if let Some(i) = n.as_i64() {
                Yaml::Int(i)
            } else {
                Yaml::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => Yaml::Str(s.clone()),
        Value::Sequence(items) => Yaml::Seq(items.iter().map(tree).collect()),
        Value::Mapping(m) => Yaml::Map(map_tree(m)),
        Value::Tagged(t) => Yaml::Tagged(t.tag.to_string(), Box::new(tree(&t.value))),
    }
}

fn tree_map(pairs: Vec<(Yaml, Yaml)>) -> Option<Mapping> {
    let mut m = Mapping::with_capacity(pairs.len());
    for (k, v) in pairs {
        m.insert(value(k)?, value(v)?);
    }
    Some(m)
}

fn value(y: Yaml) -> Option<Value> {
    Some(match y {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(b),
        Yaml::Uint(u) => Value::Number(Number::from(u)),
        Yaml::Int(i) => Value::Number(Number::from(i)),
        Yaml::Float(f) => Value::Number(Number::from(f)),
        Yaml::Str(s) => Value::String(s),
        Yaml::Seq(items) => Value::Sequence(items.into_iter().map(value).collect::<Option<_>>()?),
        Yaml::Map(pairs) => Value::Mapping(tree_map(pairs)?),
        Yaml::Tagged(tag, v) if tag.len() > 1 => {
            Value::Tagged(Box::new(serde_norway::value::TaggedValue {
                tag: serde_norway::value::Tag::new(tag),
                value: value(*v)?,
            }))
        }
        Yaml::Tagged(..) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed_of(dir: &Path, rel: &str, text: &str) -> Observed {
        let path = dir.join(rel);
        #[allow(clippy::disallowed_methods, reason = "a test file")]
        std::fs::write(&path, text).unwrap();
        crate::vault::observe::observe(dir, rel).unwrap()
    }

    /// The entries written one at a time are byte for byte postcard's encoding of the
    /// whole body (what `load` decodes), with no entries, one, a count that takes two
    /// varint bytes, and more than a chunk; they load back in path order.
    #[test]
    fn an_encoding_written_entry_by_entry_is_the_body_s() {
        let vault = tempfile::tempdir().unwrap();
        for n in [0, 1, 130, CHUNK + 3] {
            let observed: Vec<Observed> = (0..n)
                .map(|i| {
                    let text = format!(
                        "---\ntags: [t{i}]\nn: {i}\n---\n# Note {i}\nsee [[n{}]]\n",
                        i + 1
                    );
                    observed_of(vault.path(), &format!("n{i}.md"), &text)
                })
                .collect();
            let mut in_order: Vec<&Observed> = observed.iter().collect();
            in_order.sort_unstable_by(|a, b| a.rel.cmp(&b.rel));
            let entries: Vec<(String, Entry)> = in_order
                .iter()
                .map(|o| {
                    let facts = Facts::of(&o.facts).unwrap();
                    let stamp = o.stamp.unwrap();
                    let content_hash = o.content_hash.clone();
                    (
                        o.rel.clone(),
                        Entry {
                            stamp,
                            content_hash,
                            facts,
                        },
                    )
                })
                .collect();
            let chunks: Vec<Vec<u8>> = entries
                .chunks(CHUNK)
                .map(|c| postcard::to_stdvec(c).unwrap())
                .collect();
            let whole = postcard::to_stdvec(&Body {
                format: FORMAT,
                version: env!("CARGO_PKG_VERSION"),
                chunks: chunks.iter().map(Vec::as_slice).collect(),
            })
            .unwrap();
            let encoded = ScanCache::encode(&observed).unwrap();
            let body = &encoded[MAGIC.len()..encoded.len() - 32];
            assert_eq!(body, &whole[..], "{n} entries");
            assert_eq!(&encoded[..MAGIC.len()], MAGIC);
            assert_eq!(
                &encoded[encoded.len() - 32..],
                blake3::hash(body).as_bytes()
            );
            let state = tempfile::tempdir().unwrap();
            ScanCache::store(state.path(), &encoded).unwrap();
            let loaded: Vec<(String, Entry)> = ScanCache::load_chunks(state.path())
                .unwrap()
                .into_iter()
                .flatten()
                .collect();
            let mut paths: Vec<&str> = observed.iter().map(|o| o.rel.as_str()).collect();
            paths.sort_unstable();
            assert!(
                loaded.iter().map(|(p, _)| p.as_str()).eq(paths),
                "{n} entries"
            );
        }
    }

    #[test]
    fn facts_come_back_as_parsed() {
        let vault = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let texts = [
            "---\ntitle: One\ntags: [a, '#b']\nn: 3\nneg: -4\nbig: 18446744073709551615\nf: 1.5\nnan: .nan\nnested: {x: [1, null, true]}\n? [k]\n: v\ntagged: !custom {a: 1}\n---\n# H\nsee [[two]] and ![](img.png)\n",
            "no frontmatter, [a link](../x.md)\n",
            "---\nbroken: [\n---\nbody\n",
            "\u{feff}---\naliases: [Deux]\nstatus: done\n---\n",
        ];
        let observed: Vec<Observed> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| observed_of(vault.path(), &format!("n{i}.md"), t))
            .collect();
        ScanCache::save(state.path(), &observed).unwrap();
        let mut cache = ScanCache::load(state.path()).unwrap();
        assert_eq!(cache.len(), texts.len());
        for o in &observed {
            let (hash, facts) = cache.take(&o.rel, &o.stamp.unwrap()).unwrap();
            assert_eq!(hash, o.content_hash);
            assert_eq!(facts, o.facts, "{}", o.rel);
        }
        assert!(cache.is_empty());
    }

    #[test]
    fn a_changed_stamp_or_a_damaged_file_is_not_recalled() {
        let vault = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut o = observed_of(vault.path(), "a.md", "# A\n");
        ScanCache::save(state.path(), [&o]).unwrap();
        let mut moved = o.stamp.unwrap();
        moved.ctime.1 += 1;
        assert!(ScanCache::load(state.path())
            .unwrap()
            .take("a.md", &moved)
            .is_none());
        // A note too large to keep is not cached (it is read at every start).
        o.content = None;
        ScanCache::save(state.path(), [&o]).unwrap();
        assert!(ScanCache::load(state.path()).unwrap().is_empty());
        o.content = Some(crate::vault::packed::Packed::of(std::sync::Arc::from(
            &b"# A\n"[..],
        )));
        ScanCache::save(state.path(), [&o]).unwrap();
        let path = state.path().join(FILE_NAME);
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() - 40;
        bytes[at] ^= 1;
        #[allow(clippy::disallowed_methods, reason = "a test file")]
        std::fs::write(&path, &bytes).unwrap();
        assert!(ScanCache::load(state.path()).is_none());
        bytes.truncate(10);
        #[allow(clippy::disallowed_methods, reason = "a test file")]
        std::fs::write(&path, &bytes).unwrap();
        assert!(ScanCache::load(state.path()).is_none());
    }
}
