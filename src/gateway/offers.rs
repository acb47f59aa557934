//! Prompts, resources and completions of the downstream servers, as the client sees them:
//! the engine gathers and routes them (`engine::offers`, which owns the naming and URI
//! rules); this turns its answers into MCP results, bounds the texts the gateway passes on,
//! and its errors into JSON-RPC errors.

use std::borrow::Cow;

use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceRequestParams, ReadResourceResult,
};
use rmcp::ErrorData;

use super::bound::{cut_text, FIELD_BYTES};
use crate::engine::Engine;
use crate::error::{Error, ErrorCode};

pub(super) async fn list_prompts(engine: &Engine) -> ListPromptsResult {
    let mut prompts = engine.list_prompts().await;
    for prompt in &mut prompts {
        bound(&mut prompt.description);
    }
    ListPromptsResult::with_all_items(prompts)
}

pub(super) async fn get_prompt(engine: &Engine, params: GetPromptRequestParams) -> Result<GetPromptResult, ErrorData> {
    engine.get_prompt(params).await.map_err(|e| rpc_error(&e))
}

pub(super) async fn list_resources(engine: &Engine) -> ListResourcesResult {
    let mut resources = engine.list_resources().await;
    for resource in &mut resources {
        bound(&mut resource.description);
    }
    ListResourcesResult::with_all_items(resources)
}

pub(super) async fn list_resource_templates(engine: &Engine) -> ListResourceTemplatesResult {
    let mut templates = engine.list_resource_templates().await;
    for template in &mut templates {
        bound(&mut template.description);
    }
    ListResourceTemplatesResult::with_all_items(templates)
}

pub(super) async fn read_resource(
    engine: &Engine,
    params: ReadResourceRequestParams,
) -> Result<ReadResourceResult, ErrorData> {
    engine.read_resource(params).await.map_err(|e| rpc_error(&e))
}

pub(super) async fn complete(engine: &Engine, params: CompleteRequestParams) -> Result<CompleteResult, ErrorData> {
    engine.complete(params).await.map_err(|e| rpc_error(&e))
}

fn bound(text: &mut Option<String>) {
    if let Some(Cow::Owned(cut)) = text.as_deref().map(|t| cut_text(t, FIELD_BYTES)) {
        *text = Some(cut);
    }
}

/// A name or URI the client got wrong is invalid params; anything else (the server failed,
/// is not connected) an internal error. The message is the engine's, bounded, with its code.
fn rpc_error(error: &Error) -> ErrorData {
    let message = format!("{}: {}", error.code(), cut_text(&error.to_string(), FIELD_BYTES));
    match error.code() {
        ErrorCode::ValidationError | ErrorCode::ServerNotFound => ErrorData::invalid_params(message, None),
        _ => ErrorData::internal_error(message, None),
    }
}
