//! Search over the catalog: ranking, relevance, and "did you mean" suggestions.
//!
//! The pieces: [`tokenize`] turns text into terms (split identifiers, stop words, stems),
//! [`query`] turns a request into weighted terms (paths and URLs as hints, agent nouns,
//! [`synonyms`] from a small thesaurus), [`index`] holds the BM25F inverted index,
//! [`IndexedCatalog`] keeps it beside the catalog and up to date per server, and [`suggest`]
//! answers "did you mean".
//! This module decides what a score means:
//!
//! - An exact tool name (`tool`, `server:tool`, `server.tool`, `server__tool`, `server/tool`;
//!   case-insensitive) ranks first with relevance 1, always.
//! - Every other hit is ranked by its BM25F sum over the query's terms, raised by up to
//!   [`NAME_BOOST`] for the share of the tool's name the query covers ("read file" prefers
//!   `read_file` to `read_file_metadata_history`) and scaled by the square root of the
//!   idf-weighted share of the query's words the tool has: a soft AND, so a tool matching three
//!   words of a request beats one matching a single word very well, yet one strong word counts.
//! - Relevance is that score over the score of a tool that would match every query word fully
//!   (once in its name and once in its description, see [`index::Index::reference_weight`]):
//!   the share of the request a tool explains, comparable across queries, below 1.
//! - No-match threshold: when the best hit's relevance is under [`MIN_RELEVANCE`] the query
//!   matched nothing useful and the result is empty (the engine adds a hint). Hits under
//!   [`RELATIVE_FLOOR`] of the best hit are dropped, so answers do not trail off into noise.
//! - Ties break by server then name: the same query always gives the same order.

mod deprecated;
mod fused;
pub mod index;
mod indexed;
pub mod query;
pub mod semantic;
mod suggest;
pub mod synonyms;
pub mod tokenize;
mod view;

use std::cmp::Ordering;

use crate::catalog::{Catalog, ToolEntry};
use index::{Candidate, DocRef, Filter, Index};

pub use deprecated::{deprecation_note, is_deprecated};
pub use fused::{search_fused, Fused};
pub use indexed::IndexedCatalog;
pub use suggest::{edit_distance, suggest_servers, suggest_tools};
pub use view::View;

/// Longest query searched, in characters; the engine cuts longer queries here.
pub const MAX_QUERY_CHARS: usize = 1_000;
/// How much a name fully covered by the query raises a score (×(1 + `NAME_BOOST`)).
pub const NAME_BOOST: f32 = 0.5;

/// No-match threshold: a query whose best hit explains less than 1% of it (relevance that
/// would print as `0.00`) matches nothing useful and gets no results.
pub const MIN_RELEVANCE: f64 = 0.01;
/// Hits scoring below this share of the best hit are noise next to it and are dropped, so a
/// specific query returns a few strong hits rather than ten with a long weak tail.
pub const RELATIVE_FLOOR: f32 = 0.2;
/// Relevance ceiling for anything but an exact name.
const MAX_RANKED_RELEVANCE: f64 = 0.99;

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
    /// The caller's view (`None`: the local user's).
    pub view: Option<&'q View>,
}

impl<'q> Query<'q> {
    /// `text` over every server's enabled tools, top 10 (what `search_tools` does by default).
    #[must_use]
    pub fn new(text: &'q str) -> Self {
        Self {
            text,
            server: None,
            limit: 10,
            include_disabled: false,
            view: None,
        }
    }
}

/// Rank the catalog for `query`: exact names first, then ranked hits above [`MIN_RELEVANCE`].
#[must_use]
pub fn search<'a>(catalog: &'a IndexedCatalog, query: &Query<'_>) -> Vec<Hit<'a>> {
    let Opening {
        filter,
        text,
        exact,
        mut hits,
    } = open(catalog, query);
    let room = query.limit - hits.len();
    if room == 0 {
        return hits;
    }
    // A few more than needed: a deprecated hit moved down lets the next one in.
    let wanted = room + exact.len() + DEPRECATION_LOOKAHEAD;
    let mut ranked: Vec<Hit<'a>> = rank(catalog.index(), text, filter, wanted)
        .into_iter()
        .filter(|(doc, _)| !exact.contains(&(doc.server, doc.name, doc.position)))
        .filter_map(|(doc, relevance)| {
            resolve(catalog, doc.server, doc.name, doc.position).map(|entry| Hit { entry, relevance })
        })
        .collect();
    demote_deprecated(&mut ranked);
    ranked.truncate(room);
    hits.extend(ranked);
    hits
}

