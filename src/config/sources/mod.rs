//! Sources: other MCP clients' config files, imported as servers of ours.
//!
//! Each client has a module that knows where its file lives on each OS and where the server
//! entries sit inside it; [`entry`] turns one entry into a `ServerSpec` the same way for all
//! (remote vs stdio, `disabled`, `${workspaceFolder}`, self-skip). This module reads the files
//! and collects what was found for the report on stderr.

mod claude_code;
mod claude_desktop;
mod cursor;
mod custom;
mod docker_mcp;
pub(crate) mod entry;
mod vscode;
mod windsurf;
mod zed;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::locate::Environment;
use super::ServerSpec;
use crate::consent::{self, Place, Scope, Skipped, Verdict};

/// A client whose config can be imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    Vscode,
    Windsurf,
    Zed,
    DockerMcp,
    Custom,
}

impl SourceKind {
    /// Every kind, in the order zero-config imports them (first wins on a name clash).
    pub const ALL: [Self; 8] = [
        Self::ClaudeDesktop,
        Self::ClaudeCode,
        Self::Cursor,
        Self::Vscode,
        Self::Windsurf,
        Self::Zed,
        Self::DockerMcp,
        Self::Custom,
    ];

    /// The `type` as written in `sources`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::ClaudeDesktop => "claude-desktop",
            Self::ClaudeCode => "claude-code",
            Self::Cursor => "cursor",
            Self::Vscode => "vscode",
            Self::Windsurf => "windsurf",
            Self::Zed => "zed",
            Self::DockerMcp => "docker-mcp",
            Self::Custom => "custom",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Where this client keeps its file(s) on this machine, in the order they are read.
    pub(crate) fn default_paths(self, env: &Environment) -> Vec<PathBuf> {
        match self {
            Self::ClaudeDesktop => claude_desktop::default_paths(env),
            Self::ClaudeCode => claude_code::default_paths(env),
            Self::Cursor => cursor::default_paths(env),
            Self::Vscode => vscode::default_paths(env),
            Self::Windsurf => windsurf::default_paths(env),
            Self::Zed => zed::default_paths(env),
            Self::DockerMcp => docker_mcp::default_paths(env),
            Self::Custom => custom::default_paths(env),
        }
    }

    /// The named entries of one of this client's files.
    fn entries(self, document: &Value, env: &Environment) -> Vec<(String, Value)> {
        match self {
            Self::ClaudeDesktop | Self::Cursor | Self::Windsurf | Self::DockerMcp => mcp_servers(document),
            Self::ClaudeCode => claude_code::entries(document, env),
            Self::Vscode => vscode::entries(document),
            Self::Zed => zed::entries(document),
            Self::Custom => custom::entries(document),
        }
    }
}

/// One entry of `discovery.sources`: `{ type, path? }` (or just the type as a string).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSpec {
    pub kind: SourceKind,
    /// Overrides the default paths.
    pub path: Option<PathBuf>,
}

/// What importing one source found, for stderr and the file watcher.
#[derive(Debug, Default)]
pub struct Imported {
    /// Each server with the file it came from (`kind: path`).
    pub servers: Vec<(ServerSpec, String)>,
    /// Files read (existing ones only).
    pub files: Vec<PathBuf>,
    /// Every file looked for, found or not (a watcher can notice one being created).
    pub looked: Vec<PathBuf>,
    /// A file that exists but cannot be used (stderr at warn level).
    pub warnings: Vec<String>,
    /// Lines for stderr: each place looked and what it held, each entry skipped and why.
    pub notes: Vec<String>,
    /// Project places passed over for want of approval.
    pub skipped: Vec<Skipped>,
    /// Project places used, approved, with the hash they were approved on.
    pub approved: Vec<(Place, String)>,
}

