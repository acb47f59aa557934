//! The counters rebuilt from audit log lines (`crate::audit` writes them): what `stats` shows
//! of calls made by gateways that have since stopped.

use std::io::BufRead;
use std::time::SystemTime;

use serde::Deserialize;

use super::{Stats, StatsSnapshot};

/// Which lines count.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Only calls at or after this time.
    pub since: Option<SystemTime>,
    /// Only this server's calls.
    pub server: Option<String>,
}

/// The fields of an audit line the counters need.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Line {
    time: String,
    server: String,
    tool: String,
    outcome: String,
    #[serde(default)]
    error_code: Option<String>,
    #[serde(default)]
    duration_ms: f64,
}

/// The counters of every line of `files` (oldest first) that `filter` keeps; lines that are not
/// audit entries are skipped. Also returns how many were skipped.
pub fn from_audit_lines<R: BufRead>(
    files: impl IntoIterator<Item = R>,
    filter: &AuditFilter,
) -> (StatsSnapshot, usize) {
    let stats = Stats::default();
    let mut skipped = 0;
    for file in files {
        for line in file.lines() {
            let Ok(line) = line else {
                skipped += 1;
                break;
            };
            if line.trim().is_empty() {
                continue;
            }
            let Some((entry, at)) = parse(&line) else {
                skipped += 1;
                continue;
            };
            if filter.since.is_some_and(|since| at < since)
                || filter.server.as_deref().is_some_and(|only| only != entry.server)
            {
                continue;
            }
            let outcome = match entry.outcome.as_str() {
                "ok" => "ok",
                "tool_error" => "tool_error",
                _ => entry.error_code.as_deref().unwrap_or("error"),
            };
            stats.add(&entry.server, &entry.tool, outcome, entry.duration_ms, at);
        }
    }
    (stats.snapshot(None), skipped)
}

fn parse(line: &str) -> Option<(Line, SystemTime)> {
    let entry: Line = serde_json::from_str(line).ok()?;
    let at = humantime::parse_rfc3339_weak(&entry.time).ok()?;
    Some((entry, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"{"time":"2026-01-01T10:00:00.000Z","server":"fs","tool":"read","argumentKeys":[],"outcome":"ok","durationMs":4.0}
{"time":"2026-01-02T10:00:00.000Z","server":"fs","tool":"read","argumentKeys":[],"outcome":"error","errorCode":"TOOL_NOT_CONFIRMED","durationMs":1.5,"confirm":"declined"}
not json
{"time":"2026-01-03T10:00:00.000Z","server":"gh","tool":"list","argumentKeys":[],"outcome":"tool_error","durationMs":9.0}
"#;

    #[test]
    fn rebuilds_the_counters_of_the_kept_lines() {
        let (all, skipped) = from_audit_lines([LOG.as_bytes()], &AuditFilter::default());
        assert_eq!(skipped, 1);
        assert_eq!(all.calls(), 3);
        let read = &all.tools[0];
        assert_eq!((read.calls, read.ok), (2, 1));
        assert_eq!(read.errors.get("TOOL_NOT_CONFIRMED"), Some(&1));
        assert_eq!(read.last_call.as_deref(), Some("2026-01-02T10:00:00.000Z"));
        assert_eq!(all.tools[1].tool_errors, 1);

        let since = humantime::parse_rfc3339("2026-01-02T00:00:00Z").unwrap();
        let filter = AuditFilter {
            since: Some(since),
            server: Some("fs".into()),
        };
        let (recent, _) = from_audit_lines([LOG.as_bytes()], &filter);
        assert_eq!(recent.calls(), 1);
        assert!((recent.tools[0].max_ms - 1.5).abs() < f64::EPSILON);
    }
}
