//! Optional hybrid search (`mode=hybrid`) against the real binary, with a tiny
//! model2vec-style model this test writes itself: a WordLevel `tokenizer.json`, a
//! `model.safetensors` matrix in which synonyms share a vector, and a `config.json`.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the editor and the operator: they write the vault, the model and read the environment"
)]

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{spawn, temp_vault, Daemon};
use safetensors::tensor::{Dtype, TensorView};
use serde_json::{json, Value};

/// Words of one meaning share one vector: a query in other words than a note's finds it.
pub(crate) const VEHICLES: &[&str] = &["car", "automobile", "vehicle", "truck"];
pub(crate) const COOKING: &[&str] = &["recipe", "cooking", "kitchen", "bread"];
pub(crate) const MONEY: &[&str] = &["money", "budget", "savings", "groceries"];

/// Write a model: `[UNK]`, then each group's words with the group's vector; `dtype`
/// F32 or F16; `hidden_dim` is what `config.json` claims.
fn write_model(dir: &Path, groups: &[(&[&str], [f32; 4])], dtype: Dtype, hidden_dim: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let mut vocab = serde_json::Map::new();
    vocab.insert("[UNK]".into(), json!(0));
    let mut rows: Vec<[f32; 4]> = vec![[0.0; 4]];
    for (words, v) in groups {
        for w in *words {
            vocab.insert((*w).into(), json!(rows.len()));
            rows.push(*v);
        }
    }
    let tokenizer = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    let bytes: Vec<u8> = match dtype {
        Dtype::F16 => rows
            .iter()
            .flatten()
            .flat_map(|x| half::f16::from_f32(*x).to_le_bytes())
            .collect(),
        _ => rows
            .iter()
            .flatten()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
    };
    let view = TensorView::new(dtype, vec![rows.len(), 4], &bytes).unwrap();
    let file = safetensors::tensor::serialize([("embeddings", view)], None).unwrap();
    std::fs::write(dir.join("model.safetensors"), file).unwrap();
    let config = json!({"model_type": "model2vec", "normalize": true, "hidden_dim": hidden_dim});
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
}

/// The daemon on `vault` with the model in `model` (`NOTEVAULT_EMBED_MODEL`).
fn spawn_with_model(vault: &Path, state: &Path, model: &Path) -> Daemon {
    spawn(
        vault,
        state,
        &[("NOTEVAULT_EMBED_MODEL", model.to_str().unwrap())],
    )
}

fn model_a(dir: &Path) {
    write_model(
        dir,
        &[
            (VEHICLES, [1.0, 0.0, 0.0, 0.0]),
            (COOKING, [0.0, 1.0, 0.0, 0.0]),
            (MONEY, [0.0, 0.0, 1.0, 0.0]),
        ],
        Dtype::F32,
        4,
    );
}

/// The notes: none says `car`, `cooking` or `budget`; a private note file holds vehicle
/// words in the clear (a device would have encrypted them: the daemon must not care).
pub(crate) fn write_vault(vault: &Path) {
    let files = [
        (
            "garage.md",
            "---\ntags: [auto]\n---\n# Garage\n\nThe automobile needs new tyres.\n",
        ),
        ("fleet.md", "# Fleet\n\nEvery truck is serviced in May.\n"),
        (
            "bakery.md",
            "# Bakery\n\nA recipe for bread.\n\n## Oven\n\nPreheat it.\n",
        ),
        ("plans.md", "# Plans\n\nSavings for next year.\n"),
    ];
    for (name, text) in files {
        std::fs::write(vault.join(name), text).unwrap();
    }
    let mut private = notevault::vault::PRIVATE_MAGIC.to_vec();
    private.extend_from_slice(b"car automobile vehicle truck\n");
    std::fs::write(vault.join("diary.nvpriv"), private).unwrap();
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    let res = reqwest::get(format!("{base}{path}")).await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
    (status, body)
}

pub(crate) async fn ok(base: &str, path: &str) -> Value {
    let (status, body) = get(base, path).await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

pub(crate) fn slugs(body: &Value) -> Vec<String> {
    body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["slug"].as_str().unwrap().to_string())
        .collect()
}

pub(crate) fn retriever<'a>(body: &'a Value, name: &str) -> &'a Value {
    body["coverage"]["retrievers"]
        .as_array()
        .unwrap_or_else(|| panic!("no retrievers in {body}"))
        .iter()
        .find(|r| r["retriever"] == name)
        .unwrap_or_else(|| panic!("no {name} retriever in {body}"))
}

