//! `anygpt-eval`: search quality and latency over a query set — a developer tool, not part
//! of the shipped CLI (it was the hidden `anygpt-discovery eval`; same flags, same output).
//!
//! Indexes a catalog file offline, sends every query through `Engine::search` — the path
//! `search_tools` takes, server filter off — writes one line per query
//! `{"id":"…","results":["server:tool",…]}` in rank order, and prints Recall@1/5/10, Cov@10
//! (multi-tool queries) and the p50/p99 latency of `Engine::search`. `expected` is read only
//! to score results already written; it never reaches the engine. `npm run eval:search` wraps
//! this binary (building it when needed).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;
use discovery::engine::{Engine, SearchRequest};
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, Parser)]
#[command(
    name = "anygpt-eval",
    about = "Search quality (Recall@k, Cov@10) and latency over a query set"
)]
pub struct EvalArgs {
    /// Catalog to index (JSON Lines, one tool a line).
    #[arg(long, value_name = "FILE")]
    catalog: PathBuf,
    /// Queries (JSON Lines: `id`, `query`, `expected`, `expected_groups`?).
    #[arg(long, value_name = "FILE")]
    queries: PathBuf,
    /// Where to write each query's ranked results.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Results per query.
    #[arg(long, default_value_t = 10)]
    limit: usize,
    /// Timed passes over the query set after the first (results come from the first).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Print the summary as one JSON line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Deserialize)]
struct QueryLine {
    id: String,
    query: String,
    #[serde(default)]
    expected: Vec<String>,
    #[serde(default)]
    expected_groups: Option<Vec<Vec<String>>>,
}

/// Scores of one query set.
#[derive(Debug, Default)]
struct Scores {
    queries: usize,
    hits_at: [usize; 3],
    coverage_sum: f64,
    multi_tool: usize,
}

const CUTOFFS: [usize; 3] = [1, 5, 10];

fn main() {
    let args = EvalArgs::parse();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a single-thread tokio runtime starts");
    let code = match runtime.block_on(evaluate(&args)) {
        Ok(summary) => {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(summary.as_bytes()).and_then(|()| stdout.flush());
            0
        }
        Err(error) => {
            eprintln!("error: {error}");
            1
        }
    };
    std::process::exit(code);
}

fn offline_engine(path: &Path) -> discovery::Result<Engine> {
    discovery::catalog::file::load(path).map(Engine::from_catalog)
}

/// Why an evaluation could not run.
#[derive(Debug, thiserror::Error)]
enum EvalError {
    #[error(transparent)]
    Catalog(#[from] discovery::Error),
    #[error("{}: cannot read file: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: line {line}: {source}", .path.display())]
    Line {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("{}: cannot write: {source}", .path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

async fn evaluate(args: &EvalArgs) -> Result<String, EvalError> {
    let engine = offline_engine(&args.catalog)?;
    let queries = read_queries(&args.queries)?;
    let mut lines = String::new();
    let mut scores = Scores::default();
    for query in &queries {
        let (results, _) = timed_search(&engine, &query.query, args.limit).await;
        let _ = writeln!(lines, "{}", json!({ "id": query.id, "results": results }));
        scores.add(query, &results);
    }
    if let Some(out) = &args.out {
        std::fs::write(out, lines).map_err(|source| EvalError::Write {
            path: out.clone(),
            source,
        })?;
    }
    let mut latencies = Vec::with_capacity(queries.len() * args.repeat);
    for _ in 0..args.repeat {
        for query in &queries {
            latencies.push(timed_search(&engine, &query.query, args.limit).await.1);
        }
    }
    latencies.sort_unstable();
    Ok(scores.render(args, &latencies))
}

/// Ranked `server:tool` ids for `query` and how long `Engine::search` took. A query the
/// engine rejects (empty, too long) has no results.
async fn timed_search(engine: &Engine, query: &str, limit: usize) -> (Vec<String>, Duration) {
    let request = SearchRequest {
        query: query.to_owned(),
        server: None,
        limit: Some(limit),
        include_disabled: false,
    };
    let start = Instant::now();
    let response = engine.search(&discovery::Caller::local(), &request).await;
    let elapsed = start.elapsed();
    let results = response
        .map(|r| r.results.iter().map(|h| format!("{}:{}", h.server, h.tool)).collect())
        .unwrap_or_default();
    (results, elapsed)
}

fn read_queries(path: &Path) -> Result<Vec<QueryLine>, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|source| EvalError::Read {
        path: path.to_owned(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|source| EvalError::Line {
                path: path.to_owned(),
                line: i + 1,
                source,
            })
        })
        .collect()
}

impl Scores {
    fn add(&mut self, query: &QueryLine, results: &[String]) {
        self.queries += 1;
        for (k, hits) in CUTOFFS.iter().zip(&mut self.hits_at) {
            if results.iter().take(*k).any(|r| query.expected.contains(r)) {
                *hits += 1;
            }
        }
        let groups: Vec<Vec<String>> = query
            .expected_groups
            .clone()
            .unwrap_or_else(|| query.expected.iter().map(|e| vec![e.clone()]).collect());
        if groups.len() > 1 {
            let top: Vec<&String> = results.iter().take(10).collect();
            let found = groups.iter().filter(|g| g.iter().any(|e| top.contains(&e))).count();
            #[expect(clippy::cast_precision_loss, reason = "group counts are tiny")]
            let share = found as f64 / groups.len() as f64;
            self.coverage_sum += share;
            self.multi_tool += 1;
        }
    }

    #[expect(clippy::cast_precision_loss, reason = "query counts are tiny")]
    fn recall(&self, i: usize) -> f64 {
        self.hits_at[i] as f64 / self.queries.max(1) as f64
    }

    #[expect(clippy::cast_precision_loss, reason = "query counts are tiny")]
    fn coverage(&self) -> Option<f64> {
        (self.multi_tool > 0).then(|| self.coverage_sum / self.multi_tool as f64)
    }

    fn render(&self, args: &EvalArgs, latencies: &[Duration]) -> String {
        let (p50, p99) = (percentile_ms(latencies, 50), percentile_ms(latencies, 99));
        if args.json {
            return format!(
                "{}\n",
                json!({
                    "catalog": args.catalog.display().to_string(),
                    "queries": args.queries.display().to_string(),
                    "count": self.queries,
                    "recall@1": round3(self.recall(0)),
                    "recall@5": round3(self.recall(1)),
                    "recall@10": round3(self.recall(2)),
                    "cov@10": self.coverage().map(round3),
                    "p50_ms": round3(p50),
                    "p99_ms": round3(p99),
                })
            );
        }
        let coverage = self.coverage().map_or_else(|| "-".to_owned(), |c| format!("{c:.3}"));
        format!(
            "{} queries against {}\nRecall@1 {:.3}  Recall@5 {:.3}  Recall@10 {:.3}  Cov@10 {coverage}\n\
             latency p50 {p50:.3} ms  p99 {p99:.3} ms  ({} timed searches)\n",
            self.queries,
            args.catalog.display(),
            self.recall(0),
            self.recall(1),
            self.recall(2),
            latencies.len(),
        )
    }
}

/// The `pct`th percentile of sorted durations, in milliseconds (nearest rank).
fn percentile_ms(sorted: &[Duration], pct: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (sorted.len() * pct).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1_000.0
}

fn round3(x: f64) -> f64 {
    (x * 1_000.0).round() / 1_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(expected: &[&str], groups: Option<Vec<Vec<&str>>>) -> QueryLine {
        QueryLine {
            id: "q".into(),
            query: "q".into(),
            expected: expected.iter().map(|&e| e.to_owned()).collect(),
            expected_groups: groups.map(|g| {
                g.into_iter()
                    .map(|g| g.into_iter().map(String::from).collect())
                    .collect()
            }),
        }
    }

    fn ids(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|&i| i.to_owned()).collect()
    }

    #[test]
    fn recall_counts_any_expected_tool_within_k() {
        let mut scores = Scores::default();
        scores.add(&line(&["s:a"], None), &ids(&["s:a", "s:b"]));
        scores.add(&line(&["s:z"], None), &ids(&["s:a", "s:b", "s:c", "s:d", "s:z"]));
        scores.add(&line(&["s:y"], None), &ids(&["s:a"]));
        assert_eq!(scores.hits_at, [1, 2, 2]);
        assert!(scores.coverage().is_none());
    }

    #[test]
    fn coverage_is_the_share_of_groups_found() {
        let mut scores = Scores::default();
        let groups = Some(vec![vec!["s:a", "t:a"], vec!["s:b"]]);
        scores.add(&line(&["s:a", "t:a", "s:b"], groups), &ids(&["t:a", "s:c"]));
        assert!((scores.coverage().unwrap() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let sorted: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert!((percentile_ms(&sorted, 50) - 50.0).abs() < 1e-9);
        assert!((percentile_ms(&sorted, 99) - 99.0).abs() < 1e-9);
        assert!(percentile_ms(&[], 50).abs() < f64::EPSILON);
    }
}
