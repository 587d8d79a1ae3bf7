//! Hosted attachments on a real S3 server (`s3s-fs`, started by the harness): bytes
//! content-addressed under the vault's prefix, rename/move/delete as row changes in the
//! op log, an upload cut off halfway leaving nothing, and each failure of the store its
//! envelope (not configured, stopped, wrong credentials, no bucket) while notes work.

use std::io::{Read, Write};

use crate::common;
use common::{assert_envelope_for, res_json, Mode, TestServer};
use serde_json::{json, Value};

const PNG: &[u8] =
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

pub(crate) fn png(tag: u8, len: usize) -> Vec<u8> {
    let mut v = PNG.to_vec();
    v.extend(std::iter::repeat_n(tag, len));
    v
}

pub(crate) fn sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(crate) async fn put(s: &TestServer, path: &str, key: &str, bytes: &[u8]) -> reqwest::Response {
    s.client
        .put(s.url(&format!("/v1/attachments/{path}")))
        .header("Idempotency-Key", key)
        .header("Content-Type", "image/png")
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap()
}

pub(crate) async fn hosted(
    tweak: impl FnOnce(&mut notevault::config::Config),
) -> Option<TestServer> {
    if !common::mode::hosted_available() {
        return None;
    }
    let s = TestServer::start_as(Mode::Hosted, None, tweak).await;
    // s3s-fs missing and opted out: nothing to test against.
    s.hosted().s3.is_some().then_some(s)
}

