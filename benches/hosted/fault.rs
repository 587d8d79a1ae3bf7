//! Part 7 of the hosted bench: the fault run. 8 writers create notes through two
//! instances for `NOTEVAULT_BENCH_FAULT_SECONDS` (default 30) while PostgreSQL is stopped
//! with `pg_ctl stop -m immediate` and started again, then while instance A is killed
//! with SIGKILL and started again on its cache. A write not answered 201 (a 503, a cut
//! connection) is retried with its `Idempotency-Key`, alternating instances, until it is.
//! Then every acknowledged write is read back (none may be lost) and every retried one,
//! and the first 200 others, sent again: the same receipt must answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::writes::note;
use crate::{ms, row, tokens, verdict, Bench, Row, TOKEN};

/// An acknowledged create: its slug (also its key), version, when it was answered, and
/// after how many failed attempts.
struct Ack {
    slug: String,
    version: String,
    at: Instant,
    attempts: usize,
}

async fn create(client: &reqwest::Client, base: &str, slug: &str) -> Result<(u16, Value)> {
    let res = client
        .post(format!("{base}/v1/notes"))
        .bearer_auth(TOKEN)
        .header("Idempotency-Key", slug)
        .json(&json!({"slug": slug, "content": note(slug, slug.len())}))
        .send()
        .await?;
    let status = res.status().as_u16();
    Ok((status, res.json().await.unwrap_or(Value::Null)))
}

pub async fn run(bench: &Bench, rows: &mut Vec<Row>) -> Result<()> {
    let secs = crate::common::env_num("NOTEVAULT_BENCH_FAULT_SECONDS", 30);
    let url = bench.database("fault")?;
    let vault = bench.cli(&url, &["vault", "create", "fault"])?;
    let tokens = tokens(&[vault]);
    let cache_a = bench.root.join("cache-fault-a");
    let mut a = bench.instance(&url, &tokens, &cache_a, &[])?;
    let b = bench.instance(&url, &tokens, &bench.root.join("cache-fault-b"), &[])?;
    let bases = Arc::new(Mutex::new([a.base.clone(), b.base.clone()]));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    eprintln!("part 7: 8 writers for {secs} s through 2 instances; PostgreSQL stopped at {} s, instance A killed at {} s", secs / 4, secs / 2);
    let until = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for w in 0..8 {
        let (client, bases) = (client.clone(), bases.clone());
        tasks.push(tokio::spawn(async move {
            let (mut acks, mut odd, mut gave_up) = (Vec::new(), Vec::new(), 0usize);
            let mut i = 0;
            while Instant::now() < until {
                let slug = format!("fault/w{w}-{i}");
                i += 1;
                let mut attempts = 0;
                loop {
                    let base = bases.lock()[(w + attempts) % 2].clone();
                    match create(&client, &base, &slug).await {
                        Ok((201, body)) => {
                            let version =
                                body["version_id"].as_str().unwrap_or_default().to_string();
                            acks.push(Ack {
                                slug,
                                version,
                                at: Instant::now(),
                                attempts,
                            });
                            break;
                        }
                        Ok((503, _)) | Err(_) => {}
                        Ok((status, body)) => odd.push(format!("{slug}: {status} {body}")),
                    }
                    attempts += 1;
                    if attempts > 600 {
                        gave_up += 1;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            (acks, odd, gave_up)
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs / 4)).await;
    let stopped_at = Instant::now();
    let pg_dir = bench.pg.dir.clone();
    bench.pg.stop_immediate()?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    bench.pg.start_again()?;
    let started_at = Instant::now();
    eprintln!(
        "  PostgreSQL stopped and started again ({})",
        pg_dir.display()
    );
    tokio::time::sleep(Duration::from_secs(secs / 4)).await;
    let killed_at = Instant::now();
    a.child.kill()?; // SIGKILL
    let _ = a.child.wait();
    a = bench.instance_in(&url, &tokens, &cache_a, &[], false)?;
    bases.lock()[0] = a.base.clone();
    eprintln!("  instance A killed and started again on its cache");
    let (mut acks, mut odd, mut gave_up) = (Vec::new(), Vec::new(), 0);
    for t in tasks {
        let (ak, o, g) = t.await?;
        acks.extend(ak);
        odd.extend(o);
        gave_up += g;
    }
    // Read back on each instance in turn, then send again.
    let (mut lost, mut wrong) = (Vec::new(), 0usize);
    for (k, ack) in acks.iter().enumerate() {
        let base = bases.lock()[k % 2].clone();
        let res = client
            .get(format!("{base}/v1/notes/{}", ack.slug.replace('/', "%2F")))
            .bearer_auth(TOKEN)
            .send()
            .await?;
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap_or(Value::Null);
        if status != 200 {
            lost.push(format!("{}: {status}", ack.slug));
        } else if body["version_id"] != ack.version.as_str() {
            wrong += 1;
        }
    }
    let retried: Vec<&Ack> = acks.iter().filter(|a| a.attempts > 0).collect();
    let mut replays = retried.clone();
    replays.extend(acks.iter().filter(|a| a.attempts == 0).take(200));
    let mut same = 0;
    for (k, ack) in replays.iter().enumerate() {
        let base = bases.lock()[k % 2].clone();
        if let Ok((201, body)) = create(&client, &base, &ack.slug).await {
            if body["version_id"] == ack.version.as_str() {
                same += 1;
            }
        }
    }
    let first_after = |from: Instant| {
        acks.iter()
            .filter(|a| a.at > from)
            .map(|a| a.at - from)
            .min()
            .unwrap_or_default()
    };
    row(rows, "fault run: creates acknowledged (8 writers, 2 instances)", format!("{} in {secs} s, {} after a failed attempt (503 or a cut connection), {gave_up} given up", acks.len(), retried.len()), "PostgreSQL `pg_ctl stop -m immediate` + 3 s + start; instance A `kill -9` + restart", "");
    row(
        rows,
        "acknowledged creates lost (read back on both instances)",
        format!("{} (and {wrong} with another version)", lost.len()),
        "0",
        verdict(lost.is_empty() && wrong == 0),
    );
    row(
        rows,
        "retries and replays answered with the original receipt",
        format!("{same} of {}", replays.len()),
        "all",
        verdict(same == replays.len()),
    );
    let begin = until - Duration::from_secs(secs);
    let phases = [
        begin,
        stopped_at,
        started_at,
        killed_at,
        until + Duration::from_secs(3600),
    ];
    let per_phase: Vec<String> = phases
        .windows(2)
        .map(|w| {
            acks.iter()
                .filter(|a| a.at >= w[0] && a.at < w[1])
                .count()
                .to_string()
        })
        .collect();
    row(
        rows,
        "creates acknowledged before the stop / while stopped / after the start / after A's kill",
        per_phase.join(" / "),
        "",
        "",
    );
    row(
        rows,
        "first acknowledged create after PostgreSQL's stop / after its start / after A's kill",
        format!(
            "{} / {} / {}",
            ms(first_after(stopped_at)),
            ms(first_after(started_at)),
            ms(first_after(killed_at))
        ),
        "(no target)",
        "",
    );
    if !odd.is_empty() {
        row(
            rows,
            "answers other than 201 and 503",
            format!(
                "{}: {}",
                odd.len(),
                odd.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
            ),
            "none",
            "MISSED",
        );
    }
    if !lost.is_empty() {
        eprintln!(
            "lost: {}",
            lost.iter().take(20).cloned().collect::<Vec<_>>().join(", ")
        );
    }
    drop(a);
    drop(b);
    Ok(())
}
