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
//! A reload reconciles the pool with a new list of specs ([`Supervisor::reconcile`]): a
//! handle whose launch spec did not change is taken over as it is (process, session and
//! all); the others are retired — no new session, and once their calls in flight end, the
//! session is closed and the process tree ended.
//!
//! Sessions come from a [`Connector`], so the state machine is tested with a scripted one
//! under paused time.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ClientRequest, ServerCapabilities, ServerResult, Tool};
use tokio::sync::{watch, Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::{ProgressSink, ToolsSink};
use super::connection::Connection;
use super::error::UpstreamError;
use super::listing::{Listing, ListingNotes};
use super::lock;
use crate::config::ServerSpec;

mod users;
pub(crate) use users::is_bearer_token;

/// How many starts may hold a slot at once. With [`SLOT_BUDGET`] this paces starts (at most
/// about 16 new ones a second) rather than capping how many run: a slow `npx` start goes on
/// without its slot, so with hundreds of servers dozens may be starting together.
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
/// How long a session that ended by itself is given to finish its stderr before the reason
/// for its end is taken.
const LAST_WORDS: Duration = Duration::from_millis(30);
/// How long closing waits for starts in flight to end their processes.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// A live session with a server, as the supervisor needs it.
pub(crate) trait Session: Send + Sync + 'static {
    fn is_closed(&self) -> bool;
    /// Resolves once the session has ended (the process exited, the transport closed). Owns
    /// what it needs: a watcher waiting on it must not keep the session alive.
    fn ended(&self) -> impl Future<Output = ()> + Send + 'static;
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
    /// What the server declared in its handshake (prompts, resources, completions…).
    fn capabilities(&self) -> Option<ServerCapabilities>;
    /// Send one request other than a tool call (a prompt, resource or completion request)
    /// and return the server's answer, scrubbed of registered secrets.
    fn request(
        &self,
        request: ClientRequest,
        timeout: Duration,
    ) -> impl Future<Output = Result<ServerResult, UpstreamError>> + Send;
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
    ) -> impl Future<Output = Result<(Self::Session, Listing), UpstreamError>> + Send;
}

/// The real connector: stdio processes and remote servers.
#[derive(Debug)]
pub(crate) struct Dial {
    /// Where a relative `cwd` resolves (the config file's folder). A reload from another
    /// folder changes it; handles with a `cwd` are then restarted, not kept.
    base_dir: Mutex<Option<PathBuf>>,
    /// The store replicas share, when one is configured: remote servers' sign-ins live there.
    shared: Option<crate::store::Store>,
}

impl Dial {
    pub fn new(base_dir: Option<PathBuf>, shared: Option<crate::store::Store>) -> Self {
        Self {
            base_dir: Mutex::new(base_dir),
            shared,
        }
    }

    pub fn base_dir(&self) -> Option<PathBuf> {
        lock(&self.base_dir).clone()
    }

    pub fn set_base_dir(&self, base_dir: Option<PathBuf>) {
        *lock(&self.base_dir) = base_dir;
    }
}

impl Connector for Dial {
    type Session = Connection;

    async fn open(
        &self,
        spec: &ServerSpec,
        shutdown: &CancellationToken,
        on_tools: ToolsSink,
    ) -> Result<(Connection, Listing), UpstreamError> {
        let base_dir = self.base_dir();
        // Boxed: opening covers every transport and is large; the task's future stays small.
        Box::pin(Connection::open(
            spec,
            base_dir.as_deref(),
            self.shared.as_ref(),
            shutdown,
            on_tools,
        ))
        .await
    }
}

impl Session for Connection {
    fn is_closed(&self) -> bool {
        Connection::is_closed(self)
    }

    fn ended(&self) -> impl Future<Output = ()> + Send + 'static {
        Connection::ended(self)
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

    fn capabilities(&self) -> Option<ServerCapabilities> {
        Connection::capabilities(self)
    }

    async fn request(&self, request: ClientRequest, timeout: Duration) -> Result<ServerResult, UpstreamError> {
        Connection::request(self, request, timeout).await
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

/// Why a server is not ready, told apart as the faces render it: a person must sign in
/// (`oauth`), or something else failed. Either way the text says what and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Trouble {
    NeedsSignIn(String),
    Error(String),
}

impl Trouble {
    /// What `error` means for the server's status.
    #[must_use]
    pub fn of(error: &UpstreamError) -> Self {
        match error {
            UpstreamError::NeedsSignIn { detail } => Self::NeedsSignIn(detail.clone()),
            other => Self::Error(other.to_string()),
        }
    }