/// Parse `discovery.sources[i]`. Errors are `(path inside the section, reason)`.
///
/// # Errors
/// An unknown `type` or key, or a value of the wrong kind.
pub fn parse_source(value: &Value, at: &str, base: &Path) -> Result<SourceSpec, (String, String)> {
    let known = SourceKind::ALL.map(SourceKind::name);
    let kind_of = |name: &str, path: String| {
        SourceKind::from_name(name).ok_or_else(|| {
            (
                path,
                format!(
                    "unknown source type `{name}`{}; known types: {}",
                    super::humanize::did_you_mean(name, &known),
                    known.join(", ")
                ),
            )
        })
    };
    match value {
        Value::String(name) => Ok(SourceSpec {
            kind: kind_of(name, at.to_owned())?,
            path: None,
        }),
        Value::Object(map) => {
            for key in map.keys() {
                if key != "type" && key != "path" {
                    return Err((
                        format!("{at}.{key}"),
                        format!(
                            "unknown key `{key}`{}; a source has `type` and an optional `path`",
                            super::humanize::did_you_mean(key, &["type", "path"])
                        ),
                    ));
                }
            }
            let kind = match map.get("type") {
                Some(Value::String(name)) => kind_of(name, format!("{at}.type"))?,
                Some(_) => {
                    return Err((
                        format!("{at}.type"),
                        "expected a string such as \"claude-desktop\"".into(),
                    ))
                }
                None => {
                    return Err((
                        format!("{at}.type"),
                        format!("missing key `type`: add one of {}", known.join(", ")),
                    ))
                }
            };
            let path = match map.get("path") {
                None | Some(Value::Null) => None,
                Some(Value::String(p)) => Some(resolve_path(p, base)),
                Some(_) => return Err((format!("{at}.path"), "expected a file path string".into())),
            };
            Ok(SourceSpec { kind, path })
        }
        _ => Err((
            at.to_owned(),
            "expected an object such as { \"type\": \"claude-desktop\" }".into(),
        )),
    }
}

/// `~/x` from the home directory, a relative path from `base` (the config file's folder).
fn resolve_path(path: &str, base: &Path) -> PathBuf {
    if let Some(rest) = path.strip_prefix("~/").or_else(|| path.strip_prefix("~\\")) {
        if let Some(home) = Environment::current().home {
            return home.join(rest);
        }
    }
    base.join(path)
}

/// Import one source: its named file, or each default file of its client that exists. A
/// file named by a config has that config's scope (`named_by`); a default file is classified
/// by `consent` (a project's `.mcp.json` is project-scoped, `~/.cursor/mcp.json` is not).
#[must_use]
pub fn import(source: &SourceSpec, env: &Environment, named_by: Scope) -> Imported {
    let mut imported = Imported::default();
    let named = source.path.is_some();
    let paths = source
        .path
        .clone()
        .map_or_else(|| source.kind.default_paths(env), |p| vec![p]);
    for path in paths {
        let scope = if named {
            named_by
        } else {
            consent::scope_of_client_file(&path, env)
        };
        import_file(source.kind, &path, named, scope, env, &mut imported);
    }
    imported
}

/// Which client's project file `path` is, when it is one (`./.mcp.json` is Claude Code's).
#[must_use]
pub fn kind_of_project_file(path: &Path, env: &Environment) -> Option<SourceKind> {
    let kinds = [
        SourceKind::ClaudeCode,
        SourceKind::Vscode,
        SourceKind::Cursor,
        SourceKind::Zed,
    ];
    consent::PROJECT_CLIENT_FILES
        .iter()
        .zip(kinds)
        .find(|(name, _)| path.ends_with(name) || env.cwd.join(name) == path)
        .map(|(_, kind)| kind)
}

/// The servers a client document holds, each as the import reads it (nothing expanded) or
/// why it is skipped: what `allow` shows.
#[must_use]
pub fn servers_in(
    kind: SourceKind,
    document: &Value,
    base: &Path,
    env: &Environment,
) -> Vec<(String, Result<ServerSpec, entry::Skip>)> {
    kind.entries(document, env)
        .into_iter()
        .map(|(name, value)| {
            let spec = entry::to_spec(&name, &value, base, env);
            (name, spec)
        })
        .collect()
}

