//! A transformer sentence-embedding model run in process on the CPU (Hugging Face's
//! candle, its BERT): a folder as sentence-transformers lays one out, e.g.
//! all-MiniLM-L6-v2: `config.json` (a BERT configuration), `tokenizer.json`,
//! `model.safetensors`, and when present `1_Pooling/config.json` (mean or CLS pooling;
//! mean when absent) and `sentence_bert_config.json` (`max_seq_length`).
//!
//! A text's vector is the pooled last hidden state of its first [`MAX_TOKENS`] tokens
//! (with the tokenizer's `[CLS]` and `[SEP]`), as sentence-transformers' `encode`
//! computes it for a text alone (no padding, so no mask). A forward pass costs in
//! proportion to the tokens, so a note embeds at most [`MAX_CHUNKS`] chunks; the rest of
//! a long note is found by keywords only.

use std::path::Path;

use anyhow::{anyhow, bail};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationParams};

use super::folder::{cut, fingerprint, optional, read_file, unknown_token};

/// Tokens of a chunk taken into its vector, `[CLS]` and `[SEP]` included: the length
/// the MiniLM sentence models were trained on (a model that says less is cut to that).
pub const MAX_TOKENS: usize = 128;
/// Chunks of a note embedded at most.
pub const MAX_CHUNKS: usize = 8;
/// A text is cut to this many characters per token before tokenizing (no token of a
/// WordPiece vocabulary is longer; the tokenizer then cuts to the tokens).
const CHARS_PER_TOKEN: usize = 24;

/// How the tokens' last hidden states become one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pooling {
    Mean,
    Cls,
}

pub struct Transformer {
    model: BertModel,
    tokenizer: Tokenizer,
    dim: usize,
    pooling: Pooling,
    unk: Option<u32>,
    max_chars: usize,
}

impl Transformer {
    /// Load the model in `dir` (its `config.json` already read); the model and the
    /// fingerprint of what its vectors depend on.
    pub fn load(
        dir: &Path,
        config: &serde_json::Value,
        config_bytes: &[u8],
    ) -> anyhow::Result<(Transformer, String)> {
        let model_type = config
            .get("model_type")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("bert");
        if model_type != "bert" {
            bail!(
                "config.json describes a `{model_type}` model; the transformers run here are BERT models (`model_type` `bert`, as all-MiniLM-L6-v2)"
            );
        }
        let cfg: Config = serde_json::from_slice(config_bytes)
            .map_err(|e| anyhow!("config.json is not a BERT configuration: {e}"))?;
        // What candle divides by or indexes with, checked here: its load would panic.
        let heads = cfg.num_attention_heads;
        if heads == 0 || cfg.hidden_size == 0 || !cfg.hidden_size.is_multiple_of(heads) {
            bail!(
                "config.json: hidden_size {} is not a multiple of num_attention_heads {heads}",
                cfg.hidden_size
            );
        }
        if cfg.vocab_size == 0 || cfg.type_vocab_size == 0 || cfg.max_position_embeddings < 2 {
            bail!("config.json: vocab_size, type_vocab_size and max_position_embeddings must be positive");
        }
        check_modules(optional(dir, "modules.json")?.as_deref())?;
        let weights = read_file(dir, "model.safetensors")?;
        let tokenizer_bytes = read_file(dir, "tokenizer.json")?;
        let pooling_bytes = optional(dir, "1_Pooling/config.json")?;
        let pooling = pooling_of(pooling_bytes.as_deref())?;
        let sentence_bytes = optional(dir, "sentence_bert_config.json")?;
        let max_seq = match &sentence_bytes {
            Some(b) => serde_json::from_slice::<serde_json::Value>(b)
                .map_err(|e| anyhow!("sentence_bert_config.json is not JSON: {e}"))?
                .get("max_seq_length")
                .and_then(serde_json::Value::as_u64)
                .map(|n| n as usize),
            None => None,
        };
        let max_tokens = MAX_TOKENS
            .min(max_seq.unwrap_or(MAX_TOKENS))
            .min(cfg.max_position_embeddings)
            .max(2);

        let mut tokenizer = Tokenizer::from_bytes(&tokenizer_bytes)
            .map_err(|e| anyhow!("tokenizer.json cannot be read: {e}"))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| anyhow!("tokenizer.json: {e}"))?;
        let vocab = tokenizer.get_vocab_size(true);
        if vocab > cfg.vocab_size {
            bail!(
                "the tokenizer has {vocab} tokens but config.json's model has {}",
                cfg.vocab_size
            );
        }
        let unk = unknown_token(&tokenizer);

