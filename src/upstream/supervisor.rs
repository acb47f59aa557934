//! The supervisor: one handle per configured server, each a small state machine
//!
//! ```text
//!   idle ──► connecting ──► ready ──► draining ──► idle
//!              │   ▲          │ (session lost, wedged)
//!              ▼   │ (timer)  ▼
//!           backoff ◄──── restart policy ───► connecting (at once, after a lasting session)
//!              │
//!              ▼ (a spec that cannot work: unset variable, bad URL)
//!            failed
//! ```
//!
//! A handle owns its server's session, the calls in flight on it, the idle close, and the
//! restart policy (jittered exponential backoff — for the first start too, so a server that
//! is not up yet is tried again without anyone asking). Connecting runs in a task of its
//! own, so a caller that gives up never cancels an attempt others wait for. New tool lists
//! leave as [`UpstreamEvent`]s for the engine to apply; nothing here touches the catalog.
//!
//! Sessions come from a [`Connector`], so the state machine is tested with a scripted one
//! under paused time.

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use tokio::sync::{watch, Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::{ProgressSink, ToolsSink};
use super::connection::Connection;
use super::error::UpstreamError;
use super::lock;
use crate::config::ServerSpec;

/// How many servers may be starting at once: enough to hide latency, few enough not to
/// thrash two cores with `npx` starts.
const CONNECT_SLOTS: usize = 8;
/// How long one start may hold a slot. A server still silent after this keeps starting
/// without one, so hung handshakes never keep healthy servers waiting.
const SLOT_BUDGET: Duration = Duration::from_millis(500);
/// First wait after a failed start; doubled per further failure.
const BACKOFF_START: Duration = Duration::from_secs(1);
/// Longest wait between attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// A session that lasted this long proved the server works: its end restarts it at once.
/// A call that succeeded proves nothing: a server that dies right after its handshake may
/// still answer the one call that was quick enough.
const STABLE_SESSION: Duration = Duration::from_secs(10);
/// A write blocked this long (or half the call's timeout, if shorter) when the call times out
/// means the server stopped reading its input.
const WEDGED_AFTER: Duration = Duration::from_secs(1);
/// How long closing waits for starts in flight to end their processes.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// A live session with a server, as the supervisor needs it.
pub(crate) trait Session: Send + Sync + 'static {
    fn is_closed(&self) -> bool;
    /// How long a write to the server has been waiting for it to read, if one is.
    fn write_blocked_for(&self) -> Option<Duration>;
    /// Why the session ended, with what the process did.
    fn explain_end(&self) -> String;
    fn call(
        &self,
        params: CallToolRequestParams,
        timeout: Duration,
        progress: Option<ProgressSink>,
    ) -> impl Future<Output = Result<CallToolResult, UpstreamError>> + Send;
    /// Close the session and end what runs under it.
    fn end(self: Arc<Self>) -> impl Future<Output = ()> + Send;
}

/// Opens sessions: spawn or dial, handshake, first full tool list.
pub(crate) trait Connector: Send + Sync + 'static {
    type Session: Session;
    fn open(
        &self,
        spec: &ServerSpec,
        shutdown: &CancellationToken,
        on_tools: ToolsSink,
    ) -> impl Future<Output = Result<(Self::Session, Vec<Tool>), UpstreamError>> + Send;
}

/// The real connector: stdio processes and remote servers.
#[derive(Debug)]
pub(crate) struct Dial {
    /// Where a relative `cwd` resolves (the config file's folder).
    pub base_dir: Option<PathBuf>,
}

impl Connector for Dial {
    type Session = Connection;

    async fn open(
        &self,
        spec: &ServerSpec,
        shutdown: &CancellationToken,
        on_tools: ToolsSink,
    ) -> Result<(Connection, Vec<Tool>), UpstreamError> {
        // Boxed: opening covers every transport and is large; the task's future stays small.
        Box::pin(Connection::open(spec, self.base_dir.as_deref(), shutdown, on_tools)).await
    }
}

