//! `setup` and `restore`: put an MCP client's servers behind the gateway, and undo it.
//!
//! This module owns the plan and the writes. [`plan`] reads the client's file (where the
//! import code, `config::sources`, says the client keeps it), sorts its server entries into
//! those that move (everything the gateway can serve) and those that stay (disabled ones, VS
//! Code `${input:…}` prompts, a name taken by a different server of the gateway's), and
//! computes the new texts: the client's file with the moved entries replaced by one gateway
//! entry — every other byte kept ([`edit`]) — and the gateway's user config with the servers
//! added. [`apply`] keeps a backup ([`backup`]) and writes both atomically, the gateway's
//! config first so a server is never in neither file. [`restore`] puts the client's file back
//! as it was, unless it changed since. [`savings`] measures what the move saves; [`running`]
//! tells whether the client runs (so it is told to restart).

pub mod backup;
mod edit;
pub mod running;
pub mod savings;

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

use crate::config::locate::{is_js_config, Environment, EXTENSIONS};
use crate::config::sources::{entry, normalized_entry, SourceKind};
use crate::config::ServerSpec;
use crate::error::{Error, Result};
use edit::Document;

/// The name of the entry `setup` writes into a client's file.
pub const GATEWAY_ENTRY: &str = "anygpt-discovery";
/// The package the entry runs.
const PACKAGE: &str = "@anygpt/discovery";

/// Which of a client's files: the user's own, or the project's in the current folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    User,
    Project,
}

/// The clients `setup` knows.
pub const CLIENTS: [SourceKind; 6] = [
    SourceKind::ClaudeDesktop,
    SourceKind::ClaudeCode,
    SourceKind::Cursor,
    SourceKind::Vscode,
    SourceKind::Windsurf,
    SourceKind::Zed,
];

/// One client file and where its servers sit in it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    #[serde(serialize_with = "kind_name")]
    pub client: SourceKind,
    pub scope: Scope,
    pub file: PathBuf,
    /// Keys from the top of the document to the servers object.
    pub servers_at: Vec<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `serialize_with` passes a reference
fn kind_name<S: serde::Serializer>(kind: &SourceKind, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(kind.name())
}

/// Which file of `client` `setup` and `restore` edit for `scope`.
///
/// # Errors
/// `VALIDATION_ERROR` for a client without a file of that scope.
pub fn target(client: SourceKind, scope: Scope, env: &Environment) -> Result<Target> {
    let paths = client.default_paths(env);
    let has_project = matches!(
        client,
        SourceKind::ClaudeCode | SourceKind::Cursor | SourceKind::Vscode | SourceKind::Zed
    );
    if !CLIENTS.contains(&client) {
        return Err(Error::validation(format!(
            "`{}` is not a client setup edits; use one of {}",
            client.name(),
            CLIENTS.map(SourceKind::name).join(", ")
        )));
    }
    let (file, servers_at) = match (scope, has_project) {
        (Scope::Project, false) => {
            return Err(Error::validation(format!(
                "{} has no project file: run it without --project",
                client.name()
            )))
        }
        (Scope::Project, true) => (paths[0].clone(), servers_key(client)),
        (Scope::User, _) => {
            let user: Vec<PathBuf> = if has_project { paths[1..].to_vec() } else { paths };
            let Some(first) = user.first().cloned() else {
                return Err(Error::validation(
                    "no home folder on this machine: set HOME to find the client's file",
                ));
            };
            // VS Code: the user's `mcp.json`, or `settings.json` when its servers live there.
            match user
                .get(1)
                .filter(|settings| client == SourceKind::Vscode && !first.exists() && settings.exists())
            {
                Some(settings) => (settings.clone(), vscode_settings_key(settings)),
                None => (first, servers_key(client)),
            }
        }
    };
    Ok(Target {
        client,
        scope,
        file,
        servers_at,
    })
}

