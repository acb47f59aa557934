//! One client entry → one `ServerSpec`, the same rules for every client.
//!
//! The clients agree on the shape (`command`, `args`, `env`, `cwd` or `url`, `headers`) and
//! differ in spelling: Windsurf's `serverUrl`, VS Code's `${env:VAR}` and `${workspaceFolder}`,
//! `type: streamable-http`. An entry that is disabled, launches this gateway, or needs an
//! interactive VS Code `${input:…}` is skipped with a reason for stderr.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use crate::config::locate::Environment;
use crate::config::{ConnectionSpec, ServerSpec, TransportKind};

/// Why an entry was not imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Skip {
    #[error("disabled in that client")]
    Disabled,
    #[error("it launches this gateway itself (a gateway never starts itself)")]
    SelfLaunch,
    #[error("`{0}` is a VS Code prompt the gateway cannot show: put the value in an environment variable and write `${{env:NAME}}`")]
    Input(String),
    #[error("it has neither `command` nor `url`")]
    NoLaunch,
    #[error("`{field}` must be {expected}")]
    WrongType { field: String, expected: &'static str },
    #[error("unknown `type` `{0}` (stdio, http, streamable-http or sse)")]
    UnknownTransport(String),
}

/// The package and binary names of this gateway, for self-detection.
const SELF_PACKAGE: &str = "@anygpt/discovery";
const SELF_BIN: &str = "anygpt-discovery";

/// Convert one entry. `base` is the folder of the file it came from (relative `cwd`s).
///
/// # Errors
/// The reason it is skipped.
pub fn to_spec(name: &str, value: &Value, base: &Path, env: &Environment) -> Result<ServerSpec, Skip> {
    let entry = value.as_object().ok_or(Skip::WrongType {
        field: name.to_owned(),
        expected: "an object",
    })?;
    if entry.get("disabled").and_then(Value::as_bool) == Some(true)
        || entry.get("enabled").and_then(Value::as_bool) == Some(false)
    {
        return Err(Skip::Disabled);
    }
    let url = string(entry, "url")?.or(string(entry, "serverUrl")?);
    let kind_text = string(entry, "type")?.or(string(entry, "transport")?);
    let transport = match kind_text.as_deref() {
        None if url.is_some() => TransportKind::Http,
        None | Some("stdio") => TransportKind::Stdio,
        Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => TransportKind::Http,
        Some("sse") => TransportKind::Sse,
        Some(other) => return Err(Skip::UnknownTransport(other.to_owned())),
    };
    let mut connection = ConnectionSpec {
        kind: transport,
        command: string(entry, "command")?,
        args: strings(entry, "args")?,
        env: string_map(entry, "env")?,
        cwd: string(entry, "cwd")?,
        url,
        headers: string_map(entry, "headers")?,
        oauth: None,
    };
    match transport {
        TransportKind::Stdio if connection.command.is_none() => return Err(Skip::NoLaunch),
        TransportKind::Http | TransportKind::Sse if connection.url.is_none() => return Err(Skip::NoLaunch),
        _ => {}
    }
    if launches_self(&connection) {
        return Err(Skip::SelfLaunch);
    }
    substitute_all(&mut connection, env)?;
    if let Some(cwd) = &connection.cwd {
        if !cwd.contains("${") && Path::new(cwd).is_relative() {
            connection.cwd = Some(base.join(cwd).display().to_string());
        }
    }
    Ok(ServerSpec {
        name: server_name(name),
        description: string(entry, "description")?,
        connection,
        timeout_ms: None,
        startup_timeout_ms: None,
        idle_timeout_ms: None,
        static_tools: Vec::new(),
    })
}

/// Server names address tools as `server:tool`: a `:` or whitespace becomes `-`.
fn server_name(name: &str) -> String {
    name.trim()
        .chars()
        .map(|c| if c == ':' || c.is_whitespace() { '-' } else { c })
        .collect()
}

fn string(entry: &Map<String, Value>, field: &str) -> Result<Option<String>, Skip> {
    match entry.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Skip::WrongType {
            field: field.to_owned(),
            expected: "a string",
        }),
    }
}

fn strings(entry: &Map<String, Value>, field: &str) -> Result<Vec<String>, Skip> {
    let wrong = || Skip::WrongType {
        field: field.to_owned(),
        expected: "a list of strings",
    };
    match entry.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(|i| scalar(i).ok_or_else(wrong)).collect(),
        Some(_) => Err(wrong()),
    }
}

/// `env`/`headers`: numbers and booleans are written unquoted often enough to accept them.
/// Names to values, as `env` and `headers` hold them.
type StringMap = BTreeMap<String, String>;

fn string_map(entry: &Map<String, Value>, field: &str) -> Result<StringMap, Skip> {
    let wrong = || Skip::WrongType {
        field: field.to_owned(),
        expected: "an object of strings",
    };
    match entry.get(field) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| scalar(v).map(|v| (k.clone(), v)).ok_or_else(wrong))
            .collect(),
        Some(_) => Err(wrong()),
    }
}

fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Whether this entry starts `@anygpt/discovery` (by package, bin name or bin path). Not by
/// comparing with our own executable: under the npm bin that is `node`, which most servers use.
fn launches_self(connection: &ConnectionSpec) -> bool {
    connection
        .command
        .iter()
        .chain(&connection.args)
        .any(|word| is_self_word(word))
}

