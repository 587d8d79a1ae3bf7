use super::*;

/// Run `write` with `editor` playing an editor right after the exchange.
fn with_editor<T>(editor: impl FnMut(&Path, &Path) + 'static, write: impl FnOnce() -> T) -> T {
    AFTER_EXCHANGE.with(|h| *h.borrow_mut() = Some(Box::new(editor)));
    let out = write();
    AFTER_EXCHANGE.with(|h| *h.borrow_mut() = None);
    out
}

/// [`with_editor`], the editor having saved `saved` in place before the swap (after
/// the caller's read: the check then fails).
fn saved_first<T>(
    saved: &'static [u8],
    editor: impl FnMut(&Path, &Path) + 'static,
    write: impl FnOnce() -> T,
) -> T {
    BEFORE_SWAP.with(|h| {
        *h.borrow_mut() = Some(Box::new(move |_: &Path, path: &Path| {
            fs::write(path, saved).unwrap()
        }))
    });
    let out = with_editor(editor, write);
    BEFORE_SWAP.with(|h| *h.borrow_mut() = None);
    out
}

/// The names of the files in `dir`.
fn names(dir: &Path) -> Vec<std::ffi::OsString> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect()
}

/// An opener of the note on another thread, started by an editor hook; what it read.
#[cfg(target_os = "linux")]
type Opener = std::sync::Arc<std::sync::Mutex<Option<std::thread::JoinHandle<Vec<u8>>>>>;

/// Start `open` of `path` on another thread, kept in `slot`, and return once it waits
/// on our lease.
#[cfg(target_os = "linux")]
fn open_waiting(slot: &Opener, path: &Path, open: impl FnOnce(&Path) -> Vec<u8> + Send + 'static) {
    let at = path.to_path_buf();
    *slot.lock().unwrap() = Some(std::thread::spawn(move || open(&at)));
    wait_for_a_waiting_open(path);
}

/// What the opener in `slot` read, once it is done.
#[cfg(target_os = "linux")]
fn opened(slot: &Opener) -> Vec<u8> {
    slot.lock().unwrap().take().unwrap().join().unwrap()
}

/// An appender that waits on our file (so it is put back for it).
#[cfg(target_os = "linux")]
fn append(path: &Path) -> Vec<u8> {
    use std::io::Write as _;
    let mut f = fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(b" + appended").unwrap();
    Vec::new()
}

/// A write to `a.md` read at `v1`, refused (the editor saved `editor 1` in place before
/// the exchange) while an appender waits on our file; `editor` plays the editor again
/// right before our file is put back for the appender. The note's path.
#[cfg(target_os = "linux")]
fn put_back_raced_by(dir: &Path, editor: impl FnMut(&Path, &Path) + 'static) -> std::path::PathBuf {
    let path = dir.join("a.md");
    atomic_write(&path, b"v1", &Expect::Absent).unwrap();
    BEFORE_PUT_BACK.with(|hook| *hook.borrow_mut() = Some(Box::new(editor)));
    let writer = Opener::default();
    let slot = writer.clone();
    let err = saved_first(
        b"editor 1",
        move |_, path| open_waiting(&slot, path, append),
        || atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"v1"))),
    )
    .unwrap_err();
    BEFORE_PUT_BACK.with(|hook| *hook.borrow_mut() = None);
    assert_eq!(err.reason, Reason::VERSION_MOVED);
    opened(&writer);
    path
}

#[cfg(target_os = "linux")]
#[test]
fn an_editor_save_during_the_exchange_is_never_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.md");
    atomic_write(&path, b"v1", &Expect::Absent).unwrap();
    let expect = Expect::Hash(content_hash(b"v1"));
    // The editor, having saved in place before the exchange (the check then fails),
    // saves again by rename while our file is at the path.
    let err = saved_first(
        b"editor 1",
        |_, path| {
            let swp = path.with_file_name(".a.md.swp");
            fs::write(&swp, b"editor 1\neditor 2").unwrap();
            fs::rename(&swp, path).unwrap();
        },
        || atomic_write(&path, b"ours", &expect),
    )
    .unwrap_err();
    assert_eq!(err.reason, Reason::VERSION_MOVED);
    assert_eq!(fs::read(&path).unwrap(), b"editor 1\neditor 2");
    // Only the editor's file is left: no temp file of ours.
    assert_eq!(names(dir.path()), ["a.md"]);
    // The in-place save alone: swapped back, the editor's bytes stay.
    let err = saved_first(
        b"editor 3",
        |_, _| {},
        || {
            atomic_write(
                &path,
                b"ours",
                &Expect::Hash(content_hash(b"editor 1\neditor 2")),
            )
        },
    )
    .unwrap_err();
    assert_eq!(err.reason, Reason::VERSION_MOVED);
    assert_eq!(fs::read(&path).unwrap(), b"editor 3");
}