/// What every search starts with (lexical or fused): the filter, the trimmed text, and the
/// tools it names exactly, first with relevance 1 and cut to the limit.
struct Opening<'a, 'q> {
    filter: Filter<'q>,
    text: &'q str,
    /// The exact names as `(server, name, position)`, for leaving them out of ranked hits.
    exact: Vec<(&'a str, &'a str, usize)>,
    hits: Vec<Hit<'a>>,
}

fn open<'a, 'q>(catalog: &'a IndexedCatalog, query: &Query<'q>) -> Opening<'a, 'q> {
    let filter = Filter {
        server: query.server,
        include_disabled: query.include_disabled,
        view: query.view,
    };
    let text = query.text.trim();
    let exact = exact_matches(catalog.index(), text, filter);
    let mut hits: Vec<Hit<'a>> = exact
        .iter()
        .filter_map(|&(server, name, position)| resolve(catalog, server, name, position))
        .map(|entry| Hit { entry, relevance: 1.0 })
        .collect();
    hits.truncate(query.limit);
    Opening {
        filter,
        text,
        exact,
        hits,
    }
}

/// Hits ranked beyond the limit that a deprecated hit's demotion may bring in.
pub(crate) const DEPRECATION_LOOKAHEAD: usize = 5;
/// A deprecated tool's relevance is multiplied by this: it ranks below a live tool that
/// matches at least half as well (a replacement rarely matches the words better than the
/// tool it replaces, whose name is often the shorter, more literal one).
pub const DEPRECATED_FACTOR: f64 = 0.5;

/// Scale deprecated hits' relevance by [`DEPRECATED_FACTOR`] and restore the order (relevance,
/// then server and name). Hits without a deprecated tool keep their order exactly.
fn demote_deprecated(hits: &mut [Hit<'_>]) {
    let mut changed = false;
    for hit in hits.iter_mut() {
        if is_deprecated(hit.entry.description()) {
            hit.relevance *= DEPRECATED_FACTOR;
            changed = true;
        }
    }
    if changed {
        hits.sort_by(|a, b| {
            b.relevance
                .total_cmp(&a.relevance)
                .then_with(|| a.entry.server.cmp(&b.entry.server))
                .then_with(|| a.entry.name().cmp(b.entry.name()))
        });
    }
}

/// Ranked documents for `text` with their relevance, best first, at most `limit`, none
/// below [`MIN_RELEVANCE`].
fn rank<'i>(index: &'i Index, text: &str, filter: Filter<'_>, limit: usize) -> Vec<(DocRef<'i>, f64)> {
    rank_with(index, text, filter, limit, RELATIVE_FLOOR)
}

