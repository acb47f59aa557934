//! What the engine's operations take and return: plain serde types each face renders as it
//! needs (compact JSON for the model, JS objects for Node).

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::upstream::{DroppedTool, ListingNotes, ProgressSink};

/// What a server is doing, as every face tells it (the word is what `list_mcp_servers`, the
/// CLI's `--json` and the Node API show).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ServerStatus {
    /// A session is open.
    #[serde(rename = "connected")]
    Connected,
    /// No session: its tools come from the snapshot; it connects on the first call.
    #[serde(rename = "idle")]
    Idle,
    /// Starting (again).
    #[serde(rename = "connecting")]
    Connecting,
    /// A person must sign in first; `error` says how.
    #[serde(rename = "needs sign-in")]
    NeedsSignIn,
    /// It failed; `error` says why.
    #[serde(rename = "error")]
    Error,
}

impl ServerStatus {
    /// The word the faces show.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Connected => "connected",
            Self::Idle => "idle",
            Self::Connecting => "connecting",
            Self::NeedsSignIn => "needs sign-in",
            Self::Error => "error",
        }
    }

    /// Whether the server cannot be used until something changes (a sign-in, the config, the
    /// server itself), as opposed to ready or on its way.
    #[must_use]
    pub const fn is_trouble(self) -> bool {
        matches!(self, Self::NeedsSignIn | Self::Error)
    }
}

impl std::fmt::Display for ServerStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One server in `list_mcp_servers`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerInfo {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub tool_count: usize,
    pub enabled_count: usize,
    pub status: ServerStatus,
    /// Why the status is `error` or `needs sign-in` (or, while connecting again, why the last
    /// attempt failed), with the retry the gateway has scheduled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `error` without the retry: what a run that exits before it shows.
    #[serde(skip)]
    pub reason: Option<String>,
    /// Tools its newest listing had that are not served, each with why (the first twenty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped_tools: Vec<DroppedTool>,
    /// Each caller signs in to it with their own account (`connection.oauth.perUser`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub per_user: bool,
    /// Of a per-user server: whether the caller asking has signed in to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_in: Option<bool>,
    /// How many tools were dropped in all, when more than are named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped_count: Option<usize>,
    /// The server lists more tools than the gateway serves: the first this many are served,
    /// the rest not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools_cut_at: Option<usize>,
}

impl ServerInfo {
    /// A server's status with nothing left out of its tools.
    #[must_use]
    pub fn new(name: &str, status: ServerStatus, tool_count: usize, error: Option<&str>) -> Self {
        Self {
            name: name.to_owned(),
            description: None,
            tool_count,
            enabled_count: tool_count,
            status,
            error: error.map(str::to_owned),
            reason: error.map(str::to_owned),
            dropped_tools: Vec::new(),
            per_user: false,
            signed_in: None,
            dropped_count: None,
            tools_cut_at: None,
        }
    }

    /// Say what the newest listing of the server's tools left out.
    pub fn note_left_out(&mut self, notes: ListingNotes) {
        self.dropped_count = (notes.dropped_count > notes.dropped.len()).then_some(notes.dropped_count);
        self.dropped_tools = notes.dropped;
        self.tools_cut_at = notes.cut_at;
    }
}

/// What a reload did to the servers, by name, each in config order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadSummary {
    /// Launched the same way: process and session kept.
    pub kept: Vec<String>,
    /// Launch spec changed: started anew; the old process ends once its calls do.
    pub restarted: Vec<String>,
    /// No longer configured: ended once their calls in flight did.
    pub stopped: Vec<String>,
    pub added: Vec<String>,
}

/// A search request.
#[derive(Debug, Clone, Default)]
pub struct SearchRequest {
    pub query: String,
    pub server: Option<String>,
    pub limit: Option<usize>,
    pub include_disabled: bool,
}

/// One search hit.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult {
    pub server: String,
    pub tool: String,
    pub summary: String,
    /// 0..1, two decimals.
    pub relevance: f64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Only present (as `false`) for disabled tools when they were asked for.
    #[serde(skip_serializing_if = "is_true")]
    pub enabled: bool,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_true(value: &bool) -> bool {
    *value
}

/// Search results, with a word on anything that limits them.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResponse {
    pub results: Vec<SearchResult>,
    /// Servers still starting, whose tools are not searchable yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<usize>,
    /// The query was longer than `search::MAX_QUERY_CHARS` characters; only its start was
    /// searched. What to advise about this, pending servers and empty results is each face's
    /// to word: the gateway names its meta-tools, Node its methods.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub query_cut: bool,
    /// Tools in scope the semantic tier has no vector for yet (ranked by words alone until
    /// the background embedding reaches them); absent when none or when the tier is off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vectors_pending: Option<usize>,
}

impl SearchResponse {
    /// A word for the reader: the query was cut, servers are still starting, or nothing
    /// matched — then `no_results`, in which each face names its own next step (the gateway
    /// its meta-tools, Node its methods).
    #[must_use]
    pub fn hint(&self, no_results: &str) -> Option<String> {
        let advice = match (self.results.is_empty(), self.pending) {
            (_, Some(n)) => Some(format!(
                "{n} server(s) still starting; search again shortly for their tools"
            )),
            (true, None) => Some(no_results.to_owned()),
            (false, None) => None,
        };
        if !self.query_cut {
            return advice;
        }
        let note = format!("query cut to its first {} characters", crate::search::MAX_QUERY_CHARS);
        Some(advice.map_or(note.clone(), |advice| format!("{note}; {advice}")))
    }
}

/// One tool in `list_tools`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSummary {
    pub name: String,
    pub summary: String,
    pub enabled: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Short names of the trust findings (`instruction`, `invisible-text`, `shadow-name`,
    /// `changed`, …); `get_tool_details` says more.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<&'static str>,
}

/// `list_tools` of one server.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerTools {
    pub server: String,
    pub tools: Vec<ToolSummary>,
}

/// Everything about one tool.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDetails {
    pub server: String,
    pub tool: String,
    pub description: String,
    /// As the server reported it.
    pub input_schema: Value,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    pub enabled: bool,
    /// Poisoning and shadowing findings, one sentence each (what, where, an excerpt).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// How the tool differs from the version first seen or last trusted (`description`,
    /// `parameters added: …`, `schema`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

/// Per-call options of `execute`.
#[derive(Clone, Default)]
pub struct ExecuteOptions {
    /// Overrides the server's `timeoutMs`.
    pub timeout_ms: Option<u64>,
    /// Cancelled when the caller gives up; the downstream call is cancelled too.
    pub cancel: Option<CancellationToken>,
    /// Receives the downstream server's progress notifications for this call.
    pub progress: Option<ProgressSink>,
    /// Asks the human when a toolRules `confirm` covers the tool; `None`: nobody can be asked.
    pub confirm: Option<crate::confirm::Asker>,
    /// The trace the call belongs to (the face's server span, or the client's own context):
    /// the parent of the downstream call's span.
    pub trace: Option<crate::telemetry::SpanContext>,
}

impl std::fmt::Debug for ExecuteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecuteOptions")
            .field("timeout_ms", &self.timeout_ms)
            .field("cancel", &self.cancel)
            .field("progress", &self.progress.is_some())
            .field("confirm", &self.confirm.is_some())
            .field("trace", &self.trace)
            .finish()
    }
}