        let fingerprint = fingerprint(&[
            &weights,
            &tokenizer_bytes,
            config_bytes,
            pooling_bytes.as_deref().unwrap_or_default(),
            &(max_tokens as u64).to_le_bytes(),
            &(MAX_CHUNKS as u64).to_le_bytes(),
        ]);
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| anyhow!("model.safetensors is not a safetensors file: {e}"))?;
        let model = BertModel::load(vb, &cfg).map_err(|e| {
            anyhow!("model.safetensors does not hold the BERT model config.json describes: {e}")
        })?;
        let transformer = Transformer {
            model,
            tokenizer,
            dim: cfg.hidden_size,
            pooling,
            unk,
            max_chars: max_tokens * CHARS_PER_TOKEN,
        };
        Ok((transformer, fingerprint))
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The vector of `text`; `None` when the model knows none of its words (every token
    /// but `[CLS]` and `[SEP]` is unknown), or it failed on it.
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        let encoding = self
            .tokenizer
            .encode_fast(cut(text, self.max_chars), true)
            .ok()?;
        let ids = encoding.get_ids();
        let special = encoding.get_special_tokens_mask();
        let known = ids
            .iter()
            .zip(special)
            .any(|(id, s)| *s == 0 && Some(*id) != self.unk);
        if !known {
            return None;
        }
        let forward = || -> candle_core::Result<Vec<f32>> {
            let input = Tensor::new(ids, &Device::Cpu)?.unsqueeze(0)?;
            let types = input.zeros_like()?;
            let states = self.model.forward(&input, &types, None)?;
            let pooled = match self.pooling {
                Pooling::Mean => states.mean(1)?,
                Pooling::Cls => states.get_on_dim(1, 0)?,
            };
            pooled.squeeze(0)?.to_vec1::<f32>()
        };
        let v = forward().ok()?;
        (v.len() == self.dim && v.iter().all(|x| x.is_finite())).then_some(v)
    }
}

/// A sentence-transformers folder's modules are the ones run here: the transformer,
/// its pooling, a normalization (a projection after the pooling, `Dense`, is not run,
/// and its vectors would not be the model's).
fn check_modules(bytes: Option<&[u8]>) -> anyhow::Result<()> {
    let Some(bytes) = bytes else {
        return Ok(());
    };
    let modules: Vec<serde_json::Value> = serde_json::from_slice(bytes)
        .map_err(|e| anyhow!("modules.json is not a list of modules: {e}"))?;
    for m in &modules {
        let kind = m
            .get("type")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let name = kind.rsplit('.').next().unwrap_or(kind);
        if !matches!(name, "Transformer" | "Pooling" | "Normalize") {
            bail!("modules.json names a `{kind}` module; a transformer, its pooling and a normalization are run here");
        }
    }
    Ok(())
}

/// The pooling `1_Pooling/config.json` asks for: mean when absent.
fn pooling_of(bytes: Option<&[u8]>) -> anyhow::Result<Pooling> {
    let Some(bytes) = bytes else {
        return Ok(Pooling::Mean);
    };
    let config: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| anyhow!("1_Pooling/config.json is not JSON: {e}"))?;
    let on = |key: &str| config.get(key).and_then(serde_json::Value::as_bool) == Some(true);
    let other = [
        "max_tokens",
        "mean_sqrt_len_tokens",
        "weightedmean_tokens",
        "lasttoken",
    ]
    .into_iter()
    .find(|m| on(&format!("pooling_mode_{m}")));
    match (
        on("pooling_mode_mean_tokens"),
        on("pooling_mode_cls_token"),
        other,
    ) {
        (true, false, None) => Ok(Pooling::Mean),
        (false, true, None) => Ok(Pooling::Cls),
        (false, false, None) => bail!("1_Pooling/config.json turns no pooling mode on"),
        _ => bail!(
            "1_Pooling/config.json asks for {} pooling; one of mean or CLS pooling is run here",
            other.unwrap_or("combined")
        ),
    }
}
