//! Search over offline catalogs: the exact-name rule over a whole public catalog,
//! determinism, and `anygpt-discovery search --catalog` (output and exit codes).

use std::path::{Path, PathBuf};
use std::process::Command;

use discovery::catalog::file;
use discovery::engine::{Engine, SearchRequest};
use discovery::search::{self, IndexedCatalog, Query};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture() -> PathBuf {
    repo().join("tests/fixtures/catalog.jsonl")
}

/// 1,190 tools of 60 servers from docker/mcp-registry (MIT; see tests/fixtures/README.md):
/// a public catalog where bare names collide across servers.
fn registry() -> IndexedCatalog {
    file::load(&repo().join("tests/fixtures/registry-catalog.jsonl"))
        .expect("registry-catalog.jsonl loads")
        .into()
}

fn query(text: &str) -> Query<'_> {
    Query::new(text)
}

/// `server:tool` of every hit for `text`, in rank order.
fn ids(catalog: &IndexedCatalog, text: &str) -> Vec<String> {
    search::search(catalog, &query(text))
        .iter()
        .map(|h| h.entry.id())
        .collect()
}

#[test]
fn every_exact_name_ranks_first_over_a_public_catalog() {
    let catalog = registry();
    let mut checked = 0;
    for entry in catalog.tools() {
        let qualified = entry.id();
        let hits = search::search(&catalog, &query(&qualified));
        assert_eq!(
            hits.first().map(|h| h.entry.id()),
            Some(qualified.clone()),
            "{qualified}"
        );
        assert!((hits[0].relevance - 1.0).abs() < f64::EPSILON, "{qualified}");

        // A bare name may belong to several servers: all of them come first, at relevance 1.
        let hits = search::search(&catalog, &query(entry.name()));
        let exact: Vec<String> = hits
            .iter()
            .take_while(|h| (h.relevance - 1.0).abs() < f64::EPSILON)
            .map(|h| h.entry.id())
            .collect();
        let owners = catalog
            .tools()
            .filter(|e| e.name().eq_ignore_ascii_case(entry.name()))
            .count();
        assert!(
            exact.contains(&qualified) || exact.len() == 10.min(owners),
            "{qualified}: {exact:?}"
        );
        checked += 1;
    }
    assert!(checked > 1_000, "only {checked} tools checked");
}

#[test]
fn the_same_query_gives_the_same_order() {
    let catalog = registry();
    for text in [
        "read a file",
        "get stock price",
        "search the web",
        "create issue",
        "weather forecast",
        "send email",
    ] {
        let first = ids(&catalog, text);
        let again = ids(&catalog, text);
        assert!(!first.is_empty(), "{text}");
        assert_eq!(first, again, "{text}");
    }
}

#[test]
fn a_reloaded_catalog_ranks_like_the_first() {
    let one: IndexedCatalog = file::load(&fixture()).unwrap().into();
    let two: IndexedCatalog = file::load(&fixture()).unwrap().into();
    for text in ["read file", "issue", "weather"] {
        let a = ids(&one, text);
        let b = ids(&two, text);
        assert_eq!(a, b, "{text}");
    }
}

#[tokio::test]
async fn an_offline_engine_searches_without_servers_and_filters_by_server() {
    let engine = Engine::from_catalog(file::load(&fixture()).unwrap());
    let request = |query: &str, server: Option<&str>| SearchRequest {
        query: query.to_owned(),
        server: server.map(str::to_owned),
        limit: None,
        include_disabled: false,
    };
    let response = engine
        .search(&discovery::Caller::local(), &request("read_file", None))
        .await
        .unwrap();
    let first: Vec<(&str, &str)> = response
        .results
        .iter()
        .take(2)
        .map(|r| (r.server.as_str(), r.tool.as_str()))
        .collect();
    assert_eq!(first, [("docs", "read_file"), ("filesystem", "read_file")]);
    assert!(response.pending.is_none());

    let only_github = engine
        .search(&discovery::Caller::local(), &request("list", Some("github")))
        .await
        .unwrap();
    assert!(!only_github.results.is_empty());
    assert!(only_github.results.iter().all(|r| r.server == "github"));

    let nothing = engine
        .search(&discovery::Caller::local(), &request("zzzqqq xyzzy", None))
        .await
        .unwrap();
    assert!(nothing.results.is_empty());
    assert!(!nothing.query_cut);
    assert_eq!(nothing.hint("reword").as_deref(), Some("reword"));

    let long = format!("read a file {}", "x".repeat(5_000));
    let cut = engine
        .search(&discovery::Caller::local(), &request(&long, None))
        .await
        .unwrap();
    assert!(cut.query_cut);
    assert!(cut.hint("reword").unwrap().contains("cut"));
}

