//! Many blobs as one pack: the first commit of a vault (and any other commit of many new
//! files) writes its blobs as one `objects/pack/pack-<sha>.pack` with its version 2
//! `.idx`, instead of one zlib-compressed loose object file each (44k file creations on
//! a large vault, which is most of the cost of a bootstrap).
//!
//! The blobs come from the bytes the caller already holds; they are hashed in parallel,
//! then compressed in parallel a group at a time and written as each group is done (the
//! compressed pack is never held whole in memory). The pack is written to a temporary
//! file, synced and renamed into place, then its index the same way, so a reader (git,
//! gix) never finds an index without its whole pack. Identical blobs are stored once, and
//! blobs the repository holds already are not stored again.
//! **Invariant:** every id returned is in the pack (or was already in the repository's
//! object database as the same bytes: blob ids are content addresses).
#![allow(
    clippy::disallowed_methods,
    reason = "writes only history.git's pack folder, in the state directory"
)]

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};

use gix::ObjectId;
use rayon::prelude::*;

use super::history_error;
use crate::error::Result;
use crate::vault::packed::Packed;

/// From this many blobs on, a commit's blobs are written as one pack.
pub(crate) const AT_LEAST: usize = 256;

/// zlib level of the pack's entries: fast (a first commit of 56 MB of notes compresses in
/// a fraction of a second on 2 cores; `git gc` repacks tighter if one ever wants it).
const LEVEL: u32 = 1;

/// The pack type numbers of a commit, a tree, a blob, and a delta against an earlier
/// entry of the same pack.
pub(crate) const OBJ_COMMIT: u8 = 1;
pub(crate) const OBJ_TREE: u8 = 2;
pub(crate) const OBJ_BLOB: u8 = 3;
pub(crate) const OBJ_OFS_DELTA: u8 = 6;

/// Where one blob went in the pack: its id, the CRC32 of its bytes in the pack, and
/// the offset they start at.
struct Placed {
    id: ObjectId,
    crc: u32,
    offset: u64,
}

/// Blobs compressed at once before they are written: the pack is written a group at a
/// time, so a first commit holds a group's compressed bytes, never the whole pack's.
const GROUP: usize = 1024;

/// Bytes to pack: unpacked (when packed) only while they are hashed and compressed, so a
/// first commit never holds a vault's bytes twice.
pub(crate) trait Blob: Sync {
    fn bytes(&self) -> Cow<'_, [u8]>;
}

impl Blob for &[u8] {
    fn bytes(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self)
    }
}

impl Blob for &Packed {
    fn bytes(&self) -> Cow<'_, [u8]> {
        Packed::bytes(self)
    }
}

/// Write `blobs` into one pack (and its index) under `git_dir/objects/pack`, returning
/// each blob's id in the order given; those `held` says the repository holds already
/// are left out (none left: no pack).
pub(crate) fn write_blobs<B: Blob>(
    git_dir: &Path,
    blobs: &[B],
    held: &dyn Fn(&ObjectId) -> Result<bool>,
) -> Result<Vec<ObjectId>> {
    if blobs.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<ObjectId> = blobs
        .par_iter()
        .map(|data| blob_id(&data.bytes()))
        .collect::<Result<_>>()?;
    // One entry per id not `held` already; the first one given is kept.
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    let mut unique: Vec<(ObjectId, &B)> = Vec::new();
    for (id, data) in ids.iter().zip(blobs) {
        if seen.insert(*id) && !held(id)? {
            unique.push((*id, data));
        }
    }
    drop(seen);
    if unique.is_empty() {
        return Ok(ids);
    }
    let dir = git_dir.join("objects").join("pack");
    std::fs::create_dir_all(&dir).map_err(|e| history_error("create the pack folder", e))?;
    let (pack_temp, checksum, placed) = write_pack(&dir, &unique)?;
    install(&dir, &pack_temp, checksum, &placed)?;
    Ok(ids)
}

