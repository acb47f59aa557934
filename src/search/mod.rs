//! Search over the catalog: ranking and "did you mean" suggestions.
//!
//! Ranking here is deliberately simple (token overlap weighted by field) with one hard
//! guarantee: an exact tool name (`tool`, `server:tool`, `server.tool`, `server__tool`) ranks
//! first with relevance 1. Ties break by server then name, so the same query gives the same
//! order. The field-weighted index of DESIGN §7 replaces `score` without changing this API.

mod suggest;

use crate::catalog::{Catalog, ToolEntry};

pub use suggest::{edit_distance, suggest_servers, suggest_tools};

/// Longest accepted query, in characters; longer queries are a validation error.
pub const MAX_QUERY_CHARS: usize = 1_000;

/// One ranked hit.
#[derive(Debug, Clone)]
pub struct Hit<'a> {
    pub entry: &'a ToolEntry,
    /// 0..=1; 1 only for an exact name.
    pub relevance: f64,
}

/// What a search looks at.
#[derive(Debug, Clone, Copy)]
pub struct Query<'q> {
    pub text: &'q str,
    pub server: Option<&'q str>,
    pub limit: usize,
    pub include_disabled: bool,
}

/// Rank the catalog for `query`. Hits with no overlap at all are dropped.
#[must_use]
pub fn search<'a>(catalog: &'a Catalog, query: &Query<'_>) -> Vec<Hit<'a>> {
    let terms = tokenize(query.text);
    let mut hits: Vec<Hit<'a>> = catalog
        .tools()
        .filter(|e| query.include_disabled || e.enabled)
        .filter(|e| query.server.is_none_or(|s| s == e.server))
        .filter_map(|entry| {
            let relevance = if is_exact_name(entry, query.text.trim()) {
                1.0
            } else {
                score(entry, &terms)
            };
            (relevance > 0.0).then_some(Hit { entry, relevance })
        })
        .collect();
    hits.sort_by(|a, b| {
        b.relevance
            .total_cmp(&a.relevance)
            .then_with(|| a.entry.server.cmp(&b.entry.server))
            .then_with(|| a.entry.name().cmp(b.entry.name()))
    });
    hits.truncate(query.limit);
    hits
}

/// Whether `text` names this tool exactly, alone or qualified by its server.
#[must_use]
pub fn is_exact_name(entry: &ToolEntry, text: &str) -> bool {
    let name = entry.name();
    if text == name {
        return true;
    }
    [":", ".", "__", "/"].iter().any(|sep| {
        text.strip_prefix(entry.server.as_str())
            .and_then(|rest| rest.strip_prefix(sep))
            .is_some_and(|rest| rest == name)
    })
}