    #[must_use]
    pub fn text(&self) -> &str {
        match self {
            Self::NeedsSignIn(text) | Self::Error(text) => text,
        }
    }

    #[must_use]
    pub fn needs_sign_in(&self) -> bool {
        matches!(self, Self::NeedsSignIn(_))
    }

    /// The error a call gets while the server is in this trouble and its next attempt is
    /// `retry_in` away.
    #[must_use]
    pub fn unavailable(self, retry_in: Duration) -> UpstreamError {
        match self {
            Self::NeedsSignIn(detail) => UpstreamError::NeedsSignIn { detail },
            Self::Error(reason) => UpstreamError::Unavailable { reason, retry_in },
        }
    }
}

impl std::fmt::Display for Trouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
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
        last_failure: Option<Trouble>,
    },
    Ready,
    /// Its session is being closed.
    Draining,
    /// The last attempt failed; the next starts at `until` (or at the next call after it).
    Backoff {
        reason: Trouble,
        until: Instant,
    },
    /// It cannot start as configured.
    Failed {
        reason: String,
    },
}

impl ServerState {
    /// Whether a person must sign in before the server can be used, whether or not an
    /// attempt is under way meanwhile.
    #[must_use]
    pub fn needs_sign_in(&self) -> bool {
        match self {
            Self::Connecting {
                last_failure: Some(trouble),
            }
            | Self::Backoff { reason: trouble, .. } => trouble.needs_sign_in(),
            _ => false,
        }
    }

    /// Why the server is not ready, without the retry the supervisor has scheduled or is
    /// making (what a run that exits before it shows): while connecting again, that the last
    /// attempt failed, and why.
    #[must_use]
    pub fn reason(&self) -> Option<String> {
        match self {
            Self::Backoff { reason, .. } => Some(reason.text().to_owned()),
            Self::Connecting {
                last_failure: Some(reason),
            } => Some(format!("the last attempt failed: {reason}")),
            Self::Failed { reason } => Some(reason.clone()),
            _ => None,
        }
    }

