//! Crash leftovers: the mark a write cut short leaves, and what the next start does.

use super::*;

/// A write of `ours` to `path` (holding `v1`) cut short right after the exchange, as
/// a crash would leave it: `editor` (if any) saved in place just before, so its bytes
/// are what was swapped out. The temp file's path.
#[cfg(target_os = "linux")]
fn cut_short_after_the_exchange(path: &Path, editor: Option<&[u8]>) -> std::path::PathBuf {
    let temp = prepare(path, b"ours", &Expect::Hash(content_hash(b"v1"))).unwrap();
    temp.sync().unwrap();
    renameat2(&temp.temp, path, libc::RENAME_EXCHANGE).unwrap();
    if let Some(bytes) = editor {
        fs::write(&temp.temp, bytes).unwrap();
    }
    let left = temp.temp.clone();
    // The crash: nothing of the write's own clean-up runs.
    std::mem::forget(temp);
    assert_eq!(fs::read(path).unwrap(), b"ours");
    left
}

/// A fresh `a.md` holding `v1` in `dir` (whatever was there before removed).
fn v1(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("a.md");
    let _ = fs::remove_file(&path);
    atomic_write(&path, b"v1", &Expect::Absent).unwrap();
    path
}

#[cfg(target_os = "linux")]
#[test]
fn only_the_exchange_window_carries_the_mark() {
    let Some(dir) = marked_dir() else {
        return;
    };
    let path = v1(dir.path());
    assert_eq!(mark::of(&path), None, "a create is never marked");
    // In the window: our file, at the path, names the temp file that holds the note.
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let saw = seen.clone();
    with_editor(
        move |temp, path| {
            saw.borrow_mut().push((
                mark::of(path),
                temp.file_name().unwrap().as_encoded_bytes().to_vec(),
                mark::of(temp),
            ))
        },
        || atomic_write(&path, b"v2", &Expect::Hash(content_hash(b"v1"))),
    )
    .unwrap();
    let (at_path, temp_name, at_temp) = seen.borrow_mut().pop().unwrap();
    assert!(temp_name.starts_with(b".notevault-tmp-m") && temp_name.ends_with(b"-a.md"));
    assert_eq!(
        at_path,
        Some(mark::Mark {
            name: temp_name,
            expect: content_hash(b"v1"),
            held: content_hash(b"v2"),
            note: b"a.md".to_vec(),
        })
    );
    assert_eq!(at_temp, None);
    // Decided either way: nothing is left marked.
    assert_eq!(mark::of(&path), None, "a write that landed");
    let err = saved_first(
        b"editor",
        |_, _| {},
        || atomic_write(&path, b"v3", &Expect::Hash(content_hash(b"v2"))),
    )
    .unwrap_err();
    assert_eq!(err.reason, Reason::VERSION_MOVED);
    assert_eq!(fs::read(&path).unwrap(), b"editor");
    assert_eq!(mark::of(&path), None, "a write refused");
    assert_eq!(names(dir.path()), ["a.md"]);
}

#[cfg(target_os = "linux")]
#[test]
fn a_note_swapped_out_by_a_write_cut_short_goes_back() {
    let Some(dir) = marked_dir() else {
        return;
    };
    let path = v1(dir.path());
    // The editor's save, which the check would have refused to replace, is back.
    let temp = cut_short_after_the_exchange(&path, Some(b"editor"));
    assert_eq!(
        resolve_leftover(&temp).unwrap(),
        Leftover::PutBack(path.clone())
    );
    assert_eq!(fs::read(&path).unwrap(), b"editor");
    assert_eq!(names(dir.path()), ["a.md"]);
    assert_eq!(mark::of(&path), None);
    // A write whose check would have passed landed: it stays (the start records it as
    // the write, and the retry gets its receipt).
    let path = v1(dir.path());
    let temp = cut_short_after_the_exchange(&path, None);
    assert_eq!(resolve_leftover(&temp).unwrap(), Leftover::Removed);
    assert_eq!(fs::read(&path).unwrap(), b"ours");
    assert_eq!(names(dir.path()), ["a.md"]);
    assert_eq!(mark::of(&path), None);
}

