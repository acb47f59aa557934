//! The legacy HTTP+SSE client transport (MCP 2024-11-05), for servers that predate
//! streamable HTTP. rmcp 3.x only ships a streamable-HTTP client, so this is ours.
//!
//! The protocol: `GET <url>` opens a Server-Sent Events stream whose first `endpoint` event
//! names the URL to `POST` each client message to; every server message arrives on the stream
//! as a `message` event. The endpoint must share the stream's origin, so a server cannot
//! redirect the client's messages (and its headers, which may carry a token) elsewhere.

use std::borrow::Cow;
use std::future::Future;

use futures::StreamExt;
use reqwest::header::{HeaderMap, ACCEPT};
use reqwest::{StatusCode, Url};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use sse_stream::SseStream;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::error::UpstreamError;
use super::lines::MAX_LINE_BYTES;
use super::url_text::{shown, with_causes};

/// How many server messages may wait for the session to read them.
const INCOMING_BUFFER: usize = 64;

/// The most one event may take before the stream is dropped: the event parser buffers a
/// whole event, so a `data:` line that never ends would otherwise grow without bound
/// (the largest message a stdio server may send, plus room for the field names).
const MAX_EVENT_BYTES: usize = MAX_LINE_BYTES + 4096;

/// Why a message could not be posted.
#[derive(Debug, thiserror::Error)]
pub enum SseSendError {
    #[error("POST {endpoint}: {source}")]
    Http { endpoint: String, source: reqwest::Error },
    #[error("POST {endpoint} answered {status}")]
    Status { endpoint: String, status: StatusCode },
}

/// One open SSE session: the stream is read by a task; messages are posted to `endpoint`.
pub struct SseTransport {
    client: reqwest::Client,
    headers: HeaderMap,
    endpoint: Url,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    /// Stops the stream reader when the transport goes away.
    _reader: DropGuard,
}

impl SseTransport {
    /// Open the event stream at `url` and wait for its `endpoint` event.
    ///
    /// # Errors
    /// Connection failures, a non-success status, a response that is not an event stream,
    /// or a stream that ends (or names another origin) before saying where to post.
    pub async fn connect(
        client: reqwest::Client,
        url: Url,
        headers: HeaderMap,
        server: String,
    ) -> Result<Self, UpstreamError> {
        let shown_url = shown(&url);
        let response = client
            .get(url.clone())
            .headers(headers.clone())
            .header(ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| UpstreamError::handshake(format!("GET {shown_url}: {}", with_causes(&e.without_url()))))?;
        let status = response.status();
        if !status.is_success() {
            return Err(UpstreamError::handshake(format!("GET {shown_url} answered {status}")));
        }
        if !is_event_stream(response.headers()) {
            return Err(UpstreamError::handshake(format!(
                "GET {shown_url} did not answer with an event stream (text/event-stream)"
            )));
        }
        // Same-origin redirects may have moved the stream: the endpoint is relative to where
        // it ended up.
        let url = response.url().clone();
        let mut events = SseStream::from_bytes_stream(bounded(response.bytes_stream(), server.clone()));
        let endpoint = loop {
            match events.next().await {
                Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                    let data = event.data.as_deref().unwrap_or_default();
                    if data.trim().is_empty() {
                        return Err(UpstreamError::handshake(format!(
                            "GET {shown_url}: the `endpoint` event names no URL"
                        )));
                    }
                    break resolve_endpoint(&url, data)?;
                }
                // Comments, keep-alives and anything sent before the endpoint carry nothing for us.
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    return Err(UpstreamError::handshake(format!(
                        "GET {shown_url}: the event stream broke: {e}"
                    )))
                }
                None => {
                    return Err(UpstreamError::handshake(format!(
                        "GET {shown_url}: the event stream ended before an `endpoint` event"
                    )));
                }
            }
        };
        let (sender, incoming) = mpsc::channel(INCOMING_BUFFER);
        let stop = CancellationToken::new();
        tokio::spawn(read_messages(events, sender, stop.clone(), server));
        Ok(Self {
            client,
            headers,
            endpoint,
            incoming,
            _reader: stop.drop_guard(),
        })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseSendError;

    fn name() -> Cow<'static, str> {
        "sse".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let endpoint = shown(&self.endpoint);
        let request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .json(&item);
        async move {
            let response = request.send().await.map_err(|source| SseSendError::Http {
                endpoint: endpoint.clone(),
                source: source.without_url(),
            })?;
            let status = response.status();
            if status.is_success() {
                Ok(())
            } else {
                Err(SseSendError::Status { endpoint, status })
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
}

/// Forward every `message` event until the stream ends, breaks or the transport is dropped;
/// the sender going away is how the session learns the stream is gone.
async fn read_messages<S>(
    mut events: S,
    sender: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
    stop: CancellationToken,
    server: String,
) where
    S: futures::Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Unpin,
{
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            () = stop.cancelled() => return,
        };
        let event = match event {
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                tracing::warn!(server = %server, "SSE stream broke: {e}");
                return;
            }
            None => return,
        };
        // Events without a name are `message` events (the SSE default).
        if !matches!(event.event.as_deref(), None | Some("message")) {
            continue;
        }
        let Some(data) = event.data else { continue };
        match serde_json::from_str(&data) {
            Ok(message) => {
                if sender.send(message).await.is_err() {
                    return;
                }
            }
            Err(e) => tracing::warn!(server = %server, "ignoring an SSE message that is not JSON-RPC: {e}"),
        }
    }
}

