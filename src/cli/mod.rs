//! The command line: `anygpt-discovery [serve | list | search | tools | inspect | execute |
//! config … | trust | completions]`, the spec's `anygpt mcp …` commands (seed 003, DESIGN §8).
//!
//! `run` is shared by the native binary (`main.rs`) and Node (`node::run_cli_with_config`), so both
//! accept the same arguments and exit with the same codes. It resolves the config (an object
//! already evaluated by the JS side wins, else `config::locate`'s search order), opens the
//! engine and hands it to the chosen command. Commands are thin: they call the `Engine`
//! facade and give the result to `output`, which owns every byte written to stdout, the
//! human and JSON forms, and the mapping from error codes to exit statuses (`exit`).

use std::future::Future;
use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};
use serde_json::Value;

use crate::config::{locate, Config, Environment};
use crate::engine::Engine;

mod add;
mod auth;
mod completions;
mod config_cmd;
mod consent_cmd;
mod examples;
mod execute;
mod help;
mod inspect;
mod list;
mod output;
mod progress;
mod reload;
mod search;
mod secret;
mod setup;
mod stats;
mod tools;
mod trust;

pub use output::exit;
use output::Ui;
use progress::Progress;

// Kept within 80 columns: clap does not wrap this text well (it would split commands).
const EXAMPLES: &str = "\
Examples:
  anygpt-discovery                       run the stdio MCP server (editors do)
  anygpt-discovery list --status --tools servers, their state and tool counts
  anygpt-discovery search \"read a file\" --limit 5
  anygpt-discovery tools filesystem --all --tags
  anygpt-discovery inspect filesystem read_text_file --examples
  anygpt-discovery execute everything echo --args '{\"message\":\"hi\"}'
  echo '{\"message\":\"hi\"}' | anygpt-discovery execute everything echo -
  anygpt-discovery config show           the config in use, secrets masked
  anygpt-discovery setup claude-desktop  its servers behind the gateway
  anygpt-discovery secret set GITHUB_TOKEN   then write ${secret:GITHUB_TOKEN}
  anygpt-discovery registry search github    then: anygpt-discovery add <name>
  source <(anygpt-discovery completions bash)

Exit codes: 0 ok, 1 invalid arguments, 2 configuration error or not found
(search: nothing found), 3 a server could not be reached or the tool failed,
4 tool disabled by toolRules, 130 interrupted. `--help --json` prints this help
as JSON.";

