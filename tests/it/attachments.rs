//! Attachments over HTTP on port 0: list (filter, coverage, referenced_by), download (by
//! name, sha256, path; ETag, Range, If-None-Match; ambiguity), multipart upload (receipt,
//! history, idempotency, every refusal, no temp file left), the byte cap before the body
//! is read, presigned GET and PUT links, and an external copy picked up by the watcher.

#![allow(
    clippy::disallowed_methods,
    reason = "tests write the vault as an editor would"
)]

use crate::common;

/// A multipart part: name, file name, content type, bytes.
type Part<'a> = (&'a str, Option<&'a str>, Option<&'a str>, &'a [u8]);

use std::io::{Read, Write};

use common::{assert_envelope_for, eventually, git, res_json, Mode, TestServer};
use notevault::auth::{Permission, StaticToken, TokenKind};
use serde_json::{json, Value};

const PNG: &[u8] =
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";
const PDF: &[u8] = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n";

fn png(tag: u8) -> Vec<u8> {
    let mut v = PNG.to_vec();
    v.extend_from_slice(&[tag; 64]);
    v
}

fn sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn put_file(vault: &std::path::Path, rel: &str, bytes: &[u8]) {
    let path = vault.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

async fn fixture(tweak: impl FnOnce(&mut notevault::config::Config)) -> TestServer {
    fixture_as(Mode::Local, tweak).await
}

/// The fixture in `mode`. Hosted, the attachments are uploaded after the import (which
/// brings notes only) into the vault's blob store; a note under `projects/alpha` makes
/// that folder exist there (a hosted vault's folders are its notes').
async fn fixture_as(mode: Mode, tweak: impl FnOnce(&mut notevault::config::Config)) -> TestServer {
    let (dir, vault, state) = common::temp_vault(None);
    let files: [(&str, &str, Vec<u8>); 3] = [
        ("", "diagram.png", png(1)),
        ("projects/alpha", "diagram.png", png(2)),
        ("docs", "a.pdf", PDF.to_vec()),
    ];
    if mode == Mode::Hosted {
        put_file(&vault, "projects/alpha/readme.md", b"# Alpha\n");
        put_file(
            &vault,
            "notes/n.md",
            b"# N\n\n![[diagram.png]] and [the paper](../docs/a.pdf)\n",
        );
        let s = TestServer::start_in_as(mode, dir, vault, state, tweak).await;
        for (i, (folder, name, bytes)) in files.iter().enumerate() {
            let res = upload(
                &s,
                &format!("fixture-{i}"),
                &[
                    ("folder", None, None, folder.as_bytes()),
                    ("file", Some(name), None, bytes),
                ],
            )
            .await;
            res_json(res, 201, "fixture upload").await;
        }
        return s;
    }
    put_file(&vault, "diagram.png", &png(1));
    put_file(&vault, "projects/alpha/diagram.png", &png(2));
    put_file(&vault, "docs/a.pdf", PDF);
    put_file(
        &vault,
        "notes/n.md",
        b"# N\n\n![[diagram.png]] and [the paper](../docs/a.pdf)\n",
    );
    put_file(
        &vault,
        ".obsidian/app.json",
        b"{\"attachmentFolderPath\": \"assets\"}",
    );
    TestServer::start_in(dir, vault, state, tweak).await
}

/// A multipart body: `(name, filename, content type, bytes)` parts.
fn multipart(parts: &[Part<'_>]) -> (String, Vec<u8>) {
    let boundary = "XnotevaultTestBoundaryX";
    let mut body = Vec::new();
    for (name, filename, ctype, bytes) in parts {
        write!(
            body,
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\""
        )
        .unwrap();
        if let Some(f) = filename {
            write!(body, "; filename=\"{f}\"").unwrap();
        }
        body.extend_from_slice(b"\r\n");
        if let Some(c) = ctype {
            write!(body, "Content-Type: {c}\r\n").unwrap();
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    write!(body, "--{boundary}--\r\n").unwrap();
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn upload(s: &TestServer, key: &str, parts: &[Part<'_>]) -> reqwest::Response {
    let (ctype, body) = multipart(parts);
    s.client
        .post(s.url("/v1/attachments"))
        .header("Idempotency-Key", key)
        .header("Content-Type", ctype)
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Our temp files anywhere in the vault.
fn temps(vault: &std::path::Path) -> Vec<String> {
    walkdir::WalkDir::new(vault)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".notevault-tmp")
        })
        .map(|e| e.path().display().to_string())
        .collect()
}

crate::test_in_both_modes!(
    lists_with_coverage_filters_and_references,
    downloads_by_name_sha_and_path_with_etag_and_range,
    a_retried_attachment_delete_or_rename_replays_its_receipt
);

async fn lists_with_coverage_filters_and_references(mode: Mode) {
    let s = fixture_as(mode, |_| {}).await;
    let all = s.get_json("/v1/attachments", 200).await;
    let paths: Vec<&str> = all["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["diagram.png", "docs/a.pdf", "projects/alpha/diagram.png"]
    );
    assert_eq!(all["coverage"]["attachments_total"], 3);
    assert_eq!(all["coverage"]["truncated"], false);
    let first = &all["attachments"][0];
    assert_eq!(first["content_type"], "image/png");
    assert_eq!(first["sha256"], sha(&png(1)));
    assert_eq!(first["folder"], "");
    assert_eq!(first["file_name"], "diagram.png");
    // `![[diagram.png]]` resolves to the shortest path; the relative link to the PDF.
    assert_eq!(first["referenced_by"], 1);
    assert_eq!(all["attachments"][1]["referenced_by"], 1);
    assert_eq!(all["attachments"][2]["referenced_by"], 0);

    let pdfs = s
        .get_json(
            "/v1/attachments?filter=content_type%20%3D%20%22application%2Fpdf%22",
            200,
        )
        .await;
    assert_eq!(pdfs["attachments"].as_array().unwrap().len(), 1);
    let unref = s
        .get_json("/v1/attachments?filter=referenced%20%3D%20false", 200)
        .await;
    assert_eq!(
        unref["attachments"][0]["path"],
        "projects/alpha/diagram.png"
    );
    let big = s
        .get_json("/v1/attachments?order_by=size%20asc&page_size=1", 200)
        .await;
    assert_eq!(big["attachments"][0]["path"], "docs/a.pdf");
    let token = big["next_page_token"].as_str().unwrap();
    let next = s
        .get_json(
            &format!("/v1/attachments?order_by=size%20asc&page_size=1&page_token={token}"),
            200,
        )
        .await;
    assert_eq!(next["attachments"].as_array().unwrap().len(), 1);
    s.get_error(
        "/v1/attachments?filter=nope%20%3D%201",
        400,
        "INVALID_FILTER",
    )
    .await;
}

async fn downloads_by_name_sha_and_path_with_etag_and_range(mode: Mode) {
    let s = fixture_as(mode, |_| {}).await;
    let ambiguous = s
        .get_error("/v1/attachments/diagram.png", 409, "ATTACHMENT_AMBIGUOUS")
        .await;
    let text = ambiguous.to_string();
    assert!(
        text.contains(&sha(&png(1))) && text.contains(&sha(&png(2))),
        "{text}"
    );
    assert!(text.contains("projects/alpha/diagram.png"), "{text}");

    let res = s
        .get(&format!(
            "/v1/attachments/diagram.png?sha256={}",
            sha(&png(2))
        ))
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "image/png");
    assert_eq!(res.headers()["content-length"], png(2).len().to_string());
    let etag = format!("\"{}\"", sha(&png(2)));
    assert_eq!(res.headers()["etag"], etag.as_str());
    assert_eq!(res.bytes().await.unwrap().as_ref(), png(2).as_slice());

    let res = s.get("/v1/attachments/projects/alpha/diagram.png").await;
    assert_eq!(res.status(), 200);
    let res = s.get("/v1/attachments/docs%2Fa.pdf").await;
    assert_eq!(res.headers()["content-type"], "application/pdf");

    let res = s
        .client
        .get(s.url("/v1/attachments/docs/a.pdf"))
        .header("Range", "bytes=2-5")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 206);
    assert_eq!(
        res.headers()["content-range"],
        format!("bytes 2-5/{}", PDF.len()).as_str()
    );
    assert_eq!(res.bytes().await.unwrap().as_ref(), &PDF[2..6]);
    let res = s
        .client
        .get(s.url("/v1/attachments/docs/a.pdf"))
        .header("Range", "bytes=-4")
        .send()
        .await
        .unwrap();
    assert_eq!(res.bytes().await.unwrap().as_ref(), &PDF[PDF.len() - 4..]);
    let res = s
        .client
        .get(s.url("/v1/attachments/docs/a.pdf"))
        .header("Range", "bytes=100000-")
        .send()
        .await
        .unwrap();
    let body = res_json(res, 416, "range past the end").await;
    assert_envelope_for("range", &body, 416, "RANGE_NOT_SATISFIABLE");

    let res = s
        .client
        .get(s.url("/v1/attachments/docs/a.pdf"))
        .header("If-None-Match", format!("\"{}\"", sha(PDF)))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 304);

    s.get_error("/v1/attachments/missing.png", 404, "ATTACHMENT_NOT_FOUND")
        .await;
    s.get_error(
        "/v1/attachments/a/..%2F..%2Fetc%2Fpasswd",
        400,
        "UNSAFE_PATH",
    )
    .await;
}

#[tokio::test]
async fn uploads_are_recorded_in_history_and_every_bad_input_gets_its_envelope() {
    let s = fixture(|_| {}).await;
    let res = upload(
        &s,
        "up-1",
        &[
            ("folder", None, None, b"projects/alpha"),
            ("agent_id", None, None, b"tester"),
            ("file", Some("report.pdf"), Some("application/pdf"), PDF),
        ],
    )
    .await;
    let receipt = res_json(res, 201, "upload").await;
    assert_eq!(receipt["status"], "applied");
    assert_eq!(receipt["attachment"]["path"], "projects/alpha/report.pdf");
    assert_eq!(receipt["attachment"]["sha256"], sha(PDF));
    assert_eq!(receipt["attachment"]["content_type"], "application/pdf");
    assert!(receipt["committed_seq"].as_i64().unwrap() > 0);
    assert_eq!(
        std::fs::read(s.vault.join("projects/alpha/report.pdf")).unwrap(),
        PDF
    );
    // The receipt left once the bytes were in history.
    let blob = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(s.state.join("history.git"))
        .args(["cat-file", "-p", "HEAD:projects/alpha/report.pdf"])
        .output()
        .unwrap();
    assert!(blob.status.success());
    assert_eq!(blob.stdout, PDF);
    let log = git(&s.state, &["log", "-1", "--format=%B"]);
    assert!(
        log.contains("Notevault-Attachment: projects/alpha/report.pdf"),
        "{log}"
    );
    assert!(log.contains("Notevault-Actor: agent:tester"), "{log}");
    // Its seq is one the index reflects too: a search asking for it answers at once
    // rather than waiting for a note change that never comes.
    let seq = receipt["committed_seq"].as_i64().unwrap();
    let started = std::time::Instant::now();
    let found = s
        .get_json(&format!("/v1/search?q=anything&min_seq={seq}"), 200)
        .await;
    assert!(
        found["coverage"]["indexed_seq"].as_i64().unwrap() >= seq,
        "{found}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let listed = s
        .get_json(
            "/v1/attachments?filter=path%20%3D%20%22projects%2Falpha%2Freport.pdf%22",
            200,
        )
        .await;
    assert_eq!(listed["attachments"].as_array().unwrap().len(), 1);

    // The same key and bytes replay; the same key with other bytes is refused.
    let again = upload(
        &s,
        "up-1",
        &[
            ("folder", None, None, b"projects/alpha"),
            ("agent_id", None, None, b"tester"),
            ("file", Some("report.pdf"), Some("application/pdf"), PDF),
        ],
    )
    .await;
    let replay = res_json(again, 201, "replay").await;
    assert_eq!(replay["committed_seq"], receipt["committed_seq"]);
    let reused = upload(
        &s,
        "up-1",
        &[
            ("folder", None, None, b"projects/alpha"),
            ("file", Some("report.pdf"), None, &png(9)),
        ],
    )
    .await;
    let body = res_json(reused, 422, "key reused").await;
    assert_envelope_for("key reused", &body, 422, "IDEMPOTENCY_KEY_REUSED");

    // No folder given: Obsidian's attachment folder.
    let res = upload(
        &s,
        "up-2",
        &[("file", Some("pic.png"), Some("image/png"), &png(3))],
    )
    .await;
    let r = res_json(res, 201, "default folder").await;
    assert_eq!(r["attachment"]["path"], "assets/pic.png");

    let (p4, p5, p6, p7) = (png(4), png(5), png(6), png(7));
    let cases: Vec<(&str, Vec<Part<'_>>, u16, &str)> = vec![
        (
            "folder after the file",
            vec![
                ("file", Some("late.png"), None, &p7[..]),
                ("folder", None, None, b""),
            ],
            400,
            "VALIDATION_FAILED",
        ),
        (
            "no file part",
            vec![("folder", None, None, b"x")],
            400,
            "VALIDATION_FAILED",
        ),
        (
            "two file parts",
            vec![
                ("file", Some("a.png"), None, &p4[..]),
                ("file", Some("b.png"), None, &p5[..]),
            ],
            400,
            "VALIDATION_FAILED",
        ),
        (
            "zero bytes",
            vec![("file", Some("empty.png"), None, b"")],
            400,
            "VALIDATION_FAILED",
        ),
        (
            "declared type contradicts the bytes",
            vec![("file", Some("fake.png"), Some("image/png"), PDF)],
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        ),
        (
            "type not allowed",
            vec![(
                "file",
                Some("tool.exe"),
                None,
                b"MZ\x90\0\x03\0\0\0\x04\0\0\0\xff\xff",
            )],
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        ),
        (
            "dot-dot name",
            vec![("file", Some("../escape.png"), None, &p6[..])],
            400,
            "UNSAFE_PATH",
        ),
        (
            "backslash name",
            vec![("file", Some("a\\b.png"), None, &p6[..])],
            400,
            "UNSAFE_PATH",
        ),
        (
            "dot-dot folder",
            vec![
                ("folder", None, None, b"../outside"),
                ("file", Some("x.png"), None, &p6[..]),
            ],
            400,
            "UNSAFE_PATH",
        ),
        (
            "absolute folder",
            vec![
                ("folder", None, None, b"/tmp"),
                ("file", Some("x.png"), None, &p6[..]),
            ],
            400,
            "UNSAFE_PATH",
        ),
        (
            "state folder",
            vec![
                ("folder", None, None, b".git"),
                ("file", Some("x.png"), None, &p6[..]),
            ],
            400,
            "UNSAFE_PATH",
        ),
        (
            "a note",
            vec![("file", Some("sneaky.md"), None, b"# hi")],
            400,
            "VALIDATION_FAILED",
        ),
    ];
    for (i, (what, parts, status, reason)) in cases.into_iter().enumerate() {
        let res = upload(&s, &format!("bad-{i}"), &parts).await;
        let body = res_json(res, status, what).await;
        assert_envelope_for(what, &body, status, reason);
    }
    // A name that exists: NAME_COLLISION.
    let res = upload(
        &s,
        "coll",
        &[
            ("folder", None, None, b""),
            ("file", Some("diagram.png"), None, &png(8)),
        ],
    )
    .await;
    let body = res_json(res, 409, "collision").await;
    assert_envelope_for("collision", &body, 409, "NAME_COLLISION");
    // A truncated body.
    let (ctype, body) = multipart(&[("file", Some("cut.png"), None, &png(6))]);
    let res = s
        .client
        .post(s.url("/v1/attachments"))
        .header("Idempotency-Key", "cut")
        .header("Content-Type", ctype)
        .body(body[..body.len() - 30].to_vec())
        .send()
        .await
        .unwrap();
    let b = res_json(res, 400, "truncated").await;
    assert_envelope_for("truncated", &b, 400, "VALIDATION_FAILED");
    // No key.
    let (ctype, body) = multipart(&[("file", Some("k.png"), None, &png(6))]);
    let res = s
        .client
        .post(s.url("/v1/attachments"))
        .header("Content-Type", ctype)
        .body(body)
        .send()
        .await
        .unwrap();
    let b = res_json(res, 400, "no key").await;
    assert_envelope_for("no key", &b, 400, "IDEMPOTENCY_KEY_MISSING");

    assert!(temps(&s.vault).is_empty(), "{:?}", temps(&s.vault));
    assert!(!s.vault.join("escape.png").exists());
    assert!(!s.vault.parent().unwrap().join("escape.png").exists());
    assert!(!s.vault.parent().unwrap().join("outside").exists());

    // Delete through the pipeline; history keeps the bytes.
    let res = s
        .client
        .delete(s.url("/v1/attachments/assets%2Fpic.png?agent_id=tester"))
        .header("Idempotency-Key", "del-1")
        .send()
        .await
        .unwrap();
    let del = res_json(res, 200, "delete").await;
    assert_eq!(del["attachment"]["path"], "assets/pic.png");
    assert!(!s.vault.join("assets/pic.png").exists());
    s.get_error("/v1/attachments/pic.png", 404, "ATTACHMENT_NOT_FOUND")
        .await;
}

/// Send a request head over a raw socket and count how many body bytes the server
/// took before it answered.
fn raw_upload(base: &str, head_extra: &str, chunked: bool, limit: usize) -> (String, usize) {
    let addr = base.trim_start_matches("http://");
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_millis(20)))
        .unwrap();
    let boundary = "B";
    let head = format!(
        "POST /v1/attachments HTTP/1.1\r\nHost: {addr}\r\nIdempotency-Key: big-{chunked}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n{head_extra}\r\n"
    );
    sock.write_all(head.as_bytes()).unwrap();
    let mut sent = 0usize;
    let part = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.png\"\r\n\r\n");
    let chunk = vec![0x42u8; 64 * 1024];
    let mut first = true;
    let mut answer = Vec::new();
    let started = std::time::Instant::now();
    while sent < limit && started.elapsed() < std::time::Duration::from_secs(20) {
        let data: Vec<u8> = if first {
            first = false;
            let mut d = part.as_bytes().to_vec();
            d.extend_from_slice(PNG);
            d.extend_from_slice(&chunk);
            d
        } else {
            chunk.clone()
        };
        let framed = if chunked {
            let mut f = format!("{:x}\r\n", data.len()).into_bytes();
            f.extend_from_slice(&data);
            f.extend_from_slice(b"\r\n");
            f
        } else {
            data
        };
        if sock.write_all(&framed).is_err() {
            break;
        }
        sent += framed.len();
        let mut buf = [0u8; 4096];
        if let Ok(n) = sock.read(&mut buf) {
            if n > 0 {
                answer.extend_from_slice(&buf[..n]);
                break;
            }
        }
    }
    sock.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 4096];
    while let Ok(n) = sock.read(&mut buf) {
        if n == 0 || answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.len() > 200 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    (String::from_utf8_lossy(&answer).into_owned(), sent)
}

