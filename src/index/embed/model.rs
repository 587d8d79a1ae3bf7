//! The embedding model read from a local folder: nothing is ever downloaded, and a
//! folder that is not whole is an error naming what is missing. Two kinds:
//!
//! - a model2vec-style static model: `tokenizer.json` (the Hugging Face tokenizers
//!   format), `model.safetensors` (the `embeddings` matrix, one row per token, and
//!   optionally `weights`, one factor per token, and `mapping`, token id → row, as the
//!   vocabulary-quantized models store them) and `config.json` (`normalize`, `hidden_dim`
//!   when given). A text's vector is the mean of its tokens' rows (each times its weight
//!   when the model has weights), the tokenizer's unknown token left out, the text cut to
//!   512 tokens (and beforehand to 512 times the median token length in characters), as
//!   model2vec's `encode` does; normalized to unit length when `config.json` says
//!   `normalize`.
//! - a transformer sentence-embedding model (`config.json` of a BERT-family model, as
//!   sentence-transformers folders hold): run on the CPU by [`super::transformer`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;
use tokenizers::Tokenizer;

use super::folder::{cut, fingerprint, read_file, unknown_token, FILES};

/// Tokens of one text taken into its vector (model2vec's `max_length`).
pub const MAX_TOKENS: usize = 512;

/// A loaded model.
pub struct Model {
    encoder: Encoder,
    /// BLAKE3 of the files read (and of how the text is cut): stored vectors of another
    /// model are rebuilt.
    pub fingerprint: String,
    pub dir: PathBuf,
}

enum Encoder {
    Static(Box<StaticModel>),
    #[cfg(feature = "transformer")]
    Transformer(Box<super::transformer::Transformer>),
}

/// A model2vec-style static model.
struct StaticModel {
    tokenizer: Tokenizer,
    /// `rows × dim`, row-major.
    matrix: Vec<f32>,
    rows: usize,
    dim: usize,
    /// Per token id: a factor for its row (newer model2vec models).
    weights: Option<Vec<f32>>,
    /// Per token id: its row (vocabulary-quantized models).
    mapping: Option<Vec<usize>>,
    unk: Option<u32>,
    normalize: bool,
    /// Texts are cut to this many characters before tokenizing.
    max_chars: usize,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("dir", &self.dir)
            .field("kind", &self.kind())
            .field("dim", &self.dim())
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}

/// A transformer's `config.json` (it has layers), not a static model's (model2vec's
/// names `architectures` too).
fn is_transformer(config: &serde_json::Value) -> bool {
    config.get("num_hidden_layers").is_some()
}

/// Models loaded, by folder and its files' sizes and times: every vault a process
/// serves with one model holds one copy of it (a transformer is ~90 MB).
type Loaded = std::collections::HashMap<PathBuf, (Vec<u8>, std::sync::Weak<Model>)>;
static LOADED: parking_lot::Mutex<Option<Loaded>> = parking_lot::Mutex::new(None);

/// [`Model::load`], or the copy another vault of this process already holds when the
/// folder's files have not changed since.
pub fn shared(dir: &Path) -> anyhow::Result<Arc<Model>> {
    let key = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mut loaded = LOADED.lock();
    let loaded = loaded.get_or_insert_with(Default::default);
    loaded.retain(|_, (_, model)| model.strong_count() > 0);
    let stamp = files_stamp(&key);
    if let Some((seen, model)) = loaded.get(&key) {
        if *seen == stamp {
            if let Some(model) = model.upgrade() {
                return Ok(model);
            }
        }
    }
    let model = Arc::new(Model::load(dir)?);
    loaded.insert(key, (stamp, Arc::downgrade(&model)));
    Ok(model)
}

/// The sizes and modification times of the files in `dir` and its subfolders (a model
/// replaced in place is loaded again).
fn files_stamp(dir: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .flatten()
    {
        // Through links: a model folder of links to blobs changes where the links point.
        if let Ok(meta) = std::fs::metadata(entry.path()) {
            let modified = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .unwrap_or_default();
            out.extend_from_slice(entry.path().as_os_str().as_encoded_bytes());
            out.extend_from_slice(&meta.len().to_le_bytes());
            out.extend_from_slice(&modified.as_nanos().to_le_bytes());
        }
    }
    out
}

