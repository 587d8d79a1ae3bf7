//! Relevance on the real corpus: natural-language questions (`benches/relevance/
//! questions.tsv`, each naming the note that answers it and its split, `tune` or
//! `held`; scored overall, per split and per vault style) asked of `GET /v1/search`, and of
//! qmd's lexical search (npm `@tobilu/qmd`: its MCP `query` tool with one `lex` search,
//! no reranking) over the same folder, in the same run:
//!
//! - MRR@10 (the mean of 1/rank of the answering note in the top 10, 0 when absent),
//!   hits@1, hits@10, and empty answers (every question has words that occur in the
//!   vault, so an empty answer is a miss);
//! - search latency of the questions at 8 keep-alive connections (p50, p99, req/s).
//!
//! Also, for comparison: notevault with `match=all` (every word required, the reading
//! before questions), and with `NOTEVAULT_BENCH_BASELINE_BIN` another daemon binary (an
//! older build) asked the same questions.
//!
//! With `NOTEVAULT_EMBED_MODEL` set (a local model folder), the daemon embeds the notes
//! and a `mode=hybrid` row is added. `NOTEVAULT_BENCH_EMBED_MODELS` (model folders, comma
//! separated: `benches/relevance/wordllama.sh` prints a static one, `minilm.sh` a
//! transformer) adds a daemon per model, each with its own vectors: a `mode=hybrid` row
//! per model, the time to embed the vault, each question's first search (no kept query
//! vector) and the questions again at 8 connections.
//! `cargo bench --bench relevance`; `NOTEVAULT_BENCH_SECONDS` (load duration, default 10),
//! `NOTEVAULT_BENCH_QMD=0` skips qmd (which `benches/relevance/qmd.sh` installs under
//! `target/qmd/` with npm, with the Node.js 22 it needs, on first use).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the operator: they read the environment"
)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::{load, Conn};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};

const QUESTIONS: &str = include_str!("relevance/questions.tsv");
/// Results considered per question.
const TOP: usize = 10;

fn main() -> std::process::ExitCode {
    common::bench_main("relevance", run)
}

struct Question {
    text: String,
    /// The answering note's slug; `*` matches one path segment.
    answer: String,
    /// `held`: never read for misses while tuning, scored apart.
    held: bool,
}

impl Question {
    /// The vault style: the corpus folder its answer lives in.
    fn set(&self) -> &str {
        self.answer.split('/').next().unwrap_or("")
    }
}

fn questions() -> Vec<Question> {
    QUESTIONS
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut cols = l.split('\t');
            let q = cols.next().unwrap_or_default();
            let a = cols.next().expect("question<TAB>slug<TAB>split");
            let held = match cols.next().map(str::trim) {
                Some("held") => true,
                Some("tune") | None => false,
                Some(other) => panic!("split must be tune or held, not {other:?}"),
            };
            Question {
                text: q.trim().to_string(),
                answer: a.trim().to_string(),
                held,
            }
        })
        .collect()
}

/// Case and `_`/`-` folded (qmd files notes under lower-cased, dashed names).
fn fold(s: &str) -> String {
    s.to_lowercase().replace('_', "-")
}

fn is_answer(pattern: &str, slug: &str) -> bool {
    let p: Vec<String> = pattern.split('/').map(fold).collect();
    let s: Vec<String> = slug.split('/').map(fold).collect();
    p.len() == s.len() && p.iter().zip(&s).all(|(p, s)| p == "*" || p == s)
}

/// What one system answered: per question, the slugs of its top results.
struct Answers {
    name: String,
    ranked: Vec<Vec<String>>,
}

struct Scores {
    mrr: f64,
    hits1: usize,
    hits10: usize,
    empty: usize,
    n: usize,
}

fn score(questions: &[Question], answers: &Answers) -> Scores {
    score_where(questions, answers, |_| true)
}

/// Scores over the questions `keep` selects (a vault style, a split).
fn score_where(
    questions: &[Question],
    answers: &Answers,
    keep: impl Fn(&Question) -> bool,
) -> Scores {
    let mut s = Scores {
        mrr: 0.0,
        hits1: 0,
        hits10: 0,
        empty: 0,
        n: 0,
    };
    for (q, ranked) in questions.iter().zip(&answers.ranked) {
        if !keep(q) {
            continue;
        }
        s.n += 1;
        if ranked.is_empty() {
            s.empty += 1;
        }
        if let Some(i) = ranked
            .iter()
            .take(TOP)
            .position(|slug| is_answer(&q.answer, slug))
        {
            s.mrr += 1.0 / (i + 1) as f64;
            s.hits10 += 1;
            if i == 0 {
                s.hits1 += 1;
            }
        }
    }
    s.mrr /= s.n.max(1) as f64;
    s
}

