//! `list_mcp_servers`: the servers behind the gateway.

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::engine::{Engine, ServerInfo};

pub const NAME: &str = "list_mcp_servers";

pub fn definition() -> Tool {
    super::tool(
        NAME,
        "List the MCP servers behind this gateway: status and tool counts.",
        json!({ "type": "object", "properties": {} }),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListServers {}

/// Said once, only when there is nothing to list: where servers come from, in one line.
pub const NO_SERVERS_HINT: &str =
    "No servers configured: add them to ./.anygpt/mcp-discovery.config.json or any MCP client's config (Claude Desktop, Cursor, VS Code, ...), then restart.";

#[derive(Debug, Serialize)]
pub struct Output {
    pub servers: Vec<ServerInfo>,
    /// The semantic search tier: `on`, `loading`, `failed` or `off` (turned off in the
    /// config); absent when no model is installed (search is lexical, as without the tier).
    #[serde(rename = "semanticSearch", skip_serializing_if = "Option::is_none")]
    pub semantic_search: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<&'static str>,
}

impl ListServers {
    pub async fn apply(self, engine: &Engine) -> Output {
        let servers = engine.list_servers().await;
        let hint = servers.is_empty().then_some(NO_SERVERS_HINT);
        Output {
            servers,
            semantic_search: Some(engine.semantic_status().0).filter(|word| word != "no-model"),
            hint,
        }
    }
}
