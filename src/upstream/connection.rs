//! One rmcp client session with one downstream server process.
//!
//! The process is spawned here rather than by rmcp's `TokioChildProcess` so that the gateway
//! owns what matters for dependability: the process group (to end grandchildren), the exit
//! status, the stderr tail and a tap on stdout (see `diagnostics`). Progress notifications
//! from the server are routed to the call that asked for them; `tools/list_changed` is
//! reported to the pool's owner as an event.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use process_wrap::tokio::CommandWrap;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use reqwest::Url;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, Implementation, ProgressNotificationParam, ProgressToken, RequestId, ServerResult,
    Tool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService, ServiceError};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::diagnostics::{Diagnostics, StdoutTap};
use super::http::HttpClient;
use super::lines;
use super::process::{self, ProcessGroup};
use super::sse::SseTransport;
use super::url_text;
use crate::config::{expand, ServerSpec, TransportKind};

/// How long closing stdin may take before the group is signalled.
const CLOSE_GRACE: Duration = Duration::from_millis(300);
/// Longest wait between two attempts to reopen a remote server's event stream.
const MAX_STREAM_RETRY_DELAY: Duration = Duration::from_secs(30);
/// How long SIGTERM may take before SIGKILL.
pub(super) const TERM_GRACE: Duration = Duration::from_millis(700);

/// One progress report of a downstream call.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Where a call's progress goes (the gateway forwards it to the client).
pub type ProgressSink = Arc<dyn Fn(ProgressUpdate) + Send + Sync>;

/// Something a server told us outside a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamEvent {
    /// `notifications/tools/list_changed`.
    ToolsChanged { server: String },
}

/// Progress tokens of calls in flight on one session.
type ProgressRoutes = Arc<Mutex<HashMap<ProgressToken, ProgressSink>>>;

/// The client side we present to downstream servers.
#[derive(Clone)]
pub struct UpstreamClient {
    server: String,
    progress: ProgressRoutes,
    events: mpsc::UnboundedSender<UpstreamEvent>,
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("anygpt-discovery", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let sink = lock(&self.progress).get(&params.progress_token).cloned();
        if let Some(sink) = sink {
            sink(ProgressUpdate {
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::info!(server = %self.server, "tools/list_changed");
        let _ = self.events.send(UpstreamEvent::ToolsChanged {
            server: self.server.clone(),
        });
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .expect("progress routes lock is never poisoned: no panics while held")
}

/// Why a call failed, as the engine needs to tell it apart.
#[derive(Debug)]
pub enum CallFailure {
    Timeout,
    /// The session is gone (crash, exit); the reason says what the process did.
    Closed(String),
    /// The server answered with an error.
    Server(String),
}

/// A live session.
pub struct Connection {
    service: RunningService<RoleClient, UpstreamClient>,
    group: ProcessGroup,
    diagnostics: Diagnostics,
    progress: ProgressRoutes,
    /// A remote server's URL: its errors can quote it, key and all, and they reach the model.
    url: Option<Url>,
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
    /// Spawn `spec`, complete the handshake and list every tool (all pages), all within the
    /// server's startup timeout. `base_dir` resolves a relative `cwd`.
    ///
    /// # Errors
    /// A reason a person can act on: unset variable, command not found, timeout, protocol error.
    pub async fn open(
        spec: &ServerSpec,
        base_dir: Option<&Path>,
        shutdown: &CancellationToken,
        events: mpsc::UnboundedSender<UpstreamEvent>,
    ) -> Result<(Self, Vec<Tool>), String> {
        let progress = ProgressRoutes::default();
        let client = UpstreamClient {
            server: spec.name.clone(),
            progress: progress.clone(),
            events,
        };
        let timeout = Duration::from_millis(spec.startup_timeout_ms());
        let diagnostics = Diagnostics::default();
        let (group, url, outcome) = match spec.connection.kind {
            TransportKind::Stdio => {
                let (group, (stdout, stdin)) = spawn_stdio(spec, base_dir, &diagnostics)?;
                let transport = lines::transport(stdout, stdin, spec.name.clone());
                (group, None, handshake(client, transport, timeout, shutdown).await)
            }
            TransportKind::Http => {
                let remote = Remote::new(spec)?;
                let outcome = open_http(&remote, client, timeout, shutdown).await;
                (ProcessGroup::none(), Some(remote.url), outcome)
            }
            TransportKind::Sse => {
                let remote = Remote::new(spec)?;
                let deadline = Instant::now() + timeout;
                let outcome = open_sse(&remote, client, deadline, shutdown).await;
                (ProcessGroup::none(), Some(remote.url), outcome)
            }
        };
        match outcome {
            Ok((service, tools)) => {
                let closed = AtomicBool::new(false);
                Ok((
                    Self {
                        service,
                        group,
                        diagnostics,
                        progress,
                        url,
                        closed,
                    },
                    tools,
                ))
            }
            Err(failure) => {
                group.terminate(TERM_GRACE).await;
                // Let the stderr reader and the waiter record the process's last words and exit.
                tokio::time::sleep(Duration::from_millis(30)).await;
                Err(diagnostics.explain(&shown_error(url.as_ref(), &failure)))
            }
        }
    }

    /// Whether the session has ended (the server exited or closed stdout).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed() || self.diagnostics.exited()
    }

    /// Call a tool with a timeout, routing its progress to `progress`. Dropping the returned
    /// future cancels the call downstream (rmcp sends `notifications/cancelled`).
    ///
    /// # Errors
    /// Timeout, closed session, or the server's own error.
    pub async fn call(
        &self,
        params: CallToolRequestParams,
        timeout: Duration,
        progress: Option<ProgressSink>,
    ) -> Result<CallToolResult, CallFailure> {
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
                let mut abandon = CancelOnDrop {
                    peer: peer.clone(),
                    id: Some(handle.id.clone()),
                };
                let response = tokio::time::timeout(timeout, handle.await_response()).await;
                if let Ok(Ok(_) | Err(ServiceError::McpError(_))) = &response {
                    abandon.id = None;
                }
                response
            }
            Err(error) => Ok(Err(error)),
        };
        match outcome {
            Err(_) => Err(CallFailure::Timeout),
            Ok(Ok(ServerResult::CallToolResult(result))) => Ok(result),
            Ok(Ok(_)) => Err(CallFailure::Server(
                "the server answered tools/call with another result type".into(),
            )),
            Ok(Err(ServiceError::McpError(e))) => Err(CallFailure::Server(self.shown(&e.message))),
            // A send can fail on a live session (an SSE POST answered 413): say why, and keep it.
            Ok(Err(ServiceError::TransportSend(error))) if !self.is_closed() => Err(CallFailure::Server(self.shown(
                &format!("the request could not be sent: {}", transport_error_text(&error)),
            ))),
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                // Give the waiter a moment to record the exit status for the reason.
                tokio::time::sleep(Duration::from_millis(30)).await;
                Err(CallFailure::Closed(
                    self.diagnostics.explain("the server closed the connection"),
                ))
            }
            Ok(Err(other)) => Err(CallFailure::Server(self.shown(&service_error_text(&other)))),
        }
    }

