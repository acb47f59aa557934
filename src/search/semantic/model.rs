//! The sentence-embedding model: all-MiniLM-L6-v2 (a 6-layer, 384-wide BERT), loaded from a
//! model folder and run on the CPU in plain Rust.
//!
//! A model folder holds `model.safetensors` (fp32 weights, BERT names with or without a
//! `bert.` prefix), `vocab.txt` and `manifest.json` (`{"id", "files": {name: sha256}}`); every
//! file the manifest names is checked against its sha256 before anything is parsed, so a
//! truncated or altered download is refused with a message naming the file. The forward pass
//! is the textbook one (embeddings → 6 × [attention, feed-forward] → mean pooling → unit
//! length): a query is one short sequence, so a dependency-free implementation with a good
//! matrix kernel is as fast as a framework here (BENCHMARKS.md, "runtime").

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::kernel;
use super::wordpiece::{MissingToken, WordPiece};

/// Longest text embedded, in word pieces (the model was trained on 256-piece inputs).
pub const MAX_PIECES: usize = 256;

/// Why a model folder could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a model manifest ({reason}); reinstall the model package")]
    Manifest { path: PathBuf, reason: String },
    #[error("{path}: sha256 {actual} does not match the manifest's {expected}; the file is corrupted or was altered — reinstall the model package")]
    Checksum {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("{path}: {reason}; reinstall the model package")]
    Format { path: PathBuf, reason: String },
    #[error("{path}: {source}")]
    Vocabulary {
        path: PathBuf,
        #[source]
        source: MissingToken,
    },
}

/// What is wrong inside a weights file (a missing tensor, a shape, the header), as a person
/// reads it; [`ModelError::Format`] adds the file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Malformed(String);

impl From<String> for Malformed {
    fn from(reason: String) -> Self {
        Self(reason)
    }
}

impl From<&str> for Malformed {
    fn from(reason: &str) -> Self {
        Self(reason.to_owned())
    }
}

/// Shape of the network, from the weights (so a tiny test model loads through the same code).
#[derive(Debug, Clone, Copy)]
struct Shape {
    hidden: usize,
    intermediate: usize,
    heads: usize,
    positions: usize,
}

#[derive(Debug)]
struct Linear {
    /// `out × in`, row-major (as `PyTorch` stores it).
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

impl Linear {
    fn weights(&self) -> kernel::Weights<'_> {
        kernel::Weights {
            matrix: &self.weight,
            inputs: self.inputs,
            outputs: self.outputs,
        }
    }
}

#[derive(Debug)]
struct Norm {
    gain: Vec<f32>,
    bias: Vec<f32>,
}

#[derive(Debug)]
struct Layer {
    /// Query, key and value projections in one matrix (one multiplication instead of three).
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

/// A loaded model and its tokenizer.
#[derive(Debug)]
pub struct Model {
    id: String,
    shape: Shape,
    words: Vec<f32>,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    tokenizer: WordPiece,
}

impl Model {
    /// Load the model folder `dir`, checking every file against the manifest first.
    ///
    /// # Errors
    /// A missing or unreadable file, a manifest that is not one, a checksum mismatch, or
    /// weights that are not a BERT.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let manifest_path = dir.join("manifest.json");
        let manifest = Manifest::read(&manifest_path)?;
        let weights_path = dir.join("model.safetensors");
        let vocab_path = dir.join("vocab.txt");
        for required in ["model.safetensors", "vocab.txt"] {
            if !manifest.files.contains_key(required) {
                return Err(ModelError::Manifest {
                    path: manifest_path,
                    reason: format!("it has no sha256 for {required}"),
                });
            }
        }
        let weights = read_checked(&weights_path, &manifest.files["model.safetensors"])?;
        let vocab = read_checked(&vocab_path, &manifest.files["vocab.txt"])?;
        let vocab = String::from_utf8(vocab).map_err(|_| ModelError::Format {
            path: vocab_path.clone(),
            reason: "not UTF-8".into(),
        })?;
        let tokenizer = WordPiece::from_vocab(&vocab).map_err(|source| ModelError::Vocabulary {
            path: vocab_path,
            source,
        })?;
        let tensors = safetensors(&weights).map_err(|reason| ModelError::Format {
            path: weights_path.clone(),
            reason: reason.0,
        })?;
        Self::from_tensors(manifest.id, tensors, tokenizer).map_err(|reason| ModelError::Format {
            path: weights_path,
            reason: reason.0,
        })
    }

    /// The model's id (name and weights hash): what cached vectors are keyed by.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Length of a vector.
    #[must_use]
    pub fn dimensions(&self) -> usize {
        self.shape.hidden
    }

