//! Hybrid search with a transformer sentence model (a BERT folder as sentence-transformers
//! lays it out), with tiny models this test writes itself: a WordPiece `tokenizer.json`
//! with BERT's normalizer and `[CLS]`/`[SEP]`, a BERT `config.json`, `model.safetensors`.
//! The model's vectors are checked against a forward pass written out here; the daemon's
//! hybrid search is checked with a model whose synonyms share a word vector.

#![allow(
    clippy::disallowed_methods,
    reason = "tests play the operator: they write the model and the vault"
)]

use std::path::Path;

use notevault::index::embed::model::Model;
use safetensors::tensor::{Dtype, TensorView};
use serde_json::json;

use super::hybrid::{ok, retriever, settled, slugs, stop, write_vault, COOKING, MONEY, VEHICLES};
use crate::common::{spawn, temp_vault};

const HIDDEN: usize = 8;
const HEADS: usize = 2;
const INTER: usize = 16;
const LAYERS: usize = 2;
const POSITIONS: usize = 512;
const EPS: f32 = 1e-12;
/// `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, then the words.
const SPECIAL: [&str; 4] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"];
const CLS: usize = 2;
const SEP: usize = 3;

/// The tensors of a tiny BERT, by name: `value(name, index)` gives each value.
fn tensors(
    vocab: usize,
    mut value: impl FnMut(&str, usize) -> f32,
) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    let mut shapes: Vec<(String, Vec<usize>)> = vec![
        (
            "embeddings.word_embeddings.weight".into(),
            vec![vocab, HIDDEN],
        ),
        (
            "embeddings.position_embeddings.weight".into(),
            vec![POSITIONS, HIDDEN],
        ),
        (
            "embeddings.token_type_embeddings.weight".into(),
            vec![2, HIDDEN],
        ),
        ("embeddings.LayerNorm.weight".into(), vec![HIDDEN]),
        ("embeddings.LayerNorm.bias".into(), vec![HIDDEN]),
    ];
    for l in 0..LAYERS {
        let p = format!("encoder.layer.{l}");
        for (name, shape) in [
            ("attention.self.query.weight", vec![HIDDEN, HIDDEN]),
            ("attention.self.query.bias", vec![HIDDEN]),
            ("attention.self.key.weight", vec![HIDDEN, HIDDEN]),
            ("attention.self.key.bias", vec![HIDDEN]),
            ("attention.self.value.weight", vec![HIDDEN, HIDDEN]),
            ("attention.self.value.bias", vec![HIDDEN]),
            ("attention.output.dense.weight", vec![HIDDEN, HIDDEN]),
            ("attention.output.dense.bias", vec![HIDDEN]),
            ("attention.output.LayerNorm.weight", vec![HIDDEN]),
            ("attention.output.LayerNorm.bias", vec![HIDDEN]),
            ("intermediate.dense.weight", vec![INTER, HIDDEN]),
            ("intermediate.dense.bias", vec![INTER]),
            ("output.dense.weight", vec![HIDDEN, INTER]),
            ("output.dense.bias", vec![HIDDEN]),
            ("output.LayerNorm.weight", vec![HIDDEN]),
            ("output.LayerNorm.bias", vec![HIDDEN]),
        ] {
            shapes.push((format!("{p}.{name}"), shape));
        }
    }
    shapes
        .into_iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let values = (0..n).map(|i| value(&name, i)).collect();
            (name, shape, values)
        })
        .collect()
}

