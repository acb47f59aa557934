//! `execute <server> <tool> [--args JSON | --args-file F | -] [--stream] [--timeout MS]`:
//! run a tool (seed 003 "anygpt mcp execute").
//!
//! Exit codes: 0 ok, 1 invalid arguments (bad JSON, or arguments the tool's schema rejects),
//! 2 server or tool not found, 3 the call failed (the server's own `isError` too, or the server
//! could not be reached), 4 disabled by toolRules or not confirmed (`confirm`); Ctrl-C cancels the call downstream and
//! exits 130 (`cli::run_command`).

use crate::caller::Caller;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use rmcp::model::CallToolResult;
use serde::Serialize;
use serde_json::{json, Value};

use super::output::json::ErrorDetail;
use super::output::{exit, human, Ui};
use super::Ctx;
use crate::engine::{ExecuteOptions, ProgressUpdate};
use crate::error::Error;

#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:
  anygpt-discovery execute github create_issue \\
    --args '{\"repo\":\"owner/repo\",\"title\":\"Bug\"}'
  anygpt-discovery execute filesystem read_text_file --args-file a.json --json
  echo '{\"message\":\"hi\"}' | anygpt-discovery execute everything echo -
  anygpt-discovery execute ai generate_text --args '{\"prompt\":\"hi\"}' --stream

