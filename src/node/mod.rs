//! The napi bindings — the only `#[napi]` code. Thin: convert types, call the engine.
//!
//! `DiscoveryEngine` is the Node API; `runCliWithConfig`/`requestShutdown` back `runCli` in
//! index.js (and so the JS bin), which hands over the arguments (and a TS/JS config it
//! evaluated) and relays SIGINT/SIGTERM, since a signal handler installed from Rust would
//! fight Node's own. Engine errors become JS errors
//! whose `code` is the stable error code.

// napi passes JS values in by value; the bindings borrow from them.
#![expect(clippy::needless_pass_by_value, reason = "napi functions take owned JS values")]

use crate::caller::Caller;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue};
use napi_derive::napi;
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::cli::{self, ConfigObject};
use crate::config::{locate, Config, Environment};
use crate::engine::{Engine, ExecuteOptions, ProgressSink, ProgressUpdate, SearchRequest};
use crate::error::{Error as EngineError, ErrorCode};

/// napi's promise rejections carry a fixed `Status` as `code`, so the engine code travels as a
/// `CODE: ` message prefix that `index.js` moves into `error.code` (see `withCodes` there).
fn coded(code: ErrorCode, message: impl std::fmt::Display) -> napi::Error {
    napi::Error::new(Status::GenericFailure, format!("{code}: {message}"))
}

fn to_js(error: &EngineError) -> napi::Error {
    coded(error.code(), error)
}

/// A server behind the engine.
#[napi(object)]
pub struct ServerInfo {
    pub name: String,
    pub description: Option<String>,
    pub tool_count: u32,
    pub enabled_count: u32,
    /// `connected`, `idle` (tools from the snapshot), `connecting`, `needs sign-in` or `error`.
    #[napi(ts_type = "'connected' | 'idle' | 'connecting' | 'needs sign-in' | 'error'")]
    pub status: String,
    /// Why the status is `error` or `needs sign-in` (how to sign in).
    pub error: Option<String>,
    /// Tools the server's newest listing had that are not served, each with why (the first
    /// twenty); empty when none was dropped.
    pub dropped_tools: Vec<DroppedTool>,
    /// How many tools were dropped in all, when more than are named.
    pub dropped_count: Option<u32>,
    /// The server lists more tools than the gateway serves (10,000): the first this many are
    /// served, the rest not read.
    pub tools_cut_at: Option<u32>,
}

/// A tool a server listed that is not served, and why.
#[napi(object)]
pub struct DroppedTool {
    /// Its name as listed (cut short), or its place in the list (`#3`) without a usable name.
    pub name: String,
    pub reason: String,
}

/// What `reload` did to the servers, by name.
#[napi(object)]
pub struct ReloadSummary {
    /// Launched the same way: process and session kept.
    pub kept: Vec<String>,
    /// Launch changed (name, connection or startup timeout): started anew; the old process
    /// ends once its calls in flight do.
    pub restarted: Vec<String>,
    /// No longer configured: ended once their calls in flight did.
    pub stopped: Vec<String>,
    pub added: Vec<String>,
}

/// Options of `searchTools`.
#[napi(object)]
pub struct SearchOptions {
    /// Only this server's tools.
    pub server: Option<String>,
    /// An integer from 1 to 100. @default 10
    pub limit: Option<f64>,
    /// Include tools disabled by toolRules (marked `enabled: false`).
    pub include_disabled: Option<bool>,
}

/// One search hit.
#[napi(object)]
pub struct SearchResult {
    pub server: String,
    pub tool: String,
    pub summary: String,
    /// 0..1; 1 only for an exact tool name.
    pub relevance: f64,
    pub tags: Vec<String>,
    pub enabled: bool,
}

/// Results of `searchTools`.
#[napi(object)]
pub struct SearchResponse {
    pub results: Vec<SearchResult>,
    /// Servers still starting, whose tools are not searchable yet.
    pub pending: Option<u32>,
    pub hint: Option<String>,
}

/// One tool of `listTools`.
#[napi(object)]
pub struct ToolSummary {
    pub name: String,
    pub summary: String,
    pub enabled: bool,
    pub tags: Vec<String>,
    /// Trust findings by short name (`instruction`, `invisible-text`, `shadow-name`, `changed`, …).
    pub flags: Vec<String>,
}