/// Wait until an open of the file at `path` waits on our lease (`/proc/locks` shows
/// the lease as being broken).
#[cfg(target_os = "linux")]
fn wait_for_a_waiting_open(path: &Path) {
    use std::os::unix::fs::MetadataExt;
    let ino = fs::symlink_metadata(path).unwrap().ino();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let locks = fs::read_to_string("/proc/locks").unwrap();
        if locks
            .lines()
            .any(|l| l.contains("BREAKING") && l.contains(&format!(":{ino} ")))
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no open waited on the lease:\n{locks}"
        );
        std::thread::yield_now();
    }
}

/// Whether the folder of `dir` gives leases (ext4, xfs, btrfs, tmpfs do; some FUSE
/// and network filesystems, or `fs.leases-enable = 0`, do not).
#[cfg(target_os = "linux")]
fn leases_here(dir: &Path) -> bool {
    let probe = File::create(dir.join("probe")).unwrap();
    let lease = lease::Lease::take(&probe).is_some();
    drop(probe);
    fs::remove_file(dir.join("probe")).unwrap();
    if !lease {
        eprintln!("SKIPPED: no file leases on {}", dir.display());
    }
    lease
}

/// Someone opens the path while our file is there and the check then fails: they
/// wait, and find the editor's bytes, never ours; one that writes saves at the path.
#[cfg(target_os = "linux")]
#[test]
fn an_open_during_the_exchange_never_sees_our_bytes_when_the_check_fails() {
    let dir = tempfile::tempdir().unwrap();
    if !leases_here(dir.path()) {
        return;
    }
    let path = dir.path().join("a.md");
    atomic_write(&path, b"v1", &Expect::Absent).unwrap();
    let expect = Expect::Hash(content_hash(b"v1"));
    // The editor saved in place before the exchange (so the check fails), then reads
    // the note again while our file is at the path.
    let reader = Opener::default();
    let slot = reader.clone();
    let err = saved_first(
        b"editor 1",
        move |_, path| open_waiting(&slot, path, |at| fs::read(at).unwrap()),
        || atomic_write(&path, b"ours", &expect),
    )
    .unwrap_err();
    assert_eq!(err.reason, Reason::VERSION_MOVED);
    let read = opened(&reader);
    assert_eq!(
        read,
        b"editor 1",
        "the reader saw {:?}",
        String::from_utf8_lossy(&read)
    );
    assert_eq!(fs::read(&path).unwrap(), b"editor 1");

    // Now it saves in place while our file is at the path: the save is at the path.
    // Our file, put back for it, is marked as holding the editor's bytes by then.
    let held = std::rc::Rc::new(std::cell::RefCell::new(None));
    let seen = held.clone();
    BEFORE_PUT_BACK.with(|hook| {
        *hook.borrow_mut() = Some(Box::new(move |temp: &Path, _: &Path| {
            *seen.borrow_mut() = mark::of(temp).map(|m| m.held);
        }))
    });
    let writer = Opener::default();
    let slot = writer.clone();
    let err = saved_first(
        b"editor 2",
        move |_, path| {
            open_waiting(&slot, path, |at| {
                fs::write(at, b"editor 2\neditor 3").unwrap();
                // Unmarked before the lease was let go.
                assert_eq!(mark::of(at), None);
                Vec::new()
            });
        },
        || atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"editor 1"))),
    )
    .unwrap_err();
    assert_eq!(err.reason, Reason::VERSION_MOVED);
    BEFORE_PUT_BACK.with(|hook| *hook.borrow_mut() = None);
    opened(&writer);
    if marks_here(dir.path()) {
        assert_eq!(*held.borrow(), Some(content_hash(b"editor 2")));
    }
    assert_eq!(fs::read(&path).unwrap(), b"editor 2\neditor 3");
    assert_eq!(names(dir.path()), ["a.md"], "no temp file is left behind");
    assert_eq!(mark::of(&path), None, "our file, put back, is unmarked");

    // And when the check passes, a reader that waited reads our write.
    let reader = Opener::default();
    let slot = reader.clone();
    let expect = Expect::Hash(content_hash(b"editor 2\neditor 3"));
    with_editor(
        move |_, path| {
            open_waiting(&slot, path, |at| {
                let read = fs::read(at).unwrap();
                assert_eq!(mark::of(at), None, "unmarked before the lease was let go");
                read
            })
        },
        || atomic_write(&path, b"ours", &expect),
    )
    .unwrap();
    assert_eq!(opened(&reader), b"ours");
}

