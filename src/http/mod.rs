//! http — the team face: axum routes around the gateway handler, so one process serves many
//! clients over streamable HTTP (DESIGN §8a). No per-client state: every request is served on
//! its own (rmcp's stateless mode, for every protocol version), and the gateway's five
//! meta-tools never change, so any replica answers any request. The exceptions are opt-in or
//! short: `discovery.http.legacySessions` gives pre-2026-07-28 clients sessions in this
//! process (`sessions`), and a 2026-07-28 call waiting for its client's next round is parked
//! in the process that started it (`crate::gateway`'s rounds).
//!
//! - `/mcp`: rmcp's `StreamableHttpService` over [`crate::gateway::Gateway`], behind
//!   `observe` (body limit, metrics) and, when `discovery.http.auth` is set, [`auth`]: an
//!   OAuth 2.1 resource server (or a static bearer token on loopback) that proves the
//!   [`Caller`](crate::caller::Caller) of each request; its RFC 9728 metadata is served at
//!   the well-known paths.
//!   Host and Origin allow-lists are always on (`guard`).
//! - `/healthz`: the process answers. `/readyz`: config loaded, catalog indexed and, with a
//!   shared store, read from it once (503 with a JSON reason until then, and while draining).
//! - `/metrics`: Prometheus text (`metrics`).
//!
//! [`bind`] checks the address (a non-loopback one needs auth) and binds it; [`Bound::serve`]
//! serves until `shutdown`, then drains: stops accepting, lets calls in flight finish within
//! `discovery.http.drainTimeoutMs`, then cuts the rest. Closing the downstream servers is the
//! caller's (the engine may outlive the face, as in the Node API).

pub mod auth;
mod cancel;
mod connect;
mod fair;
mod guard;
mod metrics;
mod observe;
mod sessions;

use std::future::Future;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

pub use guard::BindError;
pub use metrics::Metrics;

use crate::caller::Caller;
use crate::config::HttpSpec;
use crate::engine::{Engine, ServerStatus};
use crate::gateway::{Gateway, MAX_REQUEST_BYTES};
use auth::Authenticator;

/// Where `serve --http` listens when neither the command line nor the config says.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// How often an open answer stream gets an SSE comment. Besides keeping proxies from closing
/// a quiet stream, it is how a client that went away is noticed: HTTP/1 reads nothing while an
/// answer streams, so only a failed write tells the stream is gone, and its call (and the
/// downstream call) is cancelled. A comment is a few bytes a second per call in flight.
const SSE_PING: Duration = Duration::from_secs(1);

/// The most bytes of request line and headers read (431 past it). A token is at most 16 KiB
/// (`auth`); hyper would otherwise buffer ~400 KiB of unfinished headers per connection, for
/// anyone who connects, before any token is looked at.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// How long the server waits for connections to close after calls in flight were cut.
const CUT_GRACE: Duration = Duration::from_secs(2);

/// A listening socket, checked against the bind policy, not serving yet.
#[derive(Debug)]
pub struct Bound {
    engine: Engine,
    spec: HttpSpec,
    listener: tokio::net::TcpListener,
    address: SocketAddr,
    /// The access-token check of `/mcp`, when `discovery.http.auth` is set.
    auth: Option<Authenticator>,
    timeouts: Timeouts,
}

/// Resolve and bind `listen` (the command line's address, else `discovery.http.listen`, else
/// [`DEFAULT_LISTEN`]). Refused: an address other machines can reach while no auth is
/// configured; a malformed `publicUrl`.
pub async fn bind(engine: &Engine, listen: Option<&str>) -> Result<Bound, BindError> {
    let spec = engine.http();
    guard::public_url(&spec)?;
    let listen = listen.or(spec.listen.as_deref()).unwrap_or(DEFAULT_LISTEN);
    let addresses = guard::resolve(listen, spec.auth.is_some()).await?;
    let listener = tokio::net::TcpListener::bind(addresses.as_slice())
        .await
        .map_err(|source| BindError::Listen {
            address: addresses[0],
            source,
        })?;
    let address = listener.local_addr().map_err(|source| BindError::Listen {
        address: addresses[0],
        source,
    })?;
    let auth = match &spec.auth {
        Some(auth) => {
            let resource = spec
                .public_url
                .clone()
                .unwrap_or_else(|| format!("http://{address}/mcp"));
            let auth = Authenticator::from_spec(auth, &resource)
                .await
                .map_err(BindError::Auth)?;
            auth.check_bind(address).map_err(BindError::Auth)?;
            Some(auth)
        }
        None => None,
    };
    Ok(Bound {
        engine: engine.clone(),
        spec,
        listener,
        address,
        auth,
        timeouts: Timeouts::default(),
    })
}

