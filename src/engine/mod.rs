//! `Engine`: the facade every face calls (gateway, CLI, Node binding).
//!
//! It owns the config, the upstream supervisor, the catalog (with its on-disk snapshot),
//! argument validators and the audit log, and answers the five operations plus reload and
//! close. Results are plain serde types (`dto`). Nothing here prints.
//!
//! Startup never waits on servers: a server whose snapshot is fresh is served from it and
//! connected only when a call needs it; the others connect in the background. `initialize`
//! does not even wait for the snapshots: they are read off the answering path, and an
//! operation that needs the catalog waits for them (`state`).

mod cap;
mod dto;
mod execute;
mod exposed;
mod follow;
mod offers;
mod rate;
mod shared;
mod state;
mod trust;
mod validate;

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use serde_json::Value;

use crate::audit::Finished;
use crate::caller::Caller;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::rules::Sight;
use crate::search::{self, IndexedCatalog, Query};
use state::State;

/// Remote servers' secrets taken out of a text (for the faces' log writers): upstream learns
/// them when it dials a server; the faces reach them only through the engine.
/// A per-user sign-in in progress, and why one failed (`connection.oauth.perUser`).
pub(crate) use crate::upstream::per_user::{
    Authorization as SignInAuthorization, CredentialError as SignInError, Flow as SignInFlow, FLOW_TTL as SIGN_IN_TTL,
};
pub use crate::upstream::scrub_known as scrub_secrets;
pub use crate::upstream::{listen_offers, Listening, OfferEvent, OfferListener, ProgressSink, ProgressUpdate};
pub use cap::cap_result;
pub use dto::{
    ExecuteOptions, ReloadSummary, SearchRequest, SearchResponse, SearchResult, ServerInfo, ServerStatus, ServerTools,
    ToolDetails, ToolSummary,
};
pub use exposed::ExposedTool;

/// How long a search waits for servers still starting before answering with what it has
/// (and saying how many are pending). Servers with a snapshot never make it wait.
const SEARCH_WAIT: Duration = Duration::from_secs(5);
/// Longest wait at close for the last spans to reach the collector.
const TRACES_FLUSH: Duration = Duration::from_secs(2);
/// Default number of search results.
pub const DEFAULT_SEARCH_LIMIT: usize = 10;
/// Largest accepted search limit.
pub const MAX_SEARCH_LIMIT: usize = 100;

/// What a server's supervisor state means to the faces.
fn server_status(state: &crate::upstream::ServerState) -> ServerStatus {
    use crate::upstream::ServerState;
    // A person must act, whether or not an attempt is under way meanwhile.
    if state.needs_sign_in() {
        return ServerStatus::NeedsSignIn;
    }
    match state {
        ServerState::Idle | ServerState::Draining => ServerStatus::Idle,
        ServerState::Connecting { .. } => ServerStatus::Connecting,
        ServerState::Ready => ServerStatus::Connected,
        ServerState::Backoff { .. } | ServerState::Failed { .. } => ServerStatus::Error,
    }
}

/// A tool's summary in a search answer: its first sentence, and the deprecation note when
/// that sentence hides it.
/// Kept within the summary's usual bound: the first sentence gives way to the note.
fn summary_of(entry: &crate::catalog::ToolEntry) -> String {
    let Some(note) = search::deprecation_note(entry.description(), &entry.summary) else {
        return entry.summary.clone();
    };
    let room = crate::catalog::SUMMARY_MAX_CHARS.saturating_sub(note.chars().count() + 3);
    let lead: String = if entry.summary.chars().count() <= room {
        entry.summary.clone()
    } else {
        let cut: String = entry.summary.chars().take(room.saturating_sub(1)).collect();
        format!("{}…", cut.trim_end())
    };
    format!("{lead} ({note})")
}

/// The discovery engine.
#[derive(Debug, Clone)]
pub struct Engine {
    state: Arc<RwLock<Arc<State>>>,
    /// One reload at a time: each builds on the state the last one left.
    reloading: Arc<tokio::sync::Mutex<()>>,
    /// Which server owns each resource URI the client was given (`offers`).
    routes: Arc<offers::Routes>,
    /// Which downstream resource subscriptions are held, and by how many clients (`offers`).
    subscriptions: Arc<offers::Subscriptions>,
    /// Every call's outcome and latency while serving (kept across reloads).
    stats: Arc<crate::stats::Stats>,
    /// Other replicas' tool lists followed from the shared store (started once).
    following: Arc<std::sync::Once>,
}