fn is_self_word(word: &str) -> bool {
    let package = word.strip_prefix(SELF_PACKAGE);
    if package.is_some_and(|rest| rest.is_empty() || rest.starts_with('@')) {
        return true;
    }
    // Either separator: a Windows path in a config read on Linux is still this gateway.
    let file = word.rsplit(['/', '\\']).next().unwrap_or(word);
    let stem = file.split('.').next().unwrap_or(file);
    stem == SELF_BIN
        && [
            SELF_BIN,
            "anygpt-discovery.js",
            "anygpt-discovery.exe",
            "anygpt-discovery.cmd",
        ]
        .contains(&file)
}

/// `${workspaceFolder}` and `${userHome}` are known at import; `${input:…}` never is.
/// Variables (`${VAR}`, `${env:VAR}`) stay as written and expand at launch.
fn substitute_all(connection: &mut ConnectionSpec, env: &Environment) -> Result<(), Skip> {
    let texts = connection
        .args
        .iter_mut()
        .chain(connection.env.values_mut())
        .chain(connection.headers.values_mut())
        .chain(connection.command.iter_mut())
        .chain(connection.cwd.iter_mut())
        .chain(connection.url.iter_mut());
    for text in texts {
        substitute(text, env)?;
    }
    Ok(())
}

fn substitute(text: &mut String, env: &Environment) -> Result<(), Skip> {
    if let Some(start) = text.find("${input:") {
        let end = text[start..].find('}').map_or(text.len(), |e| start + e + 1);
        return Err(Skip::Input(text[start..end].to_owned()));
    }
    if text.contains("${workspaceFolder}") {
        *text = text.replace("${workspaceFolder}", &env.cwd.display().to_string());
    }
    if let Some(home) = env.home.as_ref().filter(|_| text.contains("${userHome}")) {
        *text = text.replace("${userHome}", &home.display().to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env() -> Environment {
        Environment {
            cwd: "/work/project".into(),
            home: Some("/home/u".into()),
            ..Environment::default()
        }
    }

    fn spec(value: &Value) -> Result<ServerSpec, Skip> {
        to_spec("srv", value, Path::new("/cfg"), &env())
    }

    #[test]
    fn stdio_entry() {
        let s = spec(&json!({ "command": "npx", "args": ["-y", "x"], "env": { "N": 3 }, "cwd": "sub" })).unwrap();
        assert_eq!(s.connection.kind, TransportKind::Stdio);
        assert_eq!(s.connection.args, ["-y", "x"]);
        assert_eq!(s.connection.env["N"], "3");
        assert_eq!(s.connection.cwd.as_deref(), Some("/cfg/sub"));
    }

    #[test]
    fn remote_spellings() {
        for (entry, kind) in [
            (json!({ "url": "https://h/mcp" }), TransportKind::Http),
            (json!({ "serverUrl": "https://h/mcp" }), TransportKind::Http),
            (
                json!({ "type": "streamable-http", "url": "https://h/mcp" }),
                TransportKind::Http,
            ),
            (json!({ "type": "sse", "url": "https://h/sse" }), TransportKind::Sse),
        ] {
            let s = spec(&entry).unwrap();
            assert_eq!(
                (s.connection.kind, s.connection.url.as_deref()),
                (
                    kind,
                    entry.get("url").or(entry.get("serverUrl")).and_then(Value::as_str)
                )
            );
        }
    }

    #[test]
    fn skips() {
        assert_eq!(
            spec(&json!({ "command": "x", "disabled": true })).unwrap_err(),
            Skip::Disabled
        );
        assert_eq!(
            spec(&json!({ "command": "x", "enabled": false })).unwrap_err(),
            Skip::Disabled
        );
        assert_eq!(spec(&json!({ "args": [] })).unwrap_err(), Skip::NoLaunch);
        for launch in [
            json!({ "command": "npx", "args": ["-y", "@anygpt/discovery"] }),
            json!({ "command": "npx", "args": ["@anygpt/discovery@1.2.0", "--config", "x"] }),
            json!({ "command": "anygpt-discovery" }),
            json!({ "command": "node", "args": ["/opt/n/lib/node_modules/@anygpt/discovery/bin/anygpt-discovery.js"] }),
            json!({ "command": "C:\\bin\\anygpt-discovery.cmd" }),
        ] {
            assert_eq!(spec(&launch).unwrap_err(), Skip::SelfLaunch, "{launch}");
        }
        assert!(spec(&json!({ "command": "npx", "args": ["@anygpt/discovery-extra"] })).is_ok());
        let node = std::env::current_exe().unwrap().display().to_string();
        assert!(spec(&json!({ "command": node, "args": ["server.js"] })).is_ok());
        let err = spec(&json!({ "command": "x", "env": { "T": "${input:token}" } })).unwrap_err();
        assert_eq!(err, Skip::Input("${input:token}".into()));
        assert_eq!(
            spec(&json!({ "command": 3 })).unwrap_err().to_string(),
            "`command` must be a string"
        );
    }

    #[test]
    fn vscode_variables() {
        let s = spec(
            &json!({ "command": "x", "args": ["${workspaceFolder}/a", "${userHome}"], "env": { "T": "${env:TOKEN}" } }),
        )
        .unwrap();
        assert_eq!(s.connection.args, ["/work/project/a", "/home/u"]);
        assert_eq!(s.connection.env["T"], "${env:TOKEN}");
    }

    #[test]
    fn names_are_made_addressable() {
        assert_eq!(spec(&json!({ "command": "x" })).unwrap().name, "srv");
        let s = to_spec("my server:1", &json!({ "command": "x" }), Path::new("/"), &env()).unwrap();
        assert_eq!(s.name, "my-server-1");
    }
}
