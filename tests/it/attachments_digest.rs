//! An upload's `Content-Digest` (RFC 9530), in both modes: bytes that hash to it are
//! stored (hosted: a large upload straight under its content address, nothing staged
//! left), bytes that do not are refused with `VALIDATION_FAILED` naming the header and
//! nothing of them kept (no file, no temp file, no row, no object, no parts), and the
//! retry with the same key and the right bytes is applied.

use std::io::Write;

use base64::Engine;
use serde_json::Value;

use crate::attachments_blobs::{png, sha};
use crate::common;
use common::{assert_envelope_for, res_json, Mode, TestServer};

fn digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(bytes);
    format!(
        "sha-256=:{}:",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

async fn put(
    s: &TestServer,
    path: &str,
    key: &str,
    bytes: &[u8],
    digest: &str,
) -> reqwest::Response {
    s.client
        .put(s.url(&format!("/v1/attachments/{path}")))
        .header("Idempotency-Key", key)
        .header("Content-Type", "image/png")
        .header("Content-Digest", digest)
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap()
}

/// `POST /v1/attachments` with one file part carrying `digest` as its part header.
async fn post(
    s: &TestServer,
    name: &str,
    key: &str,
    bytes: &[u8],
    digest: &str,
) -> reqwest::Response {
    let boundary = "XdigestBoundaryX";
    let mut body = Vec::new();
    write!(
        body,
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: image/png\r\nContent-Digest: {digest}\r\n\r\n"
    )
    .unwrap();
    body.extend_from_slice(bytes);
    write!(body, "\r\n--{boundary}--\r\n").unwrap();
    s.client
        .post(s.url("/v1/attachments"))
        .header("Idempotency-Key", key)
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn refused(res: reqwest::Response, what: &str) -> Value {
    let body = res_json(res, 400, what).await;
    assert_envelope_for(what, &body, 400, "VALIDATION_FAILED");
    assert!(
        body.to_string().contains("Content-Digest"),
        "{what}: {body}"
    );
    body
}

/// What the store or the folder holds of an upload: objects and staged parts (hosted),
/// files and our temp files (local), sorted.
fn kept(s: &TestServer) -> Vec<String> {
    if s.mode == Mode::Hosted {
        let s3 = s.hosted().s3.as_ref().unwrap();
        let mut all = s3.objects();
        all.extend(s3.pending_parts());
        return all;
    }
    let mut all: Vec<String> = walkdir::WalkDir::new(&s.vault)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            e.path()
                .strip_prefix(&s.vault)
                .unwrap()
                .display()
                .to_string()
        })
        .filter(|p| !p.starts_with(".obsidian"))
        .collect();
    all.sort();
    all
}

crate::test_in_both_modes!(a_declared_digest_is_checked_and_a_mismatch_stores_nothing(
    flavor = "multi_thread",
    worker_threads = 2
));

