//! `cargo bench --bench soak`: latency under a mixed load on the real corpus (44k notes),
//! the way a busy desktop vault sees it: searches, line reads, plain and filtered
//! listings, grep, link reports, API writes (create, `:edit`, PATCH, DELETE) and an
//! editor saving files beside the daemon, all at once, at a fixed rate per kind
//! (~200 requests/s in all, about the rate of the 10-minute run). Reports p50,
//! p95, p99 and max per operation, errors, and the daemon's resident memory over time.
//!
//! Environment: `NOTEVAULT_SOAK_SECONDS` (default 600), `NOTEVAULT_SOAK_BIN` (the daemon
//! binary to run, to compare two builds on one machine; default this build's),
//! `NOTEVAULT_CORPUS` (the tarball). See `benches/README.md`.

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the editor and the operator: they write the vault and read the environment"
)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use common::{copy, corpus, rank_percentile, wait_history};
use serde_json::{json, Value};

/// Latencies and errors per operation.
#[derive(Default)]
struct Record {
    ops: Mutex<BTreeMap<&'static str, (Vec<Duration>, u64)>>,
}

impl Record {
    fn put(&self, op: &'static str, took: Duration, ok: bool) {
        let mut ops = self.ops.lock().expect("record lock");
        let e = ops.entry(op).or_default();
        if ok {
            e.0.push(took);
        } else {
            e.1 += 1;
        }
    }
}

/// Each kind of work: how many times a second, and what one request is.
#[derive(Clone, Copy)]
enum Kind {
    Search,
    Read,
    List,
    ListFiltered,
    Links,
    Grep,
    Writes,
    ExternalEdit,
}

const MIX: &[(Kind, f64)] = &[
    (Kind::Search, 70.0),
    (Kind::Read, 60.0),
    (Kind::List, 15.0),
    (Kind::ListFiltered, 15.0),
    (Kind::Links, 20.0),
    (Kind::Grep, 3.0),
    // Each tick is one of create, :edit, PATCH, DELETE in turn.
    (Kind::Writes, 10.0),
    (Kind::ExternalEdit, 4.0),
];

struct Work {
    base: String,
    vault: PathBuf,
    client: reqwest::Client,
    slugs: Vec<String>,
    linked: Vec<String>,
    filters: Vec<String>,
    record: Record,
}

fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

const QUERIES: &[&str] = &[
    "kubectl",
    "git rebase",
    "\"pull request\"",
    "docker container",
    "powershell remoting",
    "Get-ChildItem",
    "dendron",
    "vim",
    "postgres index",
    "tags:schema",
    "archive*",
    "network",
];

const GREPS: &[&str] = &["kubectl", "TODO", "dendron", "Invoke-Command"];

impl Work {
    async fn get(&self, op: &'static str, path: &str) -> Result<Value> {
        let t = Instant::now();
        let res = self.client.get(format!("{}{path}", self.base)).send().await;
        let (ok, body) = match res {
            Ok(r) => {
                let ok = r.status().is_success();
                (ok, r.json::<Value>().await.unwrap_or(Value::Null))
            }
            Err(_) => (false, Value::Null),
        };
        self.record.put(op, t.elapsed(), ok);
        Ok(body)
    }

