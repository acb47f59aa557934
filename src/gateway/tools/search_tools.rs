//! `search_tools`: ranked tools for what the model wants to do.

use rmcp::model::Tool;
use serde::Deserialize;
use serde_json::json;

use crate::engine::{Engine, SearchRequest, SearchResponse};
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

impl SearchTools {
    pub async fn apply(self, engine: &Engine) -> Result<SearchResponse> {
        engine
            .search(&SearchRequest {
                query: self.query,
                server: self.server,
                limit: self.limit,
                include_disabled: false,
            })
            .await
    }
}
