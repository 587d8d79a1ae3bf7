//! Parts 1, 2 and 4 of the hosted bench: a create beside pgbench's transaction of the
//! same shape, 16 writers on 1 and 2 instances beside `pgbench -c16`, and a write on
//! instance A found by a search on instance B.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::common::{stats, wait_idle, Daemon};
use crate::{median, ms, row, tokens, verdict, Bench, Row, TOKEN};

/// pgbench's transaction: the vault's counter row bumped and a ~1 KB row inserted (its
/// `bigserial` a sequence bump too), in one transaction: what a create writes at the
/// least (its receipt, note row, revision and op are more rows of the same transaction).
const SCRIPT: &str = "BEGIN;
UPDATE counter SET n = n + 1 WHERE id = 1;
INSERT INTO rows (body) VALUES (repeat(md5(random()::text), 32));
END;
";

/// A note of ~1 KB (1,024 bytes of words), different for each `i`.
pub fn note(tag: &str, i: usize) -> String {
    const WORDS: &[&str] = &[
        "schema", "vault", "ledger", "harbor", "orbit", "lantern", "meadow", "quartz", "signal",
        "timber", "velvet", "window", "anchor", "bridge", "canyon", "delta",
    ];
    let mut text = format!("# {tag} {i}\n\n");
    let mut k = i;
    while text.len() < 1000 {
        text.push_str(WORDS[k % WORDS.len()]);
        text.push(if k % 11 == 10 { '\n' } else { ' ' });
        k = k.wrapping_mul(31).wrapping_add(7);
    }
    text.truncate(1023);
    text.push('\n');
    text
}

/// `POST /v1/notes` with `TOKEN`: the status and the body.
async fn create(
    client: &reqwest::Client,
    base: &str,
    slug: &str,
    key: &str,
    content: &str,
) -> Result<(u16, Value)> {
    let res = client
        .post(format!("{base}/v1/notes"))
        .bearer_auth(TOKEN)
        .header("Idempotency-Key", key)
        .json(&json!({"slug": slug, "content": content}))
        .send()
        .await?;
    let status = res.status().as_u16();
    Ok((status, res.json().await.unwrap_or(Value::Null)))
}

async fn get(client: &reqwest::Client, url: &str) -> Result<Value> {
    let res = client.get(url).bearer_auth(TOKEN).send().await?;
    let status = res.status();
    let body: Value = res.json().await?;
    if !status.is_success() {
        bail!("GET {url}: {status} {body}");
    }
    Ok(body)
}

/// A word of letters only, different for each `i` (a search term of its own).
fn word_of(mut i: usize) -> String {
    let mut w = String::from("zqhx");
    loop {
        w.push((b'a' + (i % 26) as u8) as char);
        i /= 26;
        if i == 0 {
            break w;
        }
    }
}

/// pgbench's database and script, and where its logs go.
struct PgBench {
    dir: std::path::PathBuf,
}

impl PgBench {
    fn new(bench: &Bench) -> Result<Self> {
        bench.pg.psql("postgres", "CREATE DATABASE pgbench")?;
        bench.pg.psql(
            "pgbench",
            "CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL); \
             INSERT INTO counter VALUES (1, 0); \
             CREATE TABLE rows (id bigserial PRIMARY KEY, body text NOT NULL)",
        )?;
        let dir = bench.root.join("pgbench");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("txn.sql"), SCRIPT)?;
        Ok(Self { dir })
    }

    /// One pgbench run (`-t N` per client, or `-T S` when `seconds`): every transaction's
    /// latency from its `--log` files, and its TPS.
    fn run(
        &self,
        bench: &Bench,
        clients: usize,
        count: u64,
        seconds: bool,
    ) -> Result<(Vec<Duration>, f64)> {
        let logs = self.dir.join("log");
        let _ = std::fs::remove_dir_all(&logs);
        std::fs::create_dir_all(&logs)?;
        let (c, j) = (clients.to_string(), clients.min(2).to_string());
        let n = count.to_string();
        let mut args = vec![
            "-f",
            "txn.sql",
            "-c",
            &c,
            "-j",
            &j,
            "-l",
            "--log-prefix",
            "log/tx",
        ];
        args.extend(if seconds { ["-T", &n] } else { ["-t", &n] });
        let out = bench.pg.pgbench("pgbench", &self.dir, &args)?;
        let tps = out
            .lines()
            .find_map(|l| l.strip_prefix("tps = "))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .with_context(|| format!("no tps in pgbench's output: {out}"))?;
        let mut lat = Vec::new();
        for file in std::fs::read_dir(&logs)? {
            let text = std::fs::read_to_string(file?.path())?;
            for line in text.lines() {
                // client_id transaction_no time script_no time_epoch time_us
                if let Some(us) = line.split_whitespace().nth(2).and_then(|v| v.parse().ok()) {
                    lat.push(Duration::from_micros(us));
                }
            }
        }
        Ok((lat, tps))
    }
}

