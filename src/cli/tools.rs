//! `tools <server> [--all] [--tags]`: one server's tools (seed 003 "anygpt mcp tools").
//! Exit 0; 2 when there is no such server; 3 when it cannot be reached.

use crate::caller::Caller;
use clap::Args;

use super::output::{exit, human};
use super::Ctx;
use crate::engine::ServerTools;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  anygpt-discovery tools github\n  anygpt-discovery tools github --all --tags")]
pub struct ToolsArgs {
    /// The server.
    server: String,
    /// Include tools disabled by toolRules.
    #[arg(long)]
    all: bool,
    /// Show each tool's tags.
    #[arg(long)]
    tags: bool,
}

impl ToolsArgs {
    /// The server the command is about.
    #[must_use]
    pub fn server(&self) -> &str {
        &self.server
    }
}

/// Prints `list_tools`' answer (`{"server","tools":[{name, summary, enabled, tags?, flags?}]}`)
/// with `--json`, disabled tools only with `--all`.
pub async fn run(args: &ToolsArgs, ctx: &Ctx) -> i32 {
    // Every tool, so the header can count the disabled ones; the renderers filter.
    let all = match ctx
        .answer(ctx.engine.list_tools(&Caller::local(), &args.server, true))
        .await
    {
        Ok(all) => all,
        Err(e) => return ctx.ui.error(&e),
    };
    let ui = &ctx.ui;
    let shown = ServerTools {
        server: all.server.clone(),
        tools: all.tools.iter().filter(|t| args.all || t.enabled).cloned().collect(),
    };
    ui.result(&shown, || human::tools(&all, args.all, args.tags, ui.out, ui.width));
    exit::OK
}
