//! Every `sh` block of README.md that talks to the daemon runs here, in order, against a
//! daemon serving a copy of `vault-example/`, so that an example that stops working
//! fails CI. A block talks to the daemon when it names `http://127.0.0.1:4000` or runs
//! `curl`; one that cannot run here (it needs TLS certificates, a second daemon, values
//! only a person has) is preceded by `<!-- readme-test: skip, WHY -->`, and says why.
//!
//! In a block, `http://127.0.0.1:4000` becomes the test daemon's address, `vault-example`
//! its copy, `notevault` this build, `~` a scratch home. Every `curl` must answer 2xx
//! unless its line ends with `# → NNN` (the status it shows); a search or grep answering
//! no result fails too (an example that finds nothing shows nothing).

#![allow(
    clippy::disallowed_methods,
    reason = "the test runs the README's examples in a scratch folder"
)]

use std::path::Path;
use std::process::Command;

use crate::common;

const BIN: &str = env!("CARGO_BIN_EXE_notevault");
const ADDRESS: &str = "http://127.0.0.1:4000";
const SKIP: &str = "<!-- readme-test: skip, ";

/// One `sh` block: the README line its fence is on, its text, why it is skipped.
struct Block {
    line: usize,
    text: String,
    skip: Option<String>,
}

fn sh_blocks(readme: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = readme.lines().enumerate().peekable();
    let mut previous = "";
    while let Some((i, line)) = lines.next() {
        if line.trim_end() == "```sh" {
            let mut text = String::new();
            for (_, inner) in lines.by_ref() {
                if inner.starts_with("```") {
                    break;
                }
                text.push_str(inner);
                text.push('\n');
            }
            let skip = previous
                .trim()
                .strip_prefix(SKIP)
                .and_then(|r| r.strip_suffix("-->"))
                .map(|r| r.trim().to_string());
            blocks.push(Block {
                line: i + 1,
                text,
                skip,
            });
        }
        if !line.trim().is_empty() {
            previous = line;
        }
    }
    blocks
}

/// The block as the test runs it: addresses, folders and expectations put in.
fn prepared(text: &str, base: &str, vault: &Path, home: &Path) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut line = line
            .replace(ADDRESS, base)
            .replace("vault-example", vault.to_str().unwrap())
            .replace("~/", &format!("{}/", home.display()));
        if let Some(at) = line.rfind("# → ") {
            let status: String = line[at + "# → ".len()..].chars().take(3).collect();
            let indent = line.len() - line.trim_start().len();
            line.insert_str(indent, &format!("EXPECT={status} "));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `curl` as the blocks call it: its output as curl gives it, and each answer with its
/// status and the status expected in `$CURL_LOG`.
const PRELUDE: &str = r#"set -euo pipefail
curl() {
  local out rc=0
  out=$(mktemp)
  command curl -sS -w '\n@@status %{http_code} %{url_effective}\n' "$@" > "$out" || rc=$?
  { cat "$out"; echo "@@expect ${EXPECT:-2xx}"; } >> "$CURL_LOG"
  sed '$d' "$out"
  rm -f "$out"
  return $rc
}
"#;

#[test]
fn readme_examples_run_against_the_example_vault() {
    if common::tools::curl().is_none() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let (_keep, vault, _) = common::temp_vault(Some("vault-example"));
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    let cwd = scratch.path().join("cwd");
    let bin = scratch.path().join("bin");
    for dir in [&home, &cwd, &bin] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::os::unix::fs::symlink(BIN, bin.join("notevault")).unwrap();
    // The state in the vault's own `.notevault`, as `Set up` has it.
    let command = common::daemon::command(BIN, "127.0.0.1:0", &vault, None);
    let daemon = common::daemon::start(command).expect("the daemon serves");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    wait_indexed(&daemon.base);
    let mut ran = 0;
    let mut failures = Vec::new();
    for block in sh_blocks(&readme) {
        let talks = block.text.contains(ADDRESS) || block.text.contains("curl ");
        if !talks || block.skip.is_some() {
            continue;
        }
        ran += 1;
        let log = scratch.path().join(format!("curl-{}.log", block.line));
        let script = format!(
            "{PRELUDE}{}",
            prepared(&block.text, &daemon.base, &vault, &home)
        );
        let out = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .current_dir(&cwd)
            .env("PATH", &path)
            .env("HOME", &home)
            .env("CURL_LOG", &log)
            .env_remove("NOTEVAULT_CONFIG")
            .env_remove("NOTEVAULT_TOKEN")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut wrong = Vec::new();
        if !out.status.success() {
            wrong.push(format!("the block failed ({}): {stderr}", out.status));
        }
        let answers = std::fs::read_to_string(&log).unwrap_or_default();
        wrong.extend(check_answers(&answers));
        if !wrong.is_empty() {
            failures.push(format!(
                "README.md line {}:\n{}\n{}",
                block.line,
                block.text,
                wrong.join("\n")
            ));
        }
    }
    assert!(
        ran >= 8,
        "only {ran} blocks talk to the daemon: is the README read?"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// What is wrong with the answers in a block's output: a status not the one expected,
/// a search or grep with no result.
fn check_answers(log: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut body = String::new();
    let mut status: Option<(u16, String)> = None;
    for line in log.lines() {
        if let Some(rest) = line.strip_prefix("@@status ") {
            let (code, url) = rest.split_once(' ').unwrap_or((rest, ""));
            status = Some((code.parse().unwrap_or(0), url.to_string()));
            continue;
        }
        if let Some(want) = line.strip_prefix("@@expect ") {
            let (code, url) = status.take().unwrap_or_default();
            let fine = match want {
                "2xx" => (200..300).contains(&code),
                other => other.parse() == Ok(code),
            };
            if !fine {
                wrong.push(format!("{url} answered {code}, not {want}: {body}"));
            }
            let answer: Option<serde_json::Value> = serde_json::from_str(body.trim()).ok();
            let empty = answer
                .as_ref()
                .and_then(|a| a["results"].as_array())
                .is_some_and(Vec::is_empty);
            if empty && want == "2xx" && (url.contains("/v1/search") || url.contains("/v1/grep")) {
                wrong.push(format!("{url} found nothing: {body}"));
            }
            body.clear();
            continue;
        }
        body.push_str(line);
        body.push('\n');
    }
    wrong
}

#[test]
fn the_setup_is_two_commands() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let setup = readme
        .split("\n## ")
        .find(|s| s.starts_with("Set up"))
        .expect("a Set up section");
    let blocks = sh_blocks(setup);
    let commands: Vec<&str> = blocks.iter().map(|b| b.text.trim()).collect();
    assert_eq!(
        commands,
        ["cargo run --release -- serve vault-example", "cargo test"]
    );
}

/// Wait until the daemon's index holds what it recorded at its start, as a person would
/// before the first search.
fn wait_indexed(base: &str) {
    for _ in 0..400 {
        let out = Command::new("curl")
            .args(["-sS", &format!("{base}/v1/index-status")])
            .output()
            .unwrap();
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let committed = status["committed_seq"].as_i64().unwrap_or(-1);
        if committed > 0 && status["indexed_seq"].as_i64() == Some(committed) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the daemon at {base} did not index the example vault");
}
