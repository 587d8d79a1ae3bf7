//! The metadata half of the storage seam, one contract for both implementations: each
//! check is written once over `&dyn Metadata` and run against SQLite (`meta::Meta`) and
//! against PostgreSQL (`hosted::meta::PgMeta`, on the harness's server, a database per
//! test). On PostgreSQL each check runs twice, on two vaults of one database: the second
//! run finds the first's rows only if a statement forgot its vault.
//!
//! Then what only hosted mode has: vaults side by side, a record from a stale seq
//! refused with nothing written, instances racing on one vault, a record stuck behind a
//! lock cancelled, and a stopped or unreachable server answering `STORAGE_UNAVAILABLE`
//! at once, then served again when it is back.

#![allow(
    clippy::cloned_ref_to_slice_refs,
    reason = "the rows a check expects are written out as arrays of clones"
)]

use std::time::{Duration, Instant};

use notevault::error::Reason;
use notevault::history::{Change, CommitRequest, Content, Stored};
use notevault::hosted::meta::PgMeta;
use notevault::hosted::revisions::{PgRevisions, Staged};
use notevault::hosted::{self, registry, schema, Database, Options};
use notevault::meta::Meta;
use notevault::storage::metadata::{
    Audit, Idempotency, Metadata, OpLog, Records, ReviewQueue, Sessions, Settings, Tokens,
};
use notevault::storage::rows::{
    AttachmentChangeRow, AttachmentRow, AuditEvent, AuditKind, NoteRow, OpRow, PendingRow,
    RevisionRow, SessionRow,
};
use notevault::storage::Revisions;
use notevault::vault::content_hash;
use notevault::vault::packed::Packed;

use crate::common::postgres::{self, Cluster};

const T0: &str = "2026-01-01T00:00:00.000Z";
const T1: &str = "2026-01-01T00:05:00.000Z";
const T2: &str = "2026-01-01T00:10:00.000Z";
const T3: &str = "2026-01-01T00:15:00.000Z";
const T4: &str = "2026-01-01T00:20:00.000Z";

/// A migrated database's new vault named `name`, as hosted mode's metadata.
fn pg_vault(url: &str, name: &str) -> PgMeta {
    let db = Database::open(url, Options::default()).unwrap();
    hosted::block_on(schema::migrate(&db)).unwrap();
    let vault = hosted::block_on(registry::create(&db, name, None)).unwrap();
    PgMeta::new(db, vault.id)
}

/// Run `check` on a fresh SQLite store, then on two vaults of one fresh PostgreSQL
/// database, one after the other.
fn on_both(check: fn(&dyn Metadata)) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Meta::open(&dir.path().join("meta.sqlite")).unwrap();
    check(&sqlite);
    let Some(db) = postgres::database() else {
        return;
    };
    check(&pg_vault(&db.url, "first"));
    check(&pg_vault(&db.url, "second"));
}

/// A string no other vault or run holds (digests and token prefixes are unique across
/// the vaults of a database, as random secrets are).
fn unique(what: &str) -> String {
    format!("{what}-{}", uuid::Uuid::new_v4().simple())
}

fn revision(
    seq: i64,
    note: &str,
    path: &str,
    prev: Option<&str>,
    hash: Option<&str>,
    kind: &str,
) -> RevisionRow {
    RevisionRow {
        seq,
        version_id: format!("v{seq}"),
        note_id: note.into(),
        path: path.into(),
        prev_version_id: prev.map(Into::into),
        content_hash: hash.map(Into::into),
        actor: "agent".into(),
        kind: kind.into(),
        created_at: T1.into(),
        commit_id: None,
    }
}

fn op(seq: i64, kind: &str, note: Option<&str>, path: &str, at: &str) -> OpRow {
    OpRow {
        seq,
        kind: kind.into(),
        note_id: note.map(Into::into),
        path: path.into(),
        from_path: None,
        version_id: note.map(|_| format!("v{seq}")),
        prev_version_id: None,
        content_hash: (!kind.contains("delete")).then(|| format!("blake3:{seq:04}")),
        visibility: "standard".into(),
        actor: "agent".into(),
        created_at: at.into(),
    }
}

fn note(id: &str, path: &str, version: &str) -> NoteRow {
    NoteRow {
        note_id: id.into(),
        path: path.into(),
        version_id: version.into(),
        content_hash: format!("blake3:{version}"),
        created_at: T0.into(),
        observed_at: T1.into(),
    }
}

fn sorted(mut notes: Vec<NoteRow>) -> Vec<NoteRow> {
    notes.sort_by(|a, b| a.note_id.cmp(&b.note_id));
    notes
}

