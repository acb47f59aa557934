//! The tool vector cache on disk: one file per model id beside the catalog snapshots
//! (`vectors-<model id>.bin`), mapping the hash of an embedded text to its vector, so a
//! restart embeds only tools that are new or changed.
//!
//! Format: `AGVEC1\n`, the dimension and the count (u32 little-endian each), then per vector
//! its text hash (u64) and its values (f32), all little-endian. A file of another dimension,
//! cut short or otherwise unreadable is ignored (and rewritten at the next save): a cache is
//! never worth an error. Written atomically and owner-only, like the snapshots.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MAGIC: &[u8] = b"AGVEC1\n";
/// Most vectors kept (about 15 MB at 384 dimensions): beyond it, vectors not used since the
/// file was read are dropped first.
const MAX_VECTORS: usize = 25_000;

/// The cache file of one model, loaded.
#[derive(Debug)]
pub struct VectorFile {
    path: PathBuf,
    dimensions: usize,
    vectors: HashMap<u64, Arc<[f32]>>,
    /// Text hashes asked for or added since the file was read: kept first when trimming.
    used: std::collections::HashSet<u64>,
    dirty: bool,
}

impl VectorFile {
    /// The cache of `model_id` in `dir` (empty when absent or unreadable).
    #[must_use]
    pub fn open(dir: &Path, model_id: &str, dimensions: usize) -> Self {
        let path = dir.join(format!("vectors-{model_id}.bin"));
        let vectors = std::fs::read(&path)
            .ok()
            .and_then(|bytes| parse(&bytes, dimensions))
            .unwrap_or_default();
        Self {
            path,
            dimensions,
            vectors,
            used: std::collections::HashSet::new(),
            dirty: false,
        }
    }

    /// The cached vector of a text.
    pub fn get(&mut self, text_hash: u64) -> Option<Arc<[f32]>> {
        let found = self.vectors.get(&text_hash).cloned();
        if found.is_some() {
            self.used.insert(text_hash);
        }
        found
    }

    /// Remember a text's vector.
    pub fn insert(&mut self, text_hash: u64, vector: &Arc<[f32]>) {
        self.used.insert(text_hash);
        if vector.len() == self.dimensions && !self.vectors.contains_key(&text_hash) {
            self.vectors.insert(text_hash, vector.clone());
            self.dirty = true;
        }
    }

    /// Write the file if anything was added.
    ///
    /// # Errors
    /// When the folder or file cannot be written.
    pub fn save(&mut self) -> std::io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        if self.vectors.len() > MAX_VECTORS {
            let used = &self.used;
            self.vectors.retain(|key, _| used.contains(key));
        }
        let mut keys: Vec<u64> = self.vectors.keys().copied().collect();
        keys.sort_unstable();
        keys.truncate(MAX_VECTORS);
        let mut bytes = Vec::with_capacity(MAGIC.len() + 8 + keys.len() * (8 + 4 * self.dimensions));
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&u32::try_from(self.dimensions).unwrap_or(0).to_le_bytes());
        bytes.extend_from_slice(&u32::try_from(keys.len()).unwrap_or(0).to_le_bytes());
        for key in keys {
            bytes.extend_from_slice(&key.to_le_bytes());
            for value in self.vectors[&key].iter() {
                bytes.extend_from_slice(&value.to_le_bytes());
            }
        }
        if let Some(dir) = self.path.parent() {
            crate::paths::create_private_dir_all(dir)?;
        }
        crate::paths::write_atomic(&self.path, &bytes, crate::paths::Durability::Cache)?;
        self.dirty = false;
        Ok(())
    }

    /// Where the file lives.
    #[cfg(test)]
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn parse(bytes: &[u8], dimensions: usize) -> Option<HashMap<u64, Arc<[f32]>>> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let read_u32 = |at: usize| -> Option<usize> {
        let raw: [u8; 4] = rest.get(at..at + 4)?.try_into().ok()?;
        usize::try_from(u32::from_le_bytes(raw)).ok()
    };
    if read_u32(0)? != dimensions {
        return None;
    }
    let count = read_u32(4)?;
    let record = 8 + 4 * dimensions;
    let body = rest.get(8..)?;
    if body.len() != count.checked_mul(record)? {
        return None;
    }
    Some(
        body.chunks_exact(record)
            .map(|chunk| {
                let key = u64::from_le_bytes(chunk[..8].try_into().expect("8 bytes"));
                let vector: Arc<[f32]> = chunk[8..]
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                    .collect();
                (key, vector)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_survive_a_save_and_a_reopen_and_other_models_do_not_see_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = VectorFile::open(dir.path(), "m1", 3);
        let vector: Arc<[f32]> = vec![0.5, -1.0, 2.0].into();
        file.insert(42, &vector);
        file.save().unwrap();
        let mut again = VectorFile::open(dir.path(), "m1", 3);
        assert_eq!(again.get(42).as_deref(), Some(&[0.5, -1.0, 2.0][..]));
        assert!(VectorFile::open(dir.path(), "m2", 3).get(42).is_none());
        // Another dimension: the file is not this model's.
        assert!(VectorFile::open(dir.path(), "m1", 4).get(42).is_none());
    }

    #[test]
    fn a_cut_or_foreign_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = VectorFile::open(dir.path(), "m", 2);
        file.insert(1, &Arc::from(vec![1.0, 2.0]));
        file.save().unwrap();
        let bytes = std::fs::read(file.path()).unwrap();
        std::fs::write(file.path(), &bytes[..bytes.len() - 3]).unwrap();
        assert!(VectorFile::open(dir.path(), "m", 2).get(1).is_none());
        std::fs::write(file.path(), b"not a cache").unwrap();
        assert!(VectorFile::open(dir.path(), "m", 2).get(1).is_none());
    }
}
