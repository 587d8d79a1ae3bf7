//! Parts 3, 5 and 6 of the hosted bench: reads hosted beside local mode on the same
//! notes, `notevault import` of the corpus, and 1,000 small vaults served by one instance.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::common::{
    addr_of, copy, get_json, load, load_as, markdown_files, proc_status_mib, start_bin,
    wait_history, wait_idle, Conn, Daemon, LoadResult,
};
use crate::{median, row, tokens, Bench, Row, TOKEN};

/// `count` generated notes under `folder` (emptied first), in 20 folders, each of
/// `lines` lines of words.
fn generate(folder: &Path, count: usize, lines: usize) -> Result<()> {
    let _ = std::fs::remove_dir_all(folder);
    for i in 0..count {
        let dir = folder.join(format!("f{:02}", i % 20));
        std::fs::create_dir_all(&dir)?;
        let mut text = format!("# Note {i}\n\n");
        for l in 0..lines {
            text.push_str(&crate::writes::note(&format!("line {l}"), i * lines + l)[..60]);
            text.push('\n');
        }
        std::fs::write(dir.join(format!("n{i}.md")), text)?;
    }
    Ok(())
}

/// Stop a local daemon as a service manager would (SIGTERM), waiting for its end.
fn stop(mut daemon: Daemon) {
    // SAFETY: a pid of our own child, not yet reaped.
    unsafe { libc::kill(daemon.child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(60);
    while daemon.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Serve `folder` once in local mode (its history bootstrapped, its start done) so that
/// `notevault import` finds its state at `state`.
async fn first_start(bench: &Bench, folder: &Path, state: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(state);
    let local = start_bin(&bench.bin, folder, state)?;
    wait_history(state).await?;
    wait_idle(local.child.id(), Duration::from_secs(600)).await?;
    stop(local);
    Ok(())
}

/// The read paths of the notes under `folder` (`/v1/notes/{slug}?limit=200`).
fn read_paths(folder: &Path) -> Vec<String> {
    let mut paths = Vec::new();
    for e in walkdir::WalkDir::new(folder)
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(Result::ok)
    {
        let name = e
            .path()
            .strip_prefix(folder)
            .unwrap_or(e.path())
            .to_string_lossy()
            .to_string();
        if let Some(slug) = name.strip_suffix(".md").filter(|_| e.file_type().is_file()) {
            let slug =
                percent_encoding::utf8_percent_encode(slug, percent_encoding::NON_ALPHANUMERIC);
            paths.push(format!("/v1/notes/{slug}?limit=200"));
        }
    }
    paths.sort();
    paths
}

fn mib(bytes: &str) -> f64 {
    bytes.parse::<f64>().unwrap_or(0.0) / (1024.0 * 1024.0)
}

fn summary(r: &LoadResult) -> String {
    format!(
        "p50 {} p99 {}, {:.0} req/s, {} not 200",
        crate::common::us(r.p50),
        crate::common::us(r.p99),
        r.rps,
        r.errors
    )
}

/// Parts 5 and 3: the corpus (or, without it, 2,000 generated notes) imported into a
/// database of its own, then read from a hosted instance and a local daemon in turn.
pub async fn corpus(
    bench: &Bench,
    want: &impl Fn(&str) -> bool,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let folder = bench.root.join("corpus");
    let state = bench.root.join("corpus-state");
    let real = match crate::common::corpus() {
        Some(c) => {
            copy(&c, &folder)?;
            true
        }
        None => {
            if want("import") {
                row(
                    rows,
                    "import of the 44k corpus",
                    "skipped: ../shared/corpora/realvault.tar.gz not found".into(),
                    "",
                    "",
                );
            }
            if !want("read") {
                return Ok(());
            }
            generate(&folder, 2000, 60)?;
            false
        }
    };
    let (notes, bytes) = markdown_files(&folder);
    eprintln!(
        "parts 3/5: {notes} notes ({:.1} MiB): first local start (history bootstrap), then import",
        bytes as f64 / 1048576.0
    );
    first_start(bench, &folder, &state).await?;
    let url = bench.database("corpus")?;
    let vault = bench.cli(&url, &["vault", "create", "corpus"])?;
    let t = Instant::now();
    let out = bench.cli(
        &url,
        &[
            "import",
            &folder.to_string_lossy(),
            "--vault",
            "corpus",
            "--state-dir",
            &state.to_string_lossy(),
        ],
    )?;
    let took = t.elapsed();
    eprintln!("  import: {out}");
    if real && want("import") {
        let db = bench
            .pg
            .psql("corpus", "SELECT pg_database_size('corpus')")?;
        let contents = bench
            .pg
            .psql("corpus", "SELECT pg_total_relation_size('contents')")?;
        let counts = bench.pg.psql(
            "corpus",
            "SELECT (SELECT count(*) FROM revisions) || ' revisions, ' || (SELECT count(*) FROM notes) || ' notes, ' || (SELECT count(*) FROM contents) || ' contents'",
        )?;
        let tables = bench.pg.psql(
            "corpus",
            "SELECT string_agg(relname || ' ' || round(pg_total_relation_size(oid) / 1048576.0, 1) || ' MiB', ', ' ORDER BY pg_total_relation_size(oid) DESC) \
             FROM (SELECT oid, relname FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace ORDER BY pg_total_relation_size(oid) DESC LIMIT 5) t",
        )?;
        row(
            rows,
            "`notevault import` of the corpus, wall time",
            format!(
                "{:.1} s ({counts}; the history is the one commit of its first start)",
                took.as_secs_f64()
            ),
            &format!(
                "{notes} notes, {:.1} MiB of markdown",
                bytes as f64 / 1048576.0
            ),
            "",
        );
        row(
            rows,
            "database size after the import (`pg_database_size`)",
            format!(
                "{:.1} MiB; `contents` {:.1} MiB ({:.0} %)",
                mib(&db),
                mib(&contents),
                100.0 * mib(&contents) / mib(&db).max(0.001)
            ),
            &format!("largest tables: {tables}"),
            "",
        );
    }
    if !want("read") {
        return Ok(());
    }
    let paths = Arc::new(read_paths(&folder));
    let local = start_bin(&bench.bin, &folder, &state)?;
    wait_idle(local.child.id(), Duration::from_secs(600)).await?;
    let hosted = bench.instance(&url, &tokens(&[vault]), &bench.root.join("cache-read"), &[])?;
    let (la, ha) = (addr_of(&local.base)?, addr_of(&hosted.base)?);
    // The first request opens the vault (its catalog and index built from the database).
    let t = Instant::now();
    let mut conn = Conn::open_with_token(ha, TOKEN).await?;
    get_json(&mut conn, &paths[0]).await?;
    let opened = t.elapsed();
    wait_idle(hosted.child.id(), Duration::from_secs(900)).await?;
    eprintln!("part 3: {} notes read at 8 connections, hosted (first request {:.1} s) beside local, {} rounds", paths.len(), opened.as_secs_f64(), bench.rounds);
    let secs = Duration::from_secs(bench.seconds);
    let (mut h50, mut l50, mut detail) = (vec![], vec![], vec![]);
    for r in 0..bench.rounds {
        // The order swaps each round (the machine drifts).
        let mut h = None;
        let mut l = None;
        for k in 0..2 {
            if (k + r) % 2 == 0 {
                bench
                    .pg
                    .psql("postgres", "SELECT pg_stat_statements_reset()")?;
                let token = Some(TOKEN.to_string());
                let res =
                    load_as(ha, token, paths.clone(), 8, Duration::from_secs(1), secs).await?;
                if r == 0 {
                    let what =
                        "statements of the hosted reads (round 1, its second of warm-up included)";
                    crate::writes::statements(bench, "corpus", res.requests, what)?;
                }
                h = Some(res);
            } else {
                l = Some(load(la, paths.clone(), 8, Duration::from_secs(1), secs).await?);
            }
        }
        let (h, l) = (h.unwrap(), l.unwrap());
        detail.push(format!(
            "round {}: hosted {}; local {}",
            r + 1,
            summary(&h),
            summary(&l)
        ));
        h50.push(h.p50.as_secs_f64() * 1e6);
        l50.push(l.p50.as_secs_f64() * 1e6);
    }
    for d in detail {
        row(
            rows,
            "`GET /v1/notes/{note}?limit=200`, 8 connections",
            d,
            "interleaved, order swapped each round",
            "",
        );
    }
    let (h, l) = (median(h50), median(l50));
    row(
        rows,
        "read p50, hosted ÷ local (medians of rounds)",
        format!("{h:.0} us ÷ {l:.0} us = {:.2}×", h / l.max(1.0)),
        &format!(
            "{} notes; no target (local mode as the reference)",
            paths.len()
        ),
        "",
    );
    stop(local);
    drop(hosted);
    Ok(())
}

/// Part 6: `NOTEVAULT_BENCH_VAULTS` vaults of 100 small notes, one request to each on one
/// instance: its resident memory per open vault; then with a short idle time.
pub async fn many(bench: &Bench, rows: &mut Vec<Row>) -> Result<()> {
    let count = crate::common::env_num("NOTEVAULT_BENCH_VAULTS", 1000) as usize;
    let folder = bench.root.join("small");
    let state = bench.root.join("small-state");
    generate(&folder, 100, 4)?;
    let (_, bytes) = markdown_files(&folder);
    first_start(bench, &folder, &state).await?;
    let url = bench.database("vaults")?;
    eprintln!("part 6: {count} vaults of 100 notes ({bytes} bytes each): create and import...");
    let t = Instant::now();
    let ids: Vec<Vec<(usize, String)>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let (url, folder, state) = (&url, &folder, &state);
                s.spawn(move || -> Result<Vec<(usize, String)>> {
                    let mut ids = Vec::new();
                    for i in (w..count).step_by(2) {
                        let id = bench.cli(url, &["vault", "create", &format!("v{i}")])?;
                        bench.cli(
                            url,
                            &[
                                "import",
                                &folder.to_string_lossy(),
                                "--vault",
                                &id,
                                "--state-dir",
                                &state.to_string_lossy(),
                            ],
                        )?;
                        ids.push((i, id));
                    }
                    Ok(ids)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a worker ends"))
            .collect::<Result<_>>()
    })?;
    let mut ids: Vec<(usize, String)> = ids.into_iter().flatten().collect();
    ids.sort();
    let ids: Vec<String> = ids.into_iter().map(|(_, id)| id).collect();
    eprintln!(
        "  {count} vaults made and imported in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let tokens = tokens(&ids);
    let token_of = |i: usize| {
        if i == 0 {
            TOKEN.to_string()
        } else {
            format!("{TOKEN}-{i}")
        }
    };

    // Every vault once, on an instance that closes none meanwhile.
    let inst = bench.instance(
        &url,
        &tokens,
        &bench.root.join("cache-many"),
        &[("NOTEVAULT_VAULT_IDLE_SECONDS", "86400")],
    )?;
    let addr = addr_of(&inst.base)?;
    let pid = inst.child.id();
    wait_idle(pid, Duration::from_secs(120)).await?;
    let start_rss = proc_status_mib(pid, "VmRSS:")?;
    let t = Instant::now();
    for i in 0..count {
        let mut conn = Conn::open_with_token(addr, &token_of(i)).await?;
        let page = get_json(&mut conn, "/v1/notes?page_size=1").await?;
        if page["notes"].as_array().is_none_or(|n| n.is_empty()) {
            bail!("vault {i} lists no note: {page}");
        }
    }
    let opening = t.elapsed();
    wait_idle(pid, Duration::from_secs(600)).await?;
    let just_opened = proc_status_mib(pid, "VmRSS:")?;
    // Idle: untouched for longer than an index writer stays open with nothing to write
    // (30 s, `index/writer.rs`).
    tokio::time::sleep(Duration::from_secs(35)).await;
    wait_idle(pid, Duration::from_secs(600)).await?;
    let open_rss = proc_status_mib(pid, "VmRSS:")?;
    let per = (open_rss - start_rss) / count as f64;
    // What the memory is: mapped files (the indexes' segments) or the heap and stacks,
    // and how many threads the open vaults keep.
    let (anon, file) = (
        proc_status_mib(pid, "RssAnon:")?,
        proc_status_mib(pid, "RssFile:")?,
    );
    let threads = std::fs::read_to_string(format!("/proc/{pid}/status"))?
        .lines()
        .find_map(|l| l.strip_prefix("Threads:").map(|t| t.trim().to_string()))
        .unwrap_or_default();
    drop(inst);
    row(
        rows,
        &format!("after {count} vaults opened and 35 s idle: RssAnon / RssFile / threads"),
        format!("{anon:.1} MiB / {file:.1} MiB / {threads}"),
        "what the per-vault memory is made of",
        "",
    );
    row(
        rows,
        &format!("instance VmRSS: after start / after one request to each of {count} vaults / 35 s later"),
        format!(
            "{start_rss:.1} MiB / {just_opened:.1} MiB / {open_rss:.1} MiB ({:.1} s to open them all)",
            opening.as_secs_f64()
        ),
        "100 generated notes of ~4 lines per vault",
        "",
    );
    row(
        rows,
        "memory per idle open vault ((35 s later − start) ÷ vaults)",
        format!("{:.0} KiB", per * 1024.0),
        "≤ 1 MiB",
        crate::verdict(per <= 1.0),
    );

    // The same on an instance that closes a vault idle for 4 s.
    let inst = bench.instance(
        &url,
        &tokens,
        &bench.root.join("cache-idle"),
        &[("NOTEVAULT_VAULT_IDLE_SECONDS", "4")],
    )?;
    let addr = addr_of(&inst.base)?;
    let pid = inst.child.id();
    wait_idle(pid, Duration::from_secs(120)).await?;
    let start2 = proc_status_mib(pid, "VmRSS:")?;
    for i in 0..count {
        let mut conn = Conn::open_with_token(addr, &token_of(i)).await?;
        get_json(&mut conn, "/v1/notes?page_size=1").await?;
    }
    let hwm = proc_status_mib(pid, "VmHWM:")?;
    // Idle for 4 s, checked every second: all closed after ~5 s.
    tokio::time::sleep(Duration::from_secs(10)).await;
    wait_idle(pid, Duration::from_secs(120)).await?;
    let closed = proc_status_mib(pid, "VmRSS:")?;
    drop(inst);
    row(rows, "`NOTEVAULT_VAULT_IDLE_SECONDS=4`: VmRSS after start / peak / 10 s after the last request (all closed)", format!("{start2:.1} / {hwm:.1} / {closed:.1} MiB"), "the same requests on a new instance and cache", "");
    Ok(())
}