fn servers_key(client: SourceKind) -> Vec<String> {
    let key = match client {
        SourceKind::Vscode => "servers",
        SourceKind::Zed => "context_servers",
        _ => "mcpServers",
    };
    vec![key.to_owned()]
}

/// `mcp.servers` in VS Code's `settings.json`: nested, or as one dotted key when written so.
fn vscode_settings_key(settings: &Path) -> Vec<String> {
    let dotted = std::fs::read_to_string(settings)
        .ok()
        .and_then(|text| Document::parse(&text, "").ok())
        .is_some_and(|d| d.value.get("mcp.servers").is_some());
    if dotted {
        vec!["mcp.servers".to_owned()]
    } else {
        vec!["mcp".to_owned(), "servers".to_owned()]
    }
}

/// An entry that moves behind the gateway. (No `Debug`: `launch` may hold plain keys.)
#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Moved {
    /// Its name in the client's file.
    pub name: String,
    /// As the gateway's config will hold it.
    pub server: ServerSpec,
    /// The gateway's config already has this very server: nothing is added for it.
    pub already_in_config: bool,
    /// As the client launches it, keys in plain text: what the savings line measures before
    /// the keys are stored.
    #[serde(skip)]
    pub launch: ServerSpec,
}

/// A plain-text key moved into the secret store.
#[derive(Debug, Serialize)]
pub struct MovedKey {
    pub server: String,
    /// Where it was: `env.NAME` or `headers.NAME`.
    pub field: String,
    /// The secret's name, as `${secret:NAME}` now stands in the config.
    pub secret: String,
    #[serde(skip)]
    value: secrecy::SecretString,
}

/// An entry that stays in the client, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Kept {
    pub name: String,
    pub reason: String,
}

/// What happens to the gateway's config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ConfigAction {
    /// The file does not exist: written new.
    Create,
    /// JSON(C): the servers appended, the rest kept.
    Edit,
    /// Nothing to add (every moved server is there already).
    Unchanged,
    /// TS/JS or YAML cannot be edited safely: the user pastes the snippet; nothing is written.
    Snippet,
}

/// Everything `setup` will do, computed before anything is written.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub target: Target,
    pub moved: Vec<Moved>,
    pub kept: Vec<Kept>,
    /// Plain-text keys moved into the secret store (`secret list`).
    pub keys: Vec<MovedKey>,
    /// The client already has the gateway's entry.
    pub gateway_present: bool,
    /// The entry that replaces the moved ones.
    pub gateway_entry: Value,
    pub config_file: PathBuf,
    pub config_action: ConfigAction,
    /// For [`ConfigAction::Snippet`]: what to add to the config's `discovery.servers`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    #[serde(skip)]
    pub client_before: String,
    #[serde(skip)]
    pub client_after: String,
    #[serde(skip)]
    pub config_before: Option<String>,
    #[serde(skip)]
    pub config_after: Option<String>,
    #[serde(skip)]
    mode: Option<u32>,
}

impl Plan {
    /// Nothing to move: the client is set up already, or has nothing the gateway could serve.
    #[must_use]
    pub fn is_noop(&self) -> bool {
        self.moved.is_empty()
    }

    /// The files [`apply`] writes (none for a snippet or a no-op).
    #[must_use]
    pub fn files_written(&self) -> Vec<&Path> {
        if self.is_noop() || self.config_action == ConfigAction::Snippet {
            return Vec::new();
        }
        let mut files = Vec::new();
        if matches!(self.config_action, ConfigAction::Create | ConfigAction::Edit) {
            files.push(self.config_file.as_path());
        }
        files.push(self.target.file.as_path());
        files
    }

    /// A unified diff of both files, for `--dry-run`.
    #[must_use]
    pub fn diff(&self) -> String {
        let mut out = String::new();
        if let Some(after) = &self.config_after {
            let before = self.config_before.as_deref().unwrap_or("");
            out.push_str(&unified(before, after, &self.config_file));
        }
        if !self.is_noop() {
            out.push_str(&unified(&self.client_before, &self.client_after, &self.target.file));
        }
        out
    }
}

