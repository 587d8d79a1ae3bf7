//! A full disk is a clear state, not a crash (issue 40): on a small loop-mounted ext4
//! holding the vault and the state directory, filled to the last block, a write answers
//! 507 `INSUFFICIENT_STORAGE` (not 500 or 503), the daemon starts on the full file system
//! and serves reads and searches, and once space is freed the same write (same key) is
//! applied. Needs root and loop devices; elsewhere it says it skipped.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the operator: they fill and free a file system"
)]

use serde_json::{json, Value};

use crate::common;

use common::loopfs::{unsupported, LoopFs};

fn start(fs: &mut LoopFs) -> String {
    let daemon = common::spawn(
        &fs.mount.join("vault"),
        &fs.mount.join("state"),
        &[
            ("RATE_LIMIT_WRITE_PER_MINUTE", "0"),
            ("RATE_LIMIT_READ_PER_MINUTE", "0"),
        ],
    );
    let base = daemon.base.clone();
    fs.daemon = Some(daemon);
    base
}

async fn create(client: &reqwest::Client, base: &str, key: &str, slug: &str) -> (u16, Value) {
    let res = client
        .post(format!("{base}/v1/notes"))
        .header("Idempotency-Key", key)
        .json(
            &json!({"slug": slug, "content": format!("# {slug}\n\nzebracorn\n"), "agent_id": "t"}),
        )
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

async fn get(client: &reqwest::Client, url: String) -> (u16, Value) {
    let res = client.get(url).send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_insufficient_storage_and_recovers() {
    if let Some(why) = unsupported() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut fs = LoopFs::new(dir.path(), 48);
    let vault = fs.mount.join("vault");
    std::fs::create_dir_all(&vault).unwrap();
    for i in 0..20 {
        std::fs::write(
            vault.join(format!("seed{i}.md")),
            format!("# Seed {i}\n\nplatypus\n"),
        )
        .unwrap();
    }
    let client = reqwest::Client::new();
    let base = start(&mut fs);
    let (status, before) = create(&client, &base, "before", "before").await;
    assert_eq!(status, 201, "{before}");

    let filler = fs.fill("filler");
    let (status, refused) = create(&client, &base, "full-1", "during").await;
    common::assert_envelope(&refused, 507, "INSUFFICIENT_STORAGE");
    assert_eq!(status, 507);
    assert!(
        !vault.join("during.md").exists(),
        "a refused create leaves no file"
    );

    // The daemon starts on the full file system and serves reads and searches: after a
    // clean stop (SQLite removed its WAL index file, which it cannot make again) and
    // after a kill.
    fs.stop_daemon();
    let base = start(&mut fs);
    let (status, note) = get(&client, format!("{base}/v1/notes/before")).await;
    assert_eq!(status, 200, "{note}");
    fs.kill_daemon();
    let base = start(&mut fs);
    let (status, note) = get(&client, format!("{base}/v1/notes/seed3")).await;
    assert_eq!(status, 200, "{note}");
    let (status, note) = get(&client, format!("{base}/v1/notes/before")).await;
    assert_eq!(status, 200, "{note}");
    let (status, found) = get(&client, format!("{base}/v1/search?q=platypus")).await;
    assert_eq!(status, 200, "{found}");
    // The index is reused, not rebuilt.
    let (_, st) = get(&client, format!("{base}/v1/index-status")).await;
    assert!(st["search_index"]["rebuilt"].is_null(), "{st}");
    let (status, refused) = create(&client, &base, "full-1", "during").await;
    assert_eq!(status, 507, "{refused}");
    common::assert_envelope(&refused, 507, "INSUFFICIENT_STORAGE");

    // Space freed: the same write is applied, and search finds it once indexed.
    std::fs::remove_file(&filler).unwrap();
    let (status, receipt) = create(&client, &base, "full-1", "during").await;
    assert_eq!(status, 201, "{receipt}");
    let (status, note) = get(&client, format!("{base}/v1/notes/during")).await;
    assert_eq!(status, 200, "{note}");
    // The index writer, whose commits failed meanwhile, catches up within its back-off's
    // cap, and search finds every acknowledged note.
    common::eventually_within(
        std::time::Duration::from_secs(75),
        "the index catches up once space is back",
        || async {
            let (_, st) = get(&client, format!("{base}/v1/index-status")).await;
            st["indexed_seq"] == st["committed_seq"] && st["search_index"]["not_yet_indexed"] == 0
        },
    )
    .await;
    let (status, found) = get(&client, format!("{base}/v1/search?q=zebracorn")).await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(slugs(&found), ["before", "during"], "{found}");
}

/// Move the folder at `path` (a store in the state directory) onto a tmpfs of `mib`
/// MiB mounted in its place, its files copied over; the old copy stays beside it.
fn on_a_tmpfs_of_its_own(path: &std::path::Path, mib: u64) -> common::loopfs::Tmpfs {
    let kept = path.with_extension("kept");
    std::fs::rename(path, &kept).unwrap();
    let tmpfs = common::loopfs::Tmpfs::new(path, mib);
    let (ok, out) = common::loopfs::run(
        "cp",
        &[
            "-a",
            &format!("{}/.", kept.display()),
            path.to_str().unwrap(),
        ],
    );
    assert!(ok, "cp: {out}");
    tmpfs
}

/// A daemon whose stderr is kept: killed when dropped (before the file systems it uses
/// are unmounted), or ended with [`Serving::end`], which gives its log.
struct Serving {
    daemon: common::Daemon,
    base: String,
}

impl Serving {
    fn start(vault: &std::path::Path, state: &std::path::Path) -> Self {
        let d = common::spawn(
            vault,
            state,
            &[
                ("RATE_LIMIT_WRITE_PER_MINUTE", "0"),
                ("RATE_LIMIT_READ_PER_MINUTE", "0"),
            ],
        );
        Self {
            base: d.base.clone(),
            daemon: d,
        }
    }

    /// Stop it (SIGTERM, or a kill) and give what it logged after its address.
    fn end(mut self, kill: bool) -> String {
        let child = &mut self.daemon.child;
        if kill {
            let _ = child.kill();
        } else {
            // SAFETY: signalling a child process of ours by its id.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        }
        let _ = child.wait();
        self.daemon.rest()
    }
}

async fn create_with(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    slug: &str,
    content: &str,
) -> (u16, Value) {
    let res = client
        .post(format!("{base}/v1/notes"))
        .header("Idempotency-Key", key)
        .json(&json!({"slug": slug, "content": content, "agent_id": "t"}))
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

fn slugs(found: &Value) -> Vec<String> {
    let mut out: Vec<String> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["slug"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

/// Regression (issue 40, part 4): on a full disk the index's commit failed, yet the
/// start-up sync said "up to date" and `indexed_seq` reached `committed_seq` with the
/// next change while the index lacked the notes; and the writer, dead after its failed
/// commit, never caught up. Here only the index's file system is full (a tmpfs on
/// `<state>/index`), so notes are accepted while the index cannot commit them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coverage_lags_while_the_index_cannot_commit_and_catches_up_once_space_is_back() {
    if let Some(why) = unsupported() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (vault, state) = (dir.path().join("vault"), dir.path().join("state"));
    std::fs::create_dir_all(&vault).unwrap();
    for i in 0..20 {
        std::fs::write(
            vault.join(format!("seed{i}.md")),
            format!("# Seed {i}\n\nplatypus\n"),
        )
        .unwrap();
    }
    let client = reqwest::Client::new();
    let first = Serving::start(&vault, &state);
    let (status, receipt) = create(&client, &first.base, "before", "before").await;
    assert_eq!(status, 201, "{receipt}");
    first.end(false);

    // The index moves to a file system of its own.
    let index = state.join("index");
    let tmpfs = on_a_tmpfs_of_its_own(&index, 16);

    let second = Serving::start(&vault, &state);
    let filler = common::loopfs::fill(&tmpfs.mount, "filler");
    for i in 0..5 {
        let (status, receipt) =
            create(&client, &second.base, &format!("a{i}"), &format!("a{i}")).await;
        assert_eq!(status, 201, "a write does not need the index: {receipt}");
    }
    // Killed: what only the overlay in memory held is the next start's to index.
    second.end(true);

    let third = Serving::start(&vault, &state);
    let base = third.base.clone();
    common::eventually("the start-up sync fails on the full index", || async {
        let (_, st) = get(&client, format!("{base}/v1/index-status")).await;
        !st["search_index"]["last_error"].is_null()
    })
    .await;
    let (status, receipt) = create_with(
        &client,
        &base,
        "late",
        "late",
        "# Late\n\nzebracorn wombat\n",
    )
    .await;
    assert_eq!(status, 201, "{receipt}");
    common::eventually("the later note is searchable from memory", || async {
        let (_, found) = get(&client, format!("{base}/v1/search?q=wombat")).await;
        slugs(&found) == ["late"]
    })
    .await;
    let (_, st) = get(&client, format!("{base}/v1/index-status")).await;
    let committed = st["committed_seq"].as_i64().unwrap();
    assert!(
        st["indexed_seq"].as_i64().unwrap() < committed,
        "the index lacks a0..a4: coverage must lag, {st}"
    );
    assert!(
        st["search_index"]["not_yet_indexed"].as_u64().unwrap() >= 5,
        "{st}"
    );
    let (status, found) = get(&client, format!("{base}/v1/search?q=zebracorn")).await;
    assert_eq!(status, 200, "{found}");
    assert!(!slugs(&found).contains(&"a0".to_string()), "{found}");
    let coverage = &found["coverage"];
    assert!(
        coverage["indexed_seq"].as_i64().unwrap() < coverage["committed_seq"].as_i64().unwrap(),
        "the answer says it lags: {coverage}"
    );

    // Space back: the index catches up within the back-off's cap, and finds every
    // acknowledged note.
    std::fs::remove_file(&filler).unwrap();
    common::eventually_within(
        std::time::Duration::from_secs(75),
        "the index catches up once space is back",
        || async {
            let (_, st) = get(&client, format!("{base}/v1/index-status")).await;
            st["indexed_seq"] == st["committed_seq"] && st["search_index"]["not_yet_indexed"] == 0
        },
    )
    .await;
    let (_, found) = get(&client, format!("{base}/v1/search?q=zebracorn")).await;
    assert_eq!(
        slugs(&found),
        ["a0", "a1", "a2", "a3", "a4", "before", "late"],
        "{found}"
    );
    let log = third.end(false);
    let failed = log
        .find("search index start-up sync failed")
        .unwrap_or_else(|| panic!("the failed sync is said: {log}"));
    assert!(log.contains("retry_in_s"), "the back-off is said: {log}");
    let up_to_date = log.find("search index up to date").unwrap();
    assert!(failed < up_to_date, "up to date only once it is: {log}");
    drop(tmpfs);
}

async fn delete(client: &reqwest::Client, base: &str, key: &str, slug: &str) -> (u16, Value) {
    let res = client
        .delete(format!("{base}/v1/notes/{slug}?agent_id=t"))
        .header("Idempotency-Key", key)
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

/// A delete on a full disk: it moves the note to `.trash/` on the same disk, so it frees
/// nothing, and its revision and history need a little space. It answers 507 with a hint
/// saying so and what to do, changes nothing, and applies once space is freed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_on_a_full_disk_says_it_frees_nothing_and_applies_once_space_is_back() {
    if let Some(why) = unsupported() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut fs = LoopFs::new(dir.path(), 48);
    let vault = fs.mount.join("vault");
    std::fs::create_dir_all(&vault).unwrap();
    std::fs::write(vault.join("old.md"), "# Old\n\nplatypus\n").unwrap();
    let client = reqwest::Client::new();
    let base = start(&mut fs);
    let filler = fs.fill("filler");

    let (status, refused) = delete(&client, &base, "d1", "old").await;
    assert_eq!(status, 507, "{refused}");
    common::assert_envelope(&refused, 507, "INSUFFICIENT_STORAGE");
    let hint = refused["hint"].as_str().unwrap();
    assert!(
        hint.contains("a delete frees nothing") && hint.contains("`.trash/`"),
        "{hint}"
    );
    assert!(
        vault.join("old.md").exists(),
        "a refused delete moves nothing"
    );
    let (status, note) = get(&client, format!("{base}/v1/notes/old")).await;
    assert_eq!(status, 200, "{note}");

    std::fs::remove_file(&filler).unwrap();
    let (status, receipt) = delete(&client, &base, "d1", "old").await;
    assert_eq!(status, 200, "{receipt}");
    assert!(vault.join(".trash/old.md").exists());
    let (status, gone) = get(&client, format!("{base}/v1/notes/old")).await;
    common::assert_envelope(&gone, 404, "NOTE_NOT_FOUND");
    assert_eq!(status, 404);
}

fn spawn_with(vault: &std::path::Path, state: &std::path::Path, crash_at: Option<&str>) -> Serving {
    let mut env = vec![
        ("RATE_LIMIT_WRITE_PER_MINUTE", "0"),
        ("RATE_LIMIT_READ_PER_MINUTE", "0"),
    ];
    if let Some(at) = crash_at {
        env.push(("NOTEVAULT_TEST_CRASH_AT", at));
    }
    let d = common::spawn(vault, state, &env);
    Serving {
        base: d.base.clone(),
        daemon: d,
    }
}

/// Regression (issue 40, part 4): a create answered 507 after its file had landed (the
/// disk filled while it was recorded), and its retry with the same key got 409
/// `NAME_COLLISION`. The file is kept (the user's bytes), and the retry answers its
/// receipt: at once, and after a restart. Needs no root: the write fails at the step
/// after its file lands as on a full disk (`full:after-file`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_file_landed_before_the_disk_filled_answers_its_retry_with_the_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let (vault, state) = (dir.path().join("vault"), dir.path().join("state"));
    std::fs::create_dir_all(&vault).unwrap();
    std::fs::write(vault.join("seed.md"), "# Seed\n\nplatypus\n").unwrap();
    let client = reqwest::Client::new();
    let content = "# Landed\n\nzebracorn\n";

    let d = spawn_with(&vault, &state, Some("full:after-file"));
    let (status, refused) = create_with(&client, &d.base, "k1", "landed", content).await;
    assert_eq!(status, 507, "{refused}");
    common::assert_envelope(&refused, 507, "INSUFFICIENT_STORAGE");
    assert_eq!(
        std::fs::read_to_string(vault.join("landed.md")).unwrap(),
        content,
        "the bytes that landed are kept"
    );
    let (status, receipt) = create_with(&client, &d.base, "k1", "landed", content).await;
    assert_eq!(status, 201, "the retry gets the receipt: {receipt}");
    assert_eq!(receipt["content_hash"], common::blake3_of(content));
    let (status, note) = get(&client, format!("{}/v1/notes/landed", d.base)).await;
    assert_eq!(status, 200, "{note}");
    assert_eq!(note["version_id"], receipt["version_id"]);
    let (status, again) = create_with(&client, &d.base, "k1", "landed", content).await;
    assert_eq!(
        (status, &again),
        (201, &receipt),
        "a replay answers the same"
    );
    let (status, other) = create_with(&client, &d.base, "k1", "other", content).await;
    assert_eq!(status, 422, "{other}");
    d.end(false);

    // The same, with a restart between the failure and the retry, once the watcher has
    // recorded the landed file as an editor's change.
    let d = spawn_with(&vault, &state, Some("full:after-file"));
    let (status, refused) = create_with(&client, &d.base, "k2", "later", content).await;
    assert_eq!(status, 507, "{refused}");
    let base = d.base.clone();
    common::eventually("the watcher records the landed file", || async {
        get(&client, format!("{base}/v1/notes/later")).await.0 == 200
    })
    .await;
    d.end(true);
    let d = spawn_with(&vault, &state, None);
    let (status, receipt) = create_with(&client, &d.base, "k2", "later", content).await;
    assert_eq!(status, 201, "the retry gets the receipt: {receipt}");
    let (status, note) = get(&client, format!("{}/v1/notes/later", d.base)).await;
    assert_eq!(status, 200, "{note}");
    assert_eq!(note["version_id"], receipt["version_id"]);
    let (_, notes) = get(&client, format!("{}/v1/notes", d.base)).await;
    assert_eq!(notes["notes"].as_array().map(Vec::len), Some(3), "{notes}");
}

/// The bytes of every file under `dir`.
fn size_of_tree(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            size_of_tree(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

/// Regression (issue 40, part 4): after history commits failed on a full disk, the
/// restart found history behind the revisions and recorded the vault as found, writing
/// every note's blob again as one pack (and filling the disk it had just got back).
/// Here only `history.git` is full (a tmpfs), so the notes are accepted (their history
/// is the receipt's `flow_back_error`); the restart writes only what history lacks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_history_failed_writes_only_what_history_lacks() {
    if let Some(why) = unsupported() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (vault, state) = (dir.path().join("vault"), dir.path().join("state"));
    std::fs::create_dir_all(&vault).unwrap();
    // Notes that do not compress away: a pack of them all is large beside a few.
    for i in 0..300u64 {
        let words: Vec<String> = (0..200u64)
            .map(|w| {
                format!(
                    "{:x}",
                    (i * 7919 + w * 104_729).wrapping_mul(2_654_435_761) % 1_000_003
                )
            })
            .collect();
        std::fs::write(
            vault.join(format!("seed{i}.md")),
            format!("# Seed {i}\n\n{}\n", words.join(" ")),
        )
        .unwrap();
    }
    let client = reqwest::Client::new();
    let first = Serving::start(&vault, &state);
    let (status, receipt) = create(&client, &first.base, "before", "before").await;
    assert_eq!(status, 201, "{receipt}");
    first.end(false);

    // History moves to a file system of its own.
    let git = state.join("history.git");
    let tmpfs = on_a_tmpfs_of_its_own(&git, 16);
    let bootstrap = size_of_tree(&git.join("objects"));

    let second = Serving::start(&vault, &state);
    let filler = common::loopfs::fill(&tmpfs.mount, "filler");
    for i in 0..3 {
        let (status, receipt) =
            create(&client, &second.base, &format!("a{i}"), &format!("a{i}")).await;
        assert_eq!(status, 201, "{receipt}");
        assert!(!receipt["flow_back_error"].is_null(), "{receipt}");
    }
    second.end(true);
    std::fs::remove_file(&filler).unwrap();
    let before = size_of_tree(&git.join("objects"));

    let third = Serving::start(&vault, &state);
    let base = third.base.clone();
    common::eventually("history catches up", || async {
        let (_, st) = get(&client, format!("{base}/v1/index-status")).await;
        st["history"]["head_seq"] == st["committed_seq"] && st["history"]["pending"] == 0
    })
    .await;
    let (_, st) = get(&client, format!("{base}/v1/index-status")).await;
    assert!(st["search_index"]["rebuilt"].is_null(), "{st}");
    let grown = size_of_tree(&git.join("objects")) - before;
    assert!(
        grown * 10 < bootstrap,
        "the restart wrote {grown} bytes of objects; the vault's are {bootstrap}"
    );
    let files = common::loopfs::run(
        "git",
        &[
            "--git-dir",
            git.to_str().unwrap(),
            "ls-tree",
            "-r",
            "--name-only",
            "HEAD",
        ],
    )
    .1;
    assert_eq!(files.lines().count(), 304, "{files}");
    let (ok, a1) = common::loopfs::run(
        "git",
        &["--git-dir", git.to_str().unwrap(), "show", "HEAD:a1.md"],
    );
    assert!(ok && a1 == "# a1\n\nzebracorn\n", "{a1}");
    third.end(false);
    drop(tmpfs);
}
