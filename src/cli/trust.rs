//! `anygpt-discovery trust <server> [tool]`: accept the current version of a server's tools
//! after review, so pinning stops marking them changed and `discovery.security` lets them run.
//!
//! The server's tools come from its snapshot or, without one, from connecting it. Exit codes:
//! 0 trusted, 1 bad arguments, 2 configuration error or server or tool not found, 3 not
//! reachable.

use clap::Args;

use super::output::exit;
use super::Ctx;

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The server whose tools to trust.
    server: String,
    /// Only this tool (default: every tool of the server).
    tool: Option<String>,
}

impl TrustArgs {
    /// The server the command is about.
    #[must_use]
    pub fn server(&self) -> &str {
        &self.server
    }
}

#[derive(serde::Serialize)]
struct Trusted<'a> {
    server: &'a str,
    trusted: &'a [String],
}

/// Trust the tools and print what was trusted; returns the exit code.
pub async fn run(args: &TrustArgs, ctx: &Ctx) -> i32 {
    let outcome = ctx
        .answer(ctx.engine.trust_tools(&args.server, args.tool.as_deref()))
        .await;
    match outcome {
        Ok(names) => {
            let body = Trusted {
                server: &args.server,
                trusted: &names,
            };
            ctx.ui.result(&body, || {
                format!(
                    "trusted {} tool(s) of {}: {}\n",
                    names.len(),
                    args.server,
                    names.join(", ")
                )
            });
            exit::OK
        }
        Err(error) => ctx.ui.error(&error),
    }
}