/// Lowercase word tokens; `snake_case`, `kebab-case`, dots and `camelCase` split.
#[must_use]
pub fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !current.is_empty() {
                tokens.push(std::mem::take(&mut current));
            }
            prev_lower = c.is_lowercase() || c.is_numeric();
            current.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !current.is_empty() {
                tokens.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

/// Weighted overlap of query terms with name, summary/description, server and tags, scaled
/// into 0..0.95 so that no partial match reaches an exact name's 1.0.
fn score(entry: &ToolEntry, terms: &[String]) -> f64 {
    if terms.is_empty() {
        return 0.0;
    }
    let name = tokenize(entry.name());
    let description = tokenize(entry.description());
    let server = tokenize(&entry.server);
    let tags: Vec<String> = entry.tags.iter().flat_map(|t| tokenize(t)).collect();
    let has = |field: &[String], term: &str| field.iter().any(|t| t == term);
    let prefixed = |field: &[String], term: &str| term.len() >= 3 && field.iter().any(|t| t.starts_with(term));
    let mut total = 0.0;
    for term in terms {
        let weight = if has(&name, term) {
            1.0
        } else if prefixed(&name, term) {
            0.7
        } else if has(&description, term) || has(&tags, term) {
            0.5
        } else if has(&server, term) || prefixed(&description, term) {
            0.3
        } else {
            0.0
        };
        total += weight;
    }
    #[expect(clippy::cast_precision_loss, reason = "term counts are tiny")]
    let coverage = total / terms.len() as f64;
    // Reward names that are mostly made of query terms over long names that merely contain them.
    #[expect(clippy::cast_precision_loss, reason = "token counts are tiny")]
    let name_fit = name.iter().filter(|t| terms.contains(t)).count() as f64 / name.len().max(1) as f64;
    (coverage * 0.85 + name_fit * 0.1).min(0.95)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::RuleSet;
    use rmcp::model::Tool;
    use serde_json::json;
    use std::sync::Arc;

    fn tool(name: &str, description: &str) -> Tool {
        let schema = json!({ "type": "object" }).as_object().unwrap().clone();
        Tool::new(name.to_owned(), description.to_owned(), Arc::new(schema))
    }

    fn catalog() -> Catalog {
        let mut catalog = Catalog::default();
        let rules = RuleSet::default();
        catalog.set_server_tools(
            "everything",
            vec![
                tool("echo", "Echoes back the input string"),
                tool("echo_twice", "Echo a message two times"),
                tool("add", "Adds two numbers"),
            ],
            &rules,
        );
        catalog.set_server_tools(
            "filesystem",
            vec![
                tool("read_text_file", "Read the complete contents of a file as text"),
                tool("write_file", "Create a new file"),
            ],
            &rules,
        );
        catalog
    }

    fn query(text: &str) -> Query<'_> {
        Query {
            text,
            server: None,
            limit: 10,
            include_disabled: false,
        }
    }

    fn ids(hits: &[Hit<'_>]) -> Vec<String> {
        hits.iter().map(|h| h.entry.id()).collect()
    }

    #[test]
    fn exact_name_is_first_with_full_relevance() {
        let catalog = catalog();
        for text in ["echo", "everything:echo", "everything.echo", "everything__echo"] {
            let hits = search(&catalog, &query(text));
            assert_eq!(hits[0].entry.id(), "everything:echo", "{text}");
            assert!((hits[0].relevance - 1.0).abs() < f64::EPSILON);
            assert!(hits[1..].iter().all(|h| h.relevance < 1.0));
        }
    }

    #[test]
    fn description_words_find_tools() {
        let catalog = catalog();
        let hits = search(&catalog, &query("read file contents"));
        assert_eq!(hits[0].entry.id(), "filesystem:read_text_file");
    }

    #[test]
    fn same_query_same_order() {
        let catalog = catalog();
        assert_eq!(
            ids(&search(&catalog, &query("file"))),
            ids(&search(&catalog, &query("file")))
        );
    }

    #[test]
    fn server_filter_and_limit() {
        let catalog = catalog();
        let mut q = query("file");
        q.server = Some("everything");
        assert!(search(&catalog, &q).is_empty());
        let mut q = query("echo");
        q.limit = 1;
        assert_eq!(search(&catalog, &q).len(), 1);
    }

    #[test]
    fn nonsense_and_empty_queries_find_nothing() {
        let catalog = catalog();
        assert!(search(&catalog, &query("zzzqqq")).is_empty());
        assert!(search(&catalog, &query("")).is_empty());
        assert!(search(&catalog, &query("  !!! ")).is_empty());
    }

    #[test]
    fn relevance_stays_in_unit_range() {
        let catalog = catalog();
        for text in ["echo echo echo", "file file", "add numbers", "ECHO"] {
            for hit in search(&catalog, &query(text)) {
                assert!((0.0..=1.0).contains(&hit.relevance), "{text}: {}", hit.relevance);
            }
        }
    }

    #[test]
    fn tokenize_splits_cases() {
        assert_eq!(tokenize("readTextFile"), ["read", "text", "file"]);
        assert_eq!(tokenize("create-issue.v2"), ["create", "issue", "v2"]);
        assert_eq!(tokenize("get_URL"), ["get", "url"]);
        assert_eq!(tokenize("Ünïcode Wörds"), ["ünïcode", "wörds"]);
    }
}
