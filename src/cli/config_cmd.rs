//! `config show | validate | sources | path` (issue 12 part 7; seed 003 "anygpt mcp config"):
//! the configuration as the engine reads it, without connecting any server. Secrets are
//! masked as `Config::redacted` does: `${GITHUB_TOKEN}` is shown as written (it names a
//! secret), literal secrets as `***`. Exit 0, or 2 for a configuration error.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Subcommand;
use serde::Serialize;

use crate::gateway::exposed::ExposedCost;
use serde_json::Value;

use super::output::json::ErrorDetail;
use super::output::style::Paint;
use super::output::{exit, Ui};
use super::Options;
use crate::config::locate::Chosen;
use crate::config::{locate, Config, DiscoverySection, Environment, Located};

#[derive(Debug, Clone, Copy, Subcommand)]
pub enum ConfigCommand {
    /// The configuration in use: sources, tool rules and servers, secrets masked.
    Show,
    /// Check the configuration: exit 0 when it loads (warnings listed), 2 naming the problem.
    Validate,
    /// Every MCP client config looked at for servers, found or not, and what each held.
    Sources,
    /// Which config file the search order picks, and every place it looks.
    Path,
    /// Make the gateways serving this config (or `--all`) re-read it now (exit 2: one
    /// reported an error and keeps its previous config, or none is serving).
    Reload(super::reload::ReloadArgs),
}

/// Whether `command` reads the config (`path` and `reload` only locate it).
#[must_use]
pub fn reads_config(command: ConfigCommand) -> bool {
    !matches!(command, ConfigCommand::Path | ConfigCommand::Reload(_))
}

pub async fn run(command: ConfigCommand, options: &Options, ui: &Ui) -> i32 {
    match command {
        ConfigCommand::Path => path(options, ui),
        ConfigCommand::Validate => validate(options, ui),
        ConfigCommand::Reload(args) => super::reload::run(args, options, ui),
        ConfigCommand::Show | ConfigCommand::Sources => {
            let config = match super::load_config(options.config.as_ref(), options.object.clone()) {
                Ok(config) => config,
                Err(e) => return ui.error(&e),
            };
            if matches!(command, ConfigCommand::Show) {
                let exposed = exposed_cost(&config).await;
                show(&config, exposed.as_ref(), ui);
            } else {
                sources(&config, ui);
            }
            exit::OK
        }
    }
}

fn chosen_by(located: &Located) -> Option<&'static str> {
    located.chosen.map(|chosen| match chosen {
        Chosen::Flag => "--config",
        Chosen::EnvVar => crate::config::CONFIG_ENV,
        Chosen::Search => "search",
    })
}

/// `config path --json`: `{"file": path|null, "chosenBy": "--config"|"ANYGPT_DISCOVERY_CONFIG"|"search"|null,
/// "scope": "user"|"project", "looked": [...], "skipped": [{file, reason, fix}], "shadowed": [path]}`:
/// `skipped` are project configs passed over for want of approval, `shadowed` files later in
/// the order that lost to `file`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PathReport<'a> {
    file: Option<&'a PathBuf>,
    chosen_by: Option<&'static str>,
    scope: crate::consent::Scope,
    looked: &'a [String],
    skipped: &'a [crate::consent::Skipped],
    shadowed: &'a [PathBuf],
}

/// Why the winner won, in words.
fn why_chosen(located: &Located) -> &'static str {
    match (located.chosen, located.scope) {
        (Some(Chosen::Flag), _) => "named by --config: your own file",
        (Some(Chosen::EnvVar), _) => "named by $ANYGPT_DISCOVERY_CONFIG: your own file",
        (Some(Chosen::Search), crate::consent::Scope::Project) => {
            "a project config you approved; it comes before your own in the search order"
        }
        (Some(Chosen::Search), crate::consent::Scope::User) => "your own config, found by the search order",
        (None, _) => "",
    }
}

