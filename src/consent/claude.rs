//! Claude Code's own answers: `~/.claude.json` keeps, per project folder
//! (`projects.<absolute folder>`), which servers of that folder's `.mcp.json` the user enabled
//! (`enabledMcpjsonServers`, or all with `enableAllProjectMcpServers`) or disabled
//! (`disabledMcpjsonServers`). A server it enabled counts as approved; one it disabled never
//! runs, whatever else says so. The same section's `mcpServers` (Claude Code's local scope)
//! is a project place of its own (see [`super::Place`]).

use std::path::PathBuf;

use serde_json::Value;

use crate::config::locate::Environment;

/// Claude Code's file, under home.
#[must_use]
pub fn file(env: &Environment) -> Option<PathBuf> {
    env.home.as_ref().map(|h| h.join(".claude.json"))
}

/// The key of the starting folder in `projects`: as given, or with its links resolved
/// (Claude Code writes the folder as its shell saw it).
#[must_use]
pub fn project_key<'a>(document: &'a Value, env: &Environment) -> Option<(String, &'a Value)> {
    let projects = document.get("projects")?.as_object()?;
    let given = env.cwd.display().to_string();
    let real = super::real_path(&env.cwd).display().to_string();
    [given, real]
        .into_iter()
        .find_map(|key| projects.get(&key).map(|v| (key, v)))
}

/// The section name of the starting folder's local servers (`projects.<folder>`), when the
/// file has any.
#[must_use]
pub fn local_section(document: &Value, env: &Environment) -> Option<String> {
    let (key, project) = project_key(document, env)?;
    let servers = project.get("mcpServers")?.as_object()?;
    (!servers.is_empty()).then(|| format!("projects.{key}"))
}

/// The bytes a `projects.<folder>` approval hashes: only its `mcpServers` (Claude Code
/// rewrites the rest of the file, its history and counters, all the time).
#[must_use]
pub fn project_servers_bytes(file_bytes: &[u8], folder: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(file_bytes);
    let document: Value = jsonc_parser::parse_to_serde_value(&text, &jsonc_parser::ParseOptions::default())
        .ok()
        .unwrap_or(Value::Null);
    let servers = document
        .get("projects")
        .and_then(|p| p.get(folder))
        .and_then(|p| p.get("mcpServers"))
        .cloned()
        .unwrap_or(Value::Null);
    serde_json::to_vec(&servers).unwrap_or_default()
}

/// What Claude Code recorded for the starting folder's `.mcp.json` servers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    pub enabled: Vec<String>,
    pub disabled: Vec<String>,
    pub enable_all: bool,
}

impl Record {
    /// Read it; none when Claude Code has no record of this folder.
    #[must_use]
    pub fn read(env: &Environment) -> Option<Self> {
        let text = std::fs::read_to_string(file(env)?).ok()?;
        let document: Value = jsonc_parser::parse_to_serde_value(&text, &jsonc_parser::ParseOptions::default()).ok()?;
        let (_, project) = project_key(&document, env)?;
        let names = |key: &str| -> Vec<String> {
            project
                .get(key)
                .and_then(Value::as_array)
                .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default()
        };
        Some(Self {
            enabled: names("enabledMcpjsonServers"),
            disabled: names("disabledMcpjsonServers"),
            enable_all: project.get("enableAllProjectMcpServers").and_then(Value::as_bool) == Some(true),
        })
    }

    /// `Some(false)`: disabled (never runs); `Some(true)`: approved; `None`: no answer.
    #[must_use]
    pub fn decides(&self, server: &str) -> Option<bool> {
        if self.disabled.iter().any(|s| s == server) {
            Some(false)
        } else if self.enable_all || self.enabled.iter().any(|s| s == server) {
            Some(true)
        } else {
            None
        }
    }
}
