//! Remote servers: streamable HTTP, falling back to the legacy HTTP+SSE transport, over one
//! reqwest client per server whose redirects stay on the server's origin. A streamable-HTTP
//! server without a static `Authorization` header signs in when it answers 401
//! (`super::oauth`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use reqwest::Url;
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use tokio_util::sync::CancellationToken;

use super::client::{handshake, handshake_with, negotiated_lifecycle, Failure, Session, UpstreamClient};
use super::error::UpstreamError;
use super::http::HttpClient;
use super::oauth::Authorizer;
use super::sse::SseTransport;
use crate::config::{expand, ServerSpec, TransportKind};
use crate::secrets;

/// Longest wait between two attempts to reopen a remote server's event stream.
const MAX_STREAM_RETRY_DELAY: Duration = Duration::from_secs(30);

/// A remote server's URL and headers, `${VAR}` expanded and checked once, and the client to
/// reach it with; both transports (and the fallback from one to the other) share them.
pub(super) struct Remote {
    server: String,
    pub url: Url,
    headers: HeaderMap,
    client: reqwest::Client,
    auth: Option<Arc<Authorizer>>,
    /// The store replicas share, when configured: the sign-in is kept there.
    shared: Option<crate::store::Store>,
}

impl Remote {
    pub fn new(spec: &ServerSpec, shared: Option<&crate::store::Store>) -> Result<Self, UpstreamError> {
        let url = expand::expand_env(spec.connection.url.as_deref().unwrap_or_default())
            .map_err(|e| UpstreamError::spec("url", e))?;
        let url = Url::parse(&url).map_err(|e| UpstreamError::spec("url", e))?;
        let (headers, header_secrets) = http_headers(spec)?;
        secrets::register_remote(&spec.name, &url, header_secrets);
        // A connect waits for a person to sign in for most of its startup budget, keeping
        // the rest to finish the handshake with the token.
        let wait = Duration::from_millis(spec.startup_timeout_ms()) * 3 / 4;
        let auth = (spec.connection.kind == TransportKind::Http && !headers.contains_key(AUTHORIZATION))
            .then(|| Authorizer::new(&spec.name, &url, spec.connection.oauth.as_ref(), wait, shared))
            .transpose()?
            .map(Arc::new);
        Ok(Self {
            server: spec.name.clone(),
            url,
            headers,
            client: http_client()?,
            auth,
            shared: shared.cloned(),
        })
    }

    /// The same server with sign-ins that open the browser and wait `wait` for the person
    /// (`auth login`).
    pub fn with_sign_in_wait(mut self, spec: &ServerSpec, wait: Duration) -> Result<Self, UpstreamError> {
        if self.auth.is_some() {
            self.auth = Some(Arc::new(
                Authorizer::new(
                    &spec.name,
                    &self.url,
                    spec.connection.oauth.as_ref(),
                    wait,
                    self.shared.as_ref(),
                )?
                .interactive(),
            ));
        }
        Ok(self)
    }
}

/// Streamable HTTP first, negotiating the newest protocol both sides speak
/// (`client::negotiated_lifecycle`); when that fails for a reason other than time, shutdown or
/// a sign-in, streamable HTTP again with the plain 2025-11-25 `initialize` (some servers
/// answer the `server/discover` probe as if it were another method), then the legacy
/// HTTP+SSE transport on the same URL — each in the time left (what the MCP spec asks of
/// clients that talk to older servers).
pub(super) async fn open_http(
    remote: &Remote,
    client: UpstreamClient,
    timeout: Duration,
    shutdown: &CancellationToken,
) -> Result<Session, Failure> {
    let deadline = Instant::now() + timeout;
    let transport = streamable_transport(remote, &client);
    let negotiated = handshake_with(
        client.clone(),
        transport,
        timeout,
        shutdown,
        Some(negotiated_lifecycle()),
    )
    .await;
    let negotiated_error = match negotiated {
        Ok(session) => return Ok(session),
        Err(Failure::Handshake(reason)) => reason,
        Err(other) => return Err(other),
    };
    // The server spoke streamable HTTP and asked for a sign-in that did not happen: the
    // other attempts would only bury why.
    if let Some(error) = remote.auth.as_ref().and_then(|auth| auth.take_failure()) {
        return Err(sign_in_failure(error));
    }
    if Instant::now() >= deadline || shutdown.is_cancelled() {
        return Err(Failure::Handshake(negotiated_error));
    }
    let left = deadline.saturating_duration_since(Instant::now());
    let streamable_error = match handshake(client.clone(), streamable_transport(remote, &client), left, shutdown).await
    {
        Ok(session) => {
            tracing::debug!(server = %remote.server, "protocol negotiation failed ({negotiated_error}); initialize worked");
            return Ok(session);
        }
        Err(Failure::Handshake(reason)) => reason,
        Err(other) => return Err(other),
    };
    if let Some(error) = remote.auth.as_ref().and_then(|auth| auth.take_failure()) {
        return Err(sign_in_failure(error));
    }
    if Instant::now() >= deadline || shutdown.is_cancelled() {
        return Err(Failure::Handshake(streamable_error));
    }
    match open_sse(remote, client, deadline, shutdown).await {
        Err(Failure::Handshake(sse_error)) => Err(Failure::Handshake(format!(
            "streamable HTTP: {streamable_error}; legacy HTTP+SSE: {sse_error}"
        ))),
        outcome => outcome,
    }
}

