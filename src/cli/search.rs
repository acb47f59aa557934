//! `search <query> [--server S] [--limit N]`: ranked tools (seed 003 "anygpt mcp search").
//!
//! With `--catalog FILE` the engine indexes a JSON Lines catalog and connects to nothing;
//! otherwise it searches the configured servers (connecting them first). Exit codes: 0 with
//! results, 1 for bad arguments or a bad catalog file, 2 when nothing matches.

use clap::Args;

use super::output::{exit, human};
use super::Ctx;
use crate::engine::SearchRequest;

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  anygpt-discovery search \"github issue\"\n  anygpt-discovery search create --server github\n  anygpt-discovery search file --limit 5 --json"
)]
pub struct SearchArgs {
    /// What you want to do, or a tool name.
    query: String,
    /// Only this server's tools.
    #[arg(long)]
    server: Option<String>,
    /// Most results to show (1–100).
    #[arg(long, default_value_t = crate::engine::DEFAULT_SEARCH_LIMIT)]
    limit: usize,
}

/// Prints the `search_tools` answer (`{"results":[…],"pending"?,"queryCut"?}`) with `--json`.
pub async fn run(args: &SearchArgs, ctx: &Ctx) -> i32 {
    let request = SearchRequest {
        query: args.query.clone(),
        server: args.server.clone(),
        limit: Some(args.limit),
        include_disabled: false,
    };
    let response = match ctx.connected(ctx.engine.search(&request)).await {
        Ok(response) => response,
        Err(e) => return ctx.ui.error(&e),
    };
    let ui = &ctx.ui;
    ui.result(&response, || human::search(&args.query, &response, ui.out, ui.width));
    if response.results.is_empty() {
        exit::NOT_FOUND
    } else {
        exit::OK
    }
}
