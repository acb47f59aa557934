//! `search <query> [--server S] [--limit N]`: ranked tools (seed 003 "anygpt mcp search").
//!
//! With `--catalog FILE` the engine indexes a JSON Lines catalog and connects to nothing;
//! otherwise it searches the configured servers (connecting them first). Exit codes: 0 with
//! results, 1 for bad arguments or a bad catalog file, 2 when nothing matches.

use crate::caller::Caller;
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
    // Checked here, not only by the engine: a bad value fails before any server starts.
    #[arg(value_parser = clap::builder::NonEmptyStringValueParser::new())]
    query: String,
    /// Only this server's tools.
    #[arg(long)]
    server: Option<String>,
    /// Most results to show (1–100).
    #[arg(long, default_value_t = LIMIT_DEFAULT, value_parser = clap::value_parser!(u8).range(1..=LIMIT_MAX))]
    limit: u8,
}

impl SearchArgs {
    /// The server filter, if any.
    #[must_use]
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }
}

// clap's ranges take i64; the engine's bounds are small constants (the assert keeps them so).
#[allow(clippy::cast_possible_truncation)]
const LIMIT_DEFAULT: u8 = crate::engine::DEFAULT_SEARCH_LIMIT as u8;
#[allow(clippy::cast_possible_wrap)]
const LIMIT_MAX: i64 = crate::engine::MAX_SEARCH_LIMIT as i64;
#[allow(clippy::cast_lossless)]
const _: () = assert!(crate::engine::MAX_SEARCH_LIMIT <= u8::MAX as usize);

/// Prints the `search_tools` answer (`{"results":[…],"pending"?,"queryCut"?}`) with `--json`.
pub async fn run(args: &SearchArgs, ctx: &Ctx) -> i32 {
    let request = SearchRequest {
        query: args.query.clone(),
        server: args.server.clone(),
        limit: Some(usize::from(args.limit)),
        include_disabled: false,
    };
    let response = match ctx.answer(ctx.engine.search(&Caller::local(), &request)).await {
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