/// Write a model folder: `words` after the special tokens, the tensors, and when given
/// the pooling of `1_Pooling/config.json` (`mean` or `cls`).
fn write_bert(
    dir: &Path,
    words: &[&str],
    tensors: &[(String, Vec<usize>, Vec<f32>)],
    pooling: Option<&str>,
) {
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    let mut vocab = serde_json::Map::new();
    for (i, w) in SPECIAL.iter().chain(words).enumerate() {
        vocab.insert((*w).into(), json!(i));
    }
    let added: Vec<_> = SPECIAL
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"id": i, "content": t, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}))
        .collect();
    let tokenizer = json!({
        "version": "1.0",
        // As the all-MiniLM-L6-v2 folder has it: the model must set its own.
        "truncation": {"direction": "Right", "max_length": 4, "strategy": "LongestFirst", "stride": 0},
        "padding": {"strategy": {"Fixed": 64}, "direction": "Right", "pad_to_multiple_of": null, "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", SEP], "cls": ["[CLS]", CLS]},
        "decoder": null,
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": vocab}
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    let config = json!({
        "architectures": ["BertModel"], "model_type": "bert",
        "vocab_size": SPECIAL.len() + words.len(), "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "intermediate_size": INTER,
        "hidden_act": "relu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": POSITIONS, "type_vocab_size": 2, "initializer_range": 0.02,
        "layer_norm_eps": EPS, "pad_token_id": 0, "position_embedding_type": "absolute"
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, _, v)| v.iter().flat_map(|x| x.to_le_bytes()).collect())
        .collect();
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), b)| {
            (
                name.clone(),
                TensorView::new(Dtype::F32, shape.clone(), b).unwrap(),
            )
        })
        .collect();
    let file = safetensors::tensor::serialize(views, None).unwrap();
    std::fs::write(dir.join("model.safetensors"), file).unwrap();
    let _ = std::fs::remove_file(dir.join("1_Pooling/config.json"));
    if let Some(p) = pooling {
        let pooling = json!({
            "word_embedding_dimension": HIDDEN,
            "pooling_mode_cls_token": p == "cls",
            "pooling_mode_mean_tokens": p == "mean",
            "pooling_mode_max_tokens": p == "max",
            "pooling_mode_mean_sqrt_len_tokens": false
        });
        std::fs::write(dir.join("1_Pooling/config.json"), pooling.to_string()).unwrap();
    }
}

