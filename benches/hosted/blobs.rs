//! Part `blobs`: a 20 MiB attachment up and down through an instance (`PUT` and `GET
//! /v1/attachments/…`, hashed, stored in the blob store, recorded) beside the same bytes
//! straight to and from the store with the same client crate (`object_store`, 8 MiB
//! multipart parts, as the instance sends them); target ≥ 0.7× the direct transfer. The
//! upload is measured twice: plain, and declaring its `Content-Digest` (which sends it
//! straight under its content address), the client's hashing inside the timing.
//! The store is `s3s-fs` on loopback (`NOTEVAULT_S3S_FS`, else `s3s-fs` on the `PATH` or
//! in `~/.cargo/bin`), over a folder under the bench's root.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;

use super::{median, row, tokens, verdict, Bench, Row, TOKEN};

const BUCKET: &str = "bench";
const KEY: &str = "notevault-bench";
const SECRET: &str = "notevault-bench-secret";
const SIZE: usize = 20 * 1024 * 1024;
const PART: usize = 8 * 1024 * 1024;

struct S3 {
    child: Child,
    port: u16,
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn s3s_fs() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NOTEVAULT_S3S_FS") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    [PathBuf::from("s3s-fs"), home.join(".cargo/bin/s3s-fs")]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok())
}

fn start_s3(bin: &PathBuf, dir: &std::path::Path) -> Result<S3> {
    std::fs::create_dir_all(dir.join(BUCKET))?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = Command::new(bin)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", KEY, "--secret-key", SECRET])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("s3s-fs starts")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("s3s-fs did not listen");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(S3 { child, port })
}