impl Bound {
    /// The address bound (with the port chosen when `:0` was asked).
    #[must_use]
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Serve until `shutdown` resolves, then drain (see the module doc). Starts the engine's
    /// servers connecting at once, so the first request finds them on their way.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), BindError> {
        self.engine.start();
        let face = Face::new(&self.engine, &self.spec, self.address)?;
        let app = router(&face, self.auth.as_ref(), self.timeouts.body_idle);
        let connections = hyper_util::server::graceful::GracefulShutdown::new();
        // Answers go out in several small writes (headers, each SSE event, the end): without
        // TCP_NODELAY, Nagle's algorithm holds each behind the client's delayed ACK (~40 ms).
        let mut listener = axum::serve::ListenerExt::tap_io(self.listener, |tcp| {
            if let Err(error) = tcp.set_nodelay(true) {
                tracing::debug!(%error, "cannot set TCP_NODELAY");
            }
        });
        let mut http1 = hyper::server::conn::http1::Builder::new();
        http1
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(self.timeouts.headers)
            .max_header_size(MAX_HEADER_BYTES);
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            // axum's listener waits out accept errors (1 s on EMFILE) instead of failing.
            let (tcp, _) = tokio::select! {
                accepted = axum::serve::Listener::accept(&mut listener) => accepted,
                () = &mut shutdown => break,
            };
            let service = hyper_util::service::TowerToHyperService::new(app.clone());
            let connection = http1.serve_connection(hyper_util::rt::TokioIo::new(tcp), service);
            let connection = connections.watch(connection);
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::trace!(%error, "connection ended with an error");
                }
            });
        }
        tracing::info!("draining: no new connections; calls in flight may finish");
        face.draining.store(true, Ordering::Release);
        drop(listener);
        let deadline = self.spec.drain_timeout();
        let mut closed = std::pin::pin!(connections.shutdown());
        if tokio::time::timeout(deadline, &mut closed).await.is_ok() {
            return Ok(());
        }
        tracing::warn!("calls still running {deadline:?} after the stop request are cut");
        face.cut.cancel();
        if tokio::time::timeout(CUT_GRACE, &mut closed).await.is_err() {
            tracing::warn!("connections still open {CUT_GRACE:?} after calls were cut are dropped");
            face.mcp_stop.cancel();
        }
        Ok(())
    }
}

/// How long a client may take over its request before its connection is closed.
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    /// To send a request's headers (and, on a kept-alive connection, the next request's):
    /// a client that opens connections and sends nothing, or a byte now and then
    /// (slowloris), would otherwise hold them, and their file descriptors, for ever.
    headers: Duration,
    /// Between two pieces of a request's body: a body that stops coming holds its connection
    /// and up to 16 MiB read so far.
    body_idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            headers: Duration::from_secs(30),
            body_idle: Duration::from_secs(30),
        }
    }
}

/// What the routes share.
#[derive(Clone)]
struct Face {
    engine: Engine,
    metrics: Arc<Metrics>,
    mcp: StreamableHttpService<Gateway, LocalSessionManager>,
    /// `discovery.http.legacySessions`: the sessions of older clients, each its opener's.
    sessions: Option<Arc<sessions::Sessions>>,
    /// Requests in flight per authenticated caller (`discovery.http.maxInFlightPerCaller`).
    shares: Arc<fair::Shares>,
    /// Set on the stop request: readiness fails so balancers send no more.
    draining: Arc<AtomicBool>,
    /// Cancelled when the drain deadline passes: every answer stream still open gets an error
    /// for its request and ends (`observe`).
    cut: CancellationToken,
    /// rmcp's own stop: ends whatever stream is still open after the cut.
    mcp_stop: CancellationToken,
    /// The `Host` allow-list rmcp applies to `/mcp`, for `/metrics` without auth.
    hosts: guard::Hosts,
    /// Where sign-in links of per-user servers are served (`connect`).
    origin: Arc<str>,
}