    /// `text` as a unit vector (mean of the last layer over its word pieces), on up to two
    /// threads: for a query, which a search waits for.
    #[must_use]
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let ids = self.tokenizer.encode(text, MAX_PIECES.min(self.shape.positions));
        self.forward(&ids)
    }

    /// [`Model::embed`] on this thread alone: for tools, embedded in the background.
    #[must_use]
    pub fn embed_background(&self, text: &str) -> Vec<f32> {
        kernel::single_threaded(|| self.embed(text))
    }

    fn from_tensors(id: String, mut tensors: HashMap<String, Tensor>, tokenizer: WordPiece) -> Result<Self, Malformed> {
        let mut take = |name: &str| -> Result<Tensor, Malformed> {
            tensors
                .remove(name)
                .or_else(|| tensors.remove(&format!("bert.{name}")))
                .ok_or_else(|| Malformed(format!("no tensor {name}")))
        };
        let words = take("embeddings.word_embeddings.weight")?;
        let positions = take("embeddings.position_embeddings.weight")?;
        let token_type = take("embeddings.token_type_embeddings.weight")?;
        let [vocab_size, hidden] = words.matrix()?;
        let [position_count, _] = positions.matrix()?;
        if vocab_size < tokenizer.len() {
            return Err(Malformed::from(format!(
                "{vocab_size} word embeddings for a vocabulary of {}",
                tokenizer.len()
            )));
        }
        let embedding_norm = norm(&mut take, "embeddings.LayerNorm", hidden)?;
        let mut layers = Vec::new();
        while let Ok(query) = take(&format!("encoder.layer.{}.attention.self.query.weight", layers.len())) {
            let prefix = format!("encoder.layer.{}", layers.len());
            let key = linear(&mut take, &format!("{prefix}.attention.self.key"), hidden, hidden)?;
            let value = linear(&mut take, &format!("{prefix}.attention.self.value"), hidden, hidden)?;
            let query = Linear {
                weight: query.values_of(&[hidden, hidden])?,
                bias: take(&format!("{prefix}.attention.self.query.bias"))?.values_of(&[hidden])?,
                inputs: hidden,
                outputs: hidden,
            };
            let intermediate_size = take_shape(&mut take, &format!("{prefix}.intermediate.dense.weight"))?;
            layers.push(Layer {
                qkv: Linear {
                    weight: [query.weight, key.weight, value.weight].concat(),
                    bias: [query.bias, key.bias, value.bias].concat(),
                    inputs: hidden,
                    outputs: 3 * hidden,
                },
                attention_out: linear(&mut take, &format!("{prefix}.attention.output.dense"), hidden, hidden)?,
                attention_norm: norm(&mut take, &format!("{prefix}.attention.output.LayerNorm"), hidden)?,
                intermediate: intermediate_size,
                output: linear(&mut take, &format!("{prefix}.output.dense"), 0, hidden)?,
                output_norm: norm(&mut take, &format!("{prefix}.output.LayerNorm"), hidden)?,
            });
        }
        if layers.is_empty() {
            return Err(Malformed::from("no encoder layers"));
        }
        let intermediate = layers[0].intermediate.outputs;
        // Heads are not in the weights: all-MiniLM-L6-v2 and BERT use 64- or 32-wide heads;
        // MiniLM's 384 = 12 × 32.
        let heads = if hidden % 32 == 0 { hidden / 32 } else { 1 };
        Ok(Self {
            id,
            shape: Shape {
                hidden,
                intermediate,
                heads,
                positions: position_count,
            },
            words: words.data,
            positions: positions.data,
            token_type: token_type.values_of(&[0, hidden]).map(|v| v[..hidden].to_vec())?,
            embedding_norm,
            layers,
            tokenizer,
        })
    }

    fn forward(&self, ids: &[u32]) -> Vec<f32> {
        let Shape {
            hidden,
            intermediate,
            heads,
            ..
        } = self.shape;
        let n = ids.len();
        let mut x = vec![0f32; n * hidden];
        for (t, (&id, row)) in ids.iter().zip(x.chunks_exact_mut(hidden)).enumerate() {
            let word = &self.words[id as usize * hidden..][..hidden];
            let position = &self.positions[t * hidden..][..hidden];
            for (d, out) in row.iter_mut().enumerate() {
                *out = word[d] + position[d] + self.token_type[d];
            }
        }
        layer_norm(&mut x, &self.embedding_norm);
        let mut qkv = vec![0f32; n * 3 * hidden];
        let mut context = vec![0f32; n * hidden];
        let mut projected = vec![0f32; n * hidden];
        let mut inner = vec![0f32; n * intermediate];
        for layer in &self.layers {
            linear_into(&x, n, &layer.qkv, &mut qkv);
            attention(&qkv, n, hidden, heads, &mut context);
            linear_into(&context, n, &layer.attention_out, &mut projected);
            add_assign(&mut x, &projected);
            layer_norm(&mut x, &layer.attention_norm);
            linear_into(&x, n, &layer.intermediate, &mut inner);
            kernel::gelu(&mut inner);
            linear_into(&inner, n, &layer.output, &mut projected);
            add_assign(&mut x, &projected);
            layer_norm(&mut x, &layer.output_norm);
        }
        let mut mean = vec![0f32; hidden];
        for row in x.chunks_exact(hidden) {
            add_assign(&mut mean, row);
        }
        normalize(&mut mean);
        mean
    }
}