#[derive(Debug, Parser)]
#[command(
    name = "anygpt-discovery",
    version,
    about = "MCP gateway: five meta-tools in front of many MCP servers, and a CLI to try them",
    after_help = EXAMPLES,
    // Help fits 80 columns, or the terminal when narrower.
    max_term_width = 80
)]
struct Cli {
    /// Config file (JSON, JSONC or YAML; TS/JS through the npm bin). Default: the search order
    /// (`anygpt-discovery config path` shows it).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Use a catalog file (JSON Lines, one tool a line) instead of the configured servers;
    /// nothing is connected.
    #[arg(long, global = true, value_name = "FILE")]
    catalog: Option<PathBuf>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Log filter for stderr: a level (error, warn, info, debug, trace, off) or directives
    /// such as `discovery=debug,warn`. Commands log warnings only unless asked; `serve` info.
    #[arg(long, global = true, value_name = "FILTER", env = "ANYGPT_LOG", value_parser = parse_log_filter)]
    log_level: Option<String>,
    /// No progress indicator, errors only on stderr.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// Let debug logs show `execute_tool` argument values and the MCP messages rmcp dumps at
    /// debug and trace (off: argument keys only; registered secrets are scrubbed either way).
    #[arg(long, global = true)]
    log_arguments: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the stdio MCP server (the default), or with `--http HOST:PORT` serve many clients
    /// over streamable HTTP (`/mcp`, `/healthz`, `/readyz`, `/metrics`).
    Serve(ServeArgs),
    /// List the configured servers.
    List(list::ListArgs),
    /// Search tools by task or name (exit 2 when nothing matches).
    Search(search::SearchArgs),
    /// List one server's tools (exit 2 when there is no such server, 3 when it cannot be reached).
    Tools(tools::ToolsArgs),
    /// Show a tool's description and parameters (exit 2 when not found, 3 when its server cannot be reached).
    Inspect(inspect::InspectArgs),
    /// Run a tool (exit 1 bad arguments, 2 not found, 3 failed, 4 disabled by toolRules or not confirmed).
    Execute(execute::ExecuteArgs),
    /// Calls, errors by code and latency per server and tool, from the audit log.
    Stats(stats::StatsArgs),
    /// Show, check and locate the configuration.
    #[command(subcommand)]
    Config(config_cmd::ConfigCommand),
    /// Accept the current version of a server's tools (or one tool) after review.
    Trust(trust::TrustArgs),
    /// Print a shell completion script.
    Completions(completions::CompletionsArgs),
    /// Sign in to servers that need it: `auth login|status|logout [server]`.
    Auth(auth::AuthArgs),
    /// Approve a project config (default: every one in this folder) after showing what it
    /// would run; `--list` the approvals.
    Allow(consent_cmd::AllowArgs),
    /// Deny a project config (default: every one in this folder): nothing from it runs.
    Deny(consent_cmd::DenyArgs),
    /// Move an MCP client's servers behind the gateway: its file then starts only the gateway
    /// (plan shown first; `--dry-run` for the diff, `--yes` for scripts).
    Setup(setup::SetupArgs),
    /// Put a client's file back as it was before `setup` (refused if it changed since, unless `--force`).
    Restore(setup::RestoreArgs),
    /// Keep values out of config files: `secret set|list|delete NAME`, used as `${secret:NAME}`.
    Secret(secret::SecretArgs),
    /// Add a server to the gateway's user config: from the MCP Registry, `npm:<pkg>`,
    /// `pypi:<pkg>` or an `https://` URL (exit 2 when the registry has no such server).
    Add(add::AddArgs),
    /// Remove a server from the gateway's user config (exit 2 when there is none of that name).
    Remove(add::RemoveArgs),
    /// Find servers in the MCP Registry: `registry search <query>`.
    Registry(add::RegistryArgs),
    // A command that needs no engine is dispatched in `run` before one is opened (and named
    // in `run_command`'s unreachable arm); one that does gets an arm in `run_command`.
}

#[derive(Debug, Default, clap::Args)]
struct ServeArgs {
    /// Serve over streamable HTTP on this address instead of stdio (`127.0.0.1:8080`; port 0
    /// picks a free one; the address is printed on stderr). Without a value:
    /// `discovery.http.listen`, else 127.0.0.1:8080. A non-loopback address is refused until
    /// authentication is configured.
    #[arg(long, value_name = "HOST:PORT", num_args = 0..=1, default_missing_value = "")]
    http: Option<String>,
    /// Threads serving HTTP clients (default: the CPUs this process may use). Only with
    /// `--http`: the stdio server runs on one thread.
    #[arg(long, value_name = "N", requires = "http", value_parser = clap::value_parser!(u16).range(1..=1024))]
    workers: Option<u16>,
}

impl Command {
    /// The one server a command is about, when it is about one: a one-shot run starts only
    /// that server (`list` and a search of every server start them all).
    fn only_server(&self) -> Option<&str> {
        match self {
            Self::Tools(args) => Some(args.server()),
            Self::Inspect(args) => Some(args.server()),
            Self::Execute(args) => Some(args.server()),
            Self::Trust(args) => Some(args.server()),
            Self::Search(args) => args.server(),
            _ => None,
        }
    }
}

/// Why a `--log-level` is refused.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is neither a level (error, warn, info, debug, trace, off) nor a filter such as `discovery=debug,warn`")]
struct BadLogFilter(String);

const LEVELS: [&str; 6] = ["error", "warn", "info", "debug", "trace", "off"];

/// A bare word must be a level: `tracing`'s filter would take `verbose` as a target name
/// and silently log nothing.
fn parse_log_filter(text: &str) -> Result<String, BadLogFilter> {
    let bad = || BadLogFilter(text.to_owned());
    let word = text.trim();
    if word.is_empty() {
        // `ANYGPT_LOG=` (set, but to nothing) means the default, as an unset variable does.
        return Ok(String::new());
    }
    if !word.contains(['=', ',', ':', '[']) && !LEVELS.contains(&word.to_ascii_lowercase().as_str()) {
        return Err(bad());
    }
    tracing_subscriber::EnvFilter::try_new(word).map_err(|_| bad())?;
    Ok(word.to_owned())
}

