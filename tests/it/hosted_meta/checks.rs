//! The contract checks of the metadata traits, each over `&dyn Metadata` and a fresh
//! store (see `hosted_meta`).

#![allow(
    clippy::cloned_ref_to_slice_refs,
    reason = "the rows a check expects are written out as arrays of clones"
)]

use std::time::Duration;

use notevault::error::Reason;
use notevault::storage::metadata::Metadata;
use notevault::storage::rows::*;

use super::*;

/// A batch recorded a part at a time (a first start's whole vault): every range asked
/// for once, in order, all rows written; a part that fails leaves nothing written.
pub fn parts(m: &dyn Metadata) {
    let rows = |from: i64, n: i64| -> Vec<RevisionRow> {
        (from..from + n)
            .map(|seq| {
                let id = format!("n{seq}");
                revision(
                    seq,
                    &id,
                    &format!("{id}.md"),
                    None,
                    Some("blake3:x"),
                    "create",
                )
            })
            .collect()
    };
    let part_of = |revisions: &[RevisionRow], range: std::ops::Range<usize>| {
        let ops = revisions[range.clone()]
            .iter()
            .map(|r| op(r.seq, "upsert", Some(&r.note_id), &r.path, T1))
            .collect::<Vec<_>>();
        let notes = revisions[range]
            .iter()
            .map(|r| note(&r.note_id, &r.path, &r.version_id))
            .collect::<Vec<_>>();
        (ops, notes)
    };
    let n = 9_000;
    let revisions = rows(1, n);
    let mut asked = Vec::new();
    m.record_parts(&revisions, &[], &mut |range| {
        asked.push(range.clone());
        part_of(&revisions, range)
    })
    .unwrap();
    // Contiguous ranges that cover the batch once.
    assert_eq!(asked.first().map(|r| r.start), Some(0));
    assert!(
        asked.windows(2).all(|w| w[0].end == w[1].start),
        "{asked:?}"
    );
    assert_eq!(asked.last().map(|r| r.end), Some(n as usize));
    assert_eq!(m.committed_seq().unwrap(), n);
    assert_eq!(m.all_notes().unwrap().len(), n as usize);
    assert_eq!(m.ops_page(0, n, usize::MAX).unwrap().len(), n as usize);
    assert_eq!(m.revision("v9000").unwrap(), Some(revisions[8_999].clone()));

    // The next batch's last part repeats an op's seq: nothing of the batch is written.
    let next = rows(n + 1, n);
    let failed = m.record_parts(&next, &["n1".into()], &mut |range| {
        let last = range.end == next.len();
        let (mut ops, notes) = part_of(&next, range);
        if last {
            ops.push(op(n + 1, "upsert", Some("n1"), "n1.md", T1));
        }
        (ops, notes)
    });
    assert!(failed.is_err());
    assert_eq!(m.committed_seq().unwrap(), n);
    assert_eq!(
        m.all_notes().unwrap().len(),
        n as usize,
        "n1 not removed either"
    );
    assert_eq!(m.revision(&format!("v{}", n + 1)).unwrap(), None);
}

pub fn settings(m: &dyn Metadata) {
    assert_eq!(m.setting("policy").unwrap(), None);
    m.set_setting("policy", "review").unwrap();
    m.set_setting("policy", "auto").unwrap();
    assert_eq!(m.setting("policy").unwrap().as_deref(), Some("auto"));
    assert_eq!(m.applied_writes_since(T0).unwrap(), (0, None));
    for at in [T2, T1, T0] {
        m.record_applied_write(at).unwrap();
    }
    assert_eq!(
        m.applied_writes_since(T0).unwrap(),
        (2, Some(T1.to_string()))
    );
    assert_eq!(m.applied_writes_since(T2).unwrap(), (0, None));
    assert!(m.use_nonce("n1", 100, 50).unwrap());
    assert!(!m.use_nonce("n1", 100, 60).unwrap(), "used once");
    // Past its expiry the nonce is forgotten (its link is refused as expired).
    assert!(m.use_nonce("n1", 300, 200).unwrap());
}

