//! One rmcp client session with one downstream server: open (spawn or dial, handshake, first
//! full `tools/list`), call with progress routing and cancellation, re-list on
//! `tools/list_changed` (coalesced), close.
//!
//! The process is spawned by `stdio` rather than by rmcp's `TokioChildProcess` so that the
//! gateway owns what matters for dependability: the process group, the exit status, the
//! stderr tail, a tap on stdout and a watch on stdin. Remote servers are dialled by `remote`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Url;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, InputRequiredResult, ProgressToken,
    ProtocolVersion, ServerCapabilities, ServerResult, Tool,
};
use rmcp::service::{PeerRequestOptions, RunningService, ServiceError};
use rmcp::RoleClient;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::client::{
    handshake, service_error_text, sign_in_needed, transport_error_text, CancelOnDrop, Failure, ProgressRoutes,
    ProgressSink, ToolsSink, UpstreamClient,
};
use super::diagnostics::Diagnostics;
use super::error::UpstreamError;
use super::listing::{Listing, ListingNotes, PagesRead};
use super::lock;
use super::process::ProcessGroup;
use super::stdio::BlockedSince;
use super::{lines, remote, stdio, url_text};
use crate::config::{ServerSpec, TransportKind};
use crate::secrets;

/// How long closing stdin may take before the group is signalled.
const CLOSE_GRACE: Duration = Duration::from_millis(300);
/// How long SIGTERM may take before SIGKILL.
pub(super) const TERM_GRACE: Duration = Duration::from_millis(700);
/// How long a burst of `tools/list_changed` may go on before the tools are listed again.
const RELIST_SETTLE: Duration = Duration::from_millis(50);
/// Shortest time between two listings of one session's tools: a server that sends
/// `tools/list_changed` in a loop costs a listing per interval, not one per notification.
const RELIST_MIN_INTERVAL: Duration = Duration::from_millis(500);
/// How long a re-list may take before it is given up (the next change asks again).
const RELIST_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a live session is checked for a transport that closed without its process
/// exiting (an exit is noticed at once).
const ENDED_POLL: Duration = Duration::from_secs(1);

/// Most input-required rounds (SEP-2322) one call may take: a server that keeps asking gets
/// a clear error, not a call that never ends. The same cap as rmcp's and the other SDKs'.
const MAX_INPUT_ROUNDS: usize = 10;
/// First pause before echoing a bare `requestState` (no requests to answer); it doubles up to
/// four times this.
const STATE_ONLY_PAUSE: Duration = Duration::from_millis(50);

/// What one `tools/call` round ended in.
enum Round {
    Complete(CallToolResult),
    InputRequired(InputRequiredResult),
}

/// Why a round failed; `None` is its deadline passing (the caller knows the whole limit).
struct RoundError(Option<UpstreamError>);

impl RoundError {
    fn or(self, timed_out: UpstreamError) -> UpstreamError {
        self.0.unwrap_or(timed_out)
    }
}

