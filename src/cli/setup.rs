//! `anygpt-discovery setup <client>` and `restore <client>`: the face of `crate::setup`.
//!
//! `setup` shows the plan (what moves, what stays, the entry that replaces them, the files
//! written, what it saves), then asks on a terminal; `--yes` applies without asking,
//! `--dry-run` prints the plan and the diff and writes nothing. Exit codes: 0 done (or nothing
//! to do), 1 bad arguments or declined, 2 the client's file or the gateway's config is missing,
//! malformed or changed since setup.

use std::path::Path;

use clap::{Args, ValueEnum};
use serde::Serialize;

use super::output::{self, exit, Ui};
use crate::config::sources::SourceKind;
use crate::config::Environment;
use crate::error::Error;
use crate::setup::{self, savings, ConfigAction, Plan, Scope};

/// The clients `setup` and `restore` edit.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Client {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    Vscode,
    Windsurf,
    Zed,
}

impl Client {
    fn kind(self) -> SourceKind {
        match self {
            Self::ClaudeDesktop => SourceKind::ClaudeDesktop,
            Self::ClaudeCode => SourceKind::ClaudeCode,
            Self::Cursor => SourceKind::Cursor,
            Self::Vscode => SourceKind::Vscode,
            Self::Windsurf => SourceKind::Windsurf,
            Self::Zed => SourceKind::Zed,
        }
    }
}

// Each bool is a flag of its own on the command line.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Args)]
pub struct SetupArgs {
    /// The client whose servers move behind the gateway.
    client: Client,
    /// The project's file in this folder (`.mcp.json`, `.cursor/mcp.json`,
    /// `.vscode/mcp.json`, `.zed/settings.json`) instead of the user's.
    #[arg(long)]
    project: bool,
    /// Apply without asking (for scripts).
    #[arg(long, short = 'y')]
    yes: bool,
    /// Print the plan and the diff; write nothing.
    #[arg(long, conflicts_with = "yes")]
    dry_run: bool,
    /// Leave plain-text keys found in `env` and `headers` as they are, instead of moving them
    /// into the OS keychain (`secret list`) and writing `${secret:NAME}` references.
    #[arg(long)]
    keep_keys: bool,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The client whose file `setup` changed.
    client: Client,
    /// The project's file in this folder, as `setup --project` edited it.
    #[arg(long)]
    project: bool,
    /// Restore even if the file changed since setup (the current text is kept in the backup folder).
    #[arg(long)]
    force: bool,
}

fn scope(project: bool) -> Scope {
    if project {
        Scope::Project
    } else {
        Scope::User
    }
}

/// The JSON answer of `setup`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SetupReport<'a> {
    #[serde(flatten)]
    plan: &'a Plan,
    savings: Option<&'a savings::Savings>,
    files_written: Vec<&'a Path>,
    applied: bool,
    dry_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    diff: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    backup: Option<std::path::PathBuf>,
}

/// Run `setup`; returns the exit code.
pub async fn run_setup(args: &SetupArgs, config: Option<&Path>, ui: &Ui) -> i32 {
    let env = Environment::current();
    let plan = match setup::target(args.client.kind(), scope(args.project), &env)
        .and_then(|target| setup::plan(target, config, !args.keep_keys, &env))
    {
        Ok(plan) => plan,
        Err(e) => return ui.error_hinted(&e, None),
    };
    // The moved servers' keys are secrets like any server's: masked in the plan, the diff and
    // the JSON (the files themselves get the real values).
    crate::secrets::register_all(
        plan.moved
            .iter()
            .map(|m| (m.launch.name.as_str(), m.launch.secret_values())),
    );
    let measured = if plan.is_noop() {
        None
    } else {
        if ui.interactive && !ui.json {
            output::eprint("measuring the moved servers' tool definitions…\n", ui.err);
        }
        let servers: Vec<_> = plan.moved.iter().map(|m| m.launch.clone()).collect();
        // A project's servers are not started before they are approved: snapshots only.
        Some(savings::measure(&servers, plan.target.scope == Scope::User).await)
    };
    let applying = !plan.is_noop() && !args.dry_run && plan.config_action != ConfigAction::Snippet;
    if !ui.json {
        output::print_human(&scrub(&describe(&plan, measured.as_ref())), ui.out);
        if args.dry_run {
            output::print_human(&scrub(&plan.diff()), ui.out);
        }
    }
    if applying && !args.yes && !output::confirm(ui, "Apply these changes? [y/N] ") {
        return declined(ui);
    }
    let mut backup = None;
    if applying {
        if let Err(e) = setup::apply(&plan) {
            return ui.error_hinted(&e, None);
        }
        backup = setup::backup::path_for(plan.target.client.name(), &plan.target.file).ok();
    }
    let report = SetupReport {
        plan: &plan,
        savings: measured.as_ref(),
        files_written: if applying { plan.files_written() } else { Vec::new() },
        applied: applying,
        dry_run: args.dry_run,
        diff: args.dry_run.then(|| scrub(&plan.diff())),
        backup: backup.clone(),
    };
    if ui.json {
        output::print(&scrub(&output::json::document(&report)));
    } else if applying {
        output::print_human(&done(&plan, backup.as_deref()), ui.out);
    }
    exit::OK
}