/// Write a pack of entries made by [`entry`] (each with the id of the object it holds,
/// a delta's after its base's) and its index into `git_dir/objects/pack`: its name.
pub(crate) fn write_entries(git_dir: &Path, entries: &[(ObjectId, Vec<u8>)]) -> Result<String> {
    let dir = git_dir.join("objects").join("pack");
    std::fs::create_dir_all(&dir).map_err(|e| history_error("create the pack folder", e))?;
    let temp = temp_path(&dir, "pack");
    let written = (|| -> std::io::Result<(ObjectId, Vec<Placed>)> {
        let mut out = header(&temp, entries.len())?;
        let mut placed = Vec::with_capacity(entries.len());
        for (id, bytes) in entries {
            placed.push(Placed {
                id: *id,
                crc: crc32fast::hash(bytes),
                offset: out.written,
            });
            out.write_all(bytes)?;
        }
        Ok((finish(out)?, placed))
    })();
    let (checksum, placed) = written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        history_error("write the pack", e)
    })?;
    install(&dir, &temp, checksum, &placed)?;
    Ok(format!("pack-{}", checksum.to_hex()))
}

/// A new pack file at `temp` with its header for `count` entries, to write them to.
fn header(
    temp: &Path,
    count: usize,
) -> std::io::Result<Hashing<std::io::BufWriter<std::fs::File>>> {
    let file = std::fs::File::create_new(temp)?;
    let mut out = Hashing {
        inner: std::io::BufWriter::with_capacity(1 << 20, file),
        hasher: gix::hash::hasher(gix::hash::Kind::Sha1),
        written: 0,
    };
    out.write_all(b"PACK")?;
    out.write_all(&2u32.to_be_bytes())?;
    let count =
        u32::try_from(count).map_err(|_| std::io::Error::other("too many objects for one pack"))?;
    out.write_all(&count.to_be_bytes())?;
    Ok(out)
}

/// The checksum after the entries, and the file synced.
fn finish(out: Hashing<std::io::BufWriter<std::fs::File>>) -> std::io::Result<ObjectId> {
    let checksum = out.hasher.try_finalize().map_err(std::io::Error::other)?;
    let mut file = out.inner.into_inner().map_err(|e| e.into_error())?;
    file.write_all(checksum.as_slice())?;
    file.sync_all()?;
    Ok(checksum)
}

/// Move a written pack into place and write its index beside it (a reader never finds
/// an index without its whole pack), then sync the folder.
fn install(dir: &Path, pack_temp: &Path, checksum: ObjectId, placed: &[Placed]) -> Result<()> {
    let index = index_bytes(placed, checksum)?;
    let name = format!("pack-{}", checksum.to_hex());
    let pack = dir.join(format!("{name}.pack"));
    let idx = dir.join(format!("{name}.idx"));
    if idx.exists() {
        // The same objects were packed before (a retried commit): that pack serves.
        let _ = std::fs::remove_file(pack_temp);
    } else {
        rename_into_place(pack_temp, &pack)?;
        let idx_temp = temp_path(dir, "idx");
        if let Err(e) =
            write_synced(&idx_temp, &index).and_then(|()| rename_into_place(&idx_temp, &idx))
        {
            // A pack without its index is never read: remove it, the commit is retried.
            let _ = std::fs::remove_file(&pack);
            return Err(e);
        }
    }
    // The renames are durable once the folder is.
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| history_error("sync the pack folder", e))
}

/// The id of a blob.
fn blob_id(data: &[u8]) -> Result<ObjectId> {
    gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::object::Kind::Blob, data)
        .map_err(|e| history_error("hash a blob", e))
}