fn seqs(revisions: &[RevisionRow]) -> Vec<i64> {
    revisions.iter().map(|r| r.seq).collect()
}

mod checks;

#[test]
fn settings_counters_and_nonces() {
    on_both(checks::settings);
}

#[test]
fn notes_revisions_and_attachments_read_back_as_written() {
    on_both(checks::records);
}

#[test]
fn a_large_batch_is_recorded_a_part_at_a_time_in_one_transaction() {
    on_both(checks::parts);
}

#[test]
fn receipts_replace_intents_and_replay() {
    on_both(checks::idempotency);
}

#[test]
fn a_write_keeps_its_receipt_count_and_audit_with_its_revision() {
    on_both(checks::settled);
}

#[test]
fn op_log_pages_live_set_checkpoints_compaction_and_keys() {
    on_both(checks::oplog);
}

#[test]
fn the_review_queue_orders_and_decides_once() {
    on_both(checks::review);
}

#[test]
fn tokens_are_made_listed_found_and_revoked() {
    on_both(checks::tokens);
}

#[test]
fn sign_in_codes_sessions_and_provider_sign_ins_expire() {
    on_both(checks::sessions);
}

#[test]
fn the_audit_log_pages_newest_first() {
    on_both(checks::audit);
}

/// Every row a vault's metadata answers, to compare before and after.
fn snapshot(
    m: &PgMeta,
) -> (
    i64,
    Vec<NoteRow>,
    Vec<RevisionRow>,
    Vec<OpRow>,
    Vec<AttachmentRow>,
) {
    (
        m.committed_seq().unwrap(),
        m.all_notes().unwrap(),
        m.revisions_after(0).unwrap(),
        m.ops_page(0, i64::MAX, usize::MAX).unwrap(),
        m.all_attachments().unwrap(),
    )
}

#[test]
fn two_vaults_of_one_database_never_see_each_others_rows() {
    let Some(db) = postgres::database() else {
        return;
    };
    let (a, b) = (pg_vault(&db.url, "a"), pg_vault(&db.url, "b"));
    // The same ids and seqs in both: each vault's own.
    for m in [&a, &b] {
        let r1 = revision(1, "n", "n.md", None, Some("blake3:1"), "create");
        m.record(
            &[r1],
            &[op(1, "upsert", Some("n"), "n.md", T1)],
            &[note("n", "n.md", "v1")],
            &[],
        )
        .unwrap();
    }
    a.set_setting("policy", "review").unwrap();
    a.insert_pending(&checks_pending("p1")).unwrap();
    a.store_receipt("k", "h", "{}", T1).unwrap();
    a.append_audit(&AuditEvent::new(AuditKind::Exported, "cli"), T1)
        .unwrap();
    let (_, pat) = a.create_pat("ci", &[], None, chrono::Utc::now()).unwrap();
    let session = SessionRow {
        digest: unique("session"),
        csrf: "c".into(),
        created_at: T0.into(),
        expires_at: T4.into(),
        last_seen_at: T0.into(),
    };
    a.insert_session(&session).unwrap();
    a.insert_sign_in_code("code", T0, T4).unwrap();
    let more = revision(2, "m", "m.md", None, Some("blake3:2"), "create");
    a.record(
        &[more],
        &[op(2, "upsert", Some("m"), "m.md", T1)],
        &[note("m", "m.md", "v2")],
        &[],
    )
    .unwrap();

    assert_eq!(b.setting("policy").unwrap(), None);
    assert!(b.all_pending().unwrap().is_empty());
    assert_eq!(b.idempotency("k").unwrap(), None);
    assert!(b
        .audit_page(None, None, &|_| true, 10)
        .unwrap()
        .0
        .is_empty());
    assert!(b.pats().unwrap().is_empty());
    assert_eq!(
        b.pat(&pat.prefix).unwrap(),
        None,
        "a token finds its vault only"
    );
    assert_eq!(b.revoke_pat(&pat.prefix).unwrap(), 0);
    assert_eq!(b.session(&session.digest, T1).unwrap(), None);
    assert!(!b.delete_session(&session.digest).unwrap());
    assert!(!b.use_sign_in_code("code", T1).unwrap());
    assert_eq!(b.committed_seq().unwrap(), 1);
    assert_eq!(b.all_notes().unwrap(), [note("n", "n.md", "v1")]);
    assert_eq!(seqs(&b.revisions_after(0).unwrap()), [1]);
    assert_eq!(a.committed_seq().unwrap(), 2);
    assert_eq!(a.pat(&pat.prefix).unwrap(), Some(pat));

    // Deleting a vault takes its rows and leaves the other's.
    let before = snapshot(&b);
    hosted::block_on(registry::delete(
        &Database::open(&db.url, Options::default()).unwrap(),
        "a",
    ))
    .unwrap();
    assert_eq!(a.all_notes().unwrap(), []);
    assert_eq!(snapshot(&b), before);
    let late = revision(3, "l", "l.md", None, Some("blake3:3"), "create");
    let err = a
        .record(&[late], &[op(3, "upsert", Some("l"), "l.md", T1)], &[], &[])
        .unwrap_err();
    assert_eq!(err.reason, Reason::VAULT_FORBIDDEN, "{}", err.message);
    assert_eq!(snapshot(&b), before);
}