impl Engine {
    /// An engine over `config`. Nothing connects until the first operation or [`Engine::start`].
    #[must_use]
    pub fn new(config: Config) -> Self {
        Self {
            state: Arc::new(RwLock::new(Arc::new(State::new(config)))),
            reloading: Arc::default(),
            routes: Arc::default(),
            subscriptions: Arc::default(),
            stats: Arc::default(),
            following: Arc::new(std::sync::Once::new()),
        }
    }

    /// An engine over an offline catalog (e.g. [`crate::catalog::file::load`]) and no config:
    /// its tools are searchable (with or without a `server` filter), but its servers are never
    /// connected, so the other operations answer `SERVER_NOT_FOUND` for them.
    #[must_use]
    pub fn from_catalog(catalog: impl Into<IndexedCatalog>) -> Self {
        Self {
            state: Arc::new(RwLock::new(Arc::new(State::with_catalog(catalog.into())))),
            reloading: Arc::default(),
            routes: Arc::default(),
            subscriptions: Arc::default(),
            stats: Arc::default(),
            following: Arc::new(std::sync::Once::new()),
        }
    }

    fn current(&self) -> Arc<State> {
        let state = self.state.read().expect("engine state lock is never poisoned").clone();
        state.ensure_started();
        if state.shared.store.is_shared() {
            self.following
                .call_once(|| follow::follow(Arc::downgrade(&self.state), &state.shared.store));
        }
        state
    }

    /// Start reading snapshots and connecting servers in the background; returns at once.
    /// Idempotent; needs a tokio runtime.
    pub fn start(&self) {
        self.current();
    }

    /// [`Engine::start`] for an operation about some servers only (a one-shot command):
    /// only `servers` are connected; the others stay idle, still known by name and by their
    /// snapshot's tools (suggestions, shadowing checks, search weights). Only the first
    /// start counts: after [`Engine::start`] or an operation, this does nothing.
    pub fn start_only(&self, servers: &[&str]) {
        let state = self.state.read().expect("engine state lock is never poisoned").clone();
        state.ensure_started_only(Some(servers.iter().map(|&s| s.to_owned()).collect()));
    }

    /// The store replicas share (`discovery.store`), or this process's own map without one.
    #[must_use]
    pub fn store(&self) -> crate::store::Store {
        self.current().shared.store.clone()
    }

    /// The store's health as this process saw it last.
    #[must_use]
    pub fn store_health(&self) -> crate::store::Health {
        self.current().shared.health()
    }

    /// Why this replica is not ready because of its store (see `engine::shared`), if so.
    #[must_use]
    pub fn store_not_ready(&self) -> Option<String> {
        self.current().shared.not_ready()
    }

    /// Where the config came from: a file path, or `<object>`/`<defaults>`.
    #[must_use]
    pub fn config_origin(&self) -> String {
        self.state
            .read()
            .expect("engine state lock is never poisoned")
            .config
            .origin
            .clone()
    }

    /// Where the config in use came from: the user's own place or an approved project file.
    #[must_use]
    pub fn config_scope(&self) -> crate::config::Scope {
        self.state
            .read()
            .expect("engine state lock is never poisoned")
            .config
            .scope
    }

