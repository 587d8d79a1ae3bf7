//! The analyzers on the corpus's text: how long splitting, normalizing and (for the fields
//! of words) adding the English stems takes per token, beside tantivy's own default
//! analyzer (`SimpleTokenizer`, long words dropped, lower-cased) on the same text, one
//! thread, the texts already in memory.
//!
//! - `tantivy default`: the reference; no folding, no unspaced scripts, no stems.
//! - `notevault plain`: [`tokenizer::analyzer`] (fields of names, a note not stemmed,
//!   queries): words, letter keys, CJK unigrams and bigrams, lower-cased and folded.
//! - `notevault forms`: [`tokenizer::forms_analyzer`] (title, aliases, headings, lead,
//!   body): the same and each word's marked stem where it differs.
//!
//! Each analyzer runs `NOTEVAULT_BENCH_ROUNDS` times (default 5), interleaved; the
//! median is printed with the tokens it gave (the same in every round) and a fingerprint
//! of every token's text, offsets and position, which says whether two builds tokenize
//! the corpus the same way.
//!
//! `cargo bench --bench tokenize`.

#![allow(
    clippy::disallowed_methods,
    reason = "benchmarks play the operator: they read the environment"
)]

mod common;

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use notevault::index::tokenizer;
use tantivy::tokenizer::{
    LowerCaser, RemoveLongFilter, SimpleTokenizer, TextAnalyzer, TokenStream,
};

fn main() -> std::process::ExitCode {
    common::bench_main("tokenize", run)
}

/// Tokens given, FNV-1a fingerprint of them, time taken.
fn pass(analyzer: &mut TextAnalyzer, texts: &[String]) -> (usize, u64, Duration) {
    let started = Instant::now();
    let mut tokens = 0;
    let mut print = 0xcbf2_9ce4_8422_2325_u64;
    for text in texts {
        let mut stream = analyzer.token_stream(text);
        while stream.advance() {
            let t = stream.token();
            tokens += 1;
            let numbers = [t.offset_from, t.offset_to, t.position].map(|n| n as u64);
            for b in t.text.bytes().map(u64::from).chain(numbers) {
                print = (print ^ b).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    (tokens, print, started.elapsed())
}

fn run() -> Result<()> {
    let Some(corpus) = common::corpus() else {
        bail!("the corpus is missing (../shared/corpora/realvault.tar.gz or NOTEVAULT_CORPUS)");
    };
    let mut texts = Vec::new();
    for e in walkdir::WalkDir::new(&corpus)
        .into_iter()
        .filter_map(Result::ok)
    {
        if e.file_type().is_file() && e.file_name().to_string_lossy().ends_with(".md") {
            texts.push(String::from_utf8_lossy(&std::fs::read(e.path())?).into_owned());
        }
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    let rounds = common::env_num("NOTEVAULT_BENCH_ROUNDS", 5) as usize;
    println!(
        "tokenize: {} notes, {:.1} MiB, {rounds} rounds, load average {}",
        texts.len(),
        bytes as f64 / f64::from(1 << 20),
        common::loadavg()
    );
    let mut analyzers = [
        (
            "tantivy default",
            TextAnalyzer::builder(SimpleTokenizer::default())
                .filter(RemoveLongFilter::limit(tokenizer::MAX_TOKEN_BYTES))
                .filter(LowerCaser)
                .build(),
        ),
        ("notevault plain", tokenizer::analyzer()),
        ("notevault forms", tokenizer::forms_analyzer()),
    ];
    let mut results: Vec<Vec<(usize, u64, Duration)>> = vec![Vec::new(); analyzers.len()];
    for _ in 0..rounds {
        for (i, (_, analyzer)) in analyzers.iter_mut().enumerate() {
            results[i].push(pass(analyzer, &texts));
        }
    }
    let reference = {
        let mut t: Vec<Duration> = results[0].iter().map(|r| r.2).collect();
        t.sort();
        t[t.len() / 2]
    };
    for ((name, _), runs) in analyzers.iter().zip(&results) {
        let mut times: Vec<Duration> = runs.iter().map(|r| r.2).collect();
        times.sort();
        let median = times[times.len() / 2];
        let (tokens, print, _) = runs[0];
        println!(
            "  {name:<16} {:>5} ms median [{}–{}], {tokens} tokens, {:.1} ns/token, {:.2}x the reference's time, fingerprint {print:016x}",
            median.as_millis(),
            times[0].as_millis(),
            times[times.len() - 1].as_millis(),
            median.as_nanos() as f64 / tokens.max(1) as f64,
            median.as_secs_f64() / reference.as_secs_f64(),
        );
    }
    Ok(())
}