/// Vectors of a vault's recent queries: a question asked again, or paged through, costs
/// no forward pass. Kept per vault (a hit is quicker: it must not tell one vault what
/// another searched).
#[derive(Default)]
pub struct Queries {
    kept: parking_lot::Mutex<Kept>,
}

/// Each query's vector, and the queries in the order they were kept.
type Kept = (
    std::collections::HashMap<String, Option<Vec<f32>>>,
    std::collections::VecDeque<String>,
);

/// Queries whose vectors are kept, the oldest dropped first.
const QUERIES_KEPT: usize = 256;

impl Queries {
    /// The kept vector of `text` (`Some(None)`: the model knows none of its words), or
    /// `embed`'s, kept unless it failed (`None`).
    pub fn get_or(
        &self,
        text: &str,
        embed: impl FnOnce() -> Option<Option<Vec<f32>>>,
    ) -> Option<Option<Vec<f32>>> {
        if let Some(v) = self.kept.lock().0.get(text) {
            return Some(v.clone());
        }
        let v = embed()?;
        let mut kept = self.kept.lock();
        let (map, order) = &mut *kept;
        if map.insert(text.to_string(), v.clone()).is_none() {
            order.push_back(text.to_string());
            while order.len() > QUERIES_KEPT {
                if let Some(old) = order.pop_front() {
                    map.remove(&old);
                }
            }
        }
        Some(v)
    }
}

impl Model {
    /// Load the model in `dir`. Every way it cannot be used is an error that says why
    /// (a missing file, a matrix that is not one, a dimension that disagrees).
    pub fn load(dir: &Path) -> anyhow::Result<Model> {
        let dir = dir.canonicalize().with_context(|| {
            format!("the embedding model folder {} is not usable", dir.display())
        })?;
        let config_bytes = read_file(&dir, FILES[2])?;
        let config: serde_json::Value = serde_json::from_slice(&config_bytes)
            .map_err(|e| anyhow!("config.json is not JSON: {e}"))?;
        if is_transformer(&config) {
            #[cfg(feature = "transformer")]
            {
                let (t, fingerprint) =
                    super::transformer::Transformer::load(&dir, &config, &config_bytes)?;
                return Ok(Model {
                    encoder: Encoder::Transformer(Box::new(t)),
                    fingerprint,
                    dir,
                });
            }
            #[cfg(not(feature = "transformer"))]
            bail!(
                "{} holds a transformer model (config.json: a BERT model), and this build has no transformer support (built without the `transformer` feature); use a model2vec model or a default build",
                dir.display()
            );
        }
        let weights_bytes = read_file(&dir, FILES[0])?;
        let tokenizer_bytes = read_file(&dir, FILES[1])?;
        let fingerprint = fingerprint(&[&weights_bytes, &tokenizer_bytes, &config_bytes]);
        let model = StaticModel::load(&weights_bytes, &tokenizer_bytes, &config)?;
        Ok(Model {
            encoder: Encoder::Static(Box::new(model)),
            fingerprint,
            dir,
        })
    }

    /// `static` (model2vec) or `transformer`.
    pub fn kind(&self) -> &'static str {
        match &self.encoder {
            Encoder::Static(_) => "static",
            #[cfg(feature = "transformer")]
            Encoder::Transformer(_) => "transformer",
        }
    }

    /// Dimensions of a vector.
    pub fn dim(&self) -> usize {
        match &self.encoder {
            Encoder::Static(m) => m.dim,
            #[cfg(feature = "transformer")]
            Encoder::Transformer(t) => t.dim(),
        }
    }

    /// Chunks of a note embedded at most (the rest of the note joins the last one, which
    /// is cut to the model's length).
    pub fn max_chunks(&self) -> usize {
        match &self.encoder {
            Encoder::Static(_) => super::MAX_CHUNKS,
            #[cfg(feature = "transformer")]
            Encoder::Transformer(_) => super::transformer::MAX_CHUNKS,
        }
    }

    /// The vector of `text`; `None` when none of its tokens is known to the model (or it
    /// cannot be tokenized, or the model failed on it).
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        match &self.encoder {
            Encoder::Static(m) => m.embed(text),
            #[cfg(feature = "transformer")]
            Encoder::Transformer(t) => t.embed(text),
        }
    }
}