    /// Project configs passed over for want of approval, each with its fix.
    #[must_use]
    pub fn skipped(&self) -> Vec<crate::consent::Skipped> {
        self.state
            .read()
            .expect("engine state lock is never poisoned")
            .config
            .skipped()
            .to_vec()
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

    /// `discovery.security` as loaded (a reload replaces it).
    #[must_use]
    pub fn security(&self) -> crate::config::SecuritySpec {
        self.state
            .read()
            .expect("engine state lock is never poisoned")
            .config
            .discovery
            .security
            .clone()
    }

    /// The tracer of `discovery.telemetry`, when traces are on (the HTTP face starts each
    /// request's server span with it).
    #[must_use]
    pub fn tracer(&self) -> Option<crate::telemetry::Tracer> {
        self.state
            .read()
            .expect("engine state lock is never poisoned")
            .tracer
            .clone()
    }

    /// `discovery.http` as loaded (the team face reads it once, when it starts serving).
    #[must_use]
    pub fn http(&self) -> crate::config::HttpSpec {
        self.state
            .read()
            .expect("engine state lock is never poisoned")
            .config
            .discovery
            .http
            .clone()
    }

    /// Which tools toolRules with `callers` hide from `caller`, as a test of `(server, tool)`
    /// names, for a face that names tools outside the catalog's listings (`/metrics` names
    /// every tool called). `None` when nothing is hidden from them (the local user, or a
    /// caller no caller rule is for). The rules are those of now; a reload is not followed.
    #[must_use]
    pub fn hidden_from(&self, caller: &Caller) -> Option<impl Fn(&str, &str) -> bool + Send + Sync> {
        let rules = self
            .state
            .read()
            .expect("engine state lock is never poisoned")
            .config
            .rules()
            .clone();
        let reach = rules.reach(caller);
        if reach.is_empty() {
            return None;
        }
        Some(move |server: &str, tool: &str| rules.sight(server, tool, &reach) == Sight::Hidden)
    }

    /// Whether the catalog snapshots are read and indexed, so a search answers from every
    /// server known at start: the team face's readiness.
    #[must_use]
    pub fn is_indexed(&self) -> bool {
        self.state
            .read()
            .expect("engine state lock is never poisoned")
            .is_indexed()
    }

    /// Every server with its status and the counts of the tools `caller` may see. Waits for
    /// servers still starting.
    pub async fn list_servers(&self, caller: &Caller) -> Vec<ServerInfo> {
        let state = self.current();
        state.indexed().await;
        state.wait_first_starts(SEARCH_WAIT).await;
        let mut servers = statuses(&state, caller);
        signed_in(&state, caller, &mut servers).await;
        servers
    }

    /// Every server as it is right now, without starting or waiting for anything: what a
    /// progress display polls while servers connect (the local user's counts).
    #[must_use]
    pub fn server_statuses(&self) -> Vec<ServerInfo> {
        let state = self.state.read().expect("engine state lock is never poisoned").clone();
        statuses(&state, &Caller::local())
    }

    /// Ranked tools for a query, among those `caller` may see (hidden tools never reach ranking).
    ///
    /// # Errors
    /// `VALIDATION_ERROR` for an empty query or a bad limit; `SERVER_NOT_FOUND` for an
    /// unknown `server` filter. A query over `search::MAX_QUERY_CHARS` characters is cut
    /// there (and the response says so).
    pub async fn search(&self, caller: &Caller, request: &SearchRequest) -> Result<SearchResponse> {
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
        state.indexed().await;
        if let Some(server) = &request.server {
            if !state.read_catalog().index().has_server(server) {
                state.server(server)?;
            }
        }
        state.wait_first_starts(SEARCH_WAIT).await;
        // Servers still in their first start; an idle server's tools are already known
        // (snapshot), and a failing one's retries are not worth a "search again".
        let pending = state.upstream.handles().filter(|s| s.is_first_start()).count();
        if let Some(tier) = state.semantic.clone().filter(|tier| tier.asks_to_wait()) {
            // Only when the offline harness asked to wait for the vectors (never a gateway).
            let _ = tokio::task::spawn_blocking(move || tier.wait_if_asked()).await;
        }
        let catalog = state.read_catalog();
        let view = state.view(&catalog, caller);
        let reach = state.config.rules().reach(caller);
        let query = Query {
            text: query,
            server: request.server.as_deref(),
            limit,
            include_disabled: request.include_disabled,
            view: view.as_deref(),
        };
        let (hits, vectors_pending) = match state.semantic.as_deref() {
            Some(tier) if tier.model().is_some() => {
                let fused = search::search_fused(&catalog, &query, tier);
                (fused.hits, fused.pending)
            }
            // Still loading: every tool is waiting for its vector.
            Some(tier) if tier.status() == search::semantic::Status::Loading => {
                let known = match query.view {
                    None => catalog.tools().count(),
                    Some(_) => catalog
                        .server_names()
                        .map(|server| catalog.visible_tools(query.view, server).count())
                        .sum(),
                };
                (search::search(&catalog, &query), known)
            }
            _ => (search::search(&catalog, &query), 0),
        };
        let results: Vec<SearchResult> = hits
            .into_iter()
            .map(|hit| SearchResult {
                server: hit.entry.server.clone(),
                tool: hit.entry.name().to_owned(),
                summary: summary_of(hit.entry),
                relevance: (hit.relevance * 100.0).round() / 100.0,
                tags: hit.entry.tags.clone(),
                enabled: match query.view {
                    None => hit.entry.enabled,
                    Some(_) => {
                        state.config.rules().sight(&hit.entry.server, hit.entry.name(), &reach) == Sight::Enabled
                    }
                },
            })
            .collect();
        Ok(SearchResponse {
            results,
            pending: (pending > 0).then_some(pending),
            query_cut: truncated.is_some(),
            vectors_pending: (vectors_pending > 0).then_some(vectors_pending),
        })
    }

    /// The semantic tier's state in one word (`off`, `no-model`, `loading`, `on`, `failed`)
    /// and, when on, the model's id or, when failed, why.
    #[must_use]
    pub fn semantic_status(&self) -> (String, Option<String>) {
        let state = self.state.read().expect("engine state lock is never poisoned").clone();
        let status = state.semantic_status();
        let detail = match &status {
            search::semantic::Status::On { model } => Some(model.clone()),
            search::semantic::Status::Failed { reason } => Some(reason.clone()),
            _ => None,
        };
        (status.word().to_owned(), detail)
    }

    /// How many tool texts this process embedded itself (not read from its cache or the
    /// shared store) since it started: 0 without the semantic tier.
    #[must_use]
    pub fn semantic_embedded(&self) -> u64 {
        let state = self.state.read().expect("engine state lock is never poisoned").clone();
        state.semantic.as_ref().map_or(0, |tier| tier.embedded())
    }

    /// The tools of one server that `caller` may see.
    ///
    /// # Errors
    /// `SERVER_NOT_FOUND`, or `SERVER_CONNECTION_ERROR` when its tools could not be listed.
    pub async fn list_tools(&self, caller: &Caller, server: &str, include_disabled: bool) -> Result<ServerTools> {
        let state = self.current();
        let handle = state.server(server)?;
        // Boxed: a sign-in path is a large future, and rarely taken.
        Box::pin(state.list_as_caller(handle, caller)).await?;
        let tools = state
            .with_catalog_of(handle, |catalog| {
                let view = state.view(catalog, caller);
                catalog
                    .visible_tools(view.as_deref(), server)
                    .filter(|&(_, _, sight)| include_disabled || sight == Sight::Enabled)
                    .map(|(_, t, sight)| ToolSummary {
                        name: t.name().to_owned(),
                        summary: t.summary.clone(),
                        enabled: sight == Sight::Enabled,
                        tags: t.tags.clone(),
                        flags: t.flags(),
                    })
                    .collect()
            })
            .await?;
        Ok(ServerTools {
            server: server.to_owned(),
            tools,
        })
    }

    /// One server's tool definitions as its `tools/list` gave them (from its snapshot or a
    /// connection), disabled ones included: what a client that ran the server itself would
    /// load. `setup` counts them.
    ///
    /// # Errors
    /// `SERVER_NOT_FOUND`, or `SERVER_CONNECTION_ERROR` when its tools could not be listed.
    pub async fn tool_definitions(&self, server: &str) -> Result<Vec<Arc<rmcp::model::Tool>>> {
        let state = self.current();
        let handle = state.server(server)?;
        state
            .with_server_tools(handle, |tools| tools.iter().map(|t| t.tool.clone()).collect())
            .await
    }

    /// Full description and input schema of one tool (disabled tools included, marked).
    ///
    /// # Errors
    /// `SERVER_NOT_FOUND`, `SERVER_CONNECTION_ERROR`, `TOOL_NOT_FOUND` (with suggestions) for
    /// a tool that does not exist or is hidden from `caller`.
    pub async fn tool_details(&self, caller: &Caller, server: &str, tool: &str) -> Result<ToolDetails> {
        let state = self.current();
        let handle = state.server(server)?;
        // Boxed: a sign-in path is a large future, and rarely taken.
        Box::pin(state.list_as_caller(handle, caller)).await?;
        let (entry, sight) = state.find_tool(handle, tool, caller).await?;
        Ok(ToolDetails {
            server: entry.server.clone(),
            tool: entry.name().to_owned(),
            description: entry.description().to_owned(),
            input_schema: Value::Object((*entry.tool.input_schema).clone()),
            tags: entry.tags.clone(),
            enabled: sight == Sight::Enabled,
            warnings: entry.warnings.iter().map(ToString::to_string).collect(),
            changed: entry
                .change
                .as_deref()
                .map(crate::trust::pins::Change::describe)
                .unwrap_or_default(),
        })
    }

    /// Accept the current version of `server`'s tools (every one, or only `tool`) after
    /// review: pinning stops marking them changed, and `security.blockFlagged` lets them run.
    /// Returns the names trusted.
    ///
    /// # Errors
    /// `SERVER_NOT_FOUND`, `TOOL_NOT_FOUND`, `SERVER_CONNECTION_ERROR` when the server's tools
    /// were never listed, `CONFIGURATION_ERROR` when the cache (where pins live) is off.
    pub async fn trust_tools(&self, server: &str, tool: Option<&str>) -> Result<Vec<String>> {
        let state = self.current();
        let trusted = state.trust(server, tool).await;
        state.tools_changed.send_replace(());
        trusted
    }

    /// Run a tool on its server for `caller` and return the server's result unchanged; the
    /// audit log names the caller.
    ///
    /// # Errors
    /// `SERVER_NOT_FOUND`, `SERVER_CONNECTION_ERROR`, `TOOL_NOT_FOUND` (also for a tool hidden
    /// from `caller`), `TOOL_DISABLED` (the
    /// server never sees the call), `VALIDATION_ERROR`, `TOOL_EXECUTION_ERROR`,
    /// `TOOL_EXECUTION_TIMEOUT`.
    pub async fn execute(
        &self,
        caller: &Caller,
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
                let mut answered = None;
                let outcome = state
                    .execute(caller, server, tool, arguments.as_ref(), options, &mut answered)
                    .await;
                // One duration and one instant for both records: the statistics rebuilt from
                // the log match the live ones to the millisecond.
                let finished = Finished::now(started);
                state.audit(
                    caller,
                    server,
                    tool,
                    arguments.as_ref().and_then(Value::as_object),
                    &outcome,
                    finished,
                    answered,
                );
                self.count(server, tool, &outcome, finished);
                outcome
            }
            Err(error) => {
                let outcome = Err(error);
                let finished = Finished::now(started);
                state.audit(caller, server, tool, None, &outcome, finished, None);
                self.count(server, tool, &outcome, finished);
                outcome
            }
        }
    }

    /// Whether `caller` holds a usable token for the per-user server `server` (one signed in
    /// through `/connect` since the call that asked): a call now would run.
    pub async fn has_own_token(&self, caller: &Caller, server: &str) -> bool {
        let state = self.current();
        state.has_own_token(caller, server).await
    }

    /// The launch spec of the per-user server `server` (`connection.oauth.perUser`), if there
    /// is one by that name.
    #[must_use]
    pub(crate) fn per_user_spec(&self, server: &str) -> Option<crate::config::ServerSpec> {
        let state = self.current();
        let handle = state.server(server).ok()?;
        handle.is_per_user().then(|| handle.spec.clone())
    }

    /// A per-user sign-in link continued (`state` from the link) by the browser holding the
    /// value whose SHA-256 (hex) is `browser`: where to send it, the authorization endpoint
    /// `server`'s metadata names. `None` when `server` is not one a
    /// caller signs in to.
    pub(crate) async fn sign_in_address(
        &self,
        server: &str,
        state: &str,
        redirect_uri: &str,
        browser: &str,
    ) -> Option<std::result::Result<SignInAuthorization, SignInError>> {
        let spec = self.per_user_spec(server)?;
        Some(crate::upstream::per_user::authorize(&self.store(), &spec, state, redirect_uri, browser).await)
    }

    /// Whom the sign-in link `state` for `server` was given to (their [`Caller::described`]),
    /// the link left usable. `None` when `server` is not one a caller signs in to.
    pub(crate) async fn sign_in_caller(
        &self,
        server: &str,
        state: &str,
    ) -> Option<std::result::Result<String, SignInError>> {
        let spec = self.per_user_spec(server)?;
        Some(
            crate::upstream::per_user::link_caller(&self.store(), &spec, state)
                .await
                .map(|caller| caller.described()),
        )
    }

    /// The sign-in `state` names, left unspent (what its callback checks first).
    pub(crate) async fn pending_sign_in(&self, state: &str) -> std::result::Result<SignInFlow, SignInError> {
        crate::upstream::per_user::peek_flow(&self.store(), state).await
    }

    /// The sign-in `state` names, spent (it works once, on any replica).
    pub(crate) async fn sign_in_flow(&self, state: &str) -> std::result::Result<SignInFlow, SignInError> {
        crate::upstream::per_user::take_flow(&self.store(), state).await
    }

    /// Finish a sign-in: exchange `code` and keep the caller's token. `None` when its server is
    /// no longer one a caller signs in to.
    pub(crate) async fn finish_sign_in(
        &self,
        flow: &SignInFlow,
        code: &str,
        state: &str,
        issuer: Option<&str>,
    ) -> Option<std::result::Result<(), SignInError>> {
        let spec = self.per_user_spec(flow.server())?;
        Some(crate::upstream::per_user::exchange(&self.store(), &spec, flow, code, state, issuer).await)
    }

    /// Add one call to the statistics.
    fn count(&self, server: &str, tool: &str, outcome: &Result<CallToolResult>, finished: Finished) {
        let outcome = match outcome {
            Ok(result) if result.is_error == Some(true) => crate::stats::Outcome::ToolError,
            Ok(_) => crate::stats::Outcome::Ok,
            Err(error) => crate::stats::Outcome::Error(error.code().as_str()),
        };
        self.stats.record(server, tool, outcome, finished);
    }

    /// Calls, outcomes and latency of every tool called through this engine (or of one
    /// server's), since it was made.
    #[must_use]
    pub fn stats(&self, server: Option<&str>) -> crate::stats::StatsSnapshot {
        self.stats.snapshot(server)
    }

    /// The same statistics rebuilt from the audit log the config names (with its rotated
    /// predecessor): calls of every gateway that wrote there. Also returns how many lines were
    /// not audit entries.
    ///
    /// # Errors
    /// `CONFIGURATION_ERROR` when the audit log is off or has no place on this machine.
    pub fn audit_stats(&self, filter: &crate::stats::AuditFilter) -> Result<(crate::stats::StatsSnapshot, usize)> {
        let state = self.state.read().expect("engine state lock is never poisoned").clone();
        let spec = &state.config.discovery.audit;
        let origin = state.config.origin.clone();
        if !spec.enabled {
            return Err(Error::config(
                origin,
                "discovery.audit.enabled",
                "the audit log is off, so there is nothing to count: turn it on to keep statistics across restarts",
            ));
        }
        let users_own = state.config.scope == crate::config::Scope::User;
        let path = crate::audit::log_path(spec, users_own)
            .map_err(|error| Error::config(origin, "discovery.audit.path", error.to_string()))?;
        let files = crate::audit::log_files(&path)
            .into_iter()
            .filter_map(|file| std::fs::File::open(file).ok())
            .map(std::io::BufReader::new);
        Ok(crate::stats::from_audit_lines(files, filter))
    }

    /// Apply `config`, or the config read again from where the current one came from,
    /// without dropping work: servers launched the same way keep their process and session,
    /// changed ones restart, removed ones stop once their calls in flight end, added ones
    /// start; tool rules are applied again to every tool. Operations already running finish
    /// on the config they began with. Logs one line saying what happened.
    ///
    /// # Errors
    /// `CONFIGURATION_ERROR` when the config cannot be read again: nothing changes, the
    /// current config keeps serving.
    pub async fn reload(&self, config: Option<Config>) -> Result<ReloadSummary> {
        let _one_at_a_time = self.reloading.lock().await;
        let began = Instant::now();
        let current = self.state.read().expect("engine state lock is never poisoned").clone();
        let config = match config {
            Some(config) => config,
            None => reread(&current.config)?,
        };
        crate::consent::keeps_what_it_had(&current.config, &config)?;
        let (next, changes) = current.reloaded(config);
        let next = Arc::new(next);
        *self.state.write().expect("engine state lock is never poisoned") = next.clone();
        next.ensure_started();
        next.tools_changed.send_replace(());
        let summary = ReloadSummary {
            kept: changes.kept,
            restarted: changes.restarted,
            stopped: changes.stopped,
            added: changes.added,
        };
        tracing::info!(
            config = %next.config.origin,
            kept = summary.kept.len(),
            restarted = %names(&summary.restarted),
            stopped = %names(&summary.stopped),
            added = %names(&summary.added),
            took_us = began.elapsed().as_micros(),
            "config reloaded"
        );
        Ok(summary)
    }

    /// Close every session and end every downstream process tree; then send the spans still
    /// queued (at most [`TRACES_FLUSH`]).
    pub async fn close(&self) {
        let state = self.state.read().expect("engine state lock is never poisoned").clone();
        state.upstream.close().await;
        if let Some(tracer) = &state.tracer {
            tracer.flush(TRACES_FLUSH).await;
        }
    }
}

