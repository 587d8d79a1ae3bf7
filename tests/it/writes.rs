//! The write pipeline over HTTP: every route and legacy form, receipts, idempotency,
//! preconditions, surgical frontmatter edits, link rewriting, history and bad input.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::{assert_envelope, assert_envelope_for, git, res_json, Mode, TestServer};
use serde_json::{json, Value};

use reqwest::Method;

/// The note file at `rel`, as the server holds it (the folder's, or hosted the
/// database's).
async fn read(s: &TestServer, rel: &str) -> String {
    s.note_file(rel)
        .await
        .unwrap_or_else(|| panic!("{rel} is absent"))
}

fn assert_receipt(r: &Value) {
    for field in [
        "status",
        "slug",
        "note_id",
        "version_id",
        "content_hash",
        "committed_seq",
        "renamed",
        "unchanged",
        "links_updated",
        "links_failed",
    ] {
        assert!(r.get(field).is_some(), "{field} missing in {r}");
    }
    for field in ["pending_id", "note", "flow_back_error"] {
        assert!(r.get(field).is_some(), "{field} key missing in {r}");
    }
}

async fn create_then_replay_then_reuse(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let body = json!({"slug": "projects/new-idea", "content": "# New idea\n\nBody.\n", "tags": ["idea", "draft"], "agent_id": "claude"});
    let r = s
        .call(
            Method::POST,
            "/v1/notes",
            Some("k-create-1"),
            Some(body.clone()),
            201,
        )
        .await;
    assert_receipt(&r);
    assert_eq!(r["status"], "applied");
    assert_eq!(r["slug"], "projects/new-idea");
    assert_eq!(r["note"]["title"], "New idea");
    assert_eq!(r["note"]["tags"], json!(["idea", "draft"]));
    assert_eq!(
        read(&s, "projects/new-idea.md").await,
        "---\ntags: [idea, draft]\n---\n# New idea\n\nBody.\n"
    );
    let seq = r["committed_seq"].as_i64().unwrap();
    assert_eq!(seq, s.svc.committed_seq());

    // The same key and body replays byte for byte, and writes nothing.
    let again = s
        .send(
            Method::POST,
            "/v1/notes",
            Some("k-create-1"),
            Some(body.clone()),
        )
        .await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.json::<Value>().await.unwrap(), r);
    assert_eq!(s.svc.committed_seq(), seq);
    // The same key with another body is refused.
    let other = json!({"slug": "projects/other", "content": "x"});
    s.refused(
        "the key of another request",
        Method::POST,
        "/v1/notes",
        Some("k-create-1"),
        Some(other),
        422,
        "IDEMPOTENCY_KEY_REUSED",
    )
    .await;
    // A second create of the same path collides.
    s.refused(
        "a second create of the path",
        Method::POST,
        "/v1/notes",
        Some("k-create-2"),
        Some(body),
        409,
        "NAME_COLLISION",
    )
    .await;

    // The revision says who wrote it.
    let revisions = s
        .get_json("/v1/notes/projects%2Fnew-idea:listRevisions", 200)
        .await;
    assert_eq!(revisions["versions"][0]["version_id"], r["version_id"]);
    assert_eq!(revisions["versions"][0]["actor"], "agent:claude");
    if s.mode == Mode::Hosted {
        // No history.git: the database holds the revisions.
        return;
    }
    // History has the commit, with the actor and the version in its trailers.
    common::wait_history(&s.svc).await;
    let log = git(&s.state, &["log", "-1", "--format=%B"]);
    assert!(log.contains("Notevault-Actor: agent:claude"), "{log}");
    assert!(log.contains(&format!(
        "Notevault-Version: {}",
        r["version_id"].as_str().unwrap()
    )));
    assert!(log.contains(&format!("Notevault-Seq: {seq}")));
}

