//! `list_mcp_servers`: the servers behind the gateway.

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::caller::Caller;
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
    /// The tools `discovery.expose` shows beside the five, and their context cost.
    #[serde(rename = "exposedTools", skip_serializing_if = "Option::is_none")]
    pub exposed_tools: Option<crate::gateway::exposed::ExposedCost>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// Project files named in the hint, at most (the rest are counted).
const SKIPPED_SHOWN: usize = 3;
/// A path in the hint is cut to this many characters.
const PATH_CHARS: usize = 120;

/// Project configs passed over for want of approval, in one bounded line: the model cannot
/// approve them (only the user can), but it can tell the user why a server is missing. Files
/// are named relative to the starting folder: the folder's own name is the repository's
/// author's to choose, and has no business in the model's context.
fn skipped_hint(skipped: &[crate::consent::Skipped], env: &crate::config::Environment) -> Option<String> {
    if skipped.is_empty() {
        return None;
    }
    let mut named: Vec<String> = skipped
        .iter()
        .take(SKIPPED_SHOWN)
        .map(|s| crate::gateway::bound::cut_text(&s.place.short(env), PATH_CHARS).into_owned())
        .collect();
    if skipped.len() > SKIPPED_SHOWN {
        named.push(format!("{} more", skipped.len() - SKIPPED_SHOWN));
    }
    Some(format!(
        "Project configs not approved, so not used: {}. The user approves one with `anygpt-discovery allow <file>` in the project folder.",
        named.join(", ")
    ))
}

impl ListServers {
    pub async fn apply(self, engine: &Engine, caller: &Caller) -> Output {
        let servers = engine.list_servers(caller).await;
        // Only the local user can approve a project config; its files are none of a remote
        // caller's business.
        let skipped = if caller.is_local() {
            engine.skipped()
        } else {
            Vec::new()
        };
        let hint = skipped_hint(&skipped, &crate::config::Environment::current())
            .or_else(|| servers.is_empty().then(|| NO_SERVERS_HINT.to_owned()));
        Output {
            servers,
            semantic_search: Some(engine.semantic_status().0).filter(|word| word != "no-model"),
            exposed_tools: crate::gateway::exposed::cost(engine, caller).await,
            hint,
        }
    }
}