/// A writer waits on our file, and the editor saves by rename right before our file
/// is put back for it: the editor's save stays at the path.
#[cfg(target_os = "linux")]
#[test]
fn a_rename_save_before_the_put_back_stays() {
    let dir = tempfile::tempdir().unwrap();
    if !leases_here(dir.path()) {
        return;
    }
    let path = put_back_raced_by(dir.path(), |_, path| {
        let swp = path.with_file_name(".a.md.swp");
        fs::write(&swp, b"editor 2").unwrap();
        fs::rename(&swp, path).unwrap();
    });
    assert_eq!(fs::read(path).unwrap(), b"editor 2");
    assert_eq!(names(dir.path()), ["a.md"], "no temp file is left behind");
}

/// The note is renamed while our file is at its path and the check then fails: the
/// note, under its new name, holds the editor's bytes, not ours.
#[cfg(target_os = "linux")]
#[test]
fn a_note_renamed_during_the_exchange_keeps_the_editors_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.md");
    let moved_to = dir.path().join("b.md");
    atomic_write(&path, b"v1", &Expect::Absent).unwrap();
    let to = moved_to.clone();
    let err = saved_first(
        b"editor 1",
        move |_, path| fs::rename(path, &to).unwrap(),
        || atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"v1"))),
    )
    .unwrap_err();
    assert_eq!(err.reason, Reason::VERSION_MOVED);
    assert_eq!(fs::read(&moved_to).unwrap(), b"editor 1");
    assert_eq!(names(dir.path()), ["b.md"], "no temp file is left behind");
}

/// As above, with the editor writing its file in place instead: that write stays.
#[cfg(target_os = "linux")]
#[test]
fn an_in_place_save_before_the_put_back_stays() {
    let dir = tempfile::tempdir().unwrap();
    if !leases_here(dir.path()) {
        return;
    }
    // It writes the file at the path, the editor's own (back there), which waits on
    // the note's lease: our file is not put back for the appender, whose append goes
    // into it and is lost (a second program saving while another waits).
    let editor = Opener::default();
    let slot = editor.clone();
    let path = put_back_raced_by(dir.path(), move |_, path| {
        open_waiting(&slot, path, |at| {
            fs::write(at, b"editor 1, then 2").unwrap();
            Vec::new()
        })
    });
    opened(&editor);
    assert_eq!(fs::read(&path).unwrap(), b"editor 1, then 2");
    assert_eq!(names(dir.path()), ["a.md"], "no temp file is left behind");
}

/// Where no lease can be had on the note's file (a file not ours), the content check
/// alone stands: an editor writing the swapped-out file in place during the check (as
/// through an `open` made before the exchange) has its bytes back at the path.
#[cfg(target_os = "linux")]
#[test]
fn without_the_notes_lease_an_in_place_save_during_the_check_stays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.md");
    atomic_write(&path, b"v1", &Expect::Absent).unwrap();
    NO_NOTE_LEASE.set(true);
    let err = with_editor(
        |temp, _| fs::write(temp, b"editor 1").unwrap(),
        || atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"v1"))),
    )
    .unwrap_err();
    NO_NOTE_LEASE.set(false);
    assert_eq!(err.reason, Reason::VERSION_MOVED);
    assert_eq!(fs::read(&path).unwrap(), b"editor 1");
    assert_eq!(names(dir.path()), ["a.md"], "no temp file is left behind");
}

/// The filesystem test of a refused lease agrees with the mount table: the local
/// filesystems tests run on are known as local (else a note open for writing would go
/// unnoticed there), and `/proc` (not a filesystem notes live on) is not.
#[cfg(target_os = "linux")]
#[test]
fn local_filesystems_are_known_as_local() {
    use std::os::unix::ffi::OsStringExt;
    let dir = tempfile::tempdir().unwrap();
    let probe = dir.path().join("probe");
    fs::write(&probe, b"x").unwrap();
    let at = fs::canonicalize(&probe).unwrap();
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    // The mount the probe is under: the longest mount point that is a prefix (its
    // spaces and the like written as octal escapes), the last such (the top one).
    let unescape = |p: &str| {
        let (b, mut out, mut i) = (p.as_bytes(), Vec::new(), 0);
        while i < b.len() {
            let octal = (b[i] == b'\\')
                .then(|| p.get(i + 1..i + 4))
                .flatten()
                .and_then(|o| u8::from_str_radix(o, 8).ok());
            match octal {
                Some(c) => {
                    out.push(c);
                    i += 4;
                }
                None => {
                    out.push(b[i]);
                    i += 1;
                }
            }
        }
        std::path::PathBuf::from(std::ffi::OsString::from_vec(out))
    };
    let mut under: Option<(usize, String)> = None;
    for l in mountinfo.lines() {
        let Some((left, right)) = l.split_once(" - ") else {
            continue;
        };
        let (Some(point), Some(fstype)) = (left.split(' ').nth(4), right.split(' ').next()) else {
            continue;
        };
        let point = unescape(point);
        let len = point.as_os_str().len();
        if at.starts_with(&point) && under.as_ref().is_none_or(|(n, _)| len >= *n) {
            under = Some((len, fstype.to_string()));
        }
    }
    let fstype = under.unwrap().1;
    let local = watches_open_writers(&probe);
    if ["ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay"].contains(&&*fstype) {
        assert!(local, "{fstype} is not known as local");
    } else {
        eprintln!("{fstype}: local = {local}");
    }
    assert!(!watches_open_writers(Path::new("/proc/self/status")));
}

