//! `get_tool_details`: a tool's full description and input schema.

use rmcp::model::Tool;
use serde::Deserialize;
use serde_json::json;

use crate::caller::Caller;
use crate::engine::{Engine, ToolDetails};
use crate::error::Result;

pub const NAME: &str = "get_tool_details";

pub fn definition() -> Tool {
    super::tool(
        NAME,
        "Get a tool's description and input schema. Read before execute_tool.",
        json!({
            "type": "object",
            "properties": {
                "server": { "type": "string" },
                "tool": { "type": "string" }
            },
            "required": ["server", "tool"]
        }),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetToolDetails {
    server: String,
    tool: String,
}

impl GetToolDetails {
    pub async fn apply(self, engine: &Engine, caller: &Caller) -> Result<ToolDetails> {
        engine.tool_details(caller, &self.server, &self.tool).await
    }
}
