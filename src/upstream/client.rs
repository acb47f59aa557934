//! The client we present to every downstream server, and the handshake each transport ends
//! in: `initialize`, then the first full `tools/list`, within the startup budget. Below both
//! `connection` (which holds a live session) and the transports (`stdio`, `remote`), so
//! neither needs the other. Also how rmcp's errors read to a person (no Rust type names).
//!
//! Requests a server sends its client during a call — elicitation (asking the person),
//! sampling (asking the model), roots — go to the gateway's own client: the gateway
//! registers a [`RequestForwarder`] for each `execute_tool` in flight ([`forward_requests`]),
//! and the newest one of that server answers. It refuses, with a reason, what its client did
//! not declare. With no call in flight there is no one to ask: elicitation is declined,
//! sampling refused. The same requests embedded in an input-required result (SEP-2322,
//! protocol 2026-07-28) are answered the same way ([`UpstreamClient::fulfil`]); the call's
//! rounds are driven by `connection`.

// Sampling and roots are deprecated by SEP-2577 (protocol 2026-07-28), but servers on
// 2025-11-25 and before still send them, and those are the servers we forward for.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::ProtocolVersion;
use rmcp::model::{
    CancelledNotificationParam, ClientCapabilities, ClientConfig, ClientRequest, ClientResult,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation, InputRequest, InputRequests, InputResponses, ListRootsResult, ListToolsRequest,
    ProgressNotificationParam, ProgressToken, Request, RequestId, RequestNoParam, ServerRequest, ServerResult,
};
use rmcp::service::{
    ClientInitializeError, NotificationContext, PeerRequestOptions, RequestContext, RunningService, ServiceError,
};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient, ServiceExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::error::UpstreamError;
use super::listing::{self, Listing, ListingBuilder, PagesRead};
use super::lock;
use super::url_text;

/// One progress report of a downstream call.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Where a call's progress goes (the gateway forwards it to the client).
pub type ProgressSink = Arc<dyn Fn(ProgressUpdate) + Send + Sync>;

/// Where a session's re-listed tools go (the supervisor turns them into events).
pub(crate) type ToolsSink = Arc<dyn Fn(Listing) + Send + Sync>;

/// Progress tokens of calls in flight on one session.
pub(super) type ProgressRoutes = Arc<Mutex<HashMap<ProgressToken, ProgressSink>>>;

/// The client side we present to downstream servers.
#[derive(Clone)]
pub(super) struct UpstreamClient {
    pub server: String,
    pub progress: ProgressRoutes,
    /// Woken by `tools/list_changed`; many wake-ups before the listing runs count as one.
    pub relist: Arc<Notify>,
    /// What the stdio transport left out of the `tools/list` pages it read.
    pub pages: PagesRead,
}

/// Sends one request of a downstream server to the gateway's own client and returns its
/// answer (or why it cannot).
pub type RequestForwarder =
    Arc<dyn Fn(ServerRequest) -> BoxFuture<'static, Result<ClientResult, ErrorData>> + Send + Sync>;

/// Forwarders of the calls in flight: (registration, server, caller identity, forwarder).
static FORWARDERS: Mutex<Vec<(u64, String, String, RequestForwarder)>> = Mutex::new(Vec::new());

/// Keeps a forwarder registered; dropping it (the call ended) removes it.
pub struct Forwarding(u64);

impl Drop for Forwarding {
    fn drop(&mut self) {
        lock(&FORWARDERS).retain(|(id, ..)| *id != self.0);
    }
}

/// Send `server`'s requests to the client of `caller`'s call through `forwarder` while the
/// guard lives.
#[must_use]
pub fn forward_requests(server: &str, caller: &str, forwarder: RequestForwarder) -> Forwarding {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    lock(&FORWARDERS).push((id, server.to_owned(), caller.to_owned(), forwarder));
    Forwarding(id)
}

/// Why a request of a server is answered by no call's client.
enum NoForwarder {
    /// No call of the server is in flight.
    Idle,
    /// Calls of several callers are: a request on the shared session does not say whose call
    /// it belongs to, and the wrong caller must never see it.
    Ambiguous,
}