/// The op log's kinds and paths after `after`, as the sync plane serves them.
async fn ops(s: &TestServer) -> Vec<(String, String)> {
    let feed = s.get_json("/v1/sync/ops?after_seq=0", 200).await;
    feed["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap_or_default().to_string(),
                o["path"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosted_uploads_live_in_the_store_and_relocations_are_rows() {
    let Some(s) = hosted(|_| {}).await else {
        return;
    };
    let vault = s.hosted().vault_id.clone();
    // Past the multipart threshold: streamed in parts.
    let big = png(7, notevault::storage::blobs::MULTIPART_ABOVE + 1024 * 1024);
    let receipt = res_json(put(&s, "big.png", "up-big", &big).await, 201, "big").await;
    assert_eq!(receipt["attachment"]["sha256"], sha(&big), "{receipt}");
    let small = png(1, 64);
    let receipt = res_json(put(&s, "pic.png", "up-1", &small).await, 201, "small").await;
    assert_eq!(receipt["attachment"]["size"], small.len());
    // The same key again: the same receipt.
    let again = res_json(put(&s, "pic.png", "up-1", &small).await, 201, "replay").await;
    assert_eq!(again["committed_seq"], receipt["committed_seq"]);

    // Content-addressed under the vault's prefix; no staged upload left.
    let objects = s.hosted().s3.as_ref().unwrap().objects();
    let want = |b: &[u8]| format!("tests/vaults/{vault}/blobs/{}", sha(b));
    assert!(objects.contains(&want(&big)), "{objects:?}");
    assert!(objects.contains(&want(&small)), "{objects:?}");
    assert!(
        !objects.iter().any(|o| o.contains("/uploads/")),
        "{objects:?}"
    );

    // Read back whole and by range, with its ETag.
    let res = s.get("/v1/attachments/big.png").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["etag"], format!("\"{}\"", sha(&big)).as_str());
    assert_eq!(res.bytes().await.unwrap().as_ref(), big.as_slice());
    let res = s
        .client
        .get(s.url("/v1/attachments/big.png"))
        .header("Range", "bytes=100-199")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 206);
    assert_eq!(res.bytes().await.unwrap().as_ref(), &big[100..200]);

    // Rename, move, delete: rows and ops, the bytes stay where they are.
    let renamed = s
        .write(
            reqwest::Method::POST,
            "/v1/attachments/pic.png:rename",
            "ren-1",
            json!({"name": "photo.png"}),
        )
        .await;
    let renamed = res_json(renamed, 200, "rename").await;
    assert_eq!(renamed["attachment"]["path"], "photo.png", "{renamed}");
    let moved = s
        .write(
            reqwest::Method::POST,
            "/v1/attachments/photo.png:move",
            "mv-1",
            json!({"folder": "assets"}),
        )
        .await;
    let moved = res_json(moved, 200, "move").await;
    assert_eq!(moved["attachment"]["path"], "assets/photo.png", "{moved}");
    let res = s.get("/v1/attachments/assets/photo.png").await;
    assert_eq!(res.bytes().await.unwrap().as_ref(), small.as_slice());
    let res = s
        .client
        .delete(s.url("/v1/attachments/assets%2Fphoto.png"))
        .header("Idempotency-Key", "del-1")
        .send()
        .await
        .unwrap();
    res_json(res, 200, "delete").await;
    s.get_error("/v1/attachments/photo.png", 404, "ATTACHMENT_NOT_FOUND")
        .await;
    let log = ops(&s).await;
    for op in [
        ("attachment_upsert", "pic.png"),
        ("attachment_upsert", "photo.png"),
        ("attachment_delete", "pic.png"),
        ("attachment_upsert", "assets/photo.png"),
        ("attachment_delete", "assets/photo.png"),
    ] {
        assert!(
            log.contains(&(op.0.to_string(), op.1.to_string())),
            "{op:?} in {log:?}"
        );
    }
    // History keeps the bytes: the blob is still there.
    let objects = s.hosted().s3.as_ref().unwrap().objects();
    assert!(objects.contains(&want(&small)), "{objects:?}");

    // A new instance (empty cache) lists what the database holds.
    let s = s.restart(|_| {}).await;
    let list = s.get_json("/v1/attachments", 200).await;
    let paths: Vec<&str> = list["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["big.png"], "{list}");
}

/// An upload whose body stops halfway, past the multipart threshold (a part is up
/// already): no row, no visible object, its parts aborted; its retry with the same key
/// is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_cut_off_halfway_leaves_nothing_and_its_retry_succeeds() {
    let Some(s) = hosted(|_| {}).await else {
        return;
    };
    let bytes = png(3, notevault::storage::blobs::MULTIPART_ABOVE * 3 / 2);
    let addr = s.base.strip_prefix("http://").unwrap().to_string();
    {
        let mut conn = std::net::TcpStream::connect(&addr).unwrap();
        write!(
            conn,
            "PUT /v1/attachments/cut.png HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nIdempotency-Key: cut-1\r\nContent-Type: image/png\r\nContent-Length: {}\r\n\r\n",
            common::hosted::TOKEN,
            bytes.len()
        )
        .unwrap();
        conn.write_all(&bytes[..bytes.len() * 5 / 6]).unwrap();
        conn.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        conn.shutdown(std::net::Shutdown::Both).unwrap();
        let mut rest = Vec::new();
        let _ = conn.read_to_end(&mut rest);
    }
    // Aborted, then its marker removed (both after the request ended).
    common::eventually("the cut-off upload's parts are aborted", || async {
        let s3 = s.hosted().s3.as_ref().unwrap();
        s3.pending_parts().is_empty() && !s3.objects().iter().any(|o| o.contains("/uploads/"))
    })
    .await;
    let list = s.get_json("/v1/attachments", 200).await;
    assert_eq!(list["attachments"], json!([]), "{list}");
    let objects = s.hosted().s3.as_ref().unwrap().objects();
    assert!(
        !objects
            .iter()
            .any(|o| o.contains("/blobs/") || o.contains("/uploads/")),
        "{objects:?}"
    );
    let done = res_json(put(&s, "cut.png", "cut-1", &bytes).await, 201, "retry").await;
    assert_eq!(done["attachment"]["sha256"], sha(&bytes), "{done}");
}

async fn refused(s: &TestServer, key: &str, hint: &str, retry: bool) -> Value {
    let res = put(s, "x.png", key, &png(9, 16)).await;
    let after = res.headers().get("retry-after").cloned();
    let body = res_json(res, 503, key).await;
    assert_envelope_for(key, &body, 503, "BLOB_STORE_UNAVAILABLE");
    assert!(body.to_string().contains(hint), "{hint} in {body}");
    assert_eq!(after.is_some(), retry, "Retry-After of {key}: {after:?}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_failure_of_the_store_answers_its_envelope_and_notes_keep_working() {
    // The process's recorder (as `serve` installs it), for the scrape below.
    notevault::telemetry::install();
    // Not configured: as before blob stores.
    let Some(s) = hosted(|c| c.blob_store = None).await else {
        return;
    };
    refused(&s, "none", "not configured", false).await;
    s.get_error("/v1/attachments/x.png", 503, "BLOB_STORE_UNAVAILABLE")
        .await;
    drop(s);

    let Some(mut s) = hosted(|_| {}).await else {
        return;
    };
    let kept = png(4, 32);
    res_json(put(&s, "kept.png", "kept", &kept).await, 201, "kept").await;
    // Stopped: a quick 503 with Retry-After; notes answer meanwhile.
    s.s3_mut().stop();
    let started = std::time::Instant::now();
    refused(&s, "stopped", "cannot be reached", true).await;
    let res = s.get("/v1/attachments/kept.png").await;
    assert_eq!(res.status(), 503);
    assert!(res.headers().contains_key("retry-after"));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    let note = s
        .write(
            reqwest::Method::POST,
            "/v1/notes",
            "note-1",
            json!({"title": "Still here", "content": "# Still here\n"}),
        )
        .await;
    assert!(note.status().is_success(), "{}", note.status());
    // Not ready while the store is away, the part named; counted for a scrape.
    let ready = s.client.get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let ready: Value = ready.json().await.unwrap();
    assert!(
        ready["checks"]["blob_store"]
            .as_str()
            .unwrap()
            .contains("cannot be reached"),
        "{ready}"
    );
    assert_eq!(ready["checks"]["database"], "ok", "{ready}");
    let scrape = notevault::telemetry::render();
    assert!(
        scrape.contains("notevault_blob_store_errors_total{kind=\"unreachable\"}"),
        "{scrape}"
    );
    // Back: the same bytes are served again, and ready.
    s.s3_mut().resume();
    let ready = s.client.get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let res = s.get("/v1/attachments/kept.png").await;
    assert_eq!(res.bytes().await.unwrap().as_ref(), kept.as_slice());
    drop(s);

    // Wrong credentials.
    let s3 = common::s3::S3Server::start().unwrap();
    let Some(s) = hosted(|c| s3.configure_with(c, "s3://notevault-test/p", "wrong")).await else {
        return;
    };
    refused(&s, "creds", "AWS_SECRET_ACCESS_KEY", false).await;
    drop(s);
    // A bucket that does not exist.
    let Some(s) =
        hosted(|c| s3.configure_with(c, "s3://no-such-bucket/p", common::s3::SECRET_KEY)).await
    else {
        return;
    };
    refused(&s, "bucket", "does not exist", false).await;
}

/// What a crashed instance leaves of a large upload: a multipart upload with a part
/// sent, its marker beside it (as `storage::blobs` writes them), made with the same
/// client crate against the same server. `direct`: the upload's key is the blob `direct`
/// names (a declared digest's), the marker's second line.
async fn leave_a_multipart_upload(s: &TestServer, vault: &str, direct: Option<&str>) {
    use object_store::multipart::MultipartStore;
    use object_store::ObjectStore;
    let s3 = s.hosted().s3.as_ref().unwrap();
    let store = object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(common::s3::BUCKET)
        .with_access_key_id(common::s3::ACCESS_KEY)
        .with_secret_access_key(common::s3::SECRET_KEY)
        .with_region("us-east-1")
        .with_endpoint(s3.endpoint())
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .build()
        .unwrap();
    let staging = object_store::path::Path::from(format!(
        "tests/vaults/{vault}/uploads/{}",
        uuid::Uuid::now_v7()
    ));
    let key = match direct {
        Some(sha) => object_store::path::Path::from(format!("tests/vaults/{vault}/blobs/{sha}")),
        None => staging.clone(),
    };
    let id = store.create_multipart(&key).await.unwrap();
    store
        .put_part(&key, &id, 0, vec![7u8; 64 * 1024].into())
        .await
        .unwrap();
    let marker = object_store::path::Path::from(format!("{staging}.multipart"));
    let named = match direct {
        Some(_) => format!("{id}\n{key}"),
        None => id.clone(),
    };
    store.put(&marker, named.into()).await.unwrap();
}

/// Bytes no row names (a stray blob, a deleted vault's), a crashed upload's parts and
/// marker: collected once past `blob_grace_seconds`. A live attachment's bytes and a
/// deleted one's (history keeps them) stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_collector_takes_unreferenced_blobs_and_cut_off_uploads_only() {
    let grace = 3;
    let Some(s) = hosted(|c| c.blob_grace_seconds = grace).await else {
        return;
    };
    let (live, gone) = (png(1, 1000), png(2, 1000));
    res_json(put(&s, "live.png", "k-live", &live).await, 201, "live").await;
    res_json(put(&s, "gone.png", "k-gone", &gone).await, 201, "gone").await;
    let deleted = s
        .client
        .delete(s.url("/v1/attachments/gone.png"))
        .header("Idempotency-Key", "k-del")
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let vault = s.hosted().vault_id.clone();
    let s3 = s.hosted().s3.as_ref().unwrap();
    let root = s3.bucket().join("tests/vaults");
    let stray = sha(b"stray");
    let orphan_vault = uuid::Uuid::now_v7().to_string();
    for (v, name) in [(&vault, &stray), (&orphan_vault, &stray)] {
        let dir = root.join(v).join("blobs");
        std::fs::create_dir_all(&dir).unwrap();
        #[allow(clippy::disallowed_methods)] // the S3 server's folder, not a vault
        std::fs::write(dir.join(name), b"stray").unwrap();
    }
    leave_a_multipart_upload(&s, &vault, None).await;
    let crashed = sha(b"crashed");
    leave_a_multipart_upload(&s, &vault, Some(&crashed)).await;
    assert_eq!(s3.pending_parts().len(), 2, "the crashes' parts are there");

    let limit = std::time::Duration::from_secs(grace * 10);
    common::eventually_within(limit, "the unreferenced objects are collected", || async {
        let objects = s.hosted().s3.as_ref().unwrap().objects();
        let parts = s.hosted().s3.as_ref().unwrap().pending_parts();
        parts.is_empty()
            && !objects
                .iter()
                .any(|o| o.contains(&stray) || o.contains(&crashed) || o.contains("/uploads/"))
    })
    .await;
    let objects = s3.objects();
    for kept in [sha(&live), sha(&gone)] {
        let at = format!("tests/vaults/{vault}/blobs/{kept}");
        assert!(objects.contains(&at), "{at} kept: {objects:?}");
    }
    let read = s
        .client
        .get(s.url("/v1/attachments/live.png"))
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    assert_eq!(read.bytes().await.unwrap().as_ref(), live.as_slice());
}

/// `POST /v1/export` of a hosted vault: its notes from the database and its attachments
/// from the blob store, byte for byte (the answer a redirect to the archive in the store,
/// which the client follows); with the store stopped, no archive passed off as whole (503
/// `BLOB_STORE_UNAVAILABLE`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_export_holds_the_attachments_from_the_store() {
    let Some(mut s) = hosted(|_| {}).await else {
        return;
    };
    let bytes = png(4, 300_000);
    res_json(
        put(&s, "pics/one.png", "k-one", &bytes).await,
        201,
        "upload",
    )
    .await;
    let note = s
        .client
        .post(s.url("/v1/notes"))
        .header("Idempotency-Key", "k-note")
        .json(&json!({"slug": "hello", "content": "# Hello\n"}))
        .send()
        .await
        .unwrap();
    res_json(note, 201, "note").await;
    let res = s
        .client
        .post(s.url("/v1/export"))
        .json(&json!({"history": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let unpacked = crate::console::unpack(&res.bytes().await.unwrap());
    let vault = unpacked.path().join("vault");
    assert_eq!(std::fs::read(vault.join("pics/one.png")).unwrap(), bytes);
    assert_eq!(
        std::fs::read_to_string(vault.join("hello.md")).unwrap(),
        "# Hello\n"
    );
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(unpacked.path().join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["attachments"], 1, "{manifest}");
    assert_eq!(manifest["skipped"], json!([]), "{manifest}");
    assert!(unpacked.path().join("history.bundle").is_file());

    s.s3_mut().stop();
    let res = s.client.post(s.url("/v1/export")).send().await.unwrap();
    let body = res_json(res, 503, "export, store stopped").await;
    assert_envelope_for(
        "export, store stopped",
        &body,
        503,
        "BLOB_STORE_UNAVAILABLE",
    );
    s.s3_mut().resume();
}