/// Everything about one tool.
#[napi(object)]
pub struct ToolDetails {
    pub server: String,
    pub tool: String,
    pub description: String,
    /// JSON Schema, exactly as the server reported it.
    #[napi(ts_type = "Record<string, unknown>")]
    pub input_schema: Value,
    pub tags: Vec<String>,
    pub enabled: bool,
    /// Poisoning and shadowing findings, one sentence each.
    pub warnings: Vec<String>,
    /// How the tool differs from the version first seen or last trusted; empty when it does not.
    pub changed: Vec<String>,
}

/// One progress report of a running `executeTool`, as the server sent it.
#[napi(object)]
pub struct ToolProgress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Calls a JS function from the engine's threads; its return value is ignored.
type ProgressCallback = ThreadsafeFunction<ToolProgress, UnknownReturnValue, ToolProgress, Status, false>;

/// Options of `executeTool`.
#[napi(object, object_to_js = false)]
pub struct ExecuteToolOptions {
    /// Overrides the server's `timeoutMs` for this call: an integer from 1 to 2147483647.
    /// (A JS number, checked here: napi's `u32` would wrap `2**32` to 0 and `-1` to 49 days.)
    pub timeout_ms: Option<f64>,
    /// Called with each progress notification the server sends for this call. Reports travel
    /// apart from the result: the last may arrive just after the promise settles. A throw is
    /// reported as a process warning.
    #[napi(ts_type = "(progress: ToolProgress) => void")]
    pub on_progress: Option<ProgressCallback>,
    /// Cancels the call, downstream too; the promise rejects with `signal.reason`.
    /// (`index.js` swaps the signal for a call id before it reaches Rust.)
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<u32>,
}

/// Largest `limit` of `searchTools` (the engine's own ceiling).
#[expect(clippy::cast_precision_loss, reason = "a small constant")]
const MAX_SEARCH_LIMIT: f64 = crate::engine::MAX_SEARCH_LIMIT as f64;

/// Longest per-call timeout the Node API takes: `setTimeout`'s ceiling, about 24.8 days.
const MAX_CALL_TIMEOUT_MS: f64 = 2_147_483_647.0;

/// `timeoutMs` as milliseconds, or a validation error naming it and the allowed range.
fn call_timeout_ms(value: f64) -> std::result::Result<u64, EngineError> {
    whole_number("timeoutMs", value, MAX_CALL_TIMEOUT_MS, " (milliseconds)")
}

/// A JS number that must be a whole number from 1 to `max` (napi's `u32` would wrap `2**32`
/// to 0, `-1` to 4294967295 and cut `1.5` to 1 without a word).
fn whole_number(name: &str, value: f64, max: f64, unit: &str) -> std::result::Result<u64, EngineError> {
    if value.is_finite() && value.fract() == 0.0 && (1.0..=max).contains(&value) {
        // In range and integral, so the cast is exact.
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "checked above")]
        return Ok(value as u64);
    }
    Err(EngineError::validation(format!(
        "`{name}` must be an integer from 1 to {max}{unit}; got {}",
        js_number(value)
    )))
}

/// A number as JS prints it (`Infinity`, `NaN`, `1.5`, `-1`).
fn js_number(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        value.to_string()
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The discovery engine: the same engine the MCP gateway serves, for TypeScript code.
///
/// Servers connect in the background on the first call; `close()` ends every server process.
#[napi(js_name = "DiscoveryEngine")]
pub struct JsDiscoveryEngine {
    engine: Engine,
    /// Cancellation of the calls `index.js` gave an `AbortSignal`, by call id.
    aborts: Aborts,
}

type Aborts = Arc<Mutex<HashMap<u32, CancellationToken>>>;

/// The cancellation token of call `id`, registered until the call ends. An abort that came
/// first left an already-cancelled token behind, which the call picks up.
struct AbortRegistration {
    aborts: Aborts,
    id: u32,
    token: CancellationToken,
}

impl AbortRegistration {
    fn new(aborts: &Aborts, id: u32) -> Self {
        let token = lock(aborts).entry(id).or_default().clone();
        Self {
            aborts: aborts.clone(),
            id,
            token,
        }
    }
}

impl Drop for AbortRegistration {
    fn drop(&mut self) {
        lock(&self.aborts).remove(&self.id);
    }
}

fn lock(aborts: &Aborts) -> std::sync::MutexGuard<'_, HashMap<u32, CancellationToken>> {
    aborts
        .lock()
        .expect("the abort table is never poisoned: no panics while held")
}