impl UpstreamClient {
    /// The forwarder of the newest call of this server in flight, as long as every call in
    /// flight is one caller's.
    fn forwarder(&self) -> Result<RequestForwarder, NoForwarder> {
        let forwarders = lock(&FORWARDERS);
        let mut calls = forwarders.iter().rev().filter(|(_, server, ..)| *server == self.server);
        let (_, _, caller, newest) = calls.next().ok_or(NoForwarder::Idle)?;
        if calls.any(|(_, _, other, _)| other != caller) {
            return Err(NoForwarder::Ambiguous);
        }
        Ok(newest.clone())
    }

    /// A request of the server, answered by the gateway's client through the call's
    /// forwarder (which refuses what that client did not declare). With no call in flight:
    /// elicitation declined, sampling refused, no roots.
    async fn answer(&self, request: ServerRequest) -> Result<ClientResult, ErrorData> {
        match self.forwarder() {
            Ok(forward) => return forward(request).await,
            Err(NoForwarder::Ambiguous) => {
                tracing::info!(server = %self.server, "a request during calls of several callers: refused");
                return Err(ErrorData::invalid_request(
                    "the gateway cannot tell whose call this request belongs to: calls of several users \
                     are in flight on this server, so it is put to none of them; ask again when only one \
                     user's calls run",
                    None,
                ));
            }
            Err(NoForwarder::Idle) => {}
        }
        match request {
            ServerRequest::ElicitRequest(_) => {
                tracing::info!(server = %self.server, "elicitation outside a call: declined");
                Ok(ClientResult::ElicitResult(ElicitResult::new(
                    ElicitationAction::Decline,
                )))
            }
            ServerRequest::ListRootsRequest(_) => Ok(ClientResult::ListRootsResult(ListRootsResult::default())),
            _ => Err(ErrorData::invalid_request(
                "sampling is forwarded to the gateway's client only during a call of this server's tools",
                None,
            )),
        }
    }

    /// The answers to the requests a server embedded in an input-required result (SEP-2322,
    /// protocol 2026-07-28), each answered exactly as the same request sent on its own would
    /// be ([`Self::answer`]), one after the other (a person answers elicitations in turn).
    ///
    /// # Errors
    /// `Protocol` for more than [`MAX_INPUT_REQUESTS`]; `Remote` when the gateway's client
    /// refused or failed one (there is no way to hand a refusal back inside `inputResponses`,
    /// so the call ends with the reason).
    pub(super) async fn fulfil(&self, requests: InputRequests) -> Result<InputResponses, UpstreamError> {
        if requests.len() > MAX_INPUT_REQUESTS {
            return Err(UpstreamError::protocol(format!(
                "the server asked for {} inputs in one round (SEP-2322 inputRequests); the gateway answers at most {MAX_INPUT_REQUESTS}",
                requests.len()
            )));
        }
        let mut responses = InputResponses::new();
        for (key, request) in requests {
            let (what, request) = match request {
                InputRequest::Elicitation(request) => ("elicitation", ServerRequest::ElicitRequest(request)),
                InputRequest::CreateMessage(request) => ("sampling", ServerRequest::CreateMessageRequest(request)),
                InputRequest::ListRoots(request) => ("roots", ServerRequest::ListRootsRequest(request)),
                other => {
                    return Err(UpstreamError::protocol(format!(
                        "the server embedded a request the gateway cannot answer in inputRequests: {}",
                        serde_json::to_value(&other)
                            .ok()
                            .and_then(|v| v.get("method").and_then(|m| m.as_str().map(str::to_owned)))
                            .unwrap_or_default()
                    )))
                }
            };
            let answer = self.answer(request).await.map_err(|error| {
                UpstreamError::remote(format!(
                    "the server needs {what} from the gateway's client to go on (SEP-2322 input request `{}`), and it was refused: {}",
                    key_shown(&key),
                    error.message
                ))
            })?;
            let answer = serde_json::to_value(answer)
                .map_err(|error| UpstreamError::protocol(format!("the {what} answer cannot be encoded: {error}")))?;
            responses.insert(key, answer);
        }
        Ok(responses)
    }
}