/// A config evaluated elsewhere (by the JS bin): the object, where it came from, and how to
/// evaluate it again when a served config reloads.
#[derive(Debug, Clone)]
pub struct ConfigObject {
    pub value: Value,
    pub origin: String,
    pub reevaluate: Option<crate::watch::Reevaluate>,
}

/// Run the CLI on a runtime of its own and wait for its exit code: what the native binary's
/// `main` and the Node bin's `runCli` (on a thread of its own) do.
#[must_use]
pub fn run_blocking(args: Vec<String>, config_object: Option<ConfigObject>, shutdown: impl Future<Output = ()>) -> i32 {
    let runtime = match runtime_for(&args).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return exit::BAD_INPUT;
        }
    };
    let code = runtime.block_on(run(args, config_object, shutdown));
    // Dropping the runtime could wait on a blocking stdin read; the work is done, so leave now.
    runtime.shutdown_background();
    code
}

/// The runtime a command line runs on.
///
/// `serve --http` serves many clients at once: one worker a CPU (or `--workers`), so one
/// client's CPU-heavy moment (a large result parsed, a search over a big index) does not stall
/// the others, and throughput grows with cores (BENCHMARKS.md, "Team mode").
///
/// Everything else runs on one thread: the stdio server has one client, and a gateway call is
/// a few microseconds of work between two pipe hops, where a second worker only added
/// cross-thread wakeups (about 0.04 ms per proxied call on the 2-core machine of
/// BENCHMARKS.md). A command line that does not parse gets one thread too: `run` reports it.
fn runtime_for(args: &[String]) -> tokio::runtime::Builder {
    let Ok(Some(Command::Serve(ServeArgs { http: Some(_), workers }))) =
        Cli::try_parse_from(args).map(|cli| cli.command)
    else {
        return tokio::runtime::Builder::new_current_thread();
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.thread_name("anygpt-http");
    if let Some(workers) = workers {
        builder.worker_threads(usize::from(workers));
    }
    builder
}

/// Run the CLI with `args` (the program name first: clap skips argv[0]). Returns the process
/// exit code. `shutdown` resolving (Ctrl-C, SIGTERM, `requestShutdown` from Node) stops a
/// server cleanly, and interrupts a command with 130, cancelling its downstream call.
pub async fn run(args: Vec<String>, config_object: Option<ConfigObject>, shutdown: impl Future<Output = ()>) -> i32 {
    let wants_json = asks_for_json(&args);
    let args_for_help = if wants_json { args.clone() } else { Vec::new() };
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e, wants_json, &args_for_help),
    };
    crate::secrets::set_log_arguments(cli.log_arguments);
    let command = cli.command.unwrap_or(Command::Serve(ServeArgs::default()));
    let serving = matches!(command, Command::Serve(_));
    let default_filter = if serving {
        "discovery=info,warn"
    } else if cli.quiet {
        "error"
    } else {
        // The supervisor's warnings promise retries, once per attempt: a command says once
        // that a server failed, and why (its error, or `Progress`'s line).
        "warn,discovery::upstream::supervisor=error"
    };
    let filter = cli.log_level.as_deref().filter(|f| !f.is_empty());
    init_logging(filter.unwrap_or(default_filter), cli.log_arguments);
    if serving {
        // A client that never reads stderr must not stall the gateway (`log_lines`).
        output::log_lines::write_in_background();
    }
    let ui = Ui::detect(cli.json, cli.quiet);
    let options = Options {
        config: cli.config,
        catalog: cli.catalog,
        object: config_object,
    };
    match command {
        Command::Serve(args) => {
            let code = match args.http {
                Some(listen) => serve_http(options, listen.as_str(), shutdown).await,
                None => serve(options, shutdown).await,
            };
            // The last lines (why it stopped) are the ones a user reads.
            output::log_lines::drain(LOG_DRAIN);
            code
        }
        Command::Completions(args) => completions::run(&args, &mut Cli::command()),
        Command::Allow(args) => consent_cmd::allow(&args, &ui),
        Command::Deny(args) => consent_cmd::deny(&args, &ui),
        Command::Config(action) => config_cmd::run(action, &options, &ui).await,
        Command::Setup(args) => setup::run_setup(&args, options.config.as_deref(), &ui).await,
        Command::Restore(args) => setup::run_restore(&args, &ui),
        Command::Secret(args) => secret::run(&args, &ui),
        Command::Add(args) => add::run_add(&args, options.config.as_deref(), &ui).await,
        Command::Remove(args) => add::run_remove(&args, options.config.as_deref(), &ui),
        Command::Registry(args) => add::run_registry(&args, options.config.as_deref(), &ui).await,
        Command::Auth(args) => match resolve_config(options.config.as_ref(), options.object.clone()) {
            Ok(config) => auth::run(args, &config, &ui).await,
            Err(e) => ui.error(&e),
        },
        command => match open_engine(&options, &ui) {
            Ok(engine) => run_command(command, engine, ui, shutdown).await,
            Err(code) => code,
        },
    }
}

