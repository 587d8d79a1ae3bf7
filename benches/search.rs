//! Search, grep and the index on the real corpus (44k notes), each figure beside its
//! reference or target, measured in the same run:
//!
//! - cold index build: `notevault reindex` (a process: start, scan, index, stop) against
//!   a bare tantivy indexer over the same files (read, index title and body, commit), and
//!   `NOTEVAULT_BENCH_BASELINE_BIN`'s reindex when given, interleaved run by run, wall
//!   time and CPU (user + system);
//! - spawn → every note searchable on a documentation-vault shape (6.3k notes, ~32 MB,
//!   many languages: 9 in 10 PowerShell-Docs pages plus 440 tldr pages in each of 8
//!   languages, copied from the corpus), a fresh state dir each run, beside the baseline
//!   binary when given;
//! - `GET /v1/search` at 8 and 64 keep-alive connections (a query mix of words, phrases
//!   and prefixes);
//! - whole-vault `GET /v1/grep` against `rg -n` over the same folder, and the same lines;
//! - write to searchable: `POST /v1/notes`, then `GET /v1/search?min_seq=` finds it;
//! - resident memory of the daemon after indexing, against its budget.
//!
//! `cargo bench --bench search`; `NOTEVAULT_BENCH_SECONDS` (load duration, default 10),
//! `NOTEVAULT_BENCH_RUNS` (index builds and greps, default 3), `NOTEVAULT_BENCH_BIN`
//! (another daemon binary, to compare two builds on one machine),
//! `NOTEVAULT_BENCH_BASELINE_BIN` (a reference build measured beside it in the index
//! figures), `NOTEVAULT_BENCH_INDEX_ONLY=1` (stop after the index figures).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the editor and the operator: they write the vault and read the environment"
)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::{load, Conn};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};

/// `(label, pattern, /v1/grep flags, rg flags)`.
const GREPS: &[(&str, &str, &str, &[&str])] = &[
    ("literal", "kubectl", "", &[]),
    ("regex", r"\bTODO\b|\bFIXME\b", "", &[]),
    (
        "case-insensitive word",
        "dendron",
        "&case=insensitive&word=true",
        &["-i", "-w"],
    ),
];

fn main() -> ExitCode {
    common::bench_main("search", run)
}

struct Table(Vec<[String; 4]>);

impl Table {
    fn row(&mut self, figure: &str, measured: String, reference: String, verdict: &str) {
        println!("  {figure}: {measured} ({reference}) {verdict}");
        self.0
            .push([figure.into(), measured, reference, verdict.into()]);
    }

