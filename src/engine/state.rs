//! Everything that belongs to one loaded config, and its lifecycle: built at start or by a
//! reload from the state before it (servers launched the same way carried over with their
//! tools), started once (snapshots read and indexed off the answering path, servers without a
//! fresh snapshot connected in the background), fed by upstream events, retired or closed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use rmcp::model::Tool;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::audit::AuditLog;
use crate::caller::Caller;
use crate::catalog::snapshot::{self, SnapshotStore};
use crate::catalog::{Catalog, ToolChanges, ToolEntry};
use crate::config::Config;
use crate::config::ServerSpec;
use crate::error::{Error, Result};
use crate::rules::Sight;
use crate::search::{self, IndexedCatalog};
use crate::trust::pins::Pins;
use crate::upstream::{Dial, Events, Handle, PoolChanges, ServerState, Supervisor, UpstreamError, UpstreamEvent};

use super::shared::Shared;
use super::validate;

/// Snapshots read ahead of the indexing (parsed tool lists waiting in memory).
const SNAPSHOTS_AHEAD: usize = 32;

/// The tracer of `config`'s `discovery.telemetry` (the previous one when that did not change).
/// One that cannot be built (a `${VAR}` unset) leaves traces off with a warning: a tracing
/// problem never keeps the gateway from serving.
fn tracer_for(config: &Config, previous: Option<&crate::telemetry::Tracer>) -> Option<crate::telemetry::Tracer> {
    crate::telemetry::Tracer::reloaded(previous, &config.discovery.telemetry).unwrap_or_else(|error| {
        tracing::warn!("{}: traces are off: {error}", config.origin);
        None
    })
}

/// One server as the engine holds it.
pub(super) type Server = Handle<Dial>;

#[derive(Debug)]
pub(super) struct State {
    pub config: Config,
    pub upstream: Supervisor,
    /// Index into `config.servers()` by name: a handle a reload kept has its old spec, but
    /// its description and call timeout follow the config.
    specs: HashMap<String, usize>,
    events: Arc<Events>,
    /// Set once a reload replaced this state: upstream events are the next state's to apply.
    retired: AtomicBool,
    /// Ends this state's event task (at retirement, or when the supervisor closes).
    stop_events: CancellationToken,
    /// Held while events are applied, so two readers never apply one server's lists out of order.
    applying: std::sync::Mutex<()>,
    pub(super) catalog: RwLock<IndexedCatalog>,
    snapshots: Option<SnapshotStore>,
    pub audit: Option<AuditLog>,
    pub validators: validate::Validators,
    /// Tool pins (trust on first use), beside the snapshots; none when the cache is off.
    pub pins: Option<crate::trust::pins::Pins>,
    started: std::sync::Once,
    /// True once the snapshots are read and indexed: searches wait for this, not for servers.
    indexed: watch::Sender<bool>,
    /// The semantic tier, when on and a model folder was found (shared across reloads).
    pub semantic: Option<Arc<search::semantic::Tier>>,
    /// Told whenever the catalog's tools may have changed (shared across reloads).
    pub tools_changed: Arc<watch::Sender<()>>,
    /// Traces (`discovery.telemetry`), when on; kept across reloads that do not change it.
    pub tracer: Option<crate::telemetry::Tracer>,
    /// The store replicas share, or this process's map (kept across reloads).
    pub shared: Arc<Shared>,
}

impl State {
    pub fn new(config: Config) -> Self {
        let events = Arc::new(Events::default());
        let shared = Arc::new(Shared::open(&config.discovery.store));
        let dial = Dial::new(
            config_dir(&config.origin),
            shared.store.is_shared().then(|| shared.store.clone()),
        );
        let upstream = Supervisor::new(config.servers(), dial, config.discovery.idle_timeout_ms, events.clone());
        let catalog = empty_catalog(&config);
        Self::assemble(
            config,
            upstream,
            events,
            catalog,
            Arc::new(watch::channel(()).0),
            None,
            shared,
        )
    }

