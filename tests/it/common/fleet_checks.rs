//! The fleet's report: latency per route and errors by status (inside and outside the
//! fault windows), then the checks against what PostgreSQL, the op log, the store and
//! every instance's search hold.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::load::{marker, COMMON_WORD};
use super::{postgres, Shared, Window};

/// One check: what was measured beside what it must be.
pub struct Check {
    pub name: String,
    pub measured: String,
    pub target: String,
    pub ok: bool,
}

/// What a run reports.
pub struct Report {
    /// The table of routes, errors and events, as printed.
    pub text: String,
    /// The checks the test asserts and the bench prints with its verdict.
    pub checks: Vec<Check>,
    /// The figures beside their targets (the bench's; not asserted by the test).
    pub targets: Vec<Check>,
}

impl Report {
    pub fn failed(&self) -> Vec<&Check> {
        self.checks.iter().filter(|c| !c.ok).collect()
    }

    /// The report and its checks as a table.
    pub fn render(&self) -> String {
        let mut out = self.text.clone();
        for (title, rows) in [("checks", &self.checks), ("targets", &self.targets)] {
            let _ = writeln!(
                out,
                "\n| {title} | measured | target | verdict |\n|---|---|---|---|"
            );
            for c in rows.iter() {
                let verdict = if c.ok { "MET" } else { "MISSED" };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {verdict} |",
                    c.name, c.measured, c.target
                );
            }
        }
        out
    }
}

pub(crate) struct Inputs<'a> {
    pub shared: &'a Shared,
    pub db_url: &'a str,
    pub objects: Vec<String>,
    /// Each instance up: its base URL and metrics URL.
    pub bases: Vec<(String, Option<String>)>,
    pub windows: &'a [Window],
    pub events: &'a [String],
    pub drains: &'a [String],
    pub ready: bool,
    pub load_took: Duration,
}

