//! telemetry — OpenTelemetry traces of the gateway's MCP requests (`discovery.telemetry`, off
//! unless an endpoint is set).
//!
//! Owns: the W3C Trace Context a client sends (`context`: a `traceparent`/`tracestate` header,
//! or `_meta.traceparent` as the MCP spec's OpenTelemetry guidance puts it), the spans (a
//! server span per MCP request, a client span per downstream call, named and attributed by
//! OpenTelemetry's MCP semantic conventions), sampling, and their export over OTLP/HTTP JSON
//! (`export`). The HTTP face starts the server span (`crate::http`'s `observe`), the engine
//! the client span and the `traceparent` it sends downstream in `_meta`.
//!
//! What a span may hold is fixed here: method, tool and server names (from the catalog, never
//! what a client made up), request ids, outcome words and error codes. Tool arguments and
//! results never become attributes, and every text is bounded and scrubbed of known secrets.

mod context;
mod export;

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub use context::{SpanContext, SpanId, TraceId};

use crate::config::expand::ExpandError;
use crate::config::TelemetrySpec;

/// Spans dropped since the process started because the collector was slow or down (the
/// queue was full, or an export failed).
#[must_use]
pub fn dropped_spans() -> u64 {
    export::dropped()
}

/// Longest text attribute kept (a longer one is cut).
const MAX_ATTRIBUTE_CHARS: usize = 256;

/// Why traces cannot be exported as configured.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("{place}: {source}")]
    Expand {
        place: String,
        #[source]
        source: ExpandError,
    },
    #[error("discovery.telemetry.endpoint: {reason}")]
    Endpoint { reason: String },
    #[error("discovery.telemetry.headers.{name}: the value is not a valid HTTP header value")]
    Header { name: String },
}

/// The kind of a span (OTLP's `SpanKind` numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A request this process answers.
    Server = 2,
    /// A request this process sends (to a downstream server).
    Client = 3,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attribute {
    Str(String),
    Int(i64),
}

impl From<&str> for Attribute {
    fn from(text: &str) -> Self {
        Self::Str(bounded(text))
    }
}

impl From<String> for Attribute {
    fn from(text: String) -> Self {
        Self::Str(bounded(&text))
    }
}

impl From<i64> for Attribute {
    fn from(number: i64) -> Self {
        Self::Int(number)
    }
}

/// At most [`MAX_ATTRIBUTE_CHARS`], with every registered secret taken out.
fn bounded(text: &str) -> String {
    let cut = match text.char_indices().nth(MAX_ATTRIBUTE_CHARS) {
        Some((end, _)) => &text[..end],
        None => text,
    };
    crate::secrets::scrub(cut).into_owned()
}

/// Makes spans and hands the finished ones to the exporter. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Tracer(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    spec: TelemetrySpec,
    /// A new trace is recorded when its id's random part is below this (ratio × 2⁶⁴).
    threshold: u64,
    always: bool,
    queue: export::Queue,
}

impl Tracer {
    /// The tracer `spec` describes: `None` when traces are off. Header values and the
    /// endpoint are expanded now (`${VAR}`, `${secret:NAME}`) and registered as secrets.
    ///
    /// # Errors
    /// A reference that cannot be expanded, an endpoint or header value that is not valid.
    pub fn from_spec(spec: &TelemetrySpec) -> Result<Option<Self>, TelemetryError> {
        let Some(endpoint) = &spec.endpoint else {
            return Ok(None);
        };
        let expand = |place: String, text: &str| {
            crate::config::expand::expand_env(text).map_err(|source| TelemetryError::Expand { place, source })
        };
        let endpoint = expand("discovery.telemetry.endpoint".to_owned(), endpoint)?;
        let url = traces_url(&endpoint)?;
        let mut secrets = crate::secrets::url_secrets(&url);
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, written) in &spec.headers {
            let value = expand(format!("discovery.telemetry.headers.{name}"), written)?;
            secrets.extend(crate::secrets::setting_secrets_named(name, written, &value));
            secrets.extend(crate::secrets::header_secrets(&format!("{name}: {value}")));
            let bad = || TelemetryError::Header { name: name.clone() };
            let header = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
            let mut value = reqwest::header::HeaderValue::from_str(value.trim()).map_err(|_| bad())?;
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        crate::secrets::register("telemetry", secrets);
        let ratio = spec.sampling_ratio().clamp(0.0, 1.0);
        // Exact at both ends; in between, the share of ids below ratio × 2⁶⁴.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let threshold = (ratio * u64::MAX as f64) as u64;
        let queue = export::Queue::new(export::Destination {
            url,
            headers,
            service_name: spec.service_name().to_owned(),
        });
        Ok(Some(Self(Arc::new(Inner {
            spec: spec.clone(),
            threshold,
            always: ratio >= 1.0,
            queue,
        }))))
    }

