//! "Did you mean": close spellings first, then tools that mean the same thing.
//!
//! Spelling is edit distance over names (a typo budget of a third of the length, at least
//! two); meaning is the search index queried with the wanted name's words, so
//! `remove_ticket` finds `delete_ticket` through the thesaurus and `forecast_weather` finds a
//! tool whose description talks about the weather.

use super::IndexedCatalog;

use super::{search, tokenize, Query, View};

const MAX_SUGGESTIONS: usize = 3;

/// The longest name (in bytes) suggestions are looked for: four times MCP's 128-character
/// limit on tool names. A longer one is no typo of any tool, and comparing it costs time in
/// its length times every name's — a client sending a 16 MiB "tool name" held the runtime
/// for minutes.
const MAX_WANTED_BYTES: usize = 512;

/// Levenshtein distance over chars.
#[must_use]
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Candidates spelled like `wanted` (within the typo budget, or containing it or contained
/// in it), closest first, then by label.
fn by_spelling<'a>(wanted: &str, candidates: impl Iterator<Item = (&'a str, String)>) -> Vec<String> {
    let wanted_lower = wanted.to_lowercase();
    let budget = (wanted_lower.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, String)> = candidates
        .filter_map(|(name, label)| {
            let lower = name.to_lowercase();
            let distance = edit_distance(&wanted_lower, &lower);
            let contains = lower.contains(&wanted_lower) || wanted_lower.contains(&lower);
            (distance <= budget || contains).then_some((distance, label))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().map(|(_, label)| label).collect()
}

/// Candidates sharing words with `wanted`, most shared first (for server names, which have
/// no descriptions to search).
fn by_shared_words<'a>(wanted: &str, candidates: impl Iterator<Item = (&'a str, String)>) -> Vec<String> {
    let wanted_words = tokenize::words(wanted);
    let mut scored: Vec<(std::cmp::Reverse<usize>, String)> = candidates
        .filter_map(|(name, label)| {
            let shared = tokenize::words(name)
                .iter()
                .filter(|w| wanted_words.contains(w))
                .count();
            (shared > 0).then_some((std::cmp::Reverse(shared), label))
        })
        .collect();
    scored.sort();
    scored.into_iter().map(|(_, label)| label).collect()
}

/// Tools whose names are close to `tool`, as `server:tool`: near spellings on `server`, then
/// on other servers, then tools the index finds for the name's words; only tools the caller
/// of `view` may know of.
#[must_use]
pub fn suggest_tools(catalog: &IndexedCatalog, view: Option<&View>, server: &str, tool: &str) -> Vec<String> {
    if tool.len() > MAX_WANTED_BYTES {
        return Vec::new();
    }
    let spelled_here = by_spelling(
        tool,
        catalog.visible_tools(view, server).map(|(_, e, _)| (e.name(), e.id())),
    );
    let spelled_elsewhere = by_spelling(
        tool,
        catalog
            .server_names()
            .filter(|&other| other != server)
            .flat_map(|other| catalog.visible_tools(view, other))
            .map(|(_, e, _)| (e.name(), e.id())),
    );
    let words = tokenize::words(tool).join(" ");
    let meant = search(
        catalog,
        &Query {
            text: &words,
            server: None,
            limit: MAX_SUGGESTIONS * 2,
            include_disabled: false,
            view,
        },
    )
    .into_iter()
    .map(|hit| hit.entry.id());
    let mut suggestions: Vec<String> = Vec::new();
    for id in spelled_here.into_iter().chain(spelled_elsewhere).chain(meant) {
        if !suggestions.contains(&id) {
            suggestions.push(id);
        }
        if suggestions.len() == MAX_SUGGESTIONS {
            break;
        }
    }
    suggestions
}

/// Server names close to `server`: near spellings, then names sharing a word.
#[must_use]
pub fn suggest_servers<'a>(names: impl Iterator<Item = &'a str>, server: &str) -> Vec<String> {
    if server.len() > MAX_WANTED_BYTES {
        return Vec::new();
    }
    let names: Vec<&str> = names.collect();
    let mut suggestions = by_spelling(server, names.iter().map(|&n| (n, n.to_owned())));
    for name in by_shared_words(server, names.iter().map(|&n| (n, n.to_owned()))) {
        if !suggestions.contains(&name) {
            suggestions.push(name);
        }
    }
    suggestions.truncate(MAX_SUGGESTIONS);
    suggestions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::RuleSet;
    use rmcp::model::Tool;
    use std::sync::Arc;

    fn catalog() -> IndexedCatalog {
        let schema = Arc::new(serde_json::Map::new());
        let mut catalog = IndexedCatalog::default();
        let tools = |names: &[&str]| {
            names
                .iter()
                .map(|n| Tool::new((*n).to_owned(), "", schema.clone()))
                .collect::<Vec<_>>()
        };
        catalog.set_server_tools(
            "github",
            tools(&["create_issue", "list_issues", "get_repo"]),
            &RuleSet::default(),
        );
        catalog.set_server_tools("jira", tools(&["create_ticket"]), &RuleSet::default());
        catalog
    }

    #[test]
    fn distances() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn typo_suggests_the_near_name_first() {
        let s = suggest_tools(&catalog(), None, "github", "create_isue");
        assert_eq!(s[0], "github:create_issue");
    }

    #[test]
    fn shared_words_reach_other_servers() {
        let s = suggest_tools(&catalog(), None, "github", "create_ticket_now");
        assert!(s.contains(&"jira:create_ticket".to_owned()), "{s:?}");
    }

    #[test]
    fn meaning_finds_tools_no_spelling_reaches() {
        let mut catalog = catalog();
        let schema = Arc::new(serde_json::Map::new());
        catalog.set_server_tools(
            "weather",
            vec![Tool::new(
                "get_forecast",
                "Weather forecast and temperature for a city",
                schema,
            )],
            &RuleSet::default(),
        );
        let s = suggest_tools(&catalog, None, "weather", "current_temperature");
        assert_eq!(s, ["weather:get_forecast"]);
        let s = suggest_tools(&catalog, None, "jira", "discard_ticket");
        assert_eq!(s[0], "jira:create_ticket");
    }

    #[test]
    fn a_name_longer_than_any_tool_name_gets_no_suggestion_and_costs_no_comparison() {
        // It contains `create_issue`, which would suggest it; 100,000 bytes is no typo.
        let huge = format!("create_issue{}", "x".repeat(100_000));
        assert!(suggest_tools(&catalog(), None, "github", &huge).is_empty());
        assert!(suggest_servers(["github", "jira"].into_iter(), &format!("github{huge}")).is_empty());
        assert_eq!(
            suggest_tools(&catalog(), None, "github", "create_issue_x")[0],
            "github:create_issue"
        );
    }

    #[test]
    fn no_suggestion_for_unrelated_names() {
        assert!(suggest_tools(&catalog(), None, "github", "zzzzqqqqxxxx").is_empty());
    }

    #[test]
    fn servers_by_spelling() {
        assert_eq!(suggest_servers(["github", "jira"].into_iter(), "githb"), ["github"]);
        assert!(suggest_servers(["github"].into_iter(), "zzzzzzzz").is_empty());
        assert_eq!(
            suggest_servers(["mcp-github", "jira"].into_iter(), "github-enterprise"),
            ["mcp-github"]
        );
    }
}