/// Forwards a call's progress to its JS callback (non-blocking: a slow callback drops nothing,
/// the queue grows).
fn progress_sink(callback: ProgressCallback) -> ProgressSink {
    Arc::new(move |update: ProgressUpdate| {
        let progress = ToolProgress {
            progress: update.progress,
            total: update.total,
            message: update.message,
        };
        callback.call(progress, ThreadsafeFunctionCallMode::NonBlocking);
    })
}

#[napi]
impl JsDiscoveryEngine {
    /// Create an engine from a config object: `{ discovery: {...} }` or the `discovery` section
    /// itself (`origin` names the file it came from, if any). Without an object, the config is
    /// the file `origin` names, else the search order's winner, else zero-config (every MCP
    /// client's config found); a TS/JS winner needs `await createEngine()`, which evaluates it.
    /// Throws `CONFIGURATION_ERROR` naming the file and the path of a bad field.
    #[napi(constructor)]
    pub fn new(
        #[napi(ts_arg_type = "DiscoveryConfig | { discovery: DiscoveryConfig } | undefined")] config: Option<Value>,
        #[napi(ts_arg_type = "string | undefined")] origin: Option<String>,
    ) -> Result<Self> {
        let config = if let Some(value) = config {
            match origin.as_deref() {
                // A TS/JS file `createEngine` evaluated: the scope the search gave it.
                Some(origin) => {
                    let env = Environment::current();
                    Config::from_located_value(value, origin, &locate(None, &env), &env)
                }
                None => Config::from_value(value, "<object>"),
            }
        } else {
            let env = Environment::current();
            Config::load(&locate(origin.as_deref().map(std::path::Path::new), &env), &env)
        }
        .map_err(|e| to_js(&e))?;
        Ok(Self {
            aborts: Aborts::default(),
            engine: Engine::new(config),
        })
    }

    /// Every server with status and tool counts.
    #[napi]
    pub async fn list_servers(&self) -> Vec<ServerInfo> {
        self.engine
            .list_servers(&Caller::local())
            .await
            .into_iter()
            .map(|s| ServerInfo {
                name: s.name,
                description: s.description,
                tool_count: count(s.tool_count),
                enabled_count: count(s.enabled_count),
                status: s.status.as_str().to_owned(),
                error: s.error,
                dropped_tools: s
                    .dropped_tools
                    .into_iter()
                    .map(|d| DroppedTool {
                        name: d.name,
                        reason: d.reason,
                    })
                    .collect(),
                dropped_count: s.dropped_count.map(count),
                tools_cut_at: s.tools_cut_at.map(count),
            })
            .collect()
    }

    /// Ranked tools for a query. An exact tool name always ranks first.
    #[napi]
    pub async fn search_tools(&self, query: String, options: Option<SearchOptions>) -> Result<SearchResponse> {
        let options = options.unwrap_or(SearchOptions {
            server: None,
            limit: None,
            include_disabled: None,
        });
        let request = SearchRequest {
            query,
            server: options.server,
            limit: options
                .limit
                .map(|l| whole_number("limit", l, MAX_SEARCH_LIMIT, ""))
                .transpose()
                .map_err(|e| to_js(&e))?
                .and_then(|l| usize::try_from(l).ok()),
            include_disabled: options.include_disabled.unwrap_or(false),
        };
        let response = self
            .engine
            .search(&Caller::local(), &request)
            .await
            .map_err(|e| to_js(&e))?;
        let hint = response.hint("no tool matches; try other words, or listTools for a server");
        Ok(SearchResponse {
            results: response
                .results
                .into_iter()
                .map(|r| SearchResult {
                    server: r.server,
                    tool: r.tool,
                    summary: r.summary,
                    relevance: r.relevance,
                    tags: r.tags,
                    enabled: r.enabled,
                })
                .collect(),
            pending: response.pending.map(count),
            hint,
        })
    }

    /// One server's tools (enabled only, unless `includeDisabled`).
    #[napi]
    pub async fn list_tools(&self, server: String, include_disabled: Option<bool>) -> Result<Vec<ToolSummary>> {
        let tools = self
            .engine
            .list_tools(&Caller::local(), &server, include_disabled.unwrap_or(false))
            .await
            .map_err(|e| to_js(&e))?;
        Ok(tools
            .tools
            .into_iter()
            .map(|t| ToolSummary {
                name: t.name,
                summary: t.summary,
                enabled: t.enabled,
                tags: t.tags,
                flags: t.flags.into_iter().map(str::to_owned).collect(),
            })
            .collect())
    }

