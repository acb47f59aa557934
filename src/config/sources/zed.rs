//! Zed: `context_servers` in its `settings.json` (the project's `.zed/settings.json`, then the
//! user's: `~/.config/zed` on Linux and macOS, `%APPDATA%\Zed` on Windows). An entry's
//! `command` is a string beside `args`/`env`, or (older Zed) an object `{ path, args, env }`.

use std::path::PathBuf;

use serde_json::Value;

use crate::config::locate::Environment;

pub(super) fn default_paths(env: &Environment) -> Vec<PathBuf> {
    let user = if cfg!(windows) {
        env.config_dir.as_ref().map(|d| d.join("Zed"))
    } else if cfg!(target_os = "macos") {
        env.home.as_ref().map(|h| h.join(".config").join("zed"))
    } else {
        env.config_dir.as_ref().map(|d| d.join("zed"))
    };
    std::iter::once(env.cwd.join(".zed").join("settings.json"))
        .chain(user.map(|d| d.join("settings.json")))
        .collect()
}

pub(super) fn entries(document: &Value) -> Vec<(String, Value)> {
    super::named_entries(document.get("context_servers"))
        .into_iter()
        .map(|(name, entry)| (name, flatten_command(entry)))
        .collect()
}

/// `{ command: { path, args, env } }` → `{ command: path, args, env }`.
pub(super) fn flatten_command(entry: Value) -> Value {
    let Value::Object(mut map) = entry else { return entry };
    if !map.get("command").is_some_and(Value::is_object) {
        return Value::Object(map);
    }
    if let Some(Value::Object(mut command)) = map.remove("command") {
        if let Some(path) = command.remove("path") {
            map.insert("command".into(), path);
        }
        for (key, value) in command {
            map.entry(key).or_insert(value);
        }
    }
    Value::Object(map)
}