impl StaticModel {
    fn load(
        weights_bytes: &[u8],
        tokenizer_bytes: &[u8],
        config: &serde_json::Value,
    ) -> anyhow::Result<StaticModel> {
        let normalize = config
            .get("normalize")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);

        let mut tokenizer = Tokenizer::from_bytes(tokenizer_bytes)
            .map_err(|e| anyhow!("tokenizer.json cannot be read: {e}"))?;
        tokenizer
            .with_truncation(None)
            .map_err(|e| anyhow!("tokenizer.json: {e}"))?;
        tokenizer.with_padding(None);
        let vocab = tokenizer.get_vocab_size(true);
        let unk = unknown_token(&tokenizer);
        let mut lengths: Vec<usize> = tokenizer
            .get_vocab(true)
            .keys()
            .map(|t| t.chars().count())
            .collect();
        lengths.sort_unstable();
        let median = lengths.get(lengths.len() / 2).copied().unwrap_or(1).max(1);

        let tensors = SafeTensors::deserialize(weights_bytes)
            .map_err(|e| anyhow!("model.safetensors is not a safetensors file: {e}"))?;
        let embeddings = tensors
            .tensor("embeddings")
            .or_else(|_| tensors.tensor("0"))
            .map_err(|_| anyhow!("model.safetensors has no `embeddings` tensor"))?;
        let (rows, dim) = match embeddings.shape() {
            [r, d] if *r > 0 && *d > 0 => (*r, *d),
            other => bail!("the `embeddings` tensor has shape {other:?}; a matrix (tokens × dimensions) was expected"),
        };
        let matrix = floats(&embeddings, "embeddings")?;
        if let Some(hidden) = config.get("hidden_dim").and_then(serde_json::Value::as_u64) {
            if hidden as usize != dim {
                bail!("config.json says hidden_dim {hidden} but the `embeddings` matrix has {dim} dimensions");
            }
        }
        let weights = match tensors.tensor("weights") {
            Ok(t) => {
                let w = floats(&t, "weights")?;
                if w.len() < vocab {
                    bail!(
                        "the `weights` tensor has {} entries for {vocab} tokens",
                        w.len()
                    );
                }
                Some(w)
            }
            Err(_) => None,
        };
        let mapping = match tensors.tensor("mapping") {
            Ok(t) => {
                let m = integers(&t, "mapping")?;
                if m.len() < vocab {
                    bail!(
                        "the `mapping` tensor has {} entries for {vocab} tokens",
                        m.len()
                    );
                }
                if let Some(bad) = m.iter().find(|r| **r >= rows) {
                    bail!("the `mapping` tensor names row {bad} of a matrix of {rows} rows");
                }
                Some(m)
            }
            Err(_) => None,
        };
        if mapping.is_none() && vocab > rows {
            bail!("the tokenizer has {vocab} tokens but the `embeddings` matrix has {rows} rows");
        }
        Ok(StaticModel {
            tokenizer,
            matrix,
            rows,
            dim,
            weights,
            mapping,
            unk,
            normalize,
            max_chars: MAX_TOKENS * median,
        })
    }

    fn embed(&self, text: &str) -> Option<Vec<f32>> {
        let encoding = self
            .tokenizer
            .encode_fast(cut(text, self.max_chars), false)
            .ok()?;
        let ids: Vec<usize> = encoding
            .get_ids()
            .iter()
            .filter(|id| Some(**id) != self.unk)
            .take(MAX_TOKENS)
            .map(|id| *id as usize)
            .collect();
        let rows = ids.iter().filter_map(|&id| {
            let row = match &self.mapping {
                Some(m) => *m.get(id)?,
                None => id,
            };
            if row >= self.rows {
                return None;
            }
            let weight = match &self.weights {
                Some(w) => *w.get(id)?,
                None => 1.0,
            };
            Some((&self.matrix[row * self.dim..(row + 1) * self.dim], weight))
        });
        let mut v = mean_pool(rows, self.dim)?;
        if self.normalize {
            normalize(&mut v);
        }
        Some(v)
    }
}

