use super::*;
use std::path::Path;

#[test]
fn changes_in_a_row_are_held_until_the_pace_or_a_waiting_search() {
    let ms = Duration::from_millis;
    // (changes a note, since the last publish, urgent) → published now
    let table = [
        (true, None, false, true),          // the first change ever
        (true, Some(ms(500)), false, true), // after a quiet moment
        (true, Some(PUBLISH_EVERY), false, true),
        (true, Some(ms(3)), false, false), // in a row: held
        (true, Some(ms(3)), true, true),   // a search waits, or the start-up sync
        (false, Some(ms(3)), false, true), // no note changed (an attachment's seq)
    ];
    for (dirty, since, urgent, want) in table {
        assert_eq!(
            publish_now(dirty, since, urgent),
            want,
            "dirty {dirty}, since {since:?}, urgent {urgent}"
        );
    }
}

/// A note of `text` at `rel` in the folder `root`, as the catalog makes it.
fn note(root: &Path, rel: &str, id: &str, text: &str) -> Arc<Note> {
    #[allow(clippy::disallowed_methods, reason = "a test's own temp folder")]
    std::fs::write(root.join(rel), text).unwrap();
    let observed = crate::vault::observe::observe(root, rel).unwrap();
    let now = chrono::Utc::now();
    Arc::new(crate::vault::catalog::note_from(
        observed,
        id.into(),
        format!("v-{id}"),
        now,
        now,
    ))
}

fn found(index: &SearchIndex, word: &str) -> usize {
    let parsed = crate::index::query::parse(word, crate::index::query::Match::Any).unwrap();
    index.search(&parsed, None, 0, 10).unwrap().matched
}

fn until(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// With nothing to write for [`PARK_AFTER`] the writers close; a change after that opens
/// them again: it is searchable, and written to disk (it survives a reopen).
#[test]
fn idle_writers_close_and_the_next_change_opens_them() {
    let state = tempfile::tempdir().unwrap();
    let vault = tempfile::tempdir().unwrap();
    let index = SearchIndex::open(state.path()).unwrap();
    index.start(
        vec![note(vault.path(), "a.md", "a", "# Alpha\n\nquokka\n")],
        1,
    );
    until("the start-up sync", || index.indexed_seq() >= 1);
    until("the writers close", || !index.state().writers_open);
    assert_eq!(found(&index, "quokka"), 1);

    index.upsert(note(vault.path(), "b.md", "b", "# Beta\n\nnumbat\n"), 2);
    until("the change is searchable", || index.indexed_seq() >= 2);
    assert_eq!(found(&index, "numbat"), 1);
    // Written to disk, then closed again.
    until("the writers close again", || {
        !index.state().writers_open && index.state().docs == 2
    });
    index.remove("a", 3);
    until("the removal is applied", || index.indexed_seq() >= 3);
    assert_eq!(found(&index, "quokka"), 0);
    until("closed once more", || !index.state().writers_open);
    drop(index);

    let index = SearchIndex::open(state.path()).unwrap();
    assert_eq!(found(&index, "numbat"), 1, "on disk");
    assert_eq!(found(&index, "quokka"), 0, "removed on disk");
}