    /// The state for `config` that takes over from this one: servers launched the same way
    /// keep their handle (process, session) and tools (with the new rules applied); changed
    /// and removed ones are retired by the supervisor once their calls end. This state stops
    /// applying upstream events. Not started yet.
    pub fn reloaded(&self, config: Config) -> (Self, PoolChanges) {
        let base_dir = config_dir(&config.origin);
        let moved = base_dir != self.upstream.connector().base_dir();
        let (upstream, changes) =
            self.upstream
                .reconcile(config.servers(), config.discovery.idle_timeout_ms, |old, new| {
                    same_launch(old, new, moved)
                });
        upstream.connector().set_base_dir(base_dir);
        self.retire();
        let catalog = carry_over(
            &self.catalog.read().expect("catalog lock is never poisoned"),
            &config,
            &changes.kept,
        );
        self.shared.check_reload(&config.discovery.store);
        if config.discovery.http != self.config.discovery.http {
            // The HTTP face's listener, hosts and authentication are set up once, at start.
            tracing::warn!("discovery.http changed: `serve --http` applies it at its next start (restart it)");
        }
        let next = Self::assemble(
            config,
            upstream,
            self.events.clone(),
            catalog,
            self.tools_changed.clone(),
            self.tracer.as_ref(),
            self.shared.clone(),
        );
        (next, changes)
    }