/// Most requests one input-required result may embed: every one may ask a person, so a
/// server must not queue up hundreds of questions in one round.
pub(super) const MAX_INPUT_REQUESTS: usize = 16;

/// An input request's key as an error quotes it: a server chooses it, so it is cut short.
fn key_shown(key: &str) -> std::borrow::Cow<'_, str> {
    const MAX_KEY_CHARS: usize = 64;
    crate::text::cut_chars(key, MAX_KEY_CHARS)
}

/// What we tell servers we can do: elicitation (form) and sampling, answered by the
/// gateway's client. Not roots: a server such as server-filesystem would replace the folders
/// its config names with the AI client's workspace.
fn declared_capabilities() -> ClientCapabilities {
    serde_json::from_value(serde_json::json!({ "elicitation": { "form": {} }, "sampling": {} })).unwrap_or_default()
}

fn unexpected_answer(what: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("the gateway's client answered {what} with another result type"),
        None,
    )
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            declared_capabilities(),
            Implementation::new("anygpt-discovery", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        match self.answer(ServerRequest::ElicitRequest(Request::new(request))).await? {
            ClientResult::ElicitResult(result) => Ok(result),
            _ => Err(unexpected_answer("elicitation/create")),
        }
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        match self
            .answer(ServerRequest::CreateMessageRequest(Request::new(params)))
            .await?
        {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            _ => Err(unexpected_answer("sampling/createMessage")),
        }
    }

    async fn list_roots(&self, _context: RequestContext<RoleClient>) -> Result<ListRootsResult, ErrorData> {
        match self
            .answer(ServerRequest::ListRootsRequest(RequestNoParam::default()))
            .await?
        {
            ClientResult::ListRootsResult(result) => Ok(result),
            _ => Err(unexpected_answer("roots/list")),
        }
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let sink = lock(&self.progress).get(&params.progress_token).cloned();
        if let Some(sink) = sink {
            sink(ProgressUpdate {
                progress: params.progress,
                total: params.total,
                // Forwarded to the gateway's client: a server may narrate with its token.
                message: params.message.map(|m| crate::secrets::scrub(&m).into_owned()),
            });
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "tools/list_changed");
        self.relist.notify_one();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        super::offer_events::publish(&self.server, &super::offer_events::OfferEvent::PromptsChanged);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        super::offer_events::publish(&self.server, &super::offer_events::OfferEvent::ResourcesChanged);
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let event = super::offer_events::OfferEvent::ResourceUpdated { uri: params.uri };
        super::offer_events::publish(&self.server, &event);
    }
}

/// A session after its handshake, with the server's tools.
pub(super) type Session = (RunningService<RoleClient, UpstreamClient>, Listing);

/// Why opening a session failed: a handshake reason to explain with what the process did,
/// or an error that needs no explaining.
pub(super) enum Failure {
    Handshake(String),
    Other(UpstreamError),
}

impl From<UpstreamError> for Failure {
    fn from(error: UpstreamError) -> Self {
        Self::Other(error)
    }
}

/// The MCP handshake (`initialize`) and the first full `tools/list`, within `timeout`.
pub(super) async fn handshake<T, E, A>(
    client: UpstreamClient,
    transport: T,
    timeout: Duration,
    shutdown: &CancellationToken,
) -> Result<Session, Failure>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    handshake_with(client, transport, timeout, shutdown, None).await
}