/// One object as a pack entry: the entry header (type and size; for a delta, the
/// distance back to its base's entry), then the zlib stream, made by `z` (reset here: a
/// compressor is reused for many objects, not made for each, since each holds a few
/// hundred KiB of tables).
pub(crate) fn entry(
    z: &mut flate2::Compress,
    kind: u8,
    data: &[u8],
    delta_back: Option<u64>,
) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(data.len() / 2 + 64);
    // The entry header: type and size, 4 bits of size first, then 7 bits a byte.
    let mut size = data.len() as u64;
    let mut first = (kind << 4) | (size & 0x0f) as u8;
    size >>= 4;
    if size > 0 {
        first |= 0x80;
    }
    bytes.push(first);
    while size > 0 {
        let mut byte = (size & 0x7f) as u8;
        size >>= 7;
        if size > 0 {
            byte |= 0x80;
        }
        bytes.push(byte);
    }
    if let Some(mut back) = delta_back {
        // Big-endian 7 bits a byte, each continued byte standing for one more than its
        // bits (git's `OFS_DELTA` offset).
        let mut offset = vec![(back & 0x7f) as u8];
        back >>= 7;
        while back > 0 {
            back -= 1;
            offset.push(0x80 | (back & 0x7f) as u8);
            back >>= 7;
        }
        bytes.extend(offset.iter().rev());
    }
    // zlib takes at most 4 GiB a call, and a `Finish` call ends the stream there: a pack
    // holds the scan's kept bytes (10 MiB at most), so a larger blob is a caller's error.
    if u32::try_from(data.len()).is_err() {
        return Err(std::io::Error::other(
            "an object over 4 GiB cannot be a pack entry",
        ));
    }
    z.reset();
    loop {
        let (read, written) = (z.total_in(), z.total_out());
        let start = usize::try_from(read).map_err(std::io::Error::other)?;
        let status = z
            .compress_vec(&data[start..], &mut bytes, flate2::FlushCompress::Finish)
            .map_err(std::io::Error::other)?;
        if status == flate2::Status::StreamEnd {
            return Ok(bytes);
        }
        if (z.total_in(), z.total_out()) == (read, written) && bytes.len() < bytes.capacity() {
            return Err(std::io::Error::other("zlib made no progress"));
        }
        // The output is full: room for as much again.
        bytes.reserve(bytes.capacity().max(64));
    }
}

/// A compressor of pack entries (a zlib stream each, at [`LEVEL`]).
pub(crate) fn compressor() -> flate2::Compress {
    flate2::Compress::new(flate2::Compression::new(LEVEL), true)
}

/// A writer that hashes what passes through it (the pack's trailing checksum).
struct Hashing<W> {
    inner: W,
    hasher: gix::hash::Hasher,
    written: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Write the pack of `blobs` (each with its id) to a temporary file in `dir` (synced),
/// compressing a [`GROUP`] of them at a time in parallel: its path, its checksum, and
/// where each blob went.
fn write_pack<B: Blob>(
    dir: &Path,
    blobs: &[(ObjectId, &B)],
) -> Result<(PathBuf, ObjectId, Vec<Placed>)> {
    let temp = temp_path(dir, "pack");
    let written = (|| -> std::io::Result<(ObjectId, Vec<Placed>)> {
        let mut out = header(&temp, blobs.len())?;
        let mut placed = Vec::with_capacity(blobs.len());
        for group in blobs.chunks(GROUP) {
            let entries: Vec<Vec<u8>> = group
                .par_iter()
                .map_init(compressor, |z, (_, data)| {
                    entry(z, OBJ_BLOB, &data.bytes(), None)
                })
                .collect::<std::io::Result<_>>()?;
            for ((id, _), bytes) in group.iter().zip(entries) {
                placed.push(Placed {
                    id: *id,
                    crc: crc32fast::hash(&bytes),
                    offset: out.written,
                });
                out.write_all(&bytes)?;
            }
        }
        Ok((finish(out)?, placed))
    })();
    match written {
        Ok((checksum, placed)) => Ok((temp, checksum, placed)),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(history_error("write the pack", e))
        }
    }
}