/// A live session.
pub(crate) struct Connection {
    service: RunningService<RoleClient, UpstreamClient>,
    group: ProcessGroup,
    diagnostics: Diagnostics,
    progress: ProgressRoutes,
    /// A remote server's URL: its errors can quote it, key and all, and they reach the model.
    url: Option<Url>,
    /// Since when a write to a stdio server has waited for it to read (remote: never).
    blocked: BlockedSince,
    /// Ends the re-listing task with the session.
    stop: CancellationToken,
    /// Set once `close` ran, so `Drop` knows the processes are already ended.
    closed: AtomicBool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Spawn or dial `spec`, complete the handshake and list every tool (all pages), all
    /// within the server's startup timeout. `base_dir` resolves a relative `cwd`. Later
    /// listings (after `tools/list_changed`) go to `on_tools`.
    ///
    /// # Errors
    /// A reason a person can act on: unset variable, command not found, timeout, protocol error.
    pub async fn open(
        spec: &ServerSpec,
        base_dir: Option<&Path>,
        shared: Option<&crate::store::Store>,
        shutdown: &CancellationToken,
        on_tools: ToolsSink,
    ) -> Result<(Self, Listing), UpstreamError> {
        let progress = ProgressRoutes::default();
        let client = UpstreamClient {
            server: spec.name.clone(),
            progress: progress.clone(),
            relist: Arc::new(Notify::new()),
            pages: PagesRead::default(),
        };
        let (relist, pages) = (client.relist.clone(), client.pages.clone());
        let timeout = Duration::from_millis(spec.startup_timeout_ms());
        let diagnostics = Diagnostics::default();
        let mut blocked = BlockedSince::default();
        let (group, url, outcome) = match spec.connection.kind {
            TransportKind::Stdio => {
                let spawned = stdio::spawn(spec, base_dir, &diagnostics)?;
                blocked = spawned.blocked;
                let transport = lines::transport(spawned.stdout, spawned.stdin, spec.name.clone(), pages.clone());
                (
                    spawned.group,
                    None,
                    handshake(client, transport, timeout, shutdown).await,
                )
            }
            TransportKind::Http => {
                let remote = remote::Remote::new(spec, shared)?;
                let outcome = remote::open_http(&remote, client, timeout, shutdown).await;
                (ProcessGroup::none(), Some(remote.url), outcome)
            }
            TransportKind::Sse => {
                let remote = remote::Remote::new(spec, shared)?;
                let deadline = Instant::now() + timeout;
                let outcome = remote::open_sse(&remote, client, deadline, shutdown).await;
                (ProcessGroup::none(), Some(remote.url), outcome)
            }
        };
        match outcome {
            Ok((service, mut listing)) => {
                scrub_tools(&mut listing.tools);
                warn_left_out(&spec.name, &listing.notes);
                let stop = CancellationToken::new();
                tokio::spawn(relist_on_change(
                    service.peer().clone(),
                    pages,
                    relist,
                    stop.clone(),
                    spec.name.clone(),
                    url.clone(),
                    on_tools,
                ));
                let connection = Self {
                    service,
                    group,
                    diagnostics,
                    progress,
                    url,
                    blocked,
                    stop,
                    closed: AtomicBool::new(false),
                };
                Ok((connection, listing))
            }
            Err(failure) => {
                group.terminate(TERM_GRACE).await;
                // Let the stderr reader and the waiter record the process's last words and exit.
                tokio::time::sleep(Duration::from_millis(30)).await;
                Err(match failure {
                    Failure::Handshake(reason) => {
                        UpstreamError::handshake(diagnostics.explain(&shown_error(url.as_ref(), &reason)))
                    }
                    Failure::Other(error) => error,
                })
            }
        }
    }

