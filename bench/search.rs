//! Search latency and index memory at 1k and 10k tools.
//!
//! ```sh
//! cargo bench --bench search --target x86_64-unknown-linux-gnu [-- <shared/data dir>]
//! ```
//!
//! Builds catalogs from `catalogs/combined.jsonl` (the first 1,000 tools; and 10,000 tools by
//! repeating it under renamed servers), measures the heap the search index takes with a
//! counting global allocator (bytes live after building minus before), and times every
//! development query of `queries/dev/*.jsonl` through `Engine::search` — the path
//! `search_tools` takes — and through `search::search` alone. See `bench/README.md`.

#![expect(
    unsafe_code,
    reason = "a counting global allocator is the honest way to measure heap use"
)]
#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{catalog_text, dev_queries, percentiles, time_engine};
use discovery::catalog::file;
use discovery::engine::Engine;
use discovery::search::index::Index;
use discovery::search::{self, IndexedCatalog, Query};

/// Wraps the system allocator and keeps the number of live heap bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`; the counter does not affect memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[path = "common.rs"]
mod common;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Timed passes over the query set after one warm-up pass.
const PASSES: usize = 20;

fn main() {
    let data = std::env::args().skip(1).find(|a| !a.starts_with('-')).map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"),
        PathBuf::from,
    );
    let combined = std::fs::read_to_string(data.join("catalogs/combined.jsonl"))
        .unwrap_or_else(|e| panic!("{}: {e} (pass the shared/data folder as the argument)", data.display()));
    let lines: Vec<&str> = combined.lines().filter(|l| !l.trim().is_empty()).collect();
    let queries = dev_queries(&data.join("queries/dev"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    println!("| tools | index heap | catalog heap (entries + index) | index build | Engine::search p50 / p99 | search::search p50 / p99 |");
    println!("|---|---|---|---|---|---|");
    for tools in [1_000, 10_000] {
        let text = catalog_text(&lines, tools);
        let before = LIVE.load(Ordering::Relaxed);
        let catalog = IndexedCatalog::from(file::parse(&text, "bench").unwrap());
        let catalog_bytes = LIVE.load(Ordering::Relaxed) - before;
        let (index_bytes, build) = index_heap(&catalog);
        let direct = time_direct(&catalog, &queries);
        let engine = Engine::from_catalog(catalog);
        let through_engine = runtime.block_on(time_engine(&engine, &queries, PASSES));
        println!(
            "| {tools} | {:.1} MB | {:.1} MB | {:.0} ms | {} | {} |",
            mb(index_bytes),
            mb(catalog_bytes),
            build.as_secs_f64() * 1_000.0,
            percentiles(through_engine, 3),
            percentiles(direct, 3),
        );
    }
    println!(
        "\n{} queries (every dev set), {PASSES} timed passes each, one thread.",
        queries.len()
    );
}

/// Heap held by an index over `catalog`'s tools alone, and how long building it took.
fn index_heap(catalog: &discovery::catalog::Catalog) -> (usize, Duration) {
    let mut servers: Vec<&str> = catalog.tools().map(|e| e.server.as_str()).collect();
    servers.dedup();
    let before = LIVE.load(Ordering::Relaxed);
    let start = Instant::now();
    let mut index = Index::default();
    for server in servers {
        index.set_server(server, None, catalog.server_tools(server).unwrap());
    }
    let took = start.elapsed();
    let bytes = LIVE.load(Ordering::Relaxed) - before;
    assert_eq!(index.len(), catalog.tools().count());
    (bytes, took)
}

fn time_direct(catalog: &IndexedCatalog, queries: &[String]) -> Vec<Duration> {
    let mut times = Vec::new();
    for pass in 0..=PASSES {
        for text in queries {
            let query = Query {
                text,
                server: None,
                limit: 10,
                include_disabled: false,
                view: None,
            };
            let start = Instant::now();
            let hits = search::search(catalog, &query);
            let took = start.elapsed();
            std::hint::black_box(hits);
            if pass > 0 {
                times.push(took);
            }
        }
    }
    times
}

#[expect(clippy::cast_precision_loss, reason = "byte counts far below 2^52")]
fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1_000_000.0
}