    fn assemble(
        config: Config,
        upstream: Supervisor,
        events: Arc<Events>,
        catalog: IndexedCatalog,
        tools_changed: Arc<watch::Sender<()>>,
        tracer: Option<&crate::telemetry::Tracer>,
        shared: Arc<Shared>,
    ) -> Self {
        // Secrets are known from the moment a config is, before any server launches or logs;
        // in one batch, so the scrubber's automaton is built once, not once per server. Server
        // names first: they are never secrets, whatever their arguments or shape.
        crate::secrets::declare_names(config.servers().iter().map(|s| s.name.as_str()));
        crate::secrets::register_all(config.servers().iter().map(|s| (s.name.as_str(), s.secret_values())));
        crate::secrets::register_process_environment();
        let tracer = tracer_for(&config, tracer);
        Self {
            specs: config
                .servers()
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.clone(), i))
                .collect(),
            stop_events: upstream.shutdown_token().child_token(),
            upstream,
            events,
            retired: AtomicBool::new(false),
            applying: std::sync::Mutex::new(()),
            catalog: RwLock::new(catalog),
            snapshots: config
                .discovery
                .cache
                .enabled
                .then(SnapshotStore::in_cache_dir)
                .flatten(),
            audit: AuditLog::from_spec(&config.discovery.audit, config.scope == crate::config::Scope::User),
            pins: config.discovery.cache.enabled.then(Pins::in_cache_dir).flatten(),
            validators: validate::Validators::default(),
            semantic: semantic_tier(&config),
            config,
            started: std::sync::Once::new(),
            indexed: watch::channel(false).0,
            tools_changed,
            tracer,
            shared,
        }
    }

    /// A state over an offline catalog: indexed already, nothing to start.
    pub fn with_catalog(catalog: IndexedCatalog) -> Self {
        let state = Self::new(Config::empty());
        *state.catalog.write().expect("catalog lock is never poisoned") = catalog;
        state.indexed.send_replace(true);
        state
    }

    /// Let the semantic tier's background thread find this state's tools without vectors
    /// (until a reload retires it).
    fn attach_semantic(self: &Arc<Self>) {
        let Some(tier) = &self.semantic else { return };
        let state = Arc::downgrade(self);
        tier.add_source(Box::new(move |has| {
            let state = state.upgrade()?;
            if state.retired.load(Ordering::Acquire) {
                return None;
            }
            let catalog = state.catalog.read().ok()?;
            Some(search::semantic::jobs_for(&catalog, has))
        }));
    }

    /// The semantic tier's state.
    pub fn semantic_status(&self) -> search::semantic::Status {
        match &self.semantic {
            Some(tier) => tier.status(),
            None if self.config.discovery.search.semantic => search::semantic::Status::NoModel,
            None => search::semantic::Status::Off,
        }
    }

    /// Read the snapshots and connect what needs connecting, off the caller's path: the
    /// gateway answers `initialize` while this runs. Runs once; needs a tokio runtime.
    pub fn ensure_started(self: &Arc<Self>) {
        self.ensure_started_only(None);
    }

    /// [`State::ensure_started`], connecting only the servers named in `only` (when given):
    /// the others are known (by name, and by their snapshot's tools) but never started.
    pub fn ensure_started_only(self: &Arc<Self>, only: Option<std::collections::HashSet<String>>) {
        self.started.call_once(|| {
            if let Some(tier) = &self.semantic {
                tier.share_vectors(&self.shared.store);
            }
            self.attach_semantic();
            let state = self.clone();
            // Reading and indexing hundreds of snapshots is file I/O and CPU: not on a
            // thread that answers the client.
            tokio::task::spawn_blocking(move || {
                let unchecked = {
                    // Even if reading a snapshot panics, nobody may wait on `indexed` for ever.
                    let _mark = MarkIndexed(&state.indexed);
                    state.load_snapshots(only.as_ref())
                };
                state.tools_changed.send_replace(());
                if let Some(tier) = &state.semantic {
                    tier.wake();
                }
                state.store_checks(unchecked);
            });
            tokio::spawn(apply_events_until_closed(
                Arc::downgrade(self),
                self.events.clone(),
                self.stop_events.clone(),
            ));
        });
    }

    /// Serve every server from its snapshot when there is a fresh one, and start the others.
    /// One thread reads the files and makes catalog entries (trust reviewed) while this one
    /// indexes them, in one batch. The caller marks the catalog indexed however this ends
    /// (`MarkIndexed`). Returns the snapshots that had no stored findings of the checks, for
    /// [`State::store_checks`].
    fn load_snapshots(&self, only: Option<&std::collections::HashSet<String>>) -> Vec<Unchecked> {
        let ttl = Duration::from_secs(self.config.discovery.cache.ttl);
        // Servers a reload carried over keep their tools (and session): nothing to load.
        let carried: std::collections::HashSet<String> = {
            let catalog = self.catalog.read().expect("catalog lock is never poisoned");
            self.upstream
                .handles()
                .filter(|s| catalog.server_tools(&s.spec.name).is_some())
                .map(|s| s.spec.name.clone())
                .collect()
        };
        // The lists replicas keep in the store, in one round trip, before deciding what to start.
        let specs: Vec<&ServerSpec> = self
            .upstream
            .handles()
            .filter(|s| !carried.contains(&s.spec.name))
            .map(|s| &s.spec)
            .collect();
        let prefetched = match self.shared.prefetch_blocking(&specs) {
            Ok(found) => Some(found),
            Err(error) => {
                tracing::warn!("{error}: starting from this replica's own snapshots");
                None
            }
        };
        // And their pins, taken over this replica's before its tools are reviewed.
        let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        let pins = self.shared.fetch_pins_blocking(&names);
        let synced = prefetched.is_some() && pins.is_ok();
        for (server, fields) in pins.unwrap_or_default() {
            self.adopt_pins(&server, &fields, super::shared::Review::Never);
        }
        let from_store = prefetched.unwrap_or_default();
        let from_store = &from_store;
        // Two stages: files → catalog entries (parse, hashes, summaries, rules, trust checks
        // or their stored findings, pins), then entries → index.
        let unchecked = std::thread::scope(|scope| {
            let (sender, received) = std::sync::mpsc::sync_channel(SNAPSHOTS_AHEAD);
            let carried = &carried;
            scope.spawn(move || {
                for server in self.upstream.handles().filter(|s| !carried.contains(&s.spec.name)) {
                    let shared = from_store.get(&server.spec.name);
                    if sender.send((server, self.read_entries(server, ttl, shared))).is_err() {
                        return;
                    }
                }
            });
            let mut catalog = self.catalog.write().expect("catalog lock is never poisoned");
            let mut unchecked = Vec::new();
            let mut batch = catalog.batch();
            for (
                server,
                Read {
                    entries,
                    fresh,
                    unchecked: tools,
                },
            ) in received
            {
                if let Some(entries) = entries {
                    let changes = batch.set_server_entries(&server.spec.name, entries);
                    log_changes(&server.spec.name, &changes);
                }
                if fresh {
                    tracing::debug!(server = %server.spec.name, "serving tools from the snapshot; connecting on first use");
                } else if only.is_none_or(|only| only.contains(&server.spec.name)) {
                    server.start();
                }
                unchecked.extend(tools.map(|(tools, saved_at_ms)| Unchecked {
                    server: server.clone(),
                    tools,
                    saved_at_ms,
                }));
            }
            unchecked
        });
        if synced {
            self.shared.mark_synced();
        }
        unchecked
    }

    /// `server`'s catalog entries from its snapshot (or its declared tools), reviewed; whether
    /// they are fresh (the server is not started); and, for a fresh snapshot without stored
    /// findings, its tools as read, to store the findings with later. The shared store's
    /// list (`shared`: version, text) is used when it is newer than this replica's own.
    fn read_entries(&self, server: &Server, ttl: Duration, shared: Option<&(u64, Vec<u8>)>) -> Read {
        let name = server.spec.name.as_str();
        let rules = self.config.rules();
        let own = self.snapshots.as_ref().and_then(|store| store.load(&server.spec));
        let snapshot = self.newest(&server.spec, own, shared);
        let declared = &self.spec_of(server).static_tools;
        // Declared tools stand in for a snapshot: served at once, the server started on first
        // use (its real list then replaces them).
        let fresh = !declared.is_empty() || snapshot.as_ref().is_some_and(|s| s.age <= ttl);
        let (mut entries, unchecked) = match snapshot {
            Some(snapshot) => {
                let unchecked =
                    (fresh && snapshot.checks.is_none()).then(|| (snapshot.tools.clone(), snapshot.saved_at_ms));
                let checks = snapshot.checks.unwrap_or_default();
                (
                    Catalog::entries_checked(name, snapshot.tools, rules, &checks).0,
                    unchecked,
                )
            }
            None if !declared.is_empty() => (declared_entries(name, declared, rules), None),
            None => {
                return Read {
                    entries: None,
                    fresh,
                    unchecked: None,
                }
            }
        };
        self.review_entries(name, &mut entries);
        Read {
            entries: Some(entries),
            fresh,
            unchecked,
        }
    }

    /// Of this replica's snapshot and the shared store's list, the newer (and remembered as
    /// the version held); the store's is written to the local cache when it wins.
    fn newest(
        &self,
        spec: &ServerSpec,
        own: Option<snapshot::Snapshot>,
        shared: Option<&(u64, Vec<u8>)>,
    ) -> Option<snapshot::Snapshot> {
        let from_store = shared
            .filter(|(version, _)| own.as_ref().is_none_or(|own| *version > own.saved_at_ms))
            .and_then(|(_, bytes)| match snapshot::decode(bytes, spec) {
                Ok(found) => {
                    if let Some(local) = &self.snapshots {
                        local.save_encoded(spec, &String::from_utf8_lossy(bytes));
                    }
                    Some(found)
                }
                Err(reason) => {
                    tracing::warn!(server = %spec.name, %reason, "ignoring the store's tool list");
                    None
                }
            });
        let chosen = from_store.or(own);
        if let Some(chosen) = &chosen {
            self.shared.take_if_newer(&snapshot::stem(spec), chosen.saved_at_ms);
        }
        chosen
    }

    /// Index a server's list another replica put in the store (it is newer than the one
    /// held), and keep it in the local cache. Not published again.
    pub(super) fn apply_shared_list(&self, spec: &ServerSpec, bytes: &[u8]) {
        let _applying = self.applying.lock().expect("events lock is never poisoned");
        if self.retired.load(Ordering::Acquire) || self.upstream.get(&spec.name).is_none() {
            return;
        }
        match snapshot::decode(bytes, spec) {
            Ok(found) => {
                tracing::debug!(server = %spec.name, tools = found.tools.len(), "tool list from another replica");
                self.index(&spec.name, found.tools);
                if let Some(local) = &self.snapshots {
                    local.save_encoded(spec, &String::from_utf8_lossy(bytes));
                }
            }
            Err(reason) => tracing::warn!(server = %spec.name, %reason, "ignoring the store's tool list"),
        }
    }

    /// Store what the checks found beside the snapshots that lacked it, so the next start
    /// reuses it. Runs after the index is ready. A server whose tools changed meanwhile is
    /// left alone (its new list was saved with its findings).
    fn store_checks(&self, unchecked: Vec<Unchecked>) {
        let Some(store) = &self.snapshots else { return };
        for Unchecked {
            server,
            tools,
            saved_at_ms,
        } in unchecked
        {
            // Held while writing: a new list is indexed, then saved, only after this.
            let catalog = self.catalog.read().expect("catalog lock is never poisoned");
            let Some(entries) = catalog.server_tools(&server.spec.name) else {
                continue;
            };
            let same = entries.len() == tools.len()
                && entries
                    .iter()
                    .zip(&tools)
                    .all(|(entry, tool)| entry.content_hash == crate::catalog::content_hash(tool));
            if same {
                let checks: Vec<_> = entries.iter().map(ToolEntry::checked).collect();
                store.save(&server.spec, &tools, Some(&checks), Some(saved_at_ms));
            }
        }
    }

    /// Held while lists are applied to the catalog (events, other replicas' lists and pins).
    pub(super) fn applying_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.applying.lock().expect("events lock is never poisoned")
    }

    /// Where snapshots are kept; `None` when the cache is off.
    pub fn snapshots(&self) -> Option<&SnapshotStore> {
        self.snapshots.as_ref()
    }

    /// Whether [`State::indexed`] would return at once.
    pub fn is_indexed(&self) -> bool {
        *self.indexed.borrow()
    }

    /// Wait until the snapshots are indexed (at once after startup).
    pub async fn indexed(&self) {
        let mut indexed = self.indexed.subscribe();
        let _ = indexed.wait_for(|done| *done).await;
    }

    /// The catalog with every tool list upstream reported so far applied.
    pub fn read_catalog(&self) -> std::sync::RwLockReadGuard<'_, IndexedCatalog> {
        self.apply_events();
        self.catalog.read().expect("catalog lock is never poisoned")
    }

    /// Apply tool lists upstream reported: index them and keep them for the next start.
    pub fn apply_events(&self) {
        let _applying = self.applying.lock().expect("events lock is never poisoned");
        if !self.retired.load(Ordering::Acquire) {
            self.apply_events_locked();
        }
    }

    fn apply_events_locked(&self) {
        for event in self.events.drain() {
            match event {
                UpstreamEvent::Tools { server, tools } => {
                    // A server no longer configured has nothing to index.
                    let Some(handle) = self.upstream.get(&server) else {
                        continue;
                    };
                    if self.snapshots.is_none() && !self.shared.store.is_shared() {
                        self.index(&server, tools);
                        continue;
                    }
                    self.index(&server, tools.clone());
                    // Saved with what the checks found, so the next start need not check again;
                    // and shared with the other replicas.
                    let text = {
                        let catalog = self.catalog.read().expect("catalog lock is never poisoned");
                        let checks: Option<Vec<_>> = catalog
                            .server_tools(&server)
                            .map(|entries| entries.iter().map(ToolEntry::checked).collect());
                        let version = snapshot::now_ms();
                        let text = snapshot::encode(&handle.spec, &tools, checks.as_deref(), version);
                        if let Some(local) = &self.snapshots {
                            local.save_encoded(&handle.spec, &text);
                        }
                        (text, version)
                    };
                    self.shared.publish_list(&handle.spec, text.0, text.1);
                }
            }
        }
    }

    /// Hand upstream events over to the state that replaces this one: what is queued lands
    /// here first (so the next state carries it over), later ones are the next state's.
    fn retire(&self) {
        let _applying = self.applying.lock().expect("events lock is never poisoned");
        if !self.retired.swap(true, Ordering::AcqRel) {
            self.apply_events_locked();
        }
        self.stop_events.cancel();
    }

    /// `server`'s settings as the config has them now (its handle may predate a reload).
    pub fn spec_of<'a>(&'a self, server: &'a Server) -> &'a ServerSpec {
        self.specs
            .get(&server.spec.name)
            .and_then(|&i| self.config.servers().get(i))
            .unwrap_or(&server.spec)
    }

    /// Put `server`'s tools into the catalog (rules applied, trust checked) and log what changed.
    fn index(&self, server: &str, tools: Vec<Tool>) {
        let changes = {
            let mut catalog = self.catalog.write().expect("catalog lock is never poisoned");
            let changes = catalog.set_server_tools(server, tools, self.config.rules());
            self.review_trust(&mut catalog, server, true);
            changes
        };
        log_changes(server, &changes);
        self.tools_changed.send_replace(());
    }

    /// Wait, at most `limit` in all, for servers in their first start (not for retries).
    pub async fn wait_first_starts(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        for server in self.upstream.handles().filter(|s| s.is_first_start()) {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            server.wait_settled(left).await;
        }
    }

    /// The handle of `name`, or `SERVER_NOT_FOUND` with suggestions.
    pub fn server(&self, name: &str) -> Result<&Arc<Server>> {
        self.upstream.get(name).ok_or_else(|| Error::ServerNotFound {
            server: name.to_owned(),
            suggestions: search::suggest_servers(self.upstream.handles().map(|s| s.spec.name.as_str()), name),
        })
    }

    /// Run `f` on `server`'s catalog entries once they are known (waiting for a server still
    /// starting), without copying the list.
    pub async fn with_server_tools<T>(&self, server: &Server, f: impl FnOnce(&[ToolEntry]) -> T) -> Result<T> {
        let name = server.spec.name.as_str();
        self.with_catalog_of(server, |catalog| f(catalog.server_tools(name).unwrap_or_default()))
            .await
    }

    /// Run `f` on the catalog once `server`'s tools are in it (waiting for a server still
    /// starting), or say why they are not.
    pub async fn with_catalog_of<T>(&self, server: &Server, f: impl FnOnce(&IndexedCatalog) -> T) -> Result<T> {
        self.indexed().await;
        // Only a first start is worth waiting for; a retry of a failing server may take its
        // whole startup budget, and the snapshot's tools (if any) answer meanwhile.
        if server.is_first_start() {
            server
                .wait_settled(Duration::from_millis(server.spec.startup_timeout_ms()))
                .await;
        }
        let name = server.spec.name.as_str();
        {
            let catalog = self.read_catalog();
            if catalog.server_tools(name).is_some() {
                return Ok(f(&catalog));
            }
        }
        Err(not_listed(server))
    }

    /// A per-user server whose tools no connection has listed yet (no snapshot, no list in
    /// the store, no declared tools): list them through `caller`'s own connection, as a call
    /// of one of them would, so a caller who signed in sees them, and one who has not gets
    /// the same sign-in link ([`Error::SignInRequired`]). Nothing to do for any other server,
    /// or once anyone's list is known (it is everyone's: see `upstream::supervisor::users`).
    pub(super) async fn list_as_caller(&self, server: &Arc<Server>, caller: &Caller) -> Result<()> {
        if !server.is_per_user() {
            return Ok(());
        }
        self.indexed().await;
        let name = server.spec.name.as_str();
        if self.read_catalog().server_tools(name).is_some() {
            return Ok(());
        }
        let (own, _) = self.caller_connection(server, caller).await?;
        own.wait_settled(Duration::from_millis(self.spec_of(server).startup_timeout_ms()))
            .await;
        if self.read_catalog().server_tools(name).is_some() {
            return Ok(());
        }
        Err(not_listed(&own))
    }

    /// What `caller` may see of the catalog (`None`: what it says, the local user's view).
    pub fn view(&self, catalog: &IndexedCatalog, caller: &Caller) -> Option<Arc<search::View>> {
        catalog.view(self.config.rules(), caller)
    }

    /// The catalog entry of `tool` on `server` and what it is to `caller`, or `TOOL_NOT_FOUND`
    /// with suggestions. A tool hidden from the caller is not found, exactly like one that
    /// does not exist (and is never suggested).
    pub async fn find_tool(&self, server: &Server, tool: &str, caller: &Caller) -> Result<(ToolEntry, Sight)> {
        let name = server.spec.name.as_str();
        let found = self
            .with_catalog_of(server, |catalog| {
                let view = self.view(catalog, caller);
                let tools = catalog.server_tools(name).unwrap_or_default();
                tools
                    .iter()
                    .position(|t| t.name() == tool)
                    .map(|position| (tools[position].clone(), catalog.sight(view.as_deref(), name, position)))
                    .filter(|(_, sight)| *sight != Sight::Hidden)
                    .ok_or_else(|| search::suggest_tools(catalog, view.as_deref(), name, tool))
            })
            .await?;
        found.map_err(|suggestions| Error::ToolNotFound {
            server: name.to_owned(),
            tool: tool.to_owned(),
            suggestions,
        })
    }
}