fn unified(before: &str, after: &str, file: &Path) -> String {
    let name = file.display().to_string();
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&name, &name)
        .to_string()
}

/// The gateway's entry as `client` writes servers: `npx -y @anygpt/discovery`, with
/// `--config` when the gateway's config is not the one its search finds by itself.
#[must_use]
pub fn gateway_entry(client: SourceKind, config: Option<&Path>) -> Value {
    let mut args = vec![json!("-y"), json!(PACKAGE)];
    if let Some(config) = config {
        args.push(json!("--config"));
        args.push(json!(config.display().to_string()));
    }
    if client == SourceKind::Vscode {
        json!({ "type": "stdio", "command": "npx", "args": args })
    } else {
        json!({ "command": "npx", "args": args })
    }
}

/// The gateway's user config: `--config` when given, else the `~/.anygpt/mcp-discovery.config.*`
/// that exists (first by the search's extension order), else its JSON file, to be created.
///
/// # Errors
/// `CONFIGURATION_ERROR` without a home folder.
pub fn user_config(flag: Option<&Path>, env: &Environment) -> Result<PathBuf> {
    if let Some(file) = flag {
        return Ok(env.cwd.join(file));
    }
    let home = env.home.as_ref().ok_or_else(|| {
        Error::config(
            "~/.anygpt/mcp-discovery.config.json",
            "(file)",
            "no home folder on this machine: set HOME, or name the gateway's config with --config",
        )
    })?;
    let dir = home.join(".anygpt");
    Ok(EXTENSIONS
        .iter()
        .map(|ext| dir.join(format!("mcp-discovery.config.{ext}")))
        .find(|p| p.is_file())
        .unwrap_or_else(|| dir.join("mcp-discovery.config.json")))
}

/// Read the client's file and decide what moves. Writes nothing.
///
/// `config_flag`: the gateway config named by `--config` (also written into the entry).
/// `move_keys`: plain-text keys in the moved entries' `env` and `headers` go to the secret
/// store, the gateway's config gets `${secret:NAME}` references (not for a snippet, which
/// writes nothing).
///
/// # Errors
/// `CONFIGURATION_ERROR` for a client file (or gateway config) that is missing, unreadable
/// or malformed — naming the file, line and fix — or whose servers are not an object.
pub fn plan(target: Target, config_flag: Option<&Path>, move_keys: bool, env: &Environment) -> Result<Plan> {
    let origin = target.file.display().to_string();
    let client_before = read_text(
        &target.file,
        &format!(
            "not found; is {} installed? (its servers are read from this file)",
            target.client.name()
        ),
    )?;
    let client = Document::parse(&client_before, &origin)?;
    let servers = match client.value_at(&target.servers_at) {
        None => serde_json::Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => {
            return Err(Error::config(
                &origin,
                target.servers_at.join("."),
                "expected an object of named servers; fix it, then run setup again; nothing was written",
            ))
        }
    };
    let config_file = user_config(config_flag, env)?;
    let existing = existing_servers(&config_file)?;
    let (mut moved, kept, gateway_present) = sort_entries(&target, servers, &existing, env);
    let snippet_only = is_js_config(&config_file) || is_yaml(&config_file);
    let keys = if move_keys && !snippet_only {
        moved
            .iter_mut()
            .filter(|m| !m.already_in_config)
            .flat_map(|m| take_keys(&mut m.server))
            .collect()
    } else {
        Vec::new()
    };
    let explicit = config_flag.map(|_| config_file.as_path());
    let gateway_entry = gateway_entry(target.client, explicit);
    let names: Vec<String> = moved.iter().map(|m| m.name.clone()).collect();
    let client_after = if moved.is_empty() {
        client_before.clone()
    } else {
        let object = client.object_at_or_create(&target.servers_at).ok_or_else(|| {
            Error::config(
                &origin,
                target.servers_at.join("."),
                "expected an object; nothing was written",
            )
        })?;
        let add = (!gateway_present).then_some((GATEWAY_ENTRY, &gateway_entry));
        edit::replace_members(&object, &names, add);
        client.text()
    };
    let new_servers: Vec<Value> = moved
        .iter()
        .filter(|m| !m.already_in_config)
        .filter_map(|m| serde_json::to_value(&m.server).ok())
        .collect();
    let (config_action, config_before, config_after, snippet) = config_change(&config_file, &new_servers)?;
    Ok(Plan {
        mode: file_mode(&target.file),
        target,
        keys,
        moved,
        kept,
        gateway_present,
        gateway_entry,
        config_file,
        config_action,
        snippet,
        client_before,
        client_after,
        config_before,
        config_after,
    })
}

