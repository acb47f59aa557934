//! Prompts, resources and completions of the downstream servers, as the client sees them:
//! the engine gathers and routes them (`engine::offers`, which owns the naming and URI
//! rules); this turns its answers into MCP results, bounds the texts the gateway passes on,
//! and its errors into JSON-RPC errors. The [`Relay`] passes the servers' announcements on:
//! changed prompt and resource lists as one notification per burst, and updates of the
//! resources the client subscribed to, under the URIs the client knows them by.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, Prompt, ReadResourceRequestParams, ReadResourceResult, Resource,
    ResourceTemplate,
};
use rmcp::model::{ResourceUpdatedNotificationParam, SubscribeRequestParams, UnsubscribeRequestParams};
use rmcp::{ErrorData, Peer, RoleServer};

use super::bound::{cut_text, FIELD_BYTES};
use crate::caller::Caller;
use crate::engine::{listen_offers, Engine, Listening, OfferEvent};
use crate::error::{Error, ErrorCode};

/// One kind of listing as the client gets it: the descriptions bounded, the page made.
trait Shown: Sized {
    type Page;
    fn description(&mut self) -> &mut Option<String>;
    fn page(items: Vec<Self>, next: Option<String>) -> Self::Page;
}

impl Shown for Prompt {
    type Page = ListPromptsResult;
    fn description(&mut self) -> &mut Option<String> {
        &mut self.description
    }
    fn page(items: Vec<Self>, next: Option<String>) -> Self::Page {
        ListPromptsResult {
            next_cursor: next,
            ..ListPromptsResult::with_all_items(items)
        }
    }
}

impl Shown for Resource {
    type Page = ListResourcesResult;
    fn description(&mut self) -> &mut Option<String> {
        &mut self.description
    }
    fn page(items: Vec<Self>, next: Option<String>) -> Self::Page {
        ListResourcesResult {
            next_cursor: next,
            ..ListResourcesResult::with_all_items(items)
        }
    }
}

impl Shown for ResourceTemplate {
    type Page = ListResourceTemplatesResult;
    fn description(&mut self) -> &mut Option<String> {
        &mut self.description
    }
    fn page(items: Vec<Self>, next: Option<String>) -> Self::Page {
        ListResourceTemplatesResult {
            next_cursor: next,
            ..ListResourceTemplatesResult::with_all_items(items)
        }
    }
}

/// The page of one listing the engine gave.
fn shown<T: Shown>(listed: crate::error::Result<(Vec<T>, Option<String>)>) -> Result<T::Page, ErrorData> {
    let (mut items, next) = listed.map_err(|e| rpc_error(&e))?;
    for item in &mut items {
        bound(item.description());
    }
    Ok(T::page(items, next))
}

pub(super) async fn list_prompts(
    engine: &Engine,
    caller: &Caller,
    cursor: Option<&str>,
) -> Result<ListPromptsResult, ErrorData> {
    shown(engine.list_prompts(caller, cursor).await)
}

pub(super) async fn get_prompt(
    engine: &Engine,
    caller: &Caller,
    params: GetPromptRequestParams,
) -> Result<GetPromptResult, ErrorData> {
    engine.get_prompt(caller, params).await.map_err(|e| rpc_error(&e))
}

pub(super) async fn list_resources(
    engine: &Engine,
    caller: &Caller,
    cursor: Option<&str>,
) -> Result<ListResourcesResult, ErrorData> {
    shown(engine.list_resources(caller, cursor).await)
}

pub(super) async fn list_resource_templates(
    engine: &Engine,
    caller: &Caller,
    cursor: Option<&str>,
) -> Result<ListResourceTemplatesResult, ErrorData> {
    shown(engine.list_resource_templates(caller, cursor).await)
}

pub(super) async fn read_resource(
    engine: &Engine,
    caller: &Caller,
    params: ReadResourceRequestParams,
) -> Result<ReadResourceResult, ErrorData> {
    let mut result = engine.read_resource(caller, params).await.map_err(|e| rpc_error(&e))?;
    // A server of an older protocol leaves `resultType` out; a 2026-07-28 client must get it
    // (rmcp drops it again for older clients).
    result.result_type.get_or_insert(rmcp::model::ResultType::COMPLETE);
    Ok(result)
}