/// Why `server`'s tools are not known: what its connection is doing.
fn not_listed(server: &Server) -> Error {
    let source = match server.state() {
        ServerState::Backoff { reason, until } => {
            reason.unavailable(until.saturating_duration_since(tokio::time::Instant::now()))
        }
        ServerState::Failed { reason } => UpstreamError::Failed { reason },
        // Its own handle never connects: each caller's does.
        _ if server.is_per_user() => UpstreamError::NeedsSignIn {
            detail:
                "each caller signs in to it with their own account, and no one's connection has listed its tools yet"
                    .to_owned(),
        },
        _ => UpstreamError::handshake("still starting"),
    };
    Error::ServerConnection {
        server: server.spec.name.clone(),
        source,
    }
}

/// One server's snapshot as read, on its way to the index.
struct Read {
    /// Reviewed entries, from the snapshot or the declared tools; `None`: neither.
    entries: Option<Vec<ToolEntry>>,
    /// Served as it is: the server is started on first use only.
    fresh: bool,
    /// A fresh snapshot without stored findings: its tools as read, and when it was saved.
    unchecked: Option<(Vec<Tool>, u64)>,
}

/// A fresh snapshot read without stored findings of the checks: its tools as read.
struct Unchecked {
    server: Arc<Server>,
    tools: Vec<Tool>,
    saved_at_ms: u64,
}

