//! `anygpt-discovery trust <server> [tool]`: accept the current version of a server's tools
//! after review, so pinning stops marking them changed and `discovery.security` lets them run.
//!
//! The server's tools come from its snapshot or, without one, from connecting it. Exit codes:
//! 0 trusted, 1 bad arguments or configuration, 2 server or tool not found or not reachable.

use clap::Args;

use super::{exit, output};
use crate::engine::Engine;
use crate::error::ErrorCode;

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The server whose tools to trust.
    server: String,
    /// Only this tool (default: every tool of the server).
    tool: Option<String>,
}

/// Trust the tools and print what was trusted; returns the exit code.
pub async fn run(args: TrustArgs, engine: Engine) -> i32 {
    let outcome = engine.trust_tools(&args.server, args.tool.as_deref()).await;
    engine.close().await;
    match outcome {
        Ok(names) => {
            output::print(&format!(
                "trusted {} tool(s) of {}: {}\n",
                names.len(),
                args.server,
                names.join(", ")
            ));
            exit::OK
        }
        Err(error) => {
            eprintln!("error: {}: {error}", error.code());
            if !error.suggestions().is_empty() {
                eprintln!("did you mean: {}", error.suggestions().join(", "));
            }
            match error.code() {
                ErrorCode::ServerNotFound | ErrorCode::ToolNotFound | ErrorCode::ServerConnectionError => {
                    exit::NOT_FOUND
                }
                _ => exit::BAD_INPUT,
            }
        }
    }
}