    fn shown(&self, text: &str) -> String {
        shown_error(self.url.as_ref(), text)
    }

    /// List the tools again (after `tools/list_changed`).
    ///
    /// # Errors
    /// The server's error, as text.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, String> {
        self.service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| self.shown(&service_error_text(&e)))
    }

    /// The process group, to end it even while a call still holds the session.
    #[must_use]
    pub fn group(&self) -> ProcessGroup {
        self.group.clone()
    }

    /// Close stdin, then end the whole process group.
    pub async fn close(mut self) {
        self.closed.store(true, Ordering::SeqCst);
        // Before EOF: a server that exits on it would orphan the children that left its group.
        self.group.remember_tree();
        let _ = self.service.close_with_timeout(CLOSE_GRACE).await;
        self.group.terminate(TERM_GRACE).await;
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // A session dropped without `close` (a cancelled task, a runtime shutting down) must
        // not leave its process tree behind.
        if !self.closed.load(Ordering::SeqCst) {
            self.group.kill_now();
        }
    }
}

/// An error text fit for the model's context: a remote server's URL without its secrets
/// (rmcp's HTTP errors quote the whole URL), and no header secret either (a server may quote
/// the key it was sent).
fn shown_error(url: Option<&Url>, text: &str) -> String {
    match url {
        Some(url) => url_text::scrub_known(&url_text::redact(text, url)).into_owned(),
        None => text.to_owned(),
    }
}

/// An rmcp error as a person should read it: transport errors with their causes.
fn service_error_text(error: &ServiceError) -> String {
    match error {
        ServiceError::TransportSend(error) => transport_error_text(error),
        other => other.to_string(),
    }
}

