//! The middleware in front of `/mcp`: bounds the request body, names the operation for the
//! metrics, watches the answer stream to learn how the request ended, and ends the answer
//! stream of a request its caller cancelled (`cancel`). With traces on, it also starts each
//! request's server span (`crate::telemetry`) and leaves its context for the handler.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use http_body::Frame;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::cancel::{Ids, InFlight, Registration};
use super::metrics::{Metrics, Operation, Outcome};
use crate::gateway::MAX_REQUEST_BYTES;

/// Longest SSE event kept to read an answer's outcome from; a longer one (a result of many
/// megabytes) counts as `ok` unless it says otherwise in its first bytes.
const EVENT_BYTES: usize = 64 * 1024;

/// What `observe` shares across requests.
#[derive(Debug, Clone)]
pub struct Observer {
    pub metrics: Arc<Metrics>,
    pub in_flight: Arc<InFlight>,
    /// Cancelled when the drain deadline passes.
    pub cut: CancellationToken,
    /// The longest wait for the next piece of a request body (408 past it).
    pub body_idle: Duration,
    /// Asked for its tracer per request, so a reload that turns traces on or off applies.
    pub engine: crate::engine::Engine,
}

/// Read the body (at most [`MAX_REQUEST_BYTES`], as on stdio: 413 past it), apply a
/// cancellation it carries, hand it on, and count the request once its answer has ended.
pub async fn observe(State(observer): State<Observer>, request: Request, next: Next) -> Response {
    let Observer {
        metrics,
        in_flight,
        cut,
        body_idle,
        engine,
    } = observer;
    let start = Instant::now();
    let (mut parts, body) = request.into_parts();
    let bytes = match read_body(body, body_idle).await {
        Ok(bytes) => bytes,
        Err(refusal) => {
            let operation = Operation {
                method: "other",
                tool: "",
            };
            metrics.record(operation, Outcome::rejected, start.elapsed());
            return refusal;
        }
    };
    let operation = Operation::of(&bytes);
    let ids = Ids::of(&bytes);
    // The whole identity, not the label cut for logs: two callers alike that far would
    // cancel each other's requests.
    let caller = crate::caller::Caller::identity_in(&parts.extensions);
    let mut span = engine
        .tracer()
        .map(|tracer| server_span(&tracer, &parts, &bytes, operation, ids.id.as_deref()));
    if let Some(span) = &span {
        parts
            .extensions
            .insert(crate::telemetry::Parent(span.context().clone()));
    }
    let id = ids.id.clone();
    let registration = ids.id.and_then(|id| in_flight.register(caller.clone(), id));
    let response = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    if !response.status().is_success() {
        metrics.record(operation, Outcome::rejected, start.elapsed());
        if let Some(span) = &mut span {
            span.fail(response.status().as_str());
        }
        return response;
    }
    // Only once rmcp accepted the notification: its Host, Origin and header checks come after
    // this middleware, and a page on another origin (or behind DNS rebinding) must not end the
    // user's calls with a request that is refused.
    if let Some(target) = ids.cancels {
        if in_flight.cancel(caller, target) {
            tracing::debug!("a request was cancelled by its client");
        }
    }
    let sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let (parts, body) = response.into_parts();
    let watch = Watch {
        metrics,
        operation,
        start,
        sse,
        event: Vec::new(),
        outcome: None,
        span,
        error_code: None,
    };
    Response::from_parts(
        parts,
        Body::new(Watched {
            inner: body,
            cancelled: registration.map(|r| {
                let cancelled = Box::pin(r.token.clone().cancelled_owned());
                (cancelled, r)
            }),
            cut: sse
                .then_some(id)
                .flatten()
                .map(|id| (Box::pin(cut.cancelled_owned()), id)),
            watch: Some(watch),
        }),
    )
}

