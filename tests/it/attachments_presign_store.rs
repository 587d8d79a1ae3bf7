//! Presigned links the blob store serves itself (`blob_public_endpoint`), against a real
//! S3 server (`s3s-fs`, started by the harness), which checks SigV4 query signatures,
//! their expiry and the signed headers (`s3s` 0.14's `v4_check_presigned_url`), and
//! an upload's `x-amz-checksum-sha256`. The public endpoint is `localhost` where the
//! instance reaches the store at `127.0.0.1`: the link names the host clients use.
//!
//! What s3s-fs cannot show: it ignores `response-content-type` and
//! `response-content-disposition` (they are checked as signed, not answered), and it
//! keeps the object of a PUT it refused for its checksum (the settle step removes it).

use crate::common;
use common::{assert_envelope_for, res_json, Mode, TestServer};
use notevault::auth::{StaticToken, TokenKind};
use serde_json::{json, Value};

use crate::attachments_blobs::{png, sha};

const READER: &str = "reader-token-0123456789";

/// A hosted instance whose links are the store's (`public`: set the endpoint).
async fn hosted(public: bool) -> Option<TestServer> {
    if !common::mode::hosted_available() {
        return None;
    }
    let s = TestServer::start_as(Mode::Hosted, None, move |c| {
        let endpoint = c
            .blob_settings
            .iter()
            .find(|(k, _)| k == "AWS_ENDPOINT_URL")
            .map(|(_, v)| v.expose().to_string());
        if public {
            c.blob_public_endpoint = endpoint.map(|e| e.replace("127.0.0.1", "localhost"));
        }
        c.static_tokens.push(StaticToken {
            token: READER.into(),
            permissions: vec![],
            kind: TokenKind::default(),
            vault_id: None,
        });
    })
    .await;
    // s3s-fs missing and opted out: nothing to test against.
    s.hosted().s3.is_some().then_some(s)
}

async fn upload(s: &TestServer, path: &str, bytes: &[u8]) -> Value {
    let res = s
        .client
        .put(s.url(&format!("/v1/attachments/{path}")))
        .header("Idempotency-Key", format!("up-{path}"))
        .header("Content-Type", "image/png")
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap();
    res_json(res, 201, "upload").await
}

async fn presign(s: &TestServer, body: Value) -> Value {
    let res = s
        .client
        .post(s.url("/v1/attachments:presign"))
        .json(&body)
        .send()
        .await
        .unwrap();
    res_json(res, 200, "presign").await
}

/// The link's PUT with `bytes` and its signed headers (`Content-Type` replaced by
/// `content_type` when given); `Content-Length` is the body's own.
async fn put_to_store(link: &Value, bytes: &[u8], content_type: Option<&str>) -> reqwest::Response {
    let mut req = reqwest::Client::new().put(link["url"].as_str().unwrap());
    for (k, v) in link["headers"]
        .as_object()
        .expect("a PUT link names its headers")
    {
        match k.as_str() {
            "content-length" => {}
            "content-type" => req = req.header(k, content_type.unwrap_or(v.as_str().unwrap())),
            _ => req = req.header(k, v.as_str().unwrap()),
        }
    }
    req.body(bytes.to_vec()).send().await.unwrap()
}

