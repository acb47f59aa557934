//! A tiny BERT with random weights, written as a model folder the real loading code reads
//! (safetensors, vocab, manifest with sha256): for tests of the tier without the 91 MB model.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub const HIDDEN: usize = 64;
const INTERMEDIATE: usize = 128;
const LAYERS: usize = 2;
const POSITIONS: usize = 64;
const WORDS: &[&str] = &[
    "read",
    "write",
    "file",
    "files",
    "text",
    "time",
    "current",
    "get",
    "convert",
    "zone",
    "weather",
    "forecast",
    "city",
    "search",
    "web",
    "delete",
    "create",
    "issue",
    "echo",
    "message",
    "add",
    "numbers",
    "list",
    "directory",
    "the",
    "a",
    "of",
    "to",
    "in",
    "what",
    "is",
    "it",
    "server",
    "parameters",
    "path",
    "query",
    "deprecated",
    "use",
    "instead",
    "tokyo",
    "contents",
    "complete",
    "as",
    "##s",
    "##ing",
    "##ed",
    "_",
    ":",
    ",",
    ".",
];

/// Write the tiny model into `dir` and return `dir`.
pub fn write_tiny_model(dir: &Path) -> PathBuf {
    let mut vocab: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    vocab.extend(WORDS.iter().map(|s| (*s).to_owned()));
    vocab.extend(('a'..='z').map(String::from));
    vocab.extend(('a'..='z').map(|c| format!("##{c}")));
    let mut tensors: Vec<(String, Vec<usize>)> = vec![
        ("embeddings.word_embeddings.weight".into(), vec![vocab.len(), HIDDEN]),
        ("embeddings.position_embeddings.weight".into(), vec![POSITIONS, HIDDEN]),
        ("embeddings.token_type_embeddings.weight".into(), vec![2, HIDDEN]),
        ("embeddings.LayerNorm.weight".into(), vec![HIDDEN]),
        ("embeddings.LayerNorm.bias".into(), vec![HIDDEN]),
    ];
    for layer in 0..LAYERS {
        let p = format!("encoder.layer.{layer}");
        for (name, shape) in [
            ("attention.self.query", [HIDDEN, HIDDEN]),
            ("attention.self.key", [HIDDEN, HIDDEN]),
            ("attention.self.value", [HIDDEN, HIDDEN]),
            ("attention.output.dense", [HIDDEN, HIDDEN]),
            ("intermediate.dense", [INTERMEDIATE, HIDDEN]),
            ("output.dense", [HIDDEN, INTERMEDIATE]),
        ] {
            tensors.push((format!("{p}.{name}.weight"), shape.to_vec()));
            tensors.push((format!("{p}.{name}.bias"), vec![shape[0]]));
        }
        for norm in ["attention.output.LayerNorm", "output.LayerNorm"] {
            tensors.push((format!("{p}.{norm}.weight"), vec![HIDDEN]));
            tensors.push((format!("{p}.{norm}.bias"), vec![HIDDEN]));
        }
    }
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut header = String::from("{");
    let mut data: Vec<u8> = Vec::new();
    for (i, (name, shape)) in tensors.iter().enumerate() {
        let count: usize = shape.iter().product();
        let start = data.len();
        for _ in 0..count {
            // xorshift: the same weights on every run.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            #[expect(clippy::cast_precision_loss, reason = "a random number in 0..1 is all this is")]
            let unit = (seed >> 40) as f32 / (1u64 << 24) as f32;
            let value = if name.ends_with("LayerNorm.weight") {
                1.0
            } else {
                (unit - 0.5) * 0.4
            };
            data.extend_from_slice(&value.to_le_bytes());
        }
        if i > 0 {
            header.push(',');
        }
        let _ = write!(
            header,
            r#""{name}":{{"dtype":"F32","shape":{shape:?},"data_offsets":[{start},{}]}}"#,
            data.len()
        );
    }
    // A buffer the real checkpoints carry and the forward pass does not read (not F32).
    let start = data.len();
    for position in 0..POSITIONS as u64 {
        data.extend_from_slice(&position.to_le_bytes());
    }
    let _ = write!(
        header,
        r#","embeddings.position_ids":{{"dtype":"I64","shape":[1,{POSITIONS}],"data_offsets":[{start},{}]}}"#,
        data.len()
    );
    header.push('}');
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&data);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("model.safetensors"), &file).unwrap();
    let vocab = vocab.join("\n");
    std::fs::write(dir.join("vocab.txt"), &vocab).unwrap();
    let manifest = serde_json::json!({
        "id": "tiny-test",
        "files": {
            "model.safetensors": super::model::sha256_hex(&file),
            "vocab.txt": super::model::sha256_hex(vocab.as_bytes()),
        }
    });
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
    dir.to_owned()
}
