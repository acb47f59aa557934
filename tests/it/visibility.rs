//! Per-caller visibility through the engine, over the reference servers: two callers of
//! different groups see different search results, counts, lists and details, one is refused
//! at execute with the very answer a tool that does not exist gets, and the local user keeps
//! seeing everything the config enables. The audit log names each caller.

use std::path::Path;

use discovery::engine::{ExecuteOptions, SearchRequest};
use discovery::{Caller, Config, Engine};
use serde_json::{json, Value};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn caller(subject: &str, groups: &[&str]) -> Caller {
    Caller {
        issuer: Some("https://id.example".into()),
        subject: Some(subject.into()),
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        ..Caller::default()
    }
}

/// `everything` and `memory`; only admins see `memory`, and bob may not run `echo`.
fn engine(scratch: &Path) -> Engine {
    let module = |name: &str| {
        repo()
            .join("node_modules/@modelcontextprotocol")
            .join(name)
            .join("dist/index.js")
            .display()
            .to_string()
    };
    let config = json!({
        "servers": [
            { "name": "everything", "connection": { "command": "node", "args": [module("server-everything"), "stdio"] } },
            { "name": "memory", "connection": {
                "command": "node",
                "args": [module("server-memory")],
                "env": { "MEMORY_FILE_PATH": scratch.join("memory.jsonl").display().to_string() }
            } }
        ],
        "toolRules": [
            { "server": "memory", "pattern": "*", "enabled": true, "callers": { "groups": ["admins"] } },
            { "server": "memory", "pattern": "*", "enabled": false, "callers": { "subjects": ["*"] } },
            { "server": "everything", "pattern": "echo", "enabled": false, "callers": { "subjects": ["bob"] } },
            { "server": "memory", "pattern": "delete_*", "enabled": false, "tags": ["dangerous"] }
        ],
        "cache": { "enabled": false },
        "audit": { "enabled": true, "path": scratch.join("audit.jsonl").display().to_string() }
    });
    Engine::new(Config::from_value(config, "<test>").unwrap())
}

/// The "did you mean" of a `TOOL_NOT_FOUND`.
fn suggestions(error: &discovery::Error) -> Vec<String> {
    match error {
        discovery::Error::ToolNotFound { suggestions, .. } => suggestions.clone(),
        other => panic!("expected TOOL_NOT_FOUND, got {other:?}"),
    }
}

fn search(query: &str) -> SearchRequest {
    SearchRequest {
        query: query.into(),
        server: None,
        limit: Some(20),
        include_disabled: true,
    }
}

#[tokio::test]
async fn two_callers_see_different_tools_and_a_hidden_tool_is_not_found() {
    let scratch = tempfile::tempdir().unwrap();
    let engine = engine(scratch.path());
    let (ann, bob) = (caller("ann", &["admins"]), caller("bob", &["devs"]));
    searches_differ(&engine, &ann, &bob).await;
    counts_and_lists_differ(&engine, &ann, &bob).await;
    hidden_details_are_not_found(&engine, &ann, &bob).await;
    executes_differ(&engine, &ann, &bob).await;
    audit_names_the_callers(scratch.path());
    engine.close().await;
}

async fn searches_differ(engine: &Engine, ann: &Caller, bob: &Caller) {
    let local = Caller::local();
    // Search: only ann (and the local user) find memory's tools, even asking for disabled ones.
    let servers_found = |response: &discovery::engine::SearchResponse| {
        let mut servers: Vec<String> = response.results.iter().map(|r| r.server.clone()).collect();
        servers.dedup();
        servers
    };
    let for_ann = engine.search(ann, &search("create entities graph")).await.unwrap();
    assert!(servers_found(&for_ann).contains(&"memory".to_owned()), "{for_ann:?}");
    let for_bob = engine.search(bob, &search("create entities graph")).await.unwrap();
    assert!(!servers_found(&for_bob).contains(&"memory".to_owned()), "{for_bob:?}");
    let for_local = engine.search(&local, &search("create entities graph")).await.unwrap();
    assert_eq!(
        for_local.results.iter().map(|r| &r.tool).collect::<Vec<_>>(),
        for_ann.results.iter().map(|r| &r.tool).collect::<Vec<_>>()
    );
    // Exact names too: bob's search for `echo` does not find it, ann's does.
    let exact =
        |response: discovery::engine::SearchResponse| response.results.first().map(|r| (r.tool.clone(), r.relevance));
    assert_eq!(
        exact(engine.search(ann, &search("everything:echo")).await.unwrap()),
        Some(("echo".into(), 1.0))
    );
    assert_ne!(
        exact(engine.search(bob, &search("everything:echo")).await.unwrap()).map(|e| e.0),
        Some("echo".into())
    );
}