async fn create_by_title_and_folder_and_the_folder_depth_rule(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let r = s
        .call(
            Method::POST,
            "/v1/notes",
            Some("t1"),
            Some(json!({"title": "Ideas: big & small", "folder": "inbox", "content": "hi\n"})),
            201,
        )
        .await;
    assert_eq!(r["slug"], "inbox/Ideas- big & small");
    assert_eq!(r["note"]["title"], "Ideas: big & small");
    #[rustfmt::skip]
    let cases = [
        ("a/b/c", 400, "VALIDATION_FAILED"),
        ("../escape", 400, "UNSAFE_PATH"),
        (".git/x", 400, "UNSAFE_PATH"),
    ]
    .map(|(slug, status, reason)| {
        let body = json!({"slug": slug, "content": ""});
        (slug, Method::POST, "/v1/notes", Some(body), status, reason)
    });
    s.refuse_all(cases).await;
    assert!(!s.holds("a").await);
}

async fn edit_exactly_per_the_spec(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let before = read(&s, "Inbox.md").await;
    let note = s.get_json("/v1/notes/Inbox?limit=1", 200).await;
    let v = note["version_id"].as_str().unwrap();
    let first_line = before.lines().find(|l| l.len() > 5).unwrap().to_string();
    let r = s.call(Method::POST, "/v1/notes/Inbox:edit", Some("e1"), Some(json!({"version_id": v, "old_string": first_line, "new_string": "EDITED", "agent_id": "a"})), 200)
        .await;
    assert_receipt(&r);
    assert_eq!(
        r["note"],
        Value::Null,
        "only create and PATCH embed the note"
    );
    assert_ne!(r["version_id"], v);
    assert_eq!(
        read(&s, "Inbox.md").await,
        before.replacen(&first_line, "EDITED", 1)
    );
    // The old version is stale now.
    let v2 = r["version_id"].as_str().unwrap();
    let edit = |v: &str, old: &str| {
        let body = json!({"version_id": v, "old_string": old, "new_string": "x"});
        (Method::POST, "/v1/notes/Inbox:edit", Some(body))
    };
    #[rustfmt::skip]
    let cases = [
        ("the old version", edit(v, "EDITED"), 409, "VERSION_MOVED"),
        ("text not in the note", edit(v2, "not in the note at all"), 422, "EDIT_MATCH_NOT_FOUND"),
        ("text found twice", edit(v2, "\n"), 422, "EDIT_AMBIGUOUS"),
    ]
    .map(|(what, (method, path, body), status, reason)| (what, method, path, body, status, reason));
    let answers = s.refuse_all(cases).await;
    let info = common::detail(&answers[2], "ErrorInfo");
    assert!(info["metadata"]["candidate_lines"]
        .as_str()
        .unwrap()
        .starts_with("1,2"));
    // Identical replacement: unchanged, no new version.
    let same = s
        .call(
            Method::POST,
            "/v1/notes/Inbox:edit",
            Some("e5"),
            Some(json!({"version_id": v2, "old_string": "EDITED", "new_string": "EDITED"})),
            200,
        )
        .await;
    assert_eq!(same["unchanged"], true);
    assert_eq!(same["version_id"], v2);
    // The legacy slash form works the same and says it is deprecated.
    let res = s
        .send(
            Method::POST,
            "/v1/notes/Inbox/edit",
            Some("e6"),
            Some(json!({"version_id": v2, "old_string": "EDITED", "new_string": "EDITED twice"})),
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["deprecation"], "true");
    assert_eq!(
        res.headers()["link"],
        "</v1/notes/Inbox:edit>; rel=\"successor-version\""
    );
}