/// The protocol versions we speak to a server that can tell us its own (streamable HTTP):
/// `server/discover` first, for 2026-07-28's per-request `_meta` and standard headers; a
/// server that answers it with an error is an older one, and gets the 2025-11-25
/// `initialize` handshake on the same transport.
pub(super) fn negotiated_lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// [`handshake`], with `lifecycle` instead of `initialize` when given.
pub(super) async fn handshake_with<T, E, A>(
    client: UpstreamClient,
    transport: T,
    timeout: Duration,
    shutdown: &CancellationToken,
    lifecycle: Option<ClientLifecycleMode>,
) -> Result<Session, Failure>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let handshake = async {
        let served = match lifecycle {
            Some(mode) => client.serve_with_lifecycle(transport, mode).await,
            None => client.serve(transport).await,
        };
        let service = served.map_err(|e| Failure::Handshake(format!("handshake failed: {}", init_error_text(&e))))?;
        let tools = match list_tools(service.peer(), &service.service().pages).await {
            Ok(tools) => tools,
            // A server that declares no tools (one of prompts or resources only) and refuses
            // the listing has none; one that declares them must list them.
            Err(error) if !declares_tools(service.peer()) => {
                tracing::debug!(server = %service.service().server, %error, "no tools declared nor listed");
                Listing::default()
            }
            Err(error) => return Err(Failure::Handshake(format!("tools/list failed: {error}"))),
        };
        Ok::<_, Failure>((service, tools))
    };
    tokio::select! {
        outcome = tokio::time::timeout(timeout, handshake) => outcome.unwrap_or_else(|_| {
            Err(Failure::Handshake(format!("did not answer initialize and tools/list within {} ms", timeout.as_millis())))
        }),
        () = shutdown.cancelled() => Err(Failure::Other(UpstreamError::ShuttingDown)),
    }
}

/// Whether the server declared tools in its handshake.
fn declares_tools(peer: &rmcp::Peer<RoleClient>) -> bool {
    peer.peer_info().is_some_and(|info| info.capabilities.tools.is_some())
}

/// Most `tools/list` pages read for one listing: a server paging out empty pages under ever
/// new cursors would otherwise be listed until the startup budget ends.
const MAX_PAGES: usize = 1_000;

/// Every page of `tools/list`, read tool by tool ([`listing`]): invalid tools dropped with
/// their reasons, names served once, and no page asked for once
/// [`MAX_TOOLS`](listing::MAX_TOOLS) are kept. rmcp's `list_all_tools` follows cursors
/// without end and fails the whole list over one bad tool; here a repeated cursor, or more
/// than [`MAX_PAGES`] pages, is a protocol error at once. `pages` has what the stdio transport
/// left out of the pages it read itself.
pub(super) async fn list_tools(peer: &rmcp::Peer<RoleClient>, pages: &PagesRead) -> Result<Listing, UpstreamError> {
    let mut listing = ListingBuilder::default();
    // Hashes, not the cursors: a server chooses their length.
    let mut seen = std::collections::HashSet::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| UpstreamError::remote(service_error_text(&e)))?;
        let mut abandon = CancelOnDrop::new(peer, handle.id.clone());
        let answer = handle.await_response().await;
        abandon.disarm();
        if let Some(read) = lock(pages).remove(&abandon.request) {
            listing.note_page(read);
        }
        let answer = answer.map_err(|e| UpstreamError::remote(service_error_text(&e)))?;
        let next = read_page(&mut listing, answer)?;
        match next {
            None => return Ok(listing.finish()),
            // Stop reading: nothing on a later page would be served.
            Some(_) if listing.is_full() => {
                listing.cut();
                return Ok(listing.finish());
            }
            Some(next) if !seen.insert(cursor_hash(&next)) => {
                return Err(UpstreamError::protocol(
                    "the server sent the same tools/list cursor twice (its pages would never end)",
                ))
            }
            Some(next) => cursor = Some(next),
        }
    }
    Err(UpstreamError::protocol(format!(
        "the server sent more than {MAX_PAGES} pages of tools/list without reaching its end"
    )))
}

fn cursor_hash(cursor: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(cursor)
}