async fn counts_and_lists_differ(engine: &Engine, ann: &Caller, bob: &Caller) {
    let local = Caller::local();
    // Counts: the server is listed for everyone, its tools only for those who may see them.
    let counts = |infos: Vec<discovery::engine::ServerInfo>| -> Vec<(String, usize, usize)> {
        infos
            .into_iter()
            .map(|s| (s.name, s.tool_count, s.enabled_count))
            .collect()
    };
    let local_counts = counts(engine.list_servers(&local).await);
    let ann_counts = counts(engine.list_servers(ann).await);
    let bob_counts = counts(engine.list_servers(bob).await);
    let memory_total = local_counts.iter().find(|c| c.0 == "memory").unwrap().1;
    assert!(memory_total > 5, "{local_counts:?}");
    let everything_total = local_counts.iter().find(|c| c.0 == "everything").unwrap().1;
    assert_eq!(
        bob_counts,
        [
            ("everything".to_owned(), everything_total - 1, everything_total - 1),
            ("memory".to_owned(), 0, 0)
        ]
    );
    // For the local user the rule for everyone disables `delete_*`; for admins their own rule
    // comes first and enables it (below, ann runs it).
    let local_memory = local_counts.iter().find(|c| c.0 == "memory").unwrap();
    assert!(
        local_memory.2 < local_memory.1,
        "delete_* is disabled for the local user"
    );
    assert_eq!(
        ann_counts,
        [
            ("everything".to_owned(), everything_total, everything_total),
            ("memory".to_owned(), memory_total, memory_total)
        ]
    );

    // list_tools: bob gets an empty list for memory, ann every tool, enabled.
    let bob_memory = engine.list_tools(bob, "memory", true).await.unwrap();
    assert!(bob_memory.tools.is_empty());
    let ann_memory = engine.list_tools(ann, "memory", true).await.unwrap();
    assert_eq!(ann_memory.tools.len(), memory_total);
    assert!(ann_memory.tools.iter().all(|t| t.enabled));
    let bob_everything = engine.list_tools(bob, "everything", true).await.unwrap();
    assert!(bob_everything.tools.iter().all(|t| t.name != "echo"));
}

async fn hidden_details_are_not_found(engine: &Engine, ann: &Caller, bob: &Caller) {
    // get_tool_details: hidden is exactly "not found", suggestions included.
    let details = engine.tool_details(ann, "memory", "create_entities").await.unwrap();
    assert!(details.enabled);
    let hidden = engine.tool_details(bob, "memory", "create_entities").await.unwrap_err();
    let missing = engine.tool_details(bob, "memory", "create_entitiez").await.unwrap_err();
    assert_eq!(hidden.code().as_str(), "TOOL_NOT_FOUND");
    assert_eq!(
        hidden.to_string().replace("create_entities", "X"),
        missing.to_string().replace("create_entitiez", "X"),
        "a hidden tool answers like one that does not exist"
    );
    assert!(
        suggestions(&hidden).iter().all(|s| !s.starts_with("memory:")),
        "{hidden:?}"
    );
    let for_bob = suggestions(&engine.tool_details(bob, "everything", "ech").await.unwrap_err());
    assert!(!for_bob.contains(&"everything:echo".to_owned()), "{for_bob:?}");
    let for_ann = suggestions(&engine.tool_details(ann, "everything", "ech").await.unwrap_err());
    assert!(for_ann.contains(&"everything:echo".to_owned()), "{for_ann:?}");
}

async fn executes_differ(engine: &Engine, ann: &Caller, bob: &Caller) {
    let local = Caller::local();
    // execute: bob is refused as if echo did not exist; ann and the local user run it.
    let echo = |caller: Caller| {
        let engine = engine.clone();
        async move {
            engine
                .execute(
                    &caller,
                    "everything",
                    "echo",
                    Some(json!({ "message": "hi" })),
                    ExecuteOptions::default(),
                )
                .await
        }
    };
    let refused = echo(bob.clone()).await.unwrap_err();
    assert_eq!(refused.code().as_str(), "TOOL_NOT_FOUND");
    for who in [ann.clone(), local.clone()] {
        let result = echo(who).await.unwrap();
        assert_eq!(result.content[0].as_text().unwrap().text, "Echo: hi");
    }
    // A caller rule's `true` lets ann run what the rule for everyone disables.
    let deleted = engine
        .execute(
            ann,
            "memory",
            "delete_entities",
            Some(json!({ "entityNames": [] })),
            ExecuteOptions::default(),
        )
        .await
        .unwrap();
    assert_ne!(deleted.is_error, Some(true), "{deleted:?}");
    let disabled = engine
        .execute(
            &local,
            "memory",
            "delete_entities",
            Some(json!({ "entityNames": [] })),
            ExecuteOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(disabled.code().as_str(), "TOOL_DISABLED");
}

fn audit_names_the_callers(scratch: &Path) {
    // The audit log names the caller of every execute.
    let audit = std::fs::read_to_string(scratch.join("audit.jsonl")).unwrap();
    let lines: Vec<(String, String, String)> = audit
        .lines()
        .map(|line| {
            let entry: Value = serde_json::from_str(line).unwrap();
            (
                entry["caller"].as_str().unwrap().to_owned(),
                entry["tool"].as_str().unwrap().to_owned(),
                entry["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("https://id.example#bob".into(), "echo".into(), "error".into()),
            ("https://id.example#ann".into(), "echo".into(), "ok".into()),
            ("local".into(), "echo".into(), "ok".into()),
            ("https://id.example#ann".into(), "delete_entities".into(), "ok".into()),
            ("local".into(), "delete_entities".into(), "error".into()),
        ]
    );
}
