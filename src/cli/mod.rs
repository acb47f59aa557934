//! The command line: `anygpt-discovery [--config FILE] [serve | search <query>]`.
//!
//! `run` is shared by the native binary (`main.rs`) and the Node bin (`node::run_cli`), so both
//! accept the same arguments and exit with the same codes. It resolves the config (an object
//! already evaluated by the JS side wins, else `config::locate`'s search order) and starts the
//! chosen command. Only this module prints (stdout
//! through `output`). `search --catalog` and the hidden `eval` need no config.

use std::future::Future;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use serde_json::Value;

use crate::config::{locate, Config, Environment};
use crate::engine::Engine;

mod auth;
mod eval;
mod output;
mod search;
mod trust;

/// Exit codes (seed 003): 0 ok, 1 bad arguments or config, 2 nothing found.
pub mod exit {
    pub const OK: i32 = 0;
    pub const BAD_INPUT: i32 = 1;
    pub const NOT_FOUND: i32 = 2;
}

#[derive(Debug, Parser)]
#[command(
    name = "anygpt-discovery",
    version,
    about = "MCP gateway: five meta-tools in front of many MCP servers"
)]
struct Cli {
    /// Config file (JSON or YAML; TS/JS through the npm bin).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log filter for stderr, e.g. `debug` or `discovery=trace`.
    #[arg(long, global = true, value_name = "FILTER", env = "ANYGPT_LOG")]
    log_level: Option<String>,
    /// Let debug logs show `execute_tool` argument values and the MCP messages rmcp dumps at
    /// debug and trace (off: argument keys only; registered secrets are scrubbed either way).
    #[arg(long, global = true)]
    log_arguments: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the stdio MCP server (the default).
    Serve,
    /// Search tools by task or name (exit 2 when nothing matches).
    Search(search::SearchArgs),
    /// Accept the current version of a server's tools (or one tool) after review.
    Trust(trust::TrustArgs),
    /// Sign in to servers that need it: `auth login|status|logout [server]`.
    Auth(auth::AuthArgs),
    /// Measure search quality and latency on a query set (see `npm run eval:search`).
    #[command(hide = true)]
    Eval(eval::EvalArgs),
}

/// A config evaluated elsewhere (by the JS bin): the object and where it came from.
#[derive(Debug, Clone)]
pub struct ConfigObject {
    pub value: Value,
    pub origin: String,
}

/// Run the CLI on a runtime of its own and wait for its exit code: what the native binary's
/// `main` and the Node bin's `runCli` (on a thread of its own) do.
///
/// One thread: a gateway call is a few microseconds of work between two pipe hops, and a
/// second worker only added cross-thread wakeups, about 0.04 ms per proxied call on the
/// 2-core machine of BENCHMARKS.md. The cost is that CPU-heavy moments (parsing a 10 MB
/// result, re-indexing a large server) delay other calls by that long instead of running
/// beside them.
#[must_use]
pub fn run_blocking(args: Vec<String>, config_object: Option<ConfigObject>, shutdown: impl Future<Output = ()>) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
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

/// Run the CLI with `args` (argv without the program name is fine too: clap skips argv[0],
/// so callers pass the program name first). Returns the process exit code.
pub async fn run(args: Vec<String>, config_object: Option<ConfigObject>, shutdown: impl Future<Output = ()>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { exit::BAD_INPUT } else { exit::OK };
            let _ = e.print();
            return code;
        }
    };
    crate::secrets::set_log_arguments(cli.log_arguments);
    init_logging(cli.log_level.as_deref(), cli.log_arguments);
    let load_config = || {
        resolve_config(cli.config.as_ref(), config_object).map_err(|message| {
            eprintln!("error: {message}");
            exit::BAD_INPUT
        })
    };
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => match load_config() {
            Ok(config) => {
                tracing::info!(config = %config.origin, servers = config.servers().len(), "serving MCP on stdio");
                let watched = crate::watch::config_files(&config);
                let engine = Engine::new(config);
                let _live_reload = crate::watch::reload_on_change(&engine, &watched);
                crate::gateway::serve_stdio(engine, shutdown).await;
                exit::OK
            }
            Err(code) => code,
        },
        Command::Search(args) => {
            let engine = match &args.catalog {
                Some(path) => search::offline_engine(path).map_err(|message| {
                    eprintln!("error: {message}");
                    exit::BAD_INPUT
                }),
                None => load_config().map(Engine::new),
            };
            match engine {
                Ok(engine) => search::run(args, engine).await,
                Err(code) => code,
            }
        }
        Command::Trust(args) => match load_config() {
            Ok(config) => trust::run(args, Engine::new(config)).await,
            Err(code) => code,
        },
        Command::Auth(args) => match load_config() {
            Ok(config) => auth::run(args, &config).await,
            Err(code) => code,
        },
        Command::Eval(args) => eval::run(args).await,
    }
}

/// The config to serve: an object the JS side evaluated (it asked [`locate`] which file wins,
/// so the order is the same), else what [`locate`] chooses. Says on stderr where it came from,
/// what each source held and what will likely fail.
fn resolve_config(flag: Option<&PathBuf>, object: Option<ConfigObject>) -> crate::Result<Config> {
    let config = if let Some(object) = object {
        Config::from_value(object.value, &object.origin)?
    } else {
        let env = Environment::current();
        Config::load(&locate(flag.map(PathBuf::as_path), &env), &env)?
    };
    for note in config.notes() {
        tracing::info!("{note}");
    }
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    if config.servers().is_empty() {
        tracing::warn!(
            "no servers configured: add them to ./.anygpt/mcp-discovery.config.json (or any MCP client's config) and restart"
        );
    }
    Ok(config)
}

/// stderr for log lines, with every registered secret scrubbed (`engine::scrub_secrets`):
/// libraries log errors that quote a server's URL, API key and all, and servers print their
/// own tokens to stderr. The logger makes one
/// writer per event; it holds the event's bytes and writes them scrubbed when flushed or
/// dropped, so a secret split across writes is still found.
#[derive(Default)]
struct ScrubbedStderr(Vec<u8>);

impl std::io::Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&self.0);
        let mut stderr = std::io::stderr().lock();
        stderr.write_all(crate::engine::scrub_secrets(&text).as_bytes())?;
        self.0.clear();
        stderr.flush()
    }
}

impl Drop for ScrubbedStderr {
    fn drop(&mut self) {
        let _ = std::io::Write::flush(self);
    }
}

fn init_logging(filter: Option<&str>, log_arguments: bool) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_new(filter.unwrap_or("discovery=info,warn"))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("discovery=info,warn"));
    // rmcp's service loop dumps whole messages at debug and trace (`received request` with
    // every argument value, `response message` with every result): only on request.
    let no_message_dumps = tracing_subscriber::filter::filter_fn(move |meta| {
        log_arguments || !(meta.target().starts_with("rmcp::service") && *meta.level() > tracing::Level::INFO)
    });
    // stdout is the MCP channel: logs only ever go to stderr. A second init (tests, repeated
    // runs inside one Node process) keeps the first subscriber.
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(ScrubbedStderr::default)
        .with_ansi(false)
        .with_target(false)
        .with_filter(filter)
        .with_filter(no_message_dumps);
    let _ = tracing_subscriber::registry().with(layer).try_init();
}
