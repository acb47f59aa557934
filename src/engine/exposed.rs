//! The tools `discovery.expose` shows directly: which catalog entries, under which names
//! (`crate::expose`), with what definition; and the signal that the set may have changed.
//!
//! Only a tool that could run is shown: enabled by the rules, neither flagged by the
//! poisoning checks (unless trusted) nor changed since it was pinned. A tool that needs a
//! review stays behind search, where `get_tool_details` shows why.

use std::collections::HashSet;

use rmcp::model::Tool;

use super::state::State;
use super::Engine;
use crate::caller::Caller;
use crate::catalog::ToolEntry;
use crate::rules::Sight;

/// One tool shown directly.
#[derive(Debug, Clone)]
pub struct ExposedTool {
    /// The name the client calls it by.
    pub name: String,
    pub server: String,
    /// The tool's name in the catalog (what `execute_tool` takes).
    pub tool: String,
    /// Its definition under `name`: the server's description, input schema and annotations.
    pub definition: Tool,
}

impl Engine {
    /// The tools shown beside the meta-tools to `caller`, in catalog order (server name, then
    /// the server's order): only tools `caller` may run (a tool hidden from a caller by a
    /// caller rule is not shown to them, one a caller rule grants is); a tool whose name is
    /// `reserved` (the face's own tools) or taken by an earlier one is left out. Waits for the
    /// snapshots, never for a server.
    pub async fn exposed_tools(&self, reserved: &[&str], caller: &Caller) -> Vec<ExposedTool> {
        let state = self.current();
        if state.config.expose().is_empty() {
            return Vec::new();
        }
        state.indexed().await;
        exposed(&state, &reserved.iter().copied().collect(), caller)
    }

    /// Whether the config shows any tool directly.
    #[must_use]
    pub fn exposes(&self) -> bool {
        !self
            .state
            .read()
            .expect("engine state lock is never poisoned")
            .config
            .expose()
            .is_empty()
    }

    /// Changes whenever the exposed set may have changed (a server's tool list, trust marks,
    /// a reload): what the gateway watches to send `notifications/tools/list_changed`.
    #[must_use]
    pub fn watch_tools(&self) -> tokio::sync::watch::Receiver<()> {
        self.state
            .read()
            .expect("engine state lock is never poisoned")
            .tools_changed
            .subscribe()
    }
}

fn exposed(state: &State, reserved: &HashSet<&str>, caller: &Caller) -> Vec<ExposedTool> {
    let expose = state.config.expose();
    let catalog = state.read_catalog();
    let view = state.view(&catalog, caller);
    let mut servers: Vec<&str> = catalog.tools().map(|e| e.server.as_str()).collect();
    servers.dedup();
    let mut taken: HashSet<String> = HashSet::new();
    let mut shown = Vec::new();
    let candidates = servers
        .into_iter()
        .flat_map(|server| catalog.visible_tools(view.as_deref(), server));
    for (_, entry, sight) in candidates {
        if sight != Sight::Enabled || !runnable(entry) || !expose.shows(&entry.server, entry.name()) {
            continue;
        }
        let name = crate::expose::exposed_name(&entry.server, entry.name());
        if reserved.contains(name.as_str()) || !taken.insert(name.clone()) {
            tracing::warn!(tool = %entry.id(), %name, "not exposed: another exposed tool has its name");
            continue;
        }
        let mut definition = Tool::new(
            name.clone(),
            entry.description().to_owned(),
            entry.tool.input_schema.clone(),
        );
        definition.annotations.clone_from(&entry.tool.annotations);
        shown.push(ExposedTool {
            name,
            server: entry.server.clone(),
            tool: entry.name().to_owned(),
            definition,
        });
    }
    shown
}

/// Whether `entry` would run today, its rules aside (the caller's sight decides those; see
/// the module docs).
fn runnable(entry: &ToolEntry) -> bool {
    (entry.warnings.is_empty() || entry.approved) && entry.change.is_none()
}
