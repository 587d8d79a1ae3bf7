//! What a crash in the middle of a replacing write leaves, and how the next start puts
//! it right.
//!
//! A replacing write exchanges its temp file with the note (`RENAME_EXCHANGE`) and then
//! checks what it swapped out. Between the two, the note's path holds our bytes and the
//! temp file's name holds the note as it was, which may be an editor's newest save. A
//! crash there used to leave it so, and the next start removed the temp file as a
//! leftover: the editor's save was gone and our refused (and unacknowledged) bytes stayed.
//!
//! So a replacing write's temp file is named for it ([`temp_name`]: our prefix, `m`, a
//! UUID, and the note's name, its stem cut to 100 bytes) and carries a [`Mark`], the extended attribute
//! `user.notevault.temp`: its own name, the hash the write expects to swap out, the hash of
//! the bytes the marked file holds, and the note's file name. It is set before the file is
//! synced and taken off once the write is decided: after the swapped-out file is removed
//! (the check passed) and before the lease is let go (the swap was undone; our file is
//! marked again with the editor's bytes before it is put back for a waiting writer). An
//! inode keeps its attributes across renames, so after a crash in the window the mark is
//! on the file at the note's path and names the temp file beside it. [`resolve`], run on
//! each leftover at start (and by `check --repair`), decides by what the files hold now:
//!
//! | the marked file | the temp file | done |
//! |---|---|---|
//! | at the note's name, as marked | what the write expected | the write landed: the temp file is removed |
//! | at the note's name, as marked | the marked file's bytes | a copy (the put-back): removed |
//! | at the note's name, as marked | anything else (an editor's save) | put back over the marked file |
//! | changed since, or under another name (a save after the crash; an editor's backup) | expected, or the marked bytes | removed |
//! | changed since, or under another name | anything else | kept beside the note as `<stem> (recovered).<ext>` |
//! | gone (the note deleted, or saved by rename since) | the note's bytes now | removed |
//! | gone | empty | removed |
//! | gone | anything else | kept beside the note as `<stem> (recovered).<ext>` |
//!
//! The marked file is unmarked in every case. A save made after the crash is never
//! replaced, and an editor's save the write swapped out is never removed while it may be
//! the only copy. The put-back itself is an exchange whose swapped-out bytes are checked,
//! so a save made while the start runs stays too. A temp file that carries its own mark
//! (never at the note's path, or taken back: an undone write's file keeps its mark until
//! it is removed), one not named for a replacing write (a create's, an upload's, or one
//! from a version before the mark), and a symlink, are removed, as before. A name the
//! mark or the temp name carries is used only as a plain file name in the temp file's
//! folder; a recovered copy is a hard link (never over a file; found again after a start
//! cut short), keeps the note's extension (a private note stays one), and is cut to fit
//! 255 bytes.
//!
//! A start where resolving fails (a read-only vault, an immutable file) leaves the
//! leftover, and takes no write to that note as landed ([`leftover_note`]): what is at its
//! path is recorded as an editor's change, and the write's retry is answered
//! `VERSION_MOVED`, never with a receipt a later start could undo by putting the editor's
//! save back. Left: a note whose stem is over 100 bytes, gone after the crash, is looked
//! for under its cut name, so a copy may be kept that the folder holds anyway. Where a
//! filesystem keeps no user attributes nothing is marked, and a leftover is removed as
//! before.

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::vault::content_hash;
use crate::vault::path::TEMP_PREFIX;

#[cfg(target_os = "linux")]
use attr::{clear_at, probe, read, write};

