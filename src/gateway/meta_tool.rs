//! Dispatch: tool name + arguments → one `MetaTool`, like mini-redis `Command::from_frame`.

use std::sync::LazyLock;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use rmcp::service::RequestContext;
use rmcp::ErrorData;
use rmcp::RoleServer;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::bound::{bound_strings, cut_text, FIELD_BYTES};
use super::tools::{execute_tool, get_tool_details, list_mcp_servers, list_tools, search_tools};
use crate::caller::Caller;
use crate::engine::Engine;
use crate::error::Error;

/// How much of an unknown tool name is quoted back.
const NAME_BYTES: usize = 128;
/// How much of serde's description of a bad argument is kept (it quotes the value).
const PROBLEM_BYTES: usize = 512;

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

/// Why a `tools/call` did not become a `MetaTool`.
#[derive(Debug)]
pub enum Rejected {
    /// No meta-tool has that name: JSON-RPC invalid params (-32602), as the spec says for an
    /// unknown tool.
    UnknownTool(ErrorData),
    /// The arguments do not fit the tool: an `isError` result the model can correct itself
    /// from (SEP-1303, MCP 2025-11-25).
    InvalidArguments(Error),
}

impl MetaTool {
    /// Parse a call.
    ///
    /// # Errors
    /// An unknown tool name, or arguments that do not fit its schema (naming the field).
    pub fn parse(name: &str, arguments: Option<JsonObject>) -> Result<Self, Rejected> {
        let arguments = Value::Object(arguments.unwrap_or_default());
        let parsed = match name {
            list_mcp_servers::NAME => parse_args(name, arguments).map(Self::ListServers),
            search_tools::NAME => parse_args(name, arguments).map(Self::Search),
            list_tools::NAME => parse_args(name, arguments).map(Self::ListTools),
            get_tool_details::NAME => parse_args(name, arguments).map(Self::Details),
            execute_tool::NAME => parse_args(name, arguments).map(Self::Execute),
            unknown => {
                let known: Vec<&str> = definitions().iter().map(|t| t.name.as_ref()).collect();
                return Err(Rejected::UnknownTool(ErrorData::invalid_params(
                    format!(
                        "unknown tool `{}`; this gateway has: {}",
                        cut_text(unknown, NAME_BYTES),
                        known.join(", ")
                    ),
                    None,
                )));
            }
        };
        parsed.map_err(Rejected::InvalidArguments)
    }

    /// Run against the engine for the request's caller (the HTTP face's authenticated user,
    /// or the local user on stdio). Engine errors become `isError` results.
    pub async fn apply(self, engine: &Engine, context: &RequestContext<RoleServer>) -> CallToolResult {
        let caller = Caller::of_request(&context.extensions);
        let outcome = match self {
            Self::ListServers(call) => Ok(json_result(&call.apply(engine, &caller).await)),
            Self::Search(call) => call.apply(engine, &caller).await.map(|r| json_result(&r)),
            Self::ListTools(call) => call.apply(engine, &caller).await.map(|r| json_result(&r)),
            Self::Details(call) => call.apply(engine, &caller).await.map(|r| json_result(&r)),
            Self::Execute(call) => call.apply(engine, &caller, context).await,
        };
        outcome.unwrap_or_else(|error| {
            // `list_tools` of a per-user server nobody has listed yet: the caller's link.
            let origin = super::sign_in::SignInOrigin::of_request(&context.extensions);
            error_result(&super::sign_in::with_origin(error, origin.as_deref()))
        })
    }
}

/// Deserialize arguments, naming the offending field on failure.
fn parse_args<T: DeserializeOwned>(tool: &str, arguments: Value) -> Result<T, Error> {
    serde_path_to_error::deserialize(arguments).map_err(|e| {
        let path = e.path().to_string();
        let problem = plain_types(&e.inner().to_string());
        let problem = cut_text(&problem, PROBLEM_BYTES);
        Error::validation(if path == "." {
            format!("{tool}: {problem}")
        } else {
            format!("{tool}: `{path}`: {problem}")
        })
    })
}

/// serde's Rust type names in the words of the JSON schema the model read.
fn plain_types(problem: &str) -> String {
    problem
        .replace("expected usize", "expected a non-negative integer")
        .replace("expected u64", "expected a non-negative integer")
        .replace("expected a map", "expected an object")
}

/// A compact JSON text result, every text field bounded (downstream text such as a tool
/// description or a server's stderr reaches the model through these).
pub(super) fn json_result<T: Serialize>(value: &T) -> CallToolResult {
    let mut value = serde_json::to_value(value).expect("result types serialize: plain structs of strings and numbers");
    bound_strings(&mut value, FIELD_BYTES);
    CallToolResult::success(vec![ContentBlock::text(value.to_string())])
}

/// The compact body the model reads for an error:
/// `{"error":{"code":…,"message":…,"server":…,"tool":…,"suggestions":[…]}}`.
fn error_body(error: &Error) -> Value {
    let mut body = Map::new();
    body.insert("code".into(), json!(error.code().as_str()));
    body.insert("message".into(), json!(error.to_string()));
    let (server, tool) = error.subject();
    if let Some(server) = server {
        body.insert("server".into(), json!(server));
    }
    if let Some(tool) = tool {
        body.insert("tool".into(), json!(tool));
    }
    if let Error::RateLimited { retry_after, .. } = error {
        body.insert(
            "retryAfterMs".into(),
            json!(u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX)),
        );
    }
    if !error.suggestions().is_empty() {
        body.insert("suggestions".into(), json!(error.suggestions()));
    }
    json!({ "error": body })
}

/// An error the model can act on, every text field bounded.
pub(super) fn error_result(error: &Error) -> CallToolResult {
    let mut body = error_body(error);
    bound_strings(&mut body, FIELD_BYTES);
    CallToolResult::error(vec![ContentBlock::text(body.to_string())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_not_found_renders_compact_body_with_suggestions() {
        let err = Error::ToolNotFound {
            server: "github".into(),
            tool: "create_isue".into(),
            suggestions: vec!["github:create_issue".into()],
        };
        assert_eq!(
            error_body(&err).to_string(),
            r#"{"error":{"code":"TOOL_NOT_FOUND","message":"server `github` has no tool named `create_isue`","server":"github","tool":"create_isue","suggestions":["github:create_issue"]}}"#
        );
    }
}