fn bin(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_anygpt-discovery"))
        .args(args)
        .output()
        .expect("the binary runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn cli_search_prints_the_seed_format_and_exits_0() {
    let catalog = fixture();
    let (code, stdout, _) = bin(&["search", "weather forecast", "--catalog", catalog.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.starts_with("Search results for \"weather forecast\" ("),
        "{stdout}"
    );
    assert!(stdout.contains("\n\n1. weather:get_forecast ("), "{stdout}");
    assert!(
        stdout.contains("% match)\n   Get the weather forecast for a location.\n"),
        "{stdout}"
    );
}

#[test]
fn cli_search_json_is_the_compact_search_tools_answer() {
    let catalog = fixture();
    let (code, stdout, _) = bin(&[
        "search",
        "fetch",
        "--catalog",
        catalog.to_str().unwrap(),
        "--json",
        "--limit",
        "2",
    ]);
    assert_eq!(code, 0);
    let body: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(body["results"][0]["tool"], "fetch");
    assert_eq!(body["results"][0]["relevance"], 1.0);
    assert!(body["results"].as_array().unwrap().len() <= 2);
    assert_eq!(stdout.lines().count(), 1);
}

#[test]
fn cli_search_with_no_results_exits_2() {
    let catalog = fixture();
    let (code, stdout, _) = bin(&["search", "zzzqqq", "--catalog", catalog.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stdout.starts_with("No tools found for \"zzzqqq\"."), "{stdout}");
}

#[test]
fn cli_search_with_a_bad_catalog_names_file_and_line_and_exits_1() {
    let bad = repo().join("tests/fixtures/bad-catalog.jsonl");
    let (code, stdout, stderr) = bin(&["search", "file", "--catalog", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("bad-catalog.jsonl: line 2: missing field `name`"),
        "{stderr}"
    );
}

#[test]
fn eval_writes_one_line_per_query_and_prints_recall() {
    let dir = tempfile::tempdir().unwrap();
    let queries = dir.path().join("queries.jsonl");
    std::fs::write(
        &queries,
        concat!(
            r#"{"id":"a","query":"delete a file","expected":["filesystem:delete_file"]}"#,
            "\n",
            r#"{"id":"b","query":"open issues in a repo","expected":["github:list_issues"]}"#,
            "\n",
            r#"{"id":"c","query":"zzzqqq","expected":["fetch:fetch"]}"#,
            "\n",
        ),
    )
    .unwrap();
    let out = dir.path().join("results.jsonl");
    let catalog = fixture();
    // The harness is its own developer binary (bench/eval.rs), not a command of the CLI.
    let output = Command::new(env!("CARGO_BIN_EXE_anygpt-eval"))
        .args([
            "--catalog",
            catalog.to_str().unwrap(),
            "--queries",
            queries.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--repeat",
            "1",
        ])
        .output()
        .expect("the eval binary runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("Recall@1 0.667  Recall@5 0.667  Recall@10 0.667"),
        "{stdout}"
    );
    assert!(stdout.contains("latency p50 "), "{stdout}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["id"], "a");
    assert_eq!(lines[0]["results"][0], "filesystem:delete_file");
    assert_eq!(lines[2]["results"], serde_json::json!([]));
}