/// Without user attributes (other systems) nothing is marked, as on a filesystem that
/// keeps none.
#[cfg(not(target_os = "linux"))]
mod attr_none {
    pub fn write(_: &std::fs::File, _: &[u8]) -> bool {
        false
    }
    pub fn clear(_: &std::fs::File) {}
    pub fn clear_at(_: &std::path::Path) {}
    pub fn probe(_: &std::path::Path) -> bool {
        false
    }
    pub fn read(_: &std::path::Path) -> Option<Vec<u8>> {
        None
    }
}
#[cfg(target_os = "linux")]
pub(super) use attr::clear;
#[cfg(not(target_os = "linux"))]
pub(super) use attr_none::clear;
#[cfg(not(target_os = "linux"))]
use attr_none::{clear_at, probe, read, write};

/// What follows our prefix in the name of a replacing write's temp file.
const REPLACING: &str = "m";
/// Bytes of the note's name kept in a temp file's name.
const NOTE_IN_NAME: usize = 100;

/// The name of a replacing write's temp file beside the note named `note`: our prefix,
/// `m`, a UUID (hex digits only, so `m` never starts an older name), `-`, and the note's
/// name, its stem cut to 100 bytes (at a character boundary) and its extension kept, so
/// that a swapped-out note found without its partner is kept under the note's name.
pub(super) fn temp_name(note: &OsStr) -> String {
    let (stem, ext) = stem_and_ext(Path::new(note));
    let ext = ext.filter(|e| e.len() <= 20).unwrap_or_default();
    format!(
        "{TEMP_PREFIX}{REPLACING}{}-{}{ext}",
        uuid::Uuid::now_v7().simple(),
        cut(&stem, NOTE_IN_NAME)
    )
}

/// A file name's stem and its extension with the dot (lossily as text).
fn stem_and_ext(name: &Path) -> (String, Option<String>) {
    let stem = name.file_stem().unwrap_or_default().to_string_lossy();
    let ext = name
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()));
    (stem.into_owned(), ext)
}