pub fn records(m: &dyn Metadata) {
    assert_eq!(m.committed_seq().unwrap(), 0);
    assert!(m.all_notes().unwrap().is_empty());
    let r1 = revision(1, "a", "a.md", None, Some("blake3:1"), "create");
    let r2 = revision(2, "b", "b.md", None, Some("blake3:2"), "create");
    let ops = [
        op(1, "upsert", Some("a"), "a.md", T1),
        op(2, "upsert", Some("b"), "b.md", T1),
    ];
    let (a, b) = (note("a", "a.md", "v1"), note("b", "b.md", "v2"));
    m.record(
        &[r1.clone(), r2.clone()],
        &ops,
        &[a.clone(), b.clone()],
        &[],
    )
    .unwrap();
    assert_eq!(m.committed_seq().unwrap(), 2);
    assert_eq!(sorted(m.all_notes().unwrap()), [a.clone(), b.clone()]);
    assert_eq!(m.revision("v1").unwrap(), Some(r1.clone()));
    assert_eq!(m.revision("v9").unwrap(), None);

    // A move of a, a delete of b.
    let r3 = revision(3, "a", "moved/a.md", Some("v1"), Some("blake3:3"), "move");
    let r4 = revision(4, "b", "b.md", Some("v2"), None, "delete");
    let ops = [
        op(3, "move", Some("a"), "moved/a.md", T2),
        op(4, "delete", Some("b"), "b.md", T2),
    ];
    let a2 = NoteRow {
        observed_at: T2.into(),
        ..note("a", "moved/a.md", "v3")
    };
    m.record(
        &[r3.clone(), r4.clone()],
        &ops,
        &[a2.clone()],
        &["b".into()],
    )
    .unwrap();
    assert_eq!(m.committed_seq().unwrap(), 4);
    assert_eq!(m.all_notes().unwrap(), [a2]);
    assert_eq!(m.latest_revision_at("b.md").unwrap(), Some(r4.clone()));
    assert_eq!(m.latest_revision_at("c.md").unwrap(), None);

    assert_eq!(m.revisions_page("a", None, false, 1).unwrap(), [r1.clone()]);
    assert_eq!(
        m.revisions_page("a", Some(1), false, 10).unwrap(),
        [r3.clone()]
    );
    assert_eq!(m.revisions_page("a", None, true, 1).unwrap(), [r3.clone()]);
    assert_eq!(
        m.revisions_page("a", Some(3), true, 10).unwrap(),
        [r1.clone()]
    );
    assert_eq!(
        seqs(&m.revisions_page("a", None, true, usize::MAX).unwrap()),
        [3, 1]
    );
    assert!(m.revisions_page("zz", None, false, 10).unwrap().is_empty());
    assert_eq!(m.revisions_of("a").unwrap(), [r1.clone(), r3.clone()]);
    assert_eq!(seqs(&m.revisions_after(1).unwrap()), [2, 3, 4]);
    assert!(m.revisions_after(4).unwrap().is_empty());

    m.set_commit_ids(&[1, 3], "c0ffee").unwrap();
    assert_eq!(
        m.revision("v3").unwrap().unwrap().commit_id.as_deref(),
        Some("c0ffee")
    );
    assert_eq!(m.revision("v2").unwrap().unwrap().commit_id, None);

    // Attachments take the seqs after the notes'.
    assert!(m.all_attachments().unwrap().is_empty());
    let pic = AttachmentRow {
        path: "img/p.png".into(),
        size: 1234,
        mtime_ns: 1_700_000_000_123_456_789,
        inode: u64::MAX - 5,
        sha256: "ab".repeat(32),
        content_type: "image/png".into(),
        modified_at: T2.into(),
    };
    let change = |seq: i64, sha: Option<&str>, kind: &str| AttachmentChangeRow {
        seq,
        path: pic.path.clone(),
        sha256: sha.map(Into::into),
        kind: kind.into(),
        actor: "agent".into(),
        created_at: T2.into(),
        commit_id: Some("c1".into()),
    };
    m.record_attachments(
        &[change(5, Some(&pic.sha256), "create")],
        &[op(5, "attachment_upsert", None, &pic.path, T2)],
        &[pic.clone()],
        &[],
    )
    .unwrap();
    assert_eq!(m.all_attachments().unwrap(), [pic.clone()]);
    assert_eq!(m.committed_seq().unwrap(), 5);
    m.record_attachments(
        &[change(6, None, "delete")],
        &[op(6, "attachment_delete", None, &pic.path, T2)],
        &[],
        &[pic.path.clone()],
    )
    .unwrap();
    assert!(m.all_attachments().unwrap().is_empty());
    assert_eq!(m.committed_seq().unwrap(), 6);
    assert_eq!(m.ops_page(4, 6, 10).unwrap().len(), 2);
}