fn check(checks: &mut Vec<Check>, name: &str, measured: String, target: &str, ok: bool) {
    checks.push(Check {
        name: name.into(),
        measured,
        target: target.into(),
        ok,
    });
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn in_window(windows: &[Window], start: Instant, end: Instant) -> bool {
    windows.iter().any(|(a, b)| start < *b && end > *a)
}

/// Rows of `sql` as strings (every column `::text` in the query).
fn rows(url: &str, sql: &str) -> Vec<Vec<String>> {
    postgres::query(url, sql)
        .iter()
        .map(|r| (0..r.len()).map(|i| r.get::<_, String>(i)).collect())
        .collect()
}

pub(crate) async fn report(i: Inputs<'_>) -> Report {
    let sh = i.shared;
    let mut text = String::new();
    let mut checks = Vec::new();
    let mut targets = Vec::new();
    let rec = std::mem::replace(&mut *sh.rec.lock().unwrap(), super::load::Record::new(0));

    // Latency per route (answers under 500; outside the fault windows), errors by status.
    let mut by_route: BTreeMap<&str, (Vec<Duration>, u64)> = BTreeMap::new();
    let mut by_status: BTreeMap<u16, (u64, u64)> = BTreeMap::new();
    let mut outside_5xx = 0;
    // Every answer's latency by the 10 s of the run it started in: whether the tail is
    // spread over the run or comes in bursts (and when).
    let mut by_time: BTreeMap<u64, Vec<Duration>> = BTreeMap::new();
    for s in &rec.samples {
        let inside = in_window(i.windows, s.start, s.end);
        let entry = by_route.entry(s.route).or_default();
        entry.1 += 1;
        if (1..500).contains(&s.status) {
            if !inside {
                entry.0.push(s.end - s.start);
            }
            let at = s.start.saturating_duration_since(sh.started).as_secs() / 10 * 10;
            by_time.entry(at).or_default().push(s.end - s.start);
        }
        let counts = by_status.entry(s.status).or_default();
        if inside {
            counts.0 += 1;
        } else {
            counts.1 += 1;
            outside_5xx += u64::from(s.status >= 500);
        }
    }
    let _ = writeln!(
        text,
        "fleet: {} vaults, {} operations ({} attempts) in {:.1} s over 3 instances",
        sh.vault_ids.len(),
        rec.done.values().sum::<u64>(),
        rec.samples.len(),
        i.load_took.as_secs_f64()
    );
    let _ = writeln!(
        text,
        "operations done: {:?}; given up: {:?}",
        rec.done, rec.gave_up
    );
    let _ = writeln!(
        text,
        "p99 ms by 10 s of the run (answers under 500, faults included): {}",
        by_time
            .iter_mut()
            .map(|(at, lat)| {
                lat.sort_unstable();
                format!("{at}s {} ({})", ms(percentile(lat, 99.0)), lat.len())
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(rate) = sh.settings.rate {
        let _ = writeln!(
            text,
            "paced at {rate} operations/s offered over {} clients; {} started more than {} ms behind schedule",
            sh.settings.clients,
            rec.late,
            super::load::LATE.as_millis()
        );
    }
    for e in i.events {
        let _ = writeln!(text, "fault: {e}");
    }
    let _ = writeln!(
        text,
        "\n| route | attempts | answered outside faults | p50 ms | p95 ms | p99 ms |\n|---|---|---|---|---|---|"
    );
    let mut p99_of = HashMap::new();
    for (route, (mut d, all)) in by_route {
        d.sort();
        let (p50, p95, p99) = (
            percentile(&d, 50.0),
            percentile(&d, 95.0),
            percentile(&d, 99.0),
        );
        p99_of.insert(route, p99);
        let _ = writeln!(
            text,
            "| {route} | {all} | {} | {} | {} | {} |",
            d.len(),
            ms(p50),
            ms(p95),
            ms(p99)
        );
    }
    let _ = writeln!(
        text,
        "\n| status | inside fault windows | outside |\n|---|---|---|"
    );
    for (status, (inside, outside)) in &by_status {
        let label = if *status == 0 {
            "no answer (refused, cut)".to_string()
        } else {
            status.to_string()
        };
        let _ = writeln!(text, "| {label} | {inside} | {outside} |");
    }

    // 0. The rules of the run itself.
    let show = |v: &[String]| v.iter().take(5).cloned().collect::<Vec<_>>().join("; ");
    check(
        &mut checks,
        "5xx answers that are not 503 + Retry-After + envelope",
        format!("{} {}", rec.violations.len(), show(&rec.violations)),
        "0",
        rec.violations.is_empty(),
    );
    check(
        &mut checks,
        "answers no client expected (4xx, failed push ops)",
        format!("{} {}", rec.unexpected.len(), show(&rec.unexpected)),
        "0",
        rec.unexpected.is_empty(),
    );
    check(
        &mut checks,
        "drain: SIGTERM → exit",
        i.drains.join("; "),
        "exit 0 within drain_seconds (+ 15 s)",
        !i.drains.is_empty() && i.drains.iter().all(|d| d.starts_with("exit 0")),
    );
    check(
        &mut checks,
        "every instance ready after the load",
        i.ready.to_string(),
        "true",
        i.ready,
    );

    // 1. Every acknowledged write in PostgreSQL, the op log and (attachments) the store.
    let url = i.db_url;
    let notes: HashMap<(String, String), String> = rows(
        url,
        "SELECT vault_id::text, path::text, version_id FROM notes",
    )
    .into_iter()
    .map(|r| ((r[0].clone(), r[1].clone()), r[2].clone()))
    .collect();
    let revisions: HashMap<(String, String), i64> = postgres::query(
        url,
        "SELECT vault_id::text, version_id, count(*) OVER (PARTITION BY vault_id, path) FROM revisions",
    )
    .iter()
    .map(|r| ((r.get(0), r.get(1)), r.get(2)))
    .collect();
    let op_versions: HashSet<(String, String)> = rows(
        url,
        "SELECT vault_id::text, version_id FROM sync_ops WHERE version_id IS NOT NULL",
    )
    .into_iter()
    .map(|r| (r[0].clone(), r[1].clone()))
    .collect();
    let attachments: HashMap<(String, String), String> = rows(
        url,
        "SELECT vault_id::text, path::text, sha256 FROM attachments",
    )
    .into_iter()
    .map(|r| ((r[0].clone(), r[1].clone()), r[2].clone()))
    .collect();
    let attachment_ops: HashSet<(String, String, String)> = rows(
        url,
        "SELECT vault_id::text, path::text, sha256 FROM attachment_changes WHERE sha256 IS NOT NULL",
    )
    .into_iter()
    .map(|r| (r[0].clone(), r[1].clone(), r[2].clone()))
    .collect();
    let objects: HashSet<&str> = i.objects.iter().map(String::as_str).collect();
    let mut lost = Vec::new();
    let mut doubled = Vec::new();
    let (mut note_acks, mut file_acks) = (0, 0);
    for ack in &rec.acks {
        let vault = &sh.vault_ids[ack.vault];
        let at = (vault.clone(), ack.path.clone());
        let what = format!("{} {} of {}", ack.kind, ack.path, marker(ack.vault));
        if let Some(sha) = &ack.sha256 {
            file_acks += 1;
            if attachments.get(&at) != Some(sha) {
                lost.push(format!("{what}: not in attachments"));
            }
            if !attachment_ops.contains(&(vault.clone(), ack.path.clone(), sha.clone())) {
                lost.push(format!("{what}: not in the op log (attachment_changes)"));
            }
            if !objects.contains(format!("fleet/vaults/{vault}/blobs/{sha}").as_str()) {
                lost.push(format!("{what}: not in the store"));
            }
            continue;
        }
        note_acks += 1;
        let Some(version) = &ack.version else {
            lost.push(format!("{what}: the receipt named no version"));
            continue;
        };
        if notes.get(&at) != Some(version) {
            lost.push(format!(
                "{what}: notes holds {:?}, not {version}",
                notes.get(&at)
            ));
        }
        match revisions.get(&(vault.clone(), version.clone())) {
            None => lost.push(format!("{what}: {version} not in revisions")),
            Some(n) if *n != 1 => doubled.push(format!("{what}: {n} revisions of one create")),
            Some(_) => {}
        }
        if !op_versions.contains(&(vault.clone(), version.clone())) {
            lost.push(format!("{what}: {version} not in the op log (sync_ops)"));
        }
    }
    check(
        &mut checks,
        "acknowledged writes missing from notes, revisions, op log or store",
        format!(
            "{} of {note_acks} notes and {file_acks} attachments {}",
            lost.len(),
            show(&lost)
        ),
        "0",
        lost.is_empty() && note_acks > 0 && file_acks > 0,
    );

    // 2. Replays and retries: the original receipt, never a second write.
    check(
        &mut checks,
        "replays on another instance answered with the original receipt's bytes",
        format!(
            "{} of {} {}",
            rec.replays_same,
            rec.replays_same + rec.replays_differ.len() as u64,
            show(&rec.replays_differ)
        ),
        "all (at least one)",
        rec.replays_differ.is_empty() && rec.replays_same > 0,
    );
    check(
        &mut checks,
        "acknowledged creates written twice (retries with one key)",
        format!("{} {}", doubled.len(), show(&doubled)),
        "0",
        doubled.is_empty(),
    );

    // 3. No vault saw another's data.
    check(
        &mut checks,
        "answers naming another vault's notes",
        format!(
            "{} of {} answers {}",
            rec.leaks.len(),
            rec.isolation_checked,
            show(&rec.leaks)
        ),
        "0",
        rec.leaks.is_empty() && rec.isolation_checked > 0,
    );

    // 4. Search on every instance agrees with the database.
    let (agreed, disagreed) = search_agrees(sh, url, &i.bases).await;
    check(
        &mut checks,
        "search on every instance = the database's notes (hottest vaults)",
        format!(
            "{agreed} agree, {} differ {}",
            disagreed.len(),
            show(&disagreed)
        ),
        "all",
        disagreed.is_empty() && agreed > 0,
    );

    let scraped = scrape(sh, &i.bases).await;
    check(
        &mut checks,
        "GET /metrics on each instance's metrics_listen",
        format!("{scraped} of {} scraped", i.bases.len()),
        "all",
        scraped == i.bases.len(),
    );

    // The targets (the bench's verdicts), and a known defect.
    let lost_landed = rec
        .decisions_lost
        .iter()
        .filter(|(v, path, _)| notes.contains_key(&(sh.vault_ids[*v].clone(), path.clone())))
        .count();
    let ids: Vec<String> = rec.decisions_lost.iter().map(|d| d.2.clone()).collect();
    check(
        &mut targets,
        "approvals retried after a fault and recorded `rejected` (NAME_COLLISION) though \
         their write landed (defect: the decision is not atomic with its write)",
        format!(
            "{} (their notes in the database: {lost_landed}) {}",
            ids.len(),
            show(&ids)
        ),
        "0",
        ids.is_empty(),
    );
    check(
        &mut targets,
        "5xx answers outside the fault windows",
        {
            let outside: Vec<String> = rec
                .unavailable
                .iter()
                .filter(|(a, b, _)| !in_window(i.windows, *a, *b))
                .map(|(a, _, why)| format!("at {:.1} s {why}", (*a - sh.started).as_secs_f64()))
                .collect();
            format!("{outside_5xx} {}", show(&outside))
        },
        "0",
        outside_5xx == 0,
    );
    let worst = |routes: &[&str]| {
        routes
            .iter()
            .filter_map(|r| p99_of.get(r))
            .max()
            .copied()
            .unwrap_or_default()
    };
    let reads = worst(&[
        "GET /v1/notes/{note}",
        "GET /v1/notes",
        "GET /v1/search",
        "GET /v1/sync/ops",
    ]);
    check(
        &mut targets,
        "p99 of reads outside the fault windows (worst read route)",
        format!("{} ms", ms(reads)),
        "≤ 50 ms",
        reads <= Duration::from_millis(50),
    );
    let writes = worst(&[
        "POST /v1/notes",
        "POST /v1/sync/ops",
        "PUT /v1/attachments/{name}",
    ]);
    check(
        &mut targets,
        "p99 of writes outside the fault windows (worst write route)",
        format!("{} ms", ms(writes)),
        "≤ 100 ms",
        writes <= Duration::from_millis(100),
    );
    Report {
        text,
        checks,
        targets,
    }
}

/// Every slug a search for the common word finds in vault `v` on `base`, all pages,
/// once the index holds `seq`; `None`: not answered (yet).
async fn found(sh: &Shared, base: &str, v: usize, seq: i64) -> Option<BTreeSet<String>> {
    let mut slugs = BTreeSet::new();
    let mut token: Option<String> = None;
    loop {
        let mut url = format!(
            "{base}/v1/search?q={COMMON_WORD}&page_size=100&order_by=slug%20asc&min_seq={seq}"
        );
        if let Some(t) = &token {
            url.push_str(&format!("&page_token={t}"));
        }
        let res = sh
            .client
            .get(url)
            .bearer_auth(&sh.tokens[v])
            .send()
            .await
            .ok()?;
        if res.status() != 200 {
            return None;
        }
        let page: Value = res.json().await.ok()?;
        if page["coverage"]["indexed_seq"]
            .as_i64()
            .is_some_and(|s| s < seq)
        {
            return None;
        }
        for r in page["results"].as_array()? {
            slugs.insert(r["slug"].as_str()?.to_string());
        }
        match page["next_page_token"].as_str() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return Some(slugs),
        }
    }
}

/// Compare, for the hottest vaults, each instance's search with the notes table
/// (polled for a while: an instance catches up through `LISTEN` and its own reads).
async fn search_agrees(
    sh: &Shared,
    url: &str,
    bases: &[(String, Option<String>)],
) -> (usize, Vec<String>) {
    let sample = sh.settings.search_sample.min(sh.vault_ids.len());
    let mut agreed = 0;
    let mut disagreed = Vec::new();
    for v in 0..sample {
        let id = &sh.vault_ids[v];
        let seq: i64 = postgres::query(
            url,
            &format!("SELECT committed_seq FROM vault_counters WHERE vault_id = '{id}'"),
        )
        .first()
        .map_or(0, |r| r.get(0));
        let want: BTreeSet<String> = rows(
            url,
            &format!(
                "SELECT path::text FROM notes WHERE vault_id = '{id}' AND path LIKE '%.md' \
                 AND visibility = 'standard'"
            ),
        )
        .into_iter()
        .map(|r| r[0].trim_end_matches(".md").to_string())
        .collect();
        for (base, _) in bases {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let got = found(sh, base, v, seq).await;
                if got.as_ref() == Some(&want) {
                    agreed += 1;
                    break;
                }
                if Instant::now() > deadline {
                    let diff = got.map_or("no answer".to_string(), |g| {
                        format!(
                            "missing {:?}, extra {:?}",
                            want.difference(&g).take(3).collect::<Vec<_>>(),
                            g.difference(&want).take(3).collect::<Vec<_>>()
                        )
                    });
                    disagreed.push(format!("{} on {base}: {diff}", marker(v)));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    (agreed, disagreed)
}

/// How many instances answered a scrape of their metrics listener.
async fn scrape(sh: &Shared, bases: &[(String, Option<String>)]) -> usize {
    let mut n = 0;
    for (_, metrics) in bases {
        let Some(url) = metrics else { continue };
        if let Ok(res) = sh.client.get(url).send().await {
            let ok = res.status() == 200;
            if ok && res.text().await.is_ok_and(|t| t.contains("notevault_")) {
                n += 1;
            }
        }
    }
    n
}