async fn edit_bad_input_names_the_field(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let v = s.get_json("/v1/notes/Inbox?limit=1", 200).await["version_id"]
        .as_str()
        .unwrap()
        .to_string();
    let long = "x".repeat(100_001);
    // (case, body, the field the violation names)
    #[rustfmt::skip]
    let cases = [
        ("a version not a UUID", json!({"version_id": "not-a-uuid", "old_string": "a", "new_string": "b"}), "version_id"),
        ("a UUID of version 0", json!({"version_id": "01234567-89ab-0def-8123-456789abcdef", "old_string": "a", "new_string": "b"}), "version_id"),
        ("no version", json!({"old_string": "a", "new_string": "b"}), "version_id"),
        ("an empty old_string", json!({"version_id": v, "old_string": "", "new_string": "b"}), "old_string"),
        ("a long old_string", json!({"version_id": v, "old_string": long, "new_string": "b"}), "old_string"),
        ("a long new_string", json!({"version_id": v, "old_string": "a", "new_string": long}), "new_string"),
        ("a number for new_string", json!({"version_id": v, "old_string": "a", "new_string": 5}), "new_string"),
        ("an unknown field", json!({"version_id": v, "old_string": "a", "new_string": "b", "extra": 1}), "extra"),
        ("an empty agent_id", json!({"version_id": v, "old_string": "a", "new_string": "b", "agent_id": ""}), "agent_id"),
        ("a long agent_id", json!({"version_id": v, "old_string": "a", "new_string": "b", "agent_id": "x".repeat(101)}), "agent_id"),
    ];
    let fields = cases.clone().map(|(what, _, field)| (what, field));
    let path = "/v1/notes/Inbox:edit";
    let answers = s
        .refuse_all(cases.map(|(what, body, _)| {
            (
                what,
                Method::POST,
                path,
                Some(body),
                400,
                "VALIDATION_FAILED",
            )
        }))
        .await;
    for ((what, field), e) in fields.iter().zip(&answers) {
        assert_eq!(common::violated_field(e), field, "{what}: {e}");
    }
    // Malformed JSON and a wrong content type.
    for (what, content_type, text) in [
        ("malformed", "application/json", "{nope"),
        ("content type", "text/plain", "{}"),
    ] {
        let res = s
            .client
            .post(s.url("/v1/notes/Inbox:edit"))
            .header("Idempotency-Key", "m")
            .header("content-type", content_type)
            .body(text)
            .send()
            .await
            .unwrap();
        let body = res_json(res, 400, what).await;
        assert_envelope_for(what, &body, 400, "VALIDATION_FAILED");
    }
    let body = json!({"version_id": v, "old_string": "a", "new_string": "b"});
    let (path, reason) = ("/v1/notes/Inbox:edit", "IDEMPOTENCY_KEY_MISSING");
    s.refused(
        "no key",
        Method::POST,
        path,
        None,
        Some(body.clone()),
        400,
        reason,
    )
    .await;
    let (path, reason) = ("/v1/notes/nope:edit", "NOTE_NOT_FOUND");
    s.refuse_all([("no such note", Method::POST, path, Some(body), 404, reason)])
        .await;
    assert_eq!(
        read(&s, "Inbox.md").await,
        std::fs::read_to_string(common::repo_path("vault-example/Inbox.md")).unwrap(),
        "nothing was written"
    );
}

async fn patch_edits_frontmatter_surgically_and_keeps_crlf_and_comments(mode: Mode) {
    let s = TestServer::start_as(mode, Some("fixtures/edge"), |_| {}).await;
    let before = read(&s, "crlf.md").await;
    let r = s
        .call(
            Method::PATCH,
            "/v1/notes/crlf?update_mask=status,frontmatter.reviewed",
            Some("p1"),
            Some(json!({"status": "done", "frontmatter": {"reviewed": true}})),
            200,
        )
        .await;
    assert_receipt(&r);
    assert_eq!(r["note"]["status"], "done");
    let after = read(&s, "crlf.md").await;
    assert!(
        !after.replace("\r\n", "").contains('\n'),
        "still CRLF only: {after:?}"
    );
    // Only the touched lines changed.
    let old_lines: Vec<&str> = before.split("\r\n").collect();
    let new_lines: Vec<&str> = after.split("\r\n").collect();
    let removed: Vec<_> = old_lines
        .iter()
        .filter(|l| !new_lines.contains(l))
        .collect();
    let added: Vec<_> = new_lines
        .iter()
        .filter(|l| !old_lines.contains(l))
        .collect();
    assert!(
        removed.iter().all(|l| l.starts_with("status")),
        "{removed:?}"
    );
    assert!(
        added
            .iter()
            .all(|l| l.starts_with("status") || l.starts_with("reviewed")),
        "{added:?}"
    );
    assert!(after.contains("reviewed: true\r\n"));
    // The body is byte for byte the same.
    let body_of = |t: &str| t.splitn(3, "---\r\n").nth(2).unwrap().to_string();
    assert_eq!(body_of(&before), body_of(&after));

    // Tags, title and content; a note without frontmatter gets a minimal block.
    let r = s
        .call(
            Method::PATCH,
            "/v1/notes/title-rules%2Fh1-title?update_mask=tags",
            Some("p2"),
            Some(json!({"tags": ["x", "y z"]})),
            200,
        )
        .await;
    assert_eq!(r["note"]["tags"], json!(["x", "y z"]));
    assert!(read(&s, "title-rules/h1-title.md")
        .await
        .starts_with("---\ntags: [x, y z]\n---\nSome text before the heading."));
    let plain = read(&s, "title-rules/no-title.md").await;
    assert!(!plain.starts_with("---"));
    s.call(
        Method::PATCH,
        "/v1/notes/title-rules/no-title?update_mask=status",
        Some("p2b"),
        Some(json!({"status": "draft"})),
        200,
    )
    .await;
    assert_eq!(
        read(&s, "title-rules/no-title.md").await,
        format!("---\nstatus: draft\n---\n{plain}")
    );
    let r = s
        .call(
            Method::PATCH,
            "/v1/notes/title-rules/h1-title?update_mask=content",
            Some("p3"),
            Some(json!({"content": "new body\n"})),
            200,
        )
        .await;
    assert_eq!(
        read(&s, "title-rules/h1-title.md").await,
        "---\ntags: [x, y z]\n---\nnew body\n"
    );
    assert_eq!(r["note"]["title"], "h1-title");
    // Removing a key (masked, absent from the body).
    s.call(
        Method::PATCH,
        "/v1/notes/title-rules/h1-title?update_mask=tags",
        Some("p4"),
        Some(json!({})),
        200,
    )
    .await;
    assert!(!read(&s, "title-rules/h1-title.md").await.contains("tags"));
}

