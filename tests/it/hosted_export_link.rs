//! `POST /v1/export` of a hosted vault with a blob store: the archive is written whole to
//! the store (`exports/<uuid>.tar.gz`), then handed out as a link (303 See Other): the
//! store's own SigV4 link with `blob_public_endpoint`, else the instance's signed link,
//! which any instance serves. Against a real S3 server (`s3s-fs`, started by the harness).

use crate::common;
use common::{assert_envelope_for, res_json, Mode, TestServer};
use notevault::auth::{StaticToken, TokenKind};
use serde_json::{json, Value};

use crate::attachments_blobs::{png, sha};

const PAT: &str = "pat-token-0123456789abcdef";

/// A hosted instance with a blob store (`public`: its links are the store's), and a
/// personal access token (`PAT`).
async fn hosted(public: bool) -> Option<TestServer> {
    if !common::mode::hosted_available() {
        return None;
    }
    let s = TestServer::start_as(Mode::Hosted, None, move |c| {
        if public {
            let endpoint = c
                .blob_settings
                .iter()
                .find(|(k, _)| k == "AWS_ENDPOINT_URL")
                .map(|(_, v)| v.expose().to_string());
            c.blob_public_endpoint = endpoint.map(|e| e.replace("127.0.0.1", "localhost"));
        }
        c.static_tokens.push(StaticToken {
            token: PAT.into(),
            permissions: vec![],
            kind: TokenKind::Pat,
            vault_id: None,
        });
    })
    .await;
    // s3s-fs missing and opted out: nothing to test against.
    s.hosted().s3.is_some().then_some(s)
}

/// The harness's client, without following redirects.
fn no_redirects() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {}", common::hosted::TOKEN).parse().unwrap(),
    );
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers)
        .build()
        .unwrap()
}

/// A note and an attachment, for the archive to hold.
async fn fill(s: &TestServer) -> Vec<u8> {
    let bytes = png(4, 300_000);
    let res = s
        .client
        .put(s.url("/v1/attachments/pics/one.png"))
        .header("Idempotency-Key", "k-one")
        .header("Content-Type", "image/png")
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    res_json(res, 201, "upload").await;
    let res = s
        .client
        .post(s.url("/v1/notes"))
        .header("Idempotency-Key", "k-note")
        .json(&json!({"slug": "hello", "content": "# Hello\n"}))
        .send()
        .await
        .unwrap();
    res_json(res, 201, "note").await;
    bytes
}