pub(super) async fn complete(
    engine: &Engine,
    caller: &Caller,
    params: CompleteRequestParams,
) -> Result<CompleteResult, ErrorData> {
    engine.complete(caller, params).await.map_err(|e| rpc_error(&e))
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

/// How long announcements of a changed list are gathered into one notification: a server
/// adding ten prompts one by one costs the client one re-listing, not ten.
const COALESCE: Duration = Duration::from_millis(200);

/// Passes the servers' announcements on to the client of one gateway session.
#[derive(Default)]
pub(crate) struct Relay {
    state: Arc<Mutex<RelayState>>,
    listening: Mutex<Option<Listening>>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct RelayState {
    peer: Option<Peer<RoleServer>>,
    /// (server, URI as the server knows it) → the URIs the client subscribed to it by.
    subscribed: HashMap<(String, String), BTreeSet<String>>,
    prompts_due: bool,
    resources_due: bool,
}

fn locked(state: &Mutex<RelayState>) -> std::sync::MutexGuard<'_, RelayState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Relay {
    /// Start passing announcements on to `peer` (once the client is initialized).
    pub(super) fn start(&self, peer: Peer<RoleServer>) {
        locked(&self.state).peer = Some(peer);
        let mut listening = self.listening.lock().unwrap_or_else(PoisonError::into_inner);
        if listening.is_none() {
            let state = self.state.clone();
            *listening = Some(listen_offers(Arc::new(move |server: &str, event: &OfferEvent| {
                relay(&state, server, event);
            })));
        }
    }
}

/// Pass one announcement of `server` on.
fn relay(state: &Arc<Mutex<RelayState>>, server: &str, event: &OfferEvent) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let mut guard = locked(state);
    let Some(peer) = guard.peer.clone() else { return };
    match event {
        OfferEvent::ResourceUpdated { uri } => {
            let Some(targets) = guard.subscribed.get(&(server.to_owned(), uri.clone())).cloned() else {
                return;
            };
            runtime.spawn(async move {
                for uri in targets {
                    if let Err(error) = peer
                        .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                        .await
                    {
                        tracing::debug!(%error, "resources/updated not sent");
                    }
                }
            });
        }
        OfferEvent::PromptsChanged | OfferEvent::ResourcesChanged => {
            let prompts = matches!(event, OfferEvent::PromptsChanged);
            let due = if prompts {
                &mut guard.prompts_due
            } else {
                &mut guard.resources_due
            };
            if std::mem::replace(due, true) {
                return; // already on its way
            }
            let state = state.clone();
            runtime.spawn(async move {
                tokio::time::sleep(COALESCE).await;
                {
                    let mut guard = locked(&state);
                    let due = if prompts {
                        &mut guard.prompts_due
                    } else {
                        &mut guard.resources_due
                    };
                    *due = false;
                }
                let sent = if prompts {
                    peer.notify_prompt_list_changed().await
                } else {
                    peer.notify_resource_list_changed().await
                };
                if let Err(error) = sent {
                    tracing::debug!(%error, "list_changed not sent");
                }
            });
        }
    }
}

/// `resources/subscribe`: routed to the owning server; its updates reach the client under
/// the URI it subscribed with.
pub(super) async fn subscribe(
    engine: &Engine,
    relay: &Relay,
    caller: &Caller,
    params: SubscribeRequestParams,
) -> Result<(), ErrorData> {
    let asked = params.uri.clone();
    let key = engine
        .subscribe_resource(caller, params)
        .await
        .map_err(|e| rpc_error(&e))?;
    locked(&relay.state).subscribed.entry(key).or_default().insert(asked);
    Ok(())
}

/// `resources/unsubscribe`, routed the same way.
pub(super) async fn unsubscribe(
    engine: &Engine,
    relay: &Relay,
    caller: &Caller,
    params: UnsubscribeRequestParams,
) -> Result<(), ErrorData> {
    let asked = params.uri.clone();
    let key = engine
        .unsubscribe_resource(caller, params)
        .await
        .map_err(|e| rpc_error(&e))?;
    let mut state = locked(&relay.state);
    if let Some(uris) = state.subscribed.get_mut(&key) {
        uris.remove(&asked);
        if uris.is_empty() {
            state.subscribed.remove(&key);
        }
    }
    Ok(())
}