/// The consent a project file's entries need: the approval of the file, and for a
/// `.mcp.json` Claude Code's own per-server answers. `None`: nothing of it may be read.
struct Consent {
    /// The content hash it was approved with.
    approved: Option<String>,
    record: Option<consent::claude::Record>,
}

fn consent_for(kind: SourceKind, place: &Place, env: &Environment, into: &mut Imported) -> Option<Consent> {
    let verdict = consent::verdict(place, env);
    let approved = match &verdict {
        Verdict::Approved(hash) => Some(hash.clone()),
        Verdict::Skipped(_) => None,
    };
    let record = (kind == SourceKind::ClaudeCode && consent::record_applies(&place.file, env))
        .then(|| consent::claude::Record::read(env))
        .flatten();
    if let Verdict::Skipped(why) = verdict {
        if record.is_none() {
            into.skipped.push(Skipped::new(place.clone(), why));
            return None;
        }
    }
    Some(Consent { approved, record })
}

/// Read one client file into `into`. A file that is missing is noted, not an error: the
/// client may simply not be installed. An unreadable or malformed one is noted with why.
/// A project-scoped one is read only as far as its consent goes.
pub fn import_file(kind: SourceKind, path: &Path, named: bool, scope: Scope, env: &Environment, into: &mut Imported) {
    let label = format!("{}: {}", kind.name(), path.display());
    into.looked.push(path.to_path_buf());
    if !path.is_file() {
        if named {
            into.notes.push(format!("{label}: not found (fix the source's `path`)"));
        } else {
            into.notes.push(format!("{label}: not found"));
        }
        return;
    }
    let consent = match scope {
        Scope::User => None,
        Scope::Project => match consent_for(kind, &Place::file(path), env, into) {
            Some(consent) => Some(consent),
            None => return,
        },
    };
    let document = match super::document::read_document_hashed(path) {
        Ok((mut document, hash)) => {
            if kind == SourceKind::ClaudeCode && scope == Scope::User {
                local_servers_consent(&mut document, path, env, into);
            }
            if let Some(approved) = consent.as_ref().and_then(|c| c.approved.as_ref()) {
                if *approved == hash {
                    into.approved.push((Place::file(path), hash));
                } else {
                    // Changed between the approval check and this read: not what was approved.
                    into.skipped
                        .push(Skipped::new(Place::file(path), consent::Why::Changed));
                    return;
                }
            }
            document
        }
        Err(e) => {
            // The label already names the file.
            let why = match e {
                crate::error::Error::Configuration { path, reason, .. } => format!("{path}: {reason}"),
                other => other.to_string(),
            };
            into.warnings.push(format!("{label}: skipped: {why}"));
            return;
        }
    };
    into.files.push(path.to_path_buf());
    let base = path.parent().unwrap_or(Path::new("."));
    let mut imported_names = Vec::new();
    let mut unapproved = false;
    for (name, value) in kind.entries(&document, env) {
        if let Some(consent) = &consent {
            match consent.record.as_ref().and_then(|r| r.decides(&name)) {
                Some(false) => {
                    into.notes.push(format!(
                        "{label}: `{name}` skipped: disabled in Claude Code's record for this folder"
                    ));
                    continue;
                }
                Some(true) => {}
                None if consent.approved.is_some() => {}
                None => {
                    unapproved = true;
                    continue;
                }
            }
        }
        match entry::to_spec(&name, &value, base, env) {
            Ok(mut spec) => {
                if kind == SourceKind::Custom {
                    // A bad list costs the server its static tools, not its place: it
                    // connects and lists its real tools like any other.
                    match custom::static_tools(&name, &value) {
                        Ok(tools) => spec.static_tools = tools,
                        Err(bad) => into
                            .warnings
                            .push(format!("{label}: {bad}; `{name}` is served without its static tools")),
                    }
                }
                imported_names.push(spec.name.clone());
                into.servers.push((spec, label.clone()));
            }
            Err(skip) => into.notes.push(format!("{label}: `{name}` skipped: {skip}")),
        }
    }
    if unapproved {
        // Claude Code answered for some servers only: the file's approval covers the rest.
        let why = match consent::verdict(&Place::file(path), env) {
            Verdict::Skipped(why) => why,
            Verdict::Approved(_) => consent::Why::NotApproved,
        };
        into.skipped.push(Skipped::new(Place::file(path), why));
    }
    let count = imported_names.len();
    into.notes.push(format!(
        "{label}: {count} server{}{}",
        if count == 1 { "" } else { "s" },
        if imported_names.is_empty() {
            String::new()
        } else {
            format!(" ({})", imported_names.join(", "))
        }
    ));
}