/// A transport error with the causes a person can act on ("connection refused"): rmcp's
/// streamable-HTTP client does not chain its reqwest error as a source, so unwrap it here.
fn transport_error_text(error: &rmcp::transport::DynamicTransportError) -> String {
    type HttpError = rmcp::transport::streamable_http_client::StreamableHttpError<reqwest::Error>;
    match error.error.downcast_ref::<HttpError>() {
        Some(HttpError::Client(inner)) => url_text::with_causes(inner),
        // rmcp's text says "(HTTP 404)" even when the server said so with a 400.
        Some(HttpError::SessionExpired) => "the server no longer knows our session, and a new one did not help".into(),
        _ => url_text::with_causes(&*error.error),
    }
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

/// Tells the server a request is abandoned (timed out, or the caller went away) unless the
/// answer arrived: `notifications/cancelled`, as the MCP spec asks.
struct CancelOnDrop {
    peer: rmcp::Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let peer = self.peer.clone();
            tokio::spawn(async move {
                let reason = Some("cancelled by the gateway's client".to_owned());
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(Some(id), reason))
                    .await;
            });
        }
    }
}

/// A session after its handshake, with the server's tools.
type Session = (RunningService<RoleClient, UpstreamClient>, Vec<Tool>);

/// The MCP handshake and the first full `tools/list`, within `timeout`.
async fn handshake<T, E, A>(
    client: UpstreamClient,
    transport: T,
    timeout: Duration,
    shutdown: &CancellationToken,
) -> Result<Session, String>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let handshake = async {
        let service = client
            .serve(transport)
            .await
            .map_err(|e| format!("handshake failed: {e}"))?;
        let tools = service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        Ok::<_, String>((service, tools))
    };
    tokio::select! {
        outcome = tokio::time::timeout(timeout, handshake) => outcome.unwrap_or_else(|_| {
            Err(format!("did not answer initialize and tools/list within {} ms", timeout.as_millis()))
        }),
        () = shutdown.cancelled() => Err("the gateway is shutting down".to_owned()),
    }
}

/// Start a stdio server: its process group and the transport over its pipes.
fn spawn_stdio(
    spec: &ServerSpec,
    base_dir: Option<&Path>,
    diagnostics: &Diagnostics,
) -> Result<(ProcessGroup, (StdoutTap<ChildStdout>, ChildStdin)), String> {
    let spawned =
        process::spawn(&mut build_command(spec, base_dir)?, &spec.name, diagnostics).map_err(|e| e.to_string())?;
    Ok((spawned.group, (spawned.stdout, spawned.stdin)))
}

/// A remote server's URL and headers, `${VAR}` expanded and checked once, and the client to
/// reach it with; both transports (and the fallback from one to the other) share them.
struct Remote {
    server: String,
    url: Url,
    headers: HeaderMap,
    client: reqwest::Client,
}

impl Remote {
    fn new(spec: &ServerSpec) -> Result<Self, String> {
        let url =
            expand::expand_env(spec.connection.url.as_deref().unwrap_or_default()).map_err(|e| format!("url: {e}"))?;
        let url = Url::parse(&url).map_err(|e| format!("url: {e}"))?;
        let headers = http_headers(spec)?;
        url_text::remember_secrets(
            &url,
            headers
                .iter()
                .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?))),
        );
        Ok(Self {
            server: spec.name.clone(),
            url,
            headers,
            client: http_client()?,
        })
    }
}

/// Streamable HTTP first; when that fails for a reason other than time or shutdown, the
/// legacy HTTP+SSE transport on the same URL, in the time left (what the MCP spec asks of
/// clients that talk to older servers).
async fn open_http(
    remote: &Remote,
    client: UpstreamClient,
    timeout: Duration,
    shutdown: &CancellationToken,
) -> Result<Session, String> {
    let started = Instant::now();
    let streamable = handshake(client.clone(), streamable_transport(remote, &client), timeout, shutdown).await;
    let Err(streamable_error) = streamable else {
        return streamable;
    };
    let deadline = started + timeout;
    if Instant::now() >= deadline || shutdown.is_cancelled() {
        return Err(streamable_error);
    }
    let fallback = open_sse(remote, client, deadline, shutdown).await;
    fallback.map_err(|sse_error| format!("streamable HTTP: {streamable_error}; legacy HTTP+SSE: {sse_error}"))
}

/// Open the SSE stream and complete the handshake, all before `deadline`; gives up at once
/// when the gateway shuts down (the pool holds the server's slot while this runs).
async fn open_sse(
    remote: &Remote,
    client: UpstreamClient,
    deadline: Instant,
    shutdown: &CancellationToken,
) -> Result<Session, String> {
    let budget = deadline.saturating_duration_since(Instant::now());
    let sse = SseTransport::connect(
        remote.client.clone(),
        remote.url.clone(),
        remote.headers.clone(),
        remote.server.clone(),
    );
    let transport = tokio::select! {
        connected = tokio::time::timeout_at(deadline.into(), sse) => connected.unwrap_or_else(|_| {
            Err(format!("the SSE stream did not name its endpoint within {} ms", budget.as_millis()))
        })?,
        () = shutdown.cancelled() => return Err("the gateway is shutting down".to_owned()),
    };
    handshake(
        client,
        transport,
        deadline.saturating_duration_since(Instant::now()),
        shutdown,
    )
    .await
}

