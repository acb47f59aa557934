//! `stats [server] [--since 1d] [--json]`: calls, outcomes and latency per server and tool,
//! rebuilt from the audit log (every gateway that wrote there, across restarts). Starts no
//! server. Exit codes: 0 shown, 2 the audit log is off or has no place.

use std::time::{Duration, SystemTime};

use clap::Args;
use serde::Serialize;

use super::output::{exit, Ui};
use crate::engine::Engine;
use crate::stats::{AuditFilter, StatsSnapshot, ToolStats};

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  anygpt-discovery stats
  anygpt-discovery stats github --since 1d
  anygpt-discovery stats --since 2026-11-01T00:00:00Z --json

Counted from the audit log (discovery.audit) and its rotated file: calls, ok,
the server's isError answers, the gateway's errors by code, p50/p95/max latency
(percentiles over each tool's last 1024 calls) and the last call.")]
pub struct StatsArgs {
    /// Only this server's tools.
    server: Option<String>,
    /// Only calls in this last stretch of time (`30m`, `12h`, `1d`, `2w`) or since an
    /// RFC 3339 time.
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    since: Option<SystemTime>,
}

/// A `--since` that is neither a duration nor a time.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is neither a duration (`30m`, `12h`, `1d`, `2w`) nor an RFC 3339 time (`2026-11-01T00:00:00Z`)")]
struct BadSince(String);

/// `--since`: a duration back from now, or a time.
fn parse_since(text: &str) -> Result<SystemTime, BadSince> {
    if let Ok(back) = humantime::parse_duration(text) {
        return Ok(SystemTime::now().checked_sub(back).unwrap_or(SystemTime::UNIX_EPOCH));
    }
    humantime::parse_rfc3339_weak(text).map_err(|_| BadSince(text.to_owned()))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown<'a> {
    #[serde(flatten)]
    stats: &'a StatsSnapshot,
    /// Lines of the log that were not audit entries.
    #[serde(skip_serializing_if = "is_zero")]
    skipped_lines: usize,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &usize) -> bool {
    *n == 0
}

pub fn run(args: &StatsArgs, engine: &Engine, ui: &Ui) -> i32 {
    let filter = AuditFilter {
        since: args.since,
        server: args.server.clone(),
    };
    match engine.audit_stats(&filter) {
        Ok((stats, skipped_lines)) => {
            ui.result(
                &Shown {
                    stats: &stats,
                    skipped_lines,
                },
                || human(&stats),
            );
            exit::OK
        }
        Err(error) => ui.error(&error),
    }
}

/// One line per tool, aligned.
fn human(stats: &StatsSnapshot) -> String {
    if stats.tools.is_empty() {
        return "no calls recorded\n".to_owned();
    }
    let header = [
        "TOOL",
        "CALLS",
        "OK",
        "ISERROR",
        "ERRORS",
        "P50",
        "P95",
        "MAX",
        "LAST CALL",
    ]
    .map(str::to_owned);
    let rows: Vec<[String; 9]> = stats.tools.iter().map(row).collect();
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text
}

fn row(tool: &ToolStats) -> [String; 9] {
    let errors = if tool.errors.is_empty() {
        "0".to_owned()
    } else {
        tool.errors
            .iter()
            .map(|(code, count)| format!("{code}×{count}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    [
        format!("{}:{}", tool.server, tool.tool),
        tool.calls.to_string(),
        tool.ok.to_string(),
        tool.tool_errors.to_string(),
        errors,
        ms(tool.p50_ms),
        ms(tool.p95_ms),
        ms(tool.max_ms),
        tool.last_call.clone().unwrap_or_default(),
    ]
}

fn ms(value: f64) -> String {
    if value >= 1000.0 {
        format!("{:.1}s", Duration::from_secs_f64(value / 1000.0).as_secs_f64())
    } else {
        format!("{value}ms")
    }
}
