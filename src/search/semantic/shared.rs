//! Tool vectors shared by replicas through the store (`discovery.store`): one hash per model,
//! `<prefix>:vectors:<model id>`, field the text hash (8 bytes, little-endian) and value the
//! vector (f32s, little-endian) — the vector file's key and values, so a tool one replica
//! embedded is never embedded by another.
//!
//! The embedding thread is not a runtime thread: it waits on the store through the runtime's
//! handle, each read or write bounded, and embeds by itself whatever the store did not give.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::store::Store;

/// Vectors per store round trip (about 1.5 MB at 384 dimensions).
const CHUNK: usize = 1_000;
/// One round trip's deadline: past it, the thread embeds by itself.
const DEADLINE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct VectorShare {
    store: Store,
    runtime: tokio::runtime::Handle,
}

impl VectorShare {
    /// Sharing through `store`, if it is shared and a runtime is at hand.
    pub fn new(store: &Store) -> Option<Self> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        store.is_shared().then(|| Self {
            store: store.clone(),
            runtime,
        })
    }

    fn hash(&self, model_id: &str) -> String {
        self.store.key(&["vectors", model_id])
    }

    /// The vectors of `keys` the store has (of `dimensions` values; others are ignored).
    pub fn read(&self, model_id: &str, dimensions: usize, keys: &[u64]) -> HashMap<u64, Arc<[f32]>> {
        let hash = self.hash(model_id);
        let mut found = HashMap::new();
        for chunk in keys.chunks(CHUNK) {
            let fields: Vec<Vec<u8>> = chunk.iter().map(|key| key.to_le_bytes().to_vec()).collect();
            let read = self
                .runtime
                .block_on(async { tokio::time::timeout(DEADLINE, self.store.hash_get(&hash, &fields)).await });
            let Ok(Ok(values)) = read else { break };
            for (key, value) in chunk.iter().zip(values) {
                if let Some(vector) = value.and_then(|bytes| decode(&bytes, dimensions)) {
                    found.insert(*key, vector);
                }
            }
        }
        found
    }

    /// Put vectors embedded here into the store.
    pub fn write(&self, model_id: &str, vectors: &[(u64, Arc<[f32]>)]) {
        let hash = self.hash(model_id);
        for chunk in vectors.chunks(CHUNK) {
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = chunk
                .iter()
                .map(|(key, vector)| (key.to_le_bytes().to_vec(), encode(vector)))
                .collect();
            let written = self
                .runtime
                .block_on(async { tokio::time::timeout(DEADLINE, self.store.hash_set(&hash, &pairs)).await });
            if !matches!(written, Ok(Ok(()))) {
                break;
            }
        }
    }
}

fn encode(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|value| value.to_le_bytes()).collect()
}

fn decode(bytes: &[u8], dimensions: usize) -> Option<Arc<[f32]>> {
    if bytes.len() != dimensions * 4 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_read_back_as_written_and_other_sizes_are_ignored() {
        let vector: Arc<[f32]> = vec![0.5, -1.25, 3.0].into();
        assert_eq!(decode(&encode(&vector), 3).unwrap(), vector);
        assert!(decode(&encode(&vector), 4).is_none());
    }
}
