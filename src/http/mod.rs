//! http — the team face: axum routes around the gateway handler, so one process serves many
//! clients over streamable HTTP (DESIGN §8a). No per-client state: every request is served on
//! its own (rmcp's stateless mode, for every protocol version), and the gateway's five
//! meta-tools never change, so any replica answers any request.
//!
//! - `/mcp`: rmcp's `StreamableHttpService` over [`crate::gateway::Gateway`], behind
//!   `observe` (body limit, metrics) and, when `discovery.http.auth` is set, [`auth`]: an
//!   OAuth 2.1 resource server (or a static bearer token on loopback) that proves the
//!   [`Caller`](crate::caller::Caller) of each request; its RFC 9728 metadata is served at
//!   the well-known paths.
//!   Host and Origin allow-lists are always on (`guard`).
//! - `/healthz`: the process answers. `/readyz`: config loaded and catalog indexed (503 with
//!   a JSON reason until then, and while draining).
//! - `/metrics`: Prometheus text (`metrics`).
//!
//! [`bind`] checks the address (a non-loopback one needs auth) and binds it; [`Bound::serve`]
//! serves until `shutdown`, then drains: stops accepting, lets calls in flight finish within
//! `discovery.http.drainTimeoutMs`, then cuts the rest. Closing the downstream servers is the
//! caller's (the engine may outlive the face, as in the Node API).

pub mod auth;
mod cancel;
mod guard;
mod metrics;
mod observe;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

pub use guard::BindError;
pub use metrics::Metrics;

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
        let app = router(&face, self.auth.as_ref());
        let draining = face.draining.clone();
        let stopping = CancellationToken::new();
        let stop = stopping.clone();
        // Answers go out in several small writes (headers, each SSE event, the end): without
        // TCP_NODELAY, Nagle's algorithm holds each behind the client's delayed ACK (~40 ms).
        let listener = axum::serve::ListenerExt::tap_io(self.listener, |tcp| {
            if let Err(error) = tcp.set_nodelay(true) {
                tracing::debug!(%error, "cannot set TCP_NODELAY");
            }
        });
        let server = axum::serve(listener, app).with_graceful_shutdown(async move {
            shutdown.await;
            tracing::info!("draining: no new connections; calls in flight may finish");
            draining.store(true, Ordering::Release);
            stop.cancel();
        });
        let mut server = std::pin::pin!(std::future::IntoFuture::into_future(server));
        let deadline = self.spec.drain_timeout();
        tokio::select! {
            result = &mut server => return result.map_err(|source| BindError::Listen { address: self.address, source }),
            () = async { stopping.cancelled().await; tokio::time::sleep(deadline).await } => {
                tracing::warn!("calls still running {deadline:?} after the stop request are cut");
                face.cut.cancel();
            }
        }
        if tokio::time::timeout(CUT_GRACE, &mut server).await.is_err() {
            tracing::warn!("connections still open {CUT_GRACE:?} after calls were cut are dropped");
            face.mcp_stop.cancel();
        }
        Ok(())
    }
}

/// What the routes share.
#[derive(Clone)]
struct Face {
    engine: Engine,
    metrics: Arc<Metrics>,
    mcp: StreamableHttpService<Gateway, NeverSessionManager>,
    /// Set on the stop request: readiness fails so balancers send no more.
    draining: Arc<AtomicBool>,
    /// Cancelled when the drain deadline passes: every answer stream still open gets an error
    /// for its request and ends (`observe`).
    cut: CancellationToken,
    /// rmcp's own stop: ends whatever stream is still open after the cut.
    mcp_stop: CancellationToken,
}

impl Face {
    fn new(engine: &Engine, spec: &HttpSpec, bound: SocketAddr) -> Result<Self, BindError> {
        let (cut, mcp_stop) = (CancellationToken::new(), CancellationToken::new());
        let config = StreamableHttpServerConfig::default()
            // Sessionless for every protocol version: no per-client state, any replica answers.
            .with_legacy_session_mode(false)
            .with_sse_keep_alive(Some(SSE_PING))
            .with_allowed_hosts(guard::allowed_hosts(spec, bound)?)
            .with_allowed_origins(guard::allowed_origins(spec, bound)?)
            .enforce_origin_validation()
            .with_max_request_body_bytes(MAX_REQUEST_BYTES)
            .with_cancellation_token(mcp_stop.clone());
        let gateway = Gateway::new(engine.clone());
        let mcp = StreamableHttpService::new(move || Ok(gateway.clone()), Arc::default(), config);
        Ok(Self {
            engine: engine.clone(),
            metrics: Metrics::new(engine.clone()),
            mcp,
            draining: Arc::default(),
            cut,
            mcp_stop,
        })
    }
}

/// The routes. Authentication wraps `/mcp` alone: a layer that checks the request and inserts
/// the caller's `crate::caller::Caller` into its extensions (the gateway reads it from
/// `http::request::Parts`); health, readiness, metrics and the resource metadata stay open.
fn router(face: &Face, auth: Option<&Authenticator>) -> Router {
    let observer = observe::Observer {
        metrics: face.metrics.clone(),
        in_flight: Arc::default(),
        cut: face.cut.clone(),
        engine: face.engine.clone(),
    };
    let mcp = Router::new()
        .route_service("/mcp", face.mcp.clone())
        .layer(axum::middleware::from_fn_with_state(observer, observe::observe));
    // Outside `observe`, which reads the `Caller` it inserts (to match a cancellation to its
    // caller's request). Requests it refuses are not counted by `observe`.
    // `/metrics` names every server and tool called, whoever called it: with auth, a scraper
    // authenticates as a client does (Prometheus' `authorization` setting); probes stay open.
    let metrics = Router::new()
        .route("/metrics", get(metrics_text))
        .with_state(face.clone());
    let (mcp, metrics) = match auth {
        Some(auth) => (
            mcp.layer(auth.layer()).merge(auth.metadata_router()),
            metrics.layer(auth.layer()),
        ),
        None => (mcp, metrics),
    };
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(face.clone())
        .merge(metrics)
        .merge(mcp)
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// Ready once the config is loaded (it is: the engine exists) and the catalog snapshots are
/// indexed, so a search answers from every server known at start; not while draining.
async fn readyz(State(face): State<Face>) -> Response {
    let (ready, reason) = if face.draining.load(Ordering::Acquire) {
        (false, Some("shutting down: draining calls in flight"))
    } else if !face.engine.is_indexed() {
        (false, Some("the tool catalog is still being indexed"))
    } else {
        (true, None)
    };
    let servers = face.engine.server_statuses();
    let connected = servers.iter().filter(|s| s.status == ServerStatus::Connected).count();
    let body = serde_json::json!({
        "status": if ready { "ready" } else { "not ready" },
        "reason": reason,
        "servers": servers.len(),
        "connected": connected,
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// `OpenMetrics` for a scraper that asks for it, the Prometheus text format otherwise.
async fn metrics_text(State(face): State<Face>, headers: HeaderMap) -> Response {
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/openmetrics-text"));
    if openmetrics {
        (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            face.metrics.openmetrics(),
        )
            .into_response()
    } else {
        (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            face.metrics.prometheus(),
        )
            .into_response()
    }
}
