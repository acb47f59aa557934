//! The native `anygpt-discovery` binary serves the same five tools as the npm bin.

use std::path::Path;

use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test]
async fn native_binary_serves_the_five_meta_tools_on_the_demo_config() {
    let server = repo().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        server.is_file(),
        "{} is missing: run `npm install` first",
        server.display()
    );
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_anygpt-discovery"));
    command.arg("--config").arg(repo().join("examples/demo.config.json"));
    let scratch = tempfile::tempdir().unwrap();
    command.env("ANYGPT_DISCOVERY_CACHE_DIR", scratch.path().join("cache"));
    command.env("ANYGPT_DISCOVERY_STATE_DIR", scratch.path().join("state"));
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();

    let tools = client.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "list_mcp_servers",
            "search_tools",
            "list_tools",
            "get_tool_details",
            "execute_tool"
        ]
    );

    let search = call(&client, "search_tools", json!({ "query": "echo" })).await;
    let first = &search["results"][0];
    assert_eq!(
        (first["server"].as_str(), first["tool"].as_str()),
        (Some("everything"), Some("echo"))
    );

    let mut echo = CallToolRequestParams::new("execute_tool");
    echo.arguments = json!({ "server": "everything", "tool": "echo", "arguments": { "message": "native" } })
        .as_object()
        .cloned();
    let result = client.peer().call_tool(echo).await.unwrap();
    assert_eq!(result.content[0].as_text().unwrap().text, "Echo: native");
    client.cancel().await.unwrap();
}

async fn call(client: &rmcp::service::RunningService<rmcp::RoleClient, ()>, tool: &'static str, args: Value) -> Value {
    let mut params = CallToolRequestParams::new(tool);
    params.arguments = args.as_object().cloned();
    let result = client.peer().call_tool(params).await.unwrap();
    serde_json::from_str(&result.content[0].as_text().unwrap().text).unwrap()
}