#[cfg(target_os = "linux")]
#[test]
fn a_save_made_after_the_crash_is_never_replaced() {
    let Some(dir) = marked_dir() else {
        return;
    };
    let copy = dir.path().join("a (recovered).md");
    // Saved in place after the crash: both saves stay, the one swapped out beside it.
    let path = v1(dir.path());
    let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
    fs::write(&path, b"ours, edited after the crash").unwrap();
    assert_eq!(
        resolve_leftover(&temp).unwrap(),
        Leftover::Recovered {
            note: path.clone(),
            copy: copy.clone()
        }
    );
    assert_eq!(fs::read(&path).unwrap(), b"ours, edited after the crash");
    assert_eq!(fs::read(&copy).unwrap(), b"editor 1");
    assert_eq!(mark::of(&path), None);
    fs::remove_file(&copy).unwrap();
    // When what was swapped out is the version the write read, it is in history: removed.
    let path = v1(dir.path());
    let temp = cut_short_after_the_exchange(&path, None);
    fs::write(&path, b"edited after the crash").unwrap();
    assert_eq!(resolve_leftover(&temp).unwrap(), Leftover::Removed);
    assert_eq!(fs::read(&path).unwrap(), b"edited after the crash");
    assert_eq!(names(dir.path()), ["a.md"]);
    // An editor that copies attributes saved by rename: its file carries the mark.
    let path = v1(dir.path());
    let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
    let copied = mark::of(&path).unwrap();
    let swp = dir.path().join(".a.md.swp");
    let file = File::create(&swp).unwrap();
    fs::write(&swp, b"editor 2").unwrap();
    let os = |b: &[u8]| <OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b).to_owned();
    mark::set(
        &file,
        &os(&copied.name),
        &os(&copied.note),
        &copied.expect,
        &copied.held,
    );
    assert_eq!(mark::of(&swp), Some(copied));
    fs::rename(&swp, &path).unwrap();
    assert!(matches!(
        resolve_leftover(&temp).unwrap(),
        Leftover::Recovered { .. }
    ));
    assert_eq!(fs::read(&path).unwrap(), b"editor 2");
    assert_eq!(fs::read(&copy).unwrap(), b"editor 1");
    assert_eq!(mark::of(&path), None);
    fs::remove_file(&copy).unwrap();
    // Cut short after our file, given the editor's bytes, was put back for a writer,
    // which then saved into it: its save stays, and the copy is removed.
    let path = v1(dir.path());
    let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
    let ours = File::options().write(true).open(&path).unwrap();
    assert!(rewrite(&ours, b"editor 1"));
    mark::set_held(&ours, &path, &content_hash(b"editor 1"));
    fs::write(&path, b"editor 1 + the writer's save").unwrap();
    assert_eq!(resolve_leftover(&temp).unwrap(), Leftover::Removed);
    assert_eq!(fs::read(&path).unwrap(), b"editor 1 + the writer's save");
    assert_eq!(names(dir.path()), ["a.md"]);
    assert_eq!(mark::of(&path), None);
}

#[cfg(target_os = "linux")]
#[test]
fn a_note_gone_or_renamed_after_the_crash_keeps_the_save_swapped_out() {
    let Some(dir) = marked_dir() else {
        return;
    };
    let copy = dir.path().join("a (recovered).md");
    let recovered = |temp: &Path, path: &Path| {
        assert_eq!(
            resolve_leftover(temp).unwrap(),
            Leftover::Recovered {
                note: path.to_path_buf(),
                copy: copy.clone()
            }
        );
        assert_eq!(fs::read(&copy).unwrap(), b"editor 1");
        fs::remove_file(&copy).unwrap();
    };
    // The note removed.
    let path = v1(dir.path());
    let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
    fs::remove_file(&path).unwrap();
    recovered(&temp, &path);
    assert!(names(dir.path()).is_empty());
    // Saved by a rename that keeps no attributes.
    let path = v1(dir.path());
    let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
    fs::write(dir.path().join("new"), b"editor 2").unwrap();
    fs::rename(dir.path().join("new"), &path).unwrap();
    recovered(&temp, &path);
    assert_eq!(fs::read(&path).unwrap(), b"editor 2");
    // Emacs's first save: the note renamed to a backup, a new file written. The save
    // swapped out goes beside the note, not over the backup, which is unmarked.
    let path = v1(dir.path());
    let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
    let backup = dir.path().join("a.md~");
    fs::rename(&path, &backup).unwrap();
    fs::write(&path, b"editor 2").unwrap();
    recovered(&temp, &path);
    assert_eq!(fs::read(&backup).unwrap(), b"ours");
    assert_eq!(mark::of(&backup), None);
    assert_eq!(fs::read(&path).unwrap(), b"editor 2");
    fs::remove_file(&backup).unwrap();
    // Removed, and the folder holds the same bytes anyway: nothing to keep.
    let path = v1(dir.path());
    let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
    fs::remove_file(&path).unwrap();
    fs::write(&path, b"editor 1").unwrap();
    assert_eq!(resolve_leftover(&temp).unwrap(), Leftover::Removed);
    assert_eq!(names(dir.path()), ["a.md"]);
}