fn path(options: &Options, ui: &Ui) -> i32 {
    let located = locate(options.config.as_deref(), &Environment::current());
    let report = PathReport {
        file: located.file.as_ref(),
        chosen_by: chosen_by(&located),
        scope: located.scope,
        looked: &located.looked,
        skipped: &located.skipped,
        shadowed: &located.shadowed,
    };
    ui.result(&report, || {
        let p = ui.out;
        let mut out = match &located.file {
            Some(file) => format!(
                "{} {} ({})\n",
                p.bold("Config file:"),
                file.display(),
                why_chosen(&located)
            ),
            None => format!(
                "{} none: zero-config imports every MCP client's config found (`config sources` lists them)\n",
                p.bold("Config file:")
            ),
        };
        for skip in &located.skipped {
            let _ = writeln!(out, "{} {}", p.warn("Not used:"), skip.line());
        }
        if !located.skipped.is_empty() {
            let instead = if located.file.is_some() {
                "the file above is used instead"
            } else {
                "zero-config is used instead"
            };
            let _ = writeln!(out, "  (an unapproved project config never wins: {instead})");
        }
        for file in &located.shadowed {
            let _ = writeln!(
                out,
                "{} {} (later in the search order)",
                p.dim("Also found, not used:"),
                file.display()
            );
        }
        let _ = write!(out, "\n{}\n", p.bold("Search order:"));
        for (i, place) in located.looked.iter().enumerate() {
            let _ = writeln!(out, "  {}. {place}", i + 1);
        }
        if located.file.is_none() {
            out.push_str("\nTo configure servers, create ./.anygpt/mcp-discovery.config.json (or .yaml, .ts).\n");
        }
        out
    });
    exit::OK
}

/// `config validate --json`: `{"valid":true,"origin","servers","toolRules","warnings":[…]}`
/// or `{"valid":false,"error":{…}}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Validated<'a> {
    valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    origin: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    servers: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_rules: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    warnings: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorDetail>,
}

fn validate(options: &Options, ui: &Ui) -> i32 {
    let config = match super::load_config(options.config.as_ref(), options.object.clone()) {
        Ok(config) => config,
        Err(error) => {
            if ui.json {
                let body = Validated {
                    valid: false,
                    origin: None,
                    servers: None,
                    tool_rules: None,
                    warnings: None,
                    error: Some(ErrorDetail::of(&error)),
                };
                super::output::print(&super::output::json::document(&body));
                return exit::status_of(error.code());
            }
            super::output::eprint(&format!("{} ", ui.err.bad("✗")), ui.err);
            return ui.error(&error);
        }
    };
    let body = Validated {
        valid: true,
        origin: Some(&config.origin),
        servers: Some(config.servers().len()),
        tool_rules: Some(config.discovery.tool_rules.len()),
        warnings: Some(config.warnings()),
        error: None,
    };
    ui.result(&body, || {
        let p = ui.out;
        let mut out = format!(
            "{} {}: valid ({} server{}, {} tool rule{})\n",
            p.ok("✓"),
            config.origin,
            config.servers().len(),
            if config.servers().len() == 1 { "" } else { "s" },
            config.discovery.tool_rules.len(),
            if config.discovery.tool_rules.len() == 1 {
                ""
            } else {
                "s"
            },
        );
        for warning in config.warnings() {
            let _ = writeln!(out, "{} {warning}", p.warn("warning:"));
        }
        out
    });
    exit::OK
}

/// One client file looked at: whether it exists, and whether its servers were read (a file
/// that exists but does not parse is skipped, with a warning saying why).
#[derive(Serialize)]
struct SourceFile {
    path: PathBuf,
    found: bool,
    read: bool,
}

/// `config sources --json`: `{"origin","files":[{path,found,read}],"notes":[…],"warnings":[…],
/// "skipped":[{file, section?, reason, note?, fix}]}` (`skipped`: project configs not used for
/// want of approval, each with the command that approves it).
#[derive(Serialize)]
struct SourcesReport<'a> {
    origin: &'a str,
    files: Vec<SourceFile>,
    notes: &'a [String],
    warnings: &'a [String],
    skipped: &'a [crate::consent::Skipped],
}