    /// Full description and input schema of one tool.
    #[napi]
    pub async fn get_tool_details(&self, server: String, tool: String) -> Result<ToolDetails> {
        let d = self
            .engine
            .tool_details(&Caller::local(), &server, &tool)
            .await
            .map_err(|e| to_js(&e))?;
        Ok(ToolDetails {
            server: d.server,
            tool: d.tool,
            description: d.description,
            input_schema: d.input_schema,
            tags: d.tags,
            enabled: d.enabled,
            warnings: d.warnings,
            changed: d.changed,
        })
    }

    /// Accept the current version of a server's tools (all, or only `tool`) after review: they
    /// are no longer marked changed, and `security.blockFlagged` / `onToolChange: "block"` let
    /// them run. Resolves with the names trusted.
    #[napi]
    pub async fn trust_tools(&self, server: String, tool: Option<String>) -> Result<Vec<String>> {
        self.engine
            .trust_tools(&server, tool.as_deref())
            .await
            .map_err(|e| to_js(&e))
    }

    /// Run a tool; resolves with the server's `CallToolResult` unchanged (check `isError`).
    /// Throws `TOOL_DISABLED`, `TOOL_NOT_FOUND`, `TOOL_EXECUTION_TIMEOUT`, … for gateway errors.
    #[napi(ts_return_type = "Promise<CallToolResult>")]
    pub async fn execute_tool(
        &self,
        server: String,
        tool: String,
        #[napi(ts_arg_type = "Record<string, unknown> | undefined")] args: Option<Value>,
        options: Option<ExecuteToolOptions>,
    ) -> Result<Value> {
        let options = options.unwrap_or(ExecuteToolOptions {
            timeout_ms: None,
            on_progress: None,
            signal: None,
        });
        let timeout_ms = options
            .timeout_ms
            .map(call_timeout_ms)
            .transpose()
            .map_err(|e| to_js(&e))?;
        let abort = options.signal.map(|id| AbortRegistration::new(&self.aborts, id));
        let options = ExecuteOptions {
            timeout_ms,
            cancel: abort.as_ref().map(|a| a.token.clone()),
            progress: options.on_progress.map(progress_sink),
            // Nobody to ask in-process: a `confirm: true` tool is refused, a
            // `"when-supported"` one runs.
            confirm: None,
            trace: None,
        };
        let result = self
            .engine
            .execute(&Caller::local(), &server, &tool, args, options)
            .await
            .map_err(|e| to_js(&e))?;
        serde_json::to_value(result).map_err(|e| coded(ErrorCode::ToolExecutionError, e))
    }

    /// Cancel the call `index.js` registered under `id` for an `AbortSignal`.
    #[napi(js_name = "_abortCall", skip_typescript)]
    pub fn abort_call(&self, id: u32) {
        lock(&self.aborts).entry(id).or_default().cancel();
    }

    /// Apply a new config, or read the current one again from its file, without dropping
    /// work: servers launched the same way keep their process and session, changed ones
    /// restart, removed ones stop once their calls in flight end, added ones start. Throws
    /// `CONFIGURATION_ERROR` for a bad config; the current one then keeps serving.
    #[napi]
    pub async fn reload(
        &self,
        #[napi(ts_arg_type = "DiscoveryConfig | { discovery: DiscoveryConfig } | undefined")] config: Option<Value>,
    ) -> Result<ReloadSummary> {
        let config = config
            .map(|c| Config::from_value(c, "<object>"))
            .transpose()
            .map_err(|e| to_js(&e))?;
        let summary = self.engine.reload(config).await.map_err(|e| to_js(&e))?;
        Ok(ReloadSummary {
            kept: summary.kept,
            restarted: summary.restarted,
            stopped: summary.stopped,
            added: summary.added,
        })
    }

    /// The config as given, every registered secret (env and header values, URL passwords and
    /// query values, credential arguments) replaced by `***`; `${VAR}` references are kept.
    #[napi(ts_return_type = "{ discovery: DiscoveryConfig }")]
    #[must_use]
    pub fn get_config(&self) -> Value {
        self.engine.config()
    }

    /// Calls, outcomes (ok, the server's `isError`, the gateway's errors by code) and
    /// latency per server and tool, of every call made through this engine (or one server's).
    #[napi(ts_return_type = "StatsSnapshot")]
    #[must_use]
    pub fn get_stats(&self, server: Option<String>) -> Value {
        serde_json::to_value(self.engine.stats(server.as_deref())).expect("statistics serialize: strings and numbers")
    }