/// Marks the snapshots indexed when dropped, however loading them ended.
struct MarkIndexed<'a>(&'a watch::Sender<bool>);

impl Drop for MarkIndexed<'_> {
    fn drop(&mut self) {
        self.0.send_replace(true);
    }
}

/// Apply upstream events as they come, for one state until it is dropped or closed (readers
/// also apply them on the way, so nobody waits for this task).
async fn apply_events_until_closed(state: Weak<State>, events: Arc<Events>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = events.ready() => {}
            () = shutdown.cancelled() => return,
        }
        let Some(state) = state.upgrade() else { return };
        state.apply_events();
    }
}

/// The catalog for `config` from the `previous` one: the `kept` servers' tools stay, indexed
/// as they are unless the new rules decide one of them differently or the server's
/// description changed; every other server's tools go. Re-indexing only what changed keeps
/// a reload of many servers in milliseconds.
fn carry_over(previous: &IndexedCatalog, config: &Config, kept: &[String]) -> IndexedCatalog {
    let mut catalog = previous.clone();
    let kept: std::collections::HashSet<&str> = kept.iter().map(String::as_str).collect();
    let gone: Vec<String> = catalog
        .server_names()
        .filter(|name| !kept.contains(name))
        .map(str::to_owned)
        .collect();
    for name in &gone {
        catalog.remove_server(name);
    }
    for server in config.servers() {
        catalog.set_description(&server.name, server.description.as_deref());
        let Some(entries) = catalog.server_tools(&server.name) else {
            continue;
        };
        let rules = config.rules();
        let decided_anew = entries.iter().any(|entry| {
            let decision = rules.decide(&server.name, entry.name());
            decision.enabled != entry.enabled || decision.tags != entry.tags
        });
        if decided_anew {
            let tools = entries.iter().map(|e| Tool::clone(&e.tool)).collect();
            catalog.set_server_tools(&server.name, tools, rules);
        }
    }
    catalog
}