async fn patch_masks_and_preconditions(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let moved = "01a20281-49a4-7122-91be-bfac5236261b";
    #[rustfmt::skip]
    let cases = [
        ("an empty mask", "?update_mask=", json!({"title": "x"}), 400, "INVALID_UPDATE_MASK"),
        ("body", "?update_mask=body", json!({"title": "x"}), 400, "INVALID_UPDATE_MASK"),
        ("an unknown field", "?update_mask=title,nope", json!({"title": "x"}), 400, "INVALID_UPDATE_MASK"),
        ("a key-less frontmatter.", "?update_mask=frontmatter.", json!({"title": "x"}), 400, "INVALID_UPDATE_MASK"),
        ("note_id", "?update_mask=note_id", json!({"title": "x"}), 400, "INVALID_UPDATE_MASK"),
        ("no mask", "", json!({"title": "x"}), 400, "INVALID_UPDATE_MASK"),
        ("a title not a string", "?update_mask=title", json!({"title": 3}), 400, "VALIDATION_FAILED"),
        ("a version not current", "?update_mask=title", json!({"title": "x", "version_id": moved}), 409, "VERSION_MOVED"),
    ];
    s.refuse_all(cases.map(|(what, query, body, status, reason)| {
        let path = format!("/v1/notes/Inbox{query}");
        (what, Method::PATCH, path, Some(body), status, reason)
    }))
    .await;
    let r = s
        .call(
            Method::PATCH,
            "/v1/notes/Inbox?update_mask=title",
            Some("m2"),
            Some(json!({"title": "Inbox zero"})),
            200,
        )
        .await;
    assert_eq!(r["note"]["title"], "Inbox zero");
    // The file is read-only for nothing else: the body stays.
    assert!(read(&s, "Inbox.md")
        .await
        .ends_with(&std::fs::read_to_string(common::repo_path("vault-example/Inbox.md")).unwrap()));
}