/// Which entries move and which stay (and why); whether the gateway's entry is there.
fn sort_entries(
    target: &Target,
    servers: serde_json::Map<String, Value>,
    existing: &[(String, Value)],
    env: &Environment,
) -> (Vec<Moved>, Vec<Kept>, bool) {
    let base = target.file.parent().unwrap_or(Path::new("."));
    let mut moved: Vec<Moved> = Vec::new();
    let mut kept = Vec::new();
    let mut gateway_present = false;
    for (name, value) in servers {
        match entry::to_spec(&name, &normalized_entry(target.client, value), base, env) {
            Err(entry::Skip::SelfLaunch) => gateway_present = true,
            Err(skip) => kept.push(Kept {
                name,
                reason: skip.to_string(),
            }),
            Ok(server) => {
                let connection = serde_json::to_value(&server.connection).unwrap_or_default();
                let same_name = existing.iter().find(|(n, _)| *n == server.name);
                if same_name.is_some_and(|(_, theirs)| *theirs != connection) {
                    kept.push(Kept {
                        reason: format!(
                            "the gateway's config has a different server named `{}`: rename one, then run setup again",
                            server.name
                        ),
                        name,
                    });
                } else if moved.iter().any(|m| m.server.name == server.name) {
                    kept.push(Kept {
                        reason: format!(
                            "another entry here is also named `{}` once made addressable",
                            server.name
                        ),
                        name,
                    });
                } else {
                    moved.push(Moved {
                        already_in_config: same_name.is_some(),
                        name,
                        launch: server.clone(),
                        server,
                    });
                }
            }
        }
    }
    (moved, kept, gateway_present)
}

/// The gateway config's new text, or the snippet to paste when it cannot be edited.
type ConfigChange = (ConfigAction, Option<String>, Option<String>, Option<String>);

fn config_change(file: &Path, new_servers: &[Value]) -> Result<ConfigChange> {
    if new_servers.is_empty() {
        return Ok((ConfigAction::Unchanged, None, None, None));
    }
    if is_js_config(file) || is_yaml(file) {
        let snippet = serde_json::to_string_pretty(new_servers).unwrap_or_default();
        return Ok((ConfigAction::Snippet, None, None, Some(snippet)));
    }
    let origin = file.display().to_string();
    let (action, before, document) = if file.exists() {
        let text = read_text(file, "cannot be read")?;
        let document = Document::parse(&text, &origin)?;
        (ConfigAction::Edit, Some(text), document)
    } else {
        (ConfigAction::Create, None, Document::parse("{}\n", &origin)?)
    };
    edit::append_servers(&document, new_servers, &origin)?;
    Ok((action, before, Some(document.text()), None))
}