/// The statements of `database` that took the most time since the last reset, and how
/// many statements ran (`pg_stat_statements`), printed; then the counts reset.
pub fn statements(bench: &Bench, database: &str, per: usize, what: &str) -> Result<()> {
    let total = bench.pg.psql(
        "postgres",
        &format!(
            "SELECT coalesce(sum(calls), 0) || ' ' || round(coalesce(sum(total_exec_time), 0)::numeric, 1) \
             FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '{database}'"
        ),
    )?;
    let top = bench.pg.psql(
        "postgres",
        &format!(
            "SELECT calls || ' | ' || round(total_exec_time::numeric, 1) || ' | ' || \
             round(mean_exec_time::numeric, 3) || ' | `' || \
             left(regexp_replace(query, '\\s+', ' ', 'g'), 110) || '`' \
             FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
             WHERE d.datname = '{database}' \
             ORDER BY (query ~* '^(BEGIN|COMMIT|START)') DESC, total_exec_time DESC LIMIT 14"
        ),
    )?;
    let (calls, time) = total.split_once(' ').unwrap_or(("0", "0"));
    let calls: f64 = calls.parse().unwrap_or(0.0);
    let time: f64 = time.parse().unwrap_or(0.0);
    println!(
        "\n{what}: {calls:.0} statements in `{database}` ({:.1} per request), {time:.1} ms of server time ({:.2} ms per request); transaction control first, then the top by time:\n",
        calls / per.max(1) as f64,
        time / per.max(1) as f64
    );
    println!("| calls | total ms | mean ms | statement |\n|---|---|---|---|");
    for line in top.lines() {
        println!("| {line} |");
    }
    bench
        .pg
        .psql("postgres", "SELECT pg_stat_statements_reset()")?;
    Ok(())
}

/// 16 writers for `seconds`, writer `w` on `bases[w % len]`: applied creates, their
/// rate, latencies, and the answers other than 201.
async fn load16(
    bases: &[String],
    seconds: u64,
    tag: &str,
) -> Result<(usize, f64, Vec<Duration>, usize)> {
    let client = reqwest::Client::new();
    let until = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..16 {
        let (client, base, tag) = (
            client.clone(),
            bases[w % bases.len()].clone(),
            tag.to_string(),
        );
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut other) = (Vec::new(), 0usize);
            let mut i = 0;
            while Instant::now() < until {
                let slug = format!("load/{tag}-w{w}-{i}");
                let t = Instant::now();
                match create(&client, &base, &slug, &slug, &note(&slug, i)).await {
                    Ok((201, _)) => ok.push(t.elapsed()),
                    _ => other += 1,
                }
                i += 1;
            }
            (ok, other)
        }));
    }
    let (mut all, mut other) = (Vec::new(), 0);
    for t in tasks {
        let (ok, o) = t.await?;
        all.extend(ok);
        other += o;
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok((all.len(), all.len() as f64 / elapsed, all, other))
}

/// A second instance on `url`, its cache at `cache`, the vault opened (one request) and
/// its start's work done.
async fn second(bench: &Bench, url: &str, tokens: &str, cache: &Path) -> Result<Daemon> {
    let b = bench.instance(url, tokens, cache, &[])?;
    get(
        &reqwest::Client::new(),
        &format!("{}/v1/notes?page_size=1", b.base),
    )
    .await?;
    wait_idle(b.child.id(), Duration::from_secs(300)).await?;
    Ok(b)
}

