//! Claude Code: the project's `.mcp.json` (`mcpServers`), then `~/.claude.json`, whose
//! `projects.<project folder>.mcpServers` (local scope) come before its top-level `mcpServers`
//! (user scope), as Claude Code itself ranks them.

use std::path::PathBuf;

use serde_json::Value;

use crate::config::locate::Environment;

pub(super) fn default_paths(env: &Environment) -> Vec<PathBuf> {
    std::iter::once(env.cwd.join(".mcp.json"))
        .chain(env.home.iter().map(|h| h.join(".claude.json")))
        .collect()
}

pub(super) fn entries(document: &Value, env: &Environment) -> Vec<(String, Value)> {
    let project = document
        .get("projects")
        .and_then(|projects| projects.get(env.cwd.to_str().unwrap_or_default()))
        .and_then(|p| p.get("mcpServers"));
    let mut entries = super::named_entries(project);
    entries.extend(super::named_entries(document.get("mcpServers")));
    entries
}