fn scrub(text: &str) -> String {
    crate::engine::scrub_secrets(text).into_owned()
}

fn declined(ui: &Ui) -> i32 {
    let message = if output::can_ask(ui) {
        "not applied: nothing was written"
    } else {
        "not applied: there is no terminal to ask on; nothing was written"
    };
    ui.error_hinted(
        &Error::validation(message),
        Some("pass --yes to apply without asking, or --dry-run to see the plan and the diff"),
    )
}

/// The plan for people.
fn describe(plan: &Plan, measured: Option<&savings::Savings>) -> String {
    use std::fmt::Write;
    let target = &plan.target;
    let mut out = format!("setup {}: {}\n", target.client.name(), target.file.display());
    if plan.is_noop() {
        let why = if plan.gateway_present {
            "already set up: the gateway's entry is there and nothing else can move; nothing to do"
        } else {
            "no server here that the gateway can serve; nothing to do"
        };
        let _ = writeln!(out, "  {why}");
    } else {
        let names: Vec<&str> = plan.moved.iter().map(|m| m.name.as_str()).collect();
        let _ = writeln!(out, "  move behind the gateway ({}): {}", names.len(), names.join(", "));
    }
    for kept in &plan.kept {
        let _ = writeln!(
            out,
            "  stays in {}: {} ({})",
            target.client.name(),
            kept.name,
            kept.reason
        );
    }
    if plan.is_noop() {
        return out;
    }
    for key in &plan.keys {
        let _ = writeln!(
            out,
            "  key moved into the keychain: {} {} → ${{secret:{}}} (--keep-keys leaves it)",
            key.server, key.field, key.secret
        );
    }
    if !plan.gateway_present {
        let _ = writeln!(
            out,
            "  replaced by: \"{}\": {}",
            setup::GATEWAY_ENTRY,
            plan.gateway_entry
        );
    }
    let config = plan.config_file.display();
    match plan.config_action {
        ConfigAction::Create => {
            let _ = writeln!(out, "  servers added to {config} (created)");
        }
        ConfigAction::Edit => {
            let _ = writeln!(out, "  servers added to {config}");
        }
        ConfigAction::Unchanged => {
            let _ = writeln!(out, "  {config} has these servers already");
        }
        ConfigAction::Snippet => {
            let _ = writeln!(
                out,
                "  {config} is evaluated code or YAML, which setup does not edit: nothing was written.\n  \
                 Add these to its `discovery.servers`, then run setup again to replace them in the client:\n{}",
                plan.snippet.as_deref().unwrap_or_default()
            );
        }
    }
    if let Some(savings) = measured {
        let _ = writeln!(out, "  {}", savings.line());
    }
    out
}

fn done(plan: &Plan, backup: Option<&Path>) -> String {
    let files: Vec<String> = plan.files_written().iter().map(|f| f.display().to_string()).collect();
    let backup = backup.map_or_else(String::new, |b| format!("; backup: {}", b.display()));
    format!(
        "done: wrote {}{backup}\n{}; `anygpt-discovery restore {}{}` undoes this\n",
        files.join(", "),
        restart_hint(plan.target.client, "starts the gateway instead"),
        plan.target.client.name(),
        if plan.target.scope == Scope::Project {
            " --project"
        } else {
            ""
        }
    )
}

/// What the user does for the client to read its edited file: restart it when it runs (a
/// client reads its server list at start), nothing when it does not.
fn restart_hint(client: SourceKind, effect: &str) -> String {
    let name = client.name();
    match setup::running::is_running(client) {
        Some(true) => format!("{name} is running: restart it so it {effect}"),
        Some(false) => format!("{name} is not running: the next time it starts, it {effect}"),
        None => format!("restart {name} if it is running, so it {effect}"),
    }
}

/// Run `restore`; returns the exit code.
pub fn run_restore(args: &RestoreArgs, ui: &Ui) -> i32 {
    let env = Environment::current();
    match setup::target(args.client.kind(), scope(args.project), &env).and_then(|t| setup::restore(t, args.force)) {
        Ok(restored) => {
            ui.result(&restored, || {
                let kept = restored
                    .replaced_kept_at
                    .as_ref()
                    .map_or_else(String::new, |k| format!("; the text it had is kept at {}", k.display()));
                format!(
                    "restored {} as it was before setup{kept}\n{}; the moved servers stay in the gateway's config\n",
                    restored.target.file.display(),
                    restart_hint(restored.target.client, "starts its own servers again")
                )
            });
            exit::OK
        }
        // Each message ends with its fix.
        Err(e) => ui.error_hinted(&e, None),
    }
}
