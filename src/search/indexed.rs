//! A catalog and the search index over it, changed together.
//!
//! The catalog (a lower layer) holds the tools; the index is search's own view of them. This
//! type is the one place both change, per server, so they can never disagree: a search resolves
//! the index's documents to catalog entries by position. Reading the catalog goes through
//! `Deref`, so callers that only read tools need not know an index exists.

use std::ops::Deref;
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use rmcp::model::Tool;

use std::sync::Arc;

use super::index::{Batch, Index};
use super::semantic::{Dense, Tier};
use super::view::{View, Views};
use crate::caller::Caller;
use crate::catalog::{Catalog, ToolChanges, ToolEntry};
use crate::rules::{RuleSet, Sight};

/// A [`Catalog`] with its search [`Index`] kept up to date per server.
#[derive(Debug, Clone, Default)]
pub struct IndexedCatalog {
    catalog: Catalog,
    index: Index,
    /// The semantic tier's vectors of these tools as one matrix: made by the first fused
    /// search, dropped by every change.
    dense: DenseCell,
    /// Callers' views of these tools, by reach: made by their first operation, dropped by
    /// every change.
    views: Views,
}

impl IndexedCatalog {
    /// Replace `server`'s tools, applying `rules`, and re-index that server only; says which
    /// tools were added, updated or removed.
    pub fn set_server_tools(&mut self, server: &str, tools: Vec<Tool>, rules: &RuleSet) -> ToolChanges {
        self.views = Views::default();
        let changes = self.catalog.set_server_tools(server, tools, rules);
        self.reindex(server);
        changes
    }

    /// Set (or clear) `server`'s description, re-indexing its tools when it changed (the
    /// description is searched with them).
    pub fn set_description(&mut self, server: &str, description: Option<&str>) {
        if self.catalog.set_description(server, description) && self.catalog.server_tools(server).is_some() {
            self.reindex(server);
        }
    }

    /// Change `server`'s entries in place without re-indexing: for trust marks only (see
    /// [`Catalog::annotate`]).
    pub fn annotate(&mut self, server: &str, f: impl FnMut(&mut crate::catalog::ToolEntry)) {
        self.dense = DenseCell::default();
        self.catalog.annotate(server, f);
    }

    /// Change many servers' tools with the index's postings written once, when the returned
    /// batch is dropped (loading hundreds of snapshots at startup).
    pub fn batch(&mut self) -> CatalogBatch<'_> {
        self.dense = DenseCell::default();
        self.views = Views::default();
        CatalogBatch {
            catalog: &mut self.catalog,
            index: self.index.batch(),
        }
    }

    /// Forget `server`'s tools and its documents.
    pub fn remove_server(&mut self, server: &str) {
        self.dense = DenseCell::default();
        self.views = Views::default();
        self.catalog.remove_server(server);
        self.index.remove_server(server);
    }

    /// What `caller` may see of these tools under `rules` (the rules they were decided by),
    /// kept for the next caller with the same reach; `None` when it is what the catalog says
    /// (the local user, or a caller no caller rule is for).
    #[must_use]
    pub fn view(&self, rules: &RuleSet, caller: &Caller) -> Option<Arc<View>> {
        let reach = rules.reach(caller);
        if reach.is_empty() {
            return None;
        }
        let build = || self.index.view(|server, tool| rules.sight(server, tool, &reach));
        Some(self.views.get(reach.clone(), build))
    }

    /// What `server`'s tool at `position` is to the caller of `view`.
    #[must_use]
    pub fn sight(&self, view: Option<&View>, server: &str, position: usize) -> Sight {
        let Some(entry) = self.catalog.server_tools(server).and_then(|tools| tools.get(position)) else {
            return Sight::Hidden;
        };
        match view {
            None => Sight::of_enabled(entry.enabled),
            Some(view) => self
                .index
                .slot(server, position)
                .map_or(Sight::Hidden, |slot| view.sight(slot)),
        }
    }

    /// `server`'s tools the caller of `view` may know of, in order, each with its sight.
    pub fn visible_tools<'a>(
        &'a self,
        view: Option<&'a View>,
        server: &'a str,
    ) -> impl Iterator<Item = (usize, &'a ToolEntry, Sight)> + 'a {
        self.catalog
            .server_tools(server)
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(move |(position, entry)| (position, entry, self.sight(view, server, position)))
            .filter(|&(_, _, sight)| sight != Sight::Hidden)
    }

    /// The index over every server's tools.
    #[must_use]
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The vectors `tier` has for these tools, made by `model`, as one matrix brought up to
    /// date with the tier (always `Some`).
    pub fn dense_vectors(&self, tier: &Tier, model: &str, dimensions: usize) -> RwLockReadGuard<'_, Option<Dense>> {
        let cell = &self.dense.0;
        let current = cell.read().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|dense| dense.is_current(tier, model)) {
            return current;
        }
        drop(current);
        {
            let mut stale = cell.write().unwrap_or_else(PoisonError::into_inner);
            match stale.as_mut() {
                // Another search may have brought it up to date while this one waited.
                Some(dense) if dense.is_current(tier, model) => {}
                Some(dense) if dense.is_of(model) => dense.fill(tier),
                _ => *stale = Some(Dense::build(&self.catalog, tier, model, dimensions)),
            }
        }
        cell.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn reindex(&mut self, server: &str) {
        self.dense = DenseCell::default();
        self.views = Views::default();
        let tools = self.catalog.server_tools(server).unwrap_or_default();
        self.index.set_server(server, self.catalog.description(server), tools);
    }
}