/// Scale `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
    if norm > 0.0 {
        for a in v.iter_mut() {
            *a /= norm;
        }
    }
}

fn add_assign(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

/// Scaled dot-product self-attention over every position (one sequence, no padding).
fn attention(qkv: &[f32], n: usize, hidden: usize, heads: usize, context: &mut [f32]) {
    let width = hidden / heads;
    #[expect(clippy::cast_precision_loss, reason = "head widths are small")]
    let scale = 1.0 / (width as f32).sqrt();
    let mut weights = vec![0f32; n];
    for head in 0..heads {
        for i in 0..n {
            let query = &qkv[i * 3 * hidden + head * width..][..width];
            let mut max = f32::MIN;
            for (j, weight) in weights.iter_mut().enumerate() {
                let key = &qkv[j * 3 * hidden + hidden + head * width..][..width];
                *weight = dot(query, key) * scale;
                max = max.max(*weight);
            }
            let mut sum = 0.0;
            for weight in &mut weights {
                *weight = (*weight - max).exp();
                sum += *weight;
            }
            let out = &mut context[i * hidden + head * width..][..width];
            out.fill(0.0);
            for (j, weight) in weights.iter().enumerate() {
                let value = &qkv[j * 3 * hidden + 2 * hidden + head * width..][..width];
                let share = weight / sum;
                out.iter_mut().zip(value).for_each(|(o, v)| *o += share * v);
            }
        }
    }
}

/// Dot product (cosine for unit vectors). Eight running sums, so the compiler can keep them
/// in one vector register: a search takes this over every tool of the catalog.
#[must_use]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0f32; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..8 {
            sums[lane] += x[lane] * y[lane];
        }
    }
    sums.iter().sum::<f32>() + tail
}

fn layer_norm(x: &mut [f32], norm: &Norm) {
    let width = norm.gain.len();
    #[expect(clippy::cast_precision_loss, reason = "widths are small")]
    let count = width as f32;
    for row in x.chunks_exact_mut(width) {
        let mean = row.iter().sum::<f32>() / count;
        let variance = row.iter().map(|a| (a - mean) * (a - mean)).sum::<f32>() / count;
        let inverse = 1.0 / (variance + 1e-12).sqrt();
        for ((v, gain), bias) in row.iter_mut().zip(&norm.gain).zip(&norm.bias) {
            *v = (*v - mean) * inverse * gain + bias;
        }
    }
}

/// `out[n × o] = x[n × i] · weightᵀ + bias`.
fn linear_into(x: &[f32], n: usize, layer: &Linear, out: &mut [f32]) {
    kernel::product(x, n, layer.weights(), |k, v| v + layer.bias[k], out);
}

fn linear(
    take: &mut impl FnMut(&str) -> Result<Tensor, Malformed>,
    prefix: &str,
    inputs: usize,
    outputs: usize,
) -> Result<Linear, Malformed> {
    let weight = take(&format!("{prefix}.weight"))?;
    let [rows, columns] = weight.matrix()?;
    if rows != outputs || (inputs != 0 && columns != inputs) {
        return Err(Malformed::from(format!(
            "{prefix}.weight is {rows}×{columns}, expected {outputs}×{inputs}"
        )));
    }
    Ok(Linear {
        bias: take(&format!("{prefix}.bias"))?.values_of(&[outputs])?,
        weight: weight.data,
        inputs: columns,
        outputs,
    })
}

/// The intermediate projection, whose width the weights decide.
fn take_shape(take: &mut impl FnMut(&str) -> Result<Tensor, Malformed>, name: &str) -> Result<Linear, Malformed> {
    let weight = take(name)?;
    let [outputs, inputs] = weight.matrix()?;
    let prefix = name.trim_end_matches(".weight");
    Ok(Linear {
        bias: take(&format!("{prefix}.bias"))?.values_of(&[outputs])?,
        weight: weight.data,
        inputs,
        outputs,
    })
}