/// The mean of `rows`, each times its weight; `None` for no rows.
pub fn mean_pool<'a>(rows: impl Iterator<Item = (&'a [f32], f32)>, dim: usize) -> Option<Vec<f32>> {
    let mut sum = vec![0f32; dim];
    let mut n = 0usize;
    for (row, weight) in rows {
        for (s, x) in sum.iter_mut().zip(row) {
            *s += x * weight;
        }
        n += 1;
    }
    if n == 0 {
        return None;
    }
    let n = n as f32;
    sum.iter_mut().for_each(|s| *s /= n);
    // Rows of huge (finite) values overflow: such a vector is no direction at all.
    sum.iter().all(|s| s.is_finite()).then_some(sum)
}

/// Scale `v` to unit length; a zero vector stays zero. Its length before.
pub fn normalize(v: &mut [f32]) -> f32 {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 1e-12 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    norm
}

/// A float tensor's values as `f32` (F32, F16, BF16, F64; I8 as the integers, as
/// model2vec's int8-quantized models store them: one scale for the whole matrix does not
/// change a cosine).
fn floats(t: &TensorView<'_>, name: &str) -> anyhow::Result<Vec<f32>> {
    let data = t.data();
    let out: Vec<f32> = match t.dtype() {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::F64 => data
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as f32)
            .collect(),
        Dtype::I8 => data.iter().map(|b| *b as i8 as f32).collect(),
        other => {
            bail!("the `{name}` tensor is of type {other:?}; F32, F16, BF16, F64 or I8 are read")
        }
    };
    if out.iter().any(|x| !x.is_finite()) {
        bail!("the `{name}` tensor holds a value that is not a finite number");
    }
    Ok(out)
}

/// An integer tensor's values (I64, I32, U32, I16, U16, U8, U64), as row numbers.
fn integers(t: &TensorView<'_>, name: &str) -> anyhow::Result<Vec<usize>> {
    let data = t.data();
    let signed = |v: i64| usize::try_from(v).map_err(|_| anyhow!("the `{name}` tensor holds {v}"));
    Ok(match t.dtype() {
        Dtype::I64 => data
            .chunks_exact(8)
            .map(|b| signed(i64::from_le_bytes(b.try_into().unwrap_or([0; 8]))))
            .collect::<anyhow::Result<_>>()?,
        Dtype::U64 => data
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as usize)
            .collect(),
        Dtype::I32 => data
            .chunks_exact(4)
            .map(|b| signed(i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64))
            .collect::<anyhow::Result<_>>()?,
        Dtype::U32 => data
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .collect(),
        Dtype::I16 => data
            .chunks_exact(2)
            .map(|b| signed(i16::from_le_bytes([b[0], b[1]]) as i64))
            .collect::<anyhow::Result<_>>()?,
        Dtype::U16 => data
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
            .collect(),
        Dtype::U8 => data.iter().map(|b| *b as usize).collect(),
        other => bail!("the `{name}` tensor is of type {other:?}; an integer type was expected"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_pool_averages_weighted_rows() {
        let a = [1.0, 0.0, 2.0];
        let b = [3.0, 4.0, 0.0];
        let v = mean_pool([(&a[..], 1.0), (&b[..], 1.0)].into_iter(), 3).unwrap();
        assert_eq!(v, vec![2.0, 2.0, 1.0]);
        let w = mean_pool([(&a[..], 2.0), (&b[..], 0.0)].into_iter(), 3).unwrap();
        assert_eq!(w, vec![1.0, 0.0, 2.0]);
        assert!(mean_pool(std::iter::empty(), 3).is_none());
    }

    #[test]
    fn normalize_gives_unit_length_and_keeps_zero() {
        let mut v = vec![3.0, 4.0];
        assert_eq!(normalize(&mut v), 5.0);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        let mut z = vec![0.0, 0.0];
        normalize(&mut z);
        assert_eq!(z, vec![0.0, 0.0]);
    }
}