    fn print(&self) {
        println!("\n| figure | measured | reference / target | |\n|---|---|---|---|");
        for [a, b, c, d] in &self.0 {
            println!("| {a} | {b} | {c} | {d} |");
        }
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

fn run() -> Result<()> {
    let Some(corpus) = common::corpus() else {
        println!("search bench skipped: ../shared/corpora/realvault.tar.gz is absent");
        return Ok(());
    };
    let seconds = common::env_num("NOTEVAULT_BENCH_SECONDS", 10);
    let bin = std::env::var("NOTEVAULT_BENCH_BIN").unwrap_or_else(|_| common::BIN.to_string());
    let runs = common::env_num("NOTEVAULT_BENCH_RUNS", 3) as usize;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = root.join("target/bench-search");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let vault = work.join("vault");
    let state = work.join("state");
    common::copy(&corpus, &vault)?;
    let (notes, corpus_bytes) = common::markdown_files(&vault);
    println!(
        "search bench: {notes} notes, {:.1} MB of markdown, {} cores, {seconds} s loads, {runs} runs",
        corpus_bytes as f64 / 1e6,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let mut table = Table(Vec::new());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;

    // First start: history, metadata and the index from nothing.
    {
        let daemon = common::start_bin(&bin, &vault, &state)?;
        let addr = common::addr_of(&daemon.base)?;
        rt.block_on(common::wait_history(&state))?;
        let st = rt.block_on(common::wait_indexed(addr, Duration::from_secs(600)))?;
        println!(
            "  first start: index of {} notes built in {} ms inside the daemon",
            st["search_index"]["synced_notes"], st["search_index"]["sync_ms"]
        );
    }

    // Cold index build: reindex (a whole process) against bare tantivy and the baseline
    // build, interleaved run by run.
    let baseline = std::env::var("NOTEVAULT_BENCH_BASELINE_BIN").ok();
    println!("  load average before the index figures: {}", loadavg());
    let mut ours = Vec::new();
    let mut bare = Vec::new();
    let mut base = Vec::new();
    let mut reported = String::new();
    for i in 0..runs {
        let (wall, cpu, said) = reindex(&bin, &vault, &state)?;
        ours.push((wall, cpu));
        reported = said;
        let dir = work.join(format!("bare-{i}"));
        let cpu0 = cpu_self();
        let t0 = Instant::now();
        let indexed = bare_tantivy(&vault, &dir)?;
        bare.push((t0.elapsed(), cpu_self() - cpu0));
        ensure!(
            indexed == notes,
            "bare tantivy indexed {indexed} of {notes}"
        );
        let _ = std::fs::remove_dir_all(&dir);
        if let Some(b) = &baseline {
            let (wall, cpu, _) = reindex(b, &vault, &state)?;
            base.push((wall, cpu));
        }
        println!(
            "  run {}: reindex {} ms (cpu {} ms), bare tantivy {} ms (cpu {} ms){}",
            i + 1,
            ours[i].0.as_millis(),
            ours[i].1.as_millis(),
            bare[i].0.as_millis(),
            bare[i].1.as_millis(),
            base.get(i).map_or(String::new(), |(w, c)| format!(
                ", baseline reindex {} ms (cpu {} ms)",
                w.as_millis(),
                c.as_millis()
            ))
        );
    }
    println!("  reindex says: {reported}");
    let med = |v: &[(Duration, Duration)], cpu: bool| {
        let mut v: Vec<Duration> = v.iter().map(|(w, c)| if cpu { *c } else { *w }).collect();
        v.sort();
        v[v.len() / 2]
    };
    let (ours_med, bare_med) = (med(&ours, false), med(&bare, false));
    let rate = notes as f64 / ours_med.as_secs_f64();
    let ratio = ours_med.as_secs_f64() / bare_med.as_secs_f64();
    table.row(
        "cold index build, `notevault reindex` (process wall, median)",
        format!("{} ms, {rate:.0} notes/s", ours_med.as_millis()),
        "target >= 20000 notes/s".into(),
        verdict(rate >= 20_000.0),
    );
    table.row(
        "  vs bare tantivy over the same files (read, title+body, commit)",
        format!("{ratio:.2}x ({} ms)", bare_med.as_millis()),
        "target <= 1.30x".into(),
        verdict(ratio <= 1.3),
    );
    table.row(
        "  CPU (user+sys, median): reindex / bare tantivy",
        format!(
            "{} ms / {} ms = {:.2}x",
            med(&ours, true).as_millis(),
            med(&bare, true).as_millis(),
            med(&ours, true).as_secs_f64() / med(&bare, true).as_secs_f64()
        ),
        "".into(),
        "",
    );
    if !base.is_empty() {
        let b = med(&base, false);
        table.row(
            "  baseline build's reindex (wall, median; CPU)",
            format!(
                "{} ms = {:.2}x bare; CPU {} ms",
                b.as_millis(),
                b.as_secs_f64() / bare_med.as_secs_f64(),
                med(&base, true).as_millis()
            ),
            format!(
                "this build / baseline: wall {:.2}x, CPU {:.2}x",
                ours_med.as_secs_f64() / b.as_secs_f64(),
                med(&ours, true).as_secs_f64() / med(&base, true).as_secs_f64()
            ),
            "",
        );
    }

    // Spawn -> every note searchable on the documentation-vault shape.
    let docs = work.join("docs-vault");
    let (docs_notes, docs_bytes) = docs_vault(&corpus, &docs)?;
    println!(
        "  documentation vault: {docs_notes} notes, {:.1} MB of markdown",
        docs_bytes as f64 / 1e6
    );
    let mut ours_docs = Vec::new();
    let mut base_docs = Vec::new();
    for i in 0..runs {
        let (t, n) = rt.block_on(spawn_to_searchable(&bin, &docs, &work.join("docs-state")))?;
        ensure!(n == docs_notes, "{n} of {docs_notes} notes indexed");
        ours_docs.push(t);
        let mut line = format!(
            "  run {}: spawn -> every note searchable {} ms",
            i + 1,
            t.as_millis()
        );
        if let Some(b) = &baseline {
            let (t, _) = rt.block_on(spawn_to_searchable(b, &docs, &work.join("docs-state")))?;
            base_docs.push(t);
            line.push_str(&format!(", baseline {} ms", t.as_millis()));
        }
        println!("{line}");
    }
    ours_docs.sort();
    base_docs.sort();
    let d = ours_docs[runs / 2];
    table.row(
        &format!(
            "spawn -> every note searchable, documentation vault ({docs_notes} notes, {:.0} MB; median)",
            docs_bytes as f64 / 1e6
        ),
        format!("{} ms", d.as_millis()),
        format!(
            "target <= 1000 ms{}",
            base_docs.get(runs / 2).map_or(String::new(), |b| format!(
                "; baseline build {} ms",
                b.as_millis()
            ))
        ),
        verdict(d <= Duration::from_secs(1)),
    );
    let _ = std::fs::remove_dir_all(&docs);
    let _ = std::fs::remove_dir_all(work.join("docs-state"));
    println!("  load average after the index figures: {}", loadavg());
    if std::env::var("NOTEVAULT_BENCH_INDEX_ONLY").is_ok_and(|v| v == "1") {
        table.print();
        return Ok(());
    }

    // Serving.
    let daemon = common::start_bin(&bin, &vault, &state)?;
    let addr = common::addr_of(&daemon.base)?;
    rt.block_on(common::wait_indexed(addr, Duration::from_secs(600)))?;
    let pid = daemon.child.id();
    let rss = common::proc_status_mib(pid, "VmRSS:")?;
    let budget =
        25.0 * notes as f64 / 10_000.0 + 40.0 + 1.1 * corpus_bytes as f64 / (1024.0 * 1024.0);
    table.row(
        "resident memory after indexing",
        format!("{rss:.0} MiB"),
        format!("target <= {budget:.0} MiB (25 MiB/10k notes + 40 MiB + 1.1x the {:.0} MiB corpus held for grep)", corpus_bytes as f64 / 1048576.0),
        verdict(rss <= budget),
    );

    let paths: Vec<String> = common::SEARCH_QUERIES
        .iter()
        .map(|q| format!("/v1/search?q={}", utf8_percent_encode(q, NON_ALPHANUMERIC)))
        .collect();
    let hits = rt.block_on(check_queries(addr, &paths))?;
    println!(
        "  {} queries, {hits} results on their first pages",
        paths.len()
    );
    let paths = Arc::new(paths);
    for connections in [8, 64] {
        let r = rt.block_on(load(
            addr,
            paths.clone(),
            connections,
            Duration::from_secs(1),
            Duration::from_secs(seconds),
        ))?;
        println!("  search at {connections} connections: {}", r.summary());
        ensure!(r.errors == 0, "{} searches failed", r.errors);
        table.row(
            &format!("search p50 / p99, {connections} connections"),
            format!("{} / {}", common::us(r.p50), common::us(r.p99)),
            "target p50 <= 1 ms, p99 <= 5 ms".into(),
            verdict(r.p50 <= Duration::from_millis(1) && r.p99 <= Duration::from_millis(5)),
        );
        table.row(
            &format!("search throughput, {connections} connections"),
            format!("{:.0} req/s", r.rps),
            "target >= 5000 req/s".into(),
            verdict(r.rps >= 5000.0),
        );
    }

    // Whole-vault grep against rg, same lines.
    for (label, pattern, flags, rg_flags) in GREPS {
        let want = rg_lines(&vault, pattern, rg_flags)?;
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        let mut got = BTreeSet::new();
        for _ in 0..runs.max(3) {
            let t0 = Instant::now();
            got = rt.block_on(grep_all(addr, pattern, flags))?;
            ours.push(t0.elapsed());
            let t0 = Instant::now();
            let out = Command::new("rg")
                .current_dir(&vault)
                .args(rg_args(rg_flags))
                .arg("--")
                .arg(pattern)
                .arg(".")
                .output()
                .context("rg runs")?;
            theirs.push(t0.elapsed());
            ensure!(!out.stdout.is_empty(), "rg found nothing for {pattern}");
        }
        ours.sort();
        theirs.sort();
        let (o, t) = (ours[ours.len() / 2], theirs[theirs.len() / 2]);
        let same = got == want;
        let ratio = o.as_secs_f64() / t.as_secs_f64();
        table.row(
            &format!(
                "grep {label} `{pattern}`, {} lines (median wall)",
                want.len()
            ),
            format!("{:.1} ms = {ratio:.2}x rg", o.as_secs_f64() * 1000.0),
            format!(
                "rg -n {:.1} ms; target <= 0.50x; same lines: {same}",
                t.as_secs_f64() * 1000.0
            ),
            verdict(ratio <= 0.5 && same),
        );
    }

    // Write to searchable.
    let samples = rt.block_on(write_to_searchable(addr, 200))?;
    let (p50, p99) = common::stats(samples);
    table.row(
        "write to searchable: POST /v1/notes, then search with min_seq finds it",
        format!("p50 {} / p99 {}", common::ms(p50), common::ms(p99)),
        "target p50 <= 25 ms".into(),
        verdict(p50 <= Duration::from_millis(25)),
    );
    let rss_after = common::proc_status_mib(pid, "VmRSS:")?;
    table.row(
        "resident memory after the loads",
        format!("{rss_after:.0} MiB"),
        format!("target <= {budget:.0} MiB"),
        verdict(rss_after <= budget),
    );
    drop(daemon);
    table.print();
    Ok(())
}

/// One `notevault reindex` process: wall time, CPU (user + system) and what it printed.
fn reindex(bin: &str, vault: &Path, state: &Path) -> Result<(Duration, Duration, String)> {
    let cpu0 = cpu_children();
    let t0 = Instant::now();
    let out = Command::new(bin)
        .args([
            "reindex",
            vault.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
        ])
        .env("NOTEVAULT_LOG", "warn")
        .output()?;
    let wall = t0.elapsed();
    ensure!(
        out.status.success(),
        "reindex failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((
        wall,
        cpu_children() - cpu0,
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    ))
}

fn rusage(who: libc::c_int) -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut r) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(r.ru_utime) + tv(r.ru_stime)
}