    /// Why the server is not ready, and when the next attempt is, if one is scheduled; while
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
            Self::Failed { reason } => Some(reason.clone()),
            _ => None,
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
    /// Handles a reload left out, until their calls in flight end and they close.
    retiring: Mutex<tokio::task::JoinSet<()>>,
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
    /// The spec it was launched with (a reload that keeps the handle keeps its launch spec;
    /// the other settings are the engine's to read from its config).
    pub spec: ServerSpec,
    /// Milliseconds; a reload may change it without a restart.
    idle_timeout_ms: AtomicU64,
    shared: Arc<Shared<C>>,
    /// Cancelled when the supervisor closes or the handle's retirement ends: attempts in
    /// flight give up, timers stop.
    stop: CancellationToken,
    /// Cancelled when a reload removed or replaced the server: no new session starts and its
    /// tool lists are no longer reported.
    retiring: CancellationToken,
    /// Woken when the last call in flight ends (what a retirement waits for).
    calls_done: Notify,
    state: watch::Sender<ServerState>,
    /// What the newest listing of its tools left out (dropped tools, a cut at the cap).
    left_out: Arc<Mutex<ListingNotes>>,
    inner: Mutex<Inner<C::Session>>,
    /// A per-user server's connections, one per caller (`users`); this handle itself never
    /// connects then.
    users: Option<users::Users<C>>,
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

/// What [`Supervisor::reconcile`] did, by server name, each in config order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PoolChanges {
    /// Same launch spec: the handle, its session and process carried over.
    pub kept: Vec<String>,
    /// Launch spec changed: a new handle; the old one is retired.
    pub restarted: Vec<String>,
    /// No longer configured: retired.
    pub stopped: Vec<String>,
    pub added: Vec<String>,
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
            retiring: Mutex::default(),
        });
        let handles = specs
            .iter()
            .map(|spec| Handle::new(spec, idle_default, &shared))
            .collect();
        Self { handles, shared }
    }

    /// A supervisor over `specs` sharing this one's connector, slots and events: a handle
    /// whose server `same_launch(old, new)` says is launched the same way is taken over as
    /// it is (its idle timeout updated, and a server that failed as configured tried again);
    /// the rest get new handles. Handles left out are retired in the background (see
    /// [`Handle::retire`]); [`Supervisor::close`] of either supervisor ends them at once.
    pub fn reconcile(
        &self,
        specs: &[ServerSpec],
        idle_default: Option<u64>,
        same_launch: impl Fn(&ServerSpec, &ServerSpec) -> bool,
    ) -> (Self, PoolChanges) {
        let mut changes = PoolChanges::default();
        let mut taken = std::collections::HashSet::new();
        let handles: Vec<_> = specs
            .iter()
            .map(|spec| match self.get(&spec.name) {
                Some(old) if same_launch(&old.spec, spec) => {
                    taken.insert(spec.name.as_str());
                    old.idle_timeout_ms
                        .store(spec.idle_timeout_ms(idle_default), Ordering::Relaxed);
                    old.revive();
                    changes.kept.push(spec.name.clone());
                    old.clone()
                }
                old => {
                    let list = if old.is_some() {
                        &mut changes.restarted
                    } else {
                        &mut changes.added
                    };
                    list.push(spec.name.clone());
                    Handle::new(spec, idle_default, &self.shared)
                }
            })
            .collect();
        let mut retiring = lock(&self.shared.retiring);
        while retiring.try_join_next().is_some() {}
        for old in self.handles.iter().filter(|h| !taken.contains(h.spec.name.as_str())) {
            if !specs.iter().any(|s| s.name == old.spec.name) {
                changes.stopped.push(old.spec.name.clone());
            }
            // A per-user server's connections go with it.
            for user in old.users.iter().flat_map(users::Users::drain) {
                retiring.spawn(user.retire());
            }
            retiring.spawn(old.clone().retire());
        }
        drop(retiring);
        let next = Self {
            handles,
            shared: self.shared.clone(),
        };
        (next, changes)
    }

    /// The connector every handle opens sessions with.
    pub fn connector(&self) -> &C {
        &self.shared.connector
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
    /// up and end theirs, and handles still retiring end theirs at once.
    pub async fn close(&self) {
        self.shared.shutdown.cancel();
        let mut retiring = std::mem::take(&mut *lock(&self.shared.retiring));
        let mut ending = tokio::task::JoinSet::new();
        let users: Vec<_> = self
            .handles
            .iter()
            .filter_map(|h| h.users.as_ref())
            .flat_map(users::Users::drain)
            .collect();
        for handle in self.handles.iter().chain(&users) {
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
        for handle in self.handles.iter().chain(&users) {
            let left = deadline.saturating_duration_since(Instant::now());
            handle.wait_settled(left).await;
        }
        while ending.join_next().await.is_some() {}
        while retiring.join_next().await.is_some() {}
    }
}

/// Counts a call in flight; the session is not closed for idleness while one runs.
struct InFlight<'a, C: Connector>(&'a Handle<C>);

impl<C: Connector> Drop for InFlight<'_, C> {
    fn drop(&mut self) {
        let mut inner = self.0.lock();
        inner.in_flight -= 1;
        inner.last_used = Instant::now();
        if inner.in_flight == 0 {
            self.0.calls_done.notify_waiters();
        }
    }
}

impl<C: Connector> Handle<C> {
    fn new(spec: &ServerSpec, idle_default: Option<u64>, shared: &Arc<Shared<C>>) -> Arc<Self> {
        Arc::new(Self {
            idle_timeout_ms: AtomicU64::new(spec.idle_timeout_ms(idle_default)),
            spec: spec.clone(),
            shared: shared.clone(),
            stop: shared.shutdown.child_token(),
            retiring: CancellationToken::new(),
            calls_done: Notify::new(),
            state: watch::channel(ServerState::Idle).0,
            left_out: Arc::default(),
            inner: Mutex::new(Inner {
                live: None,
                failures: 0,
                in_flight: 0,
                last_used: Instant::now(),
                attempt: 0,
                settled_once: false,
            }),
            users: spec.is_per_user().then(|| {
                users::Users::new(
                    spec.connection
                        .oauth
                        .as_ref()
                        .map_or(1, crate::config::OAuthSpec::max_user_connections),
                )
            }),
        })
    }