pub fn idempotency(m: &dyn Metadata) {
    let pause = || std::thread::sleep(Duration::from_millis(5));
    assert_eq!(m.idempotency("k1").unwrap(), None);
    assert!(m.intents().unwrap().is_empty());
    m.store_intent("k2", "h2", r#"{"i":2}"#).unwrap();
    pause();
    m.store_intent("k1", "h1", r#"{"i":1}"#).unwrap();
    let keys = |m: &dyn Metadata| -> Vec<String> {
        m.intents().unwrap().into_iter().map(|i| i.key).collect()
    };
    assert_eq!(keys(m), ["k2", "k1"], "oldest first");
    pause();
    // Stored again: replaced, and the newest now.
    m.store_intent("k2", "h2b", r#"{"i":3}"#).unwrap();
    assert_eq!(
        m.intents().unwrap(),
        [
            IntentRow {
                key: "k1".into(),
                op_hash: "h1".into(),
                intent: r#"{"i":1}"#.into()
            },
            IntentRow {
                key: "k2".into(),
                op_hash: "h2b".into(),
                intent: r#"{"i":3}"#.into()
            }
        ]
    );
    m.forget_intent("k2").unwrap();
    assert_eq!(keys(m), ["k1"]);
    assert_eq!(m.held("k2").unwrap(), KeyHeld::Nothing);
    let intent = KeyHeld::Intent(IntentRow {
        key: "k1".into(),
        op_hash: "h1".into(),
        intent: r#"{"i":1}"#.into(),
    });
    assert_eq!(m.held("k1").unwrap(), intent);
    assert_eq!(
        m.held_and_settings("k1", &["write_policy"]).unwrap(),
        (intent, vec![None])
    );
    // A receipt replaces its key's intent, in one transaction.
    let receipt = r#"{"status":"applied","z":1,"a":2}"#;
    m.store_receipt("k1", "h1", receipt, T1).unwrap();
    assert!(m.intents().unwrap().is_empty());
    let kept = IdempotencyRow {
        key: "k1".into(),
        op_hash: "h1".into(),
        receipt: Some(receipt.into()),
        status: 0,
        body: String::new(),
    };
    assert_eq!(m.idempotency("k1").unwrap(), Some(kept.clone()));
    assert_eq!(m.held("k1").unwrap(), KeyHeld::Receipt(kept.clone()));
    // With the settings a write reads, in their order, unset ones `None`.
    m.set_setting("write_budget", "7").unwrap();
    assert_eq!(
        m.held_and_settings("k1", &["write_policy", "write_budget"])
            .unwrap(),
        (KeyHeld::Receipt(kept.clone()), vec![None, Some("7".into())])
    );
    assert_eq!(
        m.held_and_settings("k9", &["write_budget"]).unwrap(),
        (KeyHeld::Nothing, vec![Some("7".into())])
    );
    // A receipt is what a key holds, whatever intent is stored beside it.
    m.store_intent("k1", "h1", r#"{"i":4}"#).unwrap();
    assert_eq!(m.held("k1").unwrap(), KeyHeld::Receipt(kept));
    m.forget_intent("k1").unwrap();
    // One receipt a key: a second is refused (retry, and the first replays).
    let again = m.store_receipt("k1", "h1", "{}", T2).unwrap_err();
    assert_eq!(
        again.reason,
        Reason::STORAGE_UNAVAILABLE,
        "{}",
        again.message
    );
    assert_eq!(
        m.idempotency("k1").unwrap().unwrap().receipt.as_deref(),
        Some(receipt)
    );
}

pub fn oplog(m: &dyn Metadata) {
    let mut moved = op(3, "move", Some("a"), "c.md", T1);
    moved.from_path = Some("a.md".into());
    let ops = [
        op(1, "upsert", Some("a"), "a.md", T1),
        op(2, "upsert", Some("b"), "b.md", T1),
        moved.clone(),
        op(4, "delete", Some("b"), "b.md", T2),
        op(5, "attachment_upsert", None, "x.png", T2),
        op(6, "upsert", Some("a"), "c.md", T2),
    ];
    m.record(&[], &ops, &[], &[]).unwrap();
    let page = |after, through, limit| -> Vec<i64> {
        m.ops_page(after, through, limit)
            .unwrap()
            .iter()
            .map(|o| o.seq)
            .collect()
    };
    assert_eq!(page(0, 6, 2), [1, 2]);
    assert_eq!(page(2, 5, 10), [3, 4, 5]);
    assert_eq!(m.ops_page(2, 3, 10).unwrap(), [moved.clone()]);
    let live = |at, after: &str, limit| -> Vec<(i64, String)> {
        m.live_at(at, after, limit)
            .unwrap()
            .into_iter()
            .map(|o| (o.seq, o.path))
            .collect()
    };
    assert_eq!(live(6, "", 10), [(6, "c.md".into()), (5, "x.png".into())]);
    assert_eq!(live(3, "", 10), [(2, "b.md".into()), (3, "c.md".into())]);
    assert_eq!(live(6, "c.md", 10), [(5, "x.png".into())]);
    assert_eq!(live(6, "", 1), [(6, "c.md".into())]);
    assert_eq!(m.last_op_seq_before(T1).unwrap(), 3);
    assert_eq!(m.last_op_seq_before(T0).unwrap(), 0);

    assert!(m.checkpoints().unwrap().is_empty());
    m.set_checkpoint("d2", 5, T1).unwrap();
    m.set_checkpoint("d1", 3, T1).unwrap();
    m.set_checkpoint("d2", 4, T2).unwrap();
    let cp = |d: &str, seq, at: &str| CheckpointRow {
        device_id: d.into(),
        seq,
        updated_at: at.into(),
    };
    assert_eq!(m.checkpoints().unwrap(), [cp("d1", 3, T1), cp("d2", 5, T2)]);

    // Kept: each key's latest op (a: 6, x.png: 5) and the delete tombstone (b: 4).
    assert_eq!(m.compacted_through().unwrap(), 0);
    assert_eq!(m.compact_ops(6).unwrap(), 3);
    assert_eq!(m.compacted_through().unwrap(), 6);
    assert_eq!(page(0, 6, 10), [4, 5, 6]);
    assert_eq!(m.compact_ops(2).unwrap(), 0);
    assert_eq!(
        m.compacted_through().unwrap(),
        6,
        "the horizon never goes back"
    );

    assert_eq!(m.e2ee_hierarchy().unwrap(), None);
    let key_op = |seq| OpRow {
        note_id: None,
        version_id: None,
        content_hash: None,
        ..op(seq, "e2ee_key", None, "", T3)
    };
    m.record_key(&key_op(7), r#"{"v":1,"b":"x"}"#, T3).unwrap();
    assert_eq!(
        m.e2ee_hierarchy().unwrap().as_deref(),
        Some(r#"{"v":1,"b":"x"}"#)
    );
    assert_eq!(m.committed_seq().unwrap(), 7);
    m.record_key(&key_op(8), r#"{"v":2}"#, T4).unwrap();
    assert_eq!(m.e2ee_hierarchy().unwrap().as_deref(), Some(r#"{"v":2}"#));
    assert_eq!(m.ops_page(6, 8, 10).unwrap(), [key_op(7), key_op(8)]);
}

fn pending_row(id: &str, at: &str, domain: bool) -> PendingRow {
    PendingRow {
        id: id.into(),
        kind: "write".into(),
        status: "pending".into(),
        agent_id: "agent".into(),
        created_at: at.into(),
        decided_at: None,
        decided_by: None,
        error: None,
        payload: format!(r#"{{"slug":"{id}","b":1,"a":2}}"#),
        result: None,
        preview: "--- a\n+++ b\n".into(),
        slug: format!("{id}.md"),
        domain,
    }
}

pub fn review(m: &dyn Metadata) {
    let (p1, p2, p3) = (
        pending_row("p1", T1, true),
        pending_row("p2", T2, true),
        pending_row("p0", T0, false),
    );
    for p in [&p1, &p2, &p3] {
        m.insert_pending(p).unwrap();
    }
    assert_eq!(m.pending("p1").unwrap(), Some(p1.clone()));
    assert_eq!(m.pending("zz").unwrap(), None);
    assert_eq!(
        m.all_pending().unwrap(),
        [p3.clone(), p1.clone(), p2.clone()]
    );
    assert_eq!(m.count_pending().unwrap(), 3);
    assert_eq!(m.pending_ids(2).unwrap(), ["p0", "p1"]);
    assert_eq!(
        m.pending_rows(false, 10).unwrap(),
        [p3.clone(), p1.clone(), p2.clone()]
    );
    assert!(m.pending_rows(true, 10).unwrap().is_empty());

    assert!(m
        .decide_pending("p1", "applied", T3, "console", None, Some(r#"{"r":1}"#))
        .unwrap());
    assert!(
        !m.decide_pending("p1", "rejected", T4, "other", Some("no"), None)
            .unwrap(),
        "exactly one decider wins"
    );
    assert!(m
        .decide_pending("p2", "rejected", T4, "cli", Some("not this"), None)
        .unwrap());
    let p1d = PendingRow {
        status: "applied".into(),
        decided_at: Some(T3.into()),
        decided_by: Some("console".into()),
        result: Some(r#"{"r":1}"#.into()),
        ..p1
    };
    let p2d = PendingRow {
        status: "rejected".into(),
        decided_at: Some(T4.into()),
        decided_by: Some("cli".into()),
        error: Some("not this".into()),
        ..p2
    };
    assert_eq!(m.pending_rows(true, 10).unwrap(), [p2d, p1d.clone()]);
    assert_eq!(m.pending_rows(true, 1).unwrap().len(), 1);
    assert_eq!(m.count_pending().unwrap(), 1);
    assert_eq!(m.pending("p1").unwrap(), Some(p1d));

    assert_eq!(m.legacy_pending().unwrap(), [p3.clone()]);
    m.upgrade_pending("p0", r#"{"request":1}"#).unwrap();
    assert!(m.legacy_pending().unwrap().is_empty());
    let upgraded = m.pending("p0").unwrap().unwrap();
    assert_eq!(
        (upgraded.payload.as_str(), upgraded.domain),
        (r#"{"request":1}"#, true)
    );
}

pub fn tokens(m: &dyn Metadata) {
    let key = m.pat_key().unwrap();
    assert_eq!(m.pat_key().unwrap(), key, "the key is made once");
    assert!(m.pats().unwrap().is_empty());
    let now = chrono::DateTime::parse_from_rfc3339(T0).unwrap().to_utc();
    let (token, ci) = m
        .create_pat("ci", &[], Some(Duration::from_secs(3600)), now)
        .unwrap();
    assert!(token.starts_with(&ci.prefix));
    assert_eq!(ci.created_at, T0);
    assert_eq!(ci.expires_at.as_deref(), Some("2026-01-01T01:00:00.000Z"));
    assert_eq!(m.pat(&ci.prefix).unwrap(), Some(ci.clone()));
    let taken = m.create_pat("ci", &[], None, now).unwrap_err();
    assert_eq!(taken.reason, Reason::VALIDATION_FAILED);
    // Upper case sorts before lower case, in byte order.
    let zed = PatRow {
        prefix: unique("nvp_z")[..12].to_string(),
        name: "Zed".into(),
        hash: "00".repeat(32),
        scopes: "notes.write".into(),
        created_at: T1.into(),
        expires_at: None,
        last_used_at: None,
    };
    assert!(m.insert_pat(&zed).unwrap());
    assert!(!m.insert_pat(&zed).unwrap(), "a prefix is taken once");
    let same_name = PatRow {
        prefix: unique("nvp_y")[..12].to_string(),
        ..zed.clone()
    };
    assert!(!m.insert_pat(&same_name).unwrap(), "a name is taken once");
    assert_eq!(m.pats().unwrap(), [zed.clone(), ci.clone()]);
    m.touch_pat(&zed.prefix, T2).unwrap();
    assert_eq!(
        m.pat(&zed.prefix).unwrap().unwrap().last_used_at.as_deref(),
        Some(T2)
    );
    assert_eq!(m.revoke_pat("ci").unwrap(), 1);
    assert_eq!(m.revoke_pat(&zed.prefix).unwrap(), 1);
    assert_eq!(m.revoke_pat("ci").unwrap(), 0);
    assert!(m.pats().unwrap().is_empty());
    assert_eq!(m.pat(&zed.prefix).unwrap(), None);
}

pub fn sessions(m: &dyn Metadata) {
    let (a, b) = (unique("code-a"), unique("code-b"));
    m.insert_sign_in_code(&a, T0, T3).unwrap();
    m.insert_sign_in_code(&b, T0, T3).unwrap();
    assert!(m.sign_in_code_open(&a, T1).unwrap());
    assert!(m.use_sign_in_code(&a, T1).unwrap());
    assert!(!m.use_sign_in_code(&a, T1).unwrap(), "used twice");
    assert!(!m.sign_in_code_open(&a, T1).unwrap());
    assert!(!m.sign_in_code_open(&b, T4).unwrap(), "expired");
    assert!(!m.use_sign_in_code(&b, T4).unwrap(), "expired");
    assert!(!m.use_sign_in_code("zzz", T1).unwrap(), "unknown");

    let row = SessionRow {
        digest: unique("session"),
        csrf: "csrf".into(),
        created_at: T0.into(),
        expires_at: T3.into(),
        last_seen_at: T0.into(),
    };
    m.insert_session(&row).unwrap();
    assert_eq!(m.session(&row.digest, T1).unwrap(), Some(row.clone()));
    assert_eq!(m.session(&row.digest, T3).unwrap(), None, "at its expiry");
    m.touch_session(&row.digest, T2).unwrap();
    assert_eq!(
        m.session(&row.digest, T2).unwrap().unwrap().last_seen_at,
        T2
    );
    assert!(m.delete_session(&row.digest).unwrap());
    assert!(!m.delete_session(&row.digest).unwrap());
    assert_eq!(m.session(&row.digest, T1).unwrap(), None);

    let sign_in = IdpSignIn {
        nonce_digest: "nonce".into(),
        verifier: "verifier".into(),
        redirect_uri: "http://127.0.0.1/cb".into(),
    };
    let (s1, s2) = (unique("state-1"), unique("state-2"));
    m.insert_idp_sign_in(&s1, &sign_in, T0, T3).unwrap();
    m.insert_idp_sign_in(&s2, &sign_in, T0, T3).unwrap();
    assert_eq!(m.take_idp_sign_in(&s1, T1).unwrap(), Some(sign_in.clone()));
    assert_eq!(m.take_idp_sign_in(&s1, T1).unwrap(), None, "taken once");
    assert_eq!(m.take_idp_sign_in(&s2, T4).unwrap(), None, "expired");
    assert_eq!(m.take_idp_sign_in(&s2, T1).unwrap(), None, "and gone");
}

pub fn audit(m: &dyn Metadata) {
    let times = [T0, T1, T2, T3, T4];
    for (i, at) in times.iter().enumerate() {
        let kind = if i % 2 == 0 {
            AuditKind::WriteApplied
        } else {
            AuditKind::TokenCreated
        };
        let counts = [("n", i as i64), ("bytes", 7)];
        let event = AuditEvent::new(kind, "agent").counts(&counts);
        let event = if i == 0 {
            event.subject("note-1")
        } else {
            event
        };
        m.append_audit(&event, at).unwrap();
    }
    let all = |_: &AuditRow| true;
    let writes = |r: &AuditRow| r.kind == "write.applied";
    let (every, more) = m.audit_page(None, None, &all, 10).unwrap();
    assert!(!more);
    assert_eq!(every.len(), 5);
    assert!(every.windows(2).all(|w| w[0].id > w[1].id), "newest first");
    assert_eq!(every[0].counts, r#"{"n":4,"bytes":7}"#);
    assert_eq!(every[4].subject.as_deref(), Some("note-1"));
    assert_eq!(
        (
            every[4].kind.as_str(),
            every[4].actor.as_str(),
            every[4].created_at.as_str()
        ),
        ("write.applied", "agent", T0)
    );
    let (page, more) = m.audit_page(None, None, &writes, 2).unwrap();
    assert_eq!(page, [every[0].clone(), every[2].clone()]);
    assert!(more);
    let (page, more) = m.audit_page(Some(page[1].id), None, &writes, 2).unwrap();
    assert_eq!(page, [every[4].clone()]);
    assert!(!more);
    let (page, more) = m.audit_page(None, Some(T3), &all, 10).unwrap();
    assert_eq!(page, every[..2]);
    assert!(!more);
    // A long run of rows `keep` passes over, between two it keeps.
    for _ in 0..300 {
        m.append_audit(&AuditEvent::new(AuditKind::SignedIn, "console"), T4)
            .unwrap();
    }
    m.append_audit(&AuditEvent::new(AuditKind::WriteApplied, "agent"), T4)
        .unwrap();
    let (page, more) = m.audit_page(None, None, &writes, 1).unwrap();
    assert_eq!(page.len(), 1);
    assert!(more, "every[0] follows, past the 300 passed over");
    let (page, more) = m.audit_page(Some(page[0].id), None, &writes, 3).unwrap();
    assert_eq!(page, [every[0].clone(), every[2].clone(), every[4].clone()]);
    assert!(!more);
}

/// A write's receipt, budget count and audit event are kept in the transaction that
/// records its revision: all of them, or (a receipt the key has already) none, the
/// revision included.
pub fn settled(m: &dyn Metadata) {
    m.store_intent("w1", "h1", r#"{"i":1}"#).unwrap();
    let settlement = |seq: i64| Settlement {
        receipt: Some(KeptReceipt {
            key: "w1".into(),
            op_hash: "h1".into(),
            receipt: format!(r#"{{"committed_seq":{seq}}}"#),
            created_at: T1.into(),
        }),
        applied_at: Some(T1.into()),
        audit: Some(SettledAudit {
            kind: AuditKind::WriteApplied,
            actor: "agent".into(),
            subject: format!("n{seq}"),
            counts: vec![("links_updated", 0)],
            at: T1.into(),
        }),
    };
    let first = revision(1, "n1", "a.md", None, Some("h"), "create");
    m.record_settled(
        &[first.clone()],
        &[op(1, "upsert", Some("n1"), "a.md", T1)],
        &[note("n1", "a.md", "v1")],
        &[],
        &[settlement(1)],
    )
    .unwrap();
    let kept = |m: &dyn Metadata| {
        let (audit, _) = m.audit_page(None, None, &|_| true, 10).unwrap();
        (
            m.idempotency("w1").unwrap().and_then(|r| r.receipt),
            m.intents().unwrap().len(),
            m.applied_writes_since(T0).unwrap(),
            audit
                .iter()
                .map(|r| (r.kind.clone(), r.subject.clone(), r.counts.clone()))
                .collect::<Vec<_>>(),
            m.committed_seq().unwrap(),
            m.revision("v2").unwrap(),
        )
    };
    let after_first = (
        Some(r#"{"committed_seq":1}"#.to_string()),
        0,
        (1, Some(T1.to_string())),
        vec![(
            "write.applied".to_string(),
            Some("n1".to_string()),
            r#"{"links_updated":0}"#.to_string(),
        )],
        1,
        None,
    );
    assert_eq!(kept(m), after_first);
    assert_eq!(m.revision("v1").unwrap(), Some(first));
    // The key has its receipt: the whole batch is refused, its revision too.
    let refused = m
        .record_settled(
            &[revision(2, "n2", "b.md", None, Some("h"), "create")],
            &[op(2, "upsert", Some("n2"), "b.md", T1)],
            &[note("n2", "b.md", "v2")],
            &[],
            &[settlement(2)],
        )
        .unwrap_err();
    assert_eq!(
        refused.reason,
        Reason::STORAGE_UNAVAILABLE,
        "{}",
        refused.message
    );
    assert_eq!(kept(m), after_first);
}