/// CPU time of the children waited for so far.
fn cpu_children() -> Duration {
    rusage(libc::RUSAGE_CHILDREN)
}

/// CPU time of this process (the bare indexer's threads; the idle runtime adds little).
fn cpu_self() -> Duration {
    rusage(libc::RUSAGE_SELF)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Languages of the tldr pages in the documentation vault, 440 pages each.
const DOCS_LANGUAGES: &[&str] = &["de", "fr", "es", "ja", "zh", "ru", "ko", "pt_BR"];
const DOCS_PAGES_PER_LANGUAGE: usize = 440;

/// A documentation vault's shape (obsidian-help: ~6.3k notes, ~32 MB, translations in
/// many languages) copied from the corpus: the PowerShell-Docs markdown files (long pages
/// with frontmatter) but every 10th in name order, and the first 440 tldr pages (in name
/// order) of each of [`DOCS_LANGUAGES`] (short pages, several scripts): 6,321 notes,
/// 32 MB. Notes and bytes of markdown.
fn docs_vault(corpus: &Path, dest: &Path) -> Result<(usize, u64)> {
    let _ = std::fs::remove_dir_all(dest);
    let mut files: Vec<std::path::PathBuf> = walkdir::WalkDir::new(corpus.join("PowerShell-Docs"))
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.file_name().to_string_lossy().ends_with(".md"))
        .map(|e| e.into_path())
        .enumerate()
        .filter(|(i, _)| i % 10 != 9)
        .map(|(_, p)| p)
        .collect();
    for lang in DOCS_LANGUAGES {
        let mut pages: Vec<std::path::PathBuf> =
            walkdir::WalkDir::new(corpus.join(format!("tldr/pages.{lang}")))
                .sort_by_file_name()
                .into_iter()
                .filter_map(Result::ok)
                .filter(|e| {
                    e.file_type().is_file() && e.file_name().to_string_lossy().ends_with(".md")
                })
                .map(|e| e.into_path())
                .collect();
        ensure!(
            pages.len() >= DOCS_PAGES_PER_LANGUAGE,
            "tldr/pages.{lang} has {} pages",
            pages.len()
        );
        pages.truncate(DOCS_PAGES_PER_LANGUAGE);
        files.extend(pages);
    }
    for from in &files {
        let to = dest.join(from.strip_prefix(corpus)?);
        std::fs::create_dir_all(to.parent().context("parent")?)?;
        std::fs::copy(from, &to)?;
    }
    Ok(common::markdown_files(dest))
}

