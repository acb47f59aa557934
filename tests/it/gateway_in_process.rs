//! The gateway's protocol behaviour in-process over `tokio::io::duplex`, with no downstream
//! server: what the five tools say when there is nothing (or nothing valid) behind them.

use std::future::pending;

use discovery::{Config, Engine};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

async fn gateway(mut config: Value) -> RunningService<RoleClient, ()> {
    // No snapshots or audit lines in the user's folders from tests.
    config["cache"] = json!({ "enabled": false });
    config["audit"] = json!({ "enabled": false });
    let engine = Engine::new(Config::from_value(config, "<test>").unwrap());
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(server_io);
    tokio::spawn(discovery::gateway::serve(engine, read, write, pending()));
    ().serve(client_io).await.unwrap()
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &'static str, args: Value) -> (bool, Value) {
    let mut params = CallToolRequestParams::new(tool);
    params.arguments = args.as_object().cloned();
    let result = client.peer().call_tool(params).await.unwrap();
    let body = serde_json::from_str(&result.content[0].as_text().unwrap().text).unwrap();
    (result.is_error == Some(true), body)
}

#[tokio::test]
async fn empty_gateway_lists_no_servers_and_searches_with_a_hint() {
    let client = gateway(json!({})).await;
    let (is_error, body) = call(&client, "list_mcp_servers", json!({})).await;
    assert!(!is_error);
    assert_eq!(body["servers"], json!([]));
    assert!(body["hint"]
        .as_str()
        .unwrap()
        .starts_with("No servers configured: add them to"));
    let (_, body) = call(&client, "search_tools", json!({ "query": "anything" })).await;
    assert_eq!(body["results"], json!([]));
    assert!(body["hint"].as_str().unwrap().contains("no tool matches"));
}

#[tokio::test]
async fn validation_errors_are_results_the_model_can_read() {
    let client = gateway(json!({})).await;
    let (is_error, body) = call(&client, "search_tools", json!({ "query": "  " })).await;
    assert!(is_error);
    assert_eq!(body["error"]["code"], "VALIDATION_ERROR");
    let (_, body) = call(&client, "search_tools", json!({ "query": "x", "limit": 1000 })).await;
    assert_eq!(body["error"]["code"], "VALIDATION_ERROR");
    assert!(body["error"]["message"].as_str().unwrap().contains("limit"));
}

#[tokio::test]
async fn unknown_meta_tool_is_invalid_params() {
    let client = gateway(json!({})).await;
    let err = client
        .peer()
        .call_tool(CallToolRequestParams::new("nope"))
        .await
        .unwrap_err();
    let rmcp::service::ServiceError::McpError(data) = err else {
        panic!("expected a JSON-RPC error, got {err:?}")
    };
    assert_eq!(data.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    assert!(data.message.contains("nope"));
}

#[tokio::test]
async fn missing_required_argument_is_a_validation_result_naming_the_field() {
    let client = gateway(json!({})).await;
    let (is_error, body) = call(&client, "get_tool_details", json!({ "server": "x" })).await;
    assert!(is_error);
    assert_eq!(body["error"]["code"], "VALIDATION_ERROR");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("missing field `tool`"), "{message}");
}

#[tokio::test]
async fn failing_server_is_an_error_status_with_its_reason() {
    let client =
        gateway(json!({ "servers": [{ "name": "gone", "connection": { "command": "/nonexistent/server" } }] })).await;
    let (_, body) = call(&client, "list_mcp_servers", json!({})).await;
    assert_eq!(body["servers"][0]["status"], "error");
    assert!(body["servers"][0]["error"].as_str().unwrap().contains("not found"));
    let (is_error, body) = call(&client, "execute_tool", json!({ "server": "gone", "tool": "t" })).await;
    assert!(is_error);
    assert_eq!(body["error"]["code"], "SERVER_CONNECTION_ERROR");
}

fn fault_server() -> Value {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("__test__/fixtures/fault-server.mjs");
    json!({ "command": "node", "args": [script] })
}

