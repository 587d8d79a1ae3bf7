//! Local attachments at disk speed (issue 48, item 6): a delete moves the file to
//! `.trash/` like a note's, a large upload answers before its history commit and history
//! catches up, a large download is read in chunks with `Range` still exact.

#![allow(
    clippy::disallowed_methods,
    reason = "the test plays the editor: it writes and removes vault files"
)]

use crate::common;
use common::{res_json, TestServer};

fn put_file(vault: &std::path::Path, rel: &str, bytes: &[u8]) {
    let path = vault.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// `len` bytes that sniff as a PNG and do not compress.
fn big_png(len: usize, seed: u64) -> Vec<u8> {
    let mut out =
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89".to_vec();
    let mut x = seed | 1;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The bytes `rev:path` names in history.
fn history_bytes(state: &std::path::Path, spec: &str) -> Vec<u8> {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(state.join("history.git"))
        .args(["cat-file", "-p", spec])
        .output()
        .unwrap();
    assert!(out.status.success(), "{spec}: {out:?}");
    out.stdout
}

async fn delete(s: &TestServer, path: &str, key: &str) {
    let res = s
        .client
        .delete(s.url(&format!("/v1/attachments/{}", path.replace('/', "%2F"))))
        .header("Idempotency-Key", key)
        .send()
        .await
        .unwrap();
    let receipt = res_json(res, 200, "delete").await;
    assert_eq!(receipt["attachment"]["path"], path);
}

async fn listed(s: &TestServer, path: &str) -> bool {
    let list = s.get_json("/v1/attachments?page_size=500", 200).await;
    list["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["path"] == path)
}

#[tokio::test]
async fn a_deleted_attachment_goes_to_trash_with_its_bytes_and_history_keeps_them() {
    let (dir, vault, state) = common::temp_vault(None);
    let first = big_png(300, 1);
    put_file(&vault, "media/chart.png", &first);
    put_file(&vault, "index.md", b"# Index\n");
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    assert!(listed(&s, "media/chart.png").await);

    delete(&s, "media/chart.png", "del-chart-1").await;
    assert!(!s.vault.join("media/chart.png").exists());
    assert_eq!(
        std::fs::read(s.vault.join(".trash/media/chart.png")).unwrap(),
        first
    );
    assert!(!listed(&s, "media/chart.png").await);
    s.get_error("/v1/attachments/chart.png", 404, "ATTACHMENT_NOT_FOUND")
        .await;
    // History keeps the bytes: the commit before the delete has them.
    common::wait_history(&s.svc).await;
    let log = common::git(&s.state, &["log", "-1", "--format=%B"]);
    assert!(log.contains("delete media/chart.png"), "{log}");
    assert_eq!(history_bytes(&s.state, "HEAD~1:media/chart.png"), first);

    // A second file of that name trashed later sits beside the first.
    let second = big_png(400, 2);
    put_file(&s.vault, "media/chart.png", &second);
    common::eventually("the new chart is listed", || async {
        listed(&s, "media/chart.png").await
    })
    .await;
    delete(&s, "media/chart.png", "del-chart-2").await;
    assert_eq!(
        std::fs::read(s.vault.join(".trash/media/chart 2.png")).unwrap(),
        second
    );
    assert_eq!(
        std::fs::read(s.vault.join(".trash/media/chart.png")).unwrap(),
        first
    );
    assert!(!listed(&s, "media/chart.png").await);
}

#[tokio::test]
async fn a_large_upload_lands_in_history_behind_its_receipt_and_downloads_in_chunks() {
    let (dir, vault, state) = common::temp_vault(None);
    put_file(&vault, "index.md", b"# Index\n");
    let s = TestServer::start_in(dir, vault, state, |_| {}).await;
    // Over the size from which history is not waited for, and over two read chunks.
    let bytes = big_png(5 * 1024 * 1024 + 123, 7);
    assert!(bytes.len() as u64 >= notevault::writes::attachments::HISTORY_ON_PATH_BELOW);
    let boundary = "XlargeUploadBoundaryX";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"folder\"\r\n\r\nbig\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"scan.png\"\r\nContent-Type: image/png\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let res = s
        .client
        .post(s.url("/v1/attachments"))
        .header("Idempotency-Key", "big-1")
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    let receipt = res_json(res, 201, "large upload").await;
    assert_eq!(receipt["attachment"]["size"], bytes.len() as u64);
    {
        use sha2::Digest;
        let want: String = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(receipt["attachment"]["sha256"], want);
    }
    assert_eq!(std::fs::read(s.vault.join("big/scan.png")).unwrap(), bytes);
    common::wait_history(&s.svc).await;
    assert_eq!(history_bytes(&s.state, "HEAD:big/scan.png"), bytes);

    // The whole file, then a range across the first read's end, then a suffix.
    let res = s
        .client
        .get(s.url("/v1/attachments/big%2Fscan.png"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(&res.bytes().await.unwrap()[..], &bytes[..]);
    let (from, to) = (2 * 1024 * 1024 - 10, 4 * 1024 * 1024 + 10);
    let res = s
        .client
        .get(s.url("/v1/attachments/big%2Fscan.png"))
        .header("Range", format!("bytes={from}-{to}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 206);
    assert_eq!(
        res.headers()["content-range"],
        format!("bytes {from}-{to}/{}", bytes.len()).as_str()
    );
    assert_eq!(&res.bytes().await.unwrap()[..], &bytes[from..=to]);
    let res = s
        .client
        .get(s.url("/v1/attachments/big%2Fscan.png"))
        .header("Range", "bytes=-100")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 206);
    assert_eq!(&res.bytes().await.unwrap()[..], &bytes[bytes.len() - 100..]);

    // Deleting it waits for nothing more: its bytes are in history and in the trash.
    delete(&s, "big/scan.png", "del-big").await;
    assert_eq!(
        std::fs::read(s.vault.join(".trash/big/scan.png")).unwrap(),
        bytes
    );
}