    /// Whether the session has ended (the server exited or closed stdout).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed() || self.diagnostics.exited()
    }

    /// Resolves once the session has ended, without holding the connection: at once when a
    /// stdio server's process exits; a transport closed some other way (a remote's stream, a
    /// server that closed stdout but lives on) is seen within [`ENDED_POLL`].
    pub fn ended(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let peer = self.service.peer().clone();
        let diagnostics = self.diagnostics.clone();
        let mut exited = diagnostics.exit_watch();
        async move {
            while !(peer.is_transport_closed() || diagnostics.exited()) {
                tokio::select! {
                    changed = exited.changed() => {
                        if changed.is_err() {
                            return;
                        }
                    }
                    () = tokio::time::sleep(ENDED_POLL) => {}
                }
            }
        }
    }

    /// How long a write to the server has been waiting for it to read, if one is.
    #[must_use]
    pub fn write_blocked_for(&self) -> Option<Duration> {
        self.blocked.blocked_for()
    }

    /// Call a tool with a timeout, routing its progress to `progress`. Dropping the returned
    /// future cancels the call downstream (rmcp sends `notifications/cancelled`).
    ///
    /// A server on protocol 2026-07-28 may answer with an input-required result (SEP-2322):
    /// the requests it embeds go to the gateway's client ([`UpstreamClient::fulfil`]) and the
    /// call is sent again with the answers and the server's `requestState` echoed, at most
    /// [`MAX_INPUT_ROUNDS`] times; `timeout` covers every round.
    ///
    /// # Errors
    /// `Timeout`, `Closed` (with what the process did), `Remote` (the server's own error, or
    /// a refused input request), `Protocol`.
    pub async fn call(
        &self,
        mut params: CallToolRequestParams,
        timeout: Duration,
        progress: Option<ProgressSink>,
    ) -> Result<CallToolResult, UpstreamError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let timed_out = || UpstreamError::Timeout {
            what: "no answer",
            limit: timeout,
        };
        // Only a 2026-07-28 session can ask for input; the others' arguments are not copied.
        if !self.speaks_input_required() {
            return match self.call_round(params, deadline, progress).await.map_err(|e| e.or(timed_out()))? {
                Round::Complete(result) => Ok(result),
                Round::InputRequired(_) => Err(UpstreamError::protocol(format!(
                    "the server answered tools/call with an input-required result (SEP-2322), which its protocol version {} does not have",
                    self.protocol_version()
                ))),
            };
        }
        let mut state_only_rounds = 0;
        for round in 1..=MAX_INPUT_ROUNDS {
            let asked = match self
                .call_round(params.clone(), deadline, progress.clone())
                .await
                .map_err(|e| e.or(timed_out()))?
            {
                Round::Complete(result) => return Ok(result),
                Round::InputRequired(asked) => asked,
            };
            // No one is asked for input that would never be sent.
            if round == MAX_INPUT_ROUNDS {
                break;
            }
            let requests = asked.input_requests.unwrap_or_default();
            if requests.is_empty() {
                // Only state to echo: a server shedding load. Back off a little, as rmcp does.
                let pause = STATE_ONLY_PAUSE * (1 << state_only_rounds.min(2));
                state_only_rounds += 1;
                tokio::time::timeout_at(deadline, tokio::time::sleep(pause))
                    .await
                    .map_err(|_| timed_out())?;
            }
            let responses = tokio::time::timeout_at(deadline, self.service.service().fulfil(requests))
                .await
                .map_err(|_| timed_out())??;
            params.input_responses = (!responses.is_empty()).then_some(responses);
            params.request_state = asked.request_state;
        }
        Err(UpstreamError::protocol(format!(
            "the server asked for more input {MAX_INPUT_ROUNDS} times in one call (SEP-2322 input_required) without a result; the gateway stops there"
        )))
    }

    /// Whether the session negotiated a protocol with input-required results (2026-07-28+).
    fn speaks_input_required(&self) -> bool {
        self.service
            .peer()
            .peer_info()
            .is_some_and(|info| info.protocol_version >= ProtocolVersion::V_2026_07_28)
    }

    fn protocol_version(&self) -> String {
        self.service
            .peer()
            .peer_info()
            .map_or_else(|| "(unknown)".to_owned(), |info| info.protocol_version.to_string())
    }

    /// One `tools/call` round, answered by `deadline`.
    async fn call_round(
        &self,
        params: CallToolRequestParams,
        deadline: tokio::time::Instant,
        progress: Option<ProgressSink>,
    ) -> Result<Round, RoundError> {
        let peer = self.service.peer();
        // rmcp puts its own progress token on every request; route by the one it chose.
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let outcome = match peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => {
                let _route =
                    progress.map(|sink| ProgressRoute::new(&self.progress, handle.progress_token.clone(), sink));
                let mut abandon = CancelOnDrop::new(peer, handle.id.clone());
                let response = tokio::time::timeout_at(deadline, handle.await_response()).await;
                if let Ok(Ok(_) | Err(ServiceError::McpError(_))) = &response {
                    abandon.disarm();
                }
                response
            }
            Err(error) => Ok(Err(error)),
        };
        let Ok(answer) = outcome else {
            return Err(RoundError(None));
        };
        self.round_outcome(answer).await.map_err(|e| RoundError(Some(e)))
    }

    async fn round_outcome(&self, answer: Result<ServerResult, ServiceError>) -> Result<Round, UpstreamError> {
        match answer {
            Ok(ServerResult::CallToolResult(mut result)) => {
                scrub_result(&mut result);
                Ok(Round::Complete(result))
            }
            Ok(ServerResult::InputRequiredResult(asked)) => Ok(Round::InputRequired(asked)),
            Ok(_) => Err(UpstreamError::protocol(
                "the server answered tools/call with another result type",
            )),
            Err(error) => Err(self.failure(error).await),
        }
    }

    /// What a failed request means: the server's own error, a send that failed on a live
    /// session, or the session's end (with what the process did).
    async fn failure(&self, error: ServiceError) -> UpstreamError {
        match error {
            ServiceError::McpError(e) if lines::is_unreadable_answer(&e) => UpstreamError::protocol(&e.message),
            ServiceError::McpError(e) => UpstreamError::remote(self.shown(&e.message)),
            ServiceError::TransportSend(error) => {
                // The server wants a sign-in nobody has done: the session is of no use until then.
                if let Some(needed) = sign_in_needed(&error) {
                    return needed;
                }
                // A send can fail on a live session (an SSE POST answered 413): say why, and keep it.
                if !self.is_closed() {
                    return UpstreamError::remote(self.shown(&format!(
                        "the request could not be sent: {}",
                        transport_error_text(&error)
                    )));
                }
                self.end_error().await
            }
            ServiceError::TransportClosed => self.end_error().await,
            other => UpstreamError::remote(self.shown(&service_error_text(&other))),
        }
    }

    /// The session ended: why, with what the process did.
    async fn end_error(&self) -> UpstreamError {
        // Give the waiter a moment to record the exit status for the reason.
        tokio::time::sleep(Duration::from_millis(30)).await;
        UpstreamError::closed(self.explain_end())
    }

    /// What the server declared in its handshake.
    pub fn capabilities(&self) -> Option<ServerCapabilities> {
        self.service.peer().peer_info().map(|info| info.capabilities.clone())
    }

    /// Send one request other than a tool call, answered within `timeout`. Dropping the
    /// future (or the timeout) cancels it downstream.
    ///
    /// # Errors
    /// As [`Connection::call`]: `Timeout`, `Closed`, `Remote`, `Protocol`.
    pub async fn request(&self, request: ClientRequest, timeout: Duration) -> Result<ServerResult, UpstreamError> {
        let peer = self.service.peer();
        let handle = match peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(self.failure(error).await),
        };
        let mut abandon = CancelOnDrop::new(peer, handle.id.clone());
        match tokio::time::timeout(timeout, handle.await_response()).await {
            Ok(Ok(answer)) => {
                abandon.disarm();
                Ok(answer)
            }
            Ok(Err(error)) => {
                abandon.disarm();
                Err(self.failure(error).await)
            }
            Err(_) => Err(UpstreamError::Timeout {
                what: "no answer",
                limit: timeout,
            }),
        }
    }

    /// Why the session ended, with what the process did.
    pub fn explain_end(&self) -> String {
        self.diagnostics.explain("the server closed the connection")
    }

    fn shown(&self, text: &str) -> String {
        shown_error(self.url.as_ref(), text)
    }

    /// End the session: close stdin, then end the whole process group. A call still holding
    /// the session fails as the processes under it end.
    pub async fn end(self: Arc<Self>) {
        self.stop.cancel();
        let group = self.group.clone();
        // Before EOF: a server that exits on it would orphan the children that left its group.
        group.remember_tree();
        match Arc::into_inner(self) {
            Some(mut connection) => {
                let _ = connection.service.close_with_timeout(CLOSE_GRACE).await;
                group.terminate(TERM_GRACE).await;
                // Only now: if this task is dropped halfway (a runtime shutting down), `Drop`
                // still kills the tree. Nobody else holds the connection to see the flag.
                connection.closed.store(true, Ordering::SeqCst);
            }
            None => group.terminate(TERM_GRACE).await,
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.stop.cancel();
        // A session dropped without `end` (a cancelled task, a runtime shutting down) must
        // not leave its process tree behind.
        if !self.closed.load(Ordering::SeqCst) {
            self.group.kill_now();
        }
    }
}