async fn delete_moves_to_trash_and_history_records_it(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let content = read(&s, "scratchpad.md").await;
    let r = s
        .call(
            Method::DELETE,
            "/v1/notes/scratchpad?agent_id=cleaner",
            Some("d1"),
            None,
            200,
        )
        .await;
    assert_receipt(&r);
    assert!(!s.holds("scratchpad.md").await);
    if s.mode == Mode::Local {
        // Hosted mode has no folder, so no .trash/.
        assert_eq!(read(&s, ".trash/scratchpad.md").await, content);
    }
    s.get_error("/v1/notes/scratchpad", 404, "NOTE_NOT_FOUND")
        .await;
    // Replay answers the same receipt; a new key finds nothing.
    assert_eq!(
        s.call(
            Method::DELETE,
            "/v1/notes/scratchpad?agent_id=cleaner",
            Some("d1"),
            None,
            200
        )
        .await,
        r
    );
    s.refused(
        "a deleted note",
        Method::DELETE,
        "/v1/notes/scratchpad",
        Some("d2"),
        None,
        404,
        "NOTE_NOT_FOUND",
    )
    .await;
    if s.mode == Mode::Hosted {
        // No history.git: the database holds the revisions.
        return;
    }
    common::wait_history(&s.svc).await;
    let files = git(&s.state, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(!files.contains("scratchpad.md"));
    let subject = git(&s.state, &["log", "-1", "--format=%s"]);
    assert!(subject.starts_with("delete scratchpad"), "{subject}");
}

async fn move_and_rename_rewrite_links(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    // Find a note that links to the roadmap by wikilink and one by relative link.
    let linking: Vec<String> = common::temp_list(&s.vault)
        .into_iter()
        .filter(|p| {
            // The folder as it was served (hosted: imported).
            let text = std::fs::read_to_string(s.vault.join(p)).unwrap();
            text.contains("[[roadmap") || text.contains("(../projects/roadmap.md")
        })
        .collect();
    assert!(!linking.is_empty());
    let id = s.get_json("/v1/notes/projects/roadmap?limit=1", 200).await["note_id"].clone();
    let r = s
        .call(
            Method::POST,
            "/v1/notes/projects%2Froadmap:rename",
            Some("r1"),
            Some(json!({"name": "plan-2027"})),
            200,
        )
        .await;
    assert_receipt(&r);
    assert_eq!(r["renamed"], true);
    assert_eq!(r["slug"], "projects/plan-2027");
    assert_eq!(r["note_id"], id);
    assert_eq!(
        r["links_updated"].as_u64().unwrap() as usize,
        linking.len(),
        "{r}"
    );
    for p in &linking {
        let text = read(&s, p).await;
        assert!(
            !text.contains("[[roadmap") && !text.contains("/roadmap.md)"),
            "{p}: {text}"
        );
        assert!(
            text.contains("[[plan-2027") || text.contains("(../projects/plan-2027.md)"),
            "{p}"
        );
    }
    let r = s
        .call(
            Method::POST,
            "/v1/notes/projects/plan-2027:move",
            Some("r2"),
            Some(json!({"folder": "archive"})),
            200,
        )
        .await;
    assert_eq!(r["slug"], "archive/plan-2027");
    assert!(s.holds("archive/plan-2027.md").await);
    let res = s
        .send(
            Method::POST,
            "/v1/notes/archive/plan-2027/move",
            Some("r3"),
            Some(json!({"folder": ""})),
        )
        .await;
    assert_eq!(res.headers()["deprecation"], "true");
    assert_eq!(res_json(res, 200, "legacy move").await["slug"], "plan-2027");
    #[rustfmt::skip]
    let cases = [
        ("a taken name", "/v1/notes/plan-2027:rename", json!({"name": "Welcome"}), 409, "NAME_COLLISION"),
        ("a name leaving the folder", "/v1/notes/plan-2027:rename", json!({"name": "../x"}), 400, "UNSAFE_PATH"),
        ("a folder outside the vault", "/v1/notes/plan-2027:move", json!({"folder": "../.."}), 400, "UNSAFE_PATH"),
    ];
    s.refuse_all(cases.map(|(what, path, body, status, reason)| {
        (what, Method::POST, path, Some(body), status, reason)
    }))
    .await;
}

#[tokio::test]
async fn an_editor_change_is_never_overwritten() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let v = s.get_json("/v1/notes/Inbox?limit=1", 200).await["version_id"]
        .as_str()
        .unwrap()
        .to_string();
    // An editor rewrites the file by rename, as vim does.
    let tmp = s.vault.join(".Inbox.md.tmp");
    std::fs::write(&tmp, "# Inbox\n\nthe editor's words\n").unwrap();
    std::fs::rename(&tmp, s.vault.join("Inbox.md")).unwrap();
    s.refused(
        "an edit of the version before the editor's",
        Method::POST,
        "/v1/notes/Inbox:edit",
        Some("race"),
        Some(json!({"version_id": v, "old_string": "editor", "new_string": "agent"})),
        409,
        "VERSION_MOVED",
    )
    .await;
    assert_eq!(
        read(&s, "Inbox.md").await,
        "# Inbox\n\nthe editor's words\n"
    );
    // The editor's content became a revision.
    let now = s.get_json("/v1/notes/Inbox?limit=1", 200).await;
    assert_ne!(now["version_id"], v);
}

