//! The rmcp server handler and the serve loop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

use super::exposed;
use super::meta_tool::{definitions, error_result, MetaTool, Rejected};
use super::offers;
use super::rounds::{self, Round, Rounds};
use super::to_client::{needs_rounds, sessionless_http};
use super::wire::LineTransport;
use crate::caller::Caller;
use crate::engine::Engine;

/// How long answers may still be written after the client closed its input.
const EOF_DRAIN: Duration = Duration::from_millis(300);

const INSTRUCTIONS: &str = "Tools of many MCP servers, reached through five meta-tools: \
search_tools to find one, get_tool_details for its schema, execute_tool to run it.";

/// The gateway's MCP face.
#[derive(Debug, Clone)]
pub struct Gateway {
    engine: Engine,
    relay: Arc<offers::Relay>,
    announcer: Arc<exposed::Announcer>,
    /// Calls waiting for their 2026-07-28 client's next round, shared by every request this
    /// gateway serves.
    rounds: Arc<Rounds>,
}

impl Gateway {
    #[must_use]
    pub fn new(engine: Engine) -> Self {
        Self {
            engine,
            relay: Arc::default(),
            announcer: Arc::default(),
            rounds: Arc::default(),
        }
    }
}

impl ServerHandler for Gateway {
    /// The client's view is the five meta-tools, which never change, and the tools
    /// `discovery.expose` shows beside them, which do: when a server's tools change, a reload
    /// changes the config, or a tool is trusted. So `tools.listChanged` is advertised and
    /// `notifications/tools/list_changed` sent when the exposed set the client listed is no
    /// longer the set (`exposed`); without `expose` it is never sent.
    ///
    /// Prompts, resources and completions are the downstream servers' own, passed on
    /// (`offers`).
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_completions()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("anygpt-discovery", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let shown = exposed::definitions_of(&self.engine, &Caller::of_request(&context.extensions)).await;
        self.announcer.listed(&shown);
        let mut tools = definitions().to_vec();
        tools.extend(shown);
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let CallToolRequestParams {
            name,
            arguments,
            request_state,
            input_responses,
            ..
        } = request;
        let caller = Caller::of_request(&context.extensions);
        // On 2026-07-28 a call that asks its client something answers in rounds, each bound
        // to this caller and request.
        let binding = needs_rounds(&context).then(|| rounds::binding(&caller, &name, arguments.as_ref()));
        let call = if exposed::is_meta_tool(&name) {
            MetaTool::parse(&name, arguments)
        } else {
            // A tool shown directly runs as the `execute_tool` call it stands for.
            match exposed::call_of(&self.engine, &caller, &name, arguments).await {
                Ok(call) => Ok(MetaTool::Execute(call)),
                Err(unused) => MetaTool::parse(&name, unused),
            }
        };
        match (call, binding) {
            (Ok(MetaTool::Execute(call)), Some(binding)) => {
                let round = Round {
                    binding,
                    request_state,
                    input_responses,
                };
                self.rounds.round(&self.engine, call, round, &context).await
            }
            _ if request_state.is_some() => Err(ErrorData::invalid_params(
                "requestState was sent for a call that never asked for input; call the tool again without it",
                None,
            )),
            (Ok(call), _) => Ok(call.apply(&self.engine, &context).await.into()),
            (Err(Rejected::InvalidArguments(error)), _) => Ok(error_result(&error).into()),
            (Err(Rejected::UnknownTool(error)), _) => Err(error),
        }
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        offers::list_prompts(
            &self.engine,
            &Caller::of_request(&context.extensions),
            cursor(request.as_ref()),
        )
        .await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let (caller, origin) = asker(&context);
        offers::get_prompt(&self.engine, (&caller, origin.as_deref()), request)
            .await
            .map(Into::into)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        offers::list_resources(
            &self.engine,
            &Caller::of_request(&context.extensions),
            cursor(request.as_ref()),
        )
        .await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        offers::list_resource_templates(
            &self.engine,
            &Caller::of_request(&context.extensions),
            cursor(request.as_ref()),
        )
        .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let (caller, origin) = asker(&context);
        offers::read_resource(&self.engine, (&caller, origin.as_deref()), request)
            .await
            .map(Into::into)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Over HTTP without a session every client shares this handler and each request is
        // its own exchange: nothing may be announced to whichever client initialized last.
        // 2026-07-28 clients get announcements on their `subscriptions/listen` stream; an HTTP
        // session (`discovery.http.legacySessions`) has a handler of its own (`for_session`).
        if sessionless_http(&context.extensions) {
            return;
        }
        self.announcer.start(&self.engine, context.peer.clone());
        self.relay.start(context.peer);
    }

    // Servers before protocol 2026-07-28 (all those met today) subscribe this way.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        offers::subscribe(
            &self.engine,
            self.session_relay(&context),
            &Caller::of_request(&context.extensions),
            request,
        )
        .await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        offers::unsubscribe(
            &self.engine,
            self.session_relay(&context),
            &Caller::of_request(&context.extensions),
            request,
        )
        .await
    }

    /// 2026-07-28 `subscriptions/listen`: every advertised category is accepted (rmcp narrows
    /// it to what was asked and advertised and acknowledges it); `listen` relays onto it.
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        offers::listen(&self.engine, context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let (caller, origin) = asker(&context);
        offers::complete(&self.engine, (&caller, origin.as_deref()), request).await
    }
}

