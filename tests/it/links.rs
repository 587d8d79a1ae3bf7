//! The link graph over HTTP: how `[[links]]` resolve (path, partial path, shortest file
//! name, aliases, letter case, relative markdown links), and that backlinks follow every
//! way a note is recorded (start-up scan, API writes, the watcher) — and listing filters
//! over tags, folder, path and slug, which walk only their candidates, answer what a full
//! evaluation answers.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault and read the environment"
)]

use crate::common;

use common::{eventually, temp_vault, TestServer};
use serde_json::{json, Value};

fn write(vault: &std::path::Path, rel: &str, text: &str) {
    let path = vault.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

async fn serve(files: &[(&str, &str)]) -> TestServer {
    let (dir, vault, state) = temp_vault(None);
    for (rel, text) in files {
        write(&vault, rel, text);
    }
    TestServer::start_in(dir, vault, state, |c| c.rate_limit_write_per_minute = 0).await
}

fn enc(s: &str) -> String {
    s.replace('/', "%2F").replace(' ', "%20")
}

/// `(slug, lines)` of each backlink of `slug`.
async fn backlinks(s: &TestServer, slug: &str) -> Vec<(String, Vec<u64>)> {
    let links = s
        .get_json(&format!("/v1/notes/{}:links", enc(slug)), 200)
        .await;
    links["backlinks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["note"]["slug"].as_str().unwrap().to_string(),
                b["lines"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l.as_u64().unwrap())
                    .collect(),
            )
        })
        .collect()
}

/// `(line, target as written, resolved slug)` of each outgoing link of `slug`.
async fn outgoing(s: &TestServer, slug: &str) -> Vec<(u64, String, Option<String>)> {
    let links = s
        .get_json(&format!("/v1/notes/{}:links", enc(slug)), 200)
        .await;
    links["outgoing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["line"].as_u64().unwrap(),
                l["target"].as_str().unwrap().to_string(),
                l["note"]["slug"].as_str().map(str::to_string),
            )
        })
        .collect()
}