fn checks_pending(id: &str) -> PendingRow {
    PendingRow {
        id: id.into(),
        kind: "write".into(),
        status: "pending".into(),
        agent_id: "agent".into(),
        created_at: T1.into(),
        decided_at: None,
        decided_by: None,
        error: None,
        payload: "{}".into(),
        result: None,
        preview: String::new(),
        slug: "x.md".into(),
        domain: true,
    }
}

#[test]
fn a_record_from_a_stale_seq_is_refused_and_writes_nothing() {
    let Some(db) = postgres::database() else {
        return;
    };
    // Two instances serving one vault.
    let one = pg_vault(&db.url, "shared");
    let other = PgMeta::new(
        Database::open(&db.url, Options::default()).unwrap(),
        one.vault_id(),
    );
    let r1 = revision(1, "a", "a.md", None, Some("blake3:1"), "create");
    one.record(
        &[r1],
        &[op(1, "upsert", Some("a"), "a.md", T1)],
        &[note("a", "a.md", "v1")],
        &[],
    )
    .unwrap();
    let before = snapshot(&other);

    // The other instance read seq 0 before that change, and records its own at seq 1.
    let stale = RevisionRow {
        version_id: "v1-other".into(),
        ..revision(1, "b", "b.md", None, Some("blake3:9"), "create")
    };
    let refused = |err: notevault::error::Error| {
        assert_eq!(err.reason, Reason::SERVER_BUSY, "{}", err.message);
        assert_eq!(err.retry_after, Some(1));
    };
    refused(
        other
            .record(
                &[stale.clone()],
                &[op(1, "upsert", Some("b"), "b.md", T1)],
                &[note("b", "b.md", "v1-other")],
                &[],
            )
            .unwrap_err(),
    );
    // A batch that would leave a gap is refused too.
    let gap = RevisionRow {
        seq: 3,
        version_id: "v3-other".into(),
        ..stale.clone()
    };
    refused(other.record(&[gap], &[], &[], &[]).unwrap_err());
    let pic = AttachmentChangeRow {
        seq: 1,
        path: "p.png".into(),
        sha256: Some("ab".into()),
        kind: "create".into(),
        actor: "agent".into(),
        created_at: T1.into(),
        commit_id: None,
    };
    refused(
        other
            .record_attachments(
                &[pic],
                &[op(1, "attachment_upsert", None, "p.png", T1)],
                &[],
                &[],
            )
            .unwrap_err(),
    );
    refused(
        other
            .record_key(&op(1, "e2ee_key", None, "", T1), "{}", T1)
            .unwrap_err(),
    );
    assert_eq!(snapshot(&other), before, "nothing was written");
    assert_eq!(other.e2ee_hierarchy().unwrap(), None);

    // From the seq it reads now, it records.
    let next = other.committed_seq().unwrap() + 1;
    let fresh = RevisionRow { seq: next, ..stale };
    other
        .record(
            &[fresh],
            &[op(next, "upsert", Some("b"), "b.md", T1)],
            &[note("b", "b.md", "v1-other")],
            &[],
        )
        .unwrap();
    assert_eq!(one.committed_seq().unwrap(), 2);
    assert_eq!(seqs(&one.revisions_after(0).unwrap()), [1, 2]);
}

#[test]
fn a_stopped_database_answers_storage_unavailable_at_once() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let m = pg_vault(&cluster.admin_url(), "v");
    m.set_setting("k", "v").unwrap();
    cluster.stop_immediate();
    // The pooled connection is dead, then a new one is refused: each answers quickly.
    for _ in 0..3 {
        let begin = Instant::now();
        let err = m.setting("k").unwrap_err();
        assert!(
            begin.elapsed() < Duration::from_millis(2500),
            "{:?}",
            begin.elapsed()
        );
        assert_eq!(err.reason, Reason::STORAGE_UNAVAILABLE, "{}", err.message);
        assert!(err.retry_after.is_some(), "{}", err.message);
    }
    let begin = Instant::now();
    let err = m
        .record(&[], &[op(1, "upsert", Some("a"), "a.md", T1)], &[], &[])
        .unwrap_err();
    assert!(begin.elapsed() < Duration::from_millis(2500));
    assert_eq!(err.reason, Reason::STORAGE_UNAVAILABLE, "{}", err.message);
}

