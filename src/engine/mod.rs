//! `Engine`: the facade every face calls (gateway, CLI, Node binding).
//!
//! It owns the config, the upstream pool, the catalog (with its on-disk snapshot), argument
//! validators and the audit log, and answers the five operations plus reload and close.
//! Results are plain serde types, so each face renders them as it needs (compact JSON for the
//! model, JS objects for Node). Nothing here prints.
//!
//! Startup never waits on servers: a server whose snapshot is fresh is served from it and
//! connected only when a call needs it; the others connect in the background.

mod cap;
mod validate;

use std::path::PathBuf;
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, Tool};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::audit::AuditLog;
use crate::catalog::snapshot::SnapshotStore;
use crate::catalog::{Catalog, ToolEntry};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::search::{self, IndexedCatalog, Query};
use crate::upstream::{CallFailure, Connection, Pool, Server, ServerStatus, UpstreamEvent};

pub use crate::upstream::{ProgressSink, ProgressUpdate};
pub use cap::cap_result;

/// How long a search waits for servers still starting before answering with what it has
/// (and saying how many are pending). Servers with a snapshot never make it wait.
const SEARCH_WAIT: Duration = Duration::from_secs(5);
/// Default number of search results.
pub const DEFAULT_SEARCH_LIMIT: usize = 10;
/// Largest accepted search limit.
pub const MAX_SEARCH_LIMIT: usize = 100;

/// One server in `list_mcp_servers`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerInfo {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub tool_count: usize,
    pub enabled_count: usize,
    pub status: String,
    /// Why the status is `error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A search request.
#[derive(Debug, Clone, Default)]
pub struct SearchRequest {
    pub query: String,
    pub server: Option<String>,
    pub limit: Option<usize>,
    pub include_disabled: bool,
}

/// One search hit.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult {
    pub server: String,
    pub tool: String,
    pub summary: String,
    /// 0..1, two decimals.
    pub relevance: f64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Only present (as `false`) for disabled tools when they were asked for.
    #[serde(skip_serializing_if = "is_true")]
    pub enabled: bool,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_true(value: &bool) -> bool {
    *value
}

/// Search results, with a word on anything that limits them.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResponse {
    pub results: Vec<SearchResult>,
    /// Servers still starting, whose tools are not searchable yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// One tool in `list_tools`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSummary {
    pub name: String,
    pub summary: String,
    pub enabled: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// `list_tools` of one server.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerTools {
    pub server: String,
    pub tools: Vec<ToolSummary>,
}

/// Everything about one tool.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDetails {
    pub server: String,
    pub tool: String,
    pub description: String,
    /// As the server reported it.
    pub input_schema: Value,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    pub enabled: bool,
}

/// Per-call options of `execute`.
#[derive(Clone, Default)]
pub struct ExecuteOptions {
    /// Overrides the server's `timeoutMs`.
    pub timeout_ms: Option<u64>,
    /// Cancelled when the caller gives up; the downstream call is cancelled too.
    pub cancel: Option<CancellationToken>,
    /// Receives the downstream server's progress notifications for this call.
    pub progress: Option<ProgressSink>,
}

impl std::fmt::Debug for ExecuteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecuteOptions")
            .field("timeout_ms", &self.timeout_ms)
            .field("cancel", &self.cancel)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// Everything that belongs to one loaded config; `reload` swaps it whole.
#[derive(Debug)]
struct State {
    config: Config,
    pool: Pool,
    catalog: RwLock<IndexedCatalog>,
    snapshots: Option<SnapshotStore>,
    audit: Option<AuditLog>,
    validators: validate::Validators,
    started: std::sync::Once,
    /// Taken by the task that handles server events when the state starts.
    events: std::sync::Mutex<Option<mpsc::UnboundedReceiver<UpstreamEvent>>>,
}

/// The discovery engine.
#[derive(Debug, Clone)]
pub struct Engine {
    state: Arc<RwLock<Arc<State>>>,
}

impl Engine {
    /// An engine over `config`. Nothing connects until the first operation or [`Engine::start`].
    #[must_use]
    pub fn new(config: Config) -> Self {
        Self {
            state: Arc::new(RwLock::new(Arc::new(State::new(config)))),
        }
    }

    /// An engine over an offline catalog (e.g. [`crate::catalog::file::load`]) and no config:
    /// its tools are searchable (with or without a `server` filter), but its servers are never
    /// connected, so the other operations answer `SERVER_NOT_FOUND` for them.
    #[must_use]
    pub fn from_catalog(catalog: impl Into<IndexedCatalog>) -> Self {
        let state = State::new(Config::empty());
        *state.catalog.write().expect("catalog lock is never poisoned") = catalog.into();
        Self {
            state: Arc::new(RwLock::new(Arc::new(state))),
        }
    }

