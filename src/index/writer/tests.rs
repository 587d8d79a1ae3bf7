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
pub(in crate::index) fn note(root: &Path, rel: &str, id: &str, text: &str) -> Arc<Note> {
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

/// How many notes the index finds for `word`.
pub(in crate::index) fn found(index: &SearchIndex, word: &str) -> usize {
    let parsed = crate::index::query::parse(word, crate::index::query::Match::Any).unwrap();
    index.search(&parsed, None, 0, 10).unwrap().matched
}

/// Wait (up to 20 s) until `check` holds.
pub(in crate::index) fn until(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// With nothing to write for [`Pace::park`] the writers close; a change after that opens
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

/// A database's vault ([`Pace::CACHE`]): a change is searchable from the overlay at once
/// but reaches the disk only once writes pause for the pace's idle time, and not when the
/// writer ends; the next open's start-up sync indexes what was left.
#[test]
fn with_a_cache_pace_the_disk_waits_and_the_next_start_catches_up() {
    let state = tempfile::tempdir().unwrap();
    let vault = tempfile::tempdir().unwrap();
    let a = note(vault.path(), "a.md", "a", "# Alpha\n\nquokka\n");
    let b = note(vault.path(), "b.md", "b", "# Beta\n\nnumbat\n");
    let index = SearchIndex::open(state.path()).unwrap();
    index.set_pace(Pace::CACHE);
    index.start(vec![a], 1);
    until("the start-up sync", || index.indexed_seq() >= 1);
    index.upsert(b.clone(), 2);
    index.remove("a", 3);
    until("the changes are searchable", || index.indexed_seq() >= 3);
    assert_eq!(found(&index, "numbat"), 1, "from the overlay");
    assert_eq!(found(&index, "quokka"), 0, "removed in the overlay");
    assert_eq!(index.state().docs, 1, "not on disk yet");
    drop(index);

    let index = SearchIndex::open(state.path()).unwrap();
    assert_eq!(found(&index, "numbat"), 0, "left in memory at the end");
    assert_eq!(found(&index, "quokka"), 1, "its removal too");
    index.set_pace(Pace {
        idle: Duration::from_millis(50),
        ..Pace::CACHE
    });
    index.start(vec![b], 3);
    until("the start-up sync", || index.state().synced_notes.is_some());
    assert_eq!(found(&index, "numbat"), 1, "caught up by the sync");
    assert_eq!(found(&index, "quokka"), 0, "removed by the sync");
    let c = note(vault.path(), "c.md", "c", "# Gamma\n\nwombat\n");
    index.upsert(c, 3);
    until("on disk once writes pause", || index.state().docs == 2);
    drop(index);
    let index = SearchIndex::open(state.path()).unwrap();
    assert_eq!(found(&index, "wombat"), 1, "on disk");
}

/// Notes only in the overlay (a new vault's disk index holds none yet) are scored by
/// the parts' statistics: finite scores, the better match first.
#[test]
fn notes_only_in_memory_are_scored_and_ranked() {
    let state = tempfile::tempdir().unwrap();
    let vault = tempfile::tempdir().unwrap();
    let index = SearchIndex::open(state.path()).unwrap();
    index.set_pace(Pace::CACHE);
    index.start(Vec::new(), 0);
    until("the start-up sync", || index.indexed_seq() >= 0);
    let strong = note(vault.path(), "s.md", "s", "# Axolotl\n\naxolotl axolotl\n");
    let weak = note(
        vault.path(),
        "w.md",
        "w",
        "# Other\n\none axolotl among many other words here\n",
    );
    index.upsert(weak.clone(), 1);
    index.upsert(strong.clone(), 2);
    until("the changes are searchable", || index.indexed_seq() >= 2);
    assert_eq!(index.state().docs, 0, "nothing on disk");
    let parsed = crate::index::query::parse("axolotl", crate::index::query::Match::Any).unwrap();
    let hits = index.search(&parsed, None, 0, 10).unwrap().hits;
    let keys: Vec<u64> = hits.iter().map(|h| h.key).collect();
    assert_eq!(keys, vec![strong.key(), weak.key()], "{hits:?}");
    assert!(
        hits.iter().all(|h| h.score.is_finite() && h.score > 0.0),
        "{hits:?}"
    );
}

/// A start on an index of several segments (a change after the last start's merge went
/// to disk as its own) merges them into one after its sync; the status says `merging`
/// until the merged segment is searched.
#[test]
fn a_start_merges_the_segments_it_finds_and_says_so_until_done() {
    let state = tempfile::tempdir().unwrap();
    let vault = tempfile::tempdir().unwrap();
    let a = note(vault.path(), "a.md", "a", "# Alpha\n\nquokka\n");
    let index = SearchIndex::open(state.path()).unwrap();
    index.start(vec![a.clone()], 1);
    until("the start-up sync", || index.indexed_seq() >= 1);
    assert!(!index.state().merging, "one segment: nothing to merge");
    let b = note(vault.path(), "b.md", "b", "# Beta\n\nnumbat\n");
    index.upsert(b.clone(), 2);
    until("the change is on disk, a second segment", || {
        index.state().docs == 2 && index.state().segments == 2
    });
    drop(index);

    let index = SearchIndex::open(state.path()).unwrap();
    index.start(vec![a, b], 2);
    until("the start-up sync", || index.state().synced_notes.is_some());
    until("the merge ends", || !index.state().merging);
    let st = index.state();
    assert_eq!((st.segments, st.docs), (1, 2));
    assert_eq!(found(&index, "numbat") + found(&index, "quokka"), 2);
}

/// The keys of the documents of `part` that contain `word` in their body and whose
/// current version `overlay` says the part holds.
fn held_with(overlay: &Overlay, part: usize, word: &str) -> Vec<u64> {
    let (_, fields) = super::super::schema::schema();
    let (id, searcher) = &overlay.parts[part];
    let query = tantivy::query::TermQuery::new(
        tantivy::Term::from_field_text(fields.body, word),
        tantivy::schema::IndexRecordOption::Basic,
    );
    let docs = searcher
        .search(&query, &tantivy::collector::DocSetCollector)
        .unwrap();
    let mut keys: Vec<u64> = docs
        .into_iter()
        .filter_map(|addr| {
            let column = searcher
                .segment_reader(addr.segment_ord)
                .fast_fields()
                .u64("key")
                .unwrap();
            column.first(addr.doc_id)
        })
        .filter(|k| overlay.current.get(k) == Some(&Some(*id)))
        .collect();
    keys.sort_unstable();
    keys
}

fn held_anywhere(overlay: &Overlay, word: &str) -> Vec<u64> {
    let mut keys: Vec<u64> = (0..overlay.parts.len())
        .flat_map(|p| held_with(overlay, p, word))
        .collect();
    keys.sort_unstable();
    keys
}

/// An overlay with no part yet, and no change.
fn no_parts() -> (overlay::Parts, HashMap<u64, Option<Arc<Note>>>) {
    let (schema, fields) = super::super::schema::schema();
    (overlay::Parts::new(schema, fields), HashMap::new())
}

/// The overlay's parts, built one change at a time: a few parts however many changes
/// (the newest merged while they grow), each note's current version searchable in
/// exactly one of them, an edited note's old words and a deleted note in none.
#[test]
fn overlay_parts_stay_few_and_hold_each_current_version_once() {
    let vault = tempfile::tempdir().unwrap();
    let (mut parts, mut changed) = no_parts();
    let mut keys = Vec::new();
    for i in 0..64u64 {
        let n = note(
            vault.path(),
            &format!("n{i}.md"),
            &format!("n{i}"),
            &format!("# Note {i}\n\nshared word{i}\n"),
        );
        keys.push(n.key());
        changed.insert(n.key(), Some(n.clone()));
        parts.changed(n.key());
        assert!(parts.dirty());
        parts.build(&changed).unwrap();
        parts.merge(&changed).unwrap();
        assert!(!parts.dirty());
        let overlay = parts.overlay(&changed);
        let bound = 1 + (i + 1).ilog2() as usize;
        assert!(
            overlay.parts.len() <= bound,
            "{} parts after {} changes",
            overlay.parts.len(),
            i + 1
        );
        assert_eq!(held_anywhere(&overlay, "shared").len(), i as usize + 1);
    }
    // An edit and a delete, each built apart.
    let edited = note(vault.path(), "n3.md", "n3", "# Note 3\n\nrewritten\n");
    changed.insert(edited.key(), Some(edited.clone()));
    parts.changed(edited.key());
    parts.build(&changed).unwrap();
    parts.merge(&changed).unwrap();
    changed.insert(keys[5], None);
    parts.changed(keys[5]);
    parts.build(&changed).unwrap();
    parts.merge(&changed).unwrap();

    let overlay = parts.overlay(&changed);
    assert_eq!(
        overlay.current.get(&keys[5]),
        Some(&None),
        "deleted: in no part"
    );
    assert_eq!(held_anywhere(&overlay, "rewritten"), vec![keys[3]]);
    assert!(
        held_anywhere(&overlay, "word3").is_empty(),
        "the old version is superseded"
    );
    assert!(held_anywhere(&overlay, "word5").is_empty(), "deleted");
    let mut live: Vec<u64> = keys
        .iter()
        .copied()
        .filter(|k| *k != keys[3] && *k != keys[5])
        .collect();
    live.sort_unstable();
    assert_eq!(held_anywhere(&overlay, "shared"), live);

    parts.clear();
    assert!(parts.overlay(&HashMap::new()).parts.is_empty());
}

/// Past the merge's cap the parts stop growing: a few of at most the cap and a counter's
/// worth of small ones, however long writes go on before the overlay goes to disk.
#[test]
fn overlay_parts_past_the_merge_cap_stay_few() {
    let vault = tempfile::tempdir().unwrap();
    let (mut parts, mut changed) = no_parts();
    for batch in 0..100u64 {
        for i in batch * 8..batch * 8 + 8 {
            let n = note(
                vault.path(),
                &format!("n{i}.md"),
                &format!("n{i}"),
                &format!("# Note {i}\n\nshared\n"),
            );
            changed.insert(n.key(), Some(n.clone()));
            parts.changed(n.key());
        }
        parts.build(&changed).unwrap();
        parts.merge(&changed).unwrap();
        let overlay = parts.overlay(&changed);
        // Up to 800 notes: at most three parts of 256, and the rest (under 256) in parts
        // of 128, 64, 32, 16 and 8.
        assert!(
            overlay.parts.len() <= 3 + 5,
            "{} parts",
            overlay.parts.len()
        );
    }
    let overlay = parts.overlay(&changed);
    assert_eq!(held_anywhere(&overlay, "shared").len(), 800);
    // 800 = 3 × 256 + 32: the cap kept the parts apart.
    let sizes: Vec<usize> = (0..overlay.parts.len())
        .map(|p| held_with(&overlay, p, "shared").len())
        .collect();
    assert_eq!(sizes, vec![256, 256, 256, 32]);
}

/// Searches across the disk index and several overlay parts: an edited note found by its
/// new words only, once; a deleted one not at all; the counts the same once all of it is
/// on disk.
#[test]
fn a_search_over_disk_and_parts_finds_each_current_version_once() {
    let state = tempfile::tempdir().unwrap();
    let vault = tempfile::tempdir().unwrap();
    let index = SearchIndex::open(state.path()).unwrap();
    let start: Vec<Arc<Note>> = (0..4)
        .map(|i| {
            note(
                vault.path(),
                &format!("s{i}.md"),
                &format!("s{i}"),
                &format!("# S {i}\n\nquokka wombat\n"),
            )
        })
        .collect();
    index.start(start, 1);
    until("the start-up sync", || index.indexed_seq() >= 1);
    // Each change published apart (a search waits for it): a part each.
    let changes = [
        ("s0", "# S 0\n\nnumbat wombat\n"),
        ("s1", "# S 1\n\nnumbat wombat\n"),
        ("s0", "# S 0\n\nnumbat bilby\n"),
        ("n4", "# N 4\n\nquokka bilby\n"),
    ];
    let mut seq = 1;
    for (id, text) in changes {
        seq += 1;
        index.upsert(note(vault.path(), &format!("{id}.md"), id, text), seq);
        index.want(seq);
        until("the change is searchable", || index.indexed_seq() >= seq);
    }
    seq += 1;
    index.remove("s2", seq);
    index.want(seq);
    until("the removal is searchable", || index.indexed_seq() >= seq);
    let expect = |when: &str| {
        // quokka: s3 and n4 (s0, s1 rewritten, s2 deleted); numbat: s0, s1; wombat: s1, s3;
        // bilby: s0, n4.
        for (word, n) in [("quokka", 2), ("numbat", 2), ("wombat", 2), ("bilby", 2)] {
            assert_eq!(found(&index, word), n, "{word} {when}");
        }
    };
    let commits = index.state().commits;
    expect("with the overlay");
    until("the overlay on disk", || index.state().commits > commits);
    assert_eq!(index.state().docs, 4);
    expect("on disk");
}
