//! Every configured server: status, connect, backoff, idle close, shutdown.

use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use rmcp::model::Tool;
use tokio::sync::{mpsc, watch, Mutex, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::connection::{Connection, UpstreamEvent, TERM_GRACE};
use crate::config::ServerSpec;

/// How many servers start at once: enough to hide latency, few enough not to thrash two cores.
const CONNECT_CONCURRENCY: usize = 8;
/// First wait after a failed connection attempt; doubled per further failure.
const BACKOFF_START: Duration = Duration::from_secs(1);
/// Longest wait between attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// What a server is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStatus {
    /// No session: not started yet (tools known from a snapshot) or closed after idling.
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

#[derive(Debug, Default)]
struct Slot {
    connection: Option<Arc<Connection>>,
    /// Consecutive failed attempts.
    failures: u32,
    /// No new attempt before this.
    retry_at: Option<Instant>,
}

#[derive(Debug)]
struct Activity {
    last_used: Instant,
    in_flight: usize,
}

/// One server's slot.
#[derive(Debug)]
pub struct Server {
    pub spec: ServerSpec,
    idle_timeout: Duration,
    status: watch::Sender<ServerStatus>,
    /// Held while connecting, so concurrent callers share one attempt.
    slot: Mutex<Slot>,
    activity: StdMutex<Activity>,
}

impl Server {
    #[must_use]
    pub fn status(&self) -> ServerStatus {
        self.status.borrow().clone()
    }

    /// Set the status (the engine marks snapshot-served servers `idle`).
    pub fn set_status(&self, status: ServerStatus) {
        self.status.send_replace(status);
    }

    fn activity(&self) -> std::sync::MutexGuard<'_, Activity> {
        self.activity
            .lock()
            .expect("activity lock is never poisoned: no panics while held")
    }
}

/// Counts a call in flight; the session is not closed for idleness while one runs.
#[derive(Debug)]
pub struct CallGuard {
    server: Arc<Server>,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let mut activity = self.server.activity();
        activity.in_flight -= 1;
        activity.last_used = Instant::now();
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
    events: mpsc::UnboundedSender<UpstreamEvent>,
}

impl Pool {
    /// A pool over `specs`; events from servers (`tools/list_changed`) go to `events`.
    #[must_use]
    pub fn new(
        specs: &[ServerSpec],
        base_dir: Option<PathBuf>,
        idle_default: Option<u64>,
        events: mpsc::UnboundedSender<UpstreamEvent>,
    ) -> Self {
        let servers = specs
            .iter()
            .map(|spec| {
                Arc::new(Server {
                    idle_timeout: Duration::from_millis(spec.idle_timeout_ms(idle_default)),
                    spec: spec.clone(),
                    status: watch::channel(ServerStatus::Idle).0,
                    slot: Mutex::new(Slot::default()),
                    activity: StdMutex::new(Activity {
                        last_used: Instant::now(),
                        in_flight: 0,
                    }),
                })
            })
            .collect();
        Self {
            servers,
            base_dir,
            permits: Arc::new(Semaphore::new(CONNECT_CONCURRENCY)),
            shutdown: CancellationToken::new(),
            events,
        }
    }

    pub fn servers(&self) -> impl Iterator<Item = &Arc<Server>> {
        self.servers.iter()
    }

    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Arc<Server>> {
        self.servers.iter().find(|s| s.spec.name == name)
    }

    /// Cancelled when the pool closes.
    #[must_use]
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Count a call on `server` until the guard drops.
    #[must_use]
    pub fn begin_call(server: &Arc<Server>) -> CallGuard {
        server.activity().in_flight += 1;
        CallGuard { server: server.clone() }
    }