async fn a_declared_digest_is_checked_and_a_mismatch_stores_nothing(mode: Mode) {
    let s = TestServer::start_as(mode, None, |_| {}).await;
    if mode == Mode::Hosted && s.hosted().s3.is_none() {
        return;
    }
    // Three parts in hosted mode (past the multipart threshold twice).
    let big = png(5, notevault::storage::blobs::MULTIPART_ABOVE * 2 + 4096);
    let other = png(6, 64);
    let before = kept(&s);

    // Declared as other bytes: refused whole, after the bytes came (the hash is known
    // only then), nothing kept.
    let body = refused(
        put(&s, "big.png", "dig-1", &big, &digest(&other)).await,
        "wrong digest",
    )
    .await;
    assert!(
        body["message"].as_str().unwrap().contains(&sha(&big)),
        "{body}"
    );
    // Malformed, or a hash of the wrong length: refused before the body is read (small
    // bodies, so the client is not cut off mid-send).
    refused(
        put(&s, "o.png", "dig-2", &other, "sha-256=:AAAA:").await,
        "short",
    )
    .await;
    refused(
        put(&s, "o.png", "dig-3", &other, "sha-256=abc").await,
        "not a byte sequence",
    )
    .await;
    refused(
        post(&s, "p.png", "dig-4", &other, &digest(&big)).await,
        "a part's digest",
    )
    .await;
    s.get_error("/v1/attachments/big.png", 404, "ATTACHMENT_NOT_FOUND")
        .await;
    // Hosted, an aborted multipart upload's parts go after the answer.
    common::eventually("nothing of the refused uploads is kept", || async {
        kept(&s) == before
    })
    .await;

    // The same key with the bytes it declares: applied.
    let done = res_json(
        put(&s, "big.png", "dig-1", &big, &digest(&big)).await,
        201,
        "right digest",
    )
    .await;
    assert_eq!(done["attachment"]["sha256"], sha(&big), "{done}");
    let res = s.get("/v1/attachments/big.png").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.bytes().await.unwrap().as_ref(), big.as_slice());
    let done = res_json(
        post(&s, "p.png", "dig-4", &other, &digest(&other)).await,
        201,
        "a part's right digest",
    )
    .await;
    assert_eq!(done["attachment"]["sha256"], sha(&other), "{done}");
    // Other algorithms alone are not checked (RFC 9530 lets a recipient skip them).
    res_json(
        put(&s, "q.png", "dig-5", &other, "sha-512=:AAAA:").await,
        201,
        "sha-512 only",
    )
    .await;

    let now = kept(&s);
    if mode == Mode::Hosted {
        // Straight under its content address: no staged object, no parts left.
        let vault = &s.hosted().vault_id;
        let blob = format!("tests/vaults/{vault}/blobs/{}", sha(&big));
        assert!(now.contains(&blob), "{now:?}");
        assert!(
            !now.iter()
                .any(|o| o.contains("/uploads/") || o.starts_with(".upload_id-")),
            "{now:?}"
        );
    } else {
        let mut want = before.clone();
        want.extend(["big.png".to_string(), "p.png".into(), "q.png".into()]);
        want.sort();
        assert_eq!(now, want);
        assert_eq!(std::fs::read(s.vault.join("big.png")).unwrap(), big);
    }
}

/// Hosted, a declared digest sends a large upload straight to its blob: while the body
/// is still arriving, the upload's marker names `blobs/<sha256>` as its key (not a staged
/// object), and once it is applied nothing staged is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_large_upload_goes_straight_to_its_blob() {
    let Some(s) = crate::attachments_blobs::hosted(|_| {}).await else {
        return;
    };
    let vault = s.hosted().vault_id.clone();
    let big = png(8, notevault::storage::blobs::MULTIPART_ABOVE * 2);
    let half = notevault::storage::blobs::MULTIPART_ABOVE + 1024 * 1024;
    let addr = s.base.strip_prefix("http://").unwrap().to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        conn,
        "PUT /v1/attachments/streamed.png HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nIdempotency-Key: streamed-1\r\nContent-Type: image/png\r\nContent-Digest: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        common::hosted::TOKEN,
        digest(&big),
        big.len()
    )
    .unwrap();
    conn.write_all(&big[..half]).unwrap();
    let uploads = s.hosted().s3.as_ref().unwrap().bucket();
    let uploads = uploads.join(format!("tests/vaults/{vault}/uploads"));
    let marker = || -> Option<String> {
        let entry = std::fs::read_dir(&uploads)
            .ok()?
            .flatten()
            .find(|e| e.file_name().to_string_lossy().ends_with(".multipart"))?;
        std::fs::read_to_string(entry.path()).ok()
    };
    common::eventually("the upload's marker is written", || async {
        marker().is_some()
    })
    .await;
    let text = marker().unwrap();
    let blob = format!("tests/vaults/{vault}/blobs/{}", sha(&big));
    assert_eq!(text.lines().nth(1), Some(blob.as_str()), "{text}");

    conn.write_all(&big[half..]).unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut conn, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let objects = kept(&s);
    assert!(objects.contains(&blob), "{objects:?}");
    assert!(
        !objects
            .iter()
            .any(|o| o.contains("/uploads/") || o.starts_with(".upload_id-")),
        "{objects:?}"
    );
}