/// Whether the command line `args` (the program name first) needs the config: what decides
/// whether the npm bin evaluates a TS/JS config before running it. A command line that does
/// not parse, `--help`, `--version`, `completions`, `allow`, `deny`, `config path`,
/// `config reload` and anything run over `--catalog` need none.
#[must_use]
pub fn needs_config(args: impl IntoIterator<Item = String>) -> bool {
    let Ok(cli) = Cli::try_parse_from(args) else {
        return false;
    };
    match cli.command {
        // They edit files as text or keep secrets: nothing of a config is evaluated for them.
        Some(
            Command::Completions(_)
            | Command::Allow(_)
            | Command::Deny(_)
            | Command::Setup(_)
            | Command::Restore(_)
            | Command::Secret(_)
            | Command::Add(_)
            | Command::Remove(_)
            | Command::Registry(_),
        ) => false,
        Some(Command::Config(action)) => config_cmd::reads_config(action),
        Some(Command::Serve(_) | Command::Auth(_)) | None => true,
        Some(_) => cli.catalog.is_none(),
    }
}

/// Whether the command line asks for `--json` (before a `--`), for when clap refuses it and
/// there is no parsed flag to read.
fn asks_for_json(args: &[String]) -> bool {
    args.iter().skip(1).take_while(|a| *a != "--").any(|a| a == "--json")
}

/// A command line clap refused (or `--help`/`--version`): clap's text on its stream, and with
/// `--json` the error document on stdout too, so a script reading stdout always gets one.
/// `--help --json` and `--version --json` print their JSON documents instead (`help`).
fn usage_error(e: &clap::Error, json: bool, args: &[String]) -> i32 {
    if !e.use_stderr() {
        match e.kind() {
            clap::error::ErrorKind::DisplayHelp if json => {
                output::print(&output::json::document(&help::document(Cli::command(), args)));
            }
            clap::error::ErrorKind::DisplayVersion if json => {
                output::print(&output::json::document(&help::Version::of(&Cli::command())));
            }
            _ => {
                let _ = e.print();
            }
        }
        return exit::OK;
    }
    if json {
        let first_line = e.to_string();
        let message = first_line.lines().next().unwrap_or_default();
        let message = message.strip_prefix("error: ").unwrap_or(message);
        let body = output::json::ErrorBody {
            error: output::json::ErrorDetail {
                code: crate::error::ErrorCode::ValidationError.as_str(),
                message: format!("invalid arguments: {message}"),
                suggestions: Vec::new(),
                hint: Some("`anygpt-discovery <command> --help` shows the usage"),
            },
        };
        output::print(&output::json::document(&body));
    }
    let _ = e.print();
    exit::BAD_INPUT
}

/// Where the config (or catalog) comes from.
struct Options {
    config: Option<PathBuf>,
    catalog: Option<PathBuf>,
    object: Option<ConfigObject>,
}

async fn serve(options: Options, shutdown: impl Future<Output = ()>) -> i32 {
    let reevaluate = options.object.as_ref().and_then(|o| o.reevaluate.clone());
    match resolve_config(options.config.as_ref(), options.object) {
        Ok(config) => {
            tracing::info!(config = %config.origin, servers = config.servers().len(), "serving MCP on stdio");
            let watched = crate::watch::config_files(&config, reevaluate.is_some());
            let origin = config.origin.clone();
            let engine = Engine::new(config);
            // Dropped when serving ends: stops watching and unregisters the gateway.
            let _live_reload = crate::watch::live_reload(&engine, &origin, &watched, reevaluate);
            crate::gateway::serve_stdio(engine, shutdown).await;
            exit::OK
        }
        // The server keeps its historical status 1 for a config it cannot serve: an editor
        // only sees the process end, and scripts check for non-zero.
        Err(e) => {
            eprintln!("error: {e}");
            exit::BAD_INPUT
        }
    }
}

