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
    tokio::spawn(discovery::gateway::serve(engine, server_io, pending()));
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
    assert_eq!(body, json!({ "servers": [] }));
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
async fn missing_required_argument_names_the_field() {
    let client = gateway(json!({})).await;
    let mut params = CallToolRequestParams::new("get_tool_details");
    params.arguments = json!({ "server": "x" }).as_object().cloned();
    let err = client.peer().call_tool(params).await.unwrap_err();
    let rmcp::service::ServiceError::McpError(data) = err else {
        panic!("expected a JSON-RPC error, got {err:?}")
    };
    assert_eq!(data.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    assert!(data.message.contains("missing field `tool`"), "{}", data.message);
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