impl Face {
    fn new(engine: &Engine, spec: &HttpSpec, bound: SocketAddr) -> Result<Self, BindError> {
        let (cut, mcp_stop) = (CancellationToken::new(), CancellationToken::new());
        let sessions = spec.legacy_sessions.then(sessions::Sessions::new);
        let hosts = guard::allowed_hosts(spec, bound)?;
        let config = StreamableHttpServerConfig::default()
            // Sessionless for every protocol version unless `legacySessions` is on: no
            // per-client state, any replica answers. 2026-07-28 is sessionless either way.
            .with_legacy_session_mode(sessions.is_some())
            .with_sse_keep_alive(Some(SSE_PING))
            .with_allowed_hosts(hosts.clone())
            .with_allowed_origins(guard::allowed_origins(spec, bound)?)
            .enforce_origin_validation()
            .with_max_request_body_bytes(MAX_REQUEST_BYTES)
            .with_cancellation_token(mcp_stop.clone());
        let gateway = Gateway::new(engine.clone());
        let manager = sessions.as_ref().map_or_else(Arc::default, |s| s.manager.clone());
        let mcp = StreamableHttpService::new(move || Ok(gateway.for_session()), manager, config);
        Ok(Self {
            engine: engine.clone(),
            metrics: Metrics::new(engine.clone()),
            mcp,
            sessions,
            shares: fair::Shares::new(
                spec.max_in_flight_per_caller
                    .map_or(fair::DEFAULT_MAX_IN_FLIGHT, NonZeroU32::get),
            ),
            draining: Arc::default(),
            cut,
            mcp_stop,
            hosts: guard::Hosts::new(&hosts),
            origin: match guard::public_url(spec)? {
                Some(url) => format!(
                    "{}://{}",
                    url.scheme_str().unwrap_or("https"),
                    url.authority().map_or("", |a| a.as_str())
                )
                .into(),
                None => format!("http://{bound}").into(),
            },
        })
    }
}