/// Every server of `state` with its status, and the counts of the tools `caller` may see (a
/// server's name and status are everyone's; which tools it has is not).
fn statuses(state: &State, caller: &Caller) -> Vec<ServerInfo> {
    let catalog = state.read_catalog();
    let view = state.view(&catalog, caller);
    state
        .upstream
        .handles()
        .map(|server| {
            let (mut count, mut enabled_count) = (0, 0);
            for (_, _, sight) in catalog.visible_tools(view.as_deref(), &server.spec.name) {
                count += 1;
                enabled_count += usize::from(sight == Sight::Enabled);
            }
            let status = server.state();
            let mut info = ServerInfo {
                description: state.spec_of(server).description.as_deref().map(shown_description),
                enabled_count,
                error: status.describe(),
                reason: status.reason(),
                per_user: server.is_per_user(),
                ..ServerInfo::new(&server.spec.name, server_status(&status), count, None)
            };
            info.note_left_out(server.left_out());
            info
        })
        .collect()
}

/// Say of each per-user server in `servers` whether `caller` has signed in to it (holds a
/// usable token: what a call of its tools needs), asking the store for each at once. One the
/// caller has not signed in to needs their sign-in, whatever the server's own state.
async fn signed_in(state: &State, caller: &Caller, servers: &mut [ServerInfo]) {
    // The local user (stdio, CLI, Node) has no identity to sign in with.
    if caller.is_local() {
        return;
    }
    let asked = servers
        .iter()
        .enumerate()
        .filter(|(_, info)| info.per_user)
        .map(|(at, info)| async move { (at, state.has_own_token(caller, &info.name).await) });
    for (at, signed_in) in futures::future::join_all(asked).await {
        let info = &mut servers[at];
        info.signed_in = Some(signed_in);
        let own = state
            .server(&info.name)
            .ok()
            .and_then(|s| s.caller_state(&execute::connection_key(&s.spec, caller)));
        if let Some(own) = own.filter(|_| signed_in) {
            // The server's own handle never connects: theirs is what they use.
            info.status = server_status(&own);
            info.error = own.describe();
            info.reason = own.reason();
        } else if !signed_in {
            let why = "each caller signs in with their own account, and you have not yet: a call of one of its tools (or list_tools) answers with your sign-in link";
            info.status = ServerStatus::NeedsSignIn;
            info.error = Some(why.to_owned());
            info.reason = Some(why.to_owned());
        }
    }
}