    /// The semantic search tier: `status` is `on`, `loading`, `off` (config), `no-model` or
    /// `failed`; `detail` is the model's id when on and why when failed.
    #[napi]
    #[must_use]
    pub fn semantic_search(&self) -> SemanticSearch {
        let (status, detail) = self.engine.semantic_status();
        SemanticSearch { status, detail }
    }

    /// Close every session and end every server process (whole process trees).
    #[napi]
    pub async fn close(&self) {
        self.engine.close().await;
    }

    /// Serve this engine to many clients over streamable HTTP, as `serve --http` does: `/mcp`
    /// (sessionless), `/healthz`, `/readyz`, `/metrics`. `listen` is `HOST:PORT` (port 0 picks
    /// a free one; default `discovery.http.listen`, else `127.0.0.1:8080`). Throws
    /// `CONFIGURATION_ERROR` for an address other machines can reach while no authentication
    /// is configured. Closing the server leaves the engine open.
    #[napi]
    pub async fn serve_http(&self, listen: Option<String>) -> Result<HttpServer> {
        let bound = crate::http::bind(&self.engine, listen.as_deref())
            .await
            .map_err(|e| coded(ErrorCode::ConfigurationError, e))?;
        let url = format!("http://{}/mcp", bound.address());
        let stop = CancellationToken::new();
        let serving = tokio::spawn(bound.serve(stop.clone().cancelled_owned()));
        Ok(HttpServer {
            url,
            stop,
            serving: tokio::sync::Mutex::new(Some(serving)),
        })
    }
}

/// The team face of an engine, serving until `close()`.
#[napi]
pub struct HttpServer {
    url: String,
    stop: CancellationToken,
    serving: tokio::sync::Mutex<Option<tokio::task::JoinHandle<std::result::Result<(), crate::http::BindError>>>>,
}

#[napi]
impl HttpServer {
    /// The MCP endpoint, `http://HOST:PORT/mcp`.
    #[napi(getter)]
    #[must_use]
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Stop accepting, let calls in flight finish (within `discovery.http.drainTimeoutMs`),
    /// and resolve once the server has stopped. Idempotent.
    #[napi]
    pub async fn close(&self) {
        self.stop.cancel();
        if let Some(serving) = self.serving.lock().await.take() {
            match serving.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!(%error, "the HTTP face stopped with an error"),
                Err(error) => tracing::warn!(%error, "the HTTP face's task failed"),
            }
        }
    }
}

/// What `semanticSearch()` answers.
#[napi(object)]
pub struct SemanticSearch {
    pub status: String,
    pub detail: Option<String>,
}

/// Where the optional weights package `@anygpt/discovery-model-minilm` is installed, as
/// index.js resolved it from its own location (inside Node the running program is `node`, so
/// the engine cannot look beside itself). Engines created afterwards use it when neither
/// `search.model` nor `ANYGPT_SEARCH_MODEL` names a model.
#[napi(js_name = "_setModelPackage", skip_typescript)]
pub fn set_model_package(dir: String) {
    crate::search::semantic::set_package_dir(dir.into());
}

/// Whether `name` matches `patterns` with the toolRules semantics (glob, `/regex/flags`,
/// `!negation`, in order). Throws `CONFIGURATION_ERROR` for an invalid pattern.
#[napi]
pub fn match_pattern(name: String, patterns: Vec<String>) -> Result<bool> {
    crate::rules::match_pattern(&name, &patterns)
        .map_err(|(index, e)| coded(ErrorCode::ConfigurationError, format!("patterns[{index}]: {e}")))
}

/// Which config file wins (`locateConfig`): the search order's answer, shared by the bin,
/// `createEngine` and the native binary.
#[napi(object)]
pub struct LocatedConfig {
    /// The winning file (absolute), or none for zero-config.
    pub file: Option<String>,
    /// Whether `file` is TS/JS, which the JS side evaluates.
    pub needs_js: bool,
    /// Every place looked, in order.
    pub looked: Vec<String>,
}

/// Decide which config file wins: `config` (like `--config`), then `ANYGPT_DISCOVERY_CONFIG`,
/// then `./.anygpt/mcp-discovery.config.*`, `./anygpt.config.*`, the same under the home
/// directory; none means zero-config.
#[napi]
#[must_use]
pub fn locate_config(config: Option<String>) -> LocatedConfig {
    let located = locate(config.as_deref().map(std::path::Path::new), &Environment::current());
    LocatedConfig {
        needs_js: located.needs_js(),
        file: located.file.map(|f| f.display().to_string()),
        looked: located.looked,
    }
}