fn run() -> Result<()> {
    let Some(corpus) = common::corpus() else {
        println!("relevance bench skipped: ../shared/corpora/realvault.tar.gz is absent");
        return Ok(());
    };
    let questions = questions();
    let seconds = common::env_num("NOTEVAULT_BENCH_SECONDS", 10);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = root.join("target/bench-relevance");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let vault = work.join("vault");
    common::copy(&corpus, &vault)?;
    println!(
        "relevance bench: {} questions over {}, top {TOP}, {seconds} s loads",
        questions.len(),
        vault.display()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut systems: Vec<Answers> = Vec::new();
    // notevault, as built: questions read with match=any (the default), then match=all.
    let latency = {
        let daemon = common::start(&vault, &work.join("state"))?;
        let addr: std::net::SocketAddr = daemon.base.trim_start_matches("http://").parse()?;
        rt.block_on(common::wait_indexed(addr, Duration::from_secs(600)))?;
        let mut modes = vec![("notevault", ""), ("notevault match=all", "&match=all")];
        // With a local embedding model (the daemon inherits NOTEVAULT_EMBED_MODEL), the
        // hybrid column too; `wait_indexed` waited for every note's vectors.
        let modes_hybrid = std::env::var_os("NOTEVAULT_EMBED_MODEL").is_some();
        if modes_hybrid {
            let st = rt.block_on(async {
                let mut conn = Conn::open(addr).await?;
                common::get_json(&mut conn, "/v1/index-status").await
            })?;
            println!("  embeddings: {}", st["embeddings"]);
            modes.push((
                "notevault mode=hybrid (NOTEVAULT_EMBED_MODEL)",
                "&mode=hybrid",
            ));
        }
        for (name, extra) in modes {
            systems.push(Answers {
                name: name.into(),
                ranked: rt.block_on(ask(addr, &questions, extra))?,
            });
        }
        // The questions at 8 connections: lexical, then (with a model) hybrid.
        let mut loads = vec![("", "")];
        if modes_hybrid {
            loads.push(("mode=hybrid ", "&mode=hybrid"));
        }
        let mut latency = Vec::new();
        for (label, extra) in loads {
            let r = rt.block_on(at_8_connections(addr, &questions, extra, seconds))?;
            ensure!(r.errors == 0, "{} {label}searches failed", r.errors);
            println!(
                "  notevault {label}questions at 8 connections: {}",
                r.summary()
            );
            latency.push(format!(
                "{label}p50 {} / p99 {}, {:.0} req/s",
                common::us(r.p50),
                common::us(r.p99),
                r.rps
            ));
        }
        latency.join("; ")
    };

    // Each model of NOTEVAULT_BENCH_EMBED_MODELS: a daemon of its own (its own vectors),
    // hybrid answers, the time to embed the vault, each question's first search and the
    // questions at 8 connections.
    let models = std::env::var("NOTEVAULT_BENCH_EMBED_MODELS").unwrap_or_default();
    let mut latency = latency;
    for (i, model) in models.split(',').filter(|m| !m.is_empty()).enumerate() {
        let started = Instant::now();
        let daemon = common::start_env(
            common::BIN,
            &vault,
            &work.join(format!("state-model-{i}")),
            &[("NOTEVAULT_EMBED_MODEL", model)],
        )?;
        let addr: std::net::SocketAddr = daemon.base.trim_start_matches("http://").parse()?;
        let st = rt.block_on(common::wait_indexed(addr, Duration::from_secs(6 * 3600)))?;
        let e = &st["embeddings"];
        ensure!(
            e["state"] == "ready",
            "the model {model} was not loaded: {e}"
        );
        let name = format!(
            "notevault mode=hybrid ({} {})",
            e["kind"].as_str().unwrap_or("?"),
            Path::new(model)
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
        );
        println!(
            "  {name}: {} notes embedded in {:.0} s from the daemon's spawn; {e}",
            e["notes"],
            started.elapsed().as_secs_f64()
        );
        let (ranked, took) = rt.block_on(ask_timed(addr, &questions, "&mode=hybrid"))?;
        let mut took = took;
        took.sort_unstable();
        let first = format!(
            "{name}, each question's first search (one connection): p50 {} / p99 {}",
            common::us(took[took.len() / 2]),
            common::us(took[took.len() * 99 / 100])
        );
        println!("  {first}");
        let r = rt.block_on(at_8_connections(addr, &questions, "&mode=hybrid", seconds))?;
        ensure!(r.errors == 0, "{} {name} searches failed", r.errors);
        println!(
            "  {name}, the questions again at 8 connections: {}",
            r.summary()
        );
        latency = format!(
            "{latency}; {first}; again at 8 connections p50 {} / p99 {}, {:.0} req/s",
            common::us(r.p50),
            common::us(r.p99),
            r.rps
        );
        systems.push(Answers { name, ranked });
    }

    // Another build of notevault, for a before/after in one run.
    if let Ok(bin) = std::env::var("NOTEVAULT_BENCH_BASELINE_BIN") {
        let daemon = common::start_bin(&bin, &vault, &work.join("state-baseline"))?;
        let addr: std::net::SocketAddr = daemon.base.trim_start_matches("http://").parse()?;
        rt.block_on(common::wait_indexed(addr, Duration::from_secs(600)))?;
        systems.push(Answers {
            name: "notevault baseline (NOTEVAULT_BENCH_BASELINE_BIN)".into(),
            ranked: rt.block_on(ask(addr, &questions, ""))?,
        });
    }

    // qmd's lexical search over the unpacked corpus (the same files).
    if std::env::var("NOTEVAULT_BENCH_QMD").as_deref() != Ok("0") {
        match qmd(root, &corpus, &questions) {
            Ok(a) => systems.push(a),
            Err(e) => println!("  qmd could not run: {e:#}"),
        }
    }

    let ours = score(&questions, &systems[0]);
    let held = score_where(&questions, &systems[0], |q| q.held);
    let mut sets: Vec<&str> = questions.iter().map(Question::set).collect();
    sets.sort_unstable();
    sets.dedup();
    println!();
    println!("| system | questions | MRR@10 | hits@1 | hits@10 | empty answers |");
    println!("|---|---|---|---|---|---|");
    let mut qmd_mrr = None;
    for a in &systems {
        let row = |label: &str, s: Scores| {
            println!(
                "| {} | {label} | {:.3} | {} / {} | {} / {} | {} / {} |",
                a.name, s.mrr, s.hits1, s.n, s.hits10, s.n, s.empty, s.n
            );
        };
        let all = score(&questions, a);
        if a.name.starts_with("qmd") {
            qmd_mrr = Some(all.mrr);
        }
        row("all", all);
        row("tune", score_where(&questions, a, |q| !q.held));
        row("**held**", score_where(&questions, a, |q| q.held));
        for set in &sets {
            row(set, score_where(&questions, a, |q| q.set() == *set));
            row(
                &format!("{set} held"),
                score_where(&questions, a, |q| q.held && q.set() == *set),
            );
        }
    }
    println!();
    println!(
        "targets: held-out MRR@10 >= 0.75: {}; empty answers 0: {}; beat qmd lexical by >= 0.25 MRR: {}",
        verdict(held.mrr >= 0.75),
        verdict(ours.empty == 0),
        match qmd_mrr {
            Some(m) => format!("{} ({:+.3})", verdict(ours.mrr - m >= 0.25), ours.mrr - m),
            None => "qmd did not run".into(),
        }
    );
    println!(
        "notevault search latency, the questions at 8 connections: {latency} (target p50 <= 1 ms)"
    );
    println!();
    // Held-out questions are scored only: reading their misses would tune on them.
    println!(
        "Misses of notevault on the tune split (rank of the answer in its top {TOP}, its first result):"
    );
    for (q, ranked) in questions.iter().zip(&systems[0].ranked) {
        if q.held {
            continue;
        }
        let rank = ranked.iter().position(|s| is_answer(&q.answer, s));
        if rank != Some(0) {
            println!(
                "  {:>4}  {}  → {}  (first: {})",
                rank.map_or("-".to_string(), |r| format!("#{}", r + 1)),
                q.text,
                q.answer,
                ranked.first().map_or("nothing", String::as_str)
            );
        }
    }
    Ok(())
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

fn search_path(q: &str, extra: &str) -> String {
    format!(
        "/v1/search?q={}&page_size={TOP}{extra}",
        utf8_percent_encode(q, NON_ALPHANUMERIC)
    )
}

/// The questions asked over and over at 8 keep-alive connections for `seconds` (after 1 s
/// of warm-up).
async fn at_8_connections(
    addr: std::net::SocketAddr,
    questions: &[Question],
    extra: &str,
    seconds: u64,
) -> Result<common::LoadResult> {
    let paths: Arc<Vec<String>> = Arc::new(
        questions
            .iter()
            .map(|q| search_path(&q.text, extra))
            .collect(),
    );
    load(
        addr,
        paths,
        8,
        Duration::from_secs(1),
        Duration::from_secs(seconds),
    )
    .await
}

/// Each question asked once, in order, on one connection: the answers, and how long each
/// took (the first time a question is asked: no kept query vector).
async fn ask_timed(
    addr: std::net::SocketAddr,
    questions: &[Question],
    extra: &str,
) -> Result<(Vec<Vec<String>>, Vec<Duration>)> {
    let mut conn = Conn::open(addr).await?;
    let mut out = Vec::new();
    let mut took = Vec::new();
    for q in questions {
        let started = Instant::now();
        let page = common::get_json(&mut conn, &search_path(&q.text, extra)).await?;
        took.push(started.elapsed());
        out.push(
            page["results"]
                .as_array()
                .context("results")?
                .iter()
                .filter_map(|r| r["slug"].as_str().map(str::to_string))
                .collect(),
        );
    }
    Ok((out, took))
}

async fn ask(
    addr: std::net::SocketAddr,
    questions: &[Question],
    extra: &str,
) -> Result<Vec<Vec<String>>> {
    Ok(ask_timed(addr, questions, extra).await?.0)
}

/// qmd's answers: index `corpus` as the collection `realvault` (or bring it up to date),
/// then ask each question through its MCP server (stdio): the `query` tool with one
/// `lex` search, no reranking.
fn qmd(root: &Path, corpus: &Path, questions: &[Question]) -> Result<Answers> {
    let script = root.join("benches/relevance/qmd.sh");
    let list = Command::new(&script)
        .args(["collection", "list"])
        .output()
        .context("benches/relevance/qmd.sh (npm must reach its registry the first time)")?;
    ensure!(
        list.status.success(),
        "qmd did not install or run: {}",
        String::from_utf8_lossy(&list.stderr)
    );
    let t0 = Instant::now();
    let args: Vec<String> = if String::from_utf8_lossy(&list.stdout).contains("realvault") {
        vec!["update".into()]
    } else {
        vec![
            "collection".into(),
            "add".into(),
            corpus.display().to_string(),
            "--name".into(),
            "realvault".into(),
        ]
    };
    let out = Command::new(&script).args(&args).output()?;
    ensure!(
        out.status.success(),
        "qmd {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "  qmd {} in {:.1} s",
        args.join(" "),
        t0.elapsed().as_secs_f64()
    );
    let mut child = Command::new(&script)
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
    let mut call =
        |id: u64, method: &str, params: serde_json::Value| -> Result<serde_json::Value> {
            let msg =
                serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            writeln!(stdin, "{msg}")?;
            stdin.flush()?;
            loop {
                let line = lines.next().context("qmd mcp closed its output")??;
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                if v["id"] == id {
                    return Ok(v);
                }
            }
        };
    call(
        0,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "notevault-bench", "version": "1"}}),
    )?;
    let mut ranked = Vec::new();
    let mut took = Vec::new();
    for (i, q) in questions.iter().enumerate() {
        let t0 = Instant::now();
        let v = call(
            i as u64 + 1,
            "tools/call",
            serde_json::json!({"name": "query", "arguments": {"searches": [{"type": "lex", "query": q.text}], "limit": TOP, "rerank": false}}),
        )?;
        took.push(t0.elapsed());
        let results = v["result"]["structuredContent"]["results"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        ranked.push(
            results
                .iter()
                .filter_map(|r| r["file"].as_str())
                .map(|f| {
                    let f = f.strip_prefix("realvault/").unwrap_or(f);
                    f.strip_suffix(".md").unwrap_or(f).to_string()
                })
                .collect(),
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    let (p50, _) = common::stats(took);
    println!(
        "  qmd lex query over MCP stdio, one at a time: p50 {}",
        common::us(p50)
    );
    Ok(Answers {
        name: "qmd lexical (`lex`, no rerank)".into(),
        ranked,
    })
}