fn is_yaml(file: &Path) -> bool {
    matches!(file.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
}

/// Move `server`'s plain-text keys (`env` and `headers` values that are credentials by name or
/// shape, and not already references) out of it: each is replaced by `${secret:NAME}`.
fn take_keys(server: &mut ServerSpec) -> Vec<MovedKey> {
    let mut keys = Vec::new();
    let prefix = secret_name_part(&server.name);
    let connection = &mut server.connection;
    for (field, map) in [("env", &mut connection.env), ("headers", &mut connection.headers)] {
        for (key, value) in map.iter_mut() {
            if value.contains("${") || crate::secrets::setting_secrets(key, value).is_empty() {
                continue;
            }
            let mut name = format!("{prefix}_{}", secret_name_part(key));
            name.truncate(64);
            let plain = std::mem::replace(value, format!("${{secret:{name}}}"));
            keys.push(MovedKey {
                server: server.name.clone(),
                field: format!("{field}.{key}"),
                secret: name,
                value: secrecy::SecretString::from(plain),
            });
        }
    }
    keys
}

/// A name as part of a secret's name: upper case, other characters `_`, starting with a letter.
fn secret_name_part(text: &str) -> String {
    let part: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        part
    } else {
        format!("_{part}")
    }
}

/// The servers the gateway's config already names: `(name, connection)`.
fn existing_servers(file: &Path) -> Result<Vec<(String, Value)>> {
    if !file.is_file() || is_js_config(file) {
        return Ok(Vec::new());
    }
    let value = crate::config::document::read_document(file)?;
    let servers = value
        .pointer("/discovery/servers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Ok(servers
        .into_iter()
        .filter_map(|s| {
            let name = s.get("name")?.as_str()?.to_owned();
            // As the gateway reads it (defaults filled in), to compare with a client's entry.
            let connection = s
                .get("connection")
                .cloned()
                .and_then(|c| serde_json::from_value::<crate::config::ConnectionSpec>(c).ok())
                .and_then(|c| serde_json::to_value(c).ok())
                .unwrap_or(Value::Null);
            Some((name, connection))
        })
        .collect())
}

fn read_text(file: &Path, missing: &str) -> Result<String> {
    let origin = file.display().to_string();
    match std::fs::read(file) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| {
            Error::config(
                &origin,
                "(file)",
                "not UTF-8 text: save it as UTF-8, then run the command again; nothing was written",
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::config(&origin, "(file)", missing)),
        Err(e) => Err(Error::config(&origin, "(file)", format!("cannot read it: {e}"))),
    }
}

fn file_mode(file: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(file).ok().map(|m| m.permissions().mode() & 0o7777)
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        None
    }
}

/// Carry out `plan`: back up the client's file, write the gateway's config, then the client's
/// file. A no-op or a snippet plan writes nothing.
///
/// # Errors
/// `CONFIGURATION_ERROR` naming the file that could not be written; files written before it
/// stay valid (a server may then be in both, never in neither).
pub fn apply(plan: &Plan) -> Result<()> {
    if plan.is_noop() || plan.config_action == ConfigAction::Snippet {
        return Ok(());
    }
    let client = plan.target.client.name();
    let backup_path = backup::path_for(client, &plan.target.file)?;
    backup::save(
        &backup_path,
        &backup::Backup {
            client: client.to_owned(),
            file: plan.target.file.clone(),
            original: plan.client_before.clone(),
            mode: plan.mode,
            written: backup::text_hash(&plan.client_after),
            saved_at_ms: backup::now_ms(),
        },
    )?;
    // Before the config that refers to them.
    for key in &plan.keys {
        use secrecy::ExposeSecret;
        crate::secret_store::set(&key.secret, key.value.expose_secret())?;
    }
    if let Some(text) = &plan.config_after {
        write_config(&plan.config_file, text)?;
    }
    crate::paths::write_atomic_keeping_mode(&plan.target.file, plan.client_after.as_bytes(), plan.mode)
        .map_err(|e| cannot_write(&plan.target.file, &e))
}

fn cannot_write(file: &Path, e: &std::io::Error) -> Error {
    Error::config(file.display().to_string(), "(file)", format!("cannot write it: {e}"))
}

/// What `restore` did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Restored {
    pub target: Target,
    /// The client's file had changed since `setup` (restored anyway with `--force`); its
    /// text then was kept here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced_kept_at: Option<PathBuf>,
}

