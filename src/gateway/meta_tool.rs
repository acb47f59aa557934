//! Dispatch: tool name + arguments → one `MetaTool`, like mini-redis `Command::from_frame`.

use std::sync::{Arc, LazyLock};

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use rmcp::service::RequestContext;
use rmcp::ErrorData;
use rmcp::RoleServer;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::tools::{execute_tool, get_tool_details, list_mcp_servers, list_tools, search_tools};
use crate::engine::Engine;
use crate::error::Error;

/// One parsed meta-tool call.
#[derive(Debug)]
pub enum MetaTool {
    ListServers(list_mcp_servers::ListServers),
    Search(search_tools::SearchTools),
    ListTools(list_tools::ListTools),
    Details(get_tool_details::GetToolDetails),
    Execute(execute_tool::ExecuteTool),
}

/// The five tool definitions, built once.
#[must_use]
pub fn definitions() -> &'static [Tool] {
    static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
        vec![
            list_mcp_servers::definition(),
            search_tools::definition(),
            list_tools::definition(),
            get_tool_details::definition(),
            execute_tool::definition(),
        ]
    });
    &TOOLS
}

impl MetaTool {
    /// Parse a call.
    ///
    /// # Errors
    /// An unknown tool name or malformed arguments, as JSON-RPC invalid params (-32602).
    pub fn parse(name: &str, arguments: Option<JsonObject>) -> Result<Self, ErrorData> {
        let arguments = Value::Object(arguments.unwrap_or_default());
        Ok(match name {
            list_mcp_servers::NAME => Self::ListServers(parse_args(name, arguments)?),
            search_tools::NAME => Self::Search(parse_args(name, arguments)?),
            list_tools::NAME => Self::ListTools(parse_args(name, arguments)?),
            get_tool_details::NAME => Self::Details(parse_args(name, arguments)?),
            execute_tool::NAME => Self::Execute(parse_args(name, arguments)?),
            unknown => {
                let known: Vec<&str> = definitions().iter().map(|t| t.name.as_ref()).collect();
                return Err(ErrorData::invalid_params(
                    format!("unknown tool `{unknown}`; this gateway has: {}", known.join(", ")),
                    None,
                ));
            }
        })
    }

    /// Run against the engine. Engine errors become `isError` results.
    pub async fn apply(self, engine: &Engine, context: &RequestContext<RoleServer>) -> CallToolResult {
        let outcome = match self {
            Self::ListServers(call) => Ok(json_result(&call.apply(engine).await)),
            Self::Search(call) => call.apply(engine).await.map(|r| json_result(&r)),
            Self::ListTools(call) => call.apply(engine).await.map(|r| json_result(&r)),
            Self::Details(call) => call.apply(engine).await.map(|r| json_result(&r)),
            Self::Execute(call) => call.apply(engine, context).await,
        };
        outcome.unwrap_or_else(|error| error_result(&error))
    }
}

/// Deserialize arguments, naming the offending field on failure.
fn parse_args<T: DeserializeOwned>(tool: &str, arguments: Value) -> Result<T, ErrorData> {
    serde_path_to_error::deserialize(arguments).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." {
            String::new()
        } else {
            format!(" at `{path}`")
        };
        ErrorData::invalid_params(format!("invalid arguments for `{tool}`{at}: {}", e.inner()), None)
    })
}

/// A compact JSON text result.
pub(super) fn json_result<T: Serialize>(value: &T) -> CallToolResult {
    let text = serde_json::to_string(value).expect("result types serialize: plain structs of strings and numbers");
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// An error the model can act on.
pub(super) fn error_result(error: &Error) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(error.to_json().to_string())])
}

/// A tool definition from a name, description and an input schema literal.
pub(super) fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else {
        unreachable!("meta-tool schemas are object literals")
    };
    Tool::new(name, description, Arc::new(schema))
}