    fn current(&self) -> Arc<State> {
        let state = self.state.read().expect("engine state lock is never poisoned").clone();
        state.ensure_started();
        state
    }

    /// Start connecting every server in the background. Idempotent; needs a tokio runtime.
    pub fn start(&self) {
        self.current();
    }

    /// The config as written, secrets redacted.
    #[must_use]
    pub fn config(&self) -> Value {
        self.state
            .read()
            .expect("engine state lock is never poisoned")
            .config
            .redacted()
    }

    /// Every server with its status and tool counts. Waits for servers still starting.
    pub async fn list_servers(&self) -> Vec<ServerInfo> {
        let state = self.current();
        state.wait_all(SEARCH_WAIT).await;
        let catalog = state.read_catalog();
        state
            .pool
            .servers()
            .map(|server| {
                let tools = catalog.server_tools(&server.spec.name).unwrap_or_default();
                let status = server.status();
                ServerInfo {
                    name: server.spec.name.clone(),
                    description: server.spec.description.clone(),
                    tool_count: tools.len(),
                    enabled_count: tools.iter().filter(|t| t.enabled).count(),
                    status: status.as_str().to_owned(),
                    error: match status {
                        ServerStatus::Error(reason) => Some(reason),
                        _ => None,
                    },
                }
            })
            .collect()
    }