/// [`rank`] with the share of the best score under which hits are dropped (`floor`).
fn rank_with<'i>(index: &'i Index, text: &str, filter: Filter<'_>, limit: usize, floor: f32) -> Vec<(DocRef<'i>, f64)> {
    let parsed = query::parse(index, text);
    if parsed.terms.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(f32, Candidate)> = index
        .score(&parsed.terms, filter)
        .into_iter()
        .map(|s| {
            // A square root, not `powf`: this runs for every candidate, thousands at 10k tools.
            let coverage = (s.matched / parsed.idf_total).min(1.0).sqrt();
            (s.bm25 * (1.0 + NAME_BOOST * s.name_coverage) * coverage, s)
        })
        .collect();
    // Hits under a fifth of the best are dropped anyway: drop them before sorting.
    let top = scored.iter().map(|&(score, _)| score).fold(0.0, f32::max);
    scored.retain(|&(score, _)| score >= top * floor);
    // Equal scores are rare; only then are the documents' names read.
    let order = |a: &(f32, Candidate), b: &(f32, Candidate)| -> Ordering {
        b.0.total_cmp(&a.0)
            .then_with(|| index.doc_ref(a.1.slot).cmp(&index.doc_ref(b.1.slot)))
    };
    if scored.len() > limit && limit > 0 {
        scored.select_nth_unstable_by(limit - 1, order);
        scored.truncate(limit);
    }
    scored.sort_unstable_by(order);
    let best = f64::from(parsed.idf_total * Index::reference_weight() * (1.0 + NAME_BOOST));
    scored
        .into_iter()
        .map(|(score, c)| {
            (
                index.doc_ref(c.slot),
                (f64::from(score) / best).min(MAX_RANKED_RELEVANCE),
            )
        })
        .take_while(|&(_, relevance)| relevance >= MIN_RELEVANCE)
        .collect()
}

/// Tools `text` names exactly, alone or qualified by server, ordered by server then name.
///
/// A tool whose own name reads as another server's qualified name (server `aaa`'s tool
/// literally named `everything:echo`) is not an exact match for that text: the text names
/// server `everything`'s tool, and only the real owner is honoured.
fn exact_matches<'i>(index: &'i Index, text: &str, filter: Filter<'_>) -> Vec<(&'i str, &'i str, usize)> {
    let mut found = index.named(text, filter);
    if !found.is_empty() {
        found.retain(|&(owner, _, _)| !claims_other_server(index, text, owner));
    }
    for sep in crate::trust::SEPARATORS {
        for (at, _) in text.match_indices(sep) {
            let (server, name) = (&text[..at], &text[at + sep.len()..]);
            if name.is_empty() || !index.has_server(server) || filter.server.is_some_and(|s| s != server) {
                continue;
            }
            let only_server = Filter {
                server: Some(server),
                ..filter
            };
            found.extend(index.named(name, only_server));
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}

/// Whether `name`, a tool name of server `owner`, starts with another indexed server's name
/// and a separator (a shadowing name).
fn claims_other_server(index: &Index, name: &str, owner: &str) -> bool {
    crate::trust::SEPARATORS.iter().any(|sep| {
        name.match_indices(sep)
            .any(|(at, _)| &name[..at] != owner && index.has_server(&name[..at]))
    })
}

fn resolve<'a>(catalog: &'a Catalog, server: &str, name: &str, position: usize) -> Option<&'a ToolEntry> {
    catalog
        .server_tools(server)?
        .get(position)
        .filter(|entry| entry.name() == name)
}