/// Put the client's file back as it was before `setup`, byte for byte.
///
/// # Errors
/// `CONFIGURATION_ERROR` when there is no backup, or the file changed since `setup` and not
/// `force` (nothing is written then).
pub fn restore(target: Target, force: bool) -> Result<Restored> {
    let client = target.client.name();
    let origin = target.file.display().to_string();
    let backup_path = backup::path_for(client, &target.file)?;
    let Some(saved) = backup::load(&backup_path)? else {
        return Err(Error::config(
            &origin,
            "(file)",
            format!("nothing to restore: `anygpt-discovery setup {client}` has not changed this file (or it was restored already)"),
        ));
    };
    let current = std::fs::read(&target.file).ok();
    let unchanged = current
        .as_deref()
        .is_some_and(|bytes| format!("{:016x}", crate::hash::fnv1a(bytes)) == saved.written);
    let mut replaced_kept_at = None;
    if !unchanged {
        if !force {
            return Err(Error::config(
                &origin,
                "(file)",
                "changed since setup wrote it: restoring would lose those changes; nothing was written. \
                 Pass --force to restore anyway (the current file is kept in the backup folder)",
            ));
        }
        if let Some(bytes) = &current {
            let kept = backup_path.with_extension("replaced.json");
            crate::paths::write_atomic(&kept, bytes, crate::paths::Durability::Durable)
                .map_err(|e| cannot_write(&kept, &e))?;
            replaced_kept_at = Some(kept);
        }
    }
    crate::paths::write_atomic_keeping_mode(&target.file, saved.original.as_bytes(), saved.mode)
        .map_err(|e| cannot_write(&target.file, &e))?;
    let _ = std::fs::remove_file(&backup_path);
    Ok(Restored {
        target,
        replaced_kept_at,
    })
}

/// What [`add_server`] did.
pub enum Added {
    /// The config file was written (created if it did not exist).
    Written { created: bool },
    /// The config is TS/JS or YAML: this JSON goes into its `discovery.servers`; nothing written.
    Snippet(String),
}

/// Add `server` to the gateway's config `file` the way `setup` does: a JSON(C) file edited in
/// place (created owner-only when absent), a TS/JS or YAML one left alone with a snippet.
///
/// # Errors
/// `VALIDATION_ERROR` when the config already has a server of that name; `CONFIGURATION_ERROR`
/// for a config that is malformed or cannot be written.
pub fn add_server(file: &Path, server: &ServerSpec) -> Result<Added> {
    if existing_servers(file)?.iter().any(|(name, _)| *name == server.name) {
        return Err(Error::validation(format!(
            "{} already has a server named `{}`: pick another name with --name, or `anygpt-discovery remove {}` first",
            file.display(),
            server.name,
            server.name
        )));
    }
    let value = serde_json::to_value(server).unwrap_or_default();
    match config_change(file, std::slice::from_ref(&value))? {
        (ConfigAction::Snippet, _, _, snippet) => Ok(Added::Snippet(snippet.unwrap_or_default())),
        (action, _, Some(text), _) => {
            write_config(file, &text)?;
            Ok(Added::Written {
                created: action == ConfigAction::Create,
            })
        }
        _ => Ok(Added::Written { created: false }),
    }
}

/// Remove the server `name` from the gateway's config `file` (its element of
/// `discovery.servers`, comma and all); whether there was one.
///
/// # Errors
/// `CONFIGURATION_ERROR` for a TS/JS or YAML config (edit it by hand), or one that is missing,
/// malformed or cannot be written.
pub fn remove_server(file: &Path, name: &str) -> Result<bool> {
    let origin = file.display().to_string();
    if is_js_config(file) || is_yaml(file) {
        return Err(Error::config(
            &origin,
            "discovery.servers",
            format!("TS/JS and YAML configs are not edited by the CLI: delete the server `{name}` there by hand"),
        ));
    }
    if !file.exists() {
        return Ok(false);
    }
    let text = read_text(file, "cannot be read")?;
    let document = Document::parse(&text, &origin)?;
    let Some(servers) = document
        .root
        .object_value()
        .and_then(|o| o.object_value("discovery"))
        .and_then(|d| d.array_value("servers"))
    else {
        return Ok(false);
    };
    let found = servers.elements().into_iter().find(|element| {
        element
            .as_object()
            .and_then(|o| o.get("name"))
            .and_then(|p| p.value())
            .and_then(|v| v.as_string_lit())
            .and_then(|s| s.decoded_value().ok())
            .is_some_and(|n| n == name)
    });
    let Some(element) = found else {
        return Ok(false);
    };
    element.remove();
    write_config(file, &document.text())?;
    Ok(true)
}

