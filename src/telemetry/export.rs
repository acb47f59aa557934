//! OTLP/HTTP with the JSON encoding: finished spans wait in a bounded queue; one task sends
//! them in batches (`POST {endpoint}/v1/traces`, `Content-Type: application/json`).
//!
//! Nothing here ever makes a call wait: a full queue (the collector slow or down) drops the
//! span and counts it, a failed export drops its batch and counts it, and both are told in a
//! warning at most once a minute. One export is in flight at a time, so a slow collector
//! costs at most the queue's memory.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::context::{SpanContext, SpanId};
use super::{Attribute, Kind};

/// Spans waiting for the exporter; past this, new ones are dropped.
const QUEUE_SPANS: usize = 2048;
/// Most spans in one export.
const BATCH_SPANS: usize = 512;
/// How long the first span of a batch waits for more before the batch is sent.
const BATCH_DELAY: Duration = Duration::from_millis(500);
/// One export's limit; past it the batch is dropped (the collector is too slow to keep up).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// Fewest seconds between two warnings about dropped spans.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Spans dropped since the process started (queue full, export failed), whatever tracer
/// dropped them: a reload that replaces the tracer does not reset the count `/metrics` shows.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Spans dropped so far in this process.
pub(super) fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// A span that ended, as exported.
#[derive(Debug)]
pub(super) struct Finished {
    pub context: SpanContext,
    pub parent: Option<SpanId>,
    pub name: String,
    pub kind: Kind,
    pub start_unix_nanos: u128,
    pub end_unix_nanos: u128,
    pub attributes: Vec<(&'static str, Attribute)>,
    /// Set when the operation failed: the span's status is `ERROR` with this description.
    pub error: Option<String>,
}

/// Where spans go, and how.
#[derive(Debug)]
pub(super) struct Destination {
    pub url: reqwest::Url,
    pub headers: reqwest::header::HeaderMap,
    pub service_name: String,
}

/// The bounded queue in front of the exporting task, which starts with the first span (a
/// tracer may be built before a runtime exists, as the Node API's engine is).
#[derive(Debug)]
pub(super) struct Queue {
    sender: mpsc::Sender<Finished>,
    waiting: Mutex<Option<(mpsc::Receiver<Finished>, Destination)>>,
    /// Spans queued and not yet exported (or dropped), for `flush`.
    pending: Arc<AtomicUsize>,
}

impl Queue {
    pub fn new(destination: Destination) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE_SPANS);
        Self {
            sender,
            waiting: Mutex::new(Some((receiver, destination))),
            pending: Arc::default(),
        }
    }

    /// Queue `span` for export, or drop it when the queue is full. Never waits.
    pub fn push(&self, span: Finished) {
        self.start_exporter();
        self.pending.fetch_add(1, Ordering::AcqRel);
        if self.sender.try_send(span).is_err() {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Wait until every span queued so far was exported (or dropped), at most `limit`.
    pub async fn flush(&self, limit: Duration) {
        self.start_exporter();
        let _ = tokio::time::timeout(limit, async {
            while self.pending.load(Ordering::Acquire) > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
    }

    fn start_exporter(&self) {
        let mut waiting = self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if waiting.is_none() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if let Some((receiver, destination)) = waiting.take() {
            runtime.spawn(export(receiver, destination, self.pending.clone()));
        }
    }
}

/// The exporting task: batches until every sender is gone (the tracer was replaced or the
/// process ends), then sends what is left.
async fn export(mut receiver: mpsc::Receiver<Finished>, destination: Destination, pending: Arc<AtomicUsize>) {
    crate::upstream::install_crypto_provider();
    // The configured collector only: a redirect would take the headers elsewhere.
    let client = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(EXPORT_TIMEOUT)
        .build()
    {
        Ok(client) => client,
        Err(error) => {
            tracing::warn!("telemetry is off: cannot build an HTTP client for the collector: {error}");
            return;
        }
    };
    let mut warned = Warned::default();
    let mut batch = Vec::with_capacity(BATCH_SPANS);
    loop {
        let Some(first) = receiver.recv().await else {
            return;
        };
        batch.push(first);
        let deadline = tokio::time::Instant::now() + BATCH_DELAY;
        let mut closed = false;
        while batch.len() < BATCH_SPANS {
            match tokio::time::timeout_at(deadline, receiver.recv()).await {
                Ok(Some(span)) => batch.push(span),
                Ok(None) => {
                    closed = true;
                    break;
                }
                Err(_) => break,
            }
        }
        let count = batch.len() as u64;
        let body = encode(&batch, &destination.service_name);
        batch.clear();
        let sent = send(&client, &destination, body).await;
        #[allow(clippy::cast_possible_truncation)] // at most BATCH_SPANS
        pending.fetch_sub(count as usize, Ordering::AcqRel);
        if let Err(why) = sent {
            DROPPED.fetch_add(count, Ordering::Relaxed);
            warned.tell(&why.to_string(), dropped());
        } else if dropped() > warned.told {
            warned.tell("the export queue was full", dropped());
        }
        if closed {
            return;
        }
    }
}

/// Warnings about dropped spans, at most one a minute.
#[derive(Default)]
struct Warned {
    at: Option<Instant>,
    /// Dropped spans counted in the last warning.
    told: u64,
}

impl Warned {
    fn tell(&mut self, why: &str, dropped: u64) {
        if self.at.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            return;
        }
        self.at = Some(Instant::now());
        self.told = dropped;
        let why = crate::secrets::scrub(why);
        tracing::warn!("traces: {why}; {dropped} span(s) dropped so far (calls are not affected)");
    }
}

/// Why one export failed (never with the collector's answer body, nor its URL).
#[derive(Debug, thiserror::Error)]
enum ExportFailed {
    #[error("the collector could not be reached ({0})")]
    Unreachable(#[source] reqwest::Error),
    #[error("the collector answered {0}")]
    Refused(reqwest::StatusCode),
}

/// One export.
async fn send(client: &reqwest::Client, destination: &Destination, body: Vec<u8>) -> Result<(), ExportFailed> {
    let response = client
        .post(destination.url.clone())
        .headers(destination.headers.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|error| ExportFailed::Unreachable(error.without_url()))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(ExportFailed::Refused(status))
    }
}

/// The OTLP/JSON `ExportTraceServiceRequest` of `spans`.
pub(super) fn encode(spans: &[Finished], service_name: &str) -> Vec<u8> {
    let resource = [
        ("service.name", Attribute::Str(service_name.to_owned())),
        ("service.version", Attribute::Str(env!("CARGO_PKG_VERSION").to_owned())),
        ("telemetry.sdk.name", Attribute::Str("anygpt-discovery".to_owned())),
        ("telemetry.sdk.language", Attribute::Str("rust".to_owned())),
    ];
    let request = json!({
        "resourceSpans": [{
            "resource": { "attributes": attributes(&resource) },
            "scopeSpans": [{
                "scope": { "name": "anygpt-discovery", "version": env!("CARGO_PKG_VERSION") },
                "spans": spans.iter().map(span).collect::<Vec<_>>(),
            }],
        }],
    });
    serde_json::to_vec(&request).unwrap_or_default()
}

fn span(span: &Finished) -> Value {
    let mut out = json!({
        "traceId": span.context.trace_id.hex(),
        "spanId": span.context.span_id.hex(),
        "name": span.name,
        "kind": span.kind as u8,
        // 64-bit integers are strings in OTLP/JSON.
        "startTimeUnixNano": span.start_unix_nanos.to_string(),
        "endTimeUnixNano": span.end_unix_nanos.to_string(),
        "attributes": attributes(&span.attributes),
        "status": match &span.error {
            Some(message) => json!({ "code": 2, "message": message }),
            None => json!({}),
        },
    });
    if let Some(parent) = span.parent {
        out["parentSpanId"] = Value::String(parent.hex());
    }
    if let Some(state) = &span.context.trace_state {
        out["traceState"] = Value::String(state.clone());
    }
    out
}

fn attributes(attributes: &[(&'static str, Attribute)]) -> Vec<Value> {
    attributes
        .iter()
        .map(|(key, value)| {
            let value = match value {
                Attribute::Str(text) => json!({ "stringValue": text }),
                Attribute::Int(number) => json!({ "intValue": number.to_string() }),
            };
            json!({ "key": key, "value": value })
        })
        .collect()
}
