//! What the search benchmarks share: the 10k-tool catalog, the development queries, the
//! timed loop through `Engine::search` and the percentiles. Included by `search.rs` and
//! `semantic.rs` (`#[path] mod common;`), so both time searches the same way.

use std::path::Path;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use discovery::engine::{Engine, SearchRequest};

/// The first `tools` catalog lines, repeating the file under renamed servers as needed.
pub fn catalog_text(lines: &[&str], tools: usize) -> String {
    let mut out = String::new();
    for i in 0..tools {
        let copy = i / lines.len();
        let line = lines[i % lines.len()];
        if copy == 0 {
            out.push_str(line);
        } else {
            let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
            let server = format!("{}-copy{copy}", value["server"].as_str().unwrap());
            value["server"] = server.into();
            out.push_str(&value.to_string());
        }
        out.push('\n');
    }
    out
}

/// Every query of `dir/*.jsonl`, files in name order.
pub fn dev_queries(dir: &Path) -> Vec<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|path| {
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| {
                    let value: serde_json::Value = serde_json::from_str(l).unwrap();
                    value["query"].as_str().unwrap().to_owned()
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What `search_tools` asks for `text` by default: every server, top 10.
pub fn request(text: &str) -> SearchRequest {
    SearchRequest {
        query: text.to_owned(),
        server: None,
        limit: Some(10),
        include_disabled: false,
    }
}

/// Each query through `Engine::search`, one at a time: one warm-up pass, then `passes` timed.
pub async fn time_engine(engine: &Engine, queries: &[String], passes: usize) -> Vec<Duration> {
    let mut times = Vec::new();
    for pass in 0..=passes {
        for text in queries {
            let request = request(text);
            let start = Instant::now();
            let response = engine.search(&discovery::Caller::local(), &request).await;
            let took = start.elapsed();
            std::hint::black_box(response.ok());
            if pass > 0 {
                times.push(took);
            }
        }
    }
    times
}

/// `p50 / p99 ms` with `decimals` digits (`—` for no times).
pub fn percentiles(mut times: Vec<Duration>, decimals: usize) -> String {
    if times.is_empty() {
        return "—".into();
    }
    times.sort_unstable();
    let at = |pct: usize| {
        let rank = (times.len() * pct).div_ceil(100).clamp(1, times.len());
        times[rank - 1].as_secs_f64() * 1_000.0
    };
    format!("{:.decimals$} / {:.decimals$} ms", at(50), at(99))
}