/// `POST /v1/export` with `body`, not followed: the 303 and its JSON.
async fn export_link(s: &TestServer, body: Value) -> Value {
    let res = no_redirects()
        .post(s.url("/v1/export"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["cache-control"], "no-store");
    let location = res.headers()["location"].to_str().unwrap().to_string();
    let link = res_json(res, 303, "export").await;
    assert_eq!(link["url"], location.as_str(), "{link}");
    assert_eq!(link["method"], "GET");
    let expires = chrono::DateTime::parse_from_rfc3339(link["expires_at"].as_str().unwrap())
        .expect("expires_at is RFC 3339");
    let left = expires.timestamp() - chrono::Utc::now().timestamp();
    assert!((280..=300).contains(&left), "{left} s left");
    let date = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let name = link["name"].as_str().unwrap();
    assert!(
        name.starts_with("notevault-") && name.ends_with(&format!("-{date}.tar.gz")),
        "{name}"
    );
    link
}

/// The export objects of the vault in the bucket.
fn exports_in_store(s: &TestServer) -> Vec<String> {
    let prefix = format!("tests/vaults/{}/exports/", s.hosted().vault_id);
    let objects = s.hosted().s3.as_ref().unwrap().objects();
    objects
        .into_iter()
        .filter(|o| o.starts_with(&prefix))
        .collect()
}

/// The vault's `vault.exported` audit rows.
async fn exported_rows(s: &TestServer) -> usize {
    let page = s
        .get_json(
            "/v1/audit-events?filter=kind%20%3D%20%22vault.exported%22",
            200,
        )
        .await;
    page["audit_events"].as_array().unwrap().len()
}

fn unpacked_holds(archive: &[u8], attachment: &[u8], history: bool) {
    let unpacked = crate::console::unpack(archive);
    let vault = unpacked.path().join("vault");
    assert_eq!(
        std::fs::read(vault.join("pics/one.png")).unwrap(),
        attachment
    );
    assert_eq!(
        std::fs::read_to_string(vault.join("hello.md")).unwrap(),
        "# Hello\n"
    );
    assert_eq!(unpacked.path().join("history.bundle").is_file(), history);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_is_written_to_the_store_and_read_through_any_instance() {
    let Some(s) = hosted(false).await else {
        return;
    };
    let attachment = fill(&s).await;
    let link = export_link(&s, json!({"history": true})).await;
    let url = link["url"].as_str().unwrap().to_string();
    assert!(url.starts_with(&s.url("/v1/exports/")), "{url}");

    // The object is in the store, whole: the size and hash the answer gave.
    let stored = exports_in_store(&s);
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert!(stored[0].ends_with(".tar.gz"), "{stored:?}");
    let file = s.hosted().s3.as_ref().unwrap().dir.path();
    let bytes = std::fs::read(file.join(common::s3::BUCKET).join(&stored[0])).unwrap();
    assert_eq!(bytes.len() as u64, link["size"].as_u64().unwrap());
    assert_eq!(sha(&bytes), link["sha256"]);

    // The link, without a bearer: the archive, named.
    let res = reqwest::get(&url).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/gzip");
    let disposition = res.headers()["content-disposition"].to_str().unwrap();
    assert!(
        disposition.contains(link["name"].as_str().unwrap()),
        "{disposition}"
    );
    let archive = res.bytes().await.unwrap();
    assert_eq!(archive.as_ref(), bytes.as_slice());
    unpacked_holds(&archive, &attachment, true);
    // A range of it.
    let res = reqwest::Client::new()
        .get(&url)
        .header("Range", "bytes=10-19")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 206);
    assert_eq!(res.bytes().await.unwrap().as_ref(), &bytes[10..20]);

    // A client that follows redirects gets the archive from the export itself; without
    // `history`, no bundle.
    let res = s.client.post(s.url("/v1/export")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    unpacked_holds(&res.bytes().await.unwrap(), &attachment, false);
    assert_eq!(exported_rows(&s).await, 2);

    // Tampered: another object, another expiry, another signature, another vault.
    let object = url.split("/v1/exports/").nth(1).unwrap();
    let object = object.split('?').next().unwrap();
    let sig = url.rsplit_once("signature=").unwrap().1;
    let flipped = if sig.starts_with('0') { "1" } else { "0" };
    let tampered = [
        url.replace(object, &format!("{}.tar.gz", uuid::Uuid::now_v7())),
        url.replace("expires=", "expires=1"),
        url.replace(
            &format!("signature={sig}"),
            &format!("signature={flipped}{}", &sig[1..]),
        ),
        url.replace(&s.hosted().vault_id, &uuid::Uuid::now_v7().to_string()),
    ];
    for bad in &tampered {
        assert_ne!(bad, &url);
        let res = reqwest::get(bad).await.unwrap();
        let body = res_json(res, 401, bad).await;
        assert_envelope_for(bad, &body, 401, "AUTH_INVALID");
    }
    // Expired: signed with the vault's key, its expiry passed.
    let past = chrono::Utc::now().timestamp() - 5;
    let path = format!("/v1/exports/{object}");
    let sig = notevault::auth::presigned::signature(&s.svc.presign_key, "GET", &path, past, "");
    let expired = format!(
        "{}?vault={}&expires={past}&signature={sig}",
        s.url(&path),
        s.hosted().vault_id
    );
    let res = reqwest::get(&expired).await.unwrap();
    let body = res_json(res, 401, "expired").await;
    assert_envelope_for("expired", &body, 401, "AUTH_INVALID");
    assert!(
        body["message"].as_str().unwrap().contains("expired"),
        "{body}"
    );
    // A bearer of the vault reads no export without a link or a session.
    let res = s
        .anonymous()
        .get(s.url(&path))
        .bearer_auth(PAT)
        .send()
        .await
        .unwrap();
    let body = res_json(res, 403, "a PAT, no link").await;
    assert_envelope_for("a PAT, no link", &body, 403, "CREDENTIAL_FORBIDDEN");

    // Another instance (its own empty cache, the same database and store) serves it.
    let old_base = s.url("");
    let s = s.restart(|_| {}).await;
    let elsewhere = url.replace(&old_base, &s.url(""));
    assert_ne!(elsewhere, url);
    let res = reqwest::get(&elsewhere).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.bytes().await.unwrap().as_ref(), bytes.as_slice());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_public_endpoint_the_link_is_the_stores() {
    let Some(s) = hosted(true).await else {
        return;
    };
    let attachment = fill(&s).await;
    let link = export_link(&s, json!({})).await;
    let url = link["url"].as_str().unwrap().to_string();
    let port = s.hosted().s3.as_ref().unwrap().port;
    let prefix = format!(
        "http://localhost:{port}/{}/tests/vaults/{}/exports/",
        common::s3::BUCKET,
        s.hosted().vault_id
    );
    assert!(url.starts_with(&prefix), "{url}");
    assert!(
        url.contains("response-content-type=application%2Fgzip"),
        "{url}"
    );
    assert!(
        url.contains("response-content-disposition=attachment"),
        "{url}"
    );

    // Straight from the store, without a bearer.
    let res = reqwest::get(&url).await.unwrap();
    assert_eq!(res.status(), 200);
    let archive = res.bytes().await.unwrap();
    assert_eq!(sha(&archive), link["sha256"]);
    unpacked_holds(&archive, &attachment, false);

    // Tampered: refused by the store.
    let sig = url.rsplit_once("X-Amz-Signature=").unwrap().1;
    let flipped = if sig.starts_with('0') { "1" } else { "0" };
    let tampered = [
        url.replace("X-Amz-Signature=", &format!("X-Amz-Signature={flipped}"))
            .replace(
                &format!("{flipped}{sig}"),
                &format!("{flipped}{}", &sig[1..]),
            ),
        url.replace("X-Amz-Expires=300", "X-Amz-Expires=86400"),
        url.replace("application%2Fgzip", "text%2Fhtml"),
    ];
    for bad in &tampered {
        assert_ne!(bad, &url);
        let res = reqwest::get(bad).await.unwrap();
        assert_eq!(res.status(), 403, "{bad}: {}", res.text().await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_store_is_a_503_that_keeps_nothing_and_a_retry_works() {
    let Some(mut s) = hosted(false).await else {
        return;
    };
    let attachment = fill(&s).await;
    let rows = exported_rows(&s).await;
    s.s3_mut().stop();
    let res = no_redirects()
        .post(s.url("/v1/export"))
        .json(&json!({"history": true}))
        .send()
        .await
        .unwrap();
    assert!(res.headers().get("retry-after").is_some(), "{res:?}");
    let body = res_json(res, 503, "store stopped").await;
    assert_envelope_for("store stopped", &body, 503, "BLOB_STORE_UNAVAILABLE");
    s.s3_mut().resume();
    assert!(exports_in_store(&s).is_empty());
    assert!(s.hosted().s3.as_ref().unwrap().pending_parts().is_empty());
    assert_eq!(
        exported_rows(&s).await,
        rows,
        "no audit row for a failed export"
    );

    // Back: the same request works.
    let link = export_link(&s, json!({"history": true})).await;
    let res = reqwest::get(link["url"].as_str().unwrap()).await.unwrap();
    assert_eq!(res.status(), 200);
    unpacked_holds(&res.bytes().await.unwrap(), &attachment, true);
    assert_eq!(exported_rows(&s).await, rows + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_personal_access_token_may_not_export() {
    let Some(s) = hosted(false).await else {
        return;
    };
    let res = s
        .anonymous()
        .post(s.url("/v1/export"))
        .bearer_auth(PAT)
        .send()
        .await
        .unwrap();
    let body = res_json(res, 403, "PAT export").await;
    assert_envelope_for("PAT export", &body, 403, "CREDENTIAL_FORBIDDEN");
    assert!(exports_in_store(&s).is_empty());
}

/// An export is named by no row: the collector takes one past its keeping (its link's
/// life and a margin) and leaves a fresh one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_collector_takes_an_old_export_and_leaves_a_fresh_one() {
    let Some(s) = hosted(false).await else {
        return;
    };
    fill(&s).await;
    export_link(&s, json!({})).await;
    let old = exports_in_store(&s);
    assert_eq!(old.len(), 1);
    export_link(&s, json!({})).await;
    let fresh: Vec<String> = exports_in_store(&s)
        .into_iter()
        .filter(|o| !old.contains(o))
        .collect();
    assert_eq!(fresh.len(), 1);
    // Made before its keeping began: its file in the S3 server's folder, backdated.
    let root = s.hosted().s3.as_ref().unwrap().bucket();
    let keep = notevault::storage::blobs::EXPORT_KEEP_SECS;
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(keep + 60);
    std::fs::File::options()
        .write(true)
        .open(root.join(&old[0]))
        .unwrap()
        .set_modified(then)
        .unwrap();

    // One pass, as an instance's collector thread runs it (a grace of a day: only the
    // export's own keeping can take it).
    let mut config = notevault::config::Config::default();
    s.hosted()
        .s3
        .as_ref()
        .unwrap()
        .configure(&mut config, "tests");
    let blobs = notevault::daemon::hosted::blobs(&config).unwrap().unwrap();
    let url = s.hosted().db.as_ref().unwrap().url.clone();
    let db =
        notevault::hosted::Database::open(&url, notevault::hosted::Options::default()).unwrap();
    let day = std::time::Duration::from_secs(24 * 3600);
    let collected = notevault::hosted::collect::collect(&db, &*blobs, day)
        .await
        .unwrap()
        .expect("no other collector");
    assert_eq!(collected.exports, 1, "{collected:?}");
    assert_eq!(exports_in_store(&s), fresh);
    // Attachments are rows' business, not the export keeping's.
    let blobs_left = s.hosted().s3.as_ref().unwrap().objects();
    assert!(
        blobs_left.iter().any(|o| o.contains("/blobs/")),
        "{blobs_left:?}"
    );
}

/// The console's export button answers what `POST /v1/export` does: a redirect to the
/// archive in the store, which the browser follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consoles_export_button_redirects_to_the_archive() {
    let Some(s) = hosted(false).await else {
        return;
    };
    let attachment = fill(&s).await;
    let (cookie, csrf) = crate::console::sign_in(&s).await;
    let form = [("csrf", csrf.as_str()), ("history", "true")];
    let res = crate::console::post_form(&s, "/export", Some(&cookie), &form).await;
    assert_eq!(res.status(), 303);
    let location = res.headers()["location"].to_str().unwrap().to_string();
    assert!(location.starts_with(&s.url("/v1/exports/")), "{location}");
    let res = reqwest::get(&location).await.unwrap();
    assert_eq!(res.status(), 200);
    unpacked_holds(&res.bytes().await.unwrap(), &attachment, true);
}

/// An archive past the single-`PUT` size goes up in parts, as a large attachment does:
/// the export is whole, and no staged object or multipart marker is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_export_goes_up_in_parts_and_leaves_nothing_staged() {
    let Some(s) = hosted(false).await else {
        return;
    };
    // Bytes gzip cannot shrink, so that the archive is past the threshold too.
    let mut noise = png(0, 0);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while noise.len() < notevault::storage::blobs::MULTIPART_ABOVE + 512 * 1024 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.extend_from_slice(&x.to_le_bytes());
    }
    let res = s
        .client
        .put(s.url("/v1/attachments/noise.png"))
        .header("Idempotency-Key", "k-noise")
        .header("Content-Type", "image/png")
        .body(noise.clone())
        .send()
        .await
        .unwrap();
    res_json(res, 201, "upload").await;
    let link = export_link(&s, json!({})).await;
    let size = link["size"].as_u64().unwrap();
    assert!(
        size > notevault::storage::blobs::MULTIPART_ABOVE as u64,
        "{size}"
    );
    let res = reqwest::get(link["url"].as_str().unwrap()).await.unwrap();
    assert_eq!(res.status(), 200);
    let archive = res.bytes().await.unwrap();
    assert_eq!(sha(&archive), link["sha256"]);
    let unpacked = crate::console::unpack(&archive);
    assert_eq!(
        std::fs::read(unpacked.path().join("vault/noise.png")).unwrap(),
        noise
    );
    let s3 = s.hosted().s3.as_ref().unwrap();
    let staged: Vec<String> = s3
        .objects()
        .into_iter()
        .filter(|o| o.contains("/uploads/"))
        .collect();
    assert!(staged.is_empty(), "{staged:?}");
    assert!(s3.pending_parts().is_empty());
}