/// `serve --http`: the team face on `listen` (empty: the config's address, else the
/// default) until `shutdown`, then drain and close every downstream server. The bound address
/// goes to stderr on one line (`listening on http://ADDR/mcp`), for whoever started it.
async fn serve_http(options: Options, listen: &str, shutdown: impl Future<Output = ()>) -> i32 {
    // Polled once now: a signal future installs its handlers when first polled, and a SIGTERM
    // sent right after `listening on` must drain, not kill the process.
    let mut shutdown = std::pin::pin!(shutdown);
    if futures::poll!(shutdown.as_mut()).is_ready() {
        return exit::OK;
    }
    let reevaluate = options.object.as_ref().and_then(|o| o.reevaluate.clone());
    let config = match resolve_config(options.config.as_ref(), options.object) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    let watched = crate::watch::config_files(&config, reevaluate.is_some());
    let origin = config.origin.clone();
    let servers = config.servers().len();
    let engine = Engine::new(config);
    let listen = Some(listen).filter(|l| !l.is_empty());
    let bound = match crate::http::bind(&engine, listen).await {
        Ok(bound) => bound,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::CONFIGURATION;
        }
    };
    tracing::info!(config = %origin, servers, address = %bound.address(), "serving MCP over HTTP");
    eprintln!("anygpt-discovery: listening on http://{}/mcp", bound.address());
    let _live_reload = crate::watch::live_reload(&engine, &origin, &watched, reevaluate);
    // The face needs a `Send` stop signal; the caller's future is relayed to it.
    let stop = tokio_util::sync::CancellationToken::new();
    let mut serving = std::pin::pin!(bound.serve(stop.clone().cancelled_owned()));
    let served = tokio::select! {
        served = &mut serving => served,
        () = &mut shutdown => {
            stop.cancel();
            serving.await
        }
    };
    engine.close().await;
    match served {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("error: {e}");
            exit::UNREACHABLE
        }
    }
}

/// The engine for a command: over `--catalog` (nothing connected) or the config.
fn open_engine(options: &Options, ui: &Ui) -> Result<Engine, i32> {
    if let Some(path) = &options.catalog {
        // The catalog is a file named on the command line, not the config: a bad one is a bad
        // argument (VALIDATION_ERROR, exit 1), whatever the loader calls it.
        return crate::catalog::file::load(path).map(Engine::from_catalog).map_err(|e| {
            ui.error_hinted(
                &crate::error::Error::validation(format!("--catalog {e}")),
                Some(CATALOG_HINT),
            )
        });
    }
    resolve_config(options.config.as_ref(), options.object.clone())
        .map(Engine::new)
        .map_err(|e| ui.error(&e))
}

const CATALOG_HINT: &str =
    "--catalog takes a JSON Lines file, one tool a line: {\"server\",\"name\",\"description\"?,\"inputSchema\"?}";

/// Run an engine command until it ends or `shutdown` interrupts it; close the engine either way.
async fn run_command(command: Command, engine: Engine, ui: Ui, shutdown: impl Future<Output = ()>) -> i32 {
    // Counted from the audit log: no server is started.
    if let Command::Stats(args) = &command {
        return stats::run(args, &engine, &ui);
    }
    let only = command.only_server().map(str::to_owned);
    match &only {
        Some(server) => engine.start_only(&[server]),
        None => engine.start(),
    }
    let progress = Progress::start(&engine, &ui, only.as_deref());
    let ctx = Ctx {
        engine: engine.clone(),
        ui,
        progress,
    };
    let work = async {
        match command {
            Command::List(args) => list::run(&args, &ctx).await,
            Command::Search(args) => search::run(&args, &ctx).await,
            Command::Tools(args) => tools::run(&args, &ctx).await,
            Command::Inspect(args) => inspect::run(&args, &ctx).await,
            Command::Execute(args) => Box::pin(execute::run(&args, &ctx)).await,
            Command::Trust(args) => trust::run(&args, &ctx).await,
            Command::Serve(_)
            | Command::Stats(_)
            | Command::Config(_)
            | Command::Completions(_)
            | Command::Auth(_)
            | Command::Allow(_)
            | Command::Deny(_)
            | Command::Setup(_)
            | Command::Restore(_)
            | Command::Secret(_)
            | Command::Add(_)
            | Command::Remove(_)
            | Command::Registry(_) => {
                unreachable!("handled before an engine is opened")
            }
        }
    };
    let code = tokio::select! {
        code = work => code,
        // Dropping `work` drops a tool call in flight, which sends `notifications/cancelled`.
        () = shutdown => {
            ctx.progress.finish();
            if !ctx.ui.quiet {
                output::eprint("interrupted\n", ctx.ui.err);
            }
            exit::INTERRUPTED
        }
    };
    ctx.progress.finish();
    if code == exit::INTERRUPTED {
        // Closing a session ends its server at once (stdin closed, then SIGTERM): give the
        // dropped call's `notifications/cancelled` a moment to be written and acted on, so
        // the server can stop its work cleanly rather than be killed in the middle of it.
        tokio::time::sleep(CANCEL_GRACE).await;
    }
    engine.close().await;
    code
}