    /// The tracer for a reloaded config: this one when `spec` did not change (its queue and
    /// exporter go on), else a new one (the old exporter sends what it holds and ends).
    ///
    /// # Errors
    /// As [`Tracer::from_spec`].
    pub fn reloaded(previous: Option<&Self>, spec: &TelemetrySpec) -> Result<Option<Self>, TelemetryError> {
        match previous {
            Some(tracer) if tracer.0.spec == *spec => Ok(Some(tracer.clone())),
            _ => Self::from_spec(spec),
        }
    }

    /// Wait until the spans ended so far are exported (or dropped), at most `limit`: the
    /// last requests before a stop are not lost.
    pub async fn flush(&self, limit: std::time::Duration) {
        self.0.queue.flush(limit).await;
    }

    /// Start a span: a child of `parent` (same trace, its sampling decision), else the root of
    /// a new trace sampled by the configured ratio. An unsampled span records nothing, but
    /// still has a context to pass on.
    #[must_use]
    pub fn start(&self, name: String, kind: Kind, parent: Option<&SpanContext>) -> Span {
        let (trace_id, sampled, trace_state) = if let Some(parent) = parent {
            (parent.trace_id, parent.sampled, parent.trace_state.clone())
        } else {
            let id = TraceId::random();
            (id, self.0.always || id.low() < self.0.threshold, None)
        };
        Span {
            recorder: sampled.then(|| self.clone()),
            context: SpanContext {
                trace_id,
                span_id: SpanId::random(),
                sampled,
                trace_state,
            },
            parent: parent.map(|p| p.span_id),
            name,
            kind,
            start_unix_nanos: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
            started: Instant::now(),
            attributes: Vec::new(),
            error: None,
        }
    }

    /// The server span of one MCP request: named `{mcp.method.name} {target}` (the tool of a
    /// `tools/call`), with the method, tool and request id.
    #[must_use]
    pub fn server_span(
        &self,
        method: &str,
        tool: &str,
        request_id: Option<&str>,
        parent: Option<&SpanContext>,
    ) -> Span {
        let name = if tool.is_empty() {
            method.to_owned()
        } else {
            format!("{method} {tool}")
        };
        let mut span = self.start(name, Kind::Server, parent);
        span.set("mcp.method.name", method);
        if !tool.is_empty() {
            span.set("gen_ai.tool.name", tool);
            span.set("gen_ai.operation.name", "execute_tool");
        }
        if let Some(id) = request_id {
            // The id as the client wrote it: a JSON string loses its quotes.
            span.set("jsonrpc.request.id", id.trim_matches('"'));
        }
        span
    }

    /// The client span of one downstream `tools/call` of `server`'s `tool`.
    #[must_use]
    pub fn tool_call_span(&self, server: &str, tool: &str, parent: Option<&SpanContext>) -> Span {
        let mut span = self.start(format!("tools/call {tool}"), Kind::Client, parent);
        span.set("mcp.method.name", "tools/call");
        span.set("gen_ai.tool.name", tool);
        span.set("gen_ai.operation.name", "execute_tool");
        // Which configured server: its name in the config, never its URL or command line.
        span.set("anygpt.discovery.server", server);
        span
    }
}

/// A span under way; it ends (and is queued for export, when sampled) when dropped.
#[derive(Debug)]
pub struct Span {
    /// The tracer that exports it; `None` when the trace is not sampled.
    recorder: Option<Tracer>,
    context: SpanContext,
    parent: Option<SpanId>,
    name: String,
    kind: Kind,
    start_unix_nanos: u128,
    started: Instant,
    attributes: Vec<(&'static str, Attribute)>,
    error: Option<String>,
}

impl Span {
    /// Where this span sits: the parent of its children, and the `traceparent` to send on.
    #[must_use]
    pub fn context(&self) -> &SpanContext {
        &self.context
    }

    /// Set an attribute (replacing one of the same key). Nothing is kept when not sampled.
    pub fn set(&mut self, key: &'static str, value: impl Into<Attribute>) {
        if self.recorder.is_none() {
            return;
        }
        let value = value.into();
        match self.attributes.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.attributes.push((key, value)),
        }
    }

    /// The operation failed: `error.type` (a low-cardinality word or code) and an error status.
    pub fn fail(&mut self, error_type: &str) {
        if self.recorder.is_none() {
            return;
        }
        self.set("error.type", error_type);
        self.error = Some(bounded(error_type));
    }

    /// End the span now (as dropping it does).
    pub fn end(self) {}
}

impl Drop for Span {
    fn drop(&mut self) {
        let Some(tracer) = self.recorder.take() else {
            return;
        };
        let elapsed = self.started.elapsed().as_nanos();
        tracer.0.queue.push(export::Finished {
            context: self.context.clone(),
            parent: self.parent,
            name: std::mem::take(&mut self.name),
            kind: self.kind,
            start_unix_nanos: self.start_unix_nanos,
            end_unix_nanos: self.start_unix_nanos + elapsed,
            attributes: std::mem::take(&mut self.attributes),
            error: self.error.take(),
        });
    }
}