    /// Whether this handle stands for a per-user server, whose calls go through
    /// [`Handle::for_caller`].
    #[must_use]
    pub fn is_per_user(&self) -> bool {
        self.users.is_some()
    }

    /// The connection of the caller `identity` to this per-user server, opened with `token`
    /// (see `users`); `None` when this is not a per-user server or `token` is not a bearer
    /// token (RFC 6750). Not started: a call connects it.
    #[must_use]
    pub fn for_caller(self: &Arc<Self>, identity: &str, token: &str) -> Option<Arc<Self>> {
        let users = self.users.as_ref()?;
        if !users::is_bearer_token(token) {
            return None;
        }
        let (handle, retired) = users.get_or_make(identity, token, || {
            let spec = users::caller_spec(&self.spec, token);
            Self::new(&spec, Some(self.idle_timeout_ms.load(Ordering::Relaxed)), &self.shared)
        });
        if !retired.is_empty() {
            let mut retiring = lock(&self.shared.retiring);
            for old in retired {
                retiring.spawn(old.retire());
            }
        }
        Some(handle)
    }

    /// The state of the caller `identity`'s own connection to this per-user server, if they
    /// have one (`None` too when this is not a per-user server).
    #[must_use]
    pub fn caller_state(&self, identity: &str) -> Option<ServerState> {
        self.users.as_ref()?.get(identity).map(|handle| handle.state())
    }

    fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms.load(Ordering::Relaxed))
    }

    /// A server that could not start as configured gets another chance when a reload keeps it
    /// (what it needed, such as a variable or a file, may be there now).
    fn revive(&self) {
        let mut inner = self.lock();
        if matches!(*self.state.borrow(), ServerState::Failed { .. }) {
            inner.failures = 0;
            self.state.send_replace(ServerState::Idle);
        }
    }

    /// Leave the pool without dropping work: no new session starts and no tool list is
    /// reported any more; once the calls in flight end (or the supervisor closes), the session
    /// is closed and its process tree ended.
    async fn retire(self: Arc<Self>) {
        self.retiring.cancel();
        loop {
            let done = self.calls_done.notified();
            let mut done = std::pin::pin!(done);
            done.as_mut().enable();
            if self.lock().in_flight == 0 {
                break;
            }
            tokio::select! {
                () = done => {}
                () = self.stop.cancelled() => break,
            }
        }
        self.stop.cancel();
        let live = {
            let mut inner = self.lock();
            inner.attempt += 1;
            self.state.send_replace(ServerState::Idle);
            inner.live.take()
        };
        if let Some(live) = live {
            tracing::info!(server = %self.spec.name, "closing a server the reload removed or replaced");
            live.session.end().await;
        }
    }

    /// Start an attempt, unless the server was retired: then say so.
    fn connect_unless_retired(self: &Arc<Self>, inner: &mut Inner<C::Session>) -> Result<(), UpstreamError> {
        if self.retiring.is_cancelled() {
            return Err(UpstreamError::Failed {
                reason: "the server was removed or changed by a config reload".to_owned(),
            });
        }
        self.begin_connect(inner);
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Inner<C::Session>> {
        lock(&self.inner)
    }

    #[must_use]
    pub fn state(&self) -> ServerState {
        self.state.borrow().clone()
    }

    /// Which attempt the state is of: a server ready under another number than before is
    /// ready in a new session (one that knows nothing of the last one's subscriptions).
    #[must_use]
    pub fn attempt(&self) -> u64 {
        self.lock().attempt
    }

    /// Told every change of [`Handle::state`] (a session that ended and a new one that is
    /// ready, among others).
    #[must_use]
    pub fn watch_state(&self) -> watch::Receiver<ServerState> {
        self.state.subscribe()
    }

    /// What the newest listing of the server's tools (in this process) left out.
    #[must_use]
    pub fn left_out(&self) -> ListingNotes {
        lock(&self.left_out).clone()
    }

    /// Start connecting in the background unless a session is open or starting.
    pub fn start(self: &Arc<Self>) {
        if self.is_per_user() {
            return;
        }
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

    /// A call needs this server, which a background connect left waiting for a sign-in it did
    /// not start (`oauth`): connect now — the call's [`super::oauth::sign_in_wanted`] guard
    /// lets this attempt open the browser — and wait up to `limit` for the outcome. A connect
    /// under way is waited for first. Does nothing in any other state, or while a sign-in is
    /// already open.
    pub async fn sign_in_for_call(self: &Arc<Self>, limit: Duration) {
        // A background retry may be under way: it settles at once (in `needs sign-in` again,
        // or signed in now that this call wants the server), and only then is it known
        // whether this call must connect. Not waiting, the call found no tools yet and
        // answered "still starting".
        if matches!(*self.state.borrow(), ServerState::Connecting { .. }) {
            self.wait_settled(limit).await;
        }
        {
            let mut inner = self.lock();
            let needs_sign_in =
                matches!(&*self.state.borrow(), ServerState::Backoff { reason, .. } if reason.needs_sign_in());
            if !needs_sign_in || super::oauth::is_waiting(&self.spec.name) {
                return;
            }
            self.begin_connect(&mut inner);
        }
        self.wait_settled(limit).await;
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
        // Someone needs this server now: a sign-in it asks for may open the browser.
        let _sign_in = super::oauth::sign_in_wanted(&self.spec.name);
        // The call's timeout covers connecting too: a caller who asked for an answer within
        // 5 s must not wait out a 30 s startup first. The connect goes on in its own task.
        let deadline = tokio::time::Instant::now() + timeout;
        let session = tokio::time::timeout_at(deadline, self.session())
            .await
            .map_err(|_| {
                CallError::Connect(UpstreamError::Timeout {
                    what: "did not connect",
                    limit: timeout,
                })
            })?
            .map_err(CallError::Connect)?;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let outcome = session.call(params, left, progress).await;
        match &outcome {
            // A sign-in nobody has done yet (`oauth`): the server is out of reach until then.
            Err(error @ UpstreamError::NeedsSignIn { .. }) => {
                self.lost(&session, Trouble::of(error));
                return outcome.map_err(CallError::Connect);
            }
            Err(UpstreamError::Closed { detail }) => self.lost(&session, Trouble::Error(detail.clone())),
            Err(UpstreamError::Timeout { .. }) => {
                if let Some(blocked) = session
                    .write_blocked_for()
                    .filter(|b| *b >= WEDGED_AFTER.min(timeout / 2))
                {
                    let wedged = UpstreamError::Wedged { blocked };
                    tracing::warn!(server = %self.spec.name, %wedged, "restarting");
                    self.lost(&session, Trouble::of(&wedged));
                }
            }
            Ok(_) | Err(_) => {}
        }
        outcome.map_err(CallError::Call)
    }

    /// Send one request other than a tool call (prompts, resources, completion), connecting
    /// first when needed; `timeout` covers connecting too. Returns the answer and what the
    /// server declared, so the caller can tell "not offered" from an empty list.
    pub async fn request(
        self: &Arc<Self>,
        request: ClientRequest,
        timeout: Duration,
    ) -> Result<(ServerResult, Option<ServerCapabilities>), UpstreamError> {
        self.lock().in_flight += 1;
        let _in_flight = InFlight(self);
        let deadline = tokio::time::Instant::now() + timeout;
        let session =
            tokio::time::timeout_at(deadline, self.session())
                .await
                .map_err(|_| UpstreamError::Timeout {
                    what: "did not connect",
                    limit: timeout,
                })??;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let outcome = session.request(request, left).await;
        match &outcome {
            Err(UpstreamError::Closed { detail }) => self.lost(&session, Trouble::Error(detail.clone())),
            Err(error @ UpstreamError::NeedsSignIn { .. }) => self.lost(&session, Trouble::of(error)),
            _ => {}
        }
        Ok((outcome?, session.capabilities()))
    }

    /// What the live session's server declared, without connecting; `None` when no session
    /// is open.
    #[must_use]
    pub fn live_capabilities(&self) -> Option<ServerCapabilities> {
        let inner = self.lock();
        inner
            .live
            .as_ref()
            .filter(|live| !live.session.is_closed())
            .and_then(|live| live.session.capabilities())
    }

    /// The live session, connecting (or reconnecting a closed one) first.
    async fn session(self: &Arc<Self>) -> Result<Arc<C::Session>, UpstreamError> {
        if self.is_per_user() {
            return Err(UpstreamError::Failed {
                reason: "each caller connects to this server with their own sign-in, through their own connection"
                    .to_owned(),
            });
        }
        let mut changes = self.state.subscribe();
        loop {
            {
                let mut inner = self.lock();
                if self.stop.is_cancelled() && !self.retiring.is_cancelled() {
                    return Err(UpstreamError::ShuttingDown);
                }
                let state = changes.borrow_and_update().clone();
                match state {
                    ServerState::Ready => match inner.live.as_ref() {
                        Some(live) if !live.session.is_closed() => return Ok(live.session.clone()),
                        Some(live) => {
                            let (session, reason) = (live.session.clone(), live.session.explain_end());
                            tracing::warn!(server = %self.spec.name, %reason, "session ended");
                            self.lost_locked(&mut inner, &session, Trouble::Error(reason));
                            continue;
                        }
                        None => self.connect_unless_retired(&mut inner)?,
                    },
                    ServerState::Connecting { .. } => {}
                    ServerState::Idle | ServerState::Draining => self.connect_unless_retired(&mut inner)?,
                    ServerState::Backoff { reason, until } => {
                        let wait = until.saturating_duration_since(Instant::now());
                        // A background connect found a sign-in needed and opened nothing; this
                        // call is who it was for, so it starts one now (unless one is open).
                        let sign_in_now = reason.needs_sign_in() && !super::oauth::is_waiting(&self.spec.name);
                        if !wait.is_zero() && !sign_in_now {
                            return Err(reason.unavailable(wait));
                        }
                        self.connect_unless_retired(&mut inner)?;
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
    fn lost(self: &Arc<Self>, session: &Arc<C::Session>, reason: Trouble) {
        let mut inner = self.lock();
        self.lost_locked(&mut inner, session, reason);
    }

    fn lost_locked(self: &Arc<Self>, inner: &mut Inner<C::Session>, session: &Arc<C::Session>, reason: Trouble) {
        let Some(live) = inner.live.take_if(|l| Arc::ptr_eq(&l.session, session)) else {
            return;
        };
        tokio::spawn(live.session.end());
        if self.stop.is_cancelled() {
            return;
        }
        let wait = after_loss(&mut inner.failures, live.opened.elapsed(), jitter());
        if wait.is_zero() {
            tracing::info!(server = %self.spec.name, "session lost; starting again");
            // Shown while it starts again: why the last session ended.
            self.state.send_replace(ServerState::Connecting {
                last_failure: Some(reason),
            });
            self.begin_connect(inner);
        } else {
            tracing::warn!(server = %self.spec.name, retry_in_ms = wait.as_millis(), "session lost again soon after starting; backing off");
            self.schedule_retry(inner, reason, wait);
        }
    }

    /// Enter `connecting` and start an attempt in its own task.
    fn begin_connect(self: &Arc<Self>, inner: &mut Inner<C::Session>) {
        if self.stop.is_cancelled() || self.retiring.is_cancelled() {
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
    fn schedule_retry(self: &Arc<Self>, inner: &mut Inner<C::Session>, reason: Trouble, wait: Duration) {
        inner.attempt += 1;
        let (attempt, until) = (inner.attempt, Instant::now() + wait);
        self.state.send_replace(ServerState::Backoff { reason, until });
        let (handle, shutdown) = (Arc::downgrade(self), self.stop.clone());
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
        let (retiring, left_out) = (self.retiring.clone(), self.left_out.clone());
        let on_tools: ToolsSink = Arc::new(move |listing: Listing| {
            // A retired server's lists would land on the server that replaced it.
            if retiring.is_cancelled() {
                return;
            }
            *lock(&left_out) = listing.notes;
            events.push(UpstreamEvent::Tools {
                server: server.clone(),
                tools: listing.tools,
            });
        });
        let outcome = with_slot(
            &shared.slots,
            &self.stop,
            shared.connector.open(&self.spec, &self.stop, on_tools),
        )
        .await;
        let mut inner = self.lock();
        inner.settled_once = true;
        let current = inner.attempt == attempt && !self.stop.is_cancelled();
        match outcome {
            Ok((session, _)) if !current => {
                tokio::spawn(Arc::new(session).end());
                if self.stop.is_cancelled() {
                    self.state.send_replace(ServerState::Idle);
                }
            }
            Ok((session, Listing { tools, notes })) => {
                tracing::info!(server = %self.spec.name, tools = tools.len(), "connected");
                *lock(&self.left_out) = notes;
                let session = Arc::new(session);
                inner.live = Some(Live {
                    session: session.clone(),
                    opened: Instant::now(),
                });
                inner.last_used = Instant::now();
                // Queued before `ready`: whoever sees the server ready finds its tools queued.
                if !self.retiring.is_cancelled() {
                    shared.events.push(UpstreamEvent::Tools {
                        server: self.spec.name.clone(),
                        tools,
                    });
                }
                self.state.send_replace(ServerState::Ready);
                let ended = session.ended();
                tokio::spawn(watch_session(Arc::downgrade(&self), Arc::downgrade(&session), ended));
            }
            Err(_) if !current => {
                if self.stop.is_cancelled() {
                    self.state.send_replace(ServerState::Idle);
                }
            }
            Err(error) => {
                inner.failures += 1;
                if error.is_retriable() {
                    let wait = backoff(inner.failures, jitter());
                    tracing::warn!(server = %self.spec.name, reason = %error, retry_in_ms = wait.as_millis(), "cannot connect");
                    self.schedule_retry(&mut inner, Trouble::of(&error), wait);
                } else {
                    tracing::warn!(server = %self.spec.name, reason = %error, "cannot start as configured");
                    self.state.send_replace(ServerState::Failed {
                        reason: error.to_string(),
                    });
                }
            }
        }
    }
}

/// Run `work` holding a connect slot for at most [`SLOT_BUDGET`], then without one. An
/// attempt still queued for a slot when its server stops (shutdown, reload) never starts (`work` is not
/// polled, so no process is spawned only to be ended).
async fn with_slot<T>(
    slots: &Semaphore,
    shutdown: &CancellationToken,
    work: impl Future<Output = Result<T, UpstreamError>>,
) -> Result<T, UpstreamError> {
    let permit = tokio::select! {
        biased;
        () = shutdown.cancelled() => return Err(UpstreamError::ShuttingDown),
        permit = slots.acquire() => permit.expect("the supervisor never closes its semaphore"),
    };
    let mut work = std::pin::pin!(work);
    tokio::select! {
        output = &mut work => return output,
        () = tokio::time::sleep(SLOT_BUDGET) => {}
    }
    drop(permit);
    work.await
}

/// Watch a live session: close it once nothing has used it for the server's idle timeout,
/// and when it ends by itself (a crash while idle), apply the restart policy at once, so the
/// status says what happened without waiting for the next call.
async fn watch_session<C: Connector>(
    handle: Weak<Handle<C>>,
    session: Weak<C::Session>,
    ended: impl Future<Output = ()> + Send,
) {
    let mut ended = std::pin::pin!(ended);
    loop {
        let (wake, shutdown, idle_timeout) = {
            let Some(handle) = handle.upgrade() else { return };
            let inner = handle.lock();
            if !holds(&inner, &session) {
                return;
            }
            let idle_timeout = handle.idle_timeout();
            let wake = if inner.in_flight == 0 {
                inner.last_used + idle_timeout
            } else {
                Instant::now() + idle_timeout
            };
            (wake, handle.stop.clone(), idle_timeout)
        };
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {}
            () = &mut ended => {
                // Let the stderr reader record the process's last words for the reason.
                tokio::time::sleep(LAST_WORDS).await;
                return session_ended(&handle, &session);
            }
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

/// `session` ended by itself: unless a call already noticed, it is lost now.
fn session_ended<C: Connector>(handle: &Weak<Handle<C>>, session: &Weak<C::Session>) {
    let (Some(handle), Some(live)) = (handle.upgrade(), session.upgrade()) else {
        return;
    };
    let mut inner = handle.lock();
    if holds(&inner, session) {
        let reason = live.explain_end();
        tracing::warn!(server = %handle.spec.name, %reason, "session ended");
        handle.lost_locked(&mut inner, &live, Trouble::Error(reason));
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