/// Whether the command line `args` (without the program name) needs the config: the npm bin
/// evaluates a TS/JS config only then, never for `--help`, `--version`, `completions`,
/// `allow`, `deny`, `config path` or a command line that does not parse.
#[napi]
#[must_use]
pub fn command_needs_config(args: Vec<String>) -> bool {
    cli::needs_config(std::iter::once("anygpt-discovery".to_owned()).chain(args))
}

static SHUTDOWN: LazyLock<Notify> = LazyLock::new(Notify::new);

/// Run the CLI as `anygpt-discovery <args…>` with a config the JS side already evaluated
/// (a TS/JS file, and the file it came from); `runCli` in index.js evaluates it and calls
/// this. Resolves with the exit code.
/// `reevaluate` evaluates that file again (a served config reloads through it: a change to
/// the file, `config reload`, SIGHUP).
#[napi]
pub async fn run_cli_with_config(
    args: Vec<String>,
    #[napi(ts_arg_type = "Record<string, unknown> | undefined")] config: Option<Value>,
    config_path: Option<String>,
    #[napi(ts_arg_type = "(() => Promise<Record<string, unknown>>) | undefined")] reevaluate: Option<
        ReevaluateCallback,
    >,
) -> i32 {
    // clap wants the program name first.
    let program_and_args: Vec<String> = std::iter::once("anygpt-discovery".to_owned()).chain(args).collect();
    let origin = config_path.unwrap_or_else(|| "<object>".into());
    let reevaluate = reevaluate.map(|callback| reevaluate_hook(callback, origin.clone()));
    let config = config.map(|value| ConfigObject {
        value,
        origin,
        reevaluate,
    });
    // The CLI gets a thread and runtime of its own (see `cli::run_blocking`) rather than
    // napi's shared multi-thread one; the promise resolves when it exits.
    let (done, exit_code) = tokio::sync::oneshot::channel();
    let started = std::thread::Builder::new()
        .name("anygpt-discovery".into())
        .spawn(move || {
            let _ = done.send(cli::run_blocking(program_and_args, config, SHUTDOWN.notified()));
        });
    if let Err(e) = started {
        eprintln!("error: cannot start the gateway thread: {e}");
        return cli::exit::BAD_INPUT;
    }
    // A panic on that thread drops `done`: report it as a failure, not a hang.
    exit_code.await.unwrap_or(cli::exit::BAD_INPUT)
}

/// `loadJsConfig` again, on Node's thread; resolves with the new object.
type ReevaluateCallback = ThreadsafeFunction<(), Promise<Value>, (), Status, false>;

/// The hook a served TS/JS config reloads through. A rejection (a syntax error, a throw in
/// the config) becomes a configuration error: the reload fails and the old config serves on.
fn reevaluate_hook(callback: ReevaluateCallback, origin: String) -> crate::watch::Reevaluate {
    let callback = Arc::new(callback);
    crate::watch::Reevaluate(Arc::new(move || {
        let callback = callback.clone();
        let origin = origin.clone();
        Box::pin(async move {
            let failed = |e: napi::Error| EngineError::Configuration {
                origin: origin.clone(),
                path: "(evaluating the file)".into(),
                // `loadJsConfig`'s message starts with the file, which the error names already.
                reason: e
                    .reason
                    .split_once(": cannot load config: ")
                    .map_or_else(|| e.reason.clone(), |(_, r)| r.to_owned()),
            };
            let promise = callback.call_async_catch(()).await.map_err(failed)?;
            promise.await.map_err(failed)
        })
    }))
}

/// SIGHUP relayed by `runCli`: a gateway serving in this process reloads its config (the
/// daemon convention). False when none is serving, and the signal then stops the CLI.
#[napi]
#[must_use]
pub fn request_reload() -> bool {
    crate::watch::request_reload()
}

/// Ask a running `runCli` to stop: a server closes its downstream servers and resolves with
/// 0, a command is interrupted (its tool call cancelled) and resolves with 130.
#[napi]
pub fn request_shutdown() {
    // notify_one stores a permit, so a signal that arrives before the server waits is kept.
    SHUTDOWN.notify_one();
}
