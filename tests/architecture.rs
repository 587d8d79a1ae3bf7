//! The architecture's rules, checked on every `cargo test` (in the spirit of
//! rust-analyzer's `xtask/src/tidy.rs`): no import cycle between files at any depth, the
//! forbidden arrows, no file over 700 lines, and ARCHITECTURE.md's code map naming exactly
//! what `src/` holds. Unit-test code (`tests.rs`, `#[cfg(test)] mod tests { .. }`) is left
//! out: it may reach anything.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use regex::Regex;

const MAX_LINES: usize = 700;
/// The route table: one row per route, which is clearer whole than split.
const LONG_ALLOWED: &[&str] = &["src/api/routes.rs"];

/// A module path under the crate: `["vault", "fsio"]` for `src/vault/fsio.rs`.
type Module = Vec<String>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn relative(path: &Path) -> String {
    path.strip_prefix(src())
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

/// Every module file but the crate roots and the unit-test files.
fn modules() -> BTreeMap<Module, PathBuf> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut out = BTreeMap::new();
    for path in files {
        let rel = relative(&path);
        let mut parts: Module = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(String::from)
            .collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        if parts == ["main"] || parts == ["lib"] || parts.last().is_some_and(|p| p == "tests") {
            continue;
        }
        out.insert(parts, path);
    }
    out
}

/// A file's text without its inline unit-test module (always the file's last item here).
fn code(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap();
    let tests = Regex::new(r"#\[cfg\(test\)\]\s*mod tests\s*\{").unwrap();
    match tests.find(&text) {
        Some(m) => text[..m.start()].to_string(),
        None => text,
    }
}

/// The modules a file imports: `crate::`, `super::` and `self::` paths resolved to the
/// deepest module file that exists. An arrow to one's own ancestor is not counted: a
/// parent declares its children, and children using the parent's types is the shape.
fn imports(module: &Module, text: &str, all: &BTreeMap<Module, PathBuf>) -> BTreeSet<Module> {
    let path = Regex::new(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)").unwrap();
    let group =
        Regex::new(r"(?s)\b(crate|super|self)((?:::[a-z_][a-z0-9_]*)*)::\{(.*?)\};").unwrap();
    let nested = Regex::new(r"\{[^{}]*\}").unwrap();
    let mut refs: Vec<(String, Vec<String>)> = Vec::new();
    for c in path.captures_iter(text) {
        let names = c[2]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        refs.push((c[1].to_string(), names));
    }
    for c in group.captures_iter(text) {
        let prefix: Vec<String> = c[2]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let inner = nested.replace_all(&c[3], "");
        for part in inner.split([',', ' ', '\n', '\t']).map(str::trim) {
            if part.is_empty() || part == "self" {
                continue;
            }
            let mut names = prefix.clone();
            names.extend(part.split("::").filter(|s| !s.is_empty()).map(String::from));
            refs.push((c[1].to_string(), names));
        }
    }
    let mut out = BTreeSet::new();
    for (keyword, names) in refs {
        let base: Module = match keyword.as_str() {
            "crate" => Vec::new(),
            "super" => module[..module.len().saturating_sub(1)].to_vec(),
            _ => module.clone(),
        };
        let target = (1..=names.len())
            .rev()
            .map(|k| [base.clone(), names[..k].to_vec()].concat())
            .find(|c| all.contains_key(c));
        if let Some(t) = target {
            let ancestor = t.len() < module.len() && module[..t.len()] == t[..];
            if &t != module && !ancestor {
                out.insert(t);
            }
        }
    }
    out
}

fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let all = modules();
    all.iter()
        .map(|(m, p)| (m.clone(), imports(m, &code(p), &all)))
        .collect()
}

/// Tarjan's strongly connected components of more than one file.
fn cycles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a Module) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    comp.push(w.join("/"));
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.out.push(comp);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.out
}

#[test]
fn no_import_cycle_between_files() {
    let found = cycles(&graph());
    assert!(found.is_empty(), "files importing each other in a circle (move the shared type to the file it belongs to): {found:#?}");
}

