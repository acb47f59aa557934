//! `Engine`: the facade every face calls (gateway, CLI, Node binding).
//!
//! It owns the config, the upstream pool and the catalog, and answers the five operations
//! plus reload and close. Results are plain serde types, so each face renders them as it
//! needs (compact JSON for the model, JS objects for Node). Nothing here prints.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::catalog::{Catalog, ToolEntry};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::search::{self, Query};
use crate::upstream::{CallFailure, Pool, ServerStatus};

/// How long a search waits for servers still starting before answering with what it has
/// (and saying how many are pending).
const SEARCH_WAIT: Duration = Duration::from_secs(10);
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
#[derive(Debug, Clone, Default)]
pub struct ExecuteOptions {
    /// Overrides the server's `timeoutMs`.
    pub timeout_ms: Option<u64>,
    /// Cancelled when the caller gives up; the downstream call is cancelled too.
    pub cancel: Option<CancellationToken>,
}

/// Everything that belongs to one loaded config; `reload` swaps it whole.
#[derive(Debug)]
struct State {
    config: Config,
    pool: Pool,
    catalog: RwLock<Catalog>,
    started: std::sync::Once,
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
    pub fn from_catalog(catalog: Catalog) -> Self {
        let state = State::new(Config::empty());
        *state.catalog.write().expect("catalog lock is never poisoned") = catalog;
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
        let pending = state
            .pool
            .servers()
            .filter(|s| matches!(s.status(), ServerStatus::Connecting | ServerStatus::Idle))
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
        let entry = state.find_tool(server, tool).await?;
        if !entry.enabled {
            return Err(Error::ToolDisabled {
                server: server.to_owned(),
                tool: tool.to_owned(),
            });
        }
        let arguments = match arguments {
            None | Some(Value::Null) => None,
            Some(Value::Object(map)) => Some(map),
            Some(other) => {
                return Err(Error::validation(format!(
                    "arguments: expected an object, found {other}"
                )));
            }
        };
        state.call(&entry, arguments, options).await
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
        Self {
            pool: Pool::new(config.servers(), base_dir),
            catalog: RwLock::new(Catalog::with_descriptions(
                config
                    .servers()
                    .iter()
                    .filter_map(|s| Some((s.name.as_str(), s.description.as_deref()?))),
            )),
            config,
            started: std::sync::Once::new(),
        }
    }

    fn ensure_started(self: &Arc<Self>) {
        self.started.call_once(|| {
            for server in self.pool.servers() {
                let state = self.clone();
                let name = server.spec.name.clone();
                tokio::spawn(async move { state.connect(&name).await });
            }
        });
    }

    fn read_catalog(&self) -> std::sync::RwLockReadGuard<'_, Catalog> {
        self.catalog.read().expect("catalog lock is never poisoned")
    }

    /// Connect `name` and index its tools; failures live on in the server's status.
    async fn connect(&self, name: &str) -> Option<Arc<crate::upstream::Connection>> {
        let server = self.pool.get(name)?;
        let (connection, tools) = self.pool.connection(server).await.ok()?;
        if let Some(tools) = tools {
            self.catalog
                .write()
                .expect("catalog lock is never poisoned")
                .set_server_tools(name, tools, self.config.rules());
        }
        Some(connection)
    }

    async fn wait_all(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        for server in self.pool.servers() {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            Pool::wait_settled(server, left).await;
        }
    }

    fn server(&self, name: &str) -> Result<&Arc<crate::upstream::Server>> {
        self.pool.get(name).ok_or_else(|| Error::ServerNotFound {
            server: name.to_owned(),
            suggestions: search::suggest_servers(self.pool.servers().map(|s| s.spec.name.as_str()), name),
        })
    }

    /// `server`'s catalog entries, waiting for its first listing.
    async fn server_catalog(&self, name: &str) -> Result<Vec<ToolEntry>> {
        let server = self.server(name)?;
        Pool::wait_settled(server, Duration::from_millis(server.spec.startup_timeout_ms())).await;
        if let Some(tools) = self.read_catalog().server_tools(name) {
            return Ok(tools.to_vec());
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
        let tools = self.server_catalog(server).await?;
        tools
            .into_iter()
            .find(|t| t.name() == tool)
            .ok_or_else(|| Error::ToolNotFound {
                server: server.to_owned(),
                tool: tool.to_owned(),
                suggestions: search::suggest_tools(&self.read_catalog(), server, tool),
            })
    }

    async fn call(
        &self,
        entry: &ToolEntry,
        arguments: Option<JsonObject>,
        options: ExecuteOptions,
    ) -> Result<CallToolResult> {
        let (server_name, tool_name) = (entry.server.as_str(), entry.name());
        let server = self.server(server_name)?;
        let connection = self.connect(server_name).await.ok_or_else(|| Error::ServerConnection {
            server: server_name.to_owned(),
            reason: match server.status() {
                ServerStatus::Error(reason) => reason,
                other => other.as_str().to_owned(),
            },
        })?;
        let timeout_ms = options.timeout_ms.unwrap_or_else(|| server.spec.call_timeout_ms());
        let mut params = CallToolRequestParams::new(tool_name.to_owned());
        params.arguments = arguments;
        let cancel = options.cancel.unwrap_or_default();
        let outcome = tokio::select! {
            outcome = connection.call(params, Duration::from_millis(timeout_ms)) => outcome,
            () = cancel.cancelled() => Err(CallFailure::Server("cancelled by the client".into())),
        };
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
                Err(fail(reason))
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