/// Wait until every recorded change is indexed and embedded; the index status.
pub(crate) async fn settled(base: &str) -> Value {
    common::eventually_within(
        Duration::from_secs(30),
        "index and vectors catch up",
        || async {
            let st = ok(base, "/v1/index-status").await;
            st["indexed_seq"] == st["committed_seq"]
                && st["search_index"]["not_yet_indexed"] == 0
                && st["embeddings"]["syncing"] == false
                && st["embeddings"]["pending"] == 0
        },
    )
    .await;
    ok(base, "/v1/index-status").await
}

/// Stop the daemon as Ctrl-C does, and wait for it.
pub(crate) fn stop(mut d: Daemon) -> String {
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(d.child.id() as i32, libc::SIGINT) };
    let status = d.child.wait().unwrap();
    let log = d.rest();
    assert!(status.success(), "{status}: {log}");
    log
}

#[tokio::test]
async fn hybrid_finds_synonyms_follows_edits_reuses_vectors_and_keeps_private_notes_out() {
    let (dir, vault, state) = temp_vault(None);
    write_vault(&vault);
    let model = dir.path().join("model-a");
    model_a(&model);
    let env = [("NOTEVAULT_EMBED_MODEL", model.to_str().unwrap())];
    let d = spawn(&vault, &state, &env);
    let base = d.base.clone();
    let st = settled(&base).await;
    let e = &st["embeddings"];
    assert_eq!(e["state"], "ready", "{st}");
    assert_eq!(e["dimensions"], 4);
    assert_eq!(e["notes"], 4, "{st}");
    assert_eq!(e["computed"], 4);
    assert_eq!(e["rebuilt"], "no stored vectors yet");

    // Lexical: no note says `car`.
    let lexical = ok(&base, "/v1/search?q=car").await;
    assert_eq!(slugs(&lexical), Vec::<String>::new(), "{lexical}");
    assert_eq!(retriever(&lexical, "lexical")["ran"], true);
    assert_eq!(
        lexical["coverage"]["retrievers"].as_array().unwrap().len(),
        1
    );
    // Hybrid: the automobile and the truck, by meaning; the private note never.
    let hybrid = ok(&base, "/v1/search?q=car&mode=hybrid").await;
    let mut found = slugs(&hybrid);
    found.sort();
    assert_eq!(found, vec!["fleet", "garage"], "{hybrid}");
    let v = retriever(&hybrid, "vector");
    assert_eq!(v["ran"], true, "{hybrid}");
    assert_eq!(v["notes_covered"], 4, "{hybrid}");
    assert_eq!(v["notes_matched"], 2, "{hybrid}");
    assert_eq!(retriever(&hybrid, "lexical")["notes_covered"], 4);
    assert_eq!(hybrid["coverage"]["excluded_by_reason"]["private"], 1);
    assert!(!hybrid.to_string().contains("diary"), "{hybrid}");
    for q in ["vehicle", "truck%20automobile", "car%20OR%20vehicle"] {
        let body = ok(
            &base,
            &format!("/v1/search?q={q}&mode=hybrid&page_size=100"),
        )
        .await;
        assert!(!body.to_string().contains("diary"), "{q}: {body}");
    }
    // A word both retrievers find ranks first (fused), then the vector-only match.
    let both = ok(&base, "/v1/search?q=truck&mode=hybrid").await;
    assert_eq!(slugs(&both), vec!["fleet", "garage"], "{both}");
    assert!(
        both["results"][0]["score"].as_f64().unwrap()
            > both["results"][1]["score"].as_f64().unwrap()
    );

    // Filters, paging and the handle shape are the lexical ones.
    let filtered = ok(&base, "/v1/search?q=car&mode=hybrid&filter=tags%3Aauto").await;
    assert_eq!(slugs(&filtered), vec!["garage"], "{filtered}");
    // A filter narrows what is returned, not what was searched: every note has vectors.
    assert_eq!(
        retriever(&filtered, "vector")["notes_covered"],
        filtered["coverage"]["notes_searched"],
        "{filtered}"
    );
    assert!(
        !filtered.to_string().contains("have current vectors"),
        "{filtered}"
    );
    let first = ok(&base, "/v1/search?q=car&mode=hybrid&page_size=1").await;
    assert_eq!(first["coverage"]["notes_matched"], 2, "{first}");
    assert_eq!(first["coverage"]["truncated"], true);
    let token = first["next_page_token"].as_str().unwrap().to_string();
    let second = ok(
        &base,
        &format!("/v1/search?q=car&mode=hybrid&page_size=1&page_token={token}"),
    )
    .await;
    let mut paged = [slugs(&first), slugs(&second)].concat();
    paged.sort();
    assert_eq!(paged, vec!["fleet", "garage"], "{first} {second}");
    assert!(second["next_page_token"].is_null());
    // A page token is bound to its mode.
    let (status, body) = get(
        &base,
        &format!("/v1/search?q=car&page_size=1&page_token={token}"),
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("VALIDATION_FAILED")),
        "{body}"
    );
    let hit = &first["results"][0];
    for field in [
        "note_id",
        "slug",
        "title",
        "version_id",
        "content_hash",
        "matched_fields",
        "lines",
    ] {
        assert!(hit.get(field).is_some(), "{field} in {hit}");
    }
    // Required words keep their meaning: the vector side only re-ranks word matches.
    let required = ok(&base, "/v1/search?q=%2Bautomobile%20car&mode=hybrid").await;
    assert_eq!(slugs(&required), vec!["garage"], "{required}");

    // An edit: the bakery's note now speaks of groceries. Its vectors follow.
    let note = ok(&base, "/v1/notes/bakery").await;
    let res = reqwest::Client::new()
        .patch(format!("{base}/v1/notes/bakery?update_mask=content"))
        .header("Idempotency-Key", "edit-bakery")
        .json(&json!({
            "content": "# Bakery\n\nGroceries are cheaper on Mondays.\n",
            "version_id": note["version_id"],
            "agent_id": "t"
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let receipt: Value = res.json().await.unwrap();
    let seq = receipt["committed_seq"].as_i64().unwrap();
    let money = ok(
        &base,
        &format!("/v1/search?q=budget&mode=hybrid&min_seq={seq}"),
    )
    .await;
    let mut found = slugs(&money);
    found.sort();
    assert_eq!(found, vec!["bakery", "plans"], "{money}");
    let cooking = ok(&base, "/v1/search?q=cooking&mode=hybrid").await;
    assert_eq!(slugs(&cooking), Vec::<String>::new(), "{cooking}");

    // Deleted, a note is no answer by meaning either.
    let res = reqwest::Client::new()
        .delete(format!("{base}/v1/notes/bakery?agent_id=t"))
        .header("Idempotency-Key", "delete-bakery")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let receipt: Value = res.json().await.unwrap();
    let seq = receipt["committed_seq"].as_i64().unwrap();
    let gone = ok(
        &base,
        &format!("/v1/search?q=budget&mode=hybrid&min_seq={seq}"),
    )
    .await;
    assert_eq!(slugs(&gone), vec!["plans"], "{gone}");
    let st = settled(&base).await;
    assert_eq!(st["embeddings"]["notes"], 3, "{st}");

    // A restart reuses the stored vectors: loaded and current, none computed.
    let log = stop(d);
    assert!(
        !log.contains("automobile") && !log.contains("Groceries"),
        "note text in the log: {log}"
    );
    let files: Vec<_> = std::fs::read_dir(state.join("vectors")).unwrap().collect();
    assert_eq!(files.len(), 1, "one vectors file: {files:?}");
    let d = spawn(&vault, &state, &env);
    let st = settled(&d.base).await;
    let e = &st["embeddings"];
    assert_eq!(
        (
            e["loaded"].as_u64(),
            e["reused"].as_u64(),
            e["computed"].as_u64()
        ),
        (Some(3), Some(3), Some(0)),
        "{st}"
    );
    assert!(e["rebuilt"].is_null(), "{st}");
    let again = ok(&d.base, "/v1/search?q=budget&mode=hybrid").await;
    assert_eq!(slugs(&again), vec!["plans"], "{again}");
    stop(d);

    // Another model (f16, meanings swapped): its vectors are computed, the old file goes.
    let other = dir.path().join("model-b");
    write_model(
        &other,
        &[
            (VEHICLES, [0.0, 0.0, 0.0, 1.0]),
            (COOKING, [0.0, 0.0, 1.0, 0.0]),
            (MONEY, [1.0, 1.0, 0.0, 0.0]),
        ],
        Dtype::F16,
        4,
    );
    let d = spawn_with_model(&vault, &state, &other);
    let st = settled(&d.base).await;
    let e = &st["embeddings"];
    assert_eq!(
        e["rebuilt"], "the stored vectors are of another model",
        "{st}"
    );
    assert_eq!(
        (e["loaded"].as_u64(), e["computed"].as_u64()),
        (Some(0), Some(3)),
        "{st}"
    );
    let car = ok(&d.base, "/v1/search?q=car&mode=hybrid").await;
    assert_eq!(slugs(&car).len(), 2, "{car}");
    stop(d);
    let files: Vec<_> = std::fs::read_dir(state.join("vectors")).unwrap().collect();
    assert_eq!(
        files.len(),
        1,
        "the old model's vectors are removed: {files:?}"
    );
}

#[tokio::test]
async fn a_broken_model_leaves_search_lexical_and_says_why() {
    let (dir, vault, state) = temp_vault(None);
    write_vault(&vault);
    let missing = dir.path().join("missing-tokenizer");
    model_a(&missing);
    std::fs::remove_file(missing.join("tokenizer.json")).unwrap();
    let garbage = dir.path().join("bad-safetensors");
    model_a(&garbage);
    std::fs::write(
        garbage.join("model.safetensors"),
        b"\x10\x00\x00\x00\x00\x00\x00\x00{not json",
    )
    .unwrap();
    let dims = dir.path().join("dims");
    write_model(&dims, &[(VEHICLES, [1.0, 0.0, 0.0, 0.0])], Dtype::F32, 8);
    let nowhere = dir.path().join("no-such-folder");
    for (model, says) in [
        (&missing, "tokenizer.json"),
        (&garbage, "safetensors"),
        (&dims, "hidden_dim 8"),
        (&nowhere, "not usable"),
    ] {
        let d = spawn_with_model(&vault, &state, model);
        let st = settled(&d.base).await;
        let e = &st["embeddings"];
        assert_eq!(e["state"], "failed", "{st}");
        assert!(e["error"].as_str().unwrap().contains(says), "{says}: {st}");
        let body = ok(&d.base, "/v1/search?q=automobile&mode=hybrid").await;
        assert_eq!(slugs(&body), vec!["garage"], "{body}");
        let v = retriever(&body, "vector");
        assert_eq!(v["ran"], false, "{body}");
        assert!(v["reason"].as_str().unwrap().contains(says), "{body}");
        assert!(
            body["coverage"]["notes"]
                .to_string()
                .contains("did not run"),
            "{body}"
        );
        stop(d);
    }
}

#[tokio::test]
async fn without_a_model_hybrid_answers_lexically_and_a_bad_mode_is_refused() {
    let (_dir, vault, state) = temp_vault(None);
    write_vault(&vault);
    let d = spawn(&vault, &state, &[]);
    let st = settled(&d.base).await;
    assert_eq!(st["embeddings"]["state"], "off", "{st}");
    let body = ok(&d.base, "/v1/search?q=automobile&mode=hybrid").await;
    assert_eq!(slugs(&body), vec!["garage"], "{body}");
    // The lexical answer itself (BM25 scores, provenance).
    let lexical = ok(&d.base, "/v1/search?q=automobile").await;
    assert_eq!(body["results"], lexical["results"]);
    let v = retriever(&body, "vector");
    assert_eq!(v["ran"], false);
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("NOTEVAULT_EMBED_MODEL"),
        "{body}"
    );
    assert!(
        !state.join("vectors").exists(),
        "no vectors without a model"
    );
    for mode in ["semantic", "HYBRID", ""] {
        let (status, e) = get(&d.base, &format!("/v1/search?q=car&mode={mode}")).await;
        assert_eq!(status, 400, "mode={mode:?}: {e}");
        common::assert_envelope(&e, 400, "VALIDATION_FAILED");
        assert_eq!(common::violated_field(&e), "mode", "{e}");
        if !mode.is_empty() {
            assert!(e["message"].as_str().unwrap().contains("hybrid"), "{e}");
        }
    }
    stop(d);
}

/// Past the lexical hits the fusion fetches (the first 1,000), a note both retrievers
/// found is counted once in `notes_matched`.
#[tokio::test]
async fn a_note_both_retrievers_match_is_counted_once_past_the_fused_depth() {
    let (dir, vault, state) = temp_vault(None);
    write_vault(&vault);
    // 1,000 short notes say `car` (the best BM25), mixed with cooking by meaning; 60 long
    // ones say it once among trucks (the last BM25 hits, past the first 1,000), and are
    // the nearest by meaning with the garage and the fleet.
    for (folder, count, text) in [
        ("short", 1_000, "car bread bread\n".to_string()),
        ("long", 60, format!("car{}\n", " truck".repeat(30))),
    ] {
        std::fs::create_dir_all(vault.join(folder)).unwrap();
        for i in 0..count {
            std::fs::write(vault.join(folder).join(format!("n{i:04}.md")), &text).unwrap();
        }
    }
    let model = dir.path().join("model-a");
    model_a(&model);
    let d = spawn_with_model(&vault, &state, &model);
    settled(&d.base).await;
    let lexical = ok(&d.base, "/v1/search?q=car&page_size=1").await;
    assert_eq!(lexical["coverage"]["notes_matched"], 1_060, "{lexical}");
    let first = ok(&d.base, "/v1/search?q=car&page_size=50").await;
    assert!(
        slugs(&first).iter().all(|s| s.starts_with("short/")),
        "the short notes are the best lexical hits: {first}"
    );
    let hybrid = ok(&d.base, "/v1/search?q=car&mode=hybrid&page_size=5").await;
    let v = retriever(&hybrid, "vector");
    assert_eq!(v["notes_matched"], 100, "{hybrid}");
    // Every word match, and the two notes only the meaning found.
    assert_eq!(hybrid["coverage"]["notes_matched"], 1_062, "{hybrid}");
    stop(d);
}

/// Fusion follows the lexical winner's lead: a note far ahead by words stays first when
/// the vectors rank it last (`fuse.rs` tests the near tie that meaning decides).
#[tokio::test]
async fn fusion_keeps_a_clear_keyword_winner_first() {
    let (dir, vault, state) = temp_vault(None);
    for (name, text) in [
        // By words the best `truck` by far (title and body); by meaning mostly money.
        (
            "costs.md",
            "# Truck costs\n\ntruck truck budget money savings groceries money budget savings\n",
        ),
        // `truck` once, and only vehicle words: the nearest by meaning.
        (
            "depot.md",
            "# Depot\n\nThe truck waits with an automobile and a vehicle in the depot.\n",
        ),
        ("yard.md", "# Yard\n\nA vehicle and an automobile.\n"),
    ] {
        std::fs::write(vault.join(name), text).unwrap();
    }
    let model = dir.path().join("model-a");
    model_a(&model);
    let d = spawn_with_model(&vault, &state, &model);
    settled(&d.base).await;
    let lexical = slugs(&ok(&d.base, "/v1/search?q=truck").await);
    assert_eq!(lexical, ["costs", "depot"]);
    let hybrid = ok(&d.base, "/v1/search?q=truck&mode=hybrid").await;
    assert_eq!(slugs(&hybrid)[0], "costs", "{hybrid}");
    let mut all = slugs(&hybrid);
    all.sort();
    assert_eq!(all, ["costs", "depot", "yard"], "{hybrid}");
    stop(d);
}

/// A purge removes the note vectors with the rest of the state (they are derived from
/// the notes' text).
#[tokio::test]
async fn a_purge_removes_the_note_vectors() {
    let (dir, vault, state) = temp_vault(None);
    write_vault(&vault);
    let model = dir.path().join("model-a");
    model_a(&model);
    let session = "session-token-for-hybrid-tests";
    let tokens =
        json!([{ "token": session, "permissions": ["notes.write", "notes.review"] }]).to_string();
    let mut d = spawn(
        &vault,
        &state,
        &[
            ("NOTEVAULT_EMBED_MODEL", model.to_str().unwrap()),
            ("NOTEVAULT_STATIC_TOKENS", tokens.as_str()),
        ],
    );
    common::eventually_within(
        Duration::from_secs(30),
        "the vectors are written",
        || async { std::fs::read_dir(state.join("vectors")).is_ok_and(|mut e| e.next().is_some()) },
    )
    .await;
    let res = reqwest::Client::new()
        .post(format!("{}/v1/vault/purge", d.base))
        .bearer_auth(session)
        .json(&json!({"confirm": "vault"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let status = d.child.wait().unwrap();
    let log = d.rest();
    assert!(status.success(), "{log}");
    assert!(!state.join("index").exists());
    assert!(
        !state.join("vectors").exists(),
        "the note vectors outlive a purge"
    );
}

/// `notevault reindex` with a model leaves every note's vectors stored: the next start
/// reuses them all.
#[tokio::test]
async fn reindex_with_a_model_stores_every_notes_vectors() {
    let (dir, vault, state) = temp_vault(None);
    write_vault(&vault);
    let model = dir.path().join("model-a");
    model_a(&model);
    let out = std::process::Command::new(common::BIN)
        .args(["reindex", "--state-dir"])
        .arg(&state)
        .arg(&vault)
        .env_remove("NOTEVAULT_CONFIG")
        .env("NOTEVAULT_EMBED_MODEL", &model)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = spawn_with_model(&vault, &state, &model);
    let st = settled(&d.base).await;
    let e = &st["embeddings"];
    assert_eq!(
        (e["loaded"].as_u64(), e["computed"].as_u64()),
        (Some(4), Some(0)),
        "{st}"
    );
    stop(d);
}
