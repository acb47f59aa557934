//! Per server and tool: calls, outcomes (ok, the server's `isError`, each error code), latency
//! (p50/p95 over the recent calls, the max, histogram buckets) and the last call.
//!
//! One set of counters, two sources: the engine records every call while it serves
//! ([`Stats::record`], a lock and a few additions on the execute path), and
//! [`from_audit_lines`] rebuilds the same from the audit log for the `stats` command. Both give
//! a [`StatsSnapshot`], the plain type the faces print and a metrics exporter reads.
//!
//! Memory is bounded: at most [`MAX_TOOLS`] (server, tool) pairs are kept apart (names a model
//! made up could otherwise grow it without end; the rest count under [`OTHER`]), each with the
//! durations of its last [`RECENT`] calls for the percentiles.

mod audit;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::Serialize;

pub use audit::{from_audit_lines, AuditFilter};

/// Pairs kept apart; more count under [`OTHER`].
pub const MAX_TOOLS: usize = 4096;
/// Calls per tool the percentiles are taken over.
pub const RECENT: usize = 1024;
/// Server and tool name of the pairs past [`MAX_TOOLS`].
pub const OTHER: &str = "(other)";
/// Upper bounds (ms) of the latency histogram's buckets; a last one holds the rest.
pub const BUCKETS_MS: [f64; 14] = [
    1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10_000.0, 60_000.0,
];
/// Longest server or tool name kept (a longer one is cut).
const NAME_CHARS: usize = 128;

/// How one call ended, as the audit log says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The server answered with `isError`.
    ToolError,
    /// The gateway's error code (`TOOL_NOT_FOUND`, `TOOL_EXECUTION_TIMEOUT`…).
    Error(&'static str),
}

impl Outcome {
    fn key(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::Error(code) => code,
        }
    }
}

/// The counters of one (server, tool).
#[derive(Debug, Clone, Default)]
struct Counters {
    calls: u64,
    outcomes: BTreeMap<String, u64>,
    recent: VecDeque<f64>,
    max_ms: f64,
    total_ms: f64,
    buckets: [u64; BUCKETS_MS.len() + 1],
    last_call: Option<SystemTime>,
}

impl Counters {
    fn add(&mut self, outcome: &str, duration_ms: f64, at: SystemTime) {
        self.calls += 1;
        match self.outcomes.get_mut(outcome) {
            Some(count) => *count += 1,
            None => {
                self.outcomes.insert(outcome.to_owned(), 1);
            }
        }
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(duration_ms);
        self.max_ms = self.max_ms.max(duration_ms);
        self.total_ms += duration_ms;
        let bucket = BUCKETS_MS
            .iter()
            .position(|&le| duration_ms <= le)
            .unwrap_or(BUCKETS_MS.len());
        self.buckets[bucket] += 1;
        self.last_call = Some(self.last_call.map_or(at, |last| last.max(at)));
    }

    fn snapshot(&self, server: &str, tool: &str) -> ToolStats {
        let mut sorted: Vec<f64> = self.recent.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        let mut cumulative = 0;
        let buckets = BUCKETS_MS
            .iter()
            .copied()
            .map(Some)
            .chain(std::iter::once(None))
            .zip(self.buckets)
            .map(|(le, count)| {
                cumulative += count;
                Bucket {
                    le_ms: le,
                    count: cumulative,
                }
            })
            .collect();
        let errors = self
            .outcomes
            .iter()
            .filter(|(key, _)| key.as_str() != "ok" && key.as_str() != "tool_error")
            .map(|(key, count)| (key.clone(), *count))
            .collect();
        ToolStats {
            server: server.to_owned(),
            tool: tool.to_owned(),
            calls: self.calls,
            ok: self.outcomes.get("ok").copied().unwrap_or(0),
            tool_errors: self.outcomes.get("tool_error").copied().unwrap_or(0),
            errors,
            p50_ms: percentile(&sorted, 0.50),
            p95_ms: percentile(&sorted, 0.95),
            max_ms: round(self.max_ms),
            total_ms: round(self.total_ms),
            last_call: self.last_call.map(|t| humantime::format_rfc3339_millis(t).to_string()),
            buckets,
        }
    }
}

/// The nearest-rank percentile of `sorted` (0 when empty).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    round(sorted[rank - 1])
}

fn round(ms: f64) -> f64 {
    (ms * 100.0).round() / 100.0
}

/// One histogram bucket: calls that took at most `le_ms` (cumulative, as Prometheus counts).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bucket {
    /// `None`: the last bucket, every call.
    pub le_ms: Option<f64>,
    pub count: u64,
}

