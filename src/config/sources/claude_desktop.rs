//! Claude Desktop: `claude_desktop_config.json`, `mcpServers`.

use std::path::PathBuf;

use crate::config::locate::Environment;

/// `<config dir>/Claude/claude_desktop_config.json`: `~/Library/Application Support` on macOS,
/// `%APPDATA%` on Windows, `$XDG_CONFIG_HOME` (or `~/.config`) on Linux.
pub(super) fn default_paths(env: &Environment) -> Vec<PathBuf> {
    env.config_dir
        .iter()
        .map(|dir| dir.join("Claude").join("claude_desktop_config.json"))
        .collect()
}
