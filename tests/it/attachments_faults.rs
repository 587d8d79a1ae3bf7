//! Hosted attachments when the store goes away in the middle of a transfer, and an
//! attachment written on one instance seen by another: the faults of issue 48 that
//! `attachments_blobs` does not cover (there, the store is away before a request starts).

use std::io::{Read, Write};
use std::time::Duration;

use crate::attachments_blobs::{hosted, png, put, sha};
use crate::common;
use common::{assert_envelope_for, res_json};
use serde_json::{json, Value};

/// An HTTP/1.1 answer read off a raw connection: status, headers (lower-cased names),
/// body.
fn parse_answer(raw: &[u8], read: std::io::Result<()>) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer head in {raw:?} ({read:?})"));
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, raw[end + 4..].to_vec())
}

/// A large upload whose store stops once its first part is up: the client that keeps
/// sending gets 503 `BLOB_STORE_UNAVAILABLE` with `Retry-After`; no row and, once the store
/// is back, no part, marker or blob is left; the retry with the same key is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_stopped_mid_upload_answers_its_envelope_and_leaves_nothing() {
    let Some(mut s) = hosted(|_| {}).await else {
        return;
    };
    let bytes = png(5, notevault::storage::blobs::MULTIPART_ABOVE * 3);
    let addr = s.base.strip_prefix("http://").unwrap().to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        conn,
        "PUT /v1/attachments/mid.png HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nIdempotency-Key: mid-1\r\nContent-Type: image/png\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        common::hosted::TOKEN,
        bytes.len()
    )
    .unwrap();
    // Past the first part: the multipart upload is under way in the store.
    let first = notevault::storage::blobs::MULTIPART_ABOVE * 3 / 2;
    conn.write_all(&bytes[..first]).unwrap();
    conn.flush().unwrap();
    common::eventually("a part of the upload is in the store", || async {
        !s.hosted().s3.as_ref().unwrap().pending_parts().is_empty()
    })
    .await;
    s.s3_mut().stop();
    // The rest, as a client that does not know: the instance may answer before it is
    // all read, so a refused write is the instance's answer, not a failure here.
    let reader = std::thread::spawn(move || {
        let mut writer = conn.try_clone().unwrap();
        let rest = bytes[first..].to_vec();
        let sender = std::thread::spawn(move || {
            let _ = writer.write_all(&rest);
        });
        let mut answer = Vec::new();
        let read = conn.read_to_end(&mut answer);
        let _ = sender.join();
        (read.map(|_| ()), answer, bytes)
    });
    let (read, answer, bytes) = tokio::task::spawn_blocking(move || reader.join().unwrap())
        .await
        .unwrap();
    // The answer comes before the body is all sent, and the close after it may reset the
    // connection: what counts is that the whole answer arrived first.
    let (status, headers, body) = parse_answer(&answer, read);
    let body: Value = serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&body));
    });
    assert_eq!(status, 503, "{body}");
    assert_envelope_for("mid-upload", &body, 503, "BLOB_STORE_UNAVAILABLE");
    assert!(
        headers.iter().any(|(k, _)| k == "retry-after"),
        "{headers:?}"
    );
    // Notes keep working while the store is away.
    let note = s
        .write(
            reqwest::Method::POST,
            "/v1/notes",
            "note-mid",
            json!({"title": "Meanwhile", "content": "# Meanwhile\n"}),
        )
        .await;
    assert!(note.status().is_success(), "{}", note.status());
    s.s3_mut().resume();
    let list = s.get_json("/v1/attachments", 200).await;
    assert_eq!(list["attachments"], json!([]), "{list}");
    // No blob of those bytes. The abort could not reach the stopped store: its part and
    // marker stay, out of sight, until the collector takes them (tested in
    // `attachments_blobs`).
    let objects = s.hosted().s3.as_ref().unwrap().objects();
    assert!(
        objects.iter().all(|o| o.contains("/uploads/")),
        "{objects:?}"
    );
    let done = res_json(put(&s, "mid.png", "mid-1", &bytes).await, 201, "retry").await;
    assert_eq!(done["attachment"]["sha256"], sha(&bytes), "{done}");
    let res = s.get("/v1/attachments/mid.png").await;
    assert_eq!(res.status(), 200);
    assert_eq!(sha(&res.bytes().await.unwrap()), sha(&bytes));
}