#[test]
fn instances_racing_on_one_vault_leave_a_gapless_log() {
    let Some(db) = postgres::database() else {
        return;
    };
    let first = pg_vault(&db.url, "busy");
    let vault = first.vault_id();
    let (threads, each) = (4, 10);
    std::thread::scope(|s| {
        for t in 0..threads {
            // Each thread an instance of its own: its own pool.
            let m = PgMeta::new(Database::open(&db.url, Options::default()).unwrap(), vault);
            s.spawn(move || {
                let mut done = 0;
                let mut refused = 0;
                while done < each {
                    let seq = m.committed_seq().unwrap() + 1;
                    let id = format!("t{t}-{done}");
                    let rev = RevisionRow {
                        version_id: id.clone(),
                        ..revision(
                            seq,
                            &id,
                            &format!("{id}.md"),
                            None,
                            Some("blake3:x"),
                            "create",
                        )
                    };
                    let op = op(seq, "upsert", Some(&id), &format!("{id}.md"), T1);
                    match m.record(&[rev], &[op], &[], &[]) {
                        Ok(()) => done += 1,
                        Err(e) => {
                            assert_eq!(e.reason, Reason::SERVER_BUSY, "{}", e.message);
                            refused += 1;
                            assert!(refused < 10_000, "never got through");
                        }
                    }
                }
            });
        }
    });
    let total = threads * each;
    assert_eq!(first.committed_seq().unwrap(), total);
    assert_eq!(
        seqs(&first.revisions_after(0).unwrap()),
        (1..=total).collect::<Vec<_>>()
    );
    assert_eq!(
        first
            .ops_page(0, total, usize::MAX)
            .unwrap()
            .iter()
            .map(|o| o.seq)
            .collect::<Vec<_>>(),
        (1..=total).collect::<Vec<_>>()
    );
}

#[test]
fn a_page_of_revisions_reads_back_in_the_order_asked() {
    let Some(db) = postgres::database() else {
        return;
    };
    let m = pg_vault(&db.url, "page");
    let vault = m.vault_id();
    let pool = Database::open(&db.url, Options::default()).unwrap();
    let staged = std::sync::Arc::new(Staged::default());
    let meta = PgMeta::sharing(pool.clone(), vault, staged.clone());
    let revisions = PgRevisions::new(pool, vault, staged);
    let (a, b) = (b"# a\n".as_slice(), b"# b\n".as_slice());
    let change = |path: &str, bytes: &[u8]| Change {
        path: path.into(),
        content: Some(Content::Bytes(Packed::plain(bytes.into()))),
    };
    revisions.commit(CommitRequest {
        subject: "two notes".into(),
        actor: "agent".into(),
        changes: vec![change("a.md", a), change("b.md", b)],
        trailers: Vec::new(),
        allow_empty: true,
        replace: false,
        at: None,
    });
    let (ha, hb) = (content_hash(a), content_hash(b));
    let revs = [
        revision(1, "a", "a.md", None, Some(&ha), "create"),
        revision(2, "b", "b.md", None, Some(&hb), "create"),
        revision(3, "a", "a.md", Some("v1"), None, "delete"),
    ];
    let ops = [
        op(1, "upsert", Some("a"), "a.md", T1),
        op(2, "upsert", Some("b"), "b.md", T1),
        op(3, "delete", Some("a"), "a.md", T1),
    ];
    meta.record(&revs, &ops, &[], &[]).unwrap();
    let asked = [(2, "b.md"), (9, "gone.md"), (1, "a.md"), (3, "a.md")];
    assert_eq!(
        revisions.contents_at_seqs(&asked).unwrap(),
        [
            Stored::Bytes(b.to_vec()),
            Stored::NotRecorded,
            Stored::Bytes(a.to_vec()),
            Stored::Absent,
        ]
    );
    // A seq asked twice is answered twice, as the trait's one-at-a-time default does.
    assert_eq!(
        revisions
            .contents_at_seqs(&[(1, "a.md"), (1, "a.md")])
            .unwrap(),
        [Stored::Bytes(a.to_vec()), Stored::Bytes(a.to_vec())]
    );
    assert!(revisions.contents_at_seqs(&[]).unwrap().is_empty());
}