fn norm(
    take: &mut impl FnMut(&str) -> Result<Tensor, Malformed>,
    prefix: &str,
    width: usize,
) -> Result<Norm, Malformed> {
    Ok(Norm {
        gain: take(&format!("{prefix}.weight"))?.values_of(&[width])?,
        bias: take(&format!("{prefix}.bias"))?.values_of(&[width])?,
    })
}

/// One fp32 tensor from a safetensors file.
#[derive(Debug)]
struct Tensor {
    shape: Vec<usize>,
    data: Vec<f32>,
}

impl Tensor {
    fn matrix(&self) -> Result<[usize; 2], Malformed> {
        match self.shape[..] {
            [rows, columns] => Ok([rows, columns]),
            _ => Err(Malformed(format!("expected a matrix, found shape {:?}", self.shape))),
        }
    }

    /// The values, when the shape is `expected` (0 = any size on that axis).
    fn values_of(self, expected: &[usize]) -> Result<Vec<f32>, Malformed> {
        let fits = self.shape.len() == expected.len()
            && self
                .shape
                .iter()
                .zip(expected)
                .all(|(&have, &want)| want == 0 || have == want);
        if fits {
            Ok(self.data)
        } else {
            Err(Malformed(format!(
                "expected shape {expected:?}, found {:?}",
                self.shape
            )))
        }
    }
}

/// Parse a safetensors file (8-byte little-endian header length, a JSON header of
/// `name: {dtype, shape, data_offsets}`, then the data). Only F32 tensors are read; others
/// (buffers such as `position_ids`) are skipped.
fn safetensors(bytes: &[u8]) -> Result<HashMap<String, Tensor>, Malformed> {
    #[derive(serde::Deserialize)]
    struct Entry {
        dtype: String,
        shape: Vec<usize>,
        data_offsets: [usize; 2],
    }
    let header_len = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .and_then(|len| usize::try_from(len).ok())
        .ok_or("too short for a safetensors file")?;
    let header = bytes
        .get(8..8usize.saturating_add(header_len))
        .ok_or("the header runs past the end of the file")?;
    let data = &bytes[8 + header_len..];
    let mut entries: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(header).map_err(|e| format!("bad header: {e}"))?;
    entries.remove("__metadata__");
    let mut tensors = HashMap::new();
    for (name, entry) in entries {
        let entry: Entry = serde_json::from_value(entry).map_err(|e| format!("{name}: {e}"))?;
        if entry.dtype != "F32" {
            // Not a weight the forward pass reads (e.g. `position_ids`, I64); a weight that is
            // missing for this reason is reported by name when it is taken.
            continue;
        }
        let [start, end] = entry.data_offsets;
        let count: usize = entry.shape.iter().product();
        let raw = data
            .get(start..end)
            .filter(|raw| raw.len() == count * 4)
            .ok_or_else(|| format!("{name}: data offsets {start}..{end} do not fit its shape or the file"))?;
        let values = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        tensors.insert(
            name,
            Tensor {
                shape: entry.shape,
                data: values,
            },
        );
    }
    Ok(tensors)
}

/// `{"id": "...", "files": {"model.safetensors": "<sha256>", ...}}`.
#[derive(Debug, serde::Deserialize)]
struct Manifest {
    id: String,
    files: HashMap<String, String>,
}

impl Manifest {
    fn read(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read(path).map_err(|source| ModelError::Io {
            path: path.to_owned(),
            source,
        })?;
        let manifest: Self = serde_json::from_slice(&text).map_err(|e| ModelError::Manifest {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        if manifest.id.is_empty()
            || manifest.id.len() > 100
            || !manifest
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(ModelError::Manifest {
                path: path.to_owned(),
                reason: "its id must be 1-100 letters, digits, '-', '_' or '.'".into(),
            });
        }
        Ok(manifest)
    }
}

/// The file's bytes, once its sha256 matches `expected` (lowercase hex).
fn read_checked(path: &Path, expected: &str) -> Result<Vec<u8>, ModelError> {
    let bytes = std::fs::read(path).map_err(|source| ModelError::Io {
        path: path.to_owned(),
        source,
    })?;
    let actual = sha256_hex(&bytes);
    if !actual.eq_ignore_ascii_case(expected) {
        return Err(ModelError::Checksum {
            path: path.to_owned(),
            expected: expected.chars().take(64).collect(),
            actual,
        });
    }
    Ok(bytes)
}

pub use crate::hash::sha256_hex;