/// `text` cut to at most `bytes` bytes, at a character boundary.
fn cut(text: &str, bytes: usize) -> &str {
    let mut end = text.len().min(bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The note's name (its stem perhaps cut) that a replacing write's temp file name
/// carries, `None` for any other temp file.
fn note_in_name(temp: &[u8]) -> Option<&[u8]> {
    let rest = temp.strip_prefix(TEMP_PREFIX.as_bytes())?;
    let rest = rest.strip_prefix(REPLACING.as_bytes())?;
    let dash = rest.iter().position(|b| *b == b'-')?;
    Some(&rest[dash + 1..]).filter(|n| !n.is_empty())
}

/// `name` if it is a plain file name (no `/`, not `.` or `..`, not empty, not one of our
/// temp files): a name a mark or a temp name carries is used only so.
fn plain_name(name: &[u8]) -> Option<&OsStr> {
    let ok = !name.is_empty()
        && !name.contains(&b'/')
        && name != b"."
        && name != b".."
        && !name.starts_with(TEMP_PREFIX.as_bytes());
    ok.then(|| OsStr::from_bytes(name))
}

/// The mark of a replacing write's temp file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Mark {
    /// The temp file's name.
    pub name: Vec<u8>,
    /// The hash of the note the write expects to swap out.
    pub expect: String,
    /// The hash of the bytes the marked file holds.
    pub held: String,
    /// The note's file name (empty in a mark that does not say it).
    pub note: Vec<u8>,
}

impl Mark {
    fn encode(&self) -> Vec<u8> {
        let mut out = self.name.clone();
        for part in [self.expect.as_bytes(), self.held.as_bytes(), &self.note] {
            out.push(b'\n');
            out.extend_from_slice(part);
        }
        out
    }

    /// A mark as written: the four parts (the note's name last: it may hold a `\n`), or
    /// the temp file's name alone, or with the two hashes (older forms: what they do not
    /// say is empty).
    fn decode(bytes: &[u8]) -> Option<Mark> {
        let mut parts = bytes.splitn(4, |b| *b == b'\n');
        let name = parts.next()?.to_vec();
        let mut text = || String::from_utf8(parts.next().unwrap_or_default().to_vec()).ok();
        let (expect, held) = (text()?, text()?);
        let note = parts.next().unwrap_or_default().to_vec();
        Some(Mark {
            name,
            expect,
            held,
            note,
        })
    }

    fn names(&self, temp: &OsStr) -> bool {
        self.name == temp.as_bytes()
    }
}

/// Mark `file`, our temp file named `name`, holding bytes that hash to `held`, to be
/// exchanged with the note named `note` that is expected to hash to `expect`; false where
/// it could not be (a filesystem that keeps no user attributes). Marking again replaces
/// the mark.
pub(super) fn set(file: &File, name: &OsStr, note: &OsStr, expect: &str, held: &str) -> bool {
    let mark = Mark {
        name: name.as_bytes().to_vec(),
        expect: expect.to_string(),
        held: held.to_string(),
        note: note.as_bytes().to_vec(),
    };
    write(file, &mark.encode())
}

/// Mark `file` again (its mark read at `at`, where it is now) as holding bytes that
/// hash to `held`, before it is put back at the note's path with those bytes.
pub(super) fn set_held(file: &File, at: &Path, held: &str) {
    if let Some(mut mark) = of(at) {
        mark.held = held.to_string();
        let _ = write(file, &mark.encode());
    }
}

/// Write `value` as the mark of the file at `path`, as given (a test's older or made-up
/// form).
#[cfg(test)]
pub(super) fn set_raw(path: &Path, value: &[u8]) -> bool {
    File::open(path).is_ok_and(|f| write(&f, value))
}

/// The mark of the file at `path`, read without opening it (an open would wait on a
/// lease) and without following a symlink.
pub(super) fn of(path: &Path) -> Option<Mark> {
    read(path).and_then(|bytes| Mark::decode(&bytes))
}

/// Take the mark off the file at `path` if it names our temp file `name` (an editor that
/// copies attributes when it saves by rename carries the mark over to its file).
pub(super) fn clear_if_named(path: &Path, name: &OsStr) {
    if of(path).is_some_and(|m| m.names(name)) {
        clear_at(path);
    }
}

#[cfg(target_os = "linux")]
mod attr {
    use std::ffi::CString;
    use std::fs::File;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    const NAME: &std::ffi::CStr = c"user.notevault.temp";
    /// Longer than any mark (a name of up to 150 bytes, two hashes of 71, a note's name
    /// of up to 255).
    const MAX: usize = 1024;

    pub fn write(file: &File, value: &[u8]) -> bool {
        // SAFETY: the descriptor is open for the call; name and value outlive it.
        unsafe {
            libc::fsetxattr(
                file.as_raw_fd(),
                NAME.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            ) == 0
        }
    }

    pub fn clear(file: &File) {
        // SAFETY: as above.
        unsafe { libc::fremovexattr(file.as_raw_fd(), NAME.as_ptr()) };
    }

    fn c_path(path: &Path) -> Option<CString> {
        CString::new(path.as_os_str().as_bytes()).ok()
    }

    pub fn clear_at(path: &Path) {
        if let Some(path) = c_path(path) {
            // SAFETY: `path` is NUL-terminated and lives across the call.
            unsafe { libc::lremovexattr(path.as_ptr(), NAME.as_ptr()) };
        }
    }

    /// Whether the file at `path` keeps user attributes: asking for our mark answers that
    /// it has none (`ENODATA`) rather than that there are none to have (`ENOTSUP`). No
    /// write, so a read-only file answers too.
    pub fn probe(path: &Path) -> bool {
        match get(path) {
            Ok(_) => true,
            Err(e) => matches!(e.raw_os_error(), Some(libc::ENODATA | libc::ERANGE)),
        }
    }

    pub fn read(path: &Path) -> Option<Vec<u8>> {
        get(path).ok()
    }

    /// Our mark of the file at `path`, or why there is none.
    fn get(path: &Path) -> std::io::Result<Vec<u8>> {
        let path = c_path(path).ok_or(std::io::ErrorKind::InvalidInput)?;
        let mut value = [0u8; MAX];
        // SAFETY: `path` is NUL-terminated, `value` is writable for its length.
        let len = unsafe {
            libc::lgetxattr(
                path.as_ptr(),
                NAME.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        match usize::try_from(len) {
            Ok(len) => Ok(value[..len].to_vec()),
            Err(_) => Err(std::io::Error::last_os_error()),
        }
    }
}

/// The note a replacing write's leftover temp file was for: as the mark of its partner
/// says, else as its own name says (the stem perhaps cut); `None` for any other temp file.
pub fn leftover_note(temp: &Path) -> Option<PathBuf> {
    let name = temp.file_name()?;
    if let Ok(Some((marked, mark))) = marked_for(temp, name) {
        return Some(match plain_name(&mark.note) {
            Some(note) => marked.with_file_name(note),
            None => marked,
        });
    }
    let note = note_in_name(name.as_bytes()).and_then(plain_name)?;
    Some(temp.with_file_name(note))
}

/// What [`resolve`] did with a leftover temp file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leftover {
    /// It was removed: it held nothing the folder does not hold.
    Removed,
    /// It held the note swapped out by a write interrupted in its window, and was moved
    /// back to the note's path (the file named here).
    PutBack(PathBuf),
    /// It held an editor's save swapped out by an interrupted write, and the note was
    /// saved again, renamed or removed since: the save is kept beside the note as `copy`.
    Recovered { note: PathBuf, copy: PathBuf },
}

/// Put right one of our temp files left by an interrupted write (see the module doc).
/// Anything not named as our temp files is left alone (an error).
pub fn resolve(temp: &Path) -> std::io::Result<Leftover> {
    let Some(name) = super::temp_file_name(temp) else {
        return Err(std::io::Error::other("not a notevault temp file"));
    };
    let dir = temp.parent().unwrap_or(Path::new("."));
    let regular = std::fs::symlink_metadata(temp)?.file_type().is_file();
    if !regular || of(temp).is_some_and(|m| m.names(name)) {
        // Our own file (never at the note's path, or taken back from it), or not a file
        // a write of ours leaves (a symlink is removed, never followed).
        std::fs::remove_file(temp)?;
        return Ok(Leftover::Removed);
    }
    let done = match marked_for(temp, name)? {
        Some((marked, mark)) => with_marked(temp, &marked, &mark)?,
        None => without_marked(temp, name)?,
    };
    if let Err(e) = File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(folder = %dir.display(), error = %e, "cannot sync a folder after clearing a temp file");
    }
    Ok(done)
}

/// The swapped-out file `temp`, and `marked`, our file that the write put at the note's
/// path, marked `mark`.
fn with_marked(temp: &Path, marked: &Path, mark: &Mark) -> std::io::Result<Leftover> {
    let name = temp.file_name().unwrap_or_default();
    // The note's path: where the mark says the write put it (an older mark does not say:
    // where the marked file is).
    let note = match plain_name(&mark.note) {
        Some(note) => marked.with_file_name(note),
        None => marked.to_path_buf(),
    };
    let swapped_out = content_hash(&std::fs::read(temp)?);
    let held_now = content_hash(&std::fs::read(marked)?);
    let old = !mark.expect.is_empty() && swapped_out == mark.expect;
    let copy = swapped_out == mark.held || swapped_out == held_now;
    let in_place = marked == note && !mark.held.is_empty() && held_now == mark.held;
    let done = if old || copy {
        // The version the write read (in history), or what the folder holds anyway.
        std::fs::remove_file(temp)?;
        Leftover::Removed
    } else if in_place {
        put_back(temp, &note, &mark.held)?
    } else {
        Leftover::Recovered {
            copy: keep_beside(temp, &note)?,
            note,
        }
    };
    clear_if_named(marked, name);
    Ok(done)
}

/// The swapped-out file `temp` whose marked partner is gone: the note was removed, or
/// saved by a rename that did not keep the mark, since the crash.
fn without_marked(temp: &Path, name: &OsStr) -> std::io::Result<Leftover> {
    let note = note_in_name(name.as_bytes())
        .and_then(plain_name)
        .filter(|_| probe(temp));
    let bytes = std::fs::read(temp)?;
    let Some(note) = note.filter(|_| !bytes.is_empty()) else {
        // Not a replacing write's (a create's, an upload's, an older version's), a
        // filesystem that keeps no marks (nothing tells what it holds), or empty (cut
        // short before it was marked, or a save of nothing: nothing to keep).
        std::fs::remove_file(temp)?;
        return Ok(Leftover::Removed);
    };
    let note = temp.with_file_name(note);
    if std::fs::read(&note).is_ok_and(|now| now == bytes) {
        std::fs::remove_file(temp)?;
        return Ok(Leftover::Removed);
    }
    Ok(Leftover::Recovered {
        copy: keep_beside(temp, &note)?,
        note,
    })
}

/// Put the editor's save `temp` back at `note` by an exchange, then check that what came
/// out is still our refused bytes (`ours`): an editor that saved while the start ran
/// keeps its save, and the older one is kept beside it.
fn put_back(temp: &Path, note: &Path, ours: &str) -> std::io::Result<Leftover> {
    match super::exchange(temp, note) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
            std::fs::rename(temp, note)?;
            return Ok(Leftover::PutBack(note.to_path_buf()));
        }
        Err(e) => return Err(e),
    }
    let out = content_hash(&std::fs::read(temp)?);
    if out == ours {
        std::fs::remove_file(temp)?;
        return Ok(Leftover::PutBack(note.to_path_buf()));
    }
    super::exchange(temp, note)?;
    Ok(Leftover::Recovered {
        copy: keep_beside(temp, note)?,
        note: note.to_path_buf(),
    })
}

