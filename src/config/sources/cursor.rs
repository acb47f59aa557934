//! Cursor: the project's `.cursor/mcp.json`, then `~/.cursor/mcp.json`; `mcpServers`.

use std::path::PathBuf;

use crate::config::locate::Environment;

pub(super) fn default_paths(env: &Environment) -> Vec<PathBuf> {
    std::iter::once(env.cwd.join(".cursor").join("mcp.json"))
        .chain(env.home.iter().map(|h| h.join(".cursor").join("mcp.json")))
        .collect()
}