    /// Ranked tools for a query.
    ///
    /// # Errors
    /// `VALIDATION_ERROR` for an empty query or a bad limit; `SERVER_NOT_FOUND` for an
    /// unknown `server` filter. A query over `search::MAX_QUERY_CHARS` characters is cut
    /// there (and the hint says so).
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let query = request.query.trim();
        if query.is_empty() {
            return Err(Error::validation("query: must not be empty"));
        }
        // A model that pastes data into its query (a file, base64) still meant the words at the
        // start: search those rather than fail.
        let truncated = query.char_indices().nth(search::MAX_QUERY_CHARS).map(|(at, _)| at);
        let query = truncated.map_or(query, |at| &query[..at]);
        let limit = request.limit.unwrap_or(DEFAULT_SEARCH_LIMIT);
        if limit == 0 || limit > MAX_SEARCH_LIMIT {
            return Err(Error::validation(format!(
                "limit: must be between 1 and {MAX_SEARCH_LIMIT}"
            )));
        }
        let state = self.current();
        if let Some(server) = &request.server {
            if !state.read_catalog().index().has_server(server) {
                state.server(server)?;
            }
        }
        state.wait_all(SEARCH_WAIT).await;
        // Servers still starting; an idle server's tools are already known (snapshot).
        let pending = state
            .pool
            .servers()
            .filter(|s| s.status() == ServerStatus::Connecting)
            .count();
        let catalog = state.read_catalog();
        let hits = search::search(
            &catalog,
            &Query {
                text: query,
                server: request.server.as_deref(),
                limit,
                include_disabled: request.include_disabled,
            },
        );
        let results: Vec<SearchResult> = hits
            .into_iter()
            .map(|hit| SearchResult {
                server: hit.entry.server.clone(),
                tool: hit.entry.name().to_owned(),
                summary: hit.entry.summary.clone(),
                relevance: (hit.relevance * 100.0).round() / 100.0,
                tags: hit.entry.tags.clone(),
                enabled: hit.entry.enabled,
            })
            .collect();
        let mut hint = match (results.is_empty(), pending) {
            (_, n) if n > 0 => Some(format!(
                "{n} server(s) still starting; search again shortly for their tools"
            )),
            (true, _) => Some("no tool matches; try other words, or list_tools for a server".to_owned()),
            _ => None,
        };
        if truncated.is_some() {
            let note = format!("query cut to its first {} characters", search::MAX_QUERY_CHARS);
            hint = Some(hint.map_or(note.clone(), |h| format!("{note}; {h}")));
        }
        Ok(SearchResponse {
            results,
            pending: (pending > 0).then_some(pending),
            hint,
        })
    }

    /// The tools of one server.
    ///
    /// # Errors
    /// `SERVER_NOT_FOUND`, or `SERVER_CONNECTION_ERROR` when its tools could not be listed.
    pub async fn list_tools(&self, server: &str, include_disabled: bool) -> Result<ServerTools> {
        let state = self.current();
        let tools = state.server_catalog(server).await?;
        Ok(ServerTools {
            server: server.to_owned(),
            tools: tools
                .iter()
                .filter(|t| include_disabled || t.enabled)
                .map(|t| ToolSummary {
                    name: t.name().to_owned(),
                    summary: t.summary.clone(),
                    enabled: t.enabled,
                    tags: t.tags.clone(),
                })
                .collect(),
        })
    }

    /// Full description and input schema of one tool (disabled tools included, marked).
    ///
    /// # Errors
    /// `SERVER_NOT_FOUND`, `SERVER_CONNECTION_ERROR`, `TOOL_NOT_FOUND` (with suggestions).
    pub async fn tool_details(&self, server: &str, tool: &str) -> Result<ToolDetails> {
        let state = self.current();
        let entry = state.find_tool(server, tool).await?;
        Ok(ToolDetails {
            server: entry.server.clone(),
            tool: entry.name().to_owned(),
            description: entry.description().to_owned(),
            input_schema: Value::Object((*entry.tool.input_schema).clone()),
            tags: entry.tags.clone(),
            enabled: entry.enabled,
        })
    }

    /// Run a tool on its server and return the server's result unchanged.
    ///
    /// # Errors
    /// `SERVER_NOT_FOUND`, `SERVER_CONNECTION_ERROR`, `TOOL_NOT_FOUND`, `TOOL_DISABLED` (the
    /// server never sees the call), `VALIDATION_ERROR`, `TOOL_EXECUTION_ERROR`,
    /// `TOOL_EXECUTION_TIMEOUT`.
    pub async fn execute(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<Value>,
        options: ExecuteOptions,
    ) -> Result<CallToolResult> {
        let state = self.current();
        let started = Instant::now();
        let arguments = match arguments {
            None | Some(Value::Null) => Ok(None),
            Some(object @ Value::Object(_)) => Ok(Some(object)),
            Some(other) => Err(Error::validation(format!(
                "`/`: arguments must be an object, found {other}"
            ))),
        };
        match arguments {
            Ok(arguments) => {
                let outcome = state.execute(server, tool, arguments.as_ref(), options).await;
                state.audit(
                    server,
                    tool,
                    arguments.as_ref().and_then(Value::as_object),
                    &outcome,
                    started,
                );
                outcome
            }
            Err(error) => {
                state.audit(server, tool, None, &Err(error.clone()), started);
                Err(error)
            }
        }
    }

    /// Replace the config (or reconnect with the same one): closes every session, clears the
    /// catalog, and starts again.
    pub async fn reload(&self, config: Option<Config>) {
        let next = {
            let current = self.state.read().expect("engine state lock is never poisoned").clone();
            let config = config.unwrap_or_else(|| current.config.clone());
            Arc::new(State::new(config))
        };
        let previous = std::mem::replace(
            &mut *self.state.write().expect("engine state lock is never poisoned"),
            next,
        );
        previous.pool.close().await;
        self.start();
    }

    /// Close every session and end every downstream process tree.
    pub async fn close(&self) {
        let state = self.state.read().expect("engine state lock is never poisoned").clone();
        state.pool.close().await;
    }
}

impl State {
    fn new(config: Config) -> Self {
        let base_dir = config_dir(&config.origin);
        let (events, receiver) = mpsc::unbounded_channel();
        Self {
            pool: Pool::new(config.servers(), base_dir, config.discovery.idle_timeout_ms, events),
            catalog: RwLock::new(IndexedCatalog::from(Catalog::with_descriptions(
                config
                    .servers()
                    .iter()
                    .filter_map(|s| Some((s.name.as_str(), s.description.as_deref()?))),
            ))),
            snapshots: config
                .discovery
                .cache
                .enabled
                .then(SnapshotStore::in_cache_dir)
                .flatten(),
            audit: AuditLog::from_spec(&config.discovery.audit),
            validators: validate::Validators::default(),
            config,
            started: std::sync::Once::new(),
            events: std::sync::Mutex::new(Some(receiver)),
        }
    }

