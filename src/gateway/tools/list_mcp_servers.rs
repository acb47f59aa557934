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

#[derive(Debug, Serialize)]
pub struct Output {
    pub servers: Vec<ServerInfo>,
}

impl ListServers {
    pub async fn apply(self, engine: &Engine) -> Output {
        Output {
            servers: engine.list_servers().await,
        }
    }
}