    async fn send(
        &self,
        op: &'static str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        key: &str,
    ) -> Result<Value> {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("Idempotency-Key", key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let t = Instant::now();
        let res = req.send().await;
        let (ok, body) = match res {
            Ok(r) => {
                let ok = r.status().is_success();
                (ok, r.json::<Value>().await.unwrap_or(Value::Null))
            }
            Err(_) => (false, Value::Null),
        };
        self.record.put(op, t.elapsed(), ok);
        if !ok {
            eprintln!("{op} {path}: {body}");
        }
        Ok(body)
    }

    fn pick<'a>(&self, list: &'a [String], i: usize) -> &'a str {
        &list[(i.wrapping_mul(2_654_435_761)) % list.len()]
    }

    /// One request of `kind`; `i` counts this kind's requests.
    async fn one(&self, kind: Kind, i: usize, writer: &mut Writer) -> Result<()> {
        match kind {
            Kind::Search => {
                let q = QUERIES[i % QUERIES.len()];
                self.get("search", &format!("/v1/search?q={}", enc(q)))
                    .await?;
            }
            Kind::Read => {
                let slug = self.pick(&self.slugs, i);
                self.get("read", &format!("/v1/notes/{}?limit=200", enc(slug)))
                    .await?;
            }
            Kind::List => {
                // A first page, a page further on, a folder's page.
                let path = match i % 3 {
                    0 => "/v1/notes?page_size=50".to_string(),
                    1 => {
                        let after = self.pick(&self.slugs, i);
                        let prefix = after.split('/').next().unwrap_or("");
                        format!("/v1/notes?page_size=50&prefix={}%2F", enc(prefix))
                    }
                    _ => "/v1/notes?page_size=100&order_by=updated_at%20desc".to_string(),
                };
                let page = self.get("list", &path).await?;
                if let Some(token) = page["next_page_token"].as_str() {
                    if i % 3 != 2 {
                        self.get("list", &format!("{path}&page_token={}", enc(token)))
                            .await?;
                    }
                }
            }
            Kind::ListFiltered => {
                let f = &self.filters[i % self.filters.len()];
                self.get("list filtered", &format!("/v1/notes?filter={}", enc(f)))
                    .await?;
            }
            Kind::Links => {
                let slug = self.pick(&self.linked, i);
                self.get("links", &format!("/v1/notes/{}:links", enc(slug)))
                    .await?;
            }
            Kind::Grep => {
                let p = GREPS[i % GREPS.len()];
                self.get(
                    "grep",
                    &format!("/v1/grep?pattern={}&literal=true&page_size=100", enc(p)),
                )
                .await?;
            }
            Kind::Writes => writer.step(self).await?,
            Kind::ExternalEdit => {
                // An editor saves a note: in place, a line appended.
                let slug = self.pick(&self.slugs, i.wrapping_add(7));
                let path = self.vault.join(format!("{slug}.md"));
                if let Ok(mut text) = std::fs::read_to_string(&path) {
                    text.push_str(&format!("\nedited by the soak bench ({i})\n"));
                    std::fs::write(&path, text)?;
                }
            }
        }
        Ok(())
    }
}

/// The API writer: create, `:edit`, PATCH, DELETE of its own notes, in turn.
#[derive(Default)]
struct Writer {
    n: usize,
    step: usize,
    version: String,
}

impl Writer {
    async fn step(&mut self, w: &Work) -> Result<()> {
        use reqwest::Method;
        let slug = format!("soak/w{}", self.n);
        let path = format!("/v1/notes/{}", enc(&slug));
        let key = format!("soak-{}-{}", self.n, self.step);
        let receipt = match self.step {
            0 => {
                let body = json!({"slug": slug, "content": format!("# Soak {}\n\nfirst version\n", self.n), "agent_id": "soak"});
                w.send("write: create", Method::POST, "/v1/notes", Some(body), &key)
                    .await?
            }
            1 => {
                let body = json!({"version_id": self.version, "old_string": "first version", "new_string": "second version", "agent_id": "soak"});
                w.send(
                    "write: :edit",
                    Method::POST,
                    &format!("{path}:edit"),
                    Some(body),
                    &key,
                )
                .await?
            }
            2 => {
                let body = json!({"status": "done", "tags": ["soak", "bench/soak"]});
                w.send(
                    "write: PATCH",
                    Method::PATCH,
                    &format!("{path}?update_mask=status,tags"),
                    Some(body),
                    &key,
                )
                .await?
            }
            _ => {
                w.send("write: DELETE", Method::DELETE, &path, None, &key)
                    .await?
            }
        };
        self.version = receipt["version_id"].as_str().unwrap_or("").to_string();
        self.step += 1;
        if self.step == 4 {
            self.step = 0;
            self.n += 1;
        }
        Ok(())
    }
}

/// The vault's notes (slugs), skipping the folders the daemon does not serve.
fn slugs_of(vault: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![vault.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() && !name.starts_with('.') {
                stack.push(e.path());
            } else if ft.is_file() && name.ends_with(".md") {
                if let Ok(rel) = e.path().strip_prefix(vault) {
                    let rel = rel.to_string_lossy();
                    out.push(rel.strip_suffix(".md").unwrap_or(&rel).to_string());
                }
            }
        }
    }
    out.sort();
    out
}

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() -> std::process::ExitCode {
    common::bench_main("soak", || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
            .block_on(run())
    })
}