/// List the tools again whenever the server says they changed, coalescing bursts: a storm of
/// notifications costs one listing per [`RELIST_MIN_INTERVAL`], never a backlog.
async fn relist_on_change(
    peer: rmcp::Peer<RoleClient>,
    pages: PagesRead,
    relist: Arc<Notify>,
    stop: CancellationToken,
    server: String,
    url: Option<Url>,
    on_tools: ToolsSink,
) {
    loop {
        tokio::select! {
            () = relist.notified() => {}
            () = stop.cancelled() => return,
        }
        // Let the rest of a burst arrive; its wake-ups fold into the permit taken above.
        tokio::time::sleep(RELIST_SETTLE).await;
        let listed_at = tokio::time::Instant::now();
        // Bounded: a server that never answers must not stall every later re-list. A session
        // ending meanwhile (shutdown, idle close) is no failure to report.
        let listed = tokio::select! {
            listed = tokio::time::timeout(RELIST_TIMEOUT, super::client::list_tools(&peer, &pages)) => listed,
            () = stop.cancelled() => return,
        };
        match listed {
            Ok(Ok(mut listing)) => {
                scrub_tools(&mut listing.tools);
                tracing::info!(%server, tools = listing.tools.len(), "listed tools again after tools/list_changed");
                on_tools(listing);
            }
            Err(_) => {
                tracing::warn!(%server, limit_ms = RELIST_TIMEOUT.as_millis(), "no answer to tools/list after tools/list_changed");
            }
            // The session ended under the listing: its end is reported where it is handled.
            Ok(Err(_)) if peer.is_transport_closed() => return,
            Ok(Err(error)) => {
                let error = super::error::clip(&shown_error(url.as_ref(), &error.to_string()));
                tracing::warn!(%server, %error, "cannot list tools after tools/list_changed");
            }
        }
        tokio::select! {
            () = tokio::time::sleep_until(listed_at + RELIST_MIN_INTERVAL) => {}
            () = stop.cancelled() => return,
        }
    }
}