async fn send(
    s: &TestServer,
    method: reqwest::Method,
    path: &str,
    key: &str,
    body: Value,
) -> Value {
    let res = s
        .client
        .request(method, s.url(path))
        .header("Idempotency-Key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap();
    assert!((200..300).contains(&status), "{path}: {status} {body}");
    body
}

const LINKER: &str = "\
[[target]]
[[a/deep/target]]
[[deep/Target.md]]
[[y/note]]
[[ZO]]
[[TARGET|shown]] and ![[b/Target#h]]
[up](../b/Target.md)
[[nowhere]]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_resolve_like_obsidian() {
    let s = serve(&[
        ("a/deep/Target.md", "deep\n"),
        ("b/Target.md", "shallow\n"),
        ("x/y/Note.md", "x\n"),
        ("zz/y/Note.md", "z\n"),
        ("people/Zoë.md", "---\naliases: [Zo]\n---\nhi\n"),
        ("src/linker.md", LINKER),
    ])
    .await;
    let want: Vec<(u64, &str, Option<&str>)> = vec![
        (1, "target", Some("b/Target")), // the shortest path with that name
        (2, "a/deep/target", Some("a/deep/Target")), // a full path, any case
        (3, "deep/Target.md", Some("a/deep/Target")), // a partial path
        (4, "y/note", Some("x/y/Note")), // the shortest path ending so
        (5, "ZO", Some("people/Zoë")),   // an alias, any case
        (6, "TARGET", Some("b/Target")),
        (6, "b/Target", Some("b/Target")),
        (7, "../b/Target.md", Some("b/Target")), // relative to the note's folder
        (8, "nowhere", None),
    ];
    let got = outgoing(&s, "src/linker").await;
    let got: Vec<(u64, &str, Option<&str>)> = got
        .iter()
        .map(|(l, t, n)| (*l, t.as_str(), n.as_deref()))
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        backlinks(&s, "b/Target").await,
        vec![("src/linker".to_string(), vec![1, 6, 6, 7])]
    );
    assert_eq!(
        backlinks(&s, "a/deep/Target").await,
        vec![("src/linker".to_string(), vec![2, 3])]
    );
    assert_eq!(
        backlinks(&s, "x/y/Note").await,
        vec![("src/linker".to_string(), vec![4])]
    );
    assert!(backlinks(&s, "zz/y/Note").await.is_empty());
    assert_eq!(
        backlinks(&s, "people/Zoë").await,
        vec![("src/linker".to_string(), vec![5])]
    );
    // The link filter fields agree with the backlinks.
    let to = s
        .get_json("/v1/notes?filter=links_to%3Ab%2FTarget", 200)
        .await;
    assert_eq!(to["notes"][0]["slug"], "src/linker");
    assert_eq!(to["coverage"]["notes_matched"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlinks_follow_api_writes_and_the_watcher() {
    let s = serve(&[
        ("b/sub/Target.md", "deep\n"),
        ("linker.md", "see [[target]]\n"),
    ])
    .await;
    assert_eq!(
        backlinks(&s, "b/sub/Target").await,
        vec![("linker".to_string(), vec![1])]
    );

    // A note with the same name on a shorter path takes the link over.
    send(
        &s,
        reqwest::Method::POST,
        "/v1/notes",
        "c1",
        json!({"slug": "c/Target", "content": "shorter\n"}),
    )
    .await;
    assert!(backlinks(&s, "b/sub/Target").await.is_empty());
    assert_eq!(
        backlinks(&s, "c/Target").await,
        vec![("linker".to_string(), vec![1])]
    );

    // Deleted, the link falls back to the longer path.
    let res = s
        .client
        .delete(s.url("/v1/notes/c%2FTarget"))
        .header("Idempotency-Key", "d1")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        backlinks(&s, "b/sub/Target").await,
        vec![("linker".to_string(), vec![1])]
    );

    // An alias set by PATCH is a name links can use.
    write(&s.vault, "other.md", "line one\n[[Nick]]\n");
    eventually("the watcher takes other.md in", || async {
        s.get("/v1/notes/other:links").await.status() == 200
    })
    .await;
    assert!(outgoing(&s, "other").await[0].2.is_none());
    send(
        &s,
        reqwest::Method::PATCH,
        "/v1/notes/b%2Fsub%2FTarget?update_mask=frontmatter.aliases",
        "p1",
        json!({"frontmatter": {"aliases": ["nick"]}}),
    )
    .await;
    assert_eq!(
        backlinks(&s, "b/sub/Target").await,
        vec![
            ("linker".to_string(), vec![1]),
            ("other".to_string(), vec![2])
        ]
    );

    // An editor changes a link, then deletes a linking note.
    write(&s.vault, "linker.md", "now [[other]]\n");
    eventually("the edited link leaves the backlinks", || async {
        backlinks(&s, "b/sub/Target").await == vec![("other".to_string(), vec![2])]
    })
    .await;
    assert_eq!(
        backlinks(&s, "other").await,
        vec![("linker".to_string(), vec![1])]
    );
    std::fs::remove_file(s.vault.join("other.md")).unwrap();
    eventually("a deleted note's links leave the backlinks", || async {
        backlinks(&s, "b/sub/Target").await.is_empty()
    })
    .await;

    // An editor renames the target: the link resolves to nothing, then to the new name.
    std::fs::rename(
        s.vault.join("b/sub/Target.md"),
        s.vault.join("b/sub/Renamed.md"),
    )
    .unwrap();
    write(&s.vault, "linker.md", "now [[renamed]]\n");
    eventually("the renamed note has the backlink", || async {
        s.get("/v1/notes/b%2Fsub%2FRenamed:links").await.status() == 200
            && backlinks(&s, "b/sub/Renamed").await == vec![("linker".to_string(), vec![1])]
    })
    .await;
}

/// Slugs of every page of a listing (page_size 1, following the tokens), and the
/// `notes_matched` of the first page.
async fn list_all(s: &TestServer, filter: &str) -> (Vec<String>, u64) {
    list_under(s, "", filter).await
}

async fn list_under(s: &TestServer, prefix: &str, filter: &str) -> (Vec<String>, u64) {
    let mut f = url_escape(filter);
    if !prefix.is_empty() {
        f.push_str(&format!("&prefix={}", url_escape(prefix)));
    }
    let mut slugs = Vec::new();
    let mut token: Option<String> = None;
    let mut matched = None;
    loop {
        let mut path = format!("/v1/notes?page_size=1&filter={f}").replace("filter=&", "");
        if let Some(t) = &token {
            path.push_str(&format!("&page_token={t}"));
        }
        let page = s.get_json(&path, 200).await;
        matched.get_or_insert(page["coverage"]["notes_matched"].as_u64().unwrap());
        slugs.extend(
            page["notes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["slug"].as_str().unwrap().to_string()),
        );
        match page["next_page_token"].as_str() {
            Some(t) => token = Some(url_escape(t)),
            None => break,
        }
    }
    (slugs, matched.unwrap())
}

fn url_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_over_tags_folder_and_path_answer_exactly() {
    let s = serve(&[
        ("a/x.md", "---\ntags: [project/active, idea]\n---\nx\n"),
        ("a/y.md", "---\ntags: [project]\nstatus: done\n---\ny\n"),
        ("a/b/z.md", "---\ntags: [projects]\n---\nz\n"),
        ("b/w.md", "---\ntags: [Idea]\n---\nw\n"),
        ("top.md", "---\ntags: [idea]\n---\ntop\n"),
        ("ab.md", "no tags\n"),
    ])
    .await;
    let cases: &[(&str, &[&str])] = &[
        ("tags:project", &["a/x", "a/y"]),
        ("tags = project", &["a/y"]),
        ("tags = \"proj*\"", &["a/b/z", "a/x", "a/y"]),
        ("tags:idea", &["a/x", "top"]),
        ("tags:idea AND NOT folder = a", &["top"]),
        ("tags:idea OR tags:projects", &["a/b/z", "a/x", "top"]),
        ("tags:idea OR status = done", &["a/x", "a/y", "top"]),
        ("folder = a", &["a/x", "a/y"]),
        ("folder = \"a*\"", &["a/b/z", "a/x", "a/y"]),
        ("folder = \"\"", &["ab", "top"]),
        ("folder = a AND status != done", &["a/x"]),
        ("path = \"a/x.md\"", &["a/x"]),
        ("path = \"a/x\"", &[]),
        ("path = \"a/x.m*\"", &["a/x"]),
        ("path = \"a*\"", &["a/b/z", "a/x", "a/y", "ab"]),
        ("slug = \"a/*\"", &["a/b/z", "a/x", "a/y"]),
        ("slug = top", &["top"]),
        ("tags:nothing", &[]),
    ];
    for (filter, want) in cases {
        let (got, matched) = list_all(&s, filter).await;
        assert_eq!(got, *want, "{filter}");
        assert_eq!(matched as usize, want.len(), "notes_matched of {filter}");
    }
    // A prefix, with and without a filter.
    let prefixed: &[(&str, &str, &[&str])] = &[
        ("a/", "", &["a/b/z", "a/x", "a/y"]),
        ("a", "", &["a/b/z", "a/x", "a/y", "ab"]),
        ("a/", "tags:idea", &["a/x"]),
        ("t", "", &["top"]),
        ("zzz", "", &[]),
    ];
    for (prefix, filter, want) in prefixed {
        let (got, matched) = list_under(&s, prefix, filter).await;
        assert_eq!(got, *want, "{prefix} {filter}");
        assert_eq!(
            matched as usize,
            want.len(),
            "notes_matched of {prefix} {filter}"
        );
    }

    // The tag map follows a write and an editor's save.
    send(
        &s,
        reqwest::Method::PATCH,
        "/v1/notes/ab?update_mask=tags",
        "t1",
        json!({"tags": ["project/new"]}),
    )
    .await;
    assert_eq!(list_all(&s, "tags:project").await.0, ["a/x", "a/y", "ab"]);
    write(&s.vault, "a/x.md", "---\ntags: [idea]\n---\nx\n");
    eventually("the saved tags are listed", || async {
        list_all(&s, "tags:project").await.0 == ["a/y", "ab"]
    })
    .await;
}