/// How long an interrupted command waits, before closing its servers, for the cancellation
/// of its tool call to reach the server.
const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_millis(150);

/// What a command gets: the engine, the output settings and the connect progress (finished
/// before the result prints).
pub(crate) struct Ctx {
    pub engine: Engine,
    pub ui: Ui,
    pub progress: Progress,
}

impl Ctx {
    /// Await an engine operation, then end the progress indicator so the result prints clean.
    pub async fn connected<T>(&self, operation: impl Future<Output = T>) -> T {
        let out = operation.await;
        self.progress.finish();
        out
    }

    /// [`Ctx::connected`] for an operation that can fail, its error told as a one-shot run
    /// should ([`one_shot`]).
    pub async fn answer<T>(&self, operation: impl Future<Output = crate::Result<T>>) -> crate::Result<T> {
        self.connected(operation).await.map_err(one_shot)
    }
}

/// An engine error as a run that exits should tell it: a server that failed is said to have
/// failed, and why, without the "next attempt in N s" a long-running gateway would keep.
fn one_shot(error: crate::error::Error) -> crate::error::Error {
    use crate::error::Error;
    use crate::upstream::UpstreamError;
    let settled = |source| match source {
        UpstreamError::Unavailable { reason, .. } => UpstreamError::Failed { reason },
        other => other,
    };
    match error {
        Error::ServerConnection { server, source } => Error::ServerConnection {
            server,
            source: settled(source),
        },
        Error::ToolExecution { server, tool, source } => Error::ToolExecution {
            server,
            tool,
            source: settled(source),
        },
        other => other,
    }
}

/// The config to use: an object the JS side evaluated (it asked [`locate`] which file wins,
/// so the order is the same), else what [`locate`] chooses. Says on stderr where it came from,
/// what each source held and what will likely fail.
fn resolve_config(flag: Option<&PathBuf>, object: Option<ConfigObject>) -> crate::Result<Config> {
    let config = load_config(flag, object)?;
    for note in config.notes() {
        tracing::info!("{note}");
    }
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    for skipped in config.skipped() {
        tracing::warn!("{}", skipped.line());
    }
    if config.servers().is_empty() {
        tracing::warn!(
            "no servers configured: add them to ./.anygpt/mcp-discovery.config.json (or any MCP client's config) and restart"
        );
    }
    Ok(config)
}

/// The config, without reporting on it (the `config` commands show it themselves).
fn load_config(flag: Option<&PathBuf>, object: Option<ConfigObject>) -> crate::Result<Config> {
    let env = Environment::current();
    let located = locate(flag.map(PathBuf::as_path), &env);
    if let Some(object) = object {
        Config::from_located_value(object.value, &object.origin, &located, &env)
    } else {
        Config::load(&located, &env)
    }
}

/// How long a stopping server waits for its queued log lines to reach stderr.
const LOG_DRAIN: std::time::Duration = std::time::Duration::from_secs(1);

/// One log event on its way to stderr (`output::log_lines`): registered secrets scrubbed
/// (libraries log errors that quote a server's URL, API key and all, and servers print their
/// own tokens to stderr), controls escaped, bounded. The logger makes one writer per event;
/// it holds the event's bytes and hands them on whole when flushed or dropped, so a secret
/// split across writes is still found.
#[derive(Default)]
struct LogLine(Vec<u8>);

