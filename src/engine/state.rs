//! Everything that belongs to one loaded config, and its lifecycle: built by `reload`, started
//! once (snapshots read and indexed off the answering path, servers without a fresh snapshot
//! connected in the background), fed by upstream events, closed.

use std::path::PathBuf;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use rmcp::model::Tool;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::audit::AuditLog;
use crate::catalog::snapshot::SnapshotStore;
use crate::catalog::{Catalog, ToolChanges, ToolEntry};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::search::{self, IndexedCatalog};
use crate::upstream::{Dial, Events, Handle, ServerState, Supervisor, UpstreamError, UpstreamEvent};

use super::validate;

/// Snapshots read ahead of the indexing (parsed tool lists waiting in memory).
const SNAPSHOTS_AHEAD: usize = 32;

/// One server as the engine holds it.
pub(super) type Server = Handle<Dial>;

#[derive(Debug)]
pub(super) struct State {
    pub config: Config,
    pub upstream: Supervisor,
    events: Arc<Events>,
    /// Held while events are applied, so two readers never apply one server's lists out of order.
    applying: std::sync::Mutex<()>,
    catalog: RwLock<IndexedCatalog>,
    snapshots: Option<SnapshotStore>,
    pub audit: Option<AuditLog>,
    pub validators: validate::Validators,
    started: std::sync::Once,
    /// True once the snapshots are read and indexed: searches wait for this, not for servers.
    indexed: watch::Sender<bool>,
}

impl State {
    pub fn new(config: Config) -> Self {
        let events = Arc::new(Events::default());
        let dial = Dial {
            base_dir: config_dir(&config.origin),
        };
        Self {
            upstream: Supervisor::new(config.servers(), dial, config.discovery.idle_timeout_ms, events.clone()),
            events,
            applying: std::sync::Mutex::new(()),
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
            indexed: watch::channel(false).0,
        }
    }

    /// A state over an offline catalog: indexed already, nothing to start.
    pub fn with_catalog(catalog: IndexedCatalog) -> Self {
        let state = Self::new(Config::empty());
        *state.catalog.write().expect("catalog lock is never poisoned") = catalog;
        state.indexed.send_replace(true);
        state
    }

    /// Read the snapshots and connect what needs connecting, off the caller's path: the
    /// gateway answers `initialize` while this runs. Runs once; needs a tokio runtime.
    pub fn ensure_started(self: &Arc<Self>) {
        self.started.call_once(|| {
            let state = self.clone();
            // Reading and indexing hundreds of snapshots is file I/O and CPU: not on a
            // thread that answers the client.
            tokio::task::spawn_blocking(move || state.load_snapshots());
            tokio::spawn(apply_events_until_closed(
                Arc::downgrade(self),
                self.events.clone(),
                self.upstream.shutdown_token().clone(),
            ));
        });
    }

    /// Serve every server from its snapshot when there is a fresh one, and start the others.
    /// One thread reads the files and makes catalog entries while this one indexes them, in
    /// one batch.
    fn load_snapshots(&self) {
        let ttl = Duration::from_secs(self.config.discovery.cache.ttl);
        // Two stages, each about half the work: files → catalog entries (parse, hashes,
        // summaries, rules), then entries → index.
        std::thread::scope(|scope| {
            let (sender, received) = std::sync::mpsc::sync_channel(SNAPSHOTS_AHEAD);
            scope.spawn(move || {
                for server in self.upstream.handles() {
                    let snapshot = self.snapshots.as_ref().and_then(|store| store.load(&server.spec));
                    let fresh = snapshot.as_ref().is_some_and(|s| s.age <= ttl);
                    let entries = snapshot
                        .map(|snapshot| Catalog::entries(&server.spec.name, snapshot.tools, self.config.rules()));
                    if sender.send((server, entries, fresh)).is_err() {
                        return;
                    }
                }
            });
            let mut catalog = self.catalog.write().expect("catalog lock is never poisoned");
            let mut batch = catalog.batch();
            for (server, entries, fresh) in received {
                if let Some(entries) = entries {
                    let changes = batch.set_server_entries(&server.spec.name, entries);
                    log_changes(&server.spec.name, &changes);
                }
                if fresh {
                    tracing::debug!(server = %server.spec.name, "serving tools from the snapshot; connecting on first use");
                } else {
                    server.start();
                }
            }
        });
        self.indexed.send_replace(true);
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
        for event in self.events.drain() {
            match event {
                UpstreamEvent::Tools { server, tools } => {
                    if let Some(handle) = self.upstream.get(&server) {
                        if let Some(store) = &self.snapshots {
                            store.save(&handle.spec, &tools);
                        }
                    }
                    self.index(&server, tools);
                }
            }
        }
    }

    /// Put `server`'s tools into the catalog (rules applied) and log what changed.
    fn index(&self, server: &str, tools: Vec<Tool>) {
        let changes = self
            .catalog
            .write()
            .expect("catalog lock is never poisoned")
            .set_server_tools(server, tools, self.config.rules());
        log_changes(server, &changes);
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
        self.indexed().await;
        if matches!(server.state(), ServerState::Connecting { .. }) {
            server
                .wait_settled(Duration::from_millis(server.spec.startup_timeout_ms()))
                .await;
        }
        let name = server.spec.name.as_str();
        if let Some(tools) = self.read_catalog().server_tools(name) {
            return Ok(f(tools));
        }
        let source = match server.state() {
            ServerState::Backoff { reason, until } => UpstreamError::Unavailable {
                reason,
                retry_in: until.saturating_duration_since(tokio::time::Instant::now()),
            },
            ServerState::Failed { reason } => UpstreamError::Failed { reason },
            _ => UpstreamError::handshake("still starting"),
        };
        Err(Error::ServerConnection {
            server: name.to_owned(),
            source,
        })
    }

    /// The catalog entry of `tool` on `server`, or `TOOL_NOT_FOUND` with suggestions.
    pub async fn find_tool(&self, server: &Server, tool: &str) -> Result<ToolEntry> {
        let found = self
            .with_server_tools(server, |tools| tools.iter().find(|t| t.name() == tool).cloned())
            .await?;
        found.ok_or_else(|| Error::ToolNotFound {
            server: server.spec.name.clone(),
            tool: tool.to_owned(),
            suggestions: search::suggest_tools(&self.read_catalog(), &server.spec.name, tool),
        })
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