/// A sign-in that did not happen, as the connect fails with: the need for one stays typed
/// (the server's status says it); any other failure is explained as a handshake's is.
fn sign_in_failure(error: UpstreamError) -> Failure {
    match error {
        UpstreamError::NeedsSignIn { .. } => Failure::Other(error),
        other => Failure::Handshake(other.to_string()),
    }
}

/// Connect `spec` (an http server) once, signing in if it asks, and waiting up to `wait` for
/// the person in the browser; then close the session. What `auth login` does.
pub(crate) async fn sign_in_now(
    spec: &ServerSpec,
    wait: Duration,
    shared: Option<&crate::store::Store>,
) -> Result<usize, UpstreamError> {
    if spec.connection.kind != TransportKind::Http {
        return Err(UpstreamError::spec("type", "only `http` servers sign in"));
    }
    let remote = Remote::new(spec, shared)?.with_sign_in_wait(spec, wait)?;
    if remote.auth.is_none() {
        return Err(UpstreamError::spec(
            "headers.Authorization",
            "this server sends a fixed Authorization header; remove it to sign in instead",
        ));
    }
    let client = UpstreamClient {
        server: spec.name.clone(),
        progress: super::client::ProgressRoutes::default(),
        relist: Arc::new(tokio::sync::Notify::new()),
        pages: super::listing::PagesRead::default(),
    };
    let budget = wait + Duration::from_millis(spec.startup_timeout_ms());
    match open_http(&remote, client, budget, &CancellationToken::new()).await {
        Ok((service, listing)) => {
            let _ = service.cancel().await;
            Ok(listing.tools.len())
        }
        Err(Failure::Handshake(reason)) => Err(UpstreamError::handshake(reason)),
        Err(Failure::Other(error)) => Err(error),
    }
}

/// Open the SSE stream and complete the handshake, all before `deadline`; gives up at once
/// when the gateway shuts down.
pub(super) async fn open_sse(
    remote: &Remote,
    client: UpstreamClient,
    deadline: Instant,
    shutdown: &CancellationToken,
) -> Result<Session, Failure> {
    let budget = deadline.saturating_duration_since(Instant::now());
    let sse = SseTransport::connect(
        remote.client.clone(),
        remote.url.clone(),
        remote.headers.clone(),
        remote.server.clone(),
    );
    let transport = tokio::select! {
        connected = tokio::time::timeout_at(deadline.into(), sse) => match connected {
            Ok(connected) => connected.map_err(|e| Failure::Handshake(e.to_string()))?,
            Err(_) => return Err(Failure::Handshake(format!(
                "the SSE stream did not name its endpoint within {} ms",
                budget.as_millis()
            ))),
        },
        () = shutdown.cancelled() => return Err(Failure::Other(UpstreamError::ShuttingDown)),
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
    let http = HttpClient::new(remote.client.clone(), client.server.clone(), client.relist.clone())
        .with_auth(remote.auth.clone());
    StreamableHttpClientTransport::with_client(http, config)
}

/// `connection.headers` with `${VAR}` expanded, checked as HTTP headers, and the secrets
/// among their values.
fn http_headers(spec: &ServerSpec) -> Result<(HeaderMap, Vec<String>), UpstreamError> {
    let mut headers = HeaderMap::new();
    let mut found = Vec::new();
    for (name, written) in &spec.connection.headers {
        let field = || format!("headers.{name}");
        let value = expand::expand_env(written).map_err(|e| UpstreamError::spec(field(), e))?;
        let header = HeaderName::try_from(name.as_str()).map_err(|e| UpstreamError::spec(field(), e))?;
        // The value may be a secret: say what is wrong without echoing it.
        let mut header_value = HeaderValue::try_from(value.as_str())
            .map_err(|_| UpstreamError::spec(field(), "not a valid header value"))?;
        // `Debug` of a sensitive value prints `Sensitive`, so no trace of a request shows it.
        let secret = secrets::setting_secrets_named(name, written, &value);
        header_value.set_sensitive(!secret.is_empty());
        found.extend(secret);
        headers.insert(header, header_value);
    }
    Ok((headers, found))
}

/// The HTTP client for remote servers. Redirects are followed only within one origin:
/// reqwest would follow them anywhere, stripping only `Authorization` and cookies, so a
/// server could send our other headers (API keys) and message bodies to another host.
pub(super) fn http_client() -> Result<reqwest::Client, UpstreamError> {
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
        .map_err(|e| UpstreamError::handshake(format!("cannot build an HTTP client: {e}")))
}

/// rustls needs one process-wide crypto provider; `ring` builds everywhere without cmake.
pub(crate) fn install_crypto_provider() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // Another library in the process may have installed one already; that one is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