/// Bytes of a PDF (its magic first) that differ by `round`: no transfer is a dedupe.
fn payload(round: usize) -> Vec<u8> {
    let mut v = b"%PDF-1.7\n".to_vec();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ round as u64;
    while v.len() < SIZE {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(SIZE);
    v
}

/// `PUT` `bytes` as `name` through the instance (its name the `Idempotency-Key`),
/// declaring `digest` when given: applied (201) or an error.
async fn put(
    client: &reqwest::Client,
    base: &str,
    name: &str,
    bytes: Vec<u8>,
    digest: Option<String>,
) -> Result<()> {
    let mut request = client
        .put(format!("{base}/v1/attachments/{name}"))
        .bearer_auth(TOKEN)
        .header("Idempotency-Key", name)
        .header("Content-Type", "application/pdf");
    if let Some(digest) = digest {
        request = request.header("Content-Digest", digest);
    }
    let res = request.body(bytes).send().await?;
    let status = res.status();
    let body = res.text().await?;
    if status.as_u16() != 201 {
        bail!("the upload of {name} answered {status}: {body}");
    }
    Ok(())
}

fn mb_s(d: Duration) -> f64 {
    SIZE as f64 / 1e6 / d.as_secs_f64()
}

pub async fn run(bench: &Bench, rows: &mut Vec<Row>) -> Result<()> {
    let Some(bin) = s3s_fs() else {
        println!("part blobs skipped: no s3s-fs (cargo install --locked s3s-fs --version 0.14.1 --features binary)");
        return Ok(());
    };
    let s3 = start_s3(&bin, &bench.root.join("s3"))?;
    let endpoint = format!("http://127.0.0.1:{}", s3.port);
    let url = bench.database("blobs")?;
    let vault = bench.cli(&url, &["vault", "create", "blobs"])?;
    let env = [
        ("NOTEVAULT_BLOB_STORE", "s3://bench/instance"),
        ("AWS_ACCESS_KEY_ID", KEY),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("NOTEVAULT_MAX_UPLOAD_BYTES", "67108864"),
    ];
    let daemon = bench.instance(
        &url,
        &tokens(std::slice::from_ref(&vault)),
        &bench.root.join("cache-blobs"),
        &env,
    )?;
    let store = AmazonS3Builder::new()
        .with_bucket_name(BUCKET)
        .with_access_key_id(KEY)
        .with_secret_access_key(SECRET)
        .with_region("us-east-1")
        .with_endpoint(&endpoint)
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .build()?;
    let store: std::sync::Arc<dyn ObjectStore> = std::sync::Arc::new(store);
    let client = reqwest::Client::new();
    let (mut up_i, mut up_d, mut down_i, mut down_d) = (vec![], vec![], vec![], vec![]);
    let mut up_c = vec![];
    for round in 0..bench.rounds {
        // Instance first on even rounds, the store first on odd ones.
        for first in [round % 2 == 0, round % 2 != 0] {
            if first {
                let bytes = payload(round * 3);
                let name = format!("bench-{round}.pdf");
                let at = Instant::now();
                put(&client, &daemon.base, &name, bytes, None).await?;
                up_i.push(at.elapsed());
                let at = Instant::now();
                let res = client
                    .get(format!("{}/v1/attachments/{name}", daemon.base))
                    .bearer_auth(TOKEN)
                    .send()
                    .await?;
                let got = res.bytes().await?;
                if got.len() != SIZE {
                    bail!("download gave {} bytes", got.len());
                }
                down_i.push(at.elapsed());
                let bytes = payload(round * 3 + 2);
                let at = Instant::now();
                let declared = {
                    use base64::Engine;
                    use sha2::Digest;
                    let hash = sha2::Sha256::digest(&bytes);
                    let b64 = base64::engine::general_purpose::STANDARD.encode(hash);
                    format!("sha-256=:{b64}:")
                };
                let name = format!("declared-{round}.pdf");
                put(&client, &daemon.base, &name, bytes, Some(declared)).await?;
                up_c.push(at.elapsed());
            } else {
                let bytes = payload(round * 3 + 1);
                let path = ObjectPath::from(format!("direct/bench-{round}.pdf"));
                let at = Instant::now();
                let mut writer = object_store::buffered::BufWriter::with_capacity(
                    store.clone(),
                    path.clone(),
                    PART,
                );
                for chunk in bytes.chunks(256 * 1024) {
                    writer.put(bytes::Bytes::copy_from_slice(chunk)).await?;
                }
                tokio::io::AsyncWriteExt::shutdown(&mut writer).await?;
                up_d.push(at.elapsed());
                let at = Instant::now();
                let got = store.get(&path).await?.bytes().await?;
                if got.len() != SIZE {
                    bail!("direct download gave {} bytes", got.len());
                }
                down_d.push(at.elapsed());
            }
        }
        eprintln!(
            "  blobs round {round}: up instance {:.0} MB/s (declared digest {:.0} MB/s), direct {:.0} MB/s; down instance {:.0} MB/s, direct {:.0} MB/s",
            mb_s(up_i[round]),
            mb_s(up_c[round]),
            mb_s(up_d[round]),
            mb_s(down_i[round]),
            mb_s(down_d[round])
        );
    }
    let rate = |v: &[Duration]| median(v.iter().map(|d| mb_s(*d)).collect());
    for (what, inst, direct) in [
        ("upload", &up_i, &up_d),
        (
            "upload declaring its Content-Digest (hashed by the client, in the timing)",
            &up_c,
            &up_d,
        ),
        ("download", &down_i, &down_d),
    ] {
        let (a, b) = (rate(inst), rate(direct));
        let ratio = a / b;
        let each: Vec<String> = inst
            .iter()
            .zip(direct.iter())
            .map(|(i, d)| format!("{:.2}×", mb_s(*i) / mb_s(*d)))
            .collect();
        row(
            rows,
            &format!("20 MiB {what} through an instance ÷ straight to the store (s3s-fs)"),
            format!(
                "{a:.0} ÷ {b:.0} MB/s = {ratio:.2}× (rounds: {})",
                each.join(", ")
            ),
            "≥ 0.7×",
            verdict(ratio >= 0.7),
        );
    }
    drop(daemon);
    drop(s3);
    Ok(())
}
