//! What a project place would do, shown before `allow` records it: every server with its
//! command, arguments, folder and environment, or its URL and headers, every file it imports
//! and path it names, and every `${VAR}` it would read (named, never expanded). Values are
//! shown as the file writes them: its author chose them, so masking one would hide from the
//! person exactly what they must judge (`NODE_OPTIONS=--import=…`, `--api-key "$(…)"`).
//! Each is shown [`literal`]ly: control, format and bidi characters escaped, so no value can
//! fake another line of the plan or reverse its text, and long values cut. A TS/JS file is
//! code: it is not run to find out; the plan says it will run.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::Place;
use crate::config::locate::{is_js_config, Environment};
use crate::config::{sources, ServerSpec, TransportKind};
use crate::error::{Error, Result};

/// What a place would do.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    #[serde(flatten)]
    pub place: Place,
    /// `gateway config`, a client's name (`claude-code`, `vscode`, …) or `code`.
    pub kind: String,
    /// TS/JS: runs as code with the user's rights when the gateway starts.
    pub code: bool,
    pub servers: Vec<PlannedServer>,
    /// Other clients' files it imports (`type` and path).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// Paths it names for the gateway to write or read (`audit.path`, `search.model`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Environment variables its servers would be given or send (`${VAR}`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<String>,
}

/// One server as it would start.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedServer {
    pub name: String,
    pub transport: TransportKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `NAME=value` each, as written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `Name: value` each, as written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// Why it will not run even when approved (disabled in its client, in Claude Code's record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_run: Option<String>,
}

impl PlannedServer {
    fn of(spec: &ServerSpec) -> Self {
        let conn = &spec.connection;
        Self {
            name: literal(&spec.name),
            transport: conn.kind,
            command: conn.command.as_deref().map(literal),
            args: conn.args.iter().map(|a| literal(a)).collect(),
            cwd: conn.cwd.as_deref().map(literal),
            env: conn.env.iter().map(|(k, v)| literal(&format!("{k}={v}"))).collect(),
            url: conn.url.as_deref().map(literal),
            headers: conn
                .headers
                .iter()
                .map(|(k, v)| literal(&format!("{k}: {v}")))
                .collect(),
            not_run: None,
        }
    }

    fn not_run(name: &str, why: String) -> Self {
        Self {
            name: literal(name),
            transport: TransportKind::Stdio,
            command: None,
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            url: None,
            headers: Vec::new(),
            not_run: Some(why),
        }
    }
}

/// The longest value shown whole; past it the plan says how much is cut.
const MAX_SHOWN_CHARS: usize = 400;