/// Changes to an [`IndexedCatalog`] whose index postings are written when it is dropped.
pub struct CatalogBatch<'a> {
    catalog: &'a mut Catalog,
    index: Batch<'a>,
}

impl CatalogBatch<'_> {
    /// [`IndexedCatalog::set_server_tools`] within the batch.
    pub fn set_server_tools(&mut self, server: &str, tools: Vec<Tool>, rules: &RuleSet) -> ToolChanges {
        self.set_server_entries(server, Catalog::entries(server, tools, rules))
    }

    /// Replace `server`'s tools with entries from [`Catalog::entries`], within the batch.
    pub fn set_server_entries(&mut self, server: &str, entries: Vec<ToolEntry>) -> ToolChanges {
        let changes = self.catalog.set_server_entries(server, entries);
        let tools = self.catalog.server_tools(server).unwrap_or_default();
        self.index.set_server(server, self.catalog.description(server), tools);
        changes
    }
}

impl From<Catalog> for IndexedCatalog {
    /// Index a whole catalog (e.g. one loaded from a file).
    fn from(catalog: Catalog) -> Self {
        let mut indexed = Self {
            catalog,
            index: Index::default(),
            dense: DenseCell::default(),
            views: Views::default(),
        };
        let mut batch = indexed.index.batch();
        for server in indexed.catalog.server_names() {
            batch.set_server(
                server,
                indexed.catalog.description(server),
                indexed.catalog.server_tools(server).unwrap_or_default(),
            );
        }
        drop(batch);
        indexed
    }
}

/// A lock around the matrix that a clone does not share (a clone is a catalog that may
/// change on its own: it makes its own).
#[derive(Default)]
struct DenseCell(RwLock<Option<Dense>>);

impl Clone for DenseCell {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for DenseCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DenseCell")
    }
}

impl Deref for IndexedCatalog {
    type Target = Catalog;

