//! Every configured server: status, connect, reconnect, close.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::Tool;
use tokio::sync::{watch, Mutex, Semaphore};

use tokio_util::sync::CancellationToken;

use super::connection::{Connection, TERM_GRACE};
use crate::config::ServerSpec;

/// How many servers start at once: enough to hide latency, few enough not to thrash two cores.
const CONNECT_CONCURRENCY: usize = 8;

/// What a server is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStatus {
    /// Not started yet.
    Idle,
    Connecting,
    Connected,
    /// Failed, with the reason.
    Error(String),
}

impl ServerStatus {
    /// The word shown in `list_mcp_servers`.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Connecting => "connecting",
            Self::Connected => "connected",
            Self::Error(_) => "error",
        }
    }
}

/// One server's slot.
#[derive(Debug)]
pub struct Server {
    pub spec: ServerSpec,
    status: watch::Sender<ServerStatus>,
    /// Held while connecting, so concurrent callers share one attempt.
    connection: Mutex<Option<Arc<Connection>>>,
}

impl Server {
    #[must_use]
    pub fn status(&self) -> ServerStatus {
        self.status.borrow().clone()
    }
}

/// All servers of one config.
#[derive(Debug)]
pub struct Pool {
    servers: Vec<Arc<Server>>,
    base_dir: Option<PathBuf>,
    permits: Arc<Semaphore>,
    /// Cancelled at close: connection attempts in flight give up and end their process.
    shutdown: CancellationToken,
}

impl Pool {
    #[must_use]
    pub fn new(specs: &[ServerSpec], base_dir: Option<PathBuf>) -> Self {
        let servers = specs
            .iter()
            .map(|spec| {
                Arc::new(Server {
                    spec: spec.clone(),
                    status: watch::channel(ServerStatus::Idle).0,
                    connection: Mutex::new(None),
                })
            })
            .collect();
        Self {
            servers,
            base_dir,
            permits: Arc::new(Semaphore::new(CONNECT_CONCURRENCY)),
            shutdown: CancellationToken::new(),
        }
    }

    pub fn servers(&self) -> impl Iterator<Item = &Arc<Server>> {
        self.servers.iter()
    }

    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Arc<Server>> {
        self.servers.iter().find(|s| s.spec.name == name)
    }

    /// The live session of `server`, connecting (or reconnecting a closed one) first.
    /// `Ok(Some(tools))` is returned alongside when a new session listed tools.
    ///
    /// # Errors
    /// Why the server could not be reached; its status says the same.
    pub async fn connection(&self, server: &Server) -> Result<(Arc<Connection>, Option<Vec<Tool>>), String> {
        let mut slot = server.connection.lock().await;
        if let Some(live) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok((live.clone(), None));
        }
        if let Some(dead) = slot.take() {
            tracing::warn!(server = %server.spec.name, "session closed; reconnecting");
            if let Some(dead) = Arc::into_inner(dead) {
                tokio::spawn(dead.close());
            }
        }
        server.status.send_replace(ServerStatus::Connecting);
        if self.shutdown.is_cancelled() {
            return Err("the gateway is shutting down".into());
        }
        let _permit = self
            .permits
            .acquire()
            .await
            .expect("the pool never closes its semaphore");
        match Connection::open(&server.spec, self.base_dir.as_deref(), &self.shutdown).await {
            Ok((connection, tools)) => {
                tracing::info!(server = %server.spec.name, tools = tools.len(), "connected");
                let connection = Arc::new(connection);
                *slot = Some(connection.clone());
                server.status.send_replace(ServerStatus::Connected);
                Ok((connection, Some(tools)))
            }
            Err(reason) => {
                tracing::warn!(server = %server.spec.name, %reason, "cannot connect");
                server.status.send_replace(ServerStatus::Error(reason.clone()));
                Err(reason)
            }
        }
    }

    /// Mark a server's session as lost (e.g. it crashed mid-call).
    pub async fn mark_lost(&self, server: &Server, reason: String) {
        let mut slot = server.connection.lock().await;
        if let Some(dead) = slot.take().and_then(Arc::into_inner) {
            tokio::spawn(dead.close());
        }
        server.status.send_replace(ServerStatus::Error(reason));
    }

    /// Wait until `server` is no longer connecting/idle, or `limit` passes.
    pub async fn wait_settled(server: &Server, limit: Duration) {
        let mut rx = server.status.subscribe();
        let settled = |s: &ServerStatus| matches!(s, ServerStatus::Connected | ServerStatus::Error(_));
        let _ = tokio::time::timeout(limit, rx.wait_for(settled)).await;
    }

    /// Close every session and end every process group, concurrently.
    pub async fn close(&self) {
        self.shutdown.cancel();
        let mut closing = Vec::new();
        for server in &self.servers {
            let connection = server.connection.lock().await.take();
            if let Some(connection) = connection {
                server.status.send_replace(ServerStatus::Idle);
                closing.push(async move {
                    let group = connection.group();
                    match Arc::into_inner(connection) {
                        Some(connection) => connection.close().await,
                        // A call still holds the session: end the processes under it.
                        None => group.terminate(TERM_GRACE).await,
                    }
                });
            }
        }
        futures_join_all(closing).await;
    }
}

/// Run futures concurrently to completion (tokio has no `join_all` of its own).
async fn futures_join_all<F: std::future::Future<Output = ()> + Send + 'static>(futures: Vec<F>) {
    let mut set = tokio::task::JoinSet::new();
    for future in futures {
        set.spawn(future);
    }
    while set.join_next().await.is_some() {}
}