async fn the_write_rate_limit_applies(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |c| {
        c.rate_limit_write_per_minute = 1
    })
    .await;
    s.call(
        Method::POST,
        "/v1/notes",
        Some("rl1"),
        Some(json!({"slug": "one", "content": ""})),
        201,
    )
    .await;
    let res = s
        .send(
            Method::POST,
            "/v1/notes",
            Some("rl2"),
            Some(json!({"slug": "two", "content": ""})),
        )
        .await;
    assert!(res.headers().get("retry-after").is_some());
    assert_envelope(&res_json(res, 429, "429").await, 429, "RATE_LIMITED");
    assert!(!s.holds("two.md").await);
}

async fn frontmatter_values_folder_patches_and_trash_names(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let r = s.call(Method::POST, "/v1/notes", Some("f1"), Some(json!({"slug": "scratch", "content": "body\n", "status": "draft", "frontmatter": {"rating": 4.5, "done": false, "aliases": ["s", "scr"], "due": "2027-01-01"}})), 201)
        .await;
    assert_eq!(r["note"]["status"], "draft");
    assert_eq!(read(&s, "scratch.md").await, "---\nstatus: draft\nrating: 4.5\ndone: false\naliases: [s, scr]\ndue: 2027-01-01\n---\nbody\n");
    s.refused(
        "a nested frontmatter value",
        Method::POST,
        "/v1/notes",
        Some("f2"),
        Some(json!({"slug": "nested", "content": "", "frontmatter": {"a": {"b": 1}}})),
        400,
        "VALIDATION_FAILED",
    )
    .await;
    // PATCH folder moves the note; the receipt embeds it at its new place.
    let r = s
        .call(
            Method::PATCH,
            "/v1/notes/scratch?update_mask=folder,status",
            Some("f3"),
            Some(json!({"folder": "archive", "status": "done"})),
            200,
        )
        .await;
    assert_eq!(r["slug"], "archive/scratch");
    assert_eq!(r["note"]["status"], "done");
    assert!(read(&s, "archive/scratch.md")
        .await
        .contains("status: done\n"));
    // Deleting two notes of the same name keeps both in .trash.
    s.call(
        Method::DELETE,
        "/v1/notes/archive/scratch",
        Some("f4"),
        None,
        200,
    )
    .await;
    s.call(
        Method::POST,
        "/v1/notes",
        Some("f5"),
        Some(json!({"slug": "archive/scratch", "content": "second\n"})),
        201,
    )
    .await;
    s.call(
        Method::DELETE,
        "/v1/notes/archive/scratch",
        Some("f6"),
        None,
        200,
    )
    .await;
    assert!(!s.holds("archive/scratch.md").await);
    if s.mode == Mode::Local {
        // Hosted mode has no folder, so no .trash/.
        assert!(s.holds(".trash/archive/scratch.md").await);
        assert_eq!(read(&s, ".trash/archive/scratch 2.md").await, "second\n");
    }
}

async fn an_oversized_body_is_payload_too_large_and_writes_nothing(mode: Mode) {
    let s = TestServer::start_as(mode, Some("vault-example"), |_| {}).await;
    let big = "x".repeat(17 * 1024 * 1024);
    let res = s
        .client
        .post(s.url("/v1/notes"))
        .header("Idempotency-Key", "big")
        .json(&json!({"slug": "big", "content": big}))
        .send()
        .await
        .unwrap();
    assert_envelope(&res_json(res, 413, "big").await, 413, "PAYLOAD_TOO_LARGE");
    assert!(!s.holds("big.md").await);
}