/// What may start the composition root: itself, and the command handlers of `main`.
const ROOT_CALLERS: &[&str] = &["daemon", "cmd"];

/// The modules that are the core: they know nothing of a surface, a transport or a
/// database, so that hosted mode can put another store and another door beside them.
const CORE: &[&str] = &[
    "vault", "writes", "record", "queries", "history", "index", "sync", "watch", "state", "filter",
    "storage", "vaults",
];
const SURFACES: &[&str] = &[
    "api", "surface", "mcp", "console", "http", "daemon", "device", "cli",
];
/// The domain core stands on these alone.
const VAULT_MAY_IMPORT: &[&str] = &["vault", "error", "filter", "progress"];
const SURFACE_CRATES: &[&str] = &[
    "axum",
    "hyper",
    "hyper_util",
    "http_body_util",
    "tower",
    "tower_http",
    "rmcp",
    "askama",
    "reqwest",
    "utoipa",
];
const DATABASE_CRATES: &[&str] = &["rusqlite", "tokio_postgres", "deadpool_postgres"];
/// The surfaces that reach the shared calls through `surface`, never through `api`.
const BESIDE_API: &[&str] = &["mcp", "console"];
/// What `surface` must not know: the surfaces standing on it and the application around
/// them.
const ABOVE_SURFACE: &[&str] = &["api", "mcp", "console", "http", "daemon"];
/// Arrows from `BESIDE_API` into `api` still standing, as (file, module): MCP's write
/// tools call the HTTP write path until they build the domain's validated requests
/// (issue 42, part 2). Each must still be used, so the list only shrinks.
const API_ARROWS_PENDING: &[(&str, &str)] = &[];
/// Where a database crate may be named: the metadata store, hosted mode's PostgreSQL and
/// the reason table's `From`.
const DATABASE_HOMES: &[&str] = &["meta", "hosted", "error"];
/// The stores: infrastructure under the core, knowing no surface or transport.
const STORES: &[&str] = &["meta", "hosted"];

#[test]
fn the_forbidden_arrows_are_absent() {
    let all = modules();
    let mut wrong = Vec::new();
    let mut pending_used = BTreeSet::new();
    for (module, path) in &all {
        let text = code(path);
        let top = module[0].as_str();
        let name = relative(path);
        let uses = |krate: &str| {
            Regex::new(&format!(r"(^|[^A-Za-z0-9_:]){krate}::"))
                .unwrap()
                .is_match(&text)
        };
        for target in imports(module, &text, &all) {
            let to = target[0].as_str();
            if to == "daemon" && !ROOT_CALLERS.contains(&top) {
                wrong.push(format!("{name} imports the composition root `daemon`"));
            }
            if CORE.contains(&top) && SURFACES.contains(&to) {
                wrong.push(format!("{name} (core) imports the surface `{to}`"));
            }
            if BESIDE_API.contains(&top) && to == "api" {
                let arrow = (name.as_str(), target.join("/"));
                match API_ARROWS_PENDING
                    .iter()
                    .find(|(file, module)| (*file, module.to_string()) == arrow)
                {
                    Some(pending) => {
                        pending_used.insert(*pending);
                    }
                    None => wrong.push(format!(
                        "{name} imports `{}`: the calls `api` shares are `surface`'s",
                        target.join("/")
                    )),
                }
            }
            if STORES.contains(&top) && (SURFACES.contains(&to) || to == "cmd") {
                wrong.push(format!("{name} (a store) imports the surface `{to}`"));
            }
            if top == "surface" && ABOVE_SURFACE.contains(&to) {
                wrong.push(format!(
                    "{name} (shared calls) imports `{to}`, which stands on it"
                ));
            }
        }
        if top == "vault" {
            for target in imports(module, &text, &all) {
                if !VAULT_MAY_IMPORT.contains(&target[0].as_str()) {
                    wrong.push(format!(
                        "{name} (the domain core) imports `{}`",
                        target.join("/")
                    ));
                }
            }
        }
        if STORES.contains(&top) {
            for krate in SURFACE_CRATES {
                if uses(krate) {
                    wrong.push(format!("{name} (a store) names the crate `{krate}`"));
                }
            }
        }
        if CORE.contains(&top) {
            for krate in SURFACE_CRATES.iter().chain(DATABASE_CRATES) {
                if uses(krate) {
                    wrong.push(format!("{name} (core) names the crate `{krate}`"));
                }
            }
        }
        if !DATABASE_HOMES.contains(&top) {
            for krate in DATABASE_CRATES {
                if uses(krate) {
                    wrong.push(format!(
                        "{name} names the database crate `{krate}` outside `meta`"
                    ));
                }
            }
        }
    }
    for pending in API_ARROWS_PENDING {
        if !pending_used.contains(pending) {
            wrong.push(format!(
                "{} no longer imports `{}`: drop it from API_ARROWS_PENDING",
                pending.0, pending.1
            ));
        }
    }
    assert!(wrong.is_empty(), "forbidden arrows:\n{}", wrong.join("\n"));
}