impl Session for Connection {
    fn is_closed(&self) -> bool {
        Connection::is_closed(self)
    }

    fn write_blocked_for(&self) -> Option<Duration> {
        Connection::write_blocked_for(self)
    }

    fn explain_end(&self) -> String {
        Connection::explain_end(self)
    }

    async fn call(
        &self,
        params: CallToolRequestParams,
        timeout: Duration,
        progress: Option<ProgressSink>,
    ) -> Result<CallToolResult, UpstreamError> {
        Connection::call(self, params, timeout, progress).await
    }

    async fn end(self: Arc<Self>) {
        Connection::end(self).await;
    }
}

/// Something a server told us outside a call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum UpstreamEvent {
    /// The server's full tool list: at connect, and again after `tools/list_changed`.
    Tools { server: String, tools: Vec<Tool> },
}

/// Events on their way to the engine. Only the newest tool list of a server is kept: a
/// server re-listed twice before the engine looked needs applying once.
#[derive(Debug, Default)]
pub(crate) struct Events {
    pending: Mutex<Vec<UpstreamEvent>>,
    ready: Notify,
}

impl Events {
    fn push(&self, event: UpstreamEvent) {
        {
            let mut pending = lock(&self.pending);
            let UpstreamEvent::Tools { server, .. } = &event;
            pending.retain(|UpstreamEvent::Tools { server: queued, .. }| queued != server);
            pending.push(event);
        }
        self.ready.notify_one();
    }

    /// Every event so far, oldest first.
    pub fn drain(&self) -> Vec<UpstreamEvent> {
        std::mem::take(&mut *lock(&self.pending))
    }

    /// Resolves once an event may be waiting.
    pub async fn ready(&self) {
        self.ready.notified().await;
    }
}

/// What a server is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerState {
    /// No session: not needed yet (tools known from a snapshot) or closed after idling.
    Idle,
    /// Starting; after a failed attempt, what that attempt failed with (shown meanwhile, so a
    /// server retrying for the whole startup budget is not "connecting" with no reason).
    Connecting {
        last_failure: Option<String>,
    },
    Ready,
    /// Its session is being closed.
    Draining,
    /// The last attempt failed; the next starts at `until` (or at the next call after it).
    Backoff {
        reason: String,
        until: Instant,
    },
    /// It cannot start as configured.
    Failed {
        reason: String,
    },
}

impl ServerState {
    /// The word shown in `list_mcp_servers`.
    #[must_use]
    pub fn word(&self) -> &'static str {
        match self {
            Self::Idle | Self::Draining => "idle",
            Self::Connecting { .. } => "connecting",
            Self::Ready => "connected",
            Self::Backoff { .. } | Self::Failed { .. } => "error",
        }
    }

    /// Why the state is `error`.
    #[must_use]
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Backoff { reason, .. } | Self::Failed { reason } => Some(reason),
            _ => None,
        }
    }

    /// Why the state is `error`, and when the next attempt is, if one is scheduled; while
    /// connecting again, why the last attempt failed.
    #[must_use]
    pub fn describe(&self) -> Option<String> {
        match self {
            Self::Backoff { reason, until } => {
                let wait = until.saturating_duration_since(Instant::now());
                Some(format!("{reason} (next attempt in {} s)", wait.as_secs().max(1)))
            }
            Self::Connecting {
                last_failure: Some(reason),
            } => Some(format!("trying again; the last attempt failed: {reason}")),
            _ => self.reason().map(str::to_owned),
        }
    }
}

/// Why a call through a handle failed: reaching the server, or the call itself.
#[derive(Debug)]
pub(crate) enum CallError {
    Connect(UpstreamError),
    Call(UpstreamError),
}

/// What every handle of one supervisor shares.
struct Shared<C> {
    connector: C,
    slots: Semaphore,
    /// Cancelled at close: attempts in flight give up and end their process.
    shutdown: CancellationToken,
    events: Arc<Events>,
}

struct Live<S> {
    session: Arc<S>,
    opened: Instant,
}

