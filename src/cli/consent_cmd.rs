//! `allow [FILE] | allow --list | deny [FILE]`: approving project configs, as direnv's
//! `allow` does. `allow` prints what the file would do (`consent::plan`), asks the person on
//! the terminal, and records the approval of exactly the content shown. Without a terminal it
//! needs `--yes`: a script (or an agent with a shell, told of the command by the gateway's
//! hint) does not approve a repository by default. Without FILE: every project config found
//! from the current folder. Nothing is run, contacted, expanded or evaluated here. Exit 0; 1
//! when not confirmed; 2 when there is nothing to approve or a file cannot be read or recorded.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use super::output::style::Paint;
use super::output::{exit, Ui};
use crate::config::locate::project_config_files;
use crate::config::Environment;
use crate::consent::plan::{self, Plan};
use crate::consent::{self, claude, Approvals, Decision, Place};
use crate::error::{Error, ErrorCode};

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  anygpt-discovery allow                  every project config in this folder\n  anygpt-discovery allow .mcp.json\n  anygpt-discovery allow --list --json"
)]
pub struct AllowArgs {
    /// The project config to approve (default: every one found from this folder).
    #[arg(value_name = "FILE", conflicts_with = "list")]
    file: Option<PathBuf>,
    /// List the recorded approvals and denials, and whether each file still matches.
    #[arg(long)]
    list: bool,
    /// Approve without asking, after reading the plan (for scripts; there is no terminal to ask on).
    #[arg(long, short = 'y', conflicts_with = "list")]
    yes: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  anygpt-discovery deny .mcp.json")]
pub struct DenyArgs {
    /// The project config to deny (default: every one found from this folder).
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

/// `allow --json` / `deny --json`: `{"decision","places":[{file, section?, sha256, plan}]}`.
#[derive(Serialize)]
struct Recorded {
    decision: Decision,
    places: Vec<RecordedPlace>,
}

#[derive(Serialize)]
struct RecordedPlace {
    sha256: String,
    plan: Plan,
}

pub fn allow(args: &AllowArgs, ui: &Ui) -> i32 {
    let env = Environment::current();
    if args.list {
        return list(&env, ui);
    }
    record(args.file.as_ref(), Decision::Allow, args.yes, &env, ui)
}

pub fn deny(args: &DenyArgs, ui: &Ui) -> i32 {
    // Denying needs no yes: it only ever stops things.
    record(args.file.as_ref(), Decision::Deny, true, &Environment::current(), ui)
}

fn record(file: Option<&PathBuf>, decision: Decision, confirmed: bool, env: &Environment, ui: &Ui) -> i32 {
    let places = match file {
        Some(file) => match place_of(file, env) {
            Ok(place) => vec![place],
            Err(error) => return ui.error(&error),
        },
        None => places_here(env),
    };
    if places.is_empty() {
        return ui.fail(
            ErrorCode::ConfigurationError,
            &format!(
                "no project config found from {} (looked for ./.anygpt/mcp-discovery.config.*, ./anygpt.config.*, {})",
                env.cwd.display(),
                consent::PROJECT_CLIENT_FILES.map(|f| format!("./{f}")).join(", ")
            ),
            Some("name the file: `anygpt-discovery allow FILE`"),
        );
    }
    // Each place's content as it is shown: what is approved is checked to be the same.
    let mut shown = Vec::new();
    for place in places {
        let seen = place.hash().ok();
        let plan = match plan::describe(&place, env) {
            Ok(plan) => plan,
            // A file that does not parse can still be denied.
            Err(_) if decision == Decision::Deny => plan_unread(&place),
            Err(error) => return ui.error(&error),
        };
        shown.push((place, seen, plan));
    }
    let asked = !confirmed;
    if asked {
        if !ui.json {
            let plans: String = shown.iter().map(|(_, _, plan)| plan_text(plan, ui.out)).collect();
            super::output::print_human(&plans, ui.out);
        }
        if !super::output::confirm(ui, "Approve: let the gateway run what is shown above? [y/N] ") {
            return not_confirmed(ui);
        }
    }
    let mut approvals = Approvals::load(env);
    let mut recorded = Vec::new();
    for (place, seen, plan) in shown {
        match approvals.record_seen(&place, decision, seen.as_deref()) {
            Ok(entry) => recorded.push(RecordedPlace {
                sha256: entry.sha256,
                plan,
            }),
            Err(error) => return ui.fail(ErrorCode::ConfigurationError, &error.to_string(), None),
        }
    }
    let body = Recorded {
        decision,
        places: recorded,
    };
    ui.result(&body, || {
        let mut out = String::new();
        for place in &body.places {
            if !asked {
                out.push_str(&plan_text(&place.plan, ui.out));
            }
            let short = &place.sha256[..12.min(place.sha256.len())];
            let _ = match decision {
                Decision::Allow => writeln!(
                    out,
                    "{} approved (sha256 {short}…): it is used from now on; once it changes, nothing from it runs until approved again.\n",
                    ui.out.ok("✓")
                ),
                Decision::Deny => writeln!(
                    out,
                    "{} denied: nothing from it runs (`anygpt-discovery allow {}` to change that).\n",
                    ui.out.bad("✗"),
                    place.plan.place.file.display()
                ),
            };
        }
        out
    });
    exit::OK
}

/// `allow` without a yes: nothing recorded, exit 1, and how to give one.
fn not_confirmed(ui: &Ui) -> i32 {
    let (message, hint) = if super::output::can_ask(ui) {
        ("not approved: nothing was recorded", None)
    } else {
        (
            "not approved: `allow` asks for a yes on a terminal and there is none here; nothing was recorded",
            Some("read the plan, then run it again with --yes (or in a terminal)"),
        )
    };
    ui.fail(ErrorCode::ValidationError, message, hint)
}

/// `FILE` as a place: `~/.claude.json` means its section for this folder, any other file
/// itself.
fn place_of(file: &PathBuf, env: &Environment) -> crate::Result<Place> {
    let path = env.cwd.join(file);
    let origin = path.display().to_string();
    if !path.is_file() {
        return Err(Error::config(
            &origin,
            "(file)",
            "not found: name an existing config file",
        ));
    }
    let claude_file = claude::file(env).filter(|c| consent::real_path(c) == consent::real_path(&path));
    if let Some(claude_file) = claude_file {
        let document = crate::config::read_document(&claude_file)?;
        let section = claude::local_section(&document, env).ok_or_else(|| {
            Error::config(
                &origin,
                "projects",
                format!(
                    "Claude Code keeps no servers for {} there: nothing to approve",
                    env.cwd.display()
                ),
            )
        })?;
        return Ok(Place {
            file: claude_file,
            section: Some(section),
        });
    }
    Ok(Place::file(&path))
}

/// Every project place found from the starting folder that exists.
fn places_here(env: &Environment) -> Vec<Place> {
    let mut places: Vec<Place> = project_config_files(env).iter().map(|f| Place::file(f)).collect();
    if consent::cwd_is_project(env) {
        places.extend(
            consent::PROJECT_CLIENT_FILES
                .iter()
                .map(|f| env.cwd.join(f))
                .filter(|p| p.is_file())
                .map(|p| Place::file(&p)),
        );
        if let Some(file) = claude::file(env).filter(|f| f.is_file()) {
            if let Ok(document) = crate::config::read_document(&file) {
                if let Some(section) = claude::local_section(&document, env) {
                    places.push(Place {
                        file,
                        section: Some(section),
                    });
                }
            }
        }
    }
    places
}

fn plan_unread(place: &Place) -> Plan {
    Plan {
        place: place.clone(),
        kind: "unreadable".into(),
        code: false,
        servers: Vec::new(),
        sources: Vec::new(),
        paths: Vec::new(),
        variables: Vec::new(),
    }
}

/// The plan for a person: one line a server, then what else it names.
fn plan_text(plan: &Plan, p: Paint) -> String {
    let mut out = format!("{} ({}):\n", p.bold(&plan.place.shown()), plan.kind);
    if plan.code {
        out.push_str(
            "  TypeScript/JavaScript: code that runs with your rights each time the gateway starts through \
             the npm package. What it does cannot be shown without running it: read it before approving.\n",
        );
    }
    if plan.servers.is_empty() && !plan.code {
        out.push_str("  no servers\n");
    }
    for server in &plan.servers {
        let mut line = format!("  {} ", p.name(&server.name));
        if let Some(why) = &server.not_run {
            let _ = write!(line, "{}", p.dim(&format!("not run: {why}")));
        } else if let Some(command) = &server.command {
            let mut words = vec![command.clone()];
            words.extend(server.args.iter().cloned());
            let _ = write!(
                line,
                "runs: {}",
                words.iter().map(|w| quoted(w)).collect::<Vec<_>>().join(" ")
            );
            if let Some(cwd) = &server.cwd {
                let _ = write!(line, " (in {cwd})");
            }
            if !server.env.is_empty() {
                let _ = write!(line, "; env: {}", server.env.join(", "));
            }
        } else if let Some(url) = &server.url {
            let _ = write!(line, "connects to: {url}");
            if !server.headers.is_empty() {
                let _ = write!(line, "; headers: {}", server.headers.join(", "));
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    for (title, list) in [
        ("imports", &plan.sources),
        ("names paths", &plan.paths),
        ("reads variables", &plan.variables),
    ] {
        if !list.is_empty() {
            let _ = writeln!(out, "  {title}: {}", list.join(", "));
        }
    }
    out
}

/// A word as a shell would need it, so `sh -c "touch x"` reads as it runs.
fn quoted(word: &str) -> String {
    if !word.is_empty() && !word.contains(|c: char| c.is_whitespace() || "\"'$`\\;&|<>()*?".contains(c)) {
        word.to_owned()
    } else {
        format!("\"{}\"", word.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// `allow --list --json`: `{"approvals":[{file, section?, decision, sha256, at, state}]}`,
/// `state` one of `current`, `changed`, `missing`.
#[derive(Serialize)]
struct Listed {
    approvals: Vec<ListedEntry>,
}

#[derive(Serialize)]
struct ListedEntry {
    #[serde(flatten)]
    entry: consent::store::Entry,
    state: &'static str,
}

fn list(env: &Environment, ui: &Ui) -> i32 {
    let approvals = Approvals::load(env);
    let listed = Listed {
        approvals: approvals
            .entries()
            .map(|entry| {
                let place = Place {
                    file: entry.file.clone(),
                    section: entry.section.clone(),
                };
                let state = match place.hash() {
                    _ if !entry.file.is_file() => "missing",
                    Ok(hash) if hash == entry.sha256 => "current",
                    _ => "changed",
                };
                ListedEntry {
                    entry: entry.clone(),
                    state,
                }
            })
            .collect(),
    };
    ui.result(&listed, || {
        let p = ui.out;
        if listed.approvals.is_empty() {
            return "No project config approved or denied yet (`anygpt-discovery allow` in a project folder).\n".into();
        }
        let mut out = String::new();
        for item in &listed.approvals {
            let place = Place {
                file: item.entry.file.clone(),
                section: item.entry.section.clone(),
            };
            let decision = match item.entry.decision {
                Decision::Allow => p.ok("allowed"),
                Decision::Deny => p.bad("denied"),
            };
            let state = match (item.entry.decision, item.state) {
                (Decision::Allow, "changed") => " - changed since: not used until approved again",
                (_, "missing") => " - file gone",
                _ => "",
            };
            let _ = writeln!(out, "  {decision} {} ({}){state}", place.shown(), item.entry.at);
        }
        out
    });
    exit::OK
}