impl std::io::Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        output::log_lines::emit(&self.0);
        self.0.clear();
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        let _ = std::io::Write::flush(self);
    }
}

fn init_logging(filter: &str, log_arguments: bool) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    // `parse_log_filter` already checked it.
    let filter =
        tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // rmcp's service loop dumps whole messages at debug and trace (`received request` with
    // every argument value, `response message` with every result): only on request.
    let no_message_dumps = tracing_subscriber::filter::filter_fn(move |meta| {
        log_arguments || !(meta.target().starts_with("rmcp::service") && *meta.level() > tracing::Level::INFO)
    });
    // stdout is the MCP channel: logs only ever go to stderr. A second init (tests, repeated
    // runs inside one Node process) keeps the first subscriber.
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(LogLine::default)
        .with_ansi(false)
        .with_target(false)
        .with_filter(filter)
        .with_filter(no_message_dumps);
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::Error;
    use crate::upstream::UpstreamError;

    /// The runtime `runtime_for` builds for a command line.
    fn runtime_of(line: &str) -> tokio::runtime::Runtime {
        let args: Vec<String> = line.split(' ').map(str::to_owned).collect();
        runtime_for(&args).enable_all().build().unwrap()
    }

    #[test]
    fn only_serve_http_runs_on_several_workers() {
        use tokio::runtime::RuntimeFlavor::{CurrentThread, MultiThread};
        let flavor = |line| runtime_of(line).handle().runtime_flavor();
        assert_eq!(flavor("anygpt-discovery serve --http 127.0.0.1:0"), MultiThread);
        assert_eq!(flavor("anygpt-discovery serve --http"), MultiThread);
        assert_eq!(flavor("anygpt-discovery serve"), CurrentThread);
        assert_eq!(flavor("anygpt-discovery"), CurrentThread);
        assert_eq!(flavor("anygpt-discovery search echo"), CurrentThread);
        assert_eq!(flavor("anygpt-discovery serve --no-such-flag"), CurrentThread);
    }

    #[test]
    fn workers_sets_how_many_threads_serve_http() {
        let runtime = runtime_of("anygpt-discovery serve --http 127.0.0.1:0 --workers 3");
        assert_eq!(runtime.metrics().num_workers(), 3);
        for refused in [
            "serve --workers 2",
            "serve --http --workers 0",
            "serve --http --workers many",
        ] {
            let args = std::iter::once("anygpt-discovery").chain(refused.split(' '));
            assert!(Cli::try_parse_from(args).is_err(), "{refused}");
        }
    }

    fn unavailable() -> UpstreamError {
        UpstreamError::Unavailable {
            reason: "command `nope` not found".into(),
            retry_in: Duration::from_secs(2),
        }
    }

    #[test]
    fn a_one_shot_error_says_the_server_failed_without_a_retry() {
        let error = Error::ServerConnection {
            server: "x".into(),
            source: unavailable(),
        };
        assert!(error.to_string().contains("next attempt"), "the engine's text: {error}");
        let told = one_shot(error);
        assert_eq!(
            told.to_string(),
            "server `x` is not connected: command `nope` not found"
        );
        assert_eq!(told.code(), crate::error::ErrorCode::ServerConnectionError);
        let call = one_shot(Error::ToolExecution {
            server: "x".into(),
            tool: "t".into(),
            source: unavailable(),
        });
        assert_eq!(call.to_string(), "tool `x:t` failed: command `nope` not found");
    }

    #[test]
    fn only_commands_that_read_the_config_need_it() {
        let needs = |line: &str| {
            needs_config(
                std::iter::once("anygpt-discovery")
                    .chain(line.split_whitespace())
                    .map(str::to_owned),
            )
        };
        for line in [
            "",
            "serve",
            "list",
            "search x",
            "execute a b",
            "auth status",
            "config show",
            "config sources",
            "trust a",
        ] {
            assert!(needs(line), "{line}");
        }
        for line in [
            "--help",
            "--version",
            "help list",
            "list --help",
            "completions bash",
            "allow",
            "allow --list",
            "deny x",
            "config path",
            "config reload",
            "search x --catalog c.jsonl",
            "--no-such-flag",
        ] {
            assert!(!needs(line), "{line}");
        }
    }
}