pub async fn run(bench: &Bench, want: &impl Fn(&str) -> bool, rows: &mut Vec<Row>) -> Result<()> {
    let url = bench.database("bench")?;
    let vault = bench.cli(&url, &["vault", "create", "bench"])?;
    let tokens = tokens(&[vault]);
    let a = bench.instance(&url, &tokens, &bench.root.join("cache-a"), &[])?;
    let client = reqwest::Client::new();
    let (status, body) = create(&client, &a.base, "warm/0", "warm-0", &note("warm", 0)).await?;
    if status != 201 {
        bail!("the first create answered {status}: {body}");
    }
    let pgb = PgBench::new(bench)?;

    if want("create") {
        let n = crate::common::env_num("NOTEVAULT_BENCH_CREATES", 300) as usize;
        eprintln!(
            "part 1: {n} sequential creates beside pgbench -c1 -t {n}, {} rounds",
            bench.rounds
        );
        let (mut nv_all, mut pg_all, mut ratios, mut per_round) = (vec![], vec![], vec![], vec![]);
        bench
            .pg
            .psql("postgres", "SELECT pg_stat_statements_reset()")?;
        for r in 0..bench.rounds {
            let mut lat = Vec::with_capacity(n);
            for i in 0..n {
                let slug = format!("create/r{r}-{i}");
                let t = Instant::now();
                let (status, body) =
                    create(&client, &a.base, &slug, &slug, &note(&slug, i)).await?;
                lat.push(t.elapsed());
                if status != 201 {
                    bail!("create {slug}: {status} {body}");
                }
            }
            if r == 0 {
                statements(
                    bench,
                    "bench",
                    n,
                    "statements of one round of single creates (round 1)",
                )?;
            }
            let (pg, _) = pgb.run(bench, 1, n as u64, false)?;
            let (c50, _) = stats(lat.clone());
            let (p50, _) = stats(pg.clone());
            ratios.push(c50.as_secs_f64() / p50.as_secs_f64());
            per_round.push(format!("{} / {}", ms(c50), ms(p50)));
            nv_all.extend(lat);
            pg_all.extend(pg);
        }
        let (c50, c99) = stats(nv_all);
        let (p50, p99) = stats(pg_all);
        let ratio = median(ratios.clone());
        row(
            rows,
            "create p50 / p99, one client, ~1 KB note (all rounds)",
            format!("{} / {}", ms(c50), ms(c99)),
            &format!(
                "pgbench -c1 transaction p50 / p99 {} / {}",
                ms(p50),
                ms(p99)
            ),
            "",
        );
        row(
            rows,
            "create p50 / pgbench p50, per round",
            per_round.join("; "),
            "interleaved, create first",
            "",
        );
        row(
            rows,
            "create p50 ÷ pgbench transaction p50 (median of rounds)",
            format!(
                "{ratio:.2}× (rounds: {})",
                ratios
                    .iter()
                    .map(|r| format!("{r:.2}×"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "≤ 2×",
            verdict(ratio <= 2.0),
        );
    }

    if want("writes") {
        let secs = bench.seconds;
        eprintln!(
            "part 2: 16 writers, {secs} s each, 1 and 2 instances beside pgbench -c16, {} rounds",
            bench.rounds
        );
        let mut r1 = vec![];
        let mut r2 = vec![];
        let mut tps = vec![];
        let mut detail = vec![];
        for r in 0..bench.rounds {
            bench
                .pg
                .psql("postgres", "SELECT pg_stat_statements_reset()")?;
            let (n1, rate1, lat1, bad1) =
                load16(std::slice::from_ref(&a.base), secs, &format!("one{r}")).await?;
            if r == 0 {
                statements(
                    bench,
                    "bench",
                    n1,
                    "statements of 16 writers on one instance (round 1)",
                )?;
            }
            let b = second(bench, &url, &tokens, &bench.root.join("cache-b")).await?;
            let (n2, rate2, lat2, bad2) =
                load16(&[a.base.clone(), b.base.clone()], secs, &format!("two{r}")).await?;
            drop(b);
            let (pg, t) = pgb.run(bench, 16, secs, true)?;
            let (a50, a99) = stats(lat1);
            let (b50, b99) = stats(lat2);
            let (g50, g99) = stats(pg);
            detail.push(format!(
                "round {}: 1 instance {rate1:.0}/s ({n1}, p50 {} p99 {}, {bad1} not 201); 2 instances {rate2:.0}/s ({n2}, p50 {} p99 {}, {bad2} not 201); pgbench {t:.0} TPS (p50 {} p99 {})",
                r + 1, ms(a50), ms(a99), ms(b50), ms(b99), ms(g50), ms(g99)
            ));
            r1.push(rate1 / t);
            r2.push(rate2 / t);
            tps.push(t);
        }
        for d in &detail {
            row(
                rows,
                "16 writers",
                d.clone(),
                "interleaved: 1 instance, 2 instances, pgbench",
                "",
            );
        }
        let (m1, m2) = (median(r1.clone()), median(r2.clone()));
        let fmt = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{:.0} %", x * 100.0))
                .collect::<Vec<_>>()
                .join(", ")
        };
        row(
            rows,
            "applied creates/s at 16 clients ÷ pgbench TPS, 1 instance (median)",
            format!("{:.0} % (rounds: {})", m1 * 100.0, fmt(&r1)),
            &format!(
                "≥ 50 % of pgbench -c16 (median {:.0} TPS)",
                median(tps.clone())
            ),
            verdict(m1 >= 0.5),
        );
        row(
            rows,
            "applied creates/s at 16 clients ÷ pgbench TPS, 2 instances (median)",
            format!("{:.0} % (rounds: {})", m2 * 100.0, fmt(&r2)),
            "≥ 50 % of pgbench -c16",
            verdict(m2 >= 0.5),
        );
    }

    if want("fresh") {
        let n = crate::common::env_num("NOTEVAULT_BENCH_FRESH", 200) as usize;
        eprintln!("part 4: {n} creates on A, each searched for on B");
        let b = second(bench, &url, &tokens, &bench.root.join("cache-b")).await?;
        let (mut polled, mut waited, mut missing) = (vec![], vec![], 0);
        for i in 0..n {
            let word = word_of(i);
            let slug = format!("fresh/{i}");
            let (status, receipt) = create(
                &client,
                &a.base,
                &slug,
                &slug,
                &format!("# Fresh {i}\n\n{word}\n"),
            )
            .await?;
            if status != 201 {
                bail!("create {slug}: {status} {receipt}");
            }
            let t = Instant::now();
            let seq = receipt["committed_seq"].as_i64().unwrap_or_default();
            let with_seq = i % 2 == 1;
            let found = loop {
                let q = if with_seq {
                    format!("{}/v1/search?q={word}&min_seq={seq}", b.base)
                } else {
                    format!("{}/v1/search?q={word}", b.base)
                };
                let res = get(&client, &q).await?;
                let hit = res["results"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|h| h["slug"] == slug.as_str()));
                if hit {
                    break true;
                }
                if t.elapsed() > Duration::from_secs(10) {
                    break false;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            };
            if !found {
                missing += 1;
                continue;
            }
            if with_seq {
                waited.push(t.elapsed())
            } else {
                polled.push(t.elapsed())
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(b);
        let (p50, p99) = stats(polled.clone());
        let (w50, w99) = stats(waited.clone());
        row(
            rows,
            &format!(
                "A's receipt → found on B, B's search polled every 2 ms ({} writes)",
                polled.len()
            ),
            format!("p50 {} / p99 {}", ms(p50), ms(p99)),
            "p50 ≤ 100 ms",
            verdict(p50 <= Duration::from_millis(100) && !polled.is_empty()),
        );
        row(
            rows,
            &format!(
                "A's receipt → found on B, one search with `min_seq` ({} writes)",
                waited.len()
            ),
            format!("p50 {} / p99 {}", ms(w50), ms(w99)),
            "p50 ≤ 100 ms",
            verdict(w50 <= Duration::from_millis(100) && !waited.is_empty()),
        );
        if missing > 0 {
            row(
                rows,
                "writes never found on B within 10 s",
                missing.to_string(),
                "0",
                "MISSED",
            );
        }
    }
    drop(a);
    Ok(())
}