/// Client files looked at (the config file itself left out), each found or not.
fn source_files(config: &Config) -> Vec<SourceFile> {
    let own = (!config.origin.starts_with('<')).then(|| PathBuf::from(&config.origin));
    config
        .files_to_watch()
        .into_iter()
        .filter(|path| Some(path) != own.as_ref())
        .map(|path| SourceFile {
            read: config.files_read().contains(&path),
            found: path.is_file(),
            path,
        })
        .collect()
}

fn sources(config: &Config, ui: &Ui) {
    let report = SourcesReport {
        origin: &config.origin,
        files: source_files(config),
        notes: config.notes(),
        warnings: config.warnings(),
        skipped: config.skipped(),
    };
    ui.result(&report, || {
        let p = ui.out;
        let mut out = format!("{} {}\n", p.bold("Config:"), config.origin);
        let _ = write!(
            out,
            "\n{}\n",
            p.bold(&format!("Client configs looked at ({}):", report.files.len()))
        );
        if report.files.is_empty() {
            out.push_str("  none (the config imports no other client's servers)\n");
        }
        source_lines(&mut out, &report.files, config.skipped(), p);
        if !report.skipped.is_empty() {
            let _ = write!(out, "\n{}\n", p.bold("Not used until approved:"));
            for skip in report.skipped {
                let _ = writeln!(out, "  {} {}", p.warn("!"), skip.line());
            }
        }
        if !report.notes.is_empty() {
            let _ = write!(out, "\n{}\n", p.bold("What was found:"));
            // Not wrapped: most notes are paths, which a terminal can still open whole.
            for note in report.notes {
                let _ = writeln!(out, "  {note}");
            }
        }
        for warning in report.warnings {
            let _ = writeln!(out, "{} {warning}", p.warn("warning:"));
        }
        out
    });
}

fn source_lines(out: &mut String, files: &[SourceFile], skipped: &[crate::consent::Skipped], p: Paint) {
    for file in files {
        let unapproved = skipped
            .iter()
            .find(|s| s.place.section.is_none() && s.place.file == file.path);
        if let Some(skip) = unapproved {
            let _ = writeln!(
                out,
                "  {} {} - not used until approved: {}",
                p.bad("✗"),
                file.path.display(),
                skip.fix
            );
        } else if file.read {
            let _ = writeln!(out, "  {} {}", p.ok("✓"), file.path.display());
        } else if file.found {
            let _ = writeln!(
                out,
                "  {} {} - skipped (see the warning below)",
                p.bad("✗"),
                file.path.display()
            );
        } else {
            let _ = writeln!(out, "  {} {} - not found", p.bad("✗"), file.path.display());
        }
    }
}

/// `config show --json`: `{"origin", "discovery": {…}}`, the section as written with secrets
/// masked.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown<'a> {
    origin: &'a str,
    discovery: &'a Value,
    /// What `discovery.expose` adds to the client's context, from the cached tool lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    exposed_tools: Option<&'a ExposedCost>,
}

/// The tools `discovery.expose` shows and their o200k tokens, counted on the servers' cached
/// tool lists (snapshots): no server is started for it. `None` when nothing is exposed.
async fn exposed_cost(config: &Config) -> Option<ExposedCost> {
    if config.expose().is_empty() {
        return None;
    }
    let engine = crate::engine::Engine::new(config.clone());
    engine.start_only(&[]);
    let cost = crate::gateway::exposed::cost(&engine, &crate::caller::Caller::local()).await;
    engine.close().await;
    cost
}

