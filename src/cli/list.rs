//! `list [--status] [--tools]`: the configured servers (seed 003 "anygpt mcp list").
//! Exit 0; a configuration error is 2 (before the command runs).

use crate::caller::Caller;
use std::fmt::Write as _;

use clap::Args;

use super::output::{exit, human};
use super::Ctx;

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  anygpt-discovery list\n  anygpt-discovery list --status --tools\n  anygpt-discovery list --json"
)]
pub struct ListArgs {
    /// Show each server's connection status (and why a failed one failed).
    #[arg(long)]
    status: bool,
    /// Show each server's tool count.
    #[arg(long)]
    tools: bool,
}

/// `{"servers":[{name, description?, toolCount, enabledCount, status, error?}],
/// "skipped":[{file, section?, reason, note?, fix}]}` with `--json` (`skipped`: project
/// configs not used for want of approval, omitted when none).
#[derive(serde::Serialize)]
struct Listed<'a> {
    servers: &'a [crate::engine::ServerInfo],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    skipped: &'a [crate::consent::Skipped],
}

pub async fn run(args: &ListArgs, ctx: &Ctx) -> i32 {
    let mut servers = ctx.connected(ctx.engine.list_servers(&Caller::local())).await;
    // A run that exits promises no retry.
    for server in &mut servers {
        server.error.clone_from(&server.reason);
    }
    let ui = &ctx.ui;
    let skipped = ctx.engine.skipped();
    let listed = Listed {
        servers: &servers,
        skipped: &skipped,
    };
    ui.result(&listed, || {
        let mut out = human::servers(&servers, args.status, args.tools, ui.out, ui.width);
        for skip in &skipped {
            let _ = writeln!(out, "{} {}", ui.out.warn("skipped:"), skip.line());
        }
        out
    });
    exit::OK
}