struct Inner<S> {
    live: Option<Live<S>>,
    /// Starts in a row that failed, or sessions in a row that ended before proving themselves.
    failures: u32,
    in_flight: usize,
    last_used: Instant,
    /// Bumped per attempt and per scheduled retry, so a stale timer or task does nothing.
    attempt: u64,
    /// A start has succeeded or failed before: later starts are restarts.
    settled_once: bool,
}

/// One server: its state, session and restart policy.
pub(crate) struct Handle<C: Connector> {
    pub spec: ServerSpec,
    idle_timeout: Duration,
    shared: Arc<Shared<C>>,
    state: watch::Sender<ServerState>,
    inner: Mutex<Inner<C::Session>>,
}

impl<C: Connector> std::fmt::Debug for Handle<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("server", &self.spec.name)
            .field("state", &*self.state.borrow())
            .finish_non_exhaustive()
    }
}

/// Every configured server.
pub(crate) struct Supervisor<C: Connector = Dial> {
    handles: Vec<Arc<Handle<C>>>,
    shared: Arc<Shared<C>>,
}

impl<C: Connector> std::fmt::Debug for Supervisor<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.handles).finish()
    }
}

impl<C: Connector> Supervisor<C> {
    /// Handles over `specs`, all idle; new tool lists go to `events`.
    pub fn new(specs: &[ServerSpec], connector: C, idle_default: Option<u64>, events: Arc<Events>) -> Self {
        let shared = Arc::new(Shared {
            connector,
            slots: Semaphore::new(CONNECT_SLOTS),
            shutdown: CancellationToken::new(),
            events,
        });
        let handles = specs
            .iter()
            .map(|spec| {
                Arc::new(Handle {
                    idle_timeout: Duration::from_millis(spec.idle_timeout_ms(idle_default)),
                    spec: spec.clone(),
                    shared: shared.clone(),
                    state: watch::channel(ServerState::Idle).0,
                    inner: Mutex::new(Inner {
                        live: None,
                        failures: 0,
                        in_flight: 0,
                        last_used: Instant::now(),
                        attempt: 0,
                        settled_once: false,
                    }),
                })
            })
            .collect();
        Self { handles, shared }
    }

    pub fn handles(&self) -> impl Iterator<Item = &Arc<Handle<C>>> {
        self.handles.iter()
    }

    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Arc<Handle<C>>> {
        self.handles.iter().find(|h| h.spec.name == name)
    }

    /// Cancelled when the supervisor closes.
    #[must_use]
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.shared.shutdown
    }

    /// Close every session and end every process group, concurrently; starts in flight give
    /// up and end theirs.
    pub async fn close(&self) {
        self.shared.shutdown.cancel();
        let mut ending = tokio::task::JoinSet::new();
        for handle in &self.handles {
            let live = {
                let mut inner = handle.lock();
                inner.attempt += 1;
                let live = inner.live.take();
                if !matches!(*handle.state.borrow(), ServerState::Connecting { .. }) {
                    handle.state.send_replace(ServerState::Idle);
                }
                live
            };
            if let Some(live) = live {
                ending.spawn(live.session.end());
            }
        }
        let deadline = Instant::now() + CLOSE_WAIT;
        for handle in &self.handles {
            let left = deadline.saturating_duration_since(Instant::now());
            handle.wait_settled(left).await;
        }
        while ending.join_next().await.is_some() {}
    }
}

/// Counts a call in flight; the session is not closed for idleness while one runs.
struct InFlight<'a, C: Connector>(&'a Handle<C>);

impl<C: Connector> Drop for InFlight<'_, C> {
    fn drop(&mut self) {
        let mut inner = self.0.lock();
        inner.in_flight -= 1;
        inner.last_used = Instant::now();
    }
}

