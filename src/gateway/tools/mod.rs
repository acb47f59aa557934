//! One file per meta-tool: its name, definition (description + input schema) and `apply`.
//!
//! Descriptions are short on purpose: all five together stay under the token budget
//! (400 o200k tokens, tested) and still teach the flow search → details → execute.

pub mod execute_tool;
pub mod get_tool_details;
pub mod list_mcp_servers;
pub mod list_tools;
pub mod search_tools;

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::Value;

/// A tool definition from a name, description and an input schema literal.
fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else {
        unreachable!("meta-tool schemas are object literals")
    };
    Tool::new(name, description, Arc::new(schema))
}