/// Write the gateway's config: atomically, keeping an existing file's mode (owner-only when new).
fn write_config(file: &Path, text: &str) -> Result<()> {
    let written = match file_mode(file) {
        Some(mode) => crate::paths::write_atomic_keeping_mode(file, text.as_bytes(), Some(mode)),
        None => crate::paths::write_atomic(file, text.as_bytes(), crate::paths::Durability::Durable),
    };
    written.map_err(|e| cannot_write(file, &e))
}

/// Whether the gateway's config `file` already has a server named `name`.
///
/// # Errors
/// A config that cannot be read or is malformed.
pub fn has_server(file: &Path, name: &str) -> Result<bool> {
    Ok(existing_servers(file)?.iter().any(|(n, _)| n == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(dir: &Path) -> Environment {
        Environment {
            cwd: dir.join("project"),
            home: Some(dir.join("home")),
            config_dir: Some(dir.join("home/.config")),
            config_env: None,
            state_dir: Some(dir.join("state")),
        }
    }

    #[test]
    fn a_server_the_config_has_already_moves_without_a_copy_and_a_different_one_stays() {
        let dir = tempfile::tempdir().unwrap();
        let env = machine(dir.path());
        let gateway = dir.path().join("home/.anygpt/mcp-discovery.config.json");
        std::fs::create_dir_all(gateway.parent().unwrap()).unwrap();
        // Written by hand, without the `type` the gateway fills in.
        std::fs::write(
            &gateway,
            r#"{ "discovery": { "servers": [
                { "name": "same", "connection": { "command": "x", "args": ["1"] } },
                { "name": "other", "connection": { "command": "y" } }
            ] } }"#,
        )
        .unwrap();
        let client = dir.path().join("home/.cursor/mcp.json");
        std::fs::create_dir_all(client.parent().unwrap()).unwrap();
        std::fs::write(
            &client,
            r#"{ "mcpServers": { "same": { "command": "x", "args": ["1"] }, "other": { "command": "z" } } }"#,
        )
        .unwrap();
        let target = target(SourceKind::Cursor, Scope::User, &env).unwrap();
        assert_eq!(target.file, client);
        let plan = plan(target, None, true, &env).unwrap();
        assert_eq!(plan.moved.len(), 1);
        assert!(plan.moved[0].already_in_config);
        assert_eq!(plan.kept[0].name, "other");
        assert!(
            plan.kept[0].reason.contains("different server named `other`"),
            "{}",
            plan.kept[0].reason
        );
        assert_eq!(plan.config_action, ConfigAction::Unchanged);
        assert!(plan.client_after.contains("\"other\""));
        assert!(!plan.client_after.contains("\"same\""));
    }

    #[test]
    fn clients_without_a_project_file_refuse_project_scope() {
        let dir = tempfile::tempdir().unwrap();
        let env = machine(dir.path());
        for client in [SourceKind::ClaudeDesktop, SourceKind::Windsurf] {
            let error = target(client, Scope::Project, &env).unwrap_err().to_string();
            assert!(error.contains("has no project file"), "{error}");
        }
        let zed = target(SourceKind::Zed, Scope::Project, &env).unwrap();
        assert_eq!(zed.file, dir.path().join("project/.zed/settings.json"));
        assert_eq!(zed.servers_at, ["context_servers"]);
    }
}