/// The version 2 pack index: fan-out, sorted ids, CRC32s, offsets (31 bits, or an index
/// into the table of 64-bit offsets), the pack's checksum, then the index's own.
fn index_bytes(entries: &[Placed], pack: ObjectId) -> Result<Vec<u8>> {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_unstable_by_key(|&i| entries[i].id);
    let mut out = Vec::with_capacity(8 + 256 * 4 + entries.len() * 28 + 40);
    out.extend_from_slice(&[0xff, b't', b'O', b'c']);
    out.extend_from_slice(&2u32.to_be_bytes());
    let mut fanout = [0u32; 256];
    for e in entries {
        fanout[e.id.as_slice()[0] as usize] += 1;
    }
    let mut total = 0u32;
    for count in fanout {
        total += count;
        out.extend_from_slice(&total.to_be_bytes());
    }
    for &i in &order {
        out.extend_from_slice(entries[i].id.as_slice());
    }
    for &i in &order {
        out.extend_from_slice(&entries[i].crc.to_be_bytes());
    }
    let mut large: Vec<u64> = Vec::new();
    for &i in &order {
        let offset = entries[i].offset;
        if offset < 0x8000_0000 {
            out.extend_from_slice(&(offset as u32).to_be_bytes());
        } else {
            out.extend_from_slice(&(0x8000_0000 | large.len() as u32).to_be_bytes());
            large.push(offset);
        }
    }
    for offset in large {
        out.extend_from_slice(&offset.to_be_bytes());
    }
    out.extend_from_slice(pack.as_slice());
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(&out);
    let own = hasher
        .try_finalize()
        .map_err(|e| history_error("hash the pack index", e))?;
    out.extend_from_slice(own.as_slice());
    Ok(out)
}

/// The prefix of a pack or index being written.
const TEMP_PREFIX: &str = "tmp_notevault_";

fn temp_path(dir: &Path, ext: &str) -> PathBuf {
    dir.join(format!(
        "{TEMP_PREFIX}{}.{ext}",
        uuid::Uuid::new_v4().simple()
    ))
}

