//! `cargo bench --bench soak`: latency under a mixed load on the real corpus (44k notes),
//! the way a busy desktop vault sees it: searches, line reads, plain and filtered
//! listings, grep, link reports, API writes (create, `:edit`, PATCH, DELETE) and an
//! editor saving files beside the daemon, all at once, at a fixed rate per kind
//! (~200 requests/s in all, about the rate of the issue's 10-minute run), plus MCP tool
//! calls and files renamed beside the daemon. Reports p50, p95, p99 and max per
//! operation, answers by HTTP status, the daemon's resident memory over time, and then
//! checks what must hold (issue 17):
//!
//! - (a) no 5xx; resident memory at the end within 10 % of the middle (three samples
//!   each); once settled, the listing equals the folder (paths and content hashes);
//!   `git fsck` of history clean;
//! - (b) crash rounds: 8 writers create notes, the daemon is killed (SIGKILL) at a
//!   random moment and restarted; every acknowledged write is on disk, whole, and in
//!   history, every idempotency key replays its receipt byte for byte, no temp file is
//!   left (`NOTEVAULT_SOAK_CRASH_ROUNDS`, default 5);
//! - (c) the editor race: an editor saving a note on disk (in place and by rename) while
//!   API edits hit the same note: no editor save is lost.
//!
//! It exits non-zero when one of them does not hold.
//!
//! Environment: `NOTEVAULT_SOAK_SECONDS` (default 600; CI runs 60 in the dev profile:
//! `cargo test --bench soak -- --bench`), `NOTEVAULT_SOAK_BIN` (the daemon
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
    /// Answers by HTTP status over the run (0: no answer at all).
    statuses: Mutex<BTreeMap<u16, u64>>,
}

impl Record {
    fn status(&self, status: u16) {
        *self
            .statuses
            .lock()
            .expect("record lock")
            .entry(status)
            .or_default() += 1;
    }

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
    ExternalRename,
    Mcp,
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
    (Kind::ExternalRename, 1.0),
    // Tool calls over /mcp (stateless 2026-07-28 POSTs): search and list_notes in turn.
    (Kind::Mcp, 5.0),
];

/// Notes only the rename task touches (so reads of the corpus never miss a renamed one).
const RENAMED: usize = 40;