/// Catalog entries of a server's declared (static) tools, marked so they are never pinned.
fn declared_entries(server: &str, tools: &[Tool], rules: &crate::rules::RuleSet) -> Vec<ToolEntry> {
    let mut entries = Catalog::entries(server, tools.to_vec(), rules);
    for entry in &mut entries {
        entry.declared = true;
    }
    entries
}

/// A catalog that knows the servers' descriptions and no tools yet.
fn empty_catalog(config: &Config) -> IndexedCatalog {
    IndexedCatalog::from(Catalog::with_descriptions(
        config
            .servers()
            .iter()
            .filter_map(|s| Some((s.name.as_str(), s.description.as_deref()?))),
    ))
}

/// Whether a server is launched the same way under `new` as under `old`: the same name and
/// connection (what its snapshot is keyed by) and startup budget; with a `cwd`, the config
/// must also still be in the same folder (`moved` says it is not), which the `cwd` resolves
/// against.
fn same_launch(old: &ServerSpec, new: &ServerSpec, moved: bool) -> bool {
    let launch = |s: &ServerSpec| serde_json::to_value((&s.name, &s.connection, s.startup_timeout_ms)).ok();
    launch(old) == launch(new) && !(moved && new.connection.cwd.is_some())
}

fn log_changes(server: &str, changes: &ToolChanges) {
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

/// The folder of a config file, against which relative `cwd`s resolve.
/// The semantic tier `config` asks for: none when turned off or when no model folder is
/// found (said once per process, in one line: search is then lexical, as without the tier).
fn semantic_tier(config: &Config) -> Option<Arc<search::semantic::Tier>> {
    static SAID: std::sync::Once = std::sync::Once::new();
    let spec = &config.discovery.search;
    if !spec.semantic {
        return None;
    }
    let configured = spec.model.as_deref().map(|model| {
        let path = std::path::Path::new(model);
        match config_dir(&config.origin) {
            Some(base) if path.is_relative() => base.join(path),
            _ => path.to_path_buf(),
        }
    });
    let Some(dir) = search::semantic::locate(configured.as_deref()) else {
        SAID.call_once(|| {
            tracing::info!(
                "semantic search off: no model found (install @anygpt/discovery-model-minilm, or set discovery.search.model); search is lexical"
            );
        });
        return None;
    };
    let cache = config
        .discovery
        .cache
        .enabled
        .then(crate::paths::cache_dir)
        .flatten()
        .map(|dir| dir.join("catalog"));
    Some(search::semantic::Tier::shared(&dir, cache))
}

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(value: serde_json::Value) -> ServerSpec {
        serde_json::from_value(value).unwrap()
    }

    fn config(value: serde_json::Value) -> Config {
        Config::from_value(value, "<object>").unwrap()
    }

    #[test]
    fn settings_do_not_change_the_launch_but_connection_and_startup_budget_do() {
        let base = json!({ "name": "a", "connection": { "command": "node", "args": ["s.js"] } });
        let old = spec(base.clone());
        let mut settings = base.clone();
        settings["description"] = json!("now described");
        settings["timeoutMs"] = json!(5);
        settings["idleTimeoutMs"] = json!(5);
        assert!(same_launch(&old, &spec(settings), false));
        let mut args = base.clone();
        args["connection"]["args"] = json!(["other.js"]);
        assert!(!same_launch(&old, &spec(args), false));
        let mut budget = base.clone();
        budget["startupTimeoutMs"] = json!(5);
        assert!(!same_launch(&old, &spec(budget), false));
        // A moved config matters only to a server whose cwd resolves against it.
        assert!(same_launch(&old, &old, true));
        let mut cwd = base;
        cwd["connection"]["cwd"] = json!(".");
        let cwd = spec(cwd);
        assert!(same_launch(&cwd, &cwd, false));
        assert!(!same_launch(&cwd, &cwd, true));
    }

    #[tokio::test]
    async fn declared_tools_are_indexed_without_starting_the_server() {
        let machine = crate::config::locate::TestMachine::new();
        let file = machine.env.cwd.join("servers.yaml");
        std::fs::write(
            &file,
            "servers:\n  slow:\n    connection: { command: sleep, args: ['600'] }\n    tools:\n      - name: forecast\n        description: Forecast for a city.\n        inputSchema: { type: object, properties: { city: { type: string } } }\n      - name: \"other:tool\"\n",
        )
        .unwrap();
        let config = Config::from_value_in(
            json!({ "discovery": {
                "cache": { "enabled": false },
                "sources": [{ "type": "custom", "path": file.to_str().unwrap() }],
            } }),
            machine.env.cwd.join("c.json").to_str().unwrap(),
            &machine.env,
        )
        .unwrap();
        let state = Arc::new(State::new(config));
        state.ensure_started();
        state.indexed().await;
        let handle = state.server("slow").unwrap();
        assert_eq!(handle.state(), ServerState::Idle, "not started");
        let catalog = state.read_catalog();
        let tools = catalog.server_tools("slow").expect("declared tools indexed");
        assert_eq!(
            tools.iter().map(ToolEntry::name).collect::<Vec<_>>(),
            ["forecast", "other:tool"]
        );
        assert!(tools.iter().all(|t| t.declared && t.change.is_none()));
        assert_eq!(tools[0].tool.input_schema["properties"]["city"]["type"], "string");
        // Checked like any tool: a name that reads as another server's is flagged.
        assert_eq!(tools[1].flags(), ["shadow-name"]);
        assert!(catalog.index().has_server("slow"));
    }

    #[test]
    fn carry_over_keeps_kept_servers_tools_with_the_new_rules_and_drops_the_rest() {
        let server = |name: &str| json!({ "name": name, "connection": { "command": "x" } });
        let before = config(json!({ "servers": [server("a"), server("b")] }));
        let mut previous = empty_catalog(&before);
        let tool = |name: &str| Tool::new(name.to_owned(), "Does a thing.", Arc::new(serde_json::Map::new()));
        previous.set_server_tools("a", vec![tool("create_issue"), tool("delete_repo")], before.rules());
        previous.set_server_tools("b", vec![tool("other")], before.rules());

        let mut described = server("a");
        described["description"] = json!("GitHub");
        let after = config(json!({
            "servers": [described, server("c")],
            "toolRules": [{ "pattern": "*delete*", "enabled": false, "tags": ["dangerous"] }],
        }));
        let catalog = carry_over(&previous, &after, &["a".to_owned()]);
        let a = catalog.server_tools("a").expect("kept");
        assert_eq!(a.len(), 2);
        let delete = a.iter().find(|t| t.name() == "delete_repo").unwrap();
        assert!(!delete.enabled, "the new rules apply");
        assert_eq!(delete.tags, ["dangerous"]);
        assert_eq!(catalog.description("a"), Some("GitHub"));
        assert!(catalog.server_tools("b").is_none(), "removed");
        assert!(
            catalog.server_tools("c").is_none(),
            "added: its tools come when it starts"
        );
        assert!(catalog.index().has_server("a") && !catalog.index().has_server("b"));
    }
}