/// Log what a first listing left out, a line per dropped tool (at most the twenty named),
/// naming the server, the tool and why. A re-listing's are in the status only: a server
/// that changes its list in a loop must not fill the log with the same words.
fn warn_left_out(server: &str, notes: &ListingNotes) {
    for dropped in &notes.dropped {
        tracing::warn!(%server, tool = %dropped.name, reason = %dropped.reason, "tool dropped; the rest of the server is served");
    }
    if notes.dropped_count > notes.dropped.len() {
        tracing::warn!(%server, more = notes.dropped_count - notes.dropped.len(), "more tools dropped");
    }
    if let Some(cap) = notes.cut_at {
        tracing::warn!(%server, cap, "the server lists more tools than the gateway serves; the first {cap} are served and the rest not read");
    }
}

/// An error text fit for the model's context: a remote server's URL without its secrets
/// (rmcp's HTTP errors quote the whole URL), and no registered secret either (a server may
/// quote the key it was sent, or the `--token` it was started with).
pub(super) fn shown_error(url: Option<&Url>, text: &str) -> String {
    match url {
        Some(url) => secrets::scrub(&url_text::redact(text, url)).into_owned(),
        None => secrets::scrub(text).into_owned(),
    }
}

/// A tool's result without registered secrets in anything the model reads.
fn scrub_result(result: &mut CallToolResult) {
    secrets::scrub_result(result);
}

/// Tools as the model and the snapshot see them, without registered secrets in their titles,
/// descriptions or schemas; names are kept (`secrets::scrub_tool`).
fn scrub_tools(tools: &mut [Tool]) {
    if !secrets::any_registered() {
        return;
    }
    tools.iter_mut().for_each(secrets::scrub_tool);
}

/// Registers a progress route for one call and removes it when the call ends.
struct ProgressRoute {
    routes: ProgressRoutes,
    token: ProgressToken,
}

impl ProgressRoute {
    fn new(routes: &ProgressRoutes, token: ProgressToken, sink: ProgressSink) -> Self {
        lock(routes).insert(token.clone(), sink);
        Self {
            routes: routes.clone(),
            token,
        }
    }
}

/// How long a finished call's progress route stays open: rmcp hands each notification to a
/// task of its own but a response straight to the caller, so on a multi-thread runtime (the
/// Node API's) the last progress report can be handled just after the result.
const LATE_PROGRESS_GRACE: Duration = Duration::from_millis(250);

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        let (routes, token) = (self.routes.clone(), self.token.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(LATE_PROGRESS_GRACE).await;
                    lock(&routes).remove(&token);
                });
            }
            Err(_) => {
                lock(&routes).remove(&token);
            }
        }
    }
}