struct Work {
    base: String,
    vault: PathBuf,
    client: reqwest::Client,
    slugs: Vec<String>,
    linked: Vec<String>,
    filters: Vec<String>,
    record: Record,
    /// The current name of each note the rename task moves around, in `soak-rename/`.
    renamed: Mutex<Vec<String>>,
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
        let (ok, status, body) = match res {
            Ok(r) => {
                let status = r.status();
                let body = r.json::<Value>().await.unwrap_or(Value::Null);
                (status.is_success(), status.as_u16(), body)
            }
            Err(_) => (false, 0, Value::Null),
        };
        self.record.put(op, t.elapsed(), ok);
        self.record.status(status);
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
        let (ok, status, body) = match res {
            Ok(r) => {
                let status = r.status();
                let body = r.json::<Value>().await.unwrap_or(Value::Null);
                (status.is_success(), status.as_u16(), body)
            }
            Err(_) => (false, 0, Value::Null),
        };
        self.record.put(op, t.elapsed(), ok);
        self.record.status(status);
        if !ok {
            eprintln!("{op} {path}: {body}");
        }
        Ok(body)
    }

    /// One MCP tool call (stateless POST); an answer that is an error counts as one.
    async fn mcp(&self, i: usize) -> Result<()> {
        let (op, tool, arguments) = if i.is_multiple_of(2) {
            (
                "mcp: search",
                "search",
                json!({"q": QUERIES[i % QUERIES.len()]}),
            )
        } else {
            ("mcp: list_notes", "list_notes", json!({"page_size": 20}))
        };
        let body = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "notevault-soak", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }});
        let t = Instant::now();
        let res = self
            .client
            .post(format!("{}/mcp", self.base))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .json(&body)
            .send()
            .await;
        let (ok, status) = match res {
            Ok(r) => {
                let status = r.status();
                let text = r.text().await.unwrap_or_default();
                let answered =
                    status.is_success() && text.trim_end().ends_with(r#""isError":false}}"#);
                (answered, status.as_u16())
            }
            Err(_) => (false, 0),
        };
        self.record.put(op, t.elapsed(), ok);
        self.record.status(status);
        Ok(())
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
            Kind::ExternalRename => {
                // A file manager renames a note beside the daemon.
                let k = i % RENAMED;
                let next = format!("r{k}-{i}");
                let dir = self.vault.join("soak-rename");
                let mut names = self.renamed.lock().expect("renamed lock");
                std::fs::rename(
                    dir.join(format!("{}.md", names[k])),
                    dir.join(format!("{next}.md")),
                )?;
                names[k] = next;
            }
            Kind::Mcp => self.mcp(i).await?,
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
    // Either list empty would leave a kind of request nothing to ask for (a corpus laid
    // out otherwise, e.g. copied one folder too deep).
    if slugs.is_empty() || linked.is_empty() {
        bail!(
            "{}: {} notes, {} under dendron-site/: not the corpus's layout",
            vault.display(),
            slugs.len(),
            linked.len()
        );
    }
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
    std::fs::create_dir_all(vault.join("soak-rename"))?;
    for k in 0..RENAMED {
        std::fs::write(
            vault.join(format!("soak-rename/r{k}.md")),
            format!("# Renamed {k}\n\nmoved around by the soak bench\n"),
        )?;
    }
    let work = Arc::new(Work {
        base: daemon.base.clone(),
        vault: vault.clone(),
        client,
        slugs,
        linked,
        filters,
        record: Record::default(),
        renamed: Mutex::new((0..RENAMED).map(|k| format!("r{k}")).collect()),
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
    let statuses = std::mem::take(&mut *work.record.statuses.lock().expect("record lock"));
    println!(
        "answers by status: {}",
        statuses
            .iter()
            .map(|(s, n)| if *s == 0 {
                format!("no answer {n}")
            } else {
                format!("{s} {n}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    );

    // What must hold after the load.
    let mut failed = Vec::new();
    let server_errors: u64 = statuses
        .iter()
        .filter(|(s, _)| **s >= 500 || **s == 0)
        .map(|(_, n)| n)
        .sum();
    if server_errors > 0 {
        failed.push(format!("{server_errors} answers were 5xx or none"));
    }
    // Each of three samples averaged: one sample under load swings with the answers in
    // flight (a grep's or a listing's buffers), a leak moves all three.
    let mean = |w: &[(u64, f64)]| w.iter().map(|(_, m)| m).sum::<f64>() / w.len().max(1) as f64;
    let (n, mid) = (rss.len(), rss.len() / 2);
    let start = rss[0].1;
    let middle = mean(&rss[mid.saturating_sub(1)..(mid + 2).min(n)]);
    let end = mean(&rss[n.saturating_sub(3)..]);
    let drift = (end - middle) / middle.max(1.0) * 100.0;
    println!("resident memory: start {start:.0} MiB, middle {middle:.0} MiB, end {end:.0} MiB (three samples each; {drift:+.1} % from the middle)");
    if drift.abs() > 10.0 {
        failed.push(format!(
            "resident memory moved {drift:+.1} % from the middle to the end"
        ));
    }
    let client = reqwest::Client::new();
    settle(&client, &daemon.base).await?;
    let (listed, on_disk, differ) = listing_against_folder(&client, &daemon.base, &vault).await?;
    println!("listing against the folder: {listed} listed, {on_disk} on disk, {differ} differ");
    if differ > 0 {
        failed.push(format!(
            "{differ} notes differ between the listing and the folder"
        ));
    }
    drop(daemon);
    match fsck(&state) {
        Ok(()) => println!("git fsck of history.git: clean"),
        Err(e) => failed.push(format!("git fsck: {e}")),
    }

    let rounds: usize = std::env::var("NOTEVAULT_SOAK_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let crash = crash_rounds(&bin, &vault, &state, rounds).await?;
    println!(
        "crash rounds: {rounds}, {} writes acknowledged, {} unanswered and retried, {} lost",
        crash.acknowledged,
        crash.retried,
        crash.lost.len()
    );
    for why in crash.lost.iter().take(10) {
        println!("  lost: {why}");
    }
    if !crash.lost.is_empty() {
        failed.push(format!("{} writes lost in crash rounds", crash.lost.len()));
    }
    let race = editor_race(&bin, &vault, &state).await?;
    println!(
        "editor race: {} editor saves, {} API edits applied, {} answered VERSION_MOVED, {} editor saves lost",
        race.saves, race.applied, race.moved, race.lost
    );
    if race.lost > 0 {
        failed.push(format!("{} editor saves lost", race.lost));
    }
    let _ = std::fs::remove_dir_all(&vault);
    if failed.is_empty() {
        println!("\nsoak: every check holds");
        Ok(())
    } else {
        bail!("{}", failed.join("; "))
    }
}

/// Wait until the index and history have caught up with every change (10 minutes at most).
async fn settle(client: &reqwest::Client, base: &str) -> Result<()> {
    let started = Instant::now();
    loop {
        let s: Value = client
            .get(format!("{base}/v1/index-status"))
            .send()
            .await?
            .json()
            .await?;
        if s["indexed_seq"] == s["committed_seq"] && s["history"]["pending"] == 0 {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("the daemon did not settle: {s}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every note the daemon lists (path and content hash) against the note files of the
/// folder, hashed here: `(listed, on disk, how many differ)`.
async fn listing_against_folder(
    client: &reqwest::Client,
    base: &str,
    vault: &Path,
) -> Result<(usize, usize, usize)> {
    let mut listed = BTreeMap::new();
    let mut token: Option<String> = None;
    loop {
        let mut url = format!("{base}/v1/notes?page_size=500");
        if let Some(t) = &token {
            url.push_str(&format!("&page_token={}", enc(t)));
        }
        let page: Value = client.get(url).send().await?.json().await?;
        for n in page["notes"].as_array().context("notes")? {
            listed.insert(
                n["path"].as_str().unwrap_or_default().to_string(),
                n["content_hash"].as_str().unwrap_or_default().to_string(),
            );
        }
        match page["next_page_token"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
    }
    // The folder as the README says the daemon sees it: every `.md` file but those in
    // `.git/`, `.obsidian/`, `.trash/`, the state directory, and editor swap and temp
    // files (walked here, not with the daemon's own code).
    let mut on_disk = BTreeMap::new();
    let walker = walkdir::WalkDir::new(vault).into_iter().filter_entry(|e| {
        let name = e.file_name().to_string_lossy();
        !(e.file_type().is_dir()
            && [".git", ".obsidian", ".trash", ".notevault"].contains(&name.as_ref()))
    });
    for entry in walker.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy();
        let temp = name.starts_with(".#")
            || name.ends_with('~')
            || name.starts_with(".notevault-tmp")
            || (name.starts_with('.') && name.ends_with(".swp"));
        if !entry.file_type().is_file() || !name.ends_with(".md") || temp {
            continue;
        }
        let rel = entry
            .path()
            .strip_prefix(vault)?
            .to_string_lossy()
            .into_owned();
        let bytes = std::fs::read(entry.path())?;
        on_disk.insert(rel, format!("blake3:{}", blake3::hash(&bytes).to_hex()));
    }
    let keys: std::collections::BTreeSet<&String> = listed.keys().chain(on_disk.keys()).collect();
    let differ: Vec<&&String> = keys
        .iter()
        .filter(|k| listed.get(**k) != on_disk.get(**k))
        .collect();
    for k in differ.iter().take(5) {
        println!(
            "  differs: {k}: listed {:?}, on disk {:?}",
            listed.get(**k),
            on_disk.get(**k)
        );
    }
    Ok((listed.len(), on_disk.len(), differ.len()))
}

fn fsck(state: &Path) -> Result<()> {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(state.join("history.git"))
        .args(["fsck", "--no-dangling", "--no-progress"])
        .output()?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

#[derive(Default)]
struct Crashes {
    acknowledged: usize,
    retried: usize,
    lost: Vec<String>,
}

/// A note body of writer `w`'s `i`th create in round `r`.
fn crash_body(r: usize, w: usize, i: usize) -> Value {
    json!({"slug": format!("soak-crash/r{r}-w{w}-{i}"),
           "content": format!("# Crash {r} {w} {i}\n\n{}\n", "written before a kill -9. ".repeat(1 + i % 7)),
           "agent_id": "soak"})
}

async fn post_note(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    body: &Value,
) -> Option<(u16, String)> {
    let res = client
        .post(format!("{base}/v1/notes"))
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .ok()?;
    let status = res.status().as_u16();
    Some((status, res.text().await.ok()?))
}

/// `rounds` times: 8 writers create notes until the daemon is killed (SIGKILL) at a
/// random moment; after a restart every acknowledged write is checked on disk, in
/// history and by its replay, the unanswered ones are retried, and no temp file may be
/// left.
async fn crash_rounds(bin: &str, vault: &Path, state: &Path, rounds: usize) -> Result<Crashes> {
    let mut out = Crashes::default();
    let client = reqwest::Client::new();
    for round in 0..rounds {
        let daemon = common::start_bin(bin, vault, state)?;
        type Answers = Arc<Mutex<Vec<(String, Value, u16, String)>>>;
        let answered: Answers = Arc::default();
        let unanswered: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let mut writers = Vec::new();
        for w in 0..8 {
            let (client, base) = (client.clone(), daemon.base.clone());
            let (answered, unanswered) = (answered.clone(), unanswered.clone());
            writers.push(tokio::spawn(async move {
                for i in 0.. {
                    let key = format!("soak-crash-{round}-{w}-{i}");
                    let body = crash_body(round, w, i);
                    match post_note(&client, &base, &key, &body).await {
                        Some((status, text)) => answered
                            .lock()
                            .expect("answers")
                            .push((key, body, status, text)),
                        None => {
                            unanswered.lock().expect("answers").push((key, body));
                            break;
                        }
                    }
                }
            }));
        }
        // A random moment: 150 to 1,500 ms of writes.
        let mut seed = [0u8; 2];
        getrandom::fill(&mut seed).map_err(|e| anyhow::anyhow!("{e}"))?;
        let wait = 150 + u64::from(u16::from_le_bytes(seed)) % 1350;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let mut daemon = daemon;
        daemon.child.kill()?; // SIGKILL
        daemon.child.wait()?;
        drop(daemon);
        for w in writers {
            let _ = w.await;
        }
        let daemon = common::start_bin(bin, vault, state)?;
        settle(&client, &daemon.base).await?;
        for entry in walkdir::WalkDir::new(vault)
            .into_iter()
            .filter_map(Result::ok)
        {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(".notevault-tmp")
            {
                out.lost
                    .push(format!("temp file left: {}", entry.path().display()));
            }
        }
        let log = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(state.join("history.git"))
            .args(["log", "--format=%B"])
            .output()?;
        let log = String::from_utf8_lossy(&log.stdout).into_owned();
        let answered = std::mem::take(&mut *answered.lock().expect("answers"));
        for (key, body, status, text) in &answered {
            if *status != 201 {
                // Refused before anything was written (a 4xx would be a bench bug; a 5xx
                // is counted by the load's tally only): nothing was acknowledged.
                out.lost.push(format!("{key}: answered {status}: {text}"));
                continue;
            }
            out.acknowledged += 1;
            let receipt: Value = serde_json::from_str(text)?;
            let slug = receipt["slug"].as_str().unwrap_or_default();
            match std::fs::read(vault.join(format!("{slug}.md"))) {
                Ok(bytes) if bytes == body["content"].as_str().unwrap_or_default().as_bytes() => {}
                Ok(_) => out.lost.push(format!("{slug}: torn or changed")),
                Err(_) => out.lost.push(format!("{slug}: acknowledged, missing")),
            }
            let version = receipt["version_id"].as_str().unwrap_or_default();
            if !log.contains(&format!("Notevault-Version: {version}")) {
                out.lost.push(format!("{slug}: {version} not in history"));
            }
            match post_note(&client, &daemon.base, key, body).await {
                Some((s, replay)) if s == *status && replay == *text => {}
                other => out.lost.push(format!("{key}: replay answered {other:?}")),
            }
        }
        let unanswered = std::mem::take(&mut *unanswered.lock().expect("answers"));
        for (key, body) in &unanswered {
            out.retried += 1;
            match post_note(&client, &daemon.base, key, body).await {
                Some((201, text)) => {
                    let receipt: Value = serde_json::from_str(&text)?;
                    let slug = receipt["slug"].as_str().unwrap_or_default();
                    let bytes = std::fs::read(vault.join(format!("{slug}.md"))).unwrap_or_default();
                    if bytes != body["content"].as_str().unwrap_or_default().as_bytes() {
                        out.lost
                            .push(format!("{key}: retried, file not as written"));
                    }
                }
                other => out.lost.push(format!("{key}: retry answered {other:?}")),
            }
        }
        drop(daemon);
    }
    Ok(out)
}

struct Race {
    saves: usize,
    applied: usize,
    moved: usize,
    lost: usize,
}

/// An editor appends its own lines to a note (in place, and by rename as vim does),
/// always from the file as it finds it, while API edits bump a counter in the same note
/// from the version they read: every line the editor wrote must be there at the end.
async fn editor_race(bin: &str, vault: &Path, state: &Path) -> Result<Race> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let path = vault.join("soak-race.md");
    std::fs::write(&path, "# Race\n\ncounter: 0\n")?;
    let daemon = common::start_bin(bin, vault, state)?;
    let client = reqwest::Client::new();
    settle(&client, &daemon.base).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let (editor_stop, editor_path) = (stop.clone(), path.clone());
    let editor = std::thread::spawn(move || -> Result<usize> {
        let mut n = 0;
        while !editor_stop.load(Ordering::Relaxed) && n < 300 {
            n += 1;
            std::thread::sleep(Duration::from_millis(5));
            let current = std::fs::read_to_string(&editor_path).unwrap_or_default();
            let next = format!("{current}editor {n}\n");
            if n % 2 == 0 {
                std::fs::write(&editor_path, &next)?;
            } else {
                let tmp = editor_path.with_file_name(".soak-race.md.swp");
                std::fs::write(&tmp, &next)?;
                std::fs::rename(&tmp, &editor_path)?;
            }
        }
        Ok(n)
    });
    let (mut applied, mut moved) = (0, 0);
    for i in 0..300 {
        let note: Value = client
            .get(format!("{}/v1/notes/soak-race?limit=2000", daemon.base))
            .send()
            .await?
            .json()
            .await?;
        let text: String = note["lines"]["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|l| l["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        let Some(line) = text.lines().find(|l| l.starts_with("counter: ")) else {
            continue;
        };
        let n: u64 = line["counter: ".len()..].parse().unwrap_or(0);
        let res = client
            .post(format!("{}/v1/notes/soak-race:edit", daemon.base))
            .header("Idempotency-Key", format!("soak-race-{i}"))
            .json(&json!({"version_id": note["version_id"], "old_string": line, "new_string": format!("counter: {}", n + 1)}))
            .send()
            .await?;
        match res.status().as_u16() {
            200 => applied += 1,
            409 => moved += 1,
            other => bail!("editor race: an API edit answered {other}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let saves = editor
        .join()
        .map_err(|_| anyhow::anyhow!("the editor panicked"))??;
    let text = std::fs::read_to_string(&path)?;
    let lost = (1..=saves)
        .filter(|k| !text.contains(&format!("editor {k}\n")))
        .count();
    drop(daemon);
    Ok(Race {
        saves,
        applied,
        moved,
        lost,
    })
}