/// Whether `text` names this tool exactly, alone or qualified by its server
/// (case-insensitive on the tool name, like the search).
#[must_use]
pub fn is_exact_name(entry: &ToolEntry, text: &str) -> bool {
    let same = |candidate: &str| candidate.to_lowercase() == entry.name().to_lowercase();
    same(text)
        || [":", ".", "__", "/"].iter().any(|sep| {
            text.strip_prefix(entry.server.as_str())
                .and_then(|rest| rest.strip_prefix(sep))
                .is_some_and(same)
        })
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

    fn tool_with_params(name: &str, description: &str, params: &serde_json::Value) -> Tool {
        let schema = json!({ "type": "object", "properties": params })
            .as_object()
            .unwrap()
            .clone();
        Tool::new(name.to_owned(), description.to_owned(), Arc::new(schema))
    }

    fn catalog() -> IndexedCatalog {
        let mut catalog = IndexedCatalog::default();
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
                tool("write_file", "Create a new file or overwrite an existing one"),
                tool("delete_file", "Delete a file from disk"),
                tool_with_params(
                    "move_file",
                    "Move or rename files and directories",
                    &json!({ "source": { "description": "Path to move from" }, "destination": {} }),
                ),
            ],
            &rules,
        );
        catalog.set_server_tools(
            "weather",
            vec![
                tool("get_forecast", "Get the weather forecast for a city"),
                tool("get_alerts", "Weather alerts for a US state"),
            ],
            &rules,
        );
        catalog
    }

    fn query(text: &str) -> Query<'_> {
        Query::new(text)
    }

    fn ids(hits: &[Hit<'_>]) -> Vec<String> {
        hits.iter().map(|h| h.entry.id()).collect()
    }

    fn top(catalog: &IndexedCatalog, text: &str) -> String {
        search(catalog, &query(text))
            .first()
            .map_or_else(|| "<none>".to_owned(), |h| h.entry.id())
    }

    #[test]
    fn exact_name_is_first_with_full_relevance() {
        let catalog = catalog();
        for text in [
            "echo",
            "everything:echo",
            "everything.echo",
            "everything__echo",
            "everything/echo",
            "ECHO",
        ] {
            let hits = search(&catalog, &query(text));
            assert_eq!(hits[0].entry.id(), "everything:echo", "{text}");
            assert!((hits[0].relevance - 1.0).abs() < f64::EPSILON);
            assert!(hits[1..].iter().all(|h| h.relevance < 1.0), "{text}");
        }
    }

    #[test]
    fn a_tool_named_like_another_servers_tool_cannot_take_its_exact_name() {
        let mut catalog = catalog();
        let rules = RuleSet::default();
        for sep in [":", ".", "__", "/"] {
            let shadow = format!("everything{sep}echo");
            catalog.set_server_tools("aaa", vec![tool(&shadow, "Echoes back the input string")], &rules);
            let hits = search(&catalog, &query(&shadow));
            assert_eq!(hits[0].entry.id(), "everything:echo", "{shadow}");
            assert!(hits[1..].iter().all(|h| h.relevance < 1.0), "{shadow}");
            // Asked for on its own server, the shadow is that server's tool, not exact for another.
            let mut own = query(&shadow);
            own.server = Some("aaa");
            assert!(search(&catalog, &own).iter().all(|h| h.relevance < 1.0), "{shadow}");
        }
        // A dotted name under the server's own name stays exact.
        catalog.set_server_tools("mchs", vec![tool("mchs.calculate", "Calculates")], &rules);
        assert_eq!(top(&catalog, "mchs.calculate"), "mchs:mchs.calculate");
        // With no server of that name, the owner's literal name is exact.
        catalog.set_server_tools("aaa", vec![tool("nobody:echo", "Echo")], &rules);
        let hits = search(&catalog, &query("nobody:echo"));
        assert_eq!(
            (hits[0].entry.id().as_str(), hits[0].relevance),
            ("aaa:nobody:echo", 1.0)
        );
    }

    #[test]
    fn qualified_exact_name_on_another_server_is_not_exact() {
        let catalog = catalog();
        let hits = search(&catalog, &query("filesystem:echo"));
        assert!(hits.iter().all(|h| h.relevance < 1.0));
    }

    #[test]
    fn description_words_find_tools() {
        let catalog = catalog();
        assert_eq!(top(&catalog, "read file contents"), "filesystem:read_text_file");
        assert_eq!(top(&catalog, "weather forecast for Paris"), "weather:get_forecast");
    }

    #[test]
    fn synonyms_bridge_verbs() {
        let catalog = catalog();
        assert_eq!(top(&catalog, "remove a file"), "filesystem:delete_file");
        assert_eq!(top(&catalog, "fetch the forecast"), "weather:get_forecast");
    }

    #[test]
    fn a_synonym_counts_less_than_the_word_itself() {
        let catalog = catalog();
        let hits = search(&catalog, &query("delete file"));
        let delete = hits.iter().find(|h| h.entry.name() == "delete_file").unwrap();
        let via_synonym = search(&catalog, &query("remove file"));
        let remove = via_synonym.iter().find(|h| h.entry.name() == "delete_file").unwrap();
        assert!(
            delete.relevance > remove.relevance,
            "{} vs {}",
            delete.relevance,
            remove.relevance
        );
    }

    #[test]
    fn parameter_descriptions_are_searched() {
        let catalog = catalog();
        assert_eq!(top(&catalog, "destination path"), "filesystem:move_file");
    }

    #[test]
    fn same_query_same_order() {
        let catalog = catalog();
        for text in ["file", "echo twice", "get weather"] {
            assert_eq!(
                ids(&search(&catalog, &query(text))),
                ids(&search(&catalog, &query(text)))
            );
        }
    }

    #[test]
    fn ties_break_by_server_then_name() {
        let mut catalog = IndexedCatalog::default();
        let rules = RuleSet::default();
        for server in ["zeta", "alpha", "mid"] {
            catalog.set_server_tools(server, vec![tool("b_probe", "probe"), tool("a_probe", "probe")], &rules);
        }
        assert_eq!(
            ids(&search(&catalog, &query("probe"))),
            [
                "alpha:a_probe",
                "alpha:b_probe",
                "mid:a_probe",
                "mid:b_probe",
                "zeta:a_probe",
                "zeta:b_probe"
            ]
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
        let mut q = query("everything:echo");
        q.server = Some("filesystem");
        assert!(search(&catalog, &q).iter().all(|h| h.entry.server == "filesystem"));
    }

    #[test]
    fn nonsense_empty_and_stop_word_queries_find_nothing() {
        let catalog = catalog();
        for text in ["zzzqqq", "", "  !!! ", "the of and to", "what is it"] {
            assert!(search(&catalog, &query(text)).is_empty(), "{text:?}");
        }
    }

    #[test]
    fn unicode_and_cjk_queries_do_not_crash() {
        let mut catalog = catalog();
        catalog.set_server_tools(
            "bing-cn",
            vec![tool("bing_search", "使用必应搜索指定的关键词，并返回搜索结果列表")],
            &RuleSet::default(),
        );
        assert_eq!(top(&catalog, "必应搜索"), "bing-cn:bing_search");
        for text in ["Ünïcode 🚀 émoji", "ß", "🚀🚀🚀", "\u{200b}\u{0301}"] {
            let _ = search(&catalog, &query(text));
        }
    }

    #[test]
    fn very_long_query_is_bounded_not_a_crash() {
        let catalog = catalog();
        let long = "read a file and then ".repeat(400);
        assert_eq!(top(&catalog, &long), "filesystem:read_text_file");
        let many = (0..2_000).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
        assert!(search(&catalog, &query(&many)).is_empty());
    }

    #[test]
    fn relevance_stays_in_unit_range() {
        let catalog = catalog();
        for text in [
            "echo echo echo",
            "file file",
            "add numbers",
            "ECHO",
            "get weather forecast city",
        ] {
            for hit in search(&catalog, &query(text)) {
                assert!((0.0..=1.0).contains(&hit.relevance), "{text}: {}", hit.relevance);
            }
        }
    }

    #[test]
    fn a_fuller_match_is_more_relevant_across_queries() {
        let catalog = catalog();
        let full = search(&catalog, &query("weather forecast"))[0].relevance;
        let partial = search(&catalog, &query("weather forecast spreadsheet pivot"))[0].relevance;
        assert!(full > partial, "{full} vs {partial}");
    }

    #[test]
    fn names_covered_by_the_query_win() {
        let catalog = catalog();
        assert_eq!(top(&catalog, "echo"), "everything:echo");
        assert_eq!(top(&catalog, "echo twice"), "everything:echo_twice");
    }

    #[test]
    fn replacing_a_server_updates_the_index() {
        let mut catalog = catalog();
        catalog.set_server_tools("weather", vec![tool("get_tides", "Tide tables")], &RuleSet::default());
        assert_eq!(top(&catalog, "tide"), "weather:get_tides");
        assert_eq!(top(&catalog, "alerts"), "<none>");
        assert_eq!(top(&catalog, "read file"), "filesystem:read_text_file");
        catalog.remove_server("weather");
        assert_eq!(top(&catalog, "tide"), "<none>");
    }
}
