//! The custom YAML (or JSON) list: `servers: { id: { name, description, connection, tools } }`,
//! where `connection` is written as in our own `servers`. It has no default path.
//! Static `tools` are not indexed yet: the server is connected to list them like any other.

use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::config::locate::Environment;

pub(super) fn default_paths(_env: &Environment) -> Vec<PathBuf> {
    Vec::new()
}

/// Each `id` with its `connection` lifted to the entry's top level (the shape every client
/// shares), and `name` kept as the description when there is none.
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
    for key in ["disabled", "enabled"] {
        if let Some(v) = map.remove(key) {
            out.insert(key.into(), v);
        }
    }
    Value::Object(out)
}