/// A streamable-HTTP transport to the remote server. `Authorization: Bearer …` goes through
/// rmcp's own auth header; other headers as given. A renewed session reaches `client`'s
/// events as a tool change.
fn streamable_transport(remote: &Remote, client: &UpstreamClient) -> StreamableHttpClientTransport<HttpClient> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(remote.url.as_str());
    // rmcp retries a broken event stream with doubling delays and no ceiling: after a long
    // outage the stream (and the session renewal it starts) would come back hours late.
    let mut backoff = ExponentialBackoff::default();
    backoff.max_delay = Some(MAX_STREAM_RETRY_DELAY);
    config.retry_config = Arc::new(backoff);
    for (name, value) in &remote.headers {
        if name == AUTHORIZATION {
            if let Some(token) = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")) {
                config.auth_header = Some(token.to_owned());
                continue;
            }
        }
        config.custom_headers.insert(name.clone(), value.clone());
    }
    let http = HttpClient::new(remote.client.clone(), client.server.clone(), client.events.clone());
    StreamableHttpClientTransport::with_client(http, config)
}

/// `connection.headers` with `${VAR}` expanded, checked as HTTP headers.
fn http_headers(spec: &ServerSpec) -> Result<HeaderMap, String> {
    let mut headers = HeaderMap::new();
    for (name, value) in &spec.connection.headers {
        let value = expand::expand_env(value).map_err(|e| format!("headers.{name}: {e}"))?;
        let header = HeaderName::try_from(name.as_str()).map_err(|e| format!("headers.{name}: {e}"))?;
        // The value may be a secret: say what is wrong without echoing it.
        let value = HeaderValue::try_from(value).map_err(|_| format!("headers.{name}: not a valid header value"))?;
        headers.insert(header, value);
    }
    Ok(headers)
}

/// The HTTP client for remote servers. Redirects are followed only within one origin:
/// reqwest would follow them anywhere, stripping only `Authorization` and cookies, so a
/// server could send our other headers (API keys) and message bodies to another host.
pub(super) fn http_client() -> Result<reqwest::Client, String> {
    install_crypto_provider();
    let same_origin = reqwest::redirect::Policy::custom(|attempt| {
        let from = attempt.previous().last().map(Url::origin);
        if attempt.previous().len() < 10 && from.as_ref() == Some(&attempt.url().origin()) {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    reqwest::Client::builder()
        .redirect(same_origin)
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))
}

/// rustls needs one process-wide crypto provider; `ring` builds everywhere without cmake.
fn install_crypto_provider() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // Another library in the process may have installed one already; that one is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

fn build_command(spec: &ServerSpec, base_dir: Option<&Path>) -> Result<CommandWrap, String> {
    let conn = &spec.connection;
    let expand = |what: &str, text: &str| expand::expand_env(text).map_err(|e| format!("{what}: {e}"));
    let program = expand("command", conn.command.as_deref().unwrap_or_default())?;
    // `npx` is `npx.cmd` on Windows, which CreateProcess does not find by itself.
    #[cfg(windows)]
    let program = {
        let server_path = conn.env.iter().find(|(k, _)| k.eq_ignore_ascii_case("PATH"));
        let server_path = server_path.map(|(k, v)| expand(&format!("env.{k}"), v)).transpose()?;
        super::launcher::resolve_from_env(&program, server_path.as_deref())
            .map_or(program, |p| p.to_string_lossy().into_owned())
    };
    let mut command = tokio::process::Command::new(program);
    for (i, arg) in conn.args.iter().enumerate() {
        command.arg(expand(&format!("args[{i}]"), arg)?);
    }
    for (key, value) in &conn.env {
        command.env(key, expand(&format!("env.{key}"), value)?);
    }
    if let Some(cwd) = &conn.cwd {
        let cwd = Path::new(&expand("cwd", cwd)?).to_path_buf();
        let cwd = match base_dir {
            Some(base) if cwd.is_relative() => base.join(cwd),
            _ => cwd,
        };
        command.current_dir(cwd);
    }
    command.stdin(std::process::Stdio::piped());
    command.stdout(std::process::Stdio::piped());
    command.stderr(std::process::Stdio::piped());
    let mut wrapped = CommandWrap::from(command);
    process::configure(&mut wrapped);
    Ok(wrapped)
}