/// The body of every error code a model can meet, each produced by the real gateway path
/// (a fixture server behind it for the downstream ones). `CONFIGURATION_ERROR` never reaches
/// the model: a bad config stops the gateway before it serves.
#[tokio::test]
async fn error_bodies_the_model_sees() {
    let client = gateway(json!({
        "toolRules": [{ "server": "fault", "pattern": ["count"], "enabled": false }],
        "servers": [
            { "name": "fault", "connection": fault_server(), "timeoutMs": 5000 },
            { "name": "gone", "connection": { "command": "/nonexistent/server" } },
        ]
    }))
    .await;
    // `crash` ends the fixture server mid-call: last.
    let cases: [(&str, &'static str, Value); 12] = [
        (
            "validation_missing_field",
            "get_tool_details",
            json!({ "server": "fault" }),
        ),
        ("validation_wrong_type", "search_tools", json!({ "query": 5 })),
        (
            "validation_negative_limit",
            "search_tools",
            json!({ "query": "x", "limit": -1 }),
        ),
        (
            "validation_unknown_field",
            "list_tools",
            json!({ "server": "fault", "verbose": true }),
        ),
        ("validation_blank_query", "search_tools", json!({ "query": "  " })),
        (
            "validation_tool_arguments",
            "execute_tool",
            json!({ "server": "fault", "tool": "strict", "arguments": { "count": 0 } }),
        ),
        ("server_not_found", "list_tools", json!({ "server": "faults" })),
        (
            "tool_not_found",
            "get_tool_details",
            json!({ "server": "fault", "tool": "ech" }),
        ),
        (
            "tool_disabled",
            "execute_tool",
            json!({ "server": "fault", "tool": "count" }),
        ),
        (
            "tool_execution_timeout",
            "execute_tool",
            json!({ "server": "fault", "tool": "hang", "timeoutMs": 300 }),
        ),
        (
            "server_connection_error",
            "execute_tool",
            json!({ "server": "gone", "tool": "t" }),
        ),
        (
            "tool_execution_error",
            "execute_tool",
            json!({ "server": "fault", "tool": "crash" }),
        ),
    ];
    // The backoff delay depends on how many attempts a loaded machine fitted in before the
    // call; its values are unit-tested under paused time, so the snapshot keeps only its shape.
    let delay = regex::Regex::new(r"next attempt in \d+ s").unwrap();
    for (name, tool, args) in cases {
        let (is_error, body) = call(&client, tool, args).await;
        assert!(is_error, "{name}: {body}");
        let body = delay.replace_all(&body.to_string(), "next attempt in N s").into_owned();
        insta::assert_snapshot!(format!("error_body_{name}"), body);
    }
}

#[tokio::test]
async fn meta_tool_definitions() {
    let definitions = serde_json::to_string_pretty(discovery::gateway::definitions()).unwrap();
    insta::assert_snapshot!(definitions);
}

/// Raw lines in, raw lines out: what the client reads for malformed requests.
#[tokio::test]
async fn malformed_requests_are_answered_for_their_id() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let engine = Engine::new(
        Config::from_value(
            json!({ "cache": { "enabled": false }, "audit": { "enabled": false } }),
            "<test>",
        )
        .unwrap(),
    );
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(server_io);
    tokio::spawn(discovery::gateway::serve(engine, read, write, pending()));
    let (client_read, mut client_write) = tokio::io::split(client_io);
    let mut lines = BufReader::new(client_read).lines();
    let initialize = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "raw", "version": "0" } } });
    client_write
        .write_all(format!("{initialize}\n").as_bytes())
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(answer["id"], 0);
    client_write
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"\ud800"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"x","limit":1e999}}}"#.to_string(),
        format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"search_tools","arguments":{{"query":{deep}}}}}}}"#),
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"search_tools"}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":"five","method":"tools/call","params":{"name":5}}"#.to_string(),
        "this is not json".to_string(),
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"ok"}}}"#.to_string(),
    ];
    let mut answers = Vec::new();
    for request in &requests {
        client_write.write_all(format!("{request}\n").as_bytes()).await.unwrap();
        let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        answers.push(answer);
    }
    let summary: Vec<Value> = answers
        .iter()
        .map(|a| json!([a.get("id"), a["error"]["code"]]))
        .collect();
    assert_eq!(
        summary,
        [
            json!([1, -32700]),
            json!([2, -32700]),
            json!([3, -32700]),
            json!([4, -32602]),
            json!(["five", -32602]),
            json!([null, -32700]),
            json!([7, null])
        ]
    );
    insta::assert_snapshot!(answers.iter().map(Value::to_string).collect::<Vec<_>>().join("\n"));
}