/// What one (server, tool) did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolStats {
    pub server: String,
    pub tool: String,
    pub calls: u64,
    pub ok: u64,
    /// Calls the server answered with `isError`.
    pub tool_errors: u64,
    /// Calls the gateway failed, by error code.
    pub errors: BTreeMap<String, u64>,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub max_ms: f64,
    /// Sum of every call's duration (with `calls`, the mean; what a histogram's `_sum` is).
    pub total_ms: f64,
    /// RFC 3339.
    pub last_call: Option<String>,
    pub buckets: Vec<Bucket>,
}

/// Every (server, tool) with a call, by server then tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatsSnapshot {
    pub tools: Vec<ToolStats>,
}

impl StatsSnapshot {
    /// Calls in all.
    #[must_use]
    pub fn calls(&self) -> u64 {
        self.tools.iter().map(|t| t.calls).sum()
    }
}

/// The counters of every (server, tool).
#[derive(Debug, Default)]
pub struct Stats {
    tools: Mutex<HashMap<(String, String), Counters>>,
}

impl Stats {
    /// Count one call of `server`'s `tool` that ended now.
    pub fn record(&self, server: &str, tool: &str, outcome: Outcome, finished: crate::audit::Finished) {
        self.add(
            server,
            tool,
            outcome.key(),
            finished.took.as_secs_f64() * 1000.0,
            finished.at,
        );
    }

    fn add(&self, server: &str, tool: &str, outcome: &str, duration_ms: f64, at: SystemTime) {
        let mut tools = self.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (cut(server), cut(tool));
        let counters = if tools.contains_key(&key) || tools.len() < MAX_TOOLS {
            tools.entry(key).or_default()
        } else {
            tools.entry((OTHER.to_owned(), OTHER.to_owned())).or_default()
        };
        counters.add(outcome, duration_ms, at);
    }

    /// Every (server, tool) so far, or one server's.
    #[must_use]
    pub fn snapshot(&self, server: Option<&str>) -> StatsSnapshot {
        let tools = self.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut shown: Vec<ToolStats> = tools
            .iter()
            .filter(|((s, _), _)| server.is_none_or(|only| only == s))
            .map(|((s, t), counters)| counters.snapshot(s, t))
            .collect();
        shown.sort_by(|a, b| (&a.server, &a.tool).cmp(&(&b.server, &b.tool)));
        StatsSnapshot { tools: shown }
    }
}

fn cut(name: &str) -> String {
    crate::text::cut_chars(name, NAME_CHARS).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn counts_outcomes_and_latency_per_tool() {
        let stats = Stats::default();
        for ms in 1..=100 {
            stats.record(
                "fs",
                "read",
                Outcome::Ok,
                crate::audit::Finished::took(Duration::from_millis(ms)),
            );
        }
        stats.record(
            "fs",
            "read",
            Outcome::ToolError,
            crate::audit::Finished::took(Duration::from_millis(3)),
        );
        stats.record(
            "fs",
            "read",
            Outcome::Error("TOOL_EXECUTION_TIMEOUT"),
            crate::audit::Finished::took(Duration::from_millis(200)),
        );
        stats.record(
            "fs",
            "write",
            Outcome::Error("TOOL_DISABLED"),
            crate::audit::Finished::took(Duration::ZERO),
        );
        let snapshot = stats.snapshot(None);
        assert_eq!(snapshot.calls(), 103);
        let read = &snapshot.tools[0];
        assert_eq!((read.server.as_str(), read.tool.as_str()), ("fs", "read"));
        assert_eq!((read.calls, read.ok, read.tool_errors), (102, 100, 1));
        assert_eq!(read.errors, BTreeMap::from([("TOOL_EXECUTION_TIMEOUT".to_owned(), 1)]));
        assert_eq!((read.p50_ms, read.p95_ms, read.max_ms), (50.0, 96.0, 200.0));
        assert_eq!(
            read.buckets.last().unwrap().count,
            102,
            "the last bucket counts every call"
        );
        assert_eq!(
            read.buckets[0],
            Bucket {
                le_ms: Some(1.0),
                count: 1
            }
        );
        assert!(read.last_call.is_some());
        assert_eq!(stats.snapshot(Some("fs")).tools.len(), 2);
        assert!(stats.snapshot(Some("github")).tools.is_empty());
    }

    #[test]
    fn made_up_names_past_the_bound_count_together() {
        let stats = Stats::default();
        for i in 0..MAX_TOOLS + 10 {
            stats.record(
                "s",
                &format!("t{i}"),
                Outcome::Error("TOOL_NOT_FOUND"),
                crate::audit::Finished::took(Duration::ZERO),
            );
        }
        let snapshot = stats.snapshot(None);
        assert_eq!(snapshot.tools.len(), MAX_TOOLS + 1);
        let other = snapshot.tools.iter().find(|t| t.server == OTHER).unwrap();
        assert_eq!(other.calls, 10);
    }
}
