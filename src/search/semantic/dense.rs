//! One catalog's tool vectors as one contiguous matrix, in catalog order (servers in order,
//! then each server's tools by position), so a search's cosine against every tool is one
//! matrix–vector product over memory rather than a hash lookup and a pointer per tool.
//!
//! Held by [`crate::search::IndexedCatalog`], which drops it whenever the catalog changes;
//! filled from the tier's vectors by tool key: all rows after a change, then only the rows
//! still missing whenever the tier has embedded more tools since.

use std::collections::HashMap;

use super::{server_hash, tool_key, Tier};
use crate::catalog::Catalog;

/// The vectors of one catalog's tools, row by row.
#[derive(Debug)]
pub struct Dense {
    /// The model the rows come from.
    model: String,
    dimensions: usize,
    /// The tier's [`Tier::generation`] when rows were last filled.
    generation: u64,
    /// `rows × dimensions`, row-major; a row without a vector yet is zeros.
    matrix: Vec<f32>,
    keys: Vec<u64>,
    filled: Vec<bool>,
    /// Rows without a vector yet.
    missing: Vec<usize>,
    /// Each server's first row.
    first_rows: HashMap<String, usize>,
}

impl Dense {
    /// Every row of `catalog` from the vectors `tier` has now.
    #[must_use]
    pub fn build(catalog: &Catalog, tier: &Tier, model: &str, dimensions: usize) -> Self {
        let mut dense = Self {
            model: model.to_owned(),
            dimensions,
            generation: 0,
            matrix: Vec::new(),
            keys: Vec::new(),
            filled: Vec::new(),
            missing: Vec::new(),
            first_rows: HashMap::new(),
        };
        for server in catalog.server_names() {
            dense.first_rows.insert(server.to_owned(), dense.keys.len());
            let server_key = server_hash(server);
            for entry in catalog.server_tools(server).unwrap_or_default() {
                dense.missing.push(dense.keys.len());
                dense.keys.push(tool_key(server_key, entry));
                dense.filled.push(false);
            }
        }
        dense.matrix = vec![0.0; dense.keys.len() * dimensions];
        dense.fill(tier);
        dense
    }

    /// Whether rows made with `model` that `tier` could add to are all here.
    #[must_use]
    pub fn is_current(&self, tier: &Tier, model: &str) -> bool {
        self.model == model && (self.missing.is_empty() || self.generation == tier.generation())
    }

    /// Whether the rows were made with `model`.
    #[must_use]
    pub fn is_of(&self, model: &str) -> bool {
        self.model == model
    }

    /// Copy in the vectors `tier` has gained for rows still missing.
    pub fn fill(&mut self, tier: &Tier) {
        // Read before the vectors: one embedded meanwhile is picked up next time.
        let generation = tier.generation();
        let vectors = tier.vectors();
        let dimensions = self.dimensions;
        let (matrix, keys, filled) = (&mut self.matrix, &self.keys, &mut self.filled);
        self.missing.retain(|&row| match vectors.get(&keys[row]) {
            Some(vector) if vector.len() == dimensions => {
                matrix[row * dimensions..][..dimensions].copy_from_slice(vector);
                filled[row] = true;
                false
            }
            _ => true,
        });
        self.generation = generation;
    }

    /// Rows in all.
    #[must_use]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are no rows.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The first row of `server`'s tools.
    #[must_use]
    pub fn first_row(&self, server: &str) -> Option<usize> {
        self.first_rows.get(server).copied()
    }

    /// Whether `row` has its vector.
    #[must_use]
    pub fn has(&self, row: usize) -> bool {
        self.filled[row]
    }

    /// The cosine of unit vector `query` with every row (0 for rows without a vector).
    #[must_use]
    pub fn cosines(&self, query: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0; self.len()];
        if !self.is_empty() && query.len() == self.dimensions {
            let rows = super::kernel::Weights {
                matrix: &self.matrix,
                inputs: self.dimensions,
                outputs: self.len(),
            };
            super::kernel::product(query, 1, rows, |_, cosine| cosine, &mut out);
        }
        out
    }
}
