//! Docker MCP Toolkit: `~/.docker/mcp-servers.json` (DESIGN §3), `mcpServers`.

use std::path::PathBuf;

use crate::config::locate::Environment;

pub(super) fn default_paths(env: &Environment) -> Vec<PathBuf> {
    env.home
        .iter()
        .map(|h| h.join(".docker").join("mcp-servers.json"))
        .collect()
}