async fn store_get(url: &str) -> reqwest::Response {
    reqwest::Client::new().get(url).send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_link_is_served_by_the_store_and_a_tampered_one_refused() {
    let Some(s) = hosted(true).await else {
        return;
    };
    let bytes = png(5, 300);
    let other = png(6, 300);
    upload(&s, "pic.png", &bytes).await;
    upload(&s, "other.png", &other).await;
    let link = presign(&s, json!({"path": "pic.png", "expires_in": 120})).await;
    assert_eq!(link["method"], "GET");
    assert_eq!(link["path"], "pic.png");
    assert!(link.get("headers").is_none(), "{link}");
    let url = link["url"].as_str().unwrap().to_string();
    let port = s.hosted().s3.as_ref().unwrap().port;
    let vault = &s.hosted().vault_id;
    let object = format!(
        "http://localhost:{port}/{}/tests/vaults/{vault}/blobs/{}?",
        common::s3::BUCKET,
        sha(&bytes)
    );
    assert!(url.starts_with(&object), "{url}");
    assert!(url.contains("response-content-type=image%2Fpng"), "{url}");

    // Straight from the store, without a bearer: the bytes.
    let res = store_get(&url).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.bytes().await.unwrap().as_ref(), bytes.as_slice());

    // Each change the store refuses: another object, another expiry, another
    // signature, another answer type, another method.
    let tampered = [
        url.replace(&sha(&bytes), &sha(&other)),
        url.replace("X-Amz-Expires=120", "X-Amz-Expires=86400"),
        {
            let (head, sig) = url.rsplit_once("X-Amz-Signature=").unwrap();
            let flipped = if sig.starts_with('0') { "1" } else { "0" };
            format!("{head}X-Amz-Signature={flipped}{}", &sig[1..])
        },
        url.replace("image%2Fpng", "text%2Fhtml"),
    ];
    for t in &tampered {
        assert_ne!(t, &url);
        let res = store_get(t).await;
        assert_eq!(res.status(), 403, "{t}: {}", res.text().await.unwrap());
    }
    let res = reqwest::Client::new()
        .put(&url)
        .body(other.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "a GET link used to PUT");
    // The blob is unchanged.
    let res = store_get(&url).await;
    assert_eq!(res.bytes().await.unwrap().as_ref(), bytes.as_slice());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_link_is_refused_by_the_store() {
    let Some(s) = hosted(true).await else {
        return;
    };
    let bytes = png(7, 10);
    upload(&s, "soon.png", &bytes).await;
    // The shortest life there is (a smaller ask is clamped up to it).
    let link = presign(&s, json!({"path": "soon.png", "expires_in": 1})).await;
    let url = link["url"].as_str().unwrap().to_string();
    assert!(url.contains("X-Amz-Expires=10"), "{url}");
    assert_eq!(store_get(&url).await.status(), 200);
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    let res = store_get(&url).await;
    assert_eq!(res.status(), 403);
    assert!(res.text().await.unwrap().contains("expired"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_link_of_the_store_becomes_an_attachment_and_other_bytes_are_refused() {
    let Some(s) = hosted(true).await else {
        return;
    };
    let bytes = png(9, 2000);
    let ask = json!({
        "file_name": "drop.png",
        "method": "PUT",
        "size": bytes.len(),
        "content_type": "image/png",
        "sha256": sha(&bytes),
        "expires_in": 300,
    });

    // Without notes.write: refused at presign, as the instance's own links are.
    let res = s
        .anonymous()
        .post(s.url("/v1/attachments:presign"))
        .bearer_auth(READER)
        .json(&ask)
        .send()
        .await
        .unwrap();
    let body = res_json(res, 403, "reader PUT").await;
    assert_envelope_for("reader PUT", &body, 403, "PERMISSION_MISSING");
    // A store link needs what it signs.
    let mut no_size = ask.clone();
    no_size.as_object_mut().unwrap().remove("size");
    let res = s
        .client
        .post(s.url("/v1/attachments:presign"))
        .json(&no_size)
        .send()
        .await
        .unwrap();
    let body = res_json(res, 400, "no size").await;
    assert!(body["message"].as_str().unwrap().contains("size"), "{body}");

    let link = presign(&s, ask.clone()).await;
    assert_eq!(link["method"], "PUT");
    assert_eq!(link["path"], "drop.png");
    let url = link["url"].as_str().unwrap();
    let port = s.hosted().s3.as_ref().unwrap().port;
    assert!(
        url.starts_with(&format!("http://localhost:{port}/")),
        "{url}"
    );
    assert!(url.contains("/uploads/presigned-"), "{url}");

    // Another size, another type: the signature does not hold, the store refuses.
    let res = put_to_store(&link, &png(9, 2001), None).await;
    assert_eq!(
        res.status(),
        403,
        "wrong size: {}",
        res.text().await.unwrap()
    );
    let res = put_to_store(&link, &bytes, Some("image/gif")).await;
    assert_eq!(
        res.status(),
        403,
        "wrong type: {}",
        res.text().await.unwrap()
    );
    // The same size, other bytes: the store refuses them for their checksum.
    let res = put_to_store(&link, &png(8, 2000), None).await;
    assert_eq!(
        res.status(),
        400,
        "wrong bytes: {}",
        res.text().await.unwrap()
    );
    let list = s.get_json("/v1/attachments", 200).await;
    assert_eq!(list["attachments"].as_array().unwrap().len(), 0, "{list}");

    // The declared bytes: stored by the store, an attachment at the next listing.
    let res = put_to_store(&link, &bytes, None).await;
    assert_eq!(
        res.status(),
        200,
        "right bytes: {}",
        res.text().await.unwrap()
    );
    let list = s.get_json("/v1/attachments", 200).await;
    let found = &list["attachments"][0];
    assert_eq!(found["path"], "drop.png", "{list}");
    assert_eq!(found["sha256"], sha(&bytes));
    assert_eq!(found["size"], bytes.len());
    assert_eq!(found["content_type"], "image/png");
    let res = s
        .client
        .get(s.url("/v1/attachments/drop.png"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.bytes().await.unwrap().as_ref(), bytes.as_slice());
    // No staging object is left, and no second attachment at the next listing.
    let objects = s.hosted().s3.as_ref().unwrap().objects();
    assert!(
        !objects.iter().any(|o| o.contains("presigned-")),
        "{objects:?}"
    );
    let list = s.get_json("/v1/attachments", 200).await;
    assert_eq!(list["attachments"].as_array().unwrap().len(), 1, "{list}");
    // The path is taken now.
    let res = s
        .client
        .post(s.url("/v1/attachments:presign"))
        .json(&ask)
        .send()
        .await
        .unwrap();
    let body = res_json(res, 409, "taken").await;
    assert_envelope_for("taken", &body, 409, "NAME_COLLISION");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_public_endpoint_the_link_is_the_instances() {
    let Some(s) = hosted(false).await else {
        return;
    };
    upload(&s, "pic.png", &png(1, 10)).await;
    let link = presign(&s, json!({"path": "pic.png"})).await;
    let url = link["url"].as_str().unwrap();
    assert!(url.contains("/v1/attachments/pic.png?expires="), "{url}");
    assert!(link.get("headers").is_none(), "{link}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_public_endpoint_the_instance_link_names_its_vault() {
    let Some(s) = hosted(false).await else {
        return;
    };
    let bytes = png(7, 300);
    upload(&s, "pic.png", &bytes).await;
    let vault = s.hosted().vault_id.clone();

    // A GET link of the instance: it names the vault, and needs no bearer.
    let link = presign(&s, json!({"path": "pic.png"})).await;
    let url = link["url"].as_str().unwrap().to_string();
    assert!(url.starts_with(&s.url("/v1/attachments/pic.png?")), "{url}");
    assert!(url.contains(&format!("vault={vault}")), "{url}");
    for _ in 0..2 {
        let res = reqwest::get(&url).await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.bytes().await.unwrap().as_ref(), bytes.as_slice());
    }
    // Another vault named, or none: no vault's key signed it for that.
    for bad in [
        url.replace(&vault, "01000000-0000-7000-8000-000000000000"),
        url.replace(&format!("&vault={vault}"), ""),
    ] {
        let res = reqwest::get(&bad).await.unwrap();
        let body = res_json(res, 401, &bad).await;
        assert_envelope_for(&bad, &body, 401, "AUTH_INVALID");
    }

    // A PUT link works once.
    let link = presign(&s, json!({"path": "up/new.png", "method": "PUT"})).await;
    let put = link["url"].as_str().unwrap().to_string();
    assert!(put.contains(&format!("vault={vault}")), "{put}");
    let send = |body: Vec<u8>| {
        reqwest::Client::new()
            .put(&put)
            .header("Content-Type", "image/png")
            .body(body)
            .send()
    };
    let r = res_json(send(png(8, 300)).await.unwrap(), 201, "presigned PUT").await;
    assert_eq!(r["attachment"]["path"], "up/new.png");
    let body = res_json(send(png(9, 300)).await.unwrap(), 401, "reused PUT").await;
    assert_envelope_for("reused PUT", &body, 401, "AUTH_INVALID");
    let res = s.get("/v1/attachments/up/new.png").await;
    assert_eq!(res.bytes().await.unwrap().to_vec(), png(8, 300));
}
