//! The custom YAML (or JSON) list: `servers: { id: { name, description, connection, tools } }`,
//! where `connection` is written as in our own `servers`. It has no default path.
//!
//! Static `tools` (`{ name, description, inputSchema }` each, as MCP lists them) are indexed
//! before the server ever connects, like a snapshot: searchable and listable at once, and
//! replaced by the list the server reports once something connects to it.

use std::path::PathBuf;

use rmcp::model::Tool;
use serde_json::{Map, Value};

use crate::config::humanize::did_you_mean;
use crate::config::locate::Environment;

pub(super) fn default_paths(_env: &Environment) -> Vec<PathBuf> {
    Vec::new()
}

/// Each `id` with its `connection` lifted to the entry's top level (the shape every client
/// shares), and `name` kept as the description when there is none. `tools` stays as written,
/// for [`static_tools`].
pub(super) fn entries(document: &Value) -> Vec<(String, Value)> {
    super::named_entries(document.get("servers"))
        .into_iter()
        .map(|(id, entry)| (id, lift(entry)))
        .collect()
}

fn lift(entry: Value) -> Value {
    let Value::Object(mut map) = entry else { return entry };
    let mut out: Map<String, Value> = match map.remove("connection") {
        Some(Value::Object(connection)) => connection,
        _ => Map::new(),
    };
    let description = map.remove("description").or_else(|| map.remove("name"));
    if let Some(description) = description {
        out.insert("description".into(), description);
    }
    for key in ["disabled", "enabled", "tools"] {
        if let Some(v) = map.remove(key) {
            out.insert(key.into(), v);
        }
    }
    Value::Object(out)
}

/// A static tool list that cannot be used: where in the file, and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct BadTools {
    /// `servers.<id>.tools[i].field`.
    pub path: String,
    pub reason: String,
}

/// The keys a static tool may have (what MCP's `tools/list` gives a tool).
const TOOL_KEYS: [&str; 7] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "_meta",
];

/// Most static tools one server may declare (a server lists at most 10,000 either).
const MAX_STATIC_TOOLS: usize = 10_000;

/// The static `tools` of entry `id` (as [`entries`] made it): none when it has none.
///
/// # Errors
/// The first entry that is not a tool: not an object, no `name`, a duplicate name, an
/// `inputSchema` that is not an object, an unknown key.
pub fn static_tools(id: &str, entry: &Value) -> Result<Vec<Tool>, BadTools> {
    let at = format!("servers.{id}.tools");
    let bad = |path: String, reason: String| BadTools { path, reason };
    let items = match entry.get("tools") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(bad(
                at,
                "expected a list of tools, each `{ name, description, inputSchema }`".into(),
            ))
        }
    };
    if items.len() > MAX_STATIC_TOOLS {
        return Err(bad(
            at,
            format!("{} tools; at most {MAX_STATIC_TOOLS} may be declared", items.len()),
        ));
    }
    let mut tools: Vec<Tool> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let here = format!("{at}[{i}]");
        let tool = static_tool(&here, item)?;
        if tools.iter().any(|t| t.name == tool.name) {
            return Err(bad(
                format!("{here}.name"),
                format!("`{}` is declared twice; give each tool its own name", tool.name),
            ));
        }
        tools.push(tool);
    }
    Ok(tools)
}

fn static_tool(here: &str, item: &Value) -> Result<Tool, BadTools> {
    let bad = |field: &str, reason: String| BadTools {
        path: if field.is_empty() {
            here.to_owned()
        } else {
            format!("{here}.{field}")
        },
        reason,
    };
    let Value::Object(map) = item else {
        return Err(bad(
            "",
            "expected a tool such as `{ name: forecast, description: …, inputSchema: { type: object } }`".into(),
        ));
    };
    if let Some(key) = map.keys().find(|k| !TOOL_KEYS.contains(&k.as_str())) {
        return Err(bad(
            key,
            format!(
                "unknown key `{key}`{}; a tool has {}",
                did_you_mean(key, &TOOL_KEYS),
                TOOL_KEYS[..6].join(", ")
            ),
        ));
    }
    match map.get("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => {}
        Some(Value::String(_)) => return Err(bad("name", "must not be empty".into())),
        Some(_) => return Err(bad("name", "expected a string".into())),
        None => {
            return Err(bad(
                "name",
                "missing: every tool needs the name the server calls it by".into(),
            ))
        }
    }
    for field in ["title", "description"] {
        if map.get(field).is_some_and(|v| !v.is_string() && !v.is_null()) {
            return Err(bad(field, "expected a string".into()));
        }
    }
    for field in ["inputSchema", "outputSchema", "annotations", "_meta"] {
        if map.get(field).is_some_and(|v| !v.is_object()) {
            let example = if field == "annotations" {
                "{ readOnlyHint: true }"
            } else {
                "{ type: object, properties: { … } }"
            };
            return Err(bad(field, format!("expected an object such as `{example}`")));
        }
    }
    let mut map = map.clone();
    // A tool without parameters: MCP needs a schema, and this is what it would say.
    map.entry("inputSchema")
        .or_insert_with(|| serde_json::json!({ "type": "object" }));
    serde_json::from_value(Value::Object(map)).map_err(|_| {
        bad(
            "",
            "is not a valid MCP tool (check `annotations` and `outputSchema` against the MCP spec)".into(),
        )
    })
}