#[test]
fn a_record_stuck_behind_a_lock_is_cancelled_not_left_waiting() {
    let Some(db) = postgres::database() else {
        return;
    };
    let holder = pg_vault(&db.url, "locked");
    let options = Options {
        statement_timeout: Duration::from_millis(300),
        ..Options::default()
    };
    let waiter = PgMeta::new(Database::open(&db.url, options).unwrap(), holder.vault_id());
    // Another instance froze inside its transaction, holding the vault's seq row.
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let url = db.url.clone();
    let vault = holder.vault_id();
    let frozen = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (mut client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            let tx = client.transaction().await.unwrap();
            tx.execute(
                "UPDATE vault_counters SET committed_seq = committed_seq WHERE vault_id = $1",
                &[&vault],
            )
            .await
            .unwrap();
            locked_tx.send(()).unwrap();
            let _ = release_rx.await;
            drop(tx);
        });
    });
    locked_rx.recv().unwrap();
    let begin = Instant::now();
    let err = waiter
        .record(&[], &[op(1, "upsert", Some("a"), "a.md", T1)], &[], &[])
        .unwrap_err();
    let took = begin.elapsed();
    release_tx.send(()).unwrap();
    frozen.join().unwrap();
    assert_eq!(err.reason, Reason::STORAGE_UNAVAILABLE, "{}", err.message);
    assert!(err.retry_after.is_some());
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(
        waiter.ops_page(0, 10, 10).unwrap().is_empty(),
        "nothing written"
    );
    // Free again, the same store records.
    waiter
        .record(&[], &[op(1, "upsert", Some("a"), "a.md", T1)], &[], &[])
        .unwrap();
    assert_eq!(holder.committed_seq().unwrap(), 1);
}

/// A TCP proxy to the test server, stopped (every connection cut, the port closed) and
/// started again on the same port: the database going away and coming back, as an
/// instance sees it, without restarting the shared server.
struct Proxy {
    port: u16,
    upstream: u16,
    rt: Option<tokio::runtime::Runtime>,
}

impl Proxy {
    fn start(port: u16, upstream: u16) -> Proxy {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        rt.spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let upstream = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await;
                    if let Ok(mut outbound) = upstream {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Proxy {
            port,
            upstream,
            rt: Some(rt),
        }
    }

    fn stop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }

    fn restart(&mut self) {
        self.stop();
        *self = Proxy::start(self.port, self.upstream);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

#[test]
fn a_database_gone_and_back_is_unavailable_then_served_again() {
    let Some(db) = postgres::database() else {
        return;
    };
    let config: tokio_postgres::Config = db.url.parse().unwrap();
    let (Some(tokio_postgres::config::Host::Tcp(_)), Some(&upstream)) =
        (config.get_hosts().first(), config.get_ports().first())
    else {
        eprintln!("skipped: the test server is not reached over TCP");
        return;
    };
    pg_vault(&db.url, "v");
    let mut proxy = Proxy::start(0, upstream);
    let mut url = format!(
        "host=127.0.0.1 port={} dbname={} user={}",
        proxy.port,
        config.get_dbname().unwrap(),
        config.get_user().unwrap()
    );
    if let Some(password) = config.get_password() {
        url.push_str(&format!(" password={}", String::from_utf8_lossy(password)));
    }
    let vault = hosted::block_on(registry::find(
        &Database::open(&db.url, Options::default()).unwrap(),
        "v",
    ))
    .unwrap();
    let m = PgMeta::new(Database::open(&url, Options::default()).unwrap(), vault.id);
    m.set_setting("k", "v").unwrap();

    proxy.stop();
    for _ in 0..2 {
        let begin = Instant::now();
        let err = m.setting("k").unwrap_err();
        assert!(
            begin.elapsed() < Duration::from_millis(2500),
            "{:?}",
            begin.elapsed()
        );
        assert_eq!(err.reason, Reason::STORAGE_UNAVAILABLE, "{}", err.message);
        assert!(err.retry_after.is_some());
    }

    // Back: the next call is served, on a new connection, with nothing restarted here.
    proxy.restart();
    assert_eq!(m.setting("k").unwrap().as_deref(), Some("v"));
    let r1 = revision(1, "a", "a.md", None, Some("blake3:1"), "create");
    m.record(&[r1], &[op(1, "upsert", Some("a"), "a.md", T1)], &[], &[])
        .unwrap();
    assert_eq!(m.committed_seq().unwrap(), 1);
}