#[cfg(target_os = "linux")]
#[test]
fn a_recovered_copy_never_replaces_a_file_and_fits_a_name() {
    let Some(dir) = marked_dir() else {
        return;
    };
    let path = v1(dir.path());
    fs::write(dir.path().join("a (recovered).md"), b"taken").unwrap();
    let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
    fs::write(&path, b"editor 2").unwrap();
    let done = resolve_leftover(&temp).unwrap();
    let copy = dir.path().join("a (recovered 2).md");
    assert!(
        matches!(&done, Leftover::Recovered { copy: c, .. } if *c == copy),
        "{done:?}"
    );
    assert_eq!(
        fs::read(dir.path().join("a (recovered).md")).unwrap(),
        b"taken"
    );
    assert_eq!(fs::read(&copy).unwrap(), b"editor 1");
    // A name as long as a file name can be: the copy's is cut to fit.
    let long = dir.path().join(format!("{}.md", "é".repeat(126)));
    atomic_write(&long, b"v1", &Expect::Absent).unwrap();
    let temp = cut_short_after_the_exchange(&long, Some(b"editor 1"));
    fs::write(&long, b"editor 2").unwrap();
    let Leftover::Recovered { copy, .. } = resolve_leftover(&temp).unwrap() else {
        panic!("kept");
    };
    let name = copy.file_name().unwrap().to_str().unwrap();
    assert!(
        name.len() <= 255 && name.ends_with("é (recovered).md"),
        "{name}"
    );
    assert_eq!(fs::read(&copy).unwrap(), b"editor 1");
}

/// Set our mark's attribute on the file at `path` to `value` as written (an older
/// form, or one a test makes up).
#[cfg(target_os = "linux")]
fn set_raw_mark(path: &Path, value: &[u8]) {
    assert!(mark::set_raw(path, value));
}

#[cfg(target_os = "linux")]
#[test]
fn what_a_mark_or_a_leftover_says_is_checked() {
    use std::os::unix::fs::PermissionsExt;
    let Some(dir) = marked_dir() else {
        return;
    };
    // A note name that leaves the folder is not followed: the marked file's own path.
    let path = v1(dir.path());
    let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
    let mut mark = mark::of(&path).unwrap();
    mark.note = b"../outside.md".to_vec();
    let value = [
        &mark.name[..],
        mark.expect.as_bytes(),
        mark.held.as_bytes(),
        &mark.note,
    ]
    .join(&b'\n');
    set_raw_mark(&path, &value);
    assert_eq!(
        resolve_leftover(&temp).unwrap(),
        Leftover::PutBack(path.clone())
    );
    assert_eq!(fs::read(&path).unwrap(), b"editor 1");
    assert!(!dir
        .path()
        .parent()
        .unwrap()
        .join("outside (recovered).md")
        .exists());
    assert_eq!(names(dir.path()), ["a.md"]);
    // An older mark (the temp file's name and the hashes, a plain temp name) still puts
    // the save back where the marked file is.
    let path = v1(dir.path());
    let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
    let old = temp.with_file_name(".notevault-tmp-0194d3a5c0de7000a000000000000002");
    fs::rename(&temp, &old).unwrap();
    let mark = mark::of(&path).unwrap();
    let value = [
        old.file_name().unwrap().as_encoded_bytes(),
        mark.expect.as_bytes(),
        mark.held.as_bytes(),
    ]
    .join(&b'\n');
    set_raw_mark(&path, &value);
    assert_eq!(
        resolve_leftover(&old).unwrap(),
        Leftover::PutBack(path.clone())
    );
    assert_eq!(fs::read(&path).unwrap(), b"editor 1");
    // A read-only save whose partner is gone is kept all the same.
    let path = v1(dir.path());
    let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
    fs::remove_file(&path).unwrap();
    fs::set_permissions(&temp, fs::Permissions::from_mode(0o444)).unwrap();
    let copy = dir.path().join("a (recovered).md");
    assert_eq!(
        resolve_leftover(&temp).unwrap(),
        Leftover::Recovered {
            note: path.clone(),
            copy: copy.clone()
        }
    );
    assert_eq!(fs::read(&copy).unwrap(), b"editor 1");
    // A start cut short between the copy's link and the temp file's removal: the
    // copy is found again, not made twice.
    let path = v1(dir.path());
    fs::remove_file(&copy).unwrap();
    let temp = cut_short_after_the_exchange(&path, Some(b"editor 1"));
    fs::remove_file(&path).unwrap();
    fs::hard_link(&temp, &copy).unwrap();
    assert_eq!(
        resolve_leftover(&temp).unwrap(),
        Leftover::Recovered {
            note: path.clone(),
            copy: copy.clone()
        }
    );
    assert_eq!(names(dir.path()), ["a (recovered).md"]);
    fs::remove_file(&copy).unwrap();
    // A private note's copy stays private (its extension is kept).
    let private = dir.path().join("j.nvpriv");
    atomic_write(&private, b"v1", &Expect::Absent).unwrap();
    let temp = cut_short_after_the_exchange(&private, Some(b"sealed 1"));
    fs::remove_file(&private).unwrap();
    assert_eq!(
        resolve_leftover(&temp).unwrap(),
        Leftover::Recovered {
            note: private.clone(),
            copy: dir.path().join("j (recovered).nvpriv")
        }
    );
    fs::remove_file(dir.path().join("j (recovered).nvpriv")).unwrap();
    // Empty, unmarked (cut short between its creation and its mark): nothing to keep.
    let empty = dir
        .path()
        .join(".notevault-tmp-m0194d3a5c0de7000a000000000000003-b.md");
    fs::write(&empty, b"").unwrap();
    assert_eq!(resolve_leftover(&empty).unwrap(), Leftover::Removed);
    // A symlink named as ours is removed, its target untouched.
    let link = dir
        .path()
        .join(".notevault-tmp-m0194d3a5c0de7000a000000000000004-c.md");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    assert_eq!(resolve_leftover(&link).unwrap(), Leftover::Removed);
    assert!(names(dir.path()).is_empty());
}