/// A program holds the note open for writing (an editor about to save in place through
/// it): the write is refused before anything is swapped, and that save is the note's.
#[cfg(target_os = "linux")]
#[test]
fn a_note_open_for_writing_is_not_replaced_under_its_writer() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    if !leases_here(dir.path()) {
        return;
    }
    let path = dir.path().join("a.md");
    atomic_write(&path, b"v1", &Expect::Absent).unwrap();
    if !lease::refused_only_for_writers(&File::open(&path).unwrap()) {
        eprintln!("SKIPPED: not a filesystem known to be local");
        return;
    }
    let held = fs::OpenOptions::new().write(true).open(&path).unwrap();
    let err = atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"v1"))).unwrap_err();
    assert_eq!(err.reason, Reason::VERSION_MOVED);
    assert!(err.message.contains("open for writing"), "{}", err.message);
    assert_eq!(fs::read(&path).unwrap(), b"v1");
    assert_eq!(names(dir.path()), ["a.md"], "no temp file is left behind");
    held.set_len(0).unwrap();
    held.write_all_at(b"editor", 0).unwrap();
    drop(held);
    assert_eq!(fs::read(&path).unwrap(), b"editor");
    // Once it is closed the note is written; a program reading it never stops that.
    let reader = File::open(&path).unwrap();
    atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"editor"))).unwrap();
    drop(reader);
    assert_eq!(fs::read(&path).unwrap(), b"ours");
}

/// An editor's open for writing found the note's file before the exchange and reaches
/// it during the check (the file is unchanged so far): the swap is undone, and the
/// editor's save lands in the note at its path, not in a removed file.
#[cfg(target_os = "linux")]
#[test]
fn an_in_place_save_reaching_the_note_during_the_check_is_never_removed() {
    let dir = tempfile::tempdir().unwrap();
    if !leases_here(dir.path()) {
        return;
    }
    let path = dir.path().join("a.md");
    atomic_write(&path, b"v1", &Expect::Absent).unwrap();
    let writer = Opener::default();
    let slot = writer.clone();
    // After the exchange the note's file is under the temp name: an open of that name
    // finds the file the editor's open found.
    let err = with_editor(
        move |temp, _| {
            open_waiting(&slot, temp, |at| {
                fs::write(at, b"editor").unwrap();
                Vec::new()
            })
        },
        || atomic_write(&path, b"ours", &Expect::Hash(content_hash(b"v1"))),
    )
    .unwrap_err();
    assert_eq!(err.reason, Reason::VERSION_MOVED);
    opened(&writer);
    assert_eq!(fs::read(&path).unwrap(), b"editor");
    assert_eq!(names(dir.path()), ["a.md"], "no temp file is left behind");
}

/// A temp dir whose files keep user extended attributes (the marks), or `None` (the
/// test is skipped, and says so) where they do not.
#[cfg(target_os = "linux")]
fn marked_dir() -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    marks_here(dir.path()).then_some(dir)
}

/// Whether files in `dir` keep our mark (user extended attributes); else a line
/// says the test is skipped.
#[cfg(target_os = "linux")]
fn marks_here(dir: &Path) -> bool {
    let probe = dir.join("probe");
    let file = File::create(&probe).unwrap();
    mark::set(&file, OsStr::new("probe"), OsStr::new("p"), "x", "y");
    let kept = mark::of(&probe).is_some();
    fs::remove_file(&probe).unwrap();
    if !kept {
        eprintln!(
            "SKIPPED: {} keeps no user extended attributes",
            dir.display()
        );
    }
    kept
}

use std::ffi::OsStr;

mod marks;
