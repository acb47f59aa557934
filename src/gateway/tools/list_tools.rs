//! `list_tools`: every tool of one server.

use rmcp::model::Tool;
use serde::Deserialize;
use serde_json::json;

use crate::caller::Caller;
use crate::engine::{Engine, ServerTools};
use crate::error::Result;

pub const NAME: &str = "list_tools";

pub fn definition() -> Tool {
    super::tool(
        NAME,
        "List one server's tools with summaries.",
        json!({
            "type": "object",
            "properties": {
                "server": { "type": "string" },
                "includeDisabled": { "type": "boolean" }
            },
            "required": ["server"]
        }),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListTools {
    server: String,
    #[serde(default)]
    include_disabled: bool,
}

impl ListTools {
    pub async fn apply(self, engine: &Engine, caller: &Caller) -> Result<ServerTools> {
        engine.list_tools(caller, &self.server, self.include_disabled).await
    }
}