/// `text` as a person must read it in the plan: newlines, tabs, controls, escapes and
/// invisible (format, bidi) characters written as escapes (`\n`, `\u{202e}`), and at most
/// [`MAX_SHOWN_CHARS`] characters with a count of the rest.
#[must_use]
pub fn literal(text: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len().min(MAX_SHOWN_CHARS * 4));
    for (i, c) in text.chars().enumerate() {
        if i == MAX_SHOWN_CHARS {
            let rest = text.chars().count() - MAX_SHOWN_CHARS;
            let _ = write!(out, "…({rest} more characters)");
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == '\u{1b}' || crate::trust::poison::is_invisible(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// Describe `place` without running, contacting or expanding anything.
///
/// # Errors
/// The file cannot be read or is not a config this gateway reads.
pub fn describe(place: &Place, env: &Environment) -> Result<Plan> {
    let origin = place.file.display().to_string();
    let mut plan = Plan {
        place: place.clone(),
        kind: "gateway config".into(),
        code: false,
        servers: Vec::new(),
        sources: Vec::new(),
        paths: Vec::new(),
        variables: Vec::new(),
    };
    if is_js_config(&place.file) {
        if !place.file.is_file() {
            return Err(Error::config(&origin, "(file)", "cannot read file: not found"));
        }
        "code".clone_into(&mut plan.kind);
        plan.code = true;
        return Ok(plan);
    }
    let document = crate::config::read_document(&place.file)?;
    let base = place.file.parent().unwrap_or(Path::new("."));
    if let Some(section) = &place.section {
        let folder = section.strip_prefix("projects.").unwrap_or(section);
        let servers = document
            .get("projects")
            .and_then(|p| p.get(folder))
            .cloned()
            .unwrap_or(Value::Null);
        "claude-code (local servers of this folder)".clone_into(&mut plan.kind);
        plan.servers = client_servers(sources::SourceKind::ClaudeDesktop, &servers, base, env, None);
    } else if let Some(kind) = sources::kind_of_project_file(&place.file, env).or_else(|| {
        own_section(&document)
            .is_none()
            .then(|| sources::client_format(&document))
            .flatten()
    }) {
        kind.name().clone_into(&mut plan.kind);
        let record = (kind == sources::SourceKind::ClaudeCode && super::record_applies(&place.file, env))
            .then(|| super::claude::Record::read(env))
            .flatten();
        plan.servers = client_servers(kind, &document, base, env, record.as_ref());
    } else if let Some(section) = own_section(&document) {
        own_plan(&mut plan, section);
    } else {
        return Err(Error::config(
            &origin,
            "(root)",
            "neither a discovery config nor an MCP client's config: nothing to approve",
        ));
    }
    plan.variables = variables(&document);
    Ok(plan)
}

/// The `discovery` section of our own format (or a bare one), when `document` is one.
fn own_section(document: &Value) -> Option<&Value> {
    match document.get("discovery") {
        Some(section) => Some(section),
        None if document.get("servers").is_some_and(Value::is_array) => Some(document),
        None => None,
    }
}

fn own_plan(plan: &mut Plan, section: &Value) {
    let list = |key: &str| section.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, value) in list("servers").into_iter().enumerate() {
        let name = value
            .get("name")
            .and_then(Value::as_str)
            .map_or_else(|| format!("servers[{i}]"), str::to_owned);
        plan.servers.push(match serde_json::from_value::<ServerSpec>(value) {
            Ok(spec) => PlannedServer::of(&spec),
            Err(error) => PlannedServer::not_run(&name, format!("invalid entry: {error}")),
        });
    }
    for source in list("sources") {
        let text = match &source {
            Value::String(kind) => kind.clone(),
            other => {
                let kind = other.get("type").and_then(Value::as_str).unwrap_or("?");
                match other.get("path").and_then(Value::as_str) {
                    Some(path) => format!("{kind}: {path}"),
                    None => kind.to_owned(),
                }
            }
        };
        plan.sources.push(literal(&text));
    }
    for (field, value) in [
        ("audit.path", section.pointer("/audit/path")),
        ("search.model", section.pointer("/search/model")),
    ] {
        if let Some(path) = value.and_then(Value::as_str) {
            plan.paths.push(literal(&format!("{field}: {path}")));
        }
    }
}

fn client_servers(
    kind: sources::SourceKind,
    document: &Value,
    base: &Path,
    env: &Environment,
    record: Option<&super::claude::Record>,
) -> Vec<PlannedServer> {
    sources::servers_in(kind, document, base, env)
        .into_iter()
        .map(|(name, spec)| {
            let mut planned = match spec {
                Ok(spec) => PlannedServer::of(&spec),
                Err(skip) => PlannedServer::not_run(&name, skip.to_string()),
            };
            if record.and_then(|r| r.decides(&name)) == Some(false) {
                planned.not_run = Some("disabled in Claude Code's record for this folder".into());
            }
            planned
        })
        .collect()
}

/// Every `${NAME}` (or `${env:NAME}`) in the document's strings, once each, in order.
fn variables(document: &Value) -> Vec<String> {
    fn walk(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(text) => {
                let mut rest = text.as_str();
                while let Some(start) = rest.find("${") {
                    let after = &rest[start + 2..];
                    let Some(end) = after.find('}') else { break };
                    let reference = &after[..end];
                    let name = reference.split_once(":-").map_or(reference, |(n, _)| n);
                    let name = name.strip_prefix("env:").unwrap_or(name);
                    if !name.is_empty() && !name.contains(':') && !out.iter().any(|o| o == name) {
                        out.push(literal(name));
                    }
                    rest = &after[end + 1..];
                }
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(document, &mut out);
    out
}