/// The hash a version before request identities bound a key to (route, note, body as
/// sent, query, agent), as it stored it in `meta.sqlite`.
fn legacy_hash(route: &str, note: &str, body: &Value, query: &str, agent: &str) -> String {
    let mut h = blake3::Hasher::new();
    for part in [route, note, &body.to_string(), query, agent] {
        h.update(part.as_bytes());
        h.update(&[0]);
    }
    h.finalize().to_hex().to_string()
}

/// Keys recorded by an older version (its op hash over the route and the JSON body;
/// before migration 5 a rendered answer, no receipt) still answer after an upgrade: a
/// replay gets the stored receipt byte for byte, another request under the key is
/// refused. (Checked against the pre-change binary as well, see the branch's report.)
#[tokio::test]
async fn keys_recorded_by_an_older_version_still_replay_and_refuse() {
    let s = TestServer::start(Some("vault-example"), |_| {}).await;
    let create = json!({"slug": "old/keyed", "content": "kept\n", "agent_id": "old-agent"});
    let first = s
        .write(Method::POST, "/v1/notes", "old-create", create.clone())
        .await;
    assert_eq!(first.status().as_u16(), 201);
    let first = first.text().await.unwrap();
    let (dir, vault, state) = s.stop().await;
    {
        let db = rusqlite::Connection::open(state.join("meta.sqlite")).unwrap();
        let stored: String = db
            .query_row(
                "SELECT op_hash FROM idempotency WHERE key = 'old-create'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(
            stored.starts_with("op2:"),
            "a new record is tagged: {stored}"
        );
        // As the older version stored them: its hash, and a rendered answer.
        let legacy = legacy_hash("POST /v1/notes", "", &create, "", "old-agent");
        db.execute(
            "UPDATE idempotency SET op_hash = ?1 WHERE key = 'old-create'",
            [&legacy],
        )
        .unwrap();
        let rendered = json!({"slug": "old/rendered", "content": "x\n"});
        db.execute(
            "INSERT INTO idempotency (key, op_hash, receipt, status, body, created_at)
             VALUES ('old-rendered', ?1, NULL, 201, '{\"status\":\"applied\",\"slug\":\"old/rendered\"}',
                     '2026-11-01T00:00:00.000Z')",
            [legacy_hash("POST /v1/notes", "", &rendered, "", "unknown")],
        )
        .unwrap();
    }
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    let replay = s
        .write(Method::POST, "/v1/notes", "old-create", create.clone())
        .await;
    assert_eq!(replay.status().as_u16(), 201);
    assert_eq!(
        replay.text().await.unwrap(),
        first,
        "the stored receipt, byte for byte"
    );
    let rendered = s
        .write(
            Method::POST,
            "/v1/notes",
            "old-rendered",
            json!({"slug": "old/rendered", "content": "x\n"}),
        )
        .await;
    assert_eq!(rendered.status().as_u16(), 201);
    assert_eq!(
        rendered.text().await.unwrap(),
        r#"{"status":"applied","slug":"old/rendered"}"#
    );
    assert!(!s.holds("old/rendered.md").await, "a replay writes nothing");
    for (key, body) in [
        (
            "old-create",
            json!({"slug": "old/keyed", "content": "other\n", "agent_id": "old-agent"}),
        ),
        (
            "old-rendered",
            json!({"slug": "old/rendered", "content": "y\n"}),
        ),
    ] {
        let res = s.write(Method::POST, "/v1/notes", key, body).await;
        assert_envelope_for(
            key,
            &res_json(res, 422, key).await,
            422,
            "IDEMPOTENCY_KEY_REUSED",
        );
    }
    assert_eq!(read(&s, "old/keyed.md").await, "kept\n");
}

crate::test_in_both_modes!(
    create_then_replay_then_reuse,
    create_by_title_and_folder_and_the_folder_depth_rule,
    edit_exactly_per_the_spec,
    edit_bad_input_names_the_field,
    patch_edits_frontmatter_surgically_and_keeps_crlf_and_comments,
    patch_masks_and_preconditions,
    delete_moves_to_trash_and_history_records_it,
    move_and_rename_rewrite_links,
    the_write_rate_limit_applies,
    frontmatter_values_folder_patches_and_trash_names,
    an_oversized_body_is_payload_too_large_and_writes_nothing,
);