/// Offer one answer's tools to `listing`; its `nextCursor`. rmcp reads an answer with one
/// invalid tool as some other result type (an untyped one, at the end of its list): that is
/// read again here, tool by tool.
fn read_page(listing: &mut ListingBuilder, answer: ServerResult) -> Result<Option<String>, UpstreamError> {
    let page = match answer {
        ServerResult::ListToolsResult(page) => {
            for tool in page.tools {
                if listing.is_full() {
                    listing.cut();
                    break;
                }
                listing.offer(Ok(tool));
            }
            return Ok(page.next_cursor);
        }
        ServerResult::CustomResult(rmcp::model::CustomResult(page)) => page,
        other => serde_json::to_value(other)
            .map_err(|e| UpstreamError::protocol(format!("the tools/list answer cannot be read: {e}")))?,
    };
    let serde_json::Value::Object(mut page) = page else {
        return Err(UpstreamError::protocol(
            "the server answered tools/list with something else than an object",
        ));
    };
    let Some(serde_json::Value::Array(tools)) = page.remove("tools") else {
        return Err(UpstreamError::protocol(
            "the server answered tools/list without a `tools` array",
        ));
    };
    for (index, tool) in tools.into_iter().enumerate() {
        if listing.is_full() {
            listing.cut();
            break;
        }
        listing.offer(listing::tool_from_value(index, tool));
    }
    Ok(page
        .remove("nextCursor")
        .and_then(|cursor| cursor.as_str().map(str::to_owned)))
}

/// Tells the server a request is abandoned (timed out, or the caller went away) unless the
/// answer arrived: `notifications/cancelled`, as the MCP spec asks.
pub(super) struct CancelOnDrop {
    peer: rmcp::Peer<RoleClient>,
    request: RequestId,
    armed: bool,
}

impl CancelOnDrop {
    pub fn new(peer: &rmcp::Peer<RoleClient>, request: RequestId) -> Self {
        Self {
            peer: peer.clone(),
            request,
            armed: true,
        }
    }

    /// The answer arrived: nothing to cancel.
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            let (peer, id) = (self.peer.clone(), self.request.clone());
            tokio::spawn(async move {
                let reason = Some("cancelled by the gateway's client".to_owned());
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(Some(id), reason))
                    .await;
            });
        }
    }
}

/// An rmcp error as a person should read it: transport errors with their causes, and never
/// the Rust type names rmcp's own texts carry.
pub(super) fn service_error_text(error: &ServiceError) -> String {
    match error {
        ServiceError::TransportSend(error) => transport_error_text(error),
        ServiceError::McpError(error) => error.message.to_string(),
        ServiceError::TransportClosed => "the server closed the connection".to_owned(),
        ServiceError::UnexpectedResponse => "the server answered with an unexpected result type".to_owned(),
        other => other.to_string(),
    }
}

/// A failed `initialize` as a person should read it. rmcp's own text for a transport error
/// leads with the transport's full Rust type name (thousands of characters for ours), and
/// quotes whole messages with `Debug`.
fn init_error_text(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::TransportError { error, context } => {
            format!("{} ({context})", transport_error_text(error))
        }
        ClientInitializeError::ConnectionClosed(_) => "the server closed the connection during initialize".to_owned(),
        ClientInitializeError::ExpectedInitResponse(_) | ClientInitializeError::ExpectedInitResult(_) => {
            "the server answered initialize with something else than an initialize result".to_owned()
        }
        ClientInitializeError::JsonRpcError(error) => format!("initialize failed: {}", error.message),
        ClientInitializeError::Cancelled => "initialize was cancelled".to_owned(),
        other => other.to_string(),
    }
}

/// The need for a sign-in a request failed with (`oauth`), typed; `None` for any other
/// transport error.
pub(super) fn sign_in_needed(error: &rmcp::transport::DynamicTransportError) -> Option<UpstreamError> {
    type HttpError = rmcp::transport::streamable_http_client::StreamableHttpError<reqwest::Error>;
    match error.error.downcast_ref::<HttpError>() {
        Some(HttpError::Auth(inner)) => super::oauth::sign_in_needed(inner).map(|detail| UpstreamError::NeedsSignIn {
            detail: crate::secrets::scrub(detail).into_owned(),
        }),
        _ => None,
    }
}

