//! `execute_tool`: run a downstream tool; its result comes back unchanged.

use rmcp::model::{CallToolResult, Tool};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::engine::{Engine, ExecuteOptions};
use crate::error::Result;

pub const NAME: &str = "execute_tool";

pub fn definition() -> Tool {
    super::super::meta_tool::tool(
        NAME,
        "Run a tool. arguments must match its input schema from get_tool_details.",
        json!({
            "type": "object",
            "properties": {
                "server": { "type": "string" },
                "tool": { "type": "string" },
                "arguments": { "type": "object" }
            },
            "required": ["server", "tool"]
        }),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecuteTool {
    server: String,
    tool: String,
    #[serde(default)]
    arguments: Option<Value>,
}

impl ExecuteTool {
    pub async fn apply(self, engine: &Engine, cancel: CancellationToken) -> Result<CallToolResult> {
        let options = ExecuteOptions {
            timeout_ms: None,
            cancel: Some(cancel),
        };
        engine.execute(&self.server, &self.tool, self.arguments, options).await
    }
}