    /// The live session of `server`, connecting (or reconnecting a closed one) first. A new
    /// session's tools go to `index` before the server is marked connected, so whoever waits
    /// for `connected` finds them indexed.
    ///
    /// # Errors
    /// Why the server cannot be reached now; its status says the same.
    pub async fn connection(
        &self,
        server: &Arc<Server>,
        index: impl FnOnce(Vec<Tool>),
    ) -> Result<Arc<Connection>, String> {
        let mut slot = server.slot.lock().await;
        if let Some(live) = slot.connection.as_ref().filter(|c| !c.is_closed()) {
            return Ok(live.clone());
        }
        if let Some(dead) = slot.connection.take() {
            tracing::warn!(server = %server.spec.name, "session ended; reconnecting");
            close_in_background(dead);
        }
        if self.shutdown.is_cancelled() {
            return Err("the gateway is shutting down".into());
        }
        if let Some(wait) = slot.retry_at.map(|at| at.saturating_duration_since(Instant::now())) {
            if !wait.is_zero() {
                let reason = match server.status() {
                    ServerStatus::Error(reason) => reason,
                    _ => "the last attempt failed".to_owned(),
                };
                return Err(format!("{reason} (next attempt in {} s)", wait.as_secs().max(1)));
            }
        }
        server.set_status(ServerStatus::Connecting);
        let _permit = self
            .permits
            .acquire()
            .await
            .expect("the pool never closes its semaphore");
        // Boxed: opening covers every transport and is large; callers' futures stay small.
        let open = Box::pin(Connection::open(
            &server.spec,
            self.base_dir.as_deref(),
            &self.shutdown,
            self.events.clone(),
        ));
        match open.await {
            Ok((connection, tools)) => {
                tracing::info!(server = %server.spec.name, tools = tools.len(), "connected");
                let connection = Arc::new(connection);
                slot.connection = Some(connection.clone());
                slot.failures = 0;
                slot.retry_at = None;
                server.activity().last_used = Instant::now();
                index(tools);
                server.set_status(ServerStatus::Connected);
                tokio::spawn(close_when_idle(
                    server.clone(),
                    Arc::downgrade(&connection),
                    self.shutdown.clone(),
                ));
                Ok(connection)
            }
            Err(reason) => {
                slot.failures += 1;
                let backoff = backoff(slot.failures);
                slot.retry_at = Some(Instant::now() + backoff);
                tracing::warn!(server = %server.spec.name, %reason, retry_in_ms = backoff.as_millis(), "cannot connect");
                server.set_status(ServerStatus::Error(reason.clone()));
                Err(reason)
            }
        }
    }

    /// The session of `server` if one is open now (never connects).
    pub async fn live_connection(&self, server: &Server) -> Option<Arc<Connection>> {
        server.slot.lock().await.connection.clone().filter(|c| !c.is_closed())
    }

    /// Mark a server's session as lost (it crashed mid-call). The next attempt is not delayed:
    /// a crash is not a failed start.
    pub async fn mark_lost(&self, server: &Server, reason: String) {
        let mut slot = server.slot.lock().await;
        if let Some(dead) = slot.connection.take() {
            close_in_background(dead);
        }
        server.set_status(ServerStatus::Error(reason));
    }

    /// Wait until `server` is no longer connecting, or `limit` passes.
    pub async fn wait_settled(server: &Server, limit: Duration) {
        let mut rx = server.status.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|s| !matches!(s, ServerStatus::Connecting))).await;
    }

    /// Close every session and end every process group, concurrently.
    pub async fn close(&self) {
        self.shutdown.cancel();
        let mut closing = tokio::task::JoinSet::new();
        for server in &self.servers {
            let connection = server.slot.lock().await.connection.take();
            if let Some(connection) = connection {
                server.set_status(ServerStatus::Idle);
                closing.spawn(close_connection(connection));
            }
        }
        while closing.join_next().await.is_some() {}
    }
}

/// 1 s, 2 s, 4 s, … up to a minute.
fn backoff(failures: u32) -> Duration {
    BACKOFF_START
        .saturating_mul(1 << failures.saturating_sub(1).min(6))
        .min(BACKOFF_MAX)
}

async fn close_connection(connection: Arc<Connection>) {
    let group = connection.group();
    match Arc::into_inner(connection) {
        Some(connection) => connection.close().await,
        // A call still holds the session: end the processes under it; the call fails.
        None => group.terminate(TERM_GRACE).await,
    }
}

fn close_in_background(connection: Arc<Connection>) {
    tokio::spawn(close_connection(connection));
}

/// Close `server`'s session once nothing has used it for its idle timeout.
async fn close_when_idle(server: Arc<Server>, connection: Weak<Connection>, shutdown: CancellationToken) {
    loop {
        let due = {
            let activity = server.activity();
            (activity.in_flight == 0).then_some(activity.last_used + server.idle_timeout)
        };
        let wake = due.unwrap_or_else(|| Instant::now() + server.idle_timeout);
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {}
            () = shutdown.cancelled() => return,
        }
        let idle = {
            let activity = server.activity();
            activity.in_flight == 0 && activity.last_used.elapsed() >= server.idle_timeout
        };
        if !idle {
            continue;
        }
        let mut slot = server.slot.lock().await;
        let ours = match (slot.connection.as_ref(), connection.upgrade()) {
            (Some(current), Some(mine)) => Arc::ptr_eq(current, &mine),
            _ => false,
        };
        if ours {
            tracing::info!(server = %server.spec.name, idle_ms = server.idle_timeout.as_millis(), "closing idle session");
            if let Some(connection) = slot.connection.take() {
                server.set_status(ServerStatus::Idle);
                drop(slot);
                close_connection(connection).await;
            }
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_a_minute() {
        let waits: Vec<u64> = (1..=9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }
}