Exit codes: 0 ok, 1 invalid arguments, 2 not found, 3 execution failed (the
server's isError too) or the server could not be reached, 4 disabled by
toolRules or not confirmed (a toolRules `confirm`: asked y/N on a terminal;
--yes answers yes; no terminal and no --yes refuses), 130 interrupted (the call
is cancelled downstream).")]
pub struct ExecuteArgs {
    /// The server.
    server: String,
    /// The tool.
    tool: String,
    /// `-`: read the arguments (a JSON object) from stdin.
    #[arg(value_name = "-", value_parser = clap::builder::PossibleValuesParser::new(["-"]), conflicts_with_all = ["args", "args_file"])]
    stdin: Option<String>,
    /// The tool's arguments as a JSON object, e.g. '{"path":"README.md"}'.
    #[arg(long, value_name = "JSON", conflicts_with = "args_file")]
    args: Option<String>,
    /// Read the arguments from a JSON file (`-` for stdin).
    #[arg(long, value_name = "FILE")]
    args_file: Option<PathBuf>,
    /// Print the server's progress notifications (stderr) as they arrive.
    #[arg(long)]
    stream: bool,
    /// Give up after this many milliseconds (default: the server's `timeoutMs`, else 60000).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    timeout: Option<u64>,
    /// Answer yes to the confirmation a toolRules `confirm` asks for (without a terminal to
    /// ask on, such a tool is refused unless this is given).
    #[arg(long, short = 'y')]
    yes: bool,
}

/// How this command answers a toolRules `confirm`: `--yes` answered beforehand, or a y/N
/// question on the terminal (stderr, read from stdin); no terminal, nobody to ask.
fn confirmation(yes: bool) -> Option<crate::confirm::Asker> {
    use crate::confirm::Answer;
    if yes {
        return Some(Arc::new(|_question: String| Box::pin(async { Answer::Preapproved })));
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return None;
    }
    Some(Arc::new(|question: String| {
        Box::pin(async move {
            let read = tokio::task::spawn_blocking(move || {
                eprint!("{question}\n[y/N] ");
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            });
            match read.await {
                Ok(Ok(line)) if matches!(line.trim(), "y" | "Y" | "yes" | "Yes" | "YES") => Answer::Accepted,
                Ok(Ok(line)) if line.is_empty() => Answer::Cancelled,
                _ => Answer::Declined,
            }
        })
    }))
}

/// Why the arguments could not be read.
#[derive(Debug, thiserror::Error)]
enum ArgsError {
    #[error("{from}: cannot read: {source}")]
    Read {
        from: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{from}: larger than {cap_mib} MiB, the most the gateway sends a server in one message; pass a smaller object (large data is better passed as a file path the tool reads)", cap_mib = MAX_ARGS_BYTES / (1024 * 1024))]
    TooLarge { from: String },
    #[error("{from}: not valid JSON: {source}; pass an object such as '{{\"key\":\"value\"}}'")]
    Json {
        from: String,
        #[source]
        source: serde_json::Error,
    },
}

impl ExecuteArgs {
    /// The server the command is about.
    #[must_use]
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Whether the arguments come from stdin (`-` or `--args-file -`).
    fn reads_stdin(&self) -> bool {
        self.stdin.is_some() || self.args_file.as_ref().is_some_and(|path| path.as_os_str() == "-")
    }

    /// The arguments from wherever they were given; `None` when not given.
    fn arguments(&self) -> Result<Option<Value>, ArgsError> {
        let (from, text) = if let Some(text) = &self.args {
            ("--args".to_owned(), text.clone())
        } else if let Some(path) = &self.args_file {
            if path.as_os_str() == "-" {
                ("stdin".to_owned(), read_stdin()?)
            } else {
                let from = format!("--args-file {}", path.display());
                let file = std::fs::File::open(path).map_err(|source| ArgsError::Read {
                    from: from.clone(),
                    source,
                })?;
                let text = read_capped(file, &from)?;
                (from, text)
            }
        } else if self.stdin.is_some() {
            ("stdin".to_owned(), read_stdin()?)
        } else {
            return Ok(None);
        };
        if text.trim().is_empty() {
            return Ok(None);
        }
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| ArgsError::Json { from, source })
    }
}

/// [`ExecuteArgs::arguments`] on a blocking thread: opening a FIFO waits for a writer and
/// stdin may never end, and the runtime's one thread must stay free to notice Ctrl-C or
/// SIGTERM (which drops this future; the stuck thread goes with the process).
async fn read_arguments(args: &ExecuteArgs) -> Result<Option<Value>, ArgsError> {
    let args = args.clone();
    tokio::task::spawn_blocking(move || args.arguments())
        .await
        .unwrap_or_else(|join| {
            Err(ArgsError::Read {
                from: "the arguments".to_owned(),
                source: std::io::Error::other(join.to_string()),
            })
        })
}

fn read_stdin() -> Result<String, ArgsError> {
    read_capped(std::io::stdin().lock(), "stdin")
}

/// Most bytes of arguments read: a server reads at most this much in one line, so a larger
/// object could never be sent; and `/dev/zero` or an endless pipe must fail, not fill memory.
const MAX_ARGS_BYTES: usize = crate::upstream::MAX_MESSAGE_BYTES;

/// All of `reader` as text, failing as soon as it passes [`MAX_ARGS_BYTES`] (one byte past
/// the cap is read to tell, never the rest).
fn read_capped(reader: impl Read, from: &str) -> Result<String, ArgsError> {
    let read_error = |source| ArgsError::Read {
        from: from.to_owned(),
        source,
    };
    let mut bytes = Vec::new();
    reader
        .take(MAX_ARGS_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() > MAX_ARGS_BYTES {
        return Err(ArgsError::TooLarge { from: from.to_owned() });
    }
    String::from_utf8(bytes)
        .map_err(|_| read_error(std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text")))
}

/// `--json`: `{"success":true,"result":<the tools/call result>}`; `success` is false when
/// the server answered `isError`, and an engine error is `{"success":false,"error":{…}}`.
#[derive(Serialize)]
struct Executed<'a> {
    success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a CallToolResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorDetail>,
}

pub async fn run(args: &ExecuteArgs, ctx: &Ctx) -> i32 {
    let ui = &ctx.ui;
    if args.reads_stdin() && std::io::stdin().is_terminal() && !ui.quiet {
        // Otherwise a terminal just waits, and the user wonders what for.
        super::output::eprint(
            "reading the arguments from stdin: type a JSON object, then Ctrl-D\n",
            ui.err,
        );
    }
    let arguments = match read_arguments(args).await {
        Ok(arguments) => arguments,
        Err(e) => return report_error(&args.server, &args.tool, &Error::validation(e.to_string()), ui),
    };
    if !ui.json {
        super::output::print_human(&human::executing(&args.server, &args.tool, ui.out), ui.out);
    }
    let options = ExecuteOptions {
        timeout_ms: args.timeout,
        cancel: None,
        progress: args.stream.then(|| stream_sink(ctx)),
        confirm: confirmation(args.yes),
        trace: None,
    };
    // Boxed: the engine's execute future is large (25 kB) to keep on this stack frame.
    let outcome = ctx
        .answer(Box::pin(ctx.engine.execute(
            &Caller::local(),
            &args.server,
            &args.tool,
            arguments,
            options,
        )))
        .await;
    match outcome {
        Ok(result) => {
            let failed = result.is_error == Some(true);
            let body = Executed {
                success: !failed,
                result: Some(&result),
                error: None,
            };
            ui.result(&body, || human::execute_result(&result, ui.out));
            if failed {
                exit::EXECUTION_FAILED
            } else {
                exit::OK
            }
        }
        Err(error) => report_error(&args.server, &args.tool, &error, ui),
    }
}

/// An error of `execute`, in its own shapes: `{"success":false,"error":{…}}` with `--json`
/// (bad `--args` included, so a script reads `success` whatever went wrong), else the
/// `✗ Error` block on stderr. Returns the exit status.
fn report_error(server: &str, tool: &str, error: &Error, ui: &Ui) -> i32 {
    if ui.json {
        let body = Executed {
            success: false,
            result: None,
            error: Some(ErrorDetail::of(error)),
        };
        super::output::print(&super::output::json::document(&body));
    } else {
        super::output::eprint(&human::execute_error(server, tool, error, ui.err), ui.err);
    }
    exit::status_of(error.code())
}

/// Where `--stream` sends progress: a line on stderr each (JSON lines with `--json`).
fn stream_sink(ctx: &Ctx) -> crate::engine::ProgressSink {
    let (json, paint) = (ctx.ui.json, ctx.ui.err);
    let write = ctx.progress.line_writer(paint);
    Arc::new(move |update: ProgressUpdate| {
        let line = if json {
            let line = json!({ "progress": update.progress, "total": update.total, "message": update.message });
            super::output::json::document(&line)
        } else {
            human::progress(&update, paint)
        };
        write(&line);
    })
}