/// A transport error with the causes a person can act on ("connection refused"): rmcp's
/// streamable-HTTP client does not chain its reqwest error as a source, so unwrap it here.
pub(super) fn transport_error_text(error: &rmcp::transport::DynamicTransportError) -> String {
    type HttpError = rmcp::transport::streamable_http_client::StreamableHttpError<reqwest::Error>;
    match error.error.downcast_ref::<HttpError>() {
        Some(HttpError::Client(inner)) => url_text::with_causes(inner),
        Some(HttpError::Auth(inner)) => super::oauth::auth_error_text(inner),
        // rmcp's own texts are "Auth required" and "Insufficient scope", nothing to act on.
        Some(HttpError::AuthRequired(refusal)) => {
            format!(
                "the server answered 401 Unauthorized ({})",
                refusal.www_authenticate_header
            )
        }
        Some(HttpError::InsufficientScope(refusal)) => {
            format!(
                "the server answered 403 Forbidden ({})",
                refusal.www_authenticate_header
            )
        }
        // rmcp's text says "(HTTP 404)" even when the server said so with a 400.
        Some(HttpError::SessionExpired) => "the server no longer knows our session, and a new one did not help".into(),
        _ => url_text::with_causes(&*error.error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over HTTP rmcp reads the answer: one invalid tool makes it some other result type
    /// (untyped), which is read again tool by tool.
    #[test]
    fn a_page_rmcp_cannot_type_is_read_tool_by_tool() {
        let page = serde_json::json!({
            "tools": [
                { "name": "ok", "inputSchema": { "type": "object" } },
                { "name": "bad", "inputSchema": "object" },
                { "name": "ok", "inputSchema": {} }
            ],
            "nextCursor": "2"
        });
        let answer: ServerResult = serde_json::from_value(page).unwrap();
        assert!(
            !matches!(answer, ServerResult::ListToolsResult(_)),
            "rmcp no longer types it"
        );
        let mut listing = ListingBuilder::default();
        assert_eq!(read_page(&mut listing, answer).unwrap().as_deref(), Some("2"));
        let listing = listing.finish();
        assert_eq!(listing.tools.len(), 1);
        let dropped: Vec<&str> = listing.notes.dropped.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(dropped, ["bad", "ok"]);
        let not_a_page: ServerResult = serde_json::from_value(serde_json::json!({ "tools": 5 })).unwrap();
        let error = read_page(&mut ListingBuilder::default(), not_a_page).unwrap_err();
        assert!(error.to_string().contains("without a `tools` array"), "{error}");
    }

    fn client_of(server: &str) -> UpstreamClient {
        UpstreamClient {
            server: server.to_owned(),
            progress: Arc::default(),
            relist: Arc::default(),
            pages: Arc::default(),
        }
    }

    fn refusing(text: &'static str) -> RequestForwarder {
        Arc::new(move |_| Box::pin(async move { Err(ErrorData::invalid_request(text, None)) }))
    }

    /// A request on a session shared by several users' calls must reach none of them: over
    /// HTTP the wrong user would see (and could answer) another's question.
    #[tokio::test]
    async fn a_request_during_calls_of_two_callers_reaches_neither() {
        let client = client_of("forwarders-test-shared");
        let alice = forward_requests("forwarders-test-shared", "alice", refusing("alice's client"));
        let asked = || client.answer(serde_json::from_value(serde_json::json!({ "method": "roots/list" })).unwrap());
        let answered = asked().await.unwrap_err();
        assert_eq!(
            answered.message, "alice's client",
            "one caller: that caller's call answers"
        );
        let alice_again = forward_requests("forwarders-test-shared", "alice", refusing("alice's newest"));
        assert_eq!(asked().await.unwrap_err().message, "alice's newest");
        let bob = forward_requests("forwarders-test-shared", "bob", refusing("bob's client"));
        let refused = asked().await.unwrap_err();
        assert!(
            refused.message.contains("cannot tell whose call"),
            "{}",
            refused.message
        );
        drop((alice, alice_again));
        assert_eq!(asked().await.unwrap_err().message, "bob's client", "bob alone again");
        drop(bob);
        // Nobody's call: roots are answered empty, as before.
        assert!(matches!(asked().await, Ok(ClientResult::ListRootsResult(_))));
    }
}