impl<C: Connector> Handle<C> {
    fn lock(&self) -> MutexGuard<'_, Inner<C::Session>> {
        lock(&self.inner)
    }

    #[must_use]
    pub fn state(&self) -> ServerState {
        self.state.borrow().clone()
    }

    /// Start connecting in the background unless a session is open or starting.
    pub fn start(self: &Arc<Self>) {
        let mut inner = self.lock();
        if matches!(*self.state.borrow(), ServerState::Idle | ServerState::Draining) {
            self.begin_connect(&mut inner);
        }
    }

    /// Whether the server is in its very first start: what a search may wait for, since its
    /// tools are about to be known. Retries of a failing server never make anyone wait.
    #[must_use]
    pub fn is_first_start(&self) -> bool {
        let inner = self.lock();
        !inner.settled_once && matches!(*self.state.borrow(), ServerState::Connecting { .. })
    }

    /// Wait until the server is no longer connecting, or `limit` passes.
    pub async fn wait_settled(&self, limit: Duration) {
        let mut rx = self.state.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|s| !matches!(s, ServerState::Connecting { .. }))).await;
    }

    /// Call a tool, connecting first when needed, and apply the restart policy to what
    /// happens: a session found closed or ending mid-call, or wedged past the timeout.
    pub async fn call(
        self: &Arc<Self>,
        params: CallToolRequestParams,
        timeout: Duration,
        progress: Option<ProgressSink>,
    ) -> Result<CallToolResult, CallError> {
        self.lock().in_flight += 1;
        let _in_flight = InFlight(self);
        let session = self.session().await.map_err(CallError::Connect)?;
        let outcome = session.call(params, timeout, progress).await;
        match &outcome {
            Err(UpstreamError::Closed { detail }) => self.lost(&session, detail.clone()),
            Err(UpstreamError::Timeout { .. }) => {
                if let Some(blocked) = session
                    .write_blocked_for()
                    .filter(|b| *b >= WEDGED_AFTER.min(timeout / 2))
                {
                    let wedged = UpstreamError::Wedged { blocked };
                    tracing::warn!(server = %self.spec.name, %wedged, "restarting");
                    self.lost(&session, wedged.to_string());
                }
            }
            Ok(_) | Err(_) => {}
        }
        outcome.map_err(CallError::Call)
    }

    /// The live session, connecting (or reconnecting a closed one) first.
    async fn session(self: &Arc<Self>) -> Result<Arc<C::Session>, UpstreamError> {
        let mut changes = self.state.subscribe();
        loop {
            {
                let mut inner = self.lock();
                if self.shared.shutdown.is_cancelled() {
                    return Err(UpstreamError::ShuttingDown);
                }
                let state = changes.borrow_and_update().clone();
                match state {
                    ServerState::Ready => match inner.live.as_ref() {
                        Some(live) if !live.session.is_closed() => return Ok(live.session.clone()),
                        Some(live) => {
                            let (session, reason) = (live.session.clone(), live.session.explain_end());
                            tracing::warn!(server = %self.spec.name, %reason, "session ended");
                            self.lost_locked(&mut inner, &session, reason);
                            continue;
                        }
                        None => self.begin_connect(&mut inner),
                    },
                    ServerState::Connecting { .. } => {}
                    ServerState::Idle | ServerState::Draining => self.begin_connect(&mut inner),
                    ServerState::Backoff { reason, until } => {
                        let wait = until.saturating_duration_since(Instant::now());
                        if !wait.is_zero() {
                            return Err(UpstreamError::Unavailable { reason, retry_in: wait });
                        }
                        self.begin_connect(&mut inner);
                    }
                    ServerState::Failed { reason } => return Err(UpstreamError::Failed { reason }),
                }
                changes.borrow_and_update();
            }
            if changes.changed().await.is_err() {
                return Err(UpstreamError::ShuttingDown);
            }
        }
    }

    /// `session` ended (or is wedged): end it, and start again at once or after a backoff.
    fn lost(self: &Arc<Self>, session: &Arc<C::Session>, reason: String) {
        let mut inner = self.lock();
        self.lost_locked(&mut inner, session, reason);
    }

    fn lost_locked(self: &Arc<Self>, inner: &mut Inner<C::Session>, session: &Arc<C::Session>, reason: String) {
        let Some(live) = inner.live.take_if(|l| Arc::ptr_eq(&l.session, session)) else {
            return;
        };
        tokio::spawn(live.session.end());
        if self.shared.shutdown.is_cancelled() {
            return;
        }
        let wait = after_loss(&mut inner.failures, live.opened.elapsed(), jitter());
        if wait.is_zero() {
            tracing::info!(server = %self.spec.name, "session lost; starting again");
            self.begin_connect(inner);
        } else {
            tracing::warn!(server = %self.spec.name, retry_in_ms = wait.as_millis(), "session lost again soon after starting; backing off");
            self.schedule_retry(inner, reason, wait);
        }
    }

    /// Enter `connecting` and start an attempt in its own task.
    fn begin_connect(self: &Arc<Self>, inner: &mut Inner<C::Session>) {
        if self.shared.shutdown.is_cancelled() {
            return;
        }
        inner.attempt += 1;
        let last_failure = match &*self.state.borrow() {
            ServerState::Backoff { reason, .. } => Some(reason.clone()),
            ServerState::Connecting { last_failure } => last_failure.clone(),
            _ => None,
        };
        self.state.send_replace(ServerState::Connecting { last_failure });
        tokio::spawn(self.clone().connect(inner.attempt));
    }

    /// Enter `backoff` and start again after `wait` unless something else starts first.
    fn schedule_retry(self: &Arc<Self>, inner: &mut Inner<C::Session>, reason: String, wait: Duration) {
        inner.attempt += 1;
        let (attempt, until) = (inner.attempt, Instant::now() + wait);
        self.state.send_replace(ServerState::Backoff { reason, until });
        let (handle, shutdown) = (Arc::downgrade(self), self.shared.shutdown.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep_until(until) => {}
                () = shutdown.cancelled() => return,
            }
            let Some(handle) = handle.upgrade() else { return };
            let mut inner = handle.lock();
            if inner.attempt == attempt {
                handle.begin_connect(&mut inner);
            }
        });
    }

    /// One attempt: open a session within a connect slot, then record what came of it.
    async fn connect(self: Arc<Self>, attempt: u64) {
        let shared = &self.shared;
        let (events, server) = (shared.events.clone(), self.spec.name.clone());
        let on_tools: ToolsSink = Arc::new(move |tools| {
            events.push(UpstreamEvent::Tools {
                server: server.clone(),
                tools,
            });
        });
        let outcome = with_slot(
            &shared.slots,
            shared.connector.open(&self.spec, &shared.shutdown, on_tools),
        )
        .await;
        let mut inner = self.lock();
        inner.settled_once = true;
        let current = inner.attempt == attempt && !shared.shutdown.is_cancelled();
        match outcome {
            Ok((session, _)) if !current => {
                tokio::spawn(Arc::new(session).end());
                if shared.shutdown.is_cancelled() {
                    self.state.send_replace(ServerState::Idle);
                }
            }
            Ok((session, tools)) => {
                tracing::info!(server = %self.spec.name, tools = tools.len(), "connected");
                let session = Arc::new(session);
                inner.live = Some(Live {
                    session: session.clone(),
                    opened: Instant::now(),
                });
                inner.last_used = Instant::now();
                // Queued before `ready`: whoever sees the server ready finds its tools queued.
                shared.events.push(UpstreamEvent::Tools {
                    server: self.spec.name.clone(),
                    tools,
                });
                self.state.send_replace(ServerState::Ready);
                tokio::spawn(close_when_idle(Arc::downgrade(&self), Arc::downgrade(&session)));
            }
            Err(_) if !current => {
                if shared.shutdown.is_cancelled() {
                    self.state.send_replace(ServerState::Idle);
                }
            }
            Err(error) => {
                inner.failures += 1;
                let reason = error.to_string();
                if error.is_retriable() {
                    let wait = backoff(inner.failures, jitter());
                    tracing::warn!(server = %self.spec.name, %reason, retry_in_ms = wait.as_millis(), "cannot connect");
                    self.schedule_retry(&mut inner, reason, wait);
                } else {
                    tracing::warn!(server = %self.spec.name, %reason, "cannot start as configured");
                    self.state.send_replace(ServerState::Failed { reason });
                }
            }
        }
    }
}

