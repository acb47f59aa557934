//! `search_tools`: ranked tools for what the model wants to do.

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::caller::Caller;
use crate::engine::{Engine, SearchRequest, SearchResult};
use crate::error::Result;

pub const NAME: &str = "search_tools";

pub fn definition() -> Tool {
    super::tool(
        NAME,
        "Find tools on all servers by task or name. Start here; then get_tool_details, then execute_tool.",
        json!({
            "type": "object",
            "properties": {
                "query": { "type": "string", "description": "What you want to do, or a tool name" },
                "server": { "type": "string" },
                "limit": { "type": "integer", "description": "Default 10" }
            },
            "required": ["query"]
        }),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchTools {
    query: String,
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

/// What `search_tools` answers: the ranked tools, and a hint in the meta-tools' own words.
#[derive(Debug, Serialize)]
pub struct SearchBody {
    results: Vec<SearchResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pending: Option<usize>,
    /// Tools still waiting for their semantic vector (ranked by words alone meanwhile).
    #[serde(rename = "vectorsPending", skip_serializing_if = "Option::is_none")]
    vectors_pending: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
}

impl SearchTools {
    pub async fn apply(self, engine: &Engine, caller: &Caller) -> Result<SearchBody> {
        let response = engine
            .search(
                caller,
                &SearchRequest {
                    query: self.query,
                    server: self.server,
                    limit: self.limit,
                    include_disabled: false,
                },
            )
            .await?;
        let hint = response.hint(NO_RESULTS);
        Ok(SearchBody {
            results: response.results,
            pending: response.pending,
            vectors_pending: response.vectors_pending,
            hint,
        })
    }
}

/// With no results, the model's next steps: other words, or one server's whole list.
const NO_RESULTS: &str = "no tool matches; try other words, or list_tools for a server";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::SearchResponse;

    #[test]
    fn the_hint_speaks_of_meta_tools_and_leads_with_a_cut_query() {
        let response = |results: usize, pending: Option<usize>, query_cut: bool| SearchResponse {
            results: (0..results)
                .map(|i| SearchResult {
                    server: "s".into(),
                    tool: format!("t{i}"),
                    summary: String::new(),
                    relevance: 1.0,
                    tags: Vec::new(),
                    enabled: true,
                })
                .collect(),
            pending,
            query_cut,
            vectors_pending: None,
        };
        let hint = |r: SearchResponse| r.hint(NO_RESULTS);
        assert_eq!(hint(response(1, None, false)), None);
        assert_eq!(
            hint(response(0, None, false)).unwrap(),
            "no tool matches; try other words, or list_tools for a server"
        );
        assert_eq!(
            hint(response(1, Some(2), true)).unwrap(),
            "query cut to its first 1000 characters; 2 server(s) still starting; search again shortly for their tools"
        );
        assert_eq!(
            hint(response(1, None, true)).unwrap(),
            "query cut to its first 1000 characters"
        );
    }
}