    /// Serve every server from its snapshot when there is a fresh one, and connect the others
    /// in the background. Runs once, before the first answer; reads only small local files.
    fn ensure_started(self: &Arc<Self>) {
        self.started.call_once(|| {
            let ttl = Duration::from_secs(self.config.discovery.cache.ttl);
            for server in self.pool.servers() {
                let snapshot = self.snapshots.as_ref().and_then(|store| store.load(&server.spec));
                let fresh = snapshot.as_ref().is_some_and(|s| s.age <= ttl);
                if let Some(snapshot) = snapshot {
                    self.index(&server.spec.name, snapshot.tools);
                }
                if fresh {
                    tracing::debug!(server = %server.spec.name, "serving tools from the snapshot; connecting on first use");
                    continue;
                }
                server.set_status(ServerStatus::Connecting);
                self.connect_in_background(&server.spec.name);
            }
            let receiver = self.events.lock().expect("events lock is never poisoned").take();
            if let Some(receiver) = receiver {
                tokio::spawn(handle_events(Arc::downgrade(self), receiver, self.pool.shutdown_token().clone()));
            }
        });
    }

    fn read_catalog(&self) -> std::sync::RwLockReadGuard<'_, IndexedCatalog> {
        self.catalog.read().expect("catalog lock is never poisoned")
    }

    /// Put `server`'s tools into the catalog (rules applied) and log what changed.
    fn index(&self, server: &str, tools: Vec<Tool>) {
        let changes = self
            .catalog
            .write()
            .expect("catalog lock is never poisoned")
            .set_server_tools(server, tools, self.config.rules());
        if !changes.is_empty() {
            tracing::info!(
                server,
                added = changes.added.len(),
                updated = changes.updated.len(),
                removed = changes.removed.len(),
                "catalog updated"
            );
        }
    }

    /// Index fresh tools and keep them for the next start.
    fn refresh(&self, server: &Server, tools: Vec<Tool>) {
        if let Some(store) = &self.snapshots {
            store.save(&server.spec, &tools);
        }
        self.index(&server.spec.name, tools);
    }

    /// Connect `name` and index its tools; failures live on in the server's status.
    async fn connect(&self, name: &str) -> Option<Arc<Connection>> {
        let server = self.pool.get(name)?;
        self.pool
            .connection(server, |tools| self.refresh(server, tools))
            .await
            .ok()
    }

    async fn wait_all(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        for server in self.pool.servers() {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            Pool::wait_settled(server, left).await;
        }
    }

    fn server(&self, name: &str) -> Result<&Arc<Server>> {
        self.pool.get(name).ok_or_else(|| Error::ServerNotFound {
            server: name.to_owned(),
            suggestions: search::suggest_servers(self.pool.servers().map(|s| s.spec.name.as_str()), name),
        })
    }

    /// `server`'s catalog entries, waiting for its first listing.
    async fn server_catalog(&self, name: &str) -> Result<Vec<ToolEntry>> {
        self.with_server_tools(name, <[ToolEntry]>::to_vec).await
    }

    /// Run `f` on `server`'s catalog entries once they are known (waiting for a server still
    /// starting), without copying the list.
    async fn with_server_tools<T>(&self, name: &str, f: impl FnOnce(&[ToolEntry]) -> T) -> Result<T> {
        let server = self.server(name)?;
        if server.status() == ServerStatus::Connecting {
            Pool::wait_settled(server, Duration::from_millis(server.spec.startup_timeout_ms())).await;
        }
        if let Some(tools) = self.read_catalog().server_tools(name) {
            return Ok(f(tools));
        }
        let reason = match server.status() {
            ServerStatus::Error(reason) => reason,
            _ => "still starting".to_owned(),
        };
        Err(Error::ServerConnection {
            server: name.to_owned(),
            reason,
        })
    }

    async fn find_tool(&self, server: &str, tool: &str) -> Result<ToolEntry> {
        let found = self
            .with_server_tools(server, |tools| tools.iter().find(|t| t.name() == tool).cloned())
            .await?;
        found.ok_or_else(|| Error::ToolNotFound {
            server: server.to_owned(),
            tool: tool.to_owned(),
            suggestions: search::suggest_tools(&self.read_catalog(), server, tool),
        })
    }

    /// Everything `execute` does after parsing, in order: find, rules, schema, call, cap.
    async fn execute(
        self: &Arc<Self>,
        server: &str,
        tool: &str,
        arguments: Option<&Value>,
        options: ExecuteOptions,
    ) -> Result<CallToolResult> {
        static NO_ARGUMENTS: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| Value::Object(JsonObject::new()));
        // The tool may wait for its server's first tool list: an abort must not wait with it.
        let cancel = options.cancel.clone().unwrap_or_default();
        let entry = or_cancelled(&cancel, self.find_tool(server, tool))
            .await
            .ok_or_else(|| cancelled(server, tool))??;
        if !entry.enabled {
            return Err(Error::ToolDisabled {
                server: server.to_owned(),
                tool: tool.to_owned(),
            });
        }
        self.validators.check(&entry, arguments.unwrap_or(&NO_ARGUMENTS))?;
        let mut result = self
            .call(&entry, arguments.and_then(Value::as_object).cloned(), options)
            .await?;
        if cap_result(&mut result, self.config.discovery.max_result_bytes()) {
            tracing::warn!(tool = %entry.id(), "result capped at maxResultBytes");
        }
        Ok(result)
    }

    fn audit(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<&JsonObject>,
        outcome: &Result<CallToolResult>,
        started: Instant,
    ) {
        if let Some(audit) = &self.audit {
            let outcome = match outcome {
                Ok(result) => Ok(result.is_error == Some(true)),
                Err(error) => Err(error.code()),
            };
            audit.record(server, tool, arguments, outcome, started.elapsed());
        }
    }

    async fn call(
        self: &Arc<Self>,
        entry: &ToolEntry,
        arguments: Option<JsonObject>,
        options: ExecuteOptions,
    ) -> Result<CallToolResult> {
        let (server_name, tool_name) = (entry.server.as_str(), entry.name());
        let server = self.server(server_name)?;
        let cancel = options.cancel.unwrap_or_default();
        let _in_flight = Pool::begin_call(server);
        let connection = or_cancelled(&cancel, self.connect(server_name))
            .await
            .ok_or_else(|| cancelled(server_name, tool_name))?
            .ok_or_else(|| Error::ServerConnection {
                server: server_name.to_owned(),
                reason: match server.status() {
                    ServerStatus::Error(reason) => reason,
                    other => other.as_str().to_owned(),
                },
            })?;
        let timeout_ms = options.timeout_ms.unwrap_or_else(|| server.spec.call_timeout_ms());
        let mut params = CallToolRequestParams::new(tool_name.to_owned());
        params.arguments = arguments;
        let call = connection.call(params, Duration::from_millis(timeout_ms), options.progress);
        let outcome = or_cancelled(&cancel, call)
            .await
            .ok_or_else(|| cancelled(server_name, tool_name))?;
        let fail = |reason: String| Error::ToolExecution {
            server: server_name.to_owned(),
            tool: tool_name.to_owned(),
            reason,
        };
        match outcome {
            Ok(result) => Ok(result),
            Err(CallFailure::Timeout) => Err(Error::ToolExecutionTimeout {
                server: server_name.to_owned(),
                tool: tool_name.to_owned(),
                timeout_ms,
            }),
            Err(CallFailure::Server(reason)) => Err(fail(reason)),
            Err(CallFailure::Closed(reason)) => {
                self.pool.mark_lost(server, reason.clone()).await;
                // Start it again right away, so the next call finds it ready.
                self.connect_in_background(server_name);
                Err(fail(reason))
            }
        }
    }

    /// Connect `name` (and index its tools) without waiting for it.
    fn connect_in_background(self: &Arc<Self>, name: &str) {
        let (state, name) = (self.clone(), name.to_owned());
        tokio::spawn(async move { state.connect(&name).await });
    }
}