/// The request body, at most [`MAX_REQUEST_BYTES`], each piece within `idle` of the one
/// before; else the answer that refuses it (413, 408, 400).
async fn read_body(body: Body, idle: Duration) -> Result<Bytes, Response> {
    let too_large = || {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "Payload Too Large: a request may have at most {MAX_REQUEST_BYTES} bytes; \
                 send large inputs as a file or resource the tool reads"
            ),
        )
            .into_response()
    };
    // A Content-Length past the limit is refused before any of the body is read (nor is a
    // client that asked `Expect: 100-continue` told to send it).
    if body.size_hint().lower() > MAX_REQUEST_BYTES as u64 {
        return Err(too_large());
    }
    let mut body = Limited::new(body, MAX_REQUEST_BYTES);
    let mut bytes = BytesMut::new();
    loop {
        match tokio::time::timeout(idle, body.frame()).await {
            Ok(None) => return Ok(bytes.freeze()),
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    bytes.extend_from_slice(data);
                }
            }
            Ok(Some(Err(error))) if error.is::<LengthLimitError>() => return Err(too_large()),
            Ok(Some(Err(_))) => {
                return Err((
                    StatusCode::BAD_REQUEST,
                    "Bad Request: the request body could not be read",
                )
                    .into_response());
            }
            Err(_) => {
                tracing::debug!("a request body stopped coming; its connection is closed");
                let mut refusal = (
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "Request Timeout: the request body stopped coming for {} s",
                        idle.as_secs_f64()
                    ),
                )
                    .into_response();
                refusal
                    .headers_mut()
                    .insert(header::CONNECTION, header::HeaderValue::from_static("close"));
                return Err(refusal);
            }
        }
    }
}

/// The server span of one request to `/mcp`, a child of the trace context the client sent.
fn server_span(
    tracer: &crate::telemetry::Tracer,
    parts: &axum::http::request::Parts,
    body: &[u8],
    operation: Operation,
    request_id: Option<&str>,
) -> crate::telemetry::Span {
    let parent = crate::telemetry::inbound(&parts.headers, body);
    let mut span = tracer.server_span(operation.method, operation.tool, request_id, parent.as_ref());
    span.set("network.transport", "tcp");
    span.set("network.protocol.name", "http");
    // Only a version of the protocol's shape (a date): the header is the client's to write.
    if let Some(version) = parts
        .headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.len() == 10 && v.bytes().all(|b| b.is_ascii_digit() || b == b'-'))
    {
        span.set("mcp.protocol.version", version);
    }
    span
}

/// The last event of an answer stream cut at the drain deadline: an error for its request, so
/// the client learns at once rather than at its own timeout.
fn cut_event(id: &str) -> Bytes {
    Bytes::from(format!(
        "data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32000,\"message\":\"the gateway is \
         shutting down and this call did not finish within discovery.http.drainTimeoutMs; it was \
         cancelled: retry it\"}}}}\n\n"
    ))
}

/// How one answer is going.
struct Watch {
    metrics: Arc<Metrics>,
    operation: Operation,
    start: Instant,
    sse: bool,
    /// The SSE event read so far (or the JSON body).
    event: Vec<u8>,
    /// The outcome of the answer, once seen.
    outcome: Option<Outcome>,
    /// The request's server span, when traced: ends with the answer.
    span: Option<crate::telemetry::Span>,
    /// The JSON-RPC error code of an `error` answer (for the span).
    error_code: Option<i64>,
}

impl Watch {
    fn feed(&mut self, chunk: &[u8]) {
        if self.outcome.is_some() {
            return;
        }
        if !self.sse {
            self.keep(chunk);
            return;
        }
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            self.keep(piece);
            if self.event.ends_with(b"\n\n") || self.event.ends_with(b"\r\n\r\n") {
                let event = std::mem::take(&mut self.event);
                self.outcome = event_outcome(&event);
                if self.outcome == Some(Outcome::error) && self.span.is_some() {
                    self.error_code = error_code(&event_data(&event));
                }
                if self.outcome.is_some() {
                    return;
                }
            }
        }
    }

    fn keep(&mut self, piece: &[u8]) {
        let room = EVENT_BYTES.saturating_sub(self.event.len());
        self.event.extend_from_slice(&piece[..piece.len().min(room)]);
        // Keep the event's end visible, so its boundary is still found past the cap.
        if piece.len() > room && piece.ends_with(b"\n") {
            self.event.push(b'\n');
        }
    }

    /// The stream ended: count it.
    fn finish(mut self, ended: bool) {
        let outcome = match (self.outcome, ended) {
            (Some(outcome), _) => outcome,
            (None, true) if !self.sse => {
                if self.span.is_some() {
                    self.error_code = error_code(&self.event);
                }
                message_outcome(&self.event).unwrap_or(Outcome::ok)
            }
            (None, true) => {
                let event = std::mem::take(&mut self.event);
                event_outcome(&event).unwrap_or(Outcome::ok)
            }
            (None, false) => Outcome::cancelled,
        };
        self.metrics.record(self.operation, outcome, self.start.elapsed());
        if let Some(mut span) = self.span.take() {
            match (outcome, self.error_code) {
                (Outcome::ok, _) => {}
                (Outcome::error, Some(code)) => {
                    span.set("rpc.response.status_code", code.to_string());
                    span.fail(&code.to_string());
                }
                (Outcome::tool_error, _) => span.fail("tool_error"),
                (Outcome::error, None) => span.fail("jsonrpc_error"),
                (Outcome::rejected, _) => span.fail("rejected"),
                (Outcome::cancelled, _) => span.fail("cancelled"),
            }
        }
    }
}