/// Move `temp` beside `note` under the first free name of `<stem> (recovered)<.ext>`,
/// `<stem> (recovered 2)<.ext>`, ... (the note's extension kept: a private note stays
/// one), the stem cut so that the name fits a file name (255 bytes). A hard link, then the
/// temp file removed: never over an existing file; a copy left by a start cut short
/// between the two is found again, not made twice.
fn keep_beside(temp: &Path, note: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let (stem, ext) = stem_and_ext(note);
    let stem = if stem.is_empty() || stem.starts_with('.') {
        format!("recovered note{stem}")
    } else {
        stem
    };
    let ext = ext.unwrap_or_else(|| ".md".to_string());
    let ours = std::fs::symlink_metadata(temp)?;
    for n in 1..1000 {
        let suffix = if n == 1 {
            format!(" (recovered){ext}")
        } else {
            format!(" (recovered {n}){ext}")
        };
        let stem = cut(&stem, 255usize.saturating_sub(suffix.len()));
        let copy = note.with_file_name(format!("{stem}{suffix}"));
        match std::fs::hard_link(temp, &copy) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let same = std::fs::symlink_metadata(&copy)
                    .is_ok_and(|m| m.ino() == ours.ino() && m.dev() == ours.dev());
                if !same {
                    continue;
                }
            }
            Err(e) => return Err(e),
        }
        std::fs::remove_file(temp)?;
        return Ok(copy);
    }
    Err(std::io::Error::other("no free name for a recovered copy"))
}

/// The file beside `temp` whose mark names it, with its mark, if any: a regular file, not
/// one of our temp files.
fn marked_for(temp: &Path, name: &OsStr) -> std::io::Result<Option<(PathBuf, Mark)>> {
    let Some(dir) = temp.parent() else {
        return Ok(None);
    };
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let ours = entry
            .file_name()
            .as_bytes()
            .starts_with(TEMP_PREFIX.as_bytes());
        if ours || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        if let Some(mark) = of(&entry.path()).filter(|m| m.names(name)) {
            return Ok(Some((entry.path(), mark)));
        }
    }
    Ok(None)
}