/// A download whose store stops after its first bytes: the client sees a transfer cut
/// short (never a whole-looking answer of fewer bytes), a new read meanwhile is 503 with
/// `Retry-After`, and once the store is back the rest is read with `Range`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_stopped_mid_download_cuts_the_transfer_and_a_range_resumes_it() {
    let Some(mut s) = hosted(|_| {}).await else {
        return;
    };
    let bytes = png(6, 24 * 1024 * 1024);
    res_json(put(&s, "down.png", "down-1", &bytes).await, 201, "upload").await;
    let mut res = s.get("/v1/attachments/down.png").await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-length"],
        bytes.len().to_string().as_str()
    );
    let mut got = Vec::new();
    while got.len() < 64 * 1024 {
        got.extend_from_slice(&res.chunk().await.unwrap().expect("more bytes"));
    }
    s.s3_mut().stop();
    let cut = loop {
        match res.chunk().await {
            Ok(Some(chunk)) => got.extend_from_slice(&chunk),
            Ok(None) => break false,
            Err(_) => break true,
        }
    };
    assert!(cut, "the body ended cleanly after {} bytes", got.len());
    assert!(got.len() < bytes.len(), "{} bytes", got.len());
    assert_eq!(
        got.as_slice(),
        &bytes[..got.len()],
        "the bytes sent were right"
    );
    let again = s.get("/v1/attachments/down.png").await;
    assert_eq!(again.status(), 503);
    assert!(again.headers().contains_key("retry-after"));
    let body: Value = again.json().await.unwrap();
    assert_envelope_for("read while away", &body, 503, "BLOB_STORE_UNAVAILABLE");
    s.s3_mut().resume();
    let rest = s
        .client
        .get(s.url("/v1/attachments/down.png"))
        .header("Range", format!("bytes={}-", got.len()))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 206);
    got.extend_from_slice(&rest.bytes().await.unwrap());
    assert_eq!(sha(&got), sha(&bytes), "the resumed read is the attachment");
}

/// Two instances on one database and store: what one uploads, renames and deletes, the
/// other lists and reads (its attachment rows follow the op log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instance_sees_uploads_renames_and_deletes() {
    let Some(hosted) = common::hosted::Hosted::new() else {
        return;
    };
    let Some(s3) = common::s3::S3Server::start() else {
        return;
    };
    let endpoint = s3.endpoint();
    let env = [
        ("NOTEVAULT_BLOB_STORE", "s3://notevault-test/two"),
        ("AWS_ACCESS_KEY_ID", common::s3::ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", common::s3::SECRET_KEY),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
    ];
    let a = hosted.instance_with(&env);
    let b = hosted.instance_with(&env);
    // B has read the (empty) list before A writes: it must catch up, not just load.
    assert_eq!(
        b.get("/v1/attachments", 200).await["attachments"],
        json!([])
    );
    let bytes = png(8, 4096);
    let client = reqwest::Client::new();
    let up = client
        .put(a.url("/v1/attachments/shared.png"))
        .bearer_auth(common::hosted::TOKEN)
        .header("Idempotency-Key", "two-1")
        .header("Content-Type", "image/png")
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    let up = res_json(up, 201, "upload on A").await;
    let seq = up["committed_seq"].as_u64().unwrap();
    let paths = |list: &Value| -> Vec<String> {
        list["attachments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["path"].as_str().unwrap().to_string())
            .collect()
    };
    common::eventually("B lists A's upload", || async {
        paths(&b.get("/v1/attachments", 200).await) == ["shared.png"]
    })
    .await;
    let read = client
        .get(b.url("/v1/attachments/shared.png"))
        .bearer_auth(common::hosted::TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    assert_eq!(read.bytes().await.unwrap().as_ref(), bytes.as_slice());

    let renamed = a
        .call(
            reqwest::Method::POST,
            "/v1/attachments/shared.png:rename",
            Some("two-2"),
            Some(json!({"name": "moved.png"})),
            200,
        )
        .await;
    assert!(
        renamed["committed_seq"].as_u64().unwrap() > seq,
        "{renamed}"
    );
    common::eventually("B follows the rename", || async {
        paths(&b.get("/v1/attachments", 200).await) == ["moved.png"]
    })
    .await;
    a.call(
        reqwest::Method::DELETE,
        "/v1/attachments/moved.png",
        Some("two-3"),
        None,
        200,
    )
    .await;
    common::eventually("B follows the delete", || async {
        b.get("/v1/attachments", 200).await["attachments"] == json!([])
    })
    .await;
    let gone = b.get("/v1/attachments/moved.png", 404).await;
    assert_envelope_for("read on B", &gone, 404, "ATTACHMENT_NOT_FOUND");
    drop(s3);
}
