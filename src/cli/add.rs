//! `anygpt-discovery add <ref>`, `remove <name>` and `registry search <query>`: servers into and
//! out of the gateway's user config, from the MCP Registry (`crate::mcp_registry`), npm, `PyPI`
//! or a remote URL.
//!
//! `add` asks for the variables and headers a server requires (on a terminal; secret ones
//! unseen) or takes them from `--env NAME=VALUE`; secret values go to the secret store and the
//! config gets `${secret:NAME}` references. The config is edited as `setup` edits it. Exit
//! codes: 0 done, 1 bad arguments (a missing required value, a name in use), 2 not found in
//! the registry, a registry that fails, or a config error.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::io::IsTerminal;
use std::path::Path;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::output::{exit, Ui};
use crate::config::Environment;
use crate::error::Error;
use crate::mcp_registry::{self, Match, ServerJson};
use crate::setup::{self, Added};

#[derive(Debug, Args)]
pub struct AddArgs {
    /// A name in the MCP Registry (`io.github.owner/server`), `npm:<package>[@version]`,
    /// `pypi:<package>[==version]`, or the `https://` URL of a remote server.
    reference: String,
    /// The server's name in the config (default: the last part of its registry name).
    #[arg(long)]
    name: Option<String>,
    /// A value for an environment variable (a header, for a remote server): NAME=VALUE.
    /// Repeatable. Secret ones are stored in the keychain, never in the config.
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = parse_pair)]
    env: Vec<(String, String)>,
    /// The registry's base URL (default: `$ANYGPT_DISCOVERY_REGISTRY`, else the config's
    /// `discovery.registry`, else the official one).
    #[arg(long, value_name = "URL")]
    registry: Option<String>,
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The server's name in the gateway's config.
    name: String,
}

#[derive(Debug, Args)]
pub struct RegistryArgs {
    #[command(subcommand)]
    action: RegistryAction,
}

#[derive(Debug, Subcommand)]
enum RegistryAction {
    /// Servers whose name contains the query: name, description, version, how each would run.
    Search {
        query: String,
        /// The registry's base URL (default: `$ANYGPT_DISCOVERY_REGISTRY`, else the config's
        /// `discovery.registry`, else the official one).
        #[arg(long, value_name = "URL")]
        registry: Option<String>,
    },
}

/// Why a `--env` is refused.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not NAME=VALUE")]
struct BadPair(String);

fn parse_pair(text: &str) -> Result<(String, String), BadPair> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => Ok((name.trim().to_owned(), value.to_owned())),
        _ => Err(BadPair(text.to_owned())),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AddReport<'a> {
    name: &'a str,
    from: &'a str,
    runs: String,
    server: serde_json::Value,
    config_file: &'a Path,
    /// Secrets stored for it (`secret list`), by name.
    secrets: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    snippet: Option<String>,
}

/// Run `add`; returns the exit code.
pub async fn run_add(args: &AddArgs, config: Option<&Path>, ui: &Ui) -> i32 {
    let server = if let Some(server) = mcp_registry::direct(&args.reference) {
        server
    } else {
        let base = mcp_registry::base_url(args.registry.as_deref(), configured_registry(config));
        match mcp_registry::find(&base, &args.reference).await {
            Ok(server) => server,
            Err(e) => return ui.error(&e),
        }
    };
    match add(args, &server, config, ui) {
        Ok(code) => code,
        Err(e) => ui.error_hinted(&e, None),
    }
}

fn add(args: &AddArgs, server: &ServerJson, config: Option<&Path>, ui: &Ui) -> crate::Result<i32> {
    let name = args.name.clone().unwrap_or_else(|| mcp_registry::default_name(server));
    if name.is_empty() || name.contains(':') || name.chars().any(char::is_whitespace) {
        return Err(Error::validation(format!(
            "server name `{name}`: no `:` or spaces (tools are addressed as server:tool); pick one with --name"
        )));
    }
    let env = Environment::current();
    let file = setup::user_config(config, &env)?;
    if setup::has_server(&file, &name)? {
        return Err(Error::validation(format!(
            "{} already has a server named `{name}`: pick another name with --name, or `anygpt-discovery remove {name}` first",
            file.display()
        )));
    }
    let (values, secrets) = values_for(server, &name, &args.env, ui)?;
    let spec = mcp_registry::to_spec(server, &name, &values)?;
    // The secrets first: the config names them.
    let mut stored = Vec::new();
    for (secret, value) in secrets {
        crate::secret_store::set(&secret, &value)?;
        stored.push(secret);
    }
    let added = setup::add_server(&file, &spec)?;
    let report = AddReport {
        name: &name,
        from: &args.reference,
        runs: mcp_registry::how_it_runs(server),
        server: mcp_registry::spec_value(&spec),
        config_file: &file,
        secrets: stored,
        snippet: match &added {
            Added::Snippet(text) => Some(text.clone()),
            Added::Written { .. } => None,
        },
    };
    ui.result(&report, || match &added {
        Added::Written { created } => format!(
            "added {name} ({}) to {}{}{}\n",
            report.runs,
            file.display(),
            if *created { " (created)" } else { "" },
            stored_note(&report.secrets)
        ),
        Added::Snippet(text) => format!(
            "{} is evaluated code or YAML, which the CLI does not edit: add this to its `discovery.servers`{}:\n{text}\n",
            file.display(),
            stored_note(&report.secrets)
        ),
    });
    Ok(exit::OK)
}