    fn deref(&self) -> &Catalog {
        &self.catalog
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn tool(name: &str) -> Tool {
        Tool::new(
            name.to_owned(),
            "Reads a file.".to_owned(),
            Arc::new(serde_json::Map::new()),
        )
    }

    /// Servers set in one batch give the index the same servers set one by one gives.
    #[test]
    fn a_batch_indexes_like_one_server_at_a_time() {
        let rules = RuleSet::default();
        let list = |n: usize, words: &str| -> Vec<Tool> {
            (0..n)
                .map(|i| {
                    Tool::new(
                        format!("tool_{i}"),
                        format!("{words} {}", "long text ".repeat(i * 7)),
                        Arc::new(serde_json::Map::new()),
                    )
                })
                .collect()
        };
        let changes = [
            ("a", list(3, "read files")),
            ("b", list(9, "search the web")),
            ("a", list(1, "write files")),
            ("c", list(20, "send mail")),
            ("b", Vec::new()),
        ];
        let mut one_by_one = IndexedCatalog::default();
        let mut batched = IndexedCatalog::default();
        let mut batch = batched.batch();
        for (server, tools) in &changes {
            one_by_one.set_server_tools(server, tools.clone(), &rules);
            batch.set_server_tools(server, tools.clone(), &rules);
        }
        drop(batch);
        for query in ["read files", "mail", "web search", "long text", "tool_2"] {
            let ranked = |catalog: &IndexedCatalog| {
                crate::search::search(
                    catalog,
                    &crate::search::Query {
                        text: query,
                        server: None,
                        limit: 50,
                        include_disabled: true,
                        view: None,
                    },
                )
                .into_iter()
                .map(|hit| format!("{} {}", hit.entry.id(), hit.relevance))
                .collect::<Vec<_>>()
            };
            assert_eq!(ranked(&batched), ranked(&one_by_one), "{query}");
        }
    }

    #[test]
    fn catalog_and_index_change_together() {
        let rules = RuleSet::default();
        let mut catalog = Catalog::default();
        catalog.set_server_tools("a", vec![tool("read_file")], &rules);
        let mut indexed = IndexedCatalog::from(catalog);
        assert_eq!(indexed.index().len(), 1);

        indexed.set_server_tools("b", vec![tool("read"), tool("write")], &rules);
        assert_eq!((indexed.tools().count(), indexed.index().len()), (3, 3));

        indexed.remove_server("a");
        assert_eq!((indexed.tools().count(), indexed.index().len()), (2, 2));
        assert!(!indexed.index().has_server("a"));
    }

    /// A caller's view is kept for callers with the same reach and made anew after a change,
    /// so a tool added later is seen (or hidden) as the rules say.
    #[test]
    fn views_are_kept_per_reach_and_dropped_by_a_change() {
        let config = crate::config::Config::from_value(
            serde_json::json!({ "toolRules": [
                { "server": "secret", "pattern": "*", "enabled": false, "callers": { "groups": ["!admins", "*"] } }
            ] }),
            "<test>",
        )
        .unwrap();
        let rules = config.rules();
        let caller = |subject: &str, group: &str| Caller {
            subject: Some(subject.into()),
            groups: vec![group.into()],
            ..Caller::default()
        };
        let mut indexed = IndexedCatalog::default();
        indexed.set_server_tools("open", vec![tool("read_file")], rules);
        indexed.set_server_tools("secret", vec![tool("read_secret")], rules);
        assert!(
            indexed.view(rules, &Caller::local()).is_none(),
            "the local user needs no view"
        );
        assert!(
            indexed.view(rules, &caller("ann", "admins")).is_none(),
            "no caller rule is for admins"
        );
        let dev = indexed.view(rules, &caller("dan", "devs")).unwrap();
        let other_dev = indexed.view(rules, &caller("dora", "devs")).unwrap();
        assert!(Arc::ptr_eq(&dev, &other_dev), "one view per reach");
        let seen = |indexed: &IndexedCatalog, view: &View, server: &str| -> Vec<String> {
            indexed
                .visible_tools(Some(view), server)
                .map(|(_, e, _)| e.name().to_owned())
                .collect()
        };
        assert_eq!(seen(&indexed, &dev, "open"), ["read_file"]);
        assert!(seen(&indexed, &dev, "secret").is_empty());

        indexed.set_server_tools("open", vec![tool("read_file"), tool("write_file")], rules);
        let dev = indexed.view(rules, &caller("dan", "devs")).unwrap();
        assert!(!Arc::ptr_eq(&dev, &other_dev), "a change drops the views");
        assert_eq!(seen(&indexed, &dev, "open"), ["read_file", "write_file"]);
        let ids = |view: Option<&View>, text: &str| -> Vec<String> {
            let query = crate::search::Query {
                view,
                include_disabled: true,
                ..crate::search::Query::new(text)
            };
            crate::search::search(&indexed, &query)
                .iter()
                .map(|h| h.entry.id())
                .collect()
        };
        assert!(
            ids(Some(&dev), "secret").is_empty(),
            "not even asking for disabled tools"
        );
        let by_name = ids(Some(&dev), "read_secret");
        assert!(
            !by_name.iter().any(|id| id.starts_with("secret:")),
            "nor by its exact name: {by_name:?}"
        );
        assert_eq!(
            ids(None, "read_secret"),
            ["secret:read_secret"],
            "the local user finds it"
        );
    }
}
