//! `/metrics`: what the team face counts, in the Prometheus text format.
//!
//! Every label is bounded: MCP methods come from a fixed list (anything else is `other`), tool
//! names are the gateway's own tools (anything else is `other`), outcomes are a closed set, and
//! server names come from the config. No argument, token or header value is ever a label.
//! Names follow the OpenTelemetry MCP semantic conventions where they exist
//! (`mcp.server.operation.duration` → `mcp_server_operation_duration_seconds`, attributes
//! `mcp.method.name` and `gen_ai.tool.name`).
//!
//! To add a family: give [`Metrics`] a field, register it in [`Metrics::new`], and update it
//! where the value is known (per request in `observe`, per scrape in [`Metrics::refresh`]).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::engine::{Engine, ServerStatus};

/// MCP methods counted by name; any other method is `other`, so a client cannot grow the label
/// set by sending made-up methods.
const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
];

/// How a request ended.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Outcome {
    /// A result (or an accepted notification).
    ok,
    /// A tool result with `isError: true` (the tool, or the gateway on its behalf, failed).
    tool_error,
    /// A JSON-RPC error.
    error,
    /// Refused before reaching the handler: Host/Origin, size, headers, method (HTTP 4xx/5xx).
    rejected,
    /// The client closed the response stream before the answer.
    cancelled,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    mcp_method_name: &'static str,
    gen_ai_tool_name: &'static str,
    outcome: Outcome,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
    state: &'static str,
}

/// A downstream call's labels: the configured server, a tool of its catalog (the engine's
/// statistics keep at most 4,096 pairs apart, the rest under `(other)`), and an outcome from a
/// closed set (`ok`, `tool_error`, or an error code).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    server: String,
    tool: String,
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    server: String,
    tool: String,
}

/// What one request to `/mcp` is about, read from its body: bounded names only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    pub method: &'static str,
    /// The tool of a `tools/call`: one of the gateway's, else `other`; empty for other methods.
    pub tool: &'static str,
}

impl Operation {
    /// The operation of a JSON-RPC body; `other` when it is not one message with a method.
    #[must_use]
    pub fn of(body: &[u8]) -> Self {
        #[derive(serde::Deserialize)]
        struct Head<'a> {
            #[serde(borrow)]
            method: Option<std::borrow::Cow<'a, str>>,
            params: Option<Params<'a>>,
        }
        #[derive(serde::Deserialize)]
        struct Params<'a> {
            #[serde(borrow)]
            name: Option<std::borrow::Cow<'a, str>>,
        }
        let Ok(head) = serde_json::from_slice::<Head<'_>>(body) else {
            return Self {
                method: "other",
                tool: "",
            };
        };
        let method = head
            .method
            .as_deref()
            .and_then(|m| METHODS.iter().find(|known| **known == m))
            .copied()
            .unwrap_or("other");
        let tool = if method == "tools/call" {
            let name = head.params.and_then(|p| p.name);
            crate::gateway::definitions()
                .iter()
                .map(|tool| tool.name.as_ref())
                .find(|known| Some(*known) == name.as_deref())
                .map_or("other", tool_label)
        } else {
            ""
        };
        Self { method, tool }
    }
}

/// A meta-tool's name as a `'static` label.
fn tool_label(name: &str) -> &'static str {
    match name {
        "search_tools" => "search_tools",
        "get_tool_details" => "get_tool_details",
        "execute_tool" => "execute_tool",
        "list_tools" => "list_tools",
        "list_mcp_servers" => "list_mcp_servers",
        _ => "other",
    }
}

/// Whether a downstream `(server, tool)` is hidden from the caller scraping `/metrics`
/// (toolRules with `callers`): its counters are left out of that caller's answer.
pub type Hidden<'a> = &'a (dyn Fn(&str, &str) -> bool + Sync);

/// The team face's metric families and their registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    families: Families,
    /// One scrape at a time brings the counters up to date (each adds what is new).
    refreshing: Mutex<()>,
    engine: Engine,
}