/// `work`, unless `cancel` fires first. Checked first, so a call cancelled before it starts
/// is never written downstream.
async fn or_cancelled<T>(cancel: &CancellationToken, work: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => None,
        output = work => Some(output),
    }
}

fn cancelled(server: &str, tool: &str) -> Error {
    Error::ToolExecution {
        server: server.to_owned(),
        tool: tool.to_owned(),
        reason: "cancelled by the client".into(),
    }
}

/// Handle server events for one state until it is dropped or closed.
async fn handle_events(
    state: Weak<State>,
    mut events: mpsc::UnboundedReceiver<UpstreamEvent>,
    shutdown: CancellationToken,
) {
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            () = shutdown.cancelled() => None,
        };
        let (Some(event), Some(state)) = (event, state.upgrade()) else {
            return;
        };
        match event {
            UpstreamEvent::ToolsChanged { server } => {
                let Some(slot) = state.pool.get(&server).cloned() else {
                    continue;
                };
                let Some(connection) = state.pool.live_connection(&slot).await else {
                    continue;
                };
                match connection.list_tools().await {
                    Ok(tools) => state.refresh(&slot, tools),
                    Err(error) => tracing::warn!(%server, %error, "cannot list tools after tools/list_changed"),
                }
            }
        }
    }
}

/// The folder of a config file, against which relative `cwd`s resolve.
fn config_dir(origin: &str) -> Option<PathBuf> {
    if origin.starts_with('<') {
        return None;
    }
    let path = std::path::Path::new(origin);
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    absolute.parent().map(std::path::Path::to_path_buf)
}