#[test]
fn no_source_file_is_over_700_lines() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut long: Vec<String> = files
        .iter()
        .map(|p| (relative(p), fs::read_to_string(p).unwrap().lines().count()))
        .filter(|(rel, n)| *n > MAX_LINES && !LONG_ALLOWED.contains(&format!("src/{rel}").as_str()))
        .map(|(rel, n)| format!("src/{rel}: {n} lines"))
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split by what each part holds):\n{}",
        long.join("\n")
    );
}

/// What the code map names: under each `### `dir/`` heading (or the top level), the
/// backticked file and folder names a bullet opens with, before its first `:`; and the
/// folders that have a heading of their own.
fn code_map() -> (BTreeSet<String>, BTreeSet<String>) {
    let text =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap();
    let map = text
        .split("## Code map")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Code map`");
    let map = map.split("\n## ").next().unwrap();
    let heading = Regex::new(r"^### `([a-z_]+/)`").unwrap();
    let name = Regex::new(r"`([a-z0-9_]+(?:/[a-z0-9_]+)*(?:\.rs|/))`").unwrap();
    let mut dir = String::new();
    let (mut named, mut headed) = (BTreeSet::new(), BTreeSet::new());
    for line in map.lines() {
        if let Some(c) = heading.captures(line) {
            dir = c[1].to_string();
            headed.insert(dir.clone());
            continue;
        }
        let Some(bullet) = line.strip_prefix("- ") else {
            continue;
        };
        let mut lead = String::new();
        let mut in_tick = false;
        for ch in bullet.chars() {
            if ch == '`' {
                in_tick = !in_tick;
            }
            if ch == ':' && !in_tick {
                break;
            }
            lead.push(ch);
        }
        for c in name.captures_iter(&lead) {
            named.insert(format!("{dir}{}", &c[1]));
        }
    }
    (named, headed)
}

#[test]
fn architecture_md_names_every_module_and_no_other() {
    let (named, headed) = code_map();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    // A file is on the map when it is named, or a folder above it is named without a
    // heading of its own (`daemon/`, `index/embed/`: one line for what they hold).
    let covered = |rel: &str| {
        named.contains(rel)
            || rel.match_indices('/').any(|(i, _)| {
                let folder = &rel[..=i];
                named.contains(folder) && !headed.contains(folder)
            })
    };
    // Unit tests (`tests.rs`, `tests/`) are test-only and need no line of their own.
    let test_only = |rel: &str| rel.ends_with("/tests.rs") || rel.contains("/tests/");
    let mut missing: Vec<String> = files
        .iter()
        .map(|p| relative(p))
        .filter(|r| !covered(r) && !test_only(r))
        .collect();
    missing.sort();
    let stale: Vec<&String> = named
        .iter()
        .chain(&headed)
        .filter(|e| !src().join(e).exists())
        .collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "ARCHITECTURE.md's code map and src/ disagree.\nnot on the map: {missing:?}\non the map, not in src/: {stale:?}"
    );
}
