//! Windsurf: `~/.codeium/windsurf/mcp_config.json`; `mcpServers`, remote ones as `serverUrl`.

use std::path::PathBuf;

use crate::config::locate::Environment;

pub(super) fn default_paths(env: &Environment) -> Vec<PathBuf> {
    env.home
        .iter()
        .map(|h| h.join(".codeium").join("windsurf").join("mcp_config.json"))
        .collect()
}