fn show(config: &Config, exposed: Option<&ExposedCost>, ui: &Ui) {
    let redacted = config.redacted();
    let section = &redacted["discovery"];
    let body = Shown {
        origin: &config.origin,
        discovery: section,
        exposed_tools: exposed,
    };
    ui.result(&body, || {
        // Rendered from the masked copy, so no path can print a secret.
        let masked: DiscoverySection = serde_json::from_value(section.clone()).unwrap_or_default();
        let mut text = show_human(config, &masked, ui);
        if let Some(cost) = exposed {
            let _ = write!(
                text,
                "\n{}\n  {}\n  {} tool(s) shown beside the five meta-tools, {} o200k tokens (from the cached tool lists)\n",
                ui.out.bold("Exposed:"),
                masked.expose.join(", "),
                cost.tools,
                cost.tokens
            );
        }
        text
    });
}

fn on_off(on: bool) -> &'static str {
    if on {
        "Enabled"
    } else {
        "Disabled"
    }
}

fn show_human(config: &Config, section: &DiscoverySection, ui: &Ui) -> String {
    let p = ui.out;
    let mut out = format!("{}\n\n", p.bold("MCP Discovery Configuration:"));
    let _ = writeln!(out, "Config: {}", config.origin);
    let _ = writeln!(out, "Status: {}", on_off(section.enabled));
    let cache = if section.cache.enabled {
        format!("Enabled (TTL: {}s)", section.cache.ttl)
    } else {
        "Disabled".to_owned()
    };
    let _ = writeln!(out, "Cache: {cache}");
    let files = source_files(config);
    if !files.is_empty() {
        let _ = write!(out, "\n{}\n", p.bold(&format!("Sources ({}):", files.len())));
        source_lines(&mut out, &files, config.skipped(), p);
    }
    let _ = write!(
        out,
        "\n{}\n",
        p.bold(&format!("Tool Rules ({}):", section.tool_rules.len()))
    );
    for (i, rule) in section.tool_rules.iter().enumerate() {
        let server = rule.server.as_deref().map(|s| format!("{s}: ")).unwrap_or_default();
        let decision = match rule.enabled {
            Some(true) => " → enabled",
            Some(false) => " → disabled",
            None => "",
        };
        let tags = if rule.tags.is_empty() {
            String::new()
        } else {
            format!(", tags: [{}]", rule.tags.join(", "))
        };
        let callers = rule.callers.as_ref().map(callers_line).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {}. {server}{}{decision}{tags}{callers}",
            i + 1,
            rule.pattern.as_slice().join(", ")
        );
    }
    let servers = if section.enabled {
        section.servers.as_slice()
    } else {
        &[]
    };
    let _ = write!(
        out,
        "\n{}\n",
        p.bold(&format!("Servers ({} configured):", servers.len()))
    );
    for server in servers {
        let conn = &server.connection;
        let how = match (&conn.command, &conn.url) {
            (Some(command), _) => {
                let mut line = command.clone();
                for arg in &conn.args {
                    line.push(' ');
                    line.push_str(arg);
                }
                format!("stdio: {line}")
            }
            (None, Some(url)) => format!(
                "{}: {url}",
                serde_json::to_value(conn.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            ),
            (None, None) => "(no command or url)".to_owned(),
        };
        let _ = writeln!(out, "  {} {}", p.name(&server.name), p.dim(&how));
        for (title, map) in [("env", &conn.env), ("headers", &conn.headers)] {
            if !map.is_empty() {
                let pairs: Vec<String> = map.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let _ = writeln!(out, "    {title}: {}", pairs.join(", "));
            }
        }
    }
    out
}

/// A caller rule's callers in `config show`: ` for subjects [alice] or groups [admins]`.
fn callers_line(callers: &crate::config::CallersSpec) -> String {
    let lists: Vec<String> = [("subjects", &callers.subjects), ("groups", &callers.groups)]
        .into_iter()
        .filter_map(|(field, list)| list.as_ref().map(|l| format!("{field} [{}]", l.join(", "))))
        .collect();
    format!(" for {}", lists.join(" or "))
}