/// Every family (a clone shares the counts).
#[derive(Debug, Clone)]
struct Families {
    requests: Family<RequestLabels, Counter>,
    duration: Family<RequestLabels, Histogram>,
    search: Histogram,
    servers: Family<ServerLabels, Gauge>,
    /// The engine's call statistics (`crate::stats`, the counters `stats` and `getStats()`
    /// show), brought up to date at each scrape.
    calls: Family<CallLabels, Counter>,
    call_seconds: Family<ToolLabels, Counter<f64, AtomicU64>>,
    /// Spans the trace exporter dropped (`crate::telemetry`), brought up to date at each scrape.
    spans_dropped: Counter,
    /// Tool texts this process embedded itself (`search::semantic`), at each scrape.
    embedded: Counter,
    /// 1 while the shared store answers, 0 while it does not (absent without one).
    store_up: Family<StoreLabels, Gauge>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    store: String,
}

/// Request latencies from 1 ms to about 65 s.
fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.001, 2.0, 17)
}

/// The call totals of the engine's statistics, by their labels.
type CallTotals = (HashMap<CallLabels, u64>, HashMap<ToolLabels, f64>);

impl Families {
    fn new() -> Self {
        Self {
            requests: Family::default(),
            duration: Family::new_with_constructor((|| Histogram::new(latency_buckets())) as fn() -> Histogram),
            search: Histogram::new(exponential_buckets(0.0001, 2.0, 16)),
            servers: Family::default(),
            calls: Family::default(),
            call_seconds: Family::default(),
            spans_dropped: Counter::default(),
            embedded: Counter::default(),
            store_up: Family::default(),
        }
    }

    /// A registry of these families.
    fn registry(&self) -> Registry {
        let mut registry = Registry::default();
        registry.register(
            "discovery_semantic_embedded",
            "Tool texts this process embedded itself (not read from its vector cache or the shared store)",
            self.embedded.clone(),
        );
        registry.register(
            "discovery_store_up",
            "1 while the shared store (discovery.store) answers, 0 while it does not",
            self.store_up.clone(),
        );
        registry.register(
            "discovery_trace_spans_dropped",
            "Trace spans dropped because the OTLP collector was slow or down (discovery.telemetry)",
            self.spans_dropped.clone(),
        );
        registry.register(
            "discovery_downstream_calls",
            "Tool calls (execute_tool and tools shown directly) by server, tool and outcome: ok, tool_error, or the error code the gateway answered",
            self.calls.clone(),
        );
        registry.register(
            "discovery_downstream_call_duration_seconds",
            "Time spent in downstream tool calls, by server and tool (with the calls, the mean)",
            self.call_seconds.clone(),
        );
        registry.register(
            "mcp_server_requests",
            "MCP requests served over HTTP, by method, tool and outcome",
            self.requests.clone(),
        );
        registry.register(
            "mcp_server_operation_duration_seconds",
            "Time from an MCP request's arrival to the end of its answer",
            self.duration.clone(),
        );
        registry.register(
            "discovery_search_duration_seconds",
            "Time to answer search_tools",
            self.search.clone(),
        );
        registry.register(
            "discovery_server_status",
            "1 for each configured server's current state",
            self.servers.clone(),
        );
        registry
    }

    /// Bring the call counters up to `totals`: each counter gets what it lacks (the
    /// statistics only grow while the engine lives).
    fn raise_calls(&self, (calls, seconds): CallTotals) {
        for (labels, count) in calls {
            let counter = self.calls.get_or_create(&labels);
            if let Some(missing) = count.checked_sub(counter.get()).filter(|n| *n > 0) {
                counter.inc_by(missing);
            }
        }
        for (labels, total) in seconds {
            let counter = self.call_seconds.get_or_create(&labels);
            let missing = total - counter.get();
            if missing > 0.0 {
                counter.inc_by(missing);
            }
        }
    }
}

impl Metrics {
    #[must_use]
    pub fn new(engine: Engine) -> Arc<Self> {
        let families = Families::new();
        Arc::new(Self {
            registry: families.registry(),
            families,
            refreshing: Mutex::new(()),
            engine,
        })
    }

    /// Count one finished request.
    pub fn record(&self, operation: Operation, outcome: Outcome, elapsed: Duration) {
        let labels = RequestLabels {
            mcp_method_name: operation.method,
            gen_ai_tool_name: operation.tool,
            outcome,
        };
        self.families.requests.get_or_create(&labels).inc();
        self.families
            .duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        if operation.tool == "search_tools" && outcome != Outcome::rejected {
            self.families.search.observe(elapsed.as_secs_f64());
        }
    }