async fn run() -> Result<()> {
    let Some(corpus) = corpus() else {
        println!("skipped: ../shared/corpora/realvault.tar.gz not found");
        return Ok(());
    };
    let seconds: u64 = std::env::var("NOTEVAULT_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let bin = std::env::var("NOTEVAULT_SOAK_BIN").unwrap_or_else(|_| common::BIN.to_string());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-corpus/soak-run");
    std::fs::create_dir_all(&root)?;
    let vault = root.join("vault");
    let state = root.join("state");
    let _ = std::fs::remove_dir_all(&state);
    copy(&corpus, &vault)?;
    let slugs = slugs_of(&vault);

    let daemon = common::start_bin(&bin, &vault, &state)?;
    let pid = daemon.child.id();
    wait_history(&state).await?;
    let client = reqwest::Client::builder().tcp_nodelay(true).build()?;
    // The index catches up with the vault before anything is measured.
    let started = Instant::now();
    loop {
        let s: Value = client
            .get(format!("{}/v1/index-status", daemon.base))
            .send()
            .await?
            .json()
            .await?;
        if s["indexed_seq"] == s["committed_seq"] && s["history"]["pending"] == 0 {
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            bail!("the index did not catch up: {s}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    // What the load asks for: notes with links, frequent tags, folders.
    let linked: Vec<String> = slugs
        .iter()
        .filter(|s| s.starts_with("dendron-site/"))
        .cloned()
        .collect();
    let tags: Value = client
        .get(format!(
            "{}/v1/tags?order_by=count%20desc&page_size=8",
            daemon.base
        ))
        .send()
        .await?
        .json()
        .await?;
    let mut filters: Vec<String> = tags["tags"]
        .as_array()
        .context("tags")?
        .iter()
        .filter_map(|t| t["tag"].as_str())
        .map(|t| format!("tags:\"{t}\""))
        .collect();
    filters.extend(
        [
            "folder = \"til/git\"",
            "folder = \"dendron-site/vault\" AND status = active",
            "path = \"PowerShell-Docs/reference/7.5/*\"",
            "tags:\"soak\"",
        ]
        .map(String::from),
    );
    let work = Arc::new(Work {
        base: daemon.base.clone(),
        vault: vault.clone(),
        client,
        slugs,
        linked,
        filters,
        record: Record::default(),
    });
    eprintln!(
        "soak: {} notes, {} s, daemon {bin}, filters {:?}",
        work.slugs.len(),
        seconds,
        work.filters
    );

    let rss_start = rss_mib(pid);
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for &(kind, rate) in MIX {
        let work = work.clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut writer = Writer::default();
            let mut i = 0usize;
            loop {
                tick.tick().await;
                if Instant::now() >= until {
                    break;
                }
                work.one(kind, i, &mut writer).await?;
                i += 1;
            }
            anyhow::Ok(())
        }));
    }
    // Resident memory, ten times over the run.
    let mut rss = vec![(0u64, rss_start)];
    let step = Duration::from_secs((seconds / 10).max(1));
    let begin = Instant::now();
    while Instant::now() + step <= until {
        tokio::time::sleep(step).await;
        rss.push((begin.elapsed().as_secs(), rss_mib(pid)));
    }
    for t in tasks {
        t.await??;
    }
    rss.push((begin.elapsed().as_secs(), rss_mib(pid)));

    let ops = std::mem::take(&mut *work.record.ops.lock().expect("record lock"));
    let total: usize = ops.values().map(|(v, e)| v.len() + *e as usize).sum();
    let errors: u64 = ops.values().map(|(_, e)| e).sum();
    println!(
        "\nsoak, {} notes, {seconds} s, {total} requests ({:.0}/s), {errors} errors\n",
        work.slugs.len(),
        total as f64 / seconds as f64
    );
    println!("| operation | requests | errors | p50 | p95 | p99 | max | target |");
    println!("|---|---|---|---|---|---|---|---|");
    let f = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
    for (op, (mut v, e)) in ops {
        v.sort_unstable();
        let target = match op {
            "links" => "p50 <= 2 ms",
            "list" | "list filtered" => "p95 <= 20 ms",
            o if o.starts_with("write") => "p50 <= 10 ms, p99 <= 50 ms",
            _ => "",
        };
        println!(
            "| {op} | {} | {e} | {} | {} | {} | {} | {target} |",
            v.len(),
            f(rank_percentile(&v, 50.0)),
            f(rank_percentile(&v, 95.0)),
            f(rank_percentile(&v, 99.0)),
            f(v.last().copied().unwrap_or_default()),
        );
    }
    println!(
        "\nresident memory (MiB) by second: {}",
        rss.iter()
            .map(|(t, m)| format!("{t}s {m:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    drop(daemon);
    let _ = std::fs::remove_dir_all(&vault);
    Ok(())
}