/// `{endpoint}/v1/traces`, unless the endpoint already names that path (the OTLP exporters'
/// rule for the signal-specific endpoint).
fn traces_url(endpoint: &str) -> Result<reqwest::Url, TelemetryError> {
    let mut url = reqwest::Url::parse(endpoint.trim()).map_err(|e| TelemetryError::Endpoint {
        reason: format!("not a URL ({e})"),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(TelemetryError::Endpoint {
            reason: "must be an http:// or https:// URL (OTLP/HTTP)".to_owned(),
        });
    }
    if !url.path().ends_with("/v1/traces") {
        let path = format!("{}/v1/traces", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    Ok(url)
}

/// The trace context a request to the HTTP face carries: the `traceparent` (and `tracestate`)
/// header, else the request's `params._meta.traceparent`. `None` when absent or malformed.
#[must_use]
pub fn inbound(headers: &http::HeaderMap, body: &[u8]) -> Option<SpanContext> {
    let header = |name: &str| {
        let mut values = headers.get_all(name).iter();
        // Several `traceparent` headers are ambiguous: none is trusted.
        let first = values.next()?;
        if name == "traceparent" && values.next().is_some() {
            return None;
        }
        first.to_str().ok()
    };
    if let Some(traceparent) = header("traceparent") {
        return SpanContext::parse(traceparent, header("tracestate"));
    }
    in_meta(body)
}

/// `params._meta.traceparent` (and `tracestate`) of one JSON-RPC request body.
fn in_meta(body: &[u8]) -> Option<SpanContext> {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow)]
        params: Option<Params<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(rename = "_meta", borrow)]
        meta: Option<Meta<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Meta<'a> {
        #[serde(borrow)]
        traceparent: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow)]
        tracestate: Option<std::borrow::Cow<'a, str>>,
    }
    let meta = serde_json::from_slice::<Head<'_>>(body).ok()?.params?.meta?;
    SpanContext::parse(meta.traceparent.as_deref()?, meta.tracestate.as_deref())
}

/// The trace of one `execute_tool` as the gateway handler sees it. Over HTTP the face's
/// server span is the parent of the downstream call; over stdio, where no face makes one, a
/// server span starts here, a child of the `_meta.traceparent` the client sent.
#[derive(Debug)]
pub struct CallTrace {
    span: Option<Span>,
    parent: Option<SpanContext>,
}

impl CallTrace {
    #[must_use]
    pub fn of(tracer: Option<&Tracer>, context: &rmcp::service::RequestContext<rmcp::RoleServer>, tool: &str) -> Self {
        let Some(tracer) = tracer else {
            return Self {
                span: None,
                parent: None,
            };
        };
        if context.extensions.get::<http::request::Parts>().is_some() {
            let parent = Parent::of_request(&context.extensions, &context.meta);
            return Self { span: None, parent };
        }
        let inbound = SpanContext::parse(
            context.meta.get_traceparent().unwrap_or_default(),
            context.meta.get_tracestate(),
        );
        let id = match &context.id {
            rmcp::model::NumberOrString::Number(n) => n.to_string(),
            rmcp::model::NumberOrString::String(s) => s.to_string(),
        };
        let mut span = tracer.server_span("tools/call", tool, Some(&id), inbound.as_ref());
        span.set("network.transport", "pipe");
        Self {
            parent: Some(span.context().clone()),
            span: Some(span),
        }
    }

    /// The parent of the downstream call's span.
    #[must_use]
    pub fn parent(&self) -> Option<SpanContext> {
        self.parent.clone()
    }

    /// The call ended with `outcome`: the stdio server span ends with it.
    pub fn end(self, outcome: &crate::error::Result<rmcp::model::CallToolResult>) {
        if let Some(mut span) = self.span {
            match outcome {
                Ok(result) if result.is_error == Some(true) => span.fail("tool_error"),
                Ok(_) => {}
                Err(error) => span.fail(error.code().as_str()),
            }
        }
    }
}

/// The server span's context, left by the HTTP face in the request's extensions for the
/// handler: the parent of the downstream calls the request makes.
#[derive(Debug, Clone)]
pub struct Parent(pub SpanContext);

impl Parent {
    /// The parent of what a handler calls downstream: the HTTP face's server span, or (over
    /// stdio, where no server span is made) the `_meta.traceparent` the client sent.
    #[must_use]
    pub fn of_request(extensions: &rmcp::model::Extensions, meta: &rmcp::model::MetaObject) -> Option<SpanContext> {
        if let Some(parts) = extensions.get::<http::request::Parts>() {
            return parts.extensions.get::<Self>().map(|p| p.0.clone());
        }
        SpanContext::parse(meta.get_traceparent()?, meta.get_tracestate())
    }
}

#[cfg(test)]
mod tests;