fn stored_note(secrets: &[String]) -> String {
    if secrets.is_empty() {
        String::new()
    } else {
        format!("; secrets stored in the keychain: {}", secrets.join(", "))
    }
}

/// A value per input: `--env`, else asked on a terminal when required. Secret values become
/// `${secret:SERVER_NAME}` references, returned with the values to store.
type Values = (BTreeMap<String, String>, Vec<(String, String)>);

fn values_for(server: &ServerJson, name: &str, given: &[(String, String)], ui: &Ui) -> crate::Result<Values> {
    let inputs = mcp_registry::inputs(server);
    let mut values = BTreeMap::new();
    let mut secrets = Vec::new();
    let mut secret_value = |input_name: &str, value: String, values: &mut BTreeMap<String, String>| {
        let secret = secret_name(name, input_name);
        values.insert(input_name.to_owned(), format!("${{secret:{secret}}}"));
        secrets.push((secret, value));
    };
    for input in &inputs {
        let value = match given.iter().rev().find(|(n, _)| *n == input.name) {
            Some((_, value)) => Some(value.clone()),
            None if input.is_required && input.value.is_none() => Some(ask(input, ui)?),
            None => None,
        };
        match value {
            Some(value) if input.is_secret => secret_value(&input.name, value, &mut values),
            Some(value) => {
                values.insert(input.name.clone(), value);
            }
            None => {}
        }
    }
    // Values for names the server.json does not list: kept, secret ones by name or shape.
    for (key, value) in given.iter().filter(|(n, _)| !inputs.iter().any(|i| i.name == *n)) {
        if crate::secrets::setting_secrets(key, value).is_empty() {
            values.insert(key.clone(), value.clone());
        } else {
            secret_value(key, value.clone(), &mut values);
        }
    }
    Ok((values, secrets))
}

fn secret_name(server: &str, input: &str) -> String {
    let part = |t: &str| -> String {
        t.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect()
    };
    let mut name = format!("{}_{}", part(server), part(input));
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    name.truncate(64);
    name
}

/// Ask for a required value on the terminal (unseen when secret).
fn ask(input: &mcp_registry::Input, ui: &Ui) -> crate::Result<String> {
    if !std::io::stdin().is_terminal() || ui.json {
        return Err(Error::validation(format!(
            "`{}` is required{}: pass --env {}=VALUE",
            input.name,
            input
                .description
                .as_deref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default(),
            input.name
        )));
    }
    let term = console::Term::stderr();
    let _ = term.write_str(&format!(
        "{}{}: ",
        input.name,
        input
            .description
            .as_deref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default()
    ));
    let read = if input.is_secret {
        term.read_secure_line()
    } else {
        term.read_line()
    };
    let value = read.map_err(|e| Error::validation(format!("cannot read `{}`: {e}", input.name)))?;
    if value.is_empty() {
        return Err(Error::validation(format!(
            "`{}` is required: nothing was written",
            input.name
        )));
    }
    Ok(value)
}

/// `discovery.registry` of the config in use (`--config`, else the search order), when it is a
/// JSON or YAML file that says one; a config that cannot be read says nothing here.
fn configured_registry(flag: Option<&Path>) -> Option<String> {
    let env = Environment::current();
    let file = crate::config::locate(flag, &env).file?;
    if crate::config::locate::is_js_config(&file) {
        return None;
    }
    let value = crate::config::document::read_document(&file).ok()?;
    let section = if value.get("discovery").is_some() {
        value.get("discovery")?
    } else {
        &value
    };
    section.get("registry")?.as_str().map(str::to_owned)
}

/// Run `remove`; returns the exit code.
pub fn run_remove(args: &RemoveArgs, config: Option<&Path>, ui: &Ui) -> i32 {
    let env = Environment::current();
    let outcome = setup::user_config(config, &env)
        .and_then(|file| setup::remove_server(&file, &args.name).map(|removed| (file, removed)));
    match outcome {
        Ok((file, true)) => {
            ui.result(
                &serde_json::json!({ "name": args.name, "removed": true, "configFile": file }),
                || format!("removed {} from {}\n", args.name, file.display()),
            );
            exit::OK
        }
        Ok((file, false)) => ui.error(&Error::ServerNotFound {
            server: format!("{} (in {})", args.name, file.display()),
            suggestions: Vec::new(),
        }),
        Err(e) => ui.error_hinted(&e, None),
    }
}

/// Run `registry search`; returns the exit code (2 when nothing matches).
pub async fn run_registry(args: &RegistryArgs, config: Option<&Path>, ui: &Ui) -> i32 {
    let RegistryAction::Search { query, registry } = &args.action;
    let base = mcp_registry::base_url(registry.as_deref(), configured_registry(config));
    match mcp_registry::search(&base, query).await {
        Ok(found) => {
            let matches: Vec<Match> = found.iter().map(Match::from).collect();
            ui.result(&serde_json::json!({ "registry": base, "servers": matches }), || {
                if matches.is_empty() {
                    return format!("no server in {base} matches `{query}`\n");
                }
                let mut out = String::new();
                for m in &matches {
                    let _ = writeln!(
                        out,
                        "{} {}\n  {}\n  runs: {}",
                        m.name,
                        m.version.as_deref().unwrap_or(""),
                        m.description.as_deref().unwrap_or("(no description)"),
                        m.runs
                    );
                }
                out
            });
            if matches.is_empty() {
                exit::NOT_FOUND
            } else {
                exit::OK
            }
        }
        Err(e) => ui.error_hinted(&e, None),
    }
}