/// `~/.claude.json`: the user's own file, whose `projects.<starting folder>.mcpServers` are
/// project-scoped. Unapproved, they are taken out of `document` before its entries are read.
fn local_servers_consent(document: &mut Value, path: &Path, env: &Environment, into: &mut Imported) {
    if env.home.as_ref().is_none_or(|h| h.join(".claude.json") != path) || !consent::cwd_is_project(env) {
        return;
    }
    let Some(section) = consent::claude::local_section(document, env) else {
        return;
    };
    let place = Place {
        file: path.to_path_buf(),
        section: Some(section),
    };
    match consent::verdict(&place, env) {
        Verdict::Approved(hash) => into.approved.push((place, hash)),
        Verdict::Skipped(why) => {
            if let Some(projects) = document.get_mut("projects").and_then(Value::as_object_mut) {
                projects.clear();
            }
            into.skipped.push(Skipped::new(place, why));
        }
    }
}

/// One entry as [`entry::to_spec`] reads it: Zed's older `{ command: { path, args, env } }`
/// flattened, every other client's as written.
#[must_use]
pub(crate) fn normalized_entry(kind: SourceKind, value: Value) -> Value {
    if kind == SourceKind::Zed {
        zed::flatten_command(value)
    } else {
        value
    }
}

/// `mcpServers` at the top: Claude Desktop, Cursor, Windsurf, Docker MCP and `.mcp.json`.
fn mcp_servers(document: &Value) -> Vec<(String, Value)> {
    named_entries(document.get("mcpServers"))
}

fn named_entries(map: Option<&Value>) -> Vec<(String, Value)> {
    map.and_then(Value::as_object)
        .map(Map::iter)
        .into_iter()
        .flatten()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// Which client wrote a document passed to `--config` directly, by its top-level key.
#[must_use]
pub fn client_format(document: &Value) -> Option<SourceKind> {
    let map = document.as_object()?;
    if map.contains_key("discovery") {
        return None;
    }
    if map.get("mcpServers").is_some_and(Value::is_object) {
        return Some(SourceKind::ClaudeDesktop);
    }
    if map.get("context_servers").is_some_and(Value::is_object) {
        return Some(SourceKind::Zed);
    }
    // VS Code's `servers` is an object of named entries; ours is a list.
    // The custom YAML's entries hold a `connection`, like our own servers.
    if let Some(servers) = map.get("servers").and_then(Value::as_object) {
        let custom = servers.values().any(|s| s.get("connection").is_some());
        return Some(if custom { SourceKind::Custom } else { SourceKind::Vscode });
    }
    None
}

/// Join imported servers after `servers`: the first of a name wins, later ones are noted as
/// shadowed, naming where each came from.
pub fn merge(servers: &mut Vec<ServerSpec>, imported: Vec<(ServerSpec, String)>, notes: &mut Vec<String>) {
    for (spec, from) in imported {
        if servers.iter().any(|s| s.name == spec.name) {
            notes.push(format!(
                "{from}: `{}` shadowed by an earlier server of the same name (rename one to keep both)",
                spec.name
            ));
        } else {
            servers.push(spec);
        }
    }
}

#[cfg(test)]
mod tests;