/// Run `work` holding a connect slot for at most [`SLOT_BUDGET`], then without one.
async fn with_slot<F: Future>(slots: &Semaphore, work: F) -> F::Output {
    let permit = slots
        .acquire()
        .await
        .expect("the supervisor never closes its semaphore");
    let mut work = std::pin::pin!(work);
    tokio::select! {
        output = &mut work => return output,
        () = tokio::time::sleep(SLOT_BUDGET) => {}
    }
    drop(permit);
    work.await
}

/// Close the session once nothing has used it for the server's idle timeout.
async fn close_when_idle<C: Connector>(handle: Weak<Handle<C>>, session: Weak<C::Session>) {
    loop {
        let (wake, shutdown, idle_timeout) = {
            let Some(handle) = handle.upgrade() else { return };
            let inner = handle.lock();
            if !holds(&inner, &session) {
                return;
            }
            let wake = if inner.in_flight == 0 {
                inner.last_used + handle.idle_timeout
            } else {
                Instant::now() + handle.idle_timeout
            };
            (wake, handle.shared.shutdown.clone(), handle.idle_timeout)
        };
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {}
            () = shutdown.cancelled() => return,
        }
        let Some(handle) = handle.upgrade() else { return };
        let live = {
            let mut inner = handle.lock();
            if !holds(&inner, &session) {
                return;
            }
            if inner.in_flight > 0 || inner.last_used.elapsed() < idle_timeout {
                continue;
            }
            let live = inner.live.take().expect("held: checked above");
            if live.opened.elapsed() >= STABLE_SESSION {
                inner.failures = 0;
            }
            handle.state.send_replace(ServerState::Draining);
            live
        };
        tracing::info!(server = %handle.spec.name, idle_ms = idle_timeout.as_millis(), "closing idle session");
        live.session.end().await;
        let _inner = handle.lock();
        handle.state.send_if_modified(|state| {
            let draining = matches!(state, ServerState::Draining);
            if draining {
                *state = ServerState::Idle;
            }
            draining
        });
        return;
    }
}

