//! `inspect <server> <tool> [--examples]`: a tool's description and parameters (seed 003
//! "anygpt mcp inspect"). Exit 0; 2 when the server or tool is not found; 3 when the server
//! cannot be reached.

use crate::caller::Caller;
use clap::Args;

use super::examples::{self, Example};
use super::output::{exit, human};
use super::Ctx;
use crate::engine::ToolDetails;

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  anygpt-discovery inspect github create_issue\n  anygpt-discovery inspect github create_issue --examples"
)]
pub struct InspectArgs {
    /// The server.
    server: String,
    /// The tool.
    tool: String,
    /// Show example arguments (the tool's own, or made from its schema).
    #[arg(long)]
    examples: bool,
}

impl InspectArgs {
    /// The server the command is about.
    #[must_use]
    pub fn server(&self) -> &str {
        &self.server
    }
}

/// `get_tool_details`' answer, plus `examples` with `--examples`.
#[derive(serde::Serialize)]
struct Inspected<'a> {
    #[serde(flatten)]
    details: &'a ToolDetails,
    #[serde(skip_serializing_if = "Option::is_none")]
    examples: Option<&'a [Example]>,
}

pub async fn run(args: &InspectArgs, ctx: &Ctx) -> i32 {
    let details = match ctx
        .answer(ctx.engine.tool_details(&Caller::local(), &args.server, &args.tool))
        .await
    {
        Ok(details) => details,
        Err(e) => return ctx.ui.error(&e),
    };
    let examples = args.examples.then(|| examples::for_schema(&details.input_schema));
    let ui = &ctx.ui;
    let inspected = Inspected {
        details: &details,
        examples: examples.as_deref(),
    };
    ui.result(&inspected, || {
        human::inspect(&details, examples.as_deref(), ui.out, ui.width)
    });
    exit::OK
}