/// The config again from where `current` came from: its file read again (with the client
/// files it imports), the search order run again for zero-config, or the same
/// config when it was given as an object. The one place a reload resolves its config.
fn reread(current: &Config) -> Result<Config> {
    match current.origin.as_str() {
        // The search order again: a config file created since then wins over zero-config; a
        // project config is read again only while its approval holds.
        origin if origin == crate::config::ZERO_CONFIG_ORIGIN || current.scope == crate::config::Scope::Project => {
            let env = crate::config::Environment::current();
            let located = crate::config::locate(None, &env);
            match located.file.as_deref() {
                // Evaluated on the JS side only, which chose no TS/JS file when this started.
                Some(file) if located.needs_js() && file != std::path::Path::new(origin) => Err(Error::config(
                    file.display().to_string(),
                    "(file)",
                    "a TS/JS config chosen since the gateway started (created, or approved) applies when the gateway restarts",
                )),
                _ => Config::load(&located, &env),
            }
        }
        origin if origin.starts_with('<') => Ok(current.clone()),
        origin => Config::from_file(std::path::Path::new(origin)),
    }
}

/// Server names for a log line: a count and the first few.
fn names(list: &[String]) -> String {
    const SHOWN: usize = 5;
    match list.len() {
        0 => "0".to_owned(),
        n if n <= SHOWN => format!("{n} ({})", list.join(", ")),
        n => format!("{n} ({}, …)", list[..SHOWN].join(", ")),
    }
}