/// `bytes` until one event (the bytes since the last blank line) grows past
/// [`MAX_EVENT_BYTES`]; then the stream ends, which ends the session with a warning.
fn bounded<S, E>(bytes: S, server: String) -> impl futures::Stream<Item = Result<bytes::Bytes, E>>
where
    S: futures::Stream<Item = Result<bytes::Bytes, E>>,
{
    let (mut in_event, mut after_newline) = (0usize, false);
    bytes.take_while(move |chunk| {
        if let Ok(chunk) = chunk {
            for &byte in chunk {
                match byte {
                    b'\n' if after_newline => in_event = 0,
                    b'\n' => after_newline = true,
                    b'\r' => {}
                    _ => after_newline = false,
                }
                in_event += 1;
            }
        }
        let within = in_event <= MAX_EVENT_BYTES;
        if !within {
            tracing::warn!(server = %server, "an SSE event exceeded {MAX_EVENT_BYTES} bytes; closing the stream");
        }
        futures::future::ready(within)
    })
}

fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("text/event-stream"))
}

/// The `endpoint` event's data, relative to the stream's URL, on the same origin.
fn resolve_endpoint(stream: &Url, data: &str) -> Result<Url, UpstreamError> {
    let endpoint = stream
        .join(data.trim())
        .map_err(|e| UpstreamError::handshake(format!("the SSE `endpoint` event is not a URL ({data:?}): {e}")))?;
    if endpoint.origin() != stream.origin() {
        return Err(UpstreamError::handshake(format!(
            "the SSE `endpoint` event points at another origin ({}) than the stream ({})",
            endpoint.origin().ascii_serialization(),
            stream.origin().ascii_serialization()
        )));
    }
    Ok(endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn endpoint_resolves_relative_to_the_stream() {
        let stream = url("http://127.0.0.1:3001/sse");
        assert_eq!(
            resolve_endpoint(&stream, "/message?sessionId=abc").unwrap().as_str(),
            "http://127.0.0.1:3001/message?sessionId=abc"
        );
        assert_eq!(
            resolve_endpoint(&url("http://h/mcp/sse"), "messages?x=1")
                .unwrap()
                .as_str(),
            "http://h/mcp/messages?x=1"
        );
        assert_eq!(
            resolve_endpoint(&stream, " http://127.0.0.1:3001/m \n")
                .unwrap()
                .as_str(),
            "http://127.0.0.1:3001/m"
        );
    }

    #[test]
    fn endpoint_on_another_origin_is_refused() {
        let stream = url("https://api.example.com/sse");
        for other in [
            "https://evil.example.com/m",
            "http://api.example.com/m",
            "https://api.example.com:8443/m",
        ] {
            let error = resolve_endpoint(&stream, other).unwrap_err();
            assert!(error.to_string().contains("another origin"), "{other}: {error}");
        }
    }

    #[tokio::test]
    async fn an_endless_event_ends_the_stream_and_normal_ones_pass() {
        let chunk = |s: &str| Ok::<_, std::io::Error>(bytes::Bytes::from(s.to_owned()));
        let small = futures::stream::iter(vec![chunk("data: a\n\n"), chunk("data: b\n\n")]);
        assert_eq!(bounded(small, "t".into()).collect::<Vec<_>>().await.len(), 2);
        let endless = futures::stream::iter((0..20).map(|_| chunk(&"x".repeat(1024 * 1024))));
        let kept = bounded(futures::stream::iter(vec![chunk("data: ")]).chain(endless), "t".into())
            .collect::<Vec<_>>()
            .await;
        assert!(
            kept.len() <= 17,
            "{} chunks of an endless event were passed on",
            kept.len()
        );
    }

    #[test]
    fn only_event_streams_are_accepted() {
        let mut headers = HeaderMap::new();
        assert!(!is_event_stream(&headers));
        headers.insert(reqwest::header::CONTENT_TYPE, "text/html".parse().unwrap());
        assert!(!is_event_stream(&headers));
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            "Text/Event-Stream; charset=utf-8".parse().unwrap(),
        );
        assert!(is_event_stream(&headers));
    }
}