/// Spawn `bin` on `vault` with a fresh `state` dir; the time until every note is
/// searchable (the index reflects every recorded change and its start-up sync is done),
/// and the notes the sync indexed.
async fn spawn_to_searchable(bin: &str, vault: &Path, state: &Path) -> Result<(Duration, usize)> {
    let _ = std::fs::remove_dir_all(state);
    let t0 = Instant::now();
    let daemon = common::start_bin(bin, vault, state)?;
    let addr = common::addr_of(&daemon.base)?;
    let st = common::wait_indexed(addr, Duration::from_secs(600)).await?;
    let took = t0.elapsed();
    let n = st["search_index"]["synced_notes"].as_u64().unwrap_or(0) as usize;
    drop(daemon);
    Ok((took, n))
}

async fn check_queries(addr: std::net::SocketAddr, paths: &[String]) -> Result<usize> {
    let mut conn = Conn::open(addr).await?;
    let mut hits = 0;
    for p in paths {
        hits += common::get_json(&mut conn, p).await?["results"]
            .as_array()
            .map_or(0, Vec::len);
    }
    Ok(hits)
}

/// The bare reference: walk, read, index file stem as title and the text as body
/// (tantivy's default tokenizer, positions), commit, wait for merges.
fn bare_tantivy(vault: &Path, dir: &Path) -> Result<usize> {
    use tantivy::schema::{Schema, TEXT};
    std::fs::create_dir_all(dir)?;
    let mut b = Schema::builder();
    let title = b.add_text_field("title", TEXT);
    let body = b.add_text_field("body", TEXT);
    let index = tantivy::Index::create_in_dir(dir, b.build())?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let mut writer: tantivy::IndexWriter =
        index.writer_with_num_threads(threads, 64_000_000 * threads)?;
    let mut n = 0;
    for e in walkdir::WalkDir::new(vault)
        .into_iter()
        .filter_map(Result::ok)
    {
        if !(e.file_type().is_file() && e.file_name().to_string_lossy().ends_with(".md")) {
            continue;
        }
        let bytes = std::fs::read(e.path())?;
        let mut doc = tantivy::TantivyDocument::default();
        doc.add_text(
            title,
            e.path().file_stem().unwrap_or_default().to_string_lossy(),
        );
        doc.add_text(body, String::from_utf8_lossy(&bytes));
        writer.add_document(doc)?;
        n += 1;
    }
    writer.commit()?;
    writer.wait_merging_threads()?;
    Ok(n)
}