    /// Read what is only known at scrape time (server states, the engine's call statistics).
    fn refresh(&self) {
        let _one_at_a_time = self.refreshing.lock().unwrap_or_else(PoisonError::into_inner);
        self.families.raise_calls(self.call_totals());
        let dropped = crate::telemetry::dropped_spans();
        let spans_dropped = &self.families.spans_dropped;
        spans_dropped.inc_by(dropped.saturating_sub(spans_dropped.get()));
        let embedded = &self.families.embedded;
        embedded.inc_by(self.engine.semantic_embedded().saturating_sub(embedded.get()));
        let store = self.engine.store_health();
        if store.shared {
            self.families
                .store_up
                .get_or_create(&StoreLabels { store: store.at })
                .set(i64::from(store.up));
        }
        let servers = &self.families.servers;
        servers.clear();
        for server in self.engine.server_statuses() {
            let state = state_label(server.status);
            servers
                .get_or_create(&ServerLabels {
                    server: server.name,
                    state,
                })
                .set(1);
        }
    }

    /// The engine's call statistics by their labels. Calls of a server or tool that does not
    /// exist are counted under `(unknown)`: those names are whatever a client typed.
    fn call_totals(&self) -> CallTotals {
        let mut calls: HashMap<CallLabels, u64> = HashMap::new();
        let mut seconds: HashMap<ToolLabels, f64> = HashMap::new();
        for tool in self.engine.stats(None).tools {
            let known = ToolLabels {
                server: tool.server.clone(),
                tool: tool.tool.clone(),
            };
            let outcomes = [("ok", tool.ok), ("tool_error", tool.tool_errors)]
                .into_iter()
                .map(|(outcome, n)| (outcome.to_owned(), n))
                .chain(tool.errors.iter().map(|(code, n)| (code.clone(), *n)));
            for (outcome, count) in outcomes.filter(|(_, n)| *n > 0) {
                let named = labels_for(&known, &outcome);
                *calls
                    .entry(CallLabels {
                        server: named.server,
                        tool: named.tool,
                        outcome,
                    })
                    .or_default() += count;
            }
            *seconds.entry(labels_for(&known, "")).or_default() += tool.total_ms / 1000.0;
        }
        (calls, seconds)
    }

    /// The `OpenMetrics` text of every family; without the calls of tools `hidden` from the
    /// caller scraping, when some are (a caller must not learn of a tool hidden from them
    /// through what others called).
    #[must_use]
    pub fn openmetrics(&self, hidden: Option<Hidden<'_>>) -> String {
        self.refresh();
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = match hidden {
            None => prometheus_client::encoding::text::encode(&mut text, &self.registry),
            Some(hidden) => {
                let visible = self.without(hidden);
                prometheus_client::encoding::text::encode(&mut text, &visible.registry())
            }
        };
        text
    }

    /// The families as they are, but for call counters of their own that leave out the tools
    /// `hidden` says.
    fn without(&self, hidden: Hidden<'_>) -> Families {
        let visible = Families {
            calls: Family::default(),
            call_seconds: Family::default(),
            ..self.families.clone()
        };
        let (mut calls, mut seconds) = self.call_totals();
        calls.retain(|labels, _| !hidden(&labels.server, &labels.tool));
        seconds.retain(|labels, _| !hidden(&labels.server, &labels.tool));
        visible.raise_calls((calls, seconds));
        visible
    }

    /// The Prometheus text format (0.0.4) of every family: what a scraper that does not ask
    /// for `OpenMetrics` gets.
    #[must_use]
    pub fn prometheus(&self, hidden: Option<Hidden<'_>>) -> String {
        to_prometheus_text(&self.openmetrics(hidden))
    }
}

/// The labels a call of `tool` is counted under: its names, or `(unknown)` for a server or
/// tool that was not found (the caller chose those names, so they are not fit for a label).
fn labels_for(tool: &ToolLabels, outcome: &str) -> ToolLabels {
    const UNKNOWN: &str = "(unknown)";
    match outcome {
        "SERVER_NOT_FOUND" => ToolLabels {
            server: UNKNOWN.to_owned(),
            tool: UNKNOWN.to_owned(),
        },
        "TOOL_NOT_FOUND" => ToolLabels {
            server: tool.server.clone(),
            tool: UNKNOWN.to_owned(),
        },
        _ => tool.clone(),
    }
}

