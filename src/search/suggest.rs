//! "Did you mean": near names by edit distance, then names sharing words with the query.

use crate::catalog::Catalog;

use super::tokenize;

const MAX_SUGGESTIONS: usize = 3;

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

/// Rank candidate names for `wanted`: close spellings first, then shared words.
fn rank<'a>(wanted: &str, candidates: impl Iterator<Item = (&'a str, String)>) -> Vec<String> {
    let wanted_lower = wanted.to_lowercase();
    let wanted_words = tokenize(wanted);
    let budget = (wanted_lower.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, String)> = candidates
        .filter_map(|(name, label)| {
            let lower = name.to_lowercase();
            let distance = edit_distance(&wanted_lower, &lower);
            let shared = tokenize(name).iter().filter(|w| wanted_words.contains(w)).count();
            let contains = lower.contains(&wanted_lower) || wanted_lower.contains(&lower);
            if distance <= budget || contains {
                Some((distance, label))
            } else if shared > 0 {
                Some((100 - shared.min(50), label))
            } else {
                None
            }
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, label)| label)
        .collect()
}

/// Tools whose names are close to `tool`, as `server:tool`; those of `server` come first.
#[must_use]
pub fn suggest_tools(catalog: &Catalog, server: &str, tool: &str) -> Vec<String> {
    let own = rank(
        tool,
        catalog
            .server_tools(server)
            .unwrap_or_default()
            .iter()
            .map(|e| (e.name(), e.id())),
    );
    if own.len() >= MAX_SUGGESTIONS {
        return own;
    }
    let others = rank(
        tool,
        catalog
            .tools()
            .filter(|e| e.server != server)
            .map(|e| (e.name(), e.id())),
    );
    own.into_iter().chain(others).take(MAX_SUGGESTIONS).collect()
}

/// Server names close to `server`.
#[must_use]
pub fn suggest_servers<'a>(names: impl Iterator<Item = &'a str>, server: &str) -> Vec<String> {
    rank(server, names.map(|n| (n, n.to_owned())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::RuleSet;
    use rmcp::model::Tool;
    use std::sync::Arc;

    fn catalog() -> Catalog {
        let schema = Arc::new(serde_json::Map::new());
        let mut catalog = Catalog::default();
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
        let s = suggest_tools(&catalog(), "github", "create_isue");
        assert_eq!(s[0], "github:create_issue");
    }

    #[test]
    fn shared_words_reach_other_servers() {
        let s = suggest_tools(&catalog(), "github", "create_ticket_now");
        assert!(s.contains(&"jira:create_ticket".to_owned()), "{s:?}");
    }

    #[test]
    fn servers_by_spelling() {
        assert_eq!(suggest_servers(["github", "jira"].into_iter(), "githb"), ["github"]);
        assert!(suggest_servers(["github"].into_iter(), "zzzzzzzz").is_empty());
    }
}