/// The `error.code` of one JSON-RPC error answer.
fn error_code(message: &[u8]) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Answer {
        error: Code,
    }
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    serde_json::from_slice::<Answer>(message.trim_ascii())
        .ok()
        .map(|a| a.error.code)
}

/// The outcome an SSE event carries, when it is an answer.
fn event_outcome(event: &[u8]) -> Option<Outcome> {
    message_outcome(&event_data(event))
}

/// The data of an SSE event (its `data:` lines joined).
fn event_data(event: &[u8]) -> Vec<u8> {
    event
        .split(|b| *b == b'\n')
        .filter_map(|line| line.strip_prefix(b"data:"))
        .flat_map(|data| data.strip_prefix(b" ").unwrap_or(data).iter().copied())
        .collect()
}

/// The outcome of one JSON-RPC message: `None` for a notification or request (not an answer).
fn message_outcome(message: &[u8]) -> Option<Outcome> {
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Option<ResultHead>,
        error: Option<serde::de::IgnoredAny>,
    }
    #[derive(serde::Deserialize)]
    struct ResultHead {
        #[serde(rename = "isError", default)]
        is_error: bool,
    }
    let text = message.trim_ascii();
    if text.is_empty() {
        return None;
    }
    match serde_json::from_slice::<Answer>(text) {
        Ok(Answer { error: Some(_), .. }) => Some(Outcome::error),
        Ok(Answer {
            result: Some(ResultHead { is_error: true }),
            ..
        }) => Some(Outcome::tool_error),
        Ok(Answer { result: Some(_), .. }) => Some(Outcome::ok),
        // Cut at EVENT_BYTES: a result too large to read whole; its head still tells an error.
        Err(_) if text.starts_with(b"{") && memchr_str(text, b"\"error\":{") => Some(Outcome::error),
        Err(_) if memchr_str(text, b"\"result\"") => Some(Outcome::ok),
        // A notification or request (not an answer), or not JSON.
        Ok(_) | Err(_) => None,
    }
}

fn memchr_str(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The answer's body, watched; it ends early when its request is cancelled.
struct Watched {
    inner: Body,
    cancelled: Option<(Pin<Box<WaitForCancellationFutureOwned>>, Registration)>,
    /// The drain deadline, and the id (JSON text) of the request to answer when it passes.
    cut: Option<(Pin<Box<WaitForCancellationFutureOwned>>, String)>,
    watch: Option<Watch>,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Some((cancelled, _)) = self.cancelled.as_mut() {
            if cancelled.as_mut().poll(cx).is_ready() {
                // Ending the answer drops rmcp's stream, which cancels the handler.
                self.cancelled = None;
                if let Some(watch) = self.watch.take() {
                    watch.finish(false);
                }
                self.inner = Body::empty();
                return Poll::Ready(None);
            }
        }
        if let Some((deadline, id)) = self.cut.as_mut() {
            if deadline.as_mut().poll(cx).is_ready() {
                let event = cut_event(id);
                self.cut = None;
                self.cancelled = None;
                if let Some(mut watch) = self.watch.take() {
                    watch.outcome = Some(Outcome::cancelled);
                    watch.finish(true);
                }
                // Dropping rmcp's stream cancels the handler; the error event is the last.
                self.inner = Body::empty();
                return Poll::Ready(Some(Ok(Frame::data(event))));
            }
        }
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(watch)) = (frame.data_ref(), self.watch.as_mut()) {
                    watch.feed(data);
                }
            }
            Poll::Ready(None) => {
                if let Some(watch) = self.watch.take() {
                    watch.finish(true);
                }
            }
            Poll::Ready(Some(Err(_))) | Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(watch) = self.watch.take() {
            // A body dropped before its end: the client went away (or the server stopped).
            let ended = self.inner.is_end_stream();
            watch.finish(ended);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_of_answers() {
        assert_eq!(
            message_outcome(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Some(Outcome::ok)
        );
        assert_eq!(
            message_outcome(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#),
            Some(Outcome::tool_error)
        );
        assert_eq!(
            message_outcome(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}"#),
            Some(Outcome::error)
        );
        assert_eq!(
            message_outcome(br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#),
            None
        );
        assert_eq!(
            event_outcome(b"id: 0\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"isError\":true}}\n\n"),
            Some(Outcome::tool_error)
        );
    }
}