/// Remove the temporary files of a pack or loose object whose writing was interrupted (a
/// crash, a kill): called when the repository is opened, before the history thread
/// writes anything.
pub(crate) fn remove_leftovers(git_dir: &Path) {
    let objects = git_dir.join("objects");
    for (dir, prefix) in [(objects.join("pack"), TEMP_PREFIX), (objects, TEMP_OBJECT)] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // A pack whose index was never written (installed one after the other).
            let orphan = name.ends_with(".pack") && !entry.path().with_extension("idx").exists();
            if name.starts_with(prefix) || orphan {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// The prefix of a loose object being written (`durable.rs`), in `objects/`.
pub(crate) const TEMP_OBJECT: &str = "tmp_notevault_obj_";

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let written = (|| {
        let mut file = std::fs::File::create_new(path)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(path);
        return Err(history_error("write the pack index", e));
    }
    Ok(())
}

/// Rename a synced temporary file into place (the folder is synced once, after the
/// pack and its index are both there); on failure the temporary file is removed.
fn rename_into_place(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(|e| {
        let _ = std::fs::remove_file(from);
        history_error("move the pack into place", e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pack_git_reads_back() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("history.git");
        let repo = gix::init_bare(&dir).unwrap();
        let big = vec![b'x'; 300_000];
        let blobs: Vec<&[u8]> = vec![b"one\n", b"", b"one\n", &big, b"two\n"];
        let ids = write_blobs(&dir, &blobs, &|_| Ok(false)).unwrap();
        assert_eq!(ids[0], ids[2]);
        let repo = gix::open(repo.git_dir()).unwrap();
        for (id, data) in ids.iter().zip(&blobs) {
            let object = repo.find_object(*id).unwrap();
            assert_eq!(object.data.as_slice(), *data);
        }
        let packs: Vec<_> = std::fs::read_dir(dir.join("objects/pack"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(packs.len(), 2, "{packs:?}");
        assert!(packs.iter().all(|n| n.starts_with("pack-")), "{packs:?}");
        // The same blobs again (a retried commit): the pack there serves, nothing is added.
        assert_eq!(write_blobs(&dir, &blobs, &|_| Ok(false)).unwrap(), ids);
        assert_eq!(
            std::fs::read_dir(dir.join("objects/pack")).unwrap().count(),
            2
        );
        // An interrupted write's temporary file is removed when the repository opens.
        let leftover = dir
            .join("objects/pack")
            .join(format!("{TEMP_PREFIX}x.pack"));
        std::fs::File::create_new(&leftover).unwrap();
        remove_leftovers(&dir);
        assert!(!leftover.exists());
        verify_pack(
            &dir,
            &dir.join("objects/pack")
                .join(packs.iter().find(|n| n.ends_with(".idx")).unwrap()),
        );
    }

    /// `git verify-pack` of the pack of `idx` agrees, where git is installed.
    fn verify_pack(dir: &Path, idx: &Path) {
        if let Ok(out) = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(dir)
            .args(["verify-pack", "-v"])
            .arg(idx)
            .output()
        {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    #[test]
    fn a_pack_of_many_groups_holds_each_blob_once() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("history.git");
        gix::init_bare(&dir).unwrap();
        // More than two groups, with blobs repeated across the groups' boundaries.
        let texts: Vec<Vec<u8>> = (0..GROUP * 2 + 500)
            .map(|i| {
                format!("# Note {}\n\n{}\n", i % 2000, "body ".repeat(i % 2000 % 97)).into_bytes()
            })
            .collect();
        let blobs: Vec<&[u8]> = texts.iter().map(Vec::as_slice).collect();
        let ids = write_blobs(&dir, &blobs, &|_| Ok(false)).unwrap();
        assert_eq!(ids.len(), blobs.len());
        let repo = gix::open(&dir).unwrap();
        for (i, (id, data)) in ids.iter().zip(&blobs).enumerate() {
            assert_eq!(
                repo.find_object(*id).unwrap().data.as_slice(),
                *data,
                "blob {i}"
            );
            if i >= 2000 {
                assert_eq!(*id, ids[i % 2000], "blob {i} is blob {}", i % 2000);
            }
        }
        let idx = std::fs::read_dir(dir.join("objects/pack"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "idx"))
            .unwrap();
        // The fan-out table's last entry counts the objects of the pack.
        let index = std::fs::read(&idx).unwrap();
        let count = u32::from_be_bytes(index[8 + 255 * 4..8 + 256 * 4].try_into().unwrap());
        assert_eq!(count, 2000);
        verify_pack(&dir, &idx);
    }

    /// A compressor reused across blobs of every size (empty, small, larger than its
    /// first output room, incompressible) writes for each an entry header and one whole
    /// zlib stream of exactly its bytes.
    #[test]
    fn a_reused_compressor_writes_each_blob_whole() {
        use std::io::Read;
        let mut noise = Vec::new();
        let mut x: u32 = 7;
        for _ in 0..200_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            noise.push((x >> 16) as u8);
        }
        let blobs: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"# A note\n".to_vec(),
            "body ".repeat(300_000).into_bytes(),
            noise,
            b"# Again\n".to_vec(),
        ];
        let mut z = compressor();
        for blob in &blobs {
            let entry = entry(&mut z, OBJ_BLOB, blob, None).unwrap();
            // The header: a size varint (4 bits, then 7 a byte) after the type.
            let header = entry.iter().position(|b| b & 0x80 == 0).unwrap() + 1;
            let mut size = (entry[0] & 0x0f) as usize;
            for (i, b) in entry[1..header].iter().enumerate() {
                size |= ((b & 0x7f) as usize) << (4 + 7 * i);
            }
            assert_eq!(entry[0] >> 4 & 0x07, OBJ_BLOB);
            assert_eq!(size, blob.len());
            let mut stream = flate2::read::ZlibDecoder::new(&entry[header..]);
            let mut back = Vec::new();
            stream.read_to_end(&mut back).unwrap();
            assert_eq!(&back, blob, "{} bytes", blob.len());
            assert_eq!(
                stream.total_in() as usize,
                entry.len() - header,
                "one whole stream"
            );
        }
    }
}