fn holds<S>(inner: &Inner<S>, session: &Weak<S>) -> bool {
    match (inner.live.as_ref(), session.upgrade()) {
        (Some(live), Some(session)) => Arc::ptr_eq(&live.session, &session),
        _ => false,
    }
}

/// The wait before attempt `failures + 1`: 1 s, 2 s, 4 s … up to a minute, each scaled by
/// 0.8–1.2 (`unit` in 0..1) so servers that failed together do not retry in step.
fn backoff(failures: u32, unit: f64) -> Duration {
    let base = BACKOFF_START
        .saturating_mul(1 << failures.saturating_sub(1).min(6))
        .min(BACKOFF_MAX);
    base.mul_f64(0.8 + 0.4 * unit.clamp(0.0, 1.0)).min(BACKOFF_MAX)
}

/// The wait before starting a server whose session ended. A session that lasted
/// [`STABLE_SESSION`] restarts at once; one that ended sooner counts as a failed start, so a
/// server that dies right after its handshake backs off instead of being respawned on every
/// call. The first such end still restarts at once (a one-off crash).
fn after_loss(failures: &mut u32, lived: Duration, unit: f64) -> Duration {
    if lived >= STABLE_SESSION {
        *failures = 0;
    }
    *failures += 1;
    if *failures == 1 {
        Duration::ZERO
    } else {
        backoff(*failures - 1, unit)
    }
}

/// A number in 0..1 that differs per call (std's per-instance random hash keys).
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let bits = std::collections::hash_map::RandomState::new().build_hasher().finish();
    #[expect(clippy::cast_precision_loss, reason = "any 0..1 spread will do")]
    let unit = (bits % 10_000) as f64 / 10_000.0;
    unit
}

#[cfg(test)]
mod tests;