fn rg_args(flags: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["-n", "-L", "--hidden", "--no-ignore", "-g", "*.md"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for skip in ["!.obsidian", "!.trash", "!.git", "!.notevault"] {
        args.push("-g".into());
        args.push(skip.into());
    }
    args.extend(flags.iter().map(|s| s.to_string()));
    args
}

/// `(path, line, text)` of every line `rg -n` finds.
fn rg_lines(
    vault: &Path,
    pattern: &str,
    flags: &[&str],
) -> Result<BTreeSet<(String, u64, String)>> {
    let out = Command::new("rg")
        .current_dir(vault)
        .args(rg_args(flags))
        .arg("--json")
        .arg("--")
        .arg(pattern)
        .arg(".")
        .output()
        .context("rg (ripgrep) must be installed for this bench")?;
    let mut set = BTreeSet::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if v["type"] != "match" {
            continue;
        }
        let d = &v["data"];
        let path = d["path"]["text"].as_str().unwrap_or_default();
        let text = d["lines"]["text"].as_str().unwrap_or_default();
        let text = text.trim_end_matches('\n').trim_end_matches('\r');
        set.insert((
            path.trim_start_matches("./").to_string(),
            d["line_number"].as_u64().unwrap_or(0),
            text.chars().take(400).collect(),
        ));
    }
    Ok(set)
}