/// A server's status word as a `'static` label (the words are the supervisor's).
fn state_label(status: ServerStatus) -> &'static str {
    // Label values in Prometheus' own style (no spaces).
    match status {
        ServerStatus::Idle => "idle",
        ServerStatus::Connecting => "connecting",
        ServerStatus::Connected => "connected",
        ServerStatus::NeedsSignIn => "needs_sign_in",
        ServerStatus::Error => "error",
    }
}

/// `OpenMetrics` text as Prometheus text 0.0.4: a counter's `HELP`/`TYPE` name its `_total`
/// samples, a histogram series lists its buckets before its `_sum` and `_count` (the order
/// 0.0.4 parsers expect), and the OpenMetrics-only lines (`# UNIT`, `# EOF`) go.
fn to_prometheus_text(openmetrics: &str) -> String {
    let typed = |kind: &str| -> std::collections::HashSet<String> {
        let suffix = format!(" {kind}");
        openmetrics
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .filter_map(|rest| rest.strip_suffix(suffix.as_str()))
            .map(str::to_owned)
            .collect()
    };
    let (counters, histograms) = (typed("counter"), typed("histogram"));
    let sample_name = |line: &str| line.split(['{', ' ']).next().unwrap_or_default().to_owned();
    let of_histogram = |name: &str, suffix: &str| {
        name.strip_suffix(suffix)
            .is_some_and(|family| histograms.contains(family))
    };
    let mut out = String::with_capacity(openmetrics.len());
    // A histogram series' `_sum` and `_count`, held until its buckets are written.
    let mut held: Vec<&str> = Vec::new();
    let flush = |out: &mut String, held: &mut Vec<&str>| {
        for line in held.drain(..) {
            out.push_str(line);
            out.push('\n');
        }
    };
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let name = sample_name(line);
        if !line.starts_with('#') && (of_histogram(&name, "_sum") || of_histogram(&name, "_count")) {
            if name.ends_with("_sum") {
                flush(&mut out, &mut held);
            }
            held.push(line);
            continue;
        }
        if !(line.starts_with('#') || of_histogram(&name, "_bucket")) {
            flush(&mut out, &mut held);
        }
        if line.starts_with('#') {
            flush(&mut out, &mut held);
        }
        let descriptor = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|prefix| line.strip_prefix(prefix).map(|rest| (prefix, rest)));
        match descriptor {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                if counters.contains(name) {
                    let _ = write!(out, "{prefix}{name}_total {tail}");
                } else {
                    out.push_str(line);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    flush(&mut out, &mut held);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_labels_are_bounded() {
        let call = Operation::of(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_tools"}}"#);
        assert_eq!(
            call,
            Operation {
                method: "tools/call",
                tool: "search_tools"
            }
        );
        let made_up =
            Operation::of(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"secret-xyz"}}"#);
        assert_eq!(made_up.tool, "other");
        assert_eq!(Operation::of(br#"{"method":"x/y"}"#).method, "other");
        assert_eq!(Operation::of(b"not json").method, "other");
    }

    #[test]
    fn counters_are_renamed_for_the_prometheus_format() {
        let text =
            "# HELP a Things.\n# TYPE a counter\na_total{x=\"1\"} 2\n# UNIT b seconds\n# TYPE b gauge\nb 1\n# EOF\n";
        assert_eq!(
            to_prometheus_text(text),
            "# HELP a_total Things.\n# TYPE a_total counter\na_total{x=\"1\"} 2\n# TYPE b gauge\nb 1\n"
        );
        let histogram = "# TYPE h histogram\nh_sum 1.5\nh_count 2\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n\
                         h_sum{a=\"x\"} 0\nh_count{a=\"x\"} 0\nh_bucket{le=\"+Inf\",a=\"x\"} 0\n# EOF\n";
        assert_eq!(
            to_prometheus_text(histogram),
            "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1.5\nh_count 2\n\
             h_bucket{le=\"+Inf\",a=\"x\"} 0\nh_sum{a=\"x\"} 0\nh_count{a=\"x\"} 0\n"
        );
    }
}
