//! One caller's view of the shared index: what each document is to that caller (enabled,
//! disabled, hidden), by slot.
//!
//! The index is one for the whole instance; toolRules with `callers` make what a caller may
//! see differ per caller. Rather than an index per caller, a search passes a view in its
//! [`Filter`](super::index::Filter) and the scoring loop skips what the view hides, so hidden
//! tools never reach ranking, exact names, suggestions or counts. A view depends only on the
//! caller rules a caller matches (its [`Reach`]) and on the catalog, so
//! [`IndexedCatalog`](super::IndexedCatalog) keeps the views it built by reach and drops them
//! with every change of the catalog; the local user and every caller no caller rule is for
//! need none.

use std::sync::Arc;

use crate::rules::{Reach, Sight};

/// Views kept per catalog version: one per distinct reach seen (a few teams, in practice).
const MAX_VIEWS: u64 = 256;

/// What each document of one index is to one caller, by slot.
#[derive(Debug)]
pub struct View {
    sights: Box<[Sight]>,
}

impl View {
    pub(super) fn new(sights: Box<[Sight]>) -> Self {
        Self { sights }
    }

    /// What the document in `slot` is to the caller (a slot the index did not have: hidden).
    #[must_use]
    pub fn sight(&self, slot: u32) -> Sight {
        self.sights.get(slot as usize).copied().unwrap_or(Sight::Hidden)
    }
}

/// The views built over one version of a catalog, by reach. A clone is a catalog that may
/// change on its own: it starts with none.
pub(super) struct Views(moka::sync::Cache<Reach, Arc<View>>);

impl Views {
    /// The view for `reach`, built by `build` unless kept (concurrent callers with the same
    /// reach build it once).
    pub(super) fn get(&self, reach: Reach, build: impl FnOnce() -> View) -> Arc<View> {
        self.0.get_with(reach, || Arc::new(build()))
    }
}

impl Default for Views {
    fn default() -> Self {
        Self(moka::sync::Cache::new(MAX_VIEWS))
    }
}

impl Clone for Views {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for Views {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Views")
    }
}
