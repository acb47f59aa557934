//! `anygpt-discovery search <query>`: ranked tools, for people (seed 003 format) or as JSON.
//!
//! With `--catalog FILE` the engine indexes a JSON Lines catalog and connects to nothing;
//! otherwise it searches the configured servers (connecting them first). Exit codes: 0 with
//! results, 1 for bad arguments or a bad catalog file, 2 when nothing matches.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;

use super::{exit, output};
use crate::catalog;
use crate::engine::{Engine, SearchRequest, SearchResponse};

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What you want to do, or a tool name.
    query: String,
    /// Search a catalog file (JSON Lines, one tool a line) instead of the configured servers.
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// Only this server's tools.
    #[arg(long)]
    server: Option<String>,
    /// Most results to show.
    #[arg(long, default_value_t = crate::engine::DEFAULT_SEARCH_LIMIT)]
    limit: usize,
    /// Print the compact JSON `search_tools` answers.
    #[arg(long)]
    json: bool,
}

/// Load the catalog named by `--catalog` into an offline engine.
pub fn offline_engine(path: &std::path::Path) -> crate::Result<Engine> {
    catalog::file::load(path).map(Engine::from_catalog)
}

/// Run the search on `engine` and print it; returns the exit code.
pub async fn run(args: SearchArgs, engine: Engine) -> i32 {
    let request = SearchRequest {
        query: args.query.clone(),
        server: args.server.clone(),
        limit: Some(args.limit),
        include_disabled: false,
    };
    let outcome = engine.search(&request).await;
    engine.close().await;
    let response = match outcome {
        Ok(response) => response,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    if args.json {
        output::print(&format!(
            "{}\n",
            serde_json::to_string(&response).expect("search results serialize")
        ));
    } else {
        output::print(&human(&args.query, &response));
    }
    if response.results.is_empty() {
        exit::NOT_FOUND
    } else {
        exit::OK
    }
}

/// The seed's human format: numbered `server:tool (NN% match)`, summary, tags.
fn human(query: &str, response: &SearchResponse) -> String {
    let mut out = String::new();
    let n = response.results.len();
    if n == 0 {
        let _ = writeln!(out, "No tools found for \"{query}\".");
    } else {
        let _ = writeln!(out, "Search results for \"{query}\" ({n} found):");
    }
    for (i, hit) in response.results.iter().enumerate() {
        let _ = write!(
            out,
            "\n{}. {}:{} ({:.0}% match)\n",
            i + 1,
            hit.server,
            hit.tool,
            hit.relevance * 100.0
        );
        if !hit.summary.is_empty() {
            let _ = writeln!(out, "   {}", hit.summary);
        }
        if !hit.tags.is_empty() {
            let _ = writeln!(out, "   Tags: {}", hit.tags.join(", "));
        }
    }
    if let Some(hint) = response.hint("no tool matches; try other words") {
        let _ = write!(out, "\nhint: {hint}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::SearchResult;

    fn result(tool: &str, relevance: f64, tags: &[&str]) -> SearchResult {
        SearchResult {
            server: "github".into(),
            tool: tool.into(),
            summary: format!("{tool} summary"),
            relevance,
            tags: tags.iter().map(|&t| t.to_owned()).collect(),
            enabled: true,
        }
    }

    #[test]
    fn human_output_follows_the_seed_format() {
        let response = SearchResponse {
            results: vec![
                result("create_issue", 0.95, &["github", "issues"]),
                result("update_issue", 0.874, &[]),
            ],
            pending: None,
            query_cut: false,
            vectors_pending: None,
        };
        assert_eq!(
            human("github issue", &response),
            "Search results for \"github issue\" (2 found):\n\n\
             1. github:create_issue (95% match)\n   create_issue summary\n   Tags: github, issues\n\n\
             2. github:update_issue (87% match)\n   update_issue summary\n"
        );
    }

    #[test]
    fn no_results_say_so_with_the_hint() {
        let response = SearchResponse {
            results: vec![],
            pending: None,
            query_cut: false,
            vectors_pending: None,
        };
        assert_eq!(
            human("zzz", &response),
            "No tools found for \"zzz\".\n\nhint: no tool matches; try other words\n"
        );
    }
}