/// The routes. Authentication wraps `/mcp` alone: a layer that checks the request and inserts
/// the caller's `crate::caller::Caller` into its extensions (the gateway reads it from
/// `http::request::Parts`); health, readiness, metrics and the resource metadata stay open.
fn router(face: &Face, auth: Option<&Authenticator>, body_idle: Duration) -> Router {
    let observer = observe::Observer {
        metrics: face.metrics.clone(),
        in_flight: Arc::default(),
        cut: face.cut.clone(),
        body_idle,
        engine: face.engine.clone(),
    };
    let mut mcp = Router::new()
        .route_service("/mcp", face.mcp.clone())
        // Where the gateway tells callers to sign in to per-user servers (`connect`).
        .layer(Extension(crate::gateway::SignInOrigin(face.origin.clone())));
    if let Some(sessions) = &face.sessions {
        // Inside `observe` and authentication: it reads the caller the latter proved.
        mcp = mcp.layer(axum::middleware::from_fn_with_state(sessions.clone(), sessions::keep));
    }
    // Inside `observe` (its 429s are counted) and authentication (it reads the caller).
    mcp = mcp.layer(axum::middleware::from_fn_with_state(face.shares.clone(), fair::limit));
    let mcp = mcp.layer(axum::middleware::from_fn_with_state(observer, observe::observe));
    // Outside `observe`, which reads the `Caller` it inserts (to match a cancellation to its
    // caller's request). Requests it refuses are not counted by `observe`.
    // `/metrics` names every server and tool called, whoever called it: with auth, a scraper
    // authenticates as a client does (Prometheus' `authorization` setting) and is not shown
    // the calls of tools hidden from it; without auth (loopback only), the Host allow-list
    // keeps a page that rebound its name to 127.0.0.1 from reading it. Probes stay open.
    let metrics = Router::new()
        .route("/metrics", get(metrics_text))
        .with_state(face.clone());
    // Checked before rmcp does (which it still does): its refusal names no setting to change.
    // Outermost on `/mcp`, before authentication: a request for a name the gateway does not
    // serve (DNS rebinding) is refused as such, token or not.
    let host_checked = |router: Router| {
        router.layer(axum::middleware::from_fn_with_state(
            face.hosts.clone(),
            guard::check_host,
        ))
    };
    let (mcp, metrics) = match auth {
        Some(auth) => (
            host_checked(mcp.layer(auth.layer())).merge(auth.metadata_router()),
            metrics.layer(auth.layer()),
        ),
        None => (host_checked(mcp), host_checked(metrics)),
    };
    // A browser follows sign-in links: no bearer token, the link's one-use state is the authority.
    let connect = connect::router(&face.engine, face.origin.clone()).layer(axum::middleware::from_fn_with_state(
        face.hosts.clone(),
        guard::check_host,
    ));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(face.clone())
        .merge(metrics)
        .merge(connect)
        .merge(mcp)
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// Ready once the config is loaded (it is: the engine exists) and the catalog snapshots are
/// indexed, so a search answers from every server known at start — with a shared store, once
/// the catalog was read from it (a store that goes down later leaves the replica ready,
/// serving from memory; the body says so); not while draining.
async fn readyz(State(face): State<Face>) -> Response {
    let store_not_ready = face.engine.store_not_ready();
    let (ready, reason) = if face.draining.load(Ordering::Acquire) {
        (false, Some("shutting down: draining calls in flight".to_owned()))
    } else if !face.engine.is_indexed() {
        (false, Some("the tool catalog is still being indexed".to_owned()))
    } else if let Some(why) = store_not_ready {
        (false, Some(why))
    } else {
        (true, None)
    };
    let store = face.engine.store_health();
    let servers = face.engine.server_statuses();
    let connected = servers.iter().filter(|s| s.status == ServerStatus::Connected).count();
    let body = serde_json::json!({
        "status": if ready { "ready" } else { "not ready" },
        "reason": reason,
        "servers": servers.len(),
        "connected": connected,
        "store": store.shared.then_some(store),
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// `OpenMetrics` for a scraper that asks for it, the Prometheus text format otherwise; the
/// calls of tools hidden from the (authenticated) caller left out.
async fn metrics_text(State(face): State<Face>, caller: Option<Extension<Caller>>, headers: HeaderMap) -> Response {
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/openmetrics-text"));
    let hidden = caller.and_then(|Extension(caller)| face.engine.hidden_from(&caller));
    let hidden = hidden.as_ref().map(|h| h as metrics::Hidden<'_>);
    if openmetrics {
        (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            face.metrics.openmetrics(hidden),
        )
            .into_response()
    } else {
        (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            face.metrics.prometheus(hidden),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use futures::FutureExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;
    use crate::search::IndexedCatalog;

    /// A face over an empty engine on a free loopback port, with `timeouts`; stops with the
    /// returned token.
    async fn serving(timeouts: Timeouts) -> (SocketAddr, CancellationToken, tokio::task::JoinHandle<()>) {
        let engine = Engine::from_catalog(IndexedCatalog::default());
        let mut bound = bind(&engine, Some("127.0.0.1:0")).await.unwrap();
        bound.timeouts = timeouts;
        let address = bound.address();
        let stop = CancellationToken::new();
        let serving = tokio::spawn(
            bound
                .serve(stop.clone().cancelled_owned())
                .map(|served| served.unwrap()),
        );
        (address, stop, serving)
    }

    /// Everything the server sends on a connection that wrote `request`, until it closes it
    /// (or resets it: a server that closes with bytes unread resets the connection); `None`
    /// when 10 s pass and the connection is still open.
    async fn answer_to(address: SocketAddr, request: &[u8]) -> Option<String> {
        let mut tcp = TcpStream::connect(address).await.unwrap();
        let _ = tcp.write_all(request).await;
        let mut answer = Vec::new();
        // Bytes read before a reset stay in `answer`.
        let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer))
            .await
            .ok()?;
        Some(String::from_utf8_lossy(&answer).into_owned())
    }

    #[tokio::test]
    async fn a_client_that_stalls_or_oversizes_its_request_is_cut_off_and_others_are_served() {
        let short = Timeouts {
            headers: Duration::from_millis(300),
            body_idle: Duration::from_millis(300),
        };
        let (address, stop, serving) = serving(short).await;
        let stalled_body = format!(
            "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{{\"jsonrpc\""
        );
        let health = format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
        let announced_too_large = format!(
            "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: 100000000\r\n\
             Expect: 100-continue\r\n\r\n"
        );
        let padding = format!("X-Padding: {}\r\n", "x".repeat(8_000)).repeat(12);
        let oversized = format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n{padding}\r\n");
        let started = Instant::now();
        let (silent, slow_headers, slow_body, healthy, too_large, announced) = tokio::join!(
            // Connects and sends nothing.
            answer_to(address, b""),
            // Slowloris: a request line and a header, then nothing.
            answer_to(address, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"),
            // A body announced at 1,000 bytes that stops after 10.
            answer_to(address, stalled_body.as_bytes()),
            answer_to(address, health.as_bytes()),
            // 96 KiB of headers: refused before they are all buffered.
            answer_to(address, oversized.as_bytes()),
            // 100 MB announced: 413 at once, without `100 Continue` or waiting for the body.
            answer_to(address, announced_too_large.as_bytes()),
        );
        let announced = announced.expect("a body announced too large: refused and closed");
        assert!(announced.starts_with("HTTP/1.1 413"), "{announced}");
        // 431, unless the close reset the connection before the client read it: never served.
        let too_large = too_large.expect("oversized headers: refused and closed");
        assert!(
            too_large.is_empty() || too_large.starts_with("HTTP/1.1 431"),
            "{too_large}"
        );
        assert_eq!(silent.as_deref(), Some(""), "a silent connection is closed");
        assert_eq!(slow_headers.as_deref(), Some(""), "unfinished headers: closed");
        let slow_body = slow_body.expect("a stalled body: answered and closed");
        assert!(slow_body.starts_with("HTTP/1.1 408"), "{slow_body}");
        assert!(healthy.unwrap().starts_with("HTTP/1.1 200"));
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "cut by the timeouts, not the test's bound"
        );
        stop.cancel();
        serving.await.unwrap();
    }
}