#[test]
fn a_leftover_that_never_replaced_a_note_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1(dir.path());
    // Cut short before the exchange: the temp file carries its own mark.
    let temp = prepare(&path, b"ours", &Expect::Hash(content_hash(b"v1"))).unwrap();
    let left = temp.temp.clone();
    std::mem::forget(temp);
    assert_eq!(resolve_leftover(&left).unwrap(), Leftover::Removed);
    // A create's temp file carries none, and is named as before the mark.
    let temp = prepare(&dir.path().join("b.md"), b"new", &Expect::Absent).unwrap();
    let left = temp.temp.clone();
    std::mem::forget(temp);
    assert_eq!(resolve_leftover(&left).unwrap(), Leftover::Removed);
    // So is one from a version before the mark.
    fs::write(dir.path().join(".notevault-tmp-0194d3a5c0de70"), b"half").unwrap();
    assert_eq!(
        resolve_leftover(&dir.path().join(".notevault-tmp-0194d3a5c0de70")).unwrap(),
        Leftover::Removed
    );
    assert_eq!(fs::read(&path).unwrap(), b"v1");
    assert_eq!(names(dir.path()), ["a.md"]);
    // Only our temp files are touched.
    let err = resolve_leftover(&path).unwrap_err();
    assert!(err.to_string().contains("not a notevault temp file"));
    assert_eq!(fs::read(&path).unwrap(), b"v1");
}

#[test]
fn writes_replace_only_the_version_that_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.md");
    atomic_write(&path, b"one", &Expect::Absent).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"one");
    let err = atomic_write(&path, b"x", &Expect::Absent).unwrap_err();
    assert_eq!(err.reason, Reason::NAME_COLLISION);
    let one = content_hash(b"one");
    atomic_write(&path, b"two", &Expect::Hash(one.clone())).unwrap();
    let err = atomic_write(&path, b"three", &Expect::Hash(one)).unwrap_err();
    assert_eq!(err.reason, Reason::VERSION_MOVED);
    assert_eq!(fs::read(&path).unwrap(), b"two");
    let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temp file is left behind");
}

#[test]
fn moves_refuse_collisions_and_stale_sources() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.md");
    let b = dir.path().join("sub/b.md");
    fs::write(&a, "a").unwrap();
    atomic_move(&a, &b, &Expect::Hash(content_hash(b"a"))).unwrap();
    assert!(!a.exists() && b.exists());
    fs::write(&a, "again").unwrap();
    let err = atomic_move(&a, &b, &Expect::Hash(content_hash(b"again"))).unwrap_err();
    assert_eq!(err.reason, Reason::NAME_COLLISION);
    let err = atomic_move(
        &a,
        &dir.path().join("c.md"),
        &Expect::Hash(content_hash(b"x")),
    )
    .unwrap_err();
    assert_eq!(err.reason, Reason::VERSION_MOVED);
}