#[tokio::test]
async fn an_upload_over_the_cap_is_refused_before_it_is_read() {
    let s = fixture(|c| c.max_upload_bytes = 1024 * 1024).await;
    let base = s.base.clone();
    // A declared length of 1 GB: answered from the head, with no body byte taken.
    let (answer, sent) = tokio::task::spawn_blocking({
        let base = base.clone();
        move || raw_upload(&base, "Content-Length: 1073741824\r\n", false, 1 << 30)
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("PAYLOAD_TOO_LARGE"), "{answer}");
    assert!(
        sent <= 2 * 1024 * 1024,
        "the client sent {sent} bytes before the answer"
    );
    // A chunked body of unknown length: refused once it passes the cap.
    let (answer, sent) = tokio::task::spawn_blocking(move || {
        raw_upload(&base, "Transfer-Encoding: chunked\r\n", true, 1 << 30)
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        sent < 8 * 1024 * 1024,
        "the server took {sent} bytes of a 1 GB body before refusing it"
    );
    eventually("the temp file of the refused upload is removed", || async {
        temps(&s.vault).is_empty()
    })
    .await;
}

fn token(token: &str, permissions: &[Permission]) -> StaticToken {
    StaticToken {
        token: token.into(),
        permissions: permissions.to_vec(),
        kind: TokenKind::Session,
        vault_id: None,
    }
}

#[tokio::test]
async fn presigned_links_work_without_a_bearer_and_refuse_tampering_expiry_and_reuse() {
    let s = fixture(|c| {
        c.auth_required = true;
        c.static_tokens = vec![
            token("reader-token-0123456789", &[]),
            token("writer-token-0123456789", &[Permission::NotesWrite]),
        ];
    })
    .await;
    let presign = |bearer: &'static str, body: Value| {
        s.client
            .post(s.url("/v1/attachments:presign"))
            .bearer_auth(bearer)
            .json(&body)
            .send()
    };
    // Without a bearer, no link and no file.
    let res = s.get("/v1/attachments/docs/a.pdf").await;
    assert_eq!(res.status(), 401);
    let res = presign("reader-token-0123456789", json!({"path": "docs/a.pdf"}))
        .await
        .unwrap();
    let link = res_json(res, 200, "presign").await;
    let url = link["url"].as_str().unwrap().to_string();
    assert!(url.starts_with(&s.base), "{url}");
    assert!(link["expires_at"].as_str().is_some());
    for _ in 0..2 {
        let res = reqwest::get(&url).await.unwrap();
        assert_eq!(res.status(), 200, "a GET link is reusable until it expires");
        assert_eq!(res.bytes().await.unwrap().as_ref(), PDF);
    }
    // Tampered: another path, another expiry, another signature.
    let tampered = [
        url.replace("docs/a.pdf", "diagram.png"),
        url.replace("expires=", "expires=9"),
        format!("{}0", url.trim_end_matches(|c: char| c.is_ascii_hexdigit())),
    ];
    for bad in tampered {
        let res = reqwest::get(&bad).await.unwrap();
        let body = res_json(res, 401, &bad).await;
        assert_envelope_for(&bad, &body, 401, "AUTH_INVALID");
    }
    // Expired: a link signed with the daemon's key whose expiry has passed.
    let past = chrono::Utc::now().timestamp() - 5;
    let sig =
        notevault::auth::presigned::signature(&s.svc.presign_key, "GET", "docs/a.pdf", past, "");
    let res = s
        .get(&format!(
            "/v1/attachments/docs/a.pdf?expires={past}&signature={sig}"
        ))
        .await;
    let body = res_json(res, 401, "expired").await;
    assert_envelope_for("expired", &body, 401, "AUTH_INVALID");
    assert!(body["message"].as_str().unwrap().contains("expired"));
    // A presigned link is not a way past the Host guard.
    let res = s
        .client
        .get(&url)
        .header("Host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);

    // PUT: needs notes.write; works once.
    let res = presign(
        "reader-token-0123456789",
        json!({"path": "up/new.png", "method": "PUT"}),
    )
    .await
    .unwrap();
    let body = res_json(res, 403, "reader PUT").await;
    assert_envelope_for("reader PUT", &body, 403, "PERMISSION_MISSING");
    let res = presign(
        "writer-token-0123456789",
        json!({"path": "up/new.png", "method": "PUT", "expires_in": 1}),
    )
    .await
    .unwrap();
    let link = res_json(res, 200, "presign PUT").await;
    let put_url = link["url"].as_str().unwrap().to_string();
    let res = reqwest::Client::new()
        .put(&put_url)
        .header("Content-Type", "image/png")
        .body(png(11))
        .send()
        .await
        .unwrap();
    let r = res_json(res, 201, "presigned PUT").await;
    assert_eq!(r["attachment"]["path"], "up/new.png");
    assert_eq!(std::fs::read(s.vault.join("up/new.png")).unwrap(), png(11));
    let res = reqwest::Client::new()
        .put(&put_url)
        .body(png(12))
        .send()
        .await
        .unwrap();
    let body = res_json(res, 401, "reused PUT").await;
    assert_envelope_for("reused PUT", &body, 401, "AUTH_INVALID");
    assert_eq!(std::fs::read(s.vault.join("up/new.png")).unwrap(), png(11));
}

#[tokio::test]
async fn an_external_copy_becomes_listable_and_a_removal_leaves_the_list() {
    let s = fixture(|_| {}).await;
    put_file(
        &s.vault,
        "projects/photo.jpg",
        b"\xff\xd8\xff\xe0\0\x10JFIF\0\x01\x01\0\0\x01\0\x01\0\0",
    );
    eventually("the copied image is listed", || async {
        let list = s.get_json("/v1/attachments", 200).await;
        list["attachments"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["path"] == "projects/photo.jpg" && a["content_type"] == "image/jpeg")
    })
    .await;
    std::fs::remove_file(s.vault.join("docs/a.pdf")).unwrap();
    eventually("the removed PDF leaves the list", || async {
        let list = s.get_json("/v1/attachments", 200).await;
        !list["attachments"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["path"] == "docs/a.pdf")
    })
    .await;
    common::wait_history(&s.svc).await;
    let tree = git(&s.state, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(tree.contains("projects/photo.jpg"), "{tree}");
    assert!(!tree.contains("docs/a.pdf"), "{tree}");
}

#[tokio::test]
async fn a_warm_start_keeps_the_facts_and_history_holds_the_first_scan() {
    let s = fixture(|_| {}).await;
    common::wait_history(&s.svc).await;
    let tree = git(&s.state, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(tree.contains("projects/alpha/diagram.png"), "{tree}");
    let seq = s.svc.committed_seq();
    let (dir, vault, state) = s.stop().await;
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    assert_eq!(
        s.svc.committed_seq(),
        seq,
        "nothing changed: nothing recorded"
    );
    assert_eq!(s.svc.attachments.read().len(), 3);
}

/// The status and bytes of an answer.
async fn answered(res: reqwest::Response) -> (u16, String) {
    (res.status().as_u16(), res.text().await.unwrap())
}

/// A delete (or rename) applied whose answer was lost is retried with its key, also
/// after a restart: the retry replays the receipt, although the name finds nothing now
/// (it answered `404` when the name was resolved before the key was looked up); the key
/// with another request is refused, and a new key finds nothing.
async fn a_retried_attachment_delete_or_rename_replays_its_receipt(mode: Mode) {
    use reqwest::Method;
    let s = fixture_as(mode, |_| {}).await;
    let delete = "/v1/attachments/a.pdf?agent_id=tidy";
    let first = answered(s.send(Method::DELETE, delete, Some("del-1"), None).await).await;
    assert_eq!(first.0, 200, "{}", first.1);
    let rename = "/v1/attachments/projects%2Falpha%2Fdiagram.png:rename";
    let body = json!({"name": "chart.png", "agent_id": "tidy"});
    let renamed = answered(s.write(Method::POST, rename, "ren-1", body.clone()).await).await;
    assert_eq!(renamed.0, 200, "{}", renamed.1);

    let s = s.restart(|_| {}).await;
    let again = answered(s.send(Method::DELETE, delete, Some("del-1"), None).await).await;
    assert_eq!(
        again, first,
        "the same delete with its key replays its receipt"
    );
    let again = answered(s.write(Method::POST, rename, "ren-1", body).await).await;
    assert_eq!(
        again, renamed,
        "the same rename with its key replays its receipt"
    );

    let other = json!({"name": "other.png", "agent_id": "tidy"});
    s.refuse_all([(
        "a new key finds nothing",
        Method::DELETE,
        delete,
        None,
        404,
        "ATTACHMENT_NOT_FOUND",
    )])
    .await;
    for (what, method, path, key, body) in [
        (
            "the delete's key, another agent",
            Method::DELETE,
            "/v1/attachments/a.pdf?agent_id=x",
            "del-1",
            None,
        ),
        (
            "the delete's key, another file",
            Method::DELETE,
            "/v1/attachments/diagram.png?agent_id=tidy",
            "del-1",
            None,
        ),
        (
            "the rename's key, another name",
            Method::POST,
            rename,
            "ren-1",
            Some(other),
        ),
    ] {
        let status = 422; // IDEMPOTENCY_KEY_REUSED's row of the reason table
        s.refused(
            what,
            method,
            path,
            Some(key),
            body,
            status,
            "IDEMPOTENCY_KEY_REUSED",
        )
        .await;
    }
    assert!(
        s.get("/v1/attachments/projects/alpha/chart.png")
            .await
            .status()
            == 200
    );
    assert!(
        s.get("/v1/attachments/diagram.png").await.status() == 200,
        "the other stays"
    );
}

async fn relocate(s: &TestServer, path: &str, key: &str, body: Value, status: u16) -> Value {
    let res = s.write(reqwest::Method::POST, path, key, body).await;
    res_json(res, status, path).await
}

/// A rename or move of an attachment goes through the pipeline: the file moves, history
/// has it at the new path, the embeds that named it are rewritten, and every bad request
/// is refused with nothing touched.
#[tokio::test]
async fn attachments_move_and_rename_with_their_embeds() {
    let s = TestServer::start(Some("vault-example"), |c| c.watch = false).await;
    let guide = s.vault.join("guides/reading-with-curl.md");
    assert!(std::fs::read_to_string(&guide)
        .unwrap()
        .contains("![[diagram.png]]"));
    let before = s.get("/v1/attachments/diagram.png").await;
    let etag = before.headers()["etag"].to_str().unwrap().to_string();

    let renamed = relocate(
        &s,
        "/v1/attachments/diagram.png:rename",
        "rename-diagram",
        json!({"name": "chart.png", "agent_id": "tidy"}),
        200,
    )
    .await;
    assert_eq!(
        renamed["attachment"]["path"], "attachments/chart.png",
        "{renamed}"
    );
    // The guide and the roadmap embed it.
    assert_eq!(renamed["links_updated"], 2, "{renamed}");
    assert!(!s.vault.join("attachments/diagram.png").exists());
    let text = std::fs::read_to_string(&guide).unwrap();
    assert!(
        text.contains("![[chart.png]]") && !text.contains("![[diagram.png]]"),
        "{text}"
    );
    let after = s.get("/v1/attachments/chart.png").await;
    assert_eq!(after.status(), 200);
    assert_eq!(after.headers()["etag"].to_str().unwrap(), etag);
    let tree = git(&s.state, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(tree.lines().any(|l| l == "attachments/chart.png"), "{tree}");
    assert!(
        !tree.lines().any(|l| l == "attachments/diagram.png"),
        "{tree}"
    );
    s.get_error("/v1/attachments/diagram.png", 404, "ATTACHMENT_NOT_FOUND")
        .await;

    // Into a new top-level folder: the short embed still names it alone.
    let moved = relocate(
        &s,
        "/v1/attachments/chart.png:move",
        "move-chart",
        json!({"folder": "media"}),
        200,
    )
    .await;
    assert_eq!(moved["attachment"]["path"], "media/chart.png", "{moved}");
    assert!(s.vault.join("media/chart.png").is_file());
    assert!(std::fs::read_to_string(&guide)
        .unwrap()
        .contains("![[chart.png]]"));

    let snapshot = common::snapshot(&s.vault);
    put_file(&s.vault, "media/taken.png", &png(7));
    s.get_json("/v1/attachments", 200).await;
    std::fs::remove_file(s.vault.join("media/taken.png")).unwrap();
    #[rustfmt::skip]
    let cases = [
        ("a note's name", "/v1/attachments/chart.png:rename", json!({"name": "chart.md"}), 400, "VALIDATION_FAILED"),
        ("a name with a slash", "/v1/attachments/chart.png:rename", json!({"name": "a/b.png"}), 400, "VALIDATION_FAILED"),
        ("an unknown field", "/v1/attachments/chart.png:rename", json!({"name": "x.png", "mode": 1}), 400, "VALIDATION_FAILED"),
        ("out of the vault", "/v1/attachments/chart.png:move", json!({"folder": "../outside"}), 400, "UNSAFE_PATH"),
        ("into the git folder", "/v1/attachments/chart.png:move", json!({"folder": ".git"}), 400, "UNSAFE_PATH"),
        ("too deep", "/v1/attachments/chart.png:move", json!({"folder": "new/deeper/still"}), 400, "VALIDATION_FAILED"),
        ("a missing attachment", "/v1/attachments/nothing.png:rename", json!({"name": "x.png"}), 404, "ATTACHMENT_NOT_FOUND"),
        ("other bytes", "/v1/attachments/chart.png:rename", json!({"name": "x.png", "sha256": "00".repeat(32)}), 404, "ATTACHMENT_NOT_FOUND"),
    ];
    s.refuse_all(cases.iter().map(|(what, path, body, status, reason)| {
        (
            *what,
            reqwest::Method::POST,
            *path,
            Some(body.clone()),
            *status,
            *reason,
        )
    }))
    .await;
    assert_eq!(common::snapshot(&s.vault), snapshot, "nothing was touched");
    // A name that is taken.
    put_file(&s.vault, "media/taken.png", &png(7));
    s.get_json("/v1/attachments?page_size=500", 200).await;
    s.refused(
        "a taken name",
        reqwest::Method::POST,
        "/v1/attachments/chart.png:rename",
        Some("rename-taken"),
        Some(json!({"name": "taken.png"})),
        409,
        "NAME_COLLISION",
    )
    .await;
}

/// Under `review_destructive` a move waits for a reviewer, who sees what it does.
#[tokio::test]
async fn an_attachment_move_waits_for_review_when_the_policy_says_so() {
    let s = TestServer::start(Some("vault-example"), |c| c.watch = false).await;
    let res = s
        .client
        .patch(s.url("/v1/vault/write-settings?update_mask=write_policy"))
        .json(&json!({"write_policy": "review_destructive"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let queued = relocate(
        &s,
        "/v1/attachments/diagram.png:rename",
        "rename-queued",
        json!({"name": "chart.png"}),
        202,
    )
    .await;
    let id = queued["pending_id"].as_str().unwrap().to_string();
    assert!(
        s.vault.join("attachments/diagram.png").is_file(),
        "not moved yet"
    );
    let pending = s.get_json(&format!("/v1/writes/{id}"), 200).await;
    let diff = pending["diff"].as_str().unwrap();
    assert!(
        diff.contains("move attachment attachments/diagram.png -> attachments/chart.png")
            && diff.contains("guides/reading-with-curl"),
        "{diff}"
    );
    let decided = s
        .call(
            reqwest::Method::POST,
            &format!("/v1/writes/{id}:approve"),
            None,
            None,
            200,
        )
        .await;
    assert_eq!(decided["status"], "applied", "{decided}");
    assert!(s.vault.join("attachments/chart.png").is_file());
    // A delete waits too, and answers its queued receipt (before typed receipts: a 500).
    let res = s
        .client
        .delete(s.url("/v1/attachments/chart.png"))
        .header("Idempotency-Key", "delete-queued")
        .send()
        .await
        .unwrap();
    let queued = res_json(res, 202, "a queued attachment delete").await;
    assert_eq!(queued["status"], "queued", "{queued}");
    assert!(queued["pending_id"].is_string(), "{queued}");
    assert!(
        s.vault.join("attachments/chart.png").is_file(),
        "not deleted yet"
    );
}

/// No attachment runs in the daemon's origin: every answer (a bearer's and a presigned
/// link's) carries a sandboxing CSP and `nosniff`, and only plain media is `inline`: an
/// SVG, HTML, XML or PDF file is a download, never a document of this origin.
#[tokio::test]
async fn attachments_are_sandboxed_and_only_plain_media_is_inline() {
    let s = fixture(|c| {
        c.auth_required = true;
        c.static_tokens = vec![token("reader-token-0123456789", &[])];
    })
    .await;
    let svg = b"<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>";
    let cases: [(&str, &[u8], &str); 6] = [
        ("projects/alpha/diagram.png", &png(2), "inline"),
        ("x/evil.svg", svg, "attachment"),
        ("x/page.html", b"<script>alert(1)</script>", "attachment"),
        ("x/data.xml", b"<?xml version=\"1.0\"?><a/>", "attachment"),
        ("docs/a.pdf", PDF, "attachment"),
        ("x/readme.txt", b"plain words\n", "inline"),
    ];
    for (path, bytes, _) in &cases {
        if path.starts_with("x/") {
            put_file(&s.vault, path, bytes);
        }
    }
    for (path, bytes, disposition) in cases {
        let presign = || async {
            s.client
                .post(s.url("/v1/attachments:presign"))
                .bearer_auth("reader-token-0123456789")
                .json(&json!({ "path": path }))
                .send()
                .await
                .unwrap()
        };
        eventually(&format!("{path} is served"), || async {
            presign().await.status() == 200
        })
        .await;
        let link: Value = presign().await.json().await.unwrap();
        let url = link["url"].as_str().unwrap().to_string();
        let direct = s
            .client
            .get(s.url(&format!("/v1/attachments/{path}")))
            .bearer_auth("reader-token-0123456789")
            .send()
            .await
            .unwrap();
        let presigned = reqwest::get(&url).await.unwrap();
        for (how, res) in [("bearer", direct), ("presigned", presigned)] {
            assert_eq!(res.status(), 200, "{path} {how}");
            let h = |name: &str| {
                res.headers()
                    .get(name)
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default()
            };
            let csp = h("content-security-policy");
            assert!(
                csp.starts_with("sandbox") && csp.contains("default-src 'none'"),
                "{path} {how}: {csp}"
            );
            assert_eq!(h("x-content-type-options"), "nosniff", "{path} {how}");
            assert!(
                h("content-disposition").starts_with(&format!("{disposition};")),
                "{path} {how}: {}",
                h("content-disposition")
            );
            assert_eq!(res.bytes().await.unwrap().as_ref(), bytes, "{path} {how}");
        }
    }
}