async fn grep_all(
    addr: std::net::SocketAddr,
    pattern: &str,
    flags: &str,
) -> Result<BTreeSet<(String, u64, String)>> {
    let mut conn = Conn::open(addr).await?;
    let mut set = BTreeSet::new();
    let mut token: Option<String> = None;
    loop {
        let mut path = format!(
            "/v1/grep?pattern={}{flags}&page_size=1000",
            utf8_percent_encode(pattern, NON_ALPHANUMERIC)
        );
        if let Some(t) = &token {
            path.push_str(&format!("&page_token={t}"));
        }
        let page = common::get_json(&mut conn, &path).await?;
        for r in page["results"].as_array().context("results")? {
            let p = r["path"].as_str().unwrap_or_default().to_string();
            for l in r["lines"].as_array().context("lines")? {
                set.insert((
                    p.clone(),
                    l["n"].as_u64().unwrap_or(0),
                    l["text"].as_str().unwrap_or_default().to_string(),
                ));
            }
        }
        match page["next_page_token"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => return Ok(set),
        }
    }
}

/// Create a note with a word of its own, then search for it with the receipt's seq.
async fn write_to_searchable(addr: std::net::SocketAddr, n: usize) -> Result<Vec<Duration>> {
    let client = reqwest::Client::new();
    let base = format!("http://{addr}");
    let mut conn = Conn::open(addr).await?;
    let mut out = Vec::with_capacity(n);
    let tag = std::process::id();
    for i in 0..n {
        let word = format!("zq{tag}x{i}marker");
        let t0 = Instant::now();
        let res = client
            .post(format!("{base}/v1/notes"))
            .header("Idempotency-Key", format!("bench-search-{tag}-{i}"))
            .json(&serde_json::json!({"slug": format!("bench-search/{word}"), "content": format!("# {word}\nbench note\n")}))
            .send()
            .await?;
        ensure!(res.status().as_u16() == 201, "create: {}", res.status());
        let seq = res.json::<serde_json::Value>().await?["committed_seq"]
            .as_i64()
            .context("seq")?;
        let page =
            common::get_json(&mut conn, &format!("/v1/search?q={word}&min_seq={seq}")).await?;
        let found = page["results"].as_array().map_or(0, Vec::len);
        out.push(t0.elapsed());
        ensure!(found == 1, "{word} not found after min_seq {seq}: {page}");
    }
    Ok(out)
}