/// A server's `description` as it leaves the gateway (to the model, a status, a log): a key
/// pasted into it is masked, registered or not, and so is any registered secret.
fn shown_description(description: &str) -> String {
    crate::secrets::scrub(&crate::secrets::mask_key_shaped(description)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::{ServerState, Trouble};

    /// A gateway with one per-user server nobody has signed in to (it does not answer: port 9).
    fn per_user_engine() -> Engine {
        let config = Config::from_value(
            serde_json::json!({ "discovery": {
                "cache": { "enabled": false },
                "http": { "auth": { "issuers": [{ "issuer": "https://id.example", "jwksUri": "https://id.example/jwks" }] } },
                "servers": [{ "name": "gh", "connection": { "type": "http", "url": "http://127.0.0.1:9/mcp", "oauth": { "perUser": true } } }],
            } }),
            "<object>",
        )
        .unwrap();
        Engine::new(config)
    }

    fn alice() -> Caller {
        Caller {
            issuer: Some("https://id.example".into()),
            subject: Some("alice".into()),
            ..Caller::default()
        }
    }

    #[tokio::test]
    async fn before_anyone_signed_in_a_per_user_server_asks_each_caller_to_sign_in() {
        let engine = per_user_engine();
        let servers = engine.list_servers(&alice()).await;
        assert_eq!(servers.len(), 1);
        let gh = &servers[0];
        assert!(gh.per_user);
        assert_eq!(gh.signed_in, Some(false));
        assert_eq!(gh.status, ServerStatus::NeedsSignIn);
        assert_eq!(gh.tool_count, 0);
        // Its tools, when nobody's connection listed them: the caller's sign-in link.
        for outcome in [
            engine.list_tools(&alice(), "gh", false).await.map(|_| ()),
            engine.tool_details(&alice(), "gh", "any").await.map(|_| ()),
        ] {
            match outcome {
                Err(Error::SignInRequired { server, link }) => {
                    assert_eq!(server, "gh");
                    assert!(link.starts_with("/connect/gh?state="), "{link}");
                }
                other => panic!("{other:?}"),
            }
        }
        // Its prompts: none listed for a caller not signed in; one used asks for the sign-in.
        let (prompts, _) = engine.list_prompts(&alice(), None).await.unwrap();
        assert!(prompts.is_empty(), "{prompts:?}");
        let params = rmcp::model::GetPromptRequestParams::new("gh__greet");
        assert!(matches!(
            engine.get_prompt(&alice(), params).await,
            Err(Error::SignInRequired { .. })
        ));
        // The local user (stdio, CLI) has no identity to sign in with: it is said plainly.
        for local in [engine.server_statuses(), engine.list_servers(&Caller::local()).await] {
            assert!(local[0].per_user && local[0].signed_in.is_none(), "{local:?}");
        }
        engine.close().await;
    }

    #[test]
    fn a_server_waiting_for_a_sign_in_has_its_own_status_even_while_trying_again() {
        let signing = Trouble::NeedsSignIn("needs sign-in: run `anygpt-discovery auth login a`".into());
        let until = tokio::time::Instant::now();
        for (state, status) in [
            (ServerState::Idle, ServerStatus::Idle),
            (ServerState::Draining, ServerStatus::Idle),
            (ServerState::Ready, ServerStatus::Connected),
            (ServerState::Connecting { last_failure: None }, ServerStatus::Connecting),
            (
                ServerState::Connecting {
                    last_failure: Some(Trouble::Error("boom".into())),
                },
                ServerStatus::Connecting,
            ),
            (
                ServerState::Connecting {
                    last_failure: Some(signing.clone()),
                },
                ServerStatus::NeedsSignIn,
            ),
            (
                ServerState::Backoff { reason: signing, until },
                ServerStatus::NeedsSignIn,
            ),
            (
                ServerState::Backoff {
                    reason: Trouble::Error("boom".into()),
                    until,
                },
                ServerStatus::Error,
            ),
            (ServerState::Failed { reason: "bad".into() }, ServerStatus::Error),
        ] {
            assert_eq!(server_status(&state), status, "{state:?}");
        }
        assert_eq!(
            serde_json::to_value(ServerStatus::NeedsSignIn).unwrap(),
            serde_json::json!("needs sign-in")
        );
    }
}
