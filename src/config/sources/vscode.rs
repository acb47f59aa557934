//! VS Code: the workspace's `.vscode/mcp.json` (`servers`, with `inputs` prompts it alone can
//! show), then the user's `mcp.json` and `settings.json` (`mcp.servers`) in
//! `<config dir>/Code/User`.

use std::path::PathBuf;

use serde_json::Value;

use crate::config::locate::Environment;

pub(super) fn default_paths(env: &Environment) -> Vec<PathBuf> {
    let user = env.config_dir.iter().map(|d| d.join("Code").join("User"));
    std::iter::once(env.cwd.join(".vscode").join("mcp.json"))
        .chain(user.flat_map(|u| [u.join("mcp.json"), u.join("settings.json")]))
        .collect()
}

/// `servers` (mcp.json) or `mcp.servers` (settings.json, nested or as a dotted key).
pub(super) fn entries(document: &Value) -> Vec<(String, Value)> {
    let servers = document
        .get("servers")
        .or_else(|| document.get("mcp").and_then(|m| m.get("servers")))
        .or_else(|| document.get("mcp.servers"));
    super::named_entries(servers)
}