/// Repeatable values in [-0.5, 0.5), a different stream per tensor.
fn noise(name: &str, i: usize) -> f32 {
    let mut x = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    x ^= (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
}

/// BERT's forward pass over `ids`, written out: the last hidden states, a row per token.
fn reference(t: &[(String, Vec<usize>, Vec<f32>)], ids: &[usize]) -> Vec<Vec<f32>> {
    let w = |name: &str| -> &[f32] { &t.iter().find(|(n, _, _)| n == name).unwrap().2 };
    // `x · Wᵀ + b` for a weight of `out × in`.
    let linear = |x: &[f32], name: &str| -> Vec<f32> {
        let (weight, bias) = (w(&format!("{name}.weight")), w(&format!("{name}.bias")));
        let inputs = x.len();
        bias.iter()
            .enumerate()
            .map(|(o, b)| {
                b + (0..inputs)
                    .map(|i| weight[o * inputs + i] * x[i])
                    .sum::<f32>()
            })
            .collect()
    };
    let norm = |x: &[f32], name: &str| -> Vec<f32> {
        let n = x.len() as f32;
        let mean = x.iter().sum::<f32>() / n;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
        let (g, b) = (w(&format!("{name}.weight")), w(&format!("{name}.bias")));
        x.iter()
            .enumerate()
            .map(|(i, v)| (v - mean) / (var + EPS).sqrt() * g[i] + b[i])
            .collect()
    };
    let mut xs: Vec<Vec<f32>> = ids
        .iter()
        .enumerate()
        .map(|(pos, id)| {
            let row = |name: &str, r: usize| w(name)[r * HIDDEN..(r + 1) * HIDDEN].to_vec();
            let (a, b, c) = (
                row("embeddings.word_embeddings.weight", *id),
                row("embeddings.position_embeddings.weight", pos),
                row("embeddings.token_type_embeddings.weight", 0),
            );
            let sum: Vec<f32> = (0..HIDDEN).map(|i| a[i] + b[i] + c[i]).collect();
            norm(&sum, "embeddings.LayerNorm")
        })
        .collect();
    let d = HIDDEN / HEADS;
    for l in 0..LAYERS {
        let p = format!("encoder.layer.{l}");
        let q: Vec<Vec<f32>> = xs
            .iter()
            .map(|x| linear(x, &format!("{p}.attention.self.query")))
            .collect();
        let k: Vec<Vec<f32>> = xs
            .iter()
            .map(|x| linear(x, &format!("{p}.attention.self.key")))
            .collect();
        let v: Vec<Vec<f32>> = xs
            .iter()
            .map(|x| linear(x, &format!("{p}.attention.self.value")))
            .collect();
        let mut next = Vec::new();
        for (i, x) in xs.iter().enumerate() {
            let mut ctx = vec![0f32; HIDDEN];
            for h in 0..HEADS {
                let r = h * d..(h + 1) * d;
                let scores: Vec<f32> = k
                    .iter()
                    .map(|kj| {
                        q[i][r.clone()]
                            .iter()
                            .zip(&kj[r.clone()])
                            .map(|(a, b)| a * b)
                            .sum::<f32>()
                            / (d as f32).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f32::MIN, f32::max);
                let e: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f32 = e.iter().sum();
                for (j, ej) in e.iter().enumerate() {
                    for c in r.clone() {
                        ctx[c] += ej / total * v[j][c];
                    }
                }
            }
            let attn = linear(&ctx, &format!("{p}.attention.output.dense"));
            let x1 = norm(
                &attn.iter().zip(x).map(|(a, b)| a + b).collect::<Vec<_>>(),
                &format!("{p}.attention.output.LayerNorm"),
            );
            let inter: Vec<f32> = linear(&x1, &format!("{p}.intermediate.dense"))
                .into_iter()
                .map(|v| v.max(0.0))
                .collect();
            let out = linear(&inter, &format!("{p}.output.dense"));
            next.push(norm(
                &out.iter().zip(&x1).map(|(a, b)| a + b).collect::<Vec<_>>(),
                &format!("{p}.output.LayerNorm"),
            ));
        }
        xs = next;
    }
    xs
}

fn mean(rows: &[Vec<f32>]) -> Vec<f32> {
    (0..HIDDEN)
        .map(|c| rows.iter().map(|r| r[c]).sum::<f32>() / rows.len() as f32)
        .collect()
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    let worst = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(
        worst < 1e-4,
        "{what}: off by {worst}: {got:?} against {want:?}"
    );
}

#[test]
fn a_transformer_folder_embeds_as_bert_computes_and_pools() {
    let dir = tempfile::tempdir().unwrap();
    let words = ["alpha", "beta", "gamma", "delta", "omega"];
    let t = tensors(SPECIAL.len() + words.len(), noise);
    let id = |w: &str| SPECIAL.len() + words.iter().position(|x| *x == w).unwrap();

    let mean_dir = dir.path().join("mean");
    write_bert(&mean_dir, &words, &t, Some("mean"));
    let model = Model::load(&mean_dir).unwrap();
    assert_eq!(model.kind(), "transformer");
    assert_eq!(model.dim(), HIDDEN);
    // Lower-cased by the tokenizer, `[CLS]` and `[SEP]` around, an unknown word as `[UNK]`.
    let got = model.embed("Alpha BETA zeta gamma").unwrap();
    let ids = [CLS, id("alpha"), id("beta"), 1, id("gamma"), SEP];
    assert_close(&got, &mean(&reference(&t, &ids)), "mean pooling");
    // No word the model knows: no vector.
    assert!(model.embed("zeta eta theta").is_none());
    assert!(model.embed("").is_none());
    // A long text: its first 128 tokens, `[CLS]` and `[SEP]` among them (the folder's
    // tokenizer.json says 4, and pads: the model's own length wins, and nothing pads).
    let long: Vec<&str> = (0..300).map(|i| words[i % words.len()]).collect();
    let mut ids = vec![CLS];
    ids.extend(long.iter().take(126).map(|w| id(w)));
    ids.push(SEP);
    assert_close(
        &model.embed(&long.join(" ")).unwrap(),
        &mean(&reference(&t, &ids)),
        "cut to 128 tokens",
    );

    // CLS pooling: the first token's state; another fingerprint (stored vectors rebuilt).
    let cls_dir = dir.path().join("cls");
    write_bert(&cls_dir, &words, &t, Some("cls"));
    let cls = Model::load(&cls_dir).unwrap();
    let ids = [CLS, id("delta"), id("omega"), SEP];
    assert_close(
        &cls.embed("delta omega").unwrap(),
        &reference(&t, &ids)[0],
        "CLS pooling",
    );
    assert_ne!(cls.fingerprint, model.fingerprint);
    // No pooling file: mean pooling.
    let plain = dir.path().join("plain");
    write_bert(&plain, &words, &t, None);
    assert_close(
        &Model::load(&plain)
            .unwrap()
            .embed("Alpha BETA zeta gamma")
            .unwrap(),
        &got,
        "default pooling",
    );

    // Vaults of one process share a folder's model while its files stay as they were.
    let a = notevault::index::embed::model::shared(&mean_dir).unwrap();
    let b = notevault::index::embed::model::shared(&mean_dir).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    write_bert(
        &mean_dir,
        &words[..4],
        &tensors(SPECIAL.len() + 4, noise),
        Some("mean"),
    );
    let c = notevault::index::embed::model::shared(&mean_dir).unwrap();
    assert!(
        !std::sync::Arc::ptr_eq(&a, &c),
        "a model replaced in place is loaded again"
    );
    assert_ne!(a.fingerprint, c.fingerprint);

    // Folders that cannot be used say why.
    let max = dir.path().join("max");
    write_bert(&max, &words, &t, Some("max"));
    let e = format!("{:#}", Model::load(&max).unwrap_err());
    assert!(e.contains("max_tokens pooling"), "{e}");
    let partial = dir.path().join("partial");
    let half: Vec<_> = t
        .iter()
        .filter(|(n, _, _)| !n.contains("layer.1."))
        .cloned()
        .collect();
    write_bert(&partial, &words, &half, Some("mean"));
    let e = format!("{:#}", Model::load(&partial).unwrap_err());
    assert!(
        e.contains("does not hold the BERT model config.json describes"),
        "{e}"
    );
    let heads = dir.path().join("heads");
    write_bert(&heads, &words, &t, Some("mean"));
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(heads.join("config.json")).unwrap()).unwrap();
    config["num_attention_heads"] = json!(0);
    std::fs::write(heads.join("config.json"), config.to_string()).unwrap();
    let e = format!("{:#}", Model::load(&heads).unwrap_err());
    assert!(e.contains("not a multiple of num_attention_heads 0"), "{e}");
    let dense = dir.path().join("dense");
    write_bert(&dense, &words, &t, Some("mean"));
    let modules = json!([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    ]);
    std::fs::write(dense.join("modules.json"), modules.to_string()).unwrap();
    let e = format!("{:#}", Model::load(&dense).unwrap_err());
    assert!(
        e.contains("`sentence_transformers.models.Dense` module"),
        "{e}"
    );
    let other = dir.path().join("other");
    write_bert(&other, &words, &t, Some("mean"));
    std::fs::write(
        other.join("config.json"),
        r#"{"model_type": "t5", "num_hidden_layers": 2}"#,
    )
    .unwrap();
    let e = format!("{:#}", Model::load(&other).unwrap_err());
    assert!(e.contains("`t5` model"), "{e}");
}

/// A BERT whose last hidden state of a token is its word vector, normalized: the
/// attention's and the feed-forward's outputs are zero, so each layer's residual and
/// norm keep the embedding; synonyms share a word vector; `[CLS]`, `[SEP]`, `[UNK]` are
/// zero and add nothing to a mean's direction.
fn synonym_model(dir: &Path) {
    let groups = [VEHICLES, COOKING, MONEY];
    let words: Vec<&str> = groups.iter().flat_map(|g| g.iter().copied()).collect();
    let group_of = |row: usize| {
        let w = words.get(row.checked_sub(SPECIAL.len())?)?;
        groups.iter().position(|g| g.contains(w))
    };
    let t = tensors(SPECIAL.len() + words.len(), |name, i| match name {
        "embeddings.word_embeddings.weight" => {
            f32::from(u8::from(group_of(i / HIDDEN) == Some(i % HIDDEN)))
        }
        n if n.contains("LayerNorm.weight") => 1.0,
        n if n.contains("LayerNorm.bias") || n.contains("position") || n.contains("token_type") => {
            0.0
        }
        n if n.contains("attention.output.dense") || n.contains(".output.dense") => 0.0,
        n => noise(n, i),
    });
    write_bert(dir, &words, &t, Some("mean"));
}

#[tokio::test]
async fn hybrid_search_with_a_transformer_finds_notes_by_meaning() {
    let (dir, vault, state) = temp_vault(None);
    write_vault(&vault);
    let model = dir.path().join("bert");
    synonym_model(&model);
    let d = spawn(
        &vault,
        &state,
        &[("NOTEVAULT_EMBED_MODEL", model.to_str().unwrap())],
    );
    let st = settled(&d.base).await;
    let e = &st["embeddings"];
    assert_eq!(e["state"], "ready", "{st}");
    assert_eq!(e["kind"], "transformer", "{st}");
    assert_eq!(e["dimensions"], HIDDEN);
    assert_eq!(e["notes"], 4, "{st}");

    // No note says `car`: keywords find nothing, meaning finds the automobile and the
    // truck; the private note holding vehicle words is never embedded nor answered.
    assert_eq!(
        slugs(&ok(&d.base, "/v1/search?q=car").await),
        Vec::<String>::new()
    );
    let hybrid = ok(&d.base, "/v1/search?q=car&mode=hybrid").await;
    let mut found = slugs(&hybrid);
    found.sort();
    assert_eq!(found, vec!["fleet", "garage"], "{hybrid}");
    assert_eq!(retriever(&hybrid, "vector")["notes_matched"], 2, "{hybrid}");
    assert!(!hybrid.to_string().contains("diary"), "{hybrid}");
    let cooking = ok(&d.base, "/v1/search?q=cooking%20kitchen&mode=hybrid").await;
    assert_eq!(slugs(&cooking), vec!["bakery"], "{cooking}");
    // Asked again (its vector kept), the same answer.
    let again = ok(&d.base, "/v1/search?q=car&mode=hybrid").await;
    assert_eq!(slugs(&again), slugs(&hybrid), "{again}");

    // An edit is embedded again: the plans now speak of a truck.
    std::fs::write(
        vault.join("plans.md"),
        "# Plans\n\nA vehicle for next year.\n",
    )
    .unwrap();
    crate::common::eventually("the edited note is found by meaning", || async {
        let body = ok(&d.base, "/v1/search?q=automobile&mode=hybrid&page_size=10").await;
        slugs(&body).contains(&"plans".to_string())
    })
    .await;
    stop(d);

    // A folder whose weights are not its config's model: search stays lexical and says why.
    let broken = dir.path().join("broken");
    synonym_model(&broken);
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(broken.join("config.json")).unwrap()).unwrap();
    config["num_hidden_layers"] = json!(3);
    std::fs::write(broken.join("config.json"), config.to_string()).unwrap();
    let d = spawn(
        &vault,
        &state,
        &[("NOTEVAULT_EMBED_MODEL", broken.to_str().unwrap())],
    );
    let st = settled(&d.base).await;
    assert_eq!(st["embeddings"]["state"], "failed", "{st}");
    let why = st["embeddings"]["error"].as_str().unwrap();
    assert!(
        why.contains("model.safetensors does not hold the BERT model"),
        "{why}"
    );
    let body = ok(&d.base, "/v1/search?q=automobile&mode=hybrid").await;
    assert_eq!(slugs(&body), vec!["garage"], "{body}");
    assert_eq!(retriever(&body, "vector")["ran"], false, "{body}");
    stop(d);
}