impl Gateway {
    /// The relay of this handler's client, or `None` over HTTP without a session, where the
    /// handler is every client's and no session carries updates (module `offers`).
    fn session_relay(&self, context: &RequestContext<RoleServer>) -> Option<&offers::Relay> {
        (!sessionless_http(&context.extensions)).then_some(&*self.relay)
    }

    /// The handler of one more session of this gateway (the HTTP face makes one per session,
    /// or per request when sessionless): announcements of its own, the engine and the calls
    /// parked for their next round shared.
    #[must_use]
    pub fn for_session(&self) -> Self {
        Self {
            engine: self.engine.clone(),
            relay: Arc::default(),
            announcer: Arc::default(),
            rounds: self.rounds.clone(),
        }
    }
}

/// The cursor a listing request carries, if any.
fn cursor(request: Option<&PaginatedRequestParams>) -> Option<&str> {
    request.and_then(|r| r.cursor.as_deref())
}

/// Serve the gateway over `read`/`write` (one JSON-RPC message per line) until the client
/// leaves or `shutdown` resolves, then close every downstream session. A client that leaves
/// before the handshake is a clean stop.
pub async fn serve<R, W>(engine: Engine, read: R, write: W, shutdown: impl Future<Output = ()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // Start connecting before the handshake: `initialize` never waits on downstream servers.
    engine.start();
    let eof = CancellationToken::new();
    let transport = LineTransport::new(read, write, eof.clone());
    let mut shutdown = std::pin::pin!(shutdown);
    let running = tokio::select! {
        served = Gateway::new(engine.clone()).serve(transport) => served,
        () = &mut shutdown => {
            engine.close().await;
            return;
        }
    };
    match running {
        Ok(running) => {
            let token = running.cancellation_token();
            let mut waiting = std::pin::pin!(running.waiting());
            tokio::select! {
                quit = &mut waiting => tracing::info!(?quit, "client session ended"),
                // On end of input rmcp waits up to 5 s for calls in flight to answer; cancel
                // them instead, then give the answers already made (and those of calls that
                // end on cancellation) a moment to reach a client that closed only its
                // writing end, as a script piping requests in does.
                () = eof.cancelled() => {
                    tracing::info!("client closed its input; cancelling calls in flight");
                    token.cancel();
                    if tokio::time::timeout(EOF_DRAIN, &mut waiting).await.is_err() {
                        tracing::warn!("calls still running {EOF_DRAIN:?} after end of input were dropped");
                    }
                }
                () = &mut shutdown => {
                    tracing::info!("shutdown requested");
                    token.cancel();
                }
            }
        }
        Err(error) => tracing::warn!(%error, "no MCP session: the client left before the handshake"),
    }
    engine.close().await;
}

/// Serve over this process's stdin/stdout, never through a runtime's own stdin object (inside
/// Node that would compete with Node for fd 0).
///
/// MCP clients connect a stdio server with pipes or, as Node's `child_process` does, with unix
/// socket pairs. rmcp's `stdio_pipes` drives FIFOs on the reactor but falls back to blocking
/// reads on the thread pool for sockets, which costs a thread hand-off per message; sockets get
/// the reactor here too.
pub async fn serve_stdio(engine: Engine, shutdown: impl Future<Output = ()>) {
    #[cfg(unix)]
    if let Some((read, write)) = stdio_sockets() {
        tracing::debug!("stdio: unix sockets on the reactor");
        serve(engine, read, write, shutdown).await;
        return;
    }
    let (read, write) = rmcp::transport::stdio_pipes();
    serve(engine, read, write, shutdown).await;
}

/// Duplicates of fd 0 and 1 as non-blocking tokio sockets, when both are unix sockets.
#[cfg(unix)]
fn stdio_sockets() -> Option<(tokio::net::UnixStream, tokio::net::UnixStream)> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileTypeExt;

    let socket = |fd: std::os::fd::BorrowedFd<'_>| {
        let owned = fd.try_clone_to_owned().ok()?;
        let file = std::fs::File::from(owned);
        if !file.metadata().ok()?.file_type().is_socket() {
            return None;
        }
        let stream = std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(file));
        // Shared with fd 0/1 (one open file description); nothing else in this process reads
        // or writes them.
        stream.set_nonblocking(true).ok()?;
        tokio::net::UnixStream::from_std(stream).ok()
    };
    Some((socket(std::io::stdin().as_fd())?, socket(std::io::stdout().as_fd())?))
}

/// Who asks, and the origin their sign-in links are served under (the HTTP face's).
fn asker(context: &RequestContext<RoleServer>) -> (Caller, Option<String>) {
    (
        Caller::of_request(&context.extensions),
        super::sign_in::SignInOrigin::of_request(&context.extensions),
    )
}
