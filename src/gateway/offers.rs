//! Prompts, resources and completions of the downstream servers, as the client sees them:
//! the engine gathers and routes them (`engine::offers`, which owns the naming and URI
//! rules); this turns its answers into MCP results, bounds the texts the gateway passes on,
//! and its errors into JSON-RPC errors. The [`Relay`] passes the servers' announcements on
//! to one client ([`Out`]: a stdio session's, or one 2026-07-28 `subscriptions/listen` stream,
//! see [`listen`]): changed prompt and resource lists as one notification per burst (of the
//! servers that client sees), and updates of the resources it subscribed to, under the URIs it
//! knows them by. Every request is answered for its caller.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, Prompt, ReadResourceRequestParams, ReadResourceResult, Resource,
    ResourceTemplate,
};
use rmcp::model::{SubscribeRequestParams, UnsubscribeRequestParams};
use rmcp::service::{SubscriptionContext, SubscriptionSink};
use rmcp::{ErrorData, Peer, RoleServer};

use super::announce::{Changed, Out};
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

/// Who asks: the caller, and the origin their sign-in links are served under (a per-user
/// server they have not signed in to answers with one).
pub(super) type Asker<'a> = (&'a Caller, Option<&'a str>);

pub(super) async fn get_prompt(
    engine: &Engine,
    (caller, origin): Asker<'_>,
    params: GetPromptRequestParams,
) -> Result<GetPromptResult, ErrorData> {
    engine
        .get_prompt(caller, params)
        .await
        .map_err(|e| asker_error(&e, origin))
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
    (caller, origin): Asker<'_>,
    params: ReadResourceRequestParams,
) -> Result<ReadResourceResult, ErrorData> {
    let mut result = engine
        .read_resource(caller, params)
        .await
        .map_err(|e| asker_error(&e, origin))?;
    // A server of an older protocol leaves `resultType` out; a 2026-07-28 client must get it
    // (rmcp drops it again for older clients).
    result.result_type.get_or_insert(rmcp::model::ResultType::COMPLETE);
    Ok(result)
}

pub(super) async fn complete(
    engine: &Engine,
    (caller, origin): Asker<'_>,
    params: CompleteRequestParams,
) -> Result<CompleteResult, ErrorData> {
    engine
        .complete(caller, params)
        .await
        .map_err(|e| asker_error(&e, origin))
}

fn bound(text: &mut Option<String>) {
    if let Some(Cow::Owned(cut)) = text.as_deref().map(|t| cut_text(t, FIELD_BYTES)) {
        *text = Some(cut);
    }
}

/// [`rpc_error`], but a per-user server the caller has not signed in to answers with the
/// URL-mode elicitation of their sign-in link (under `origin`), as a tool call's does.
fn asker_error(error: &Error, origin: Option<&str>) -> ErrorData {
    match error {
        Error::SignInRequired { server, link } => {
            super::sign_in::url_required_error(server, &super::sign_in::absolute(link, origin))
        }
        _ => rpc_error(error),
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

/// Passes the servers' announcements on to one client: a gateway session's, or one listen
/// stream's. It also holds that client's resource subscriptions, and lets go of them when it
/// is dropped (a session that ended, a listen that was cancelled).
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
    out: Option<Out>,
    /// Whose announcements of changed lists the client hears: the servers whose offers this
    /// caller sees (`None`: every server's, the local user).
    hears: Option<(Engine, Caller)>,
    /// The engine the subscriptions are held with, to release them.
    engine: Option<Engine>,
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
        locked(&self.state).out = Some(Out::Peer(peer));
        self.listen();
    }

    /// A relay for one `subscriptions/listen` stream of `caller`: changed lists of the
    /// servers `caller` sees only.
    fn for_listen(engine: &Engine, caller: &Caller, sink: SubscriptionSink) -> Self {
        let relay = Self::default();
        {
            let mut state = locked(&relay.state);
            state.out = Some(Out::Listen(sink));
            if !caller.is_local() {
                state.hears = Some((engine.clone(), caller.clone()));
            }
        }
        relay.listen();
        relay
    }

    fn listen(&self) {
        let mut listening = self.listening.lock().unwrap_or_else(PoisonError::into_inner);
        if listening.is_none() {
            let state = self.state.clone();
            *listening = Some(listen_offers(Arc::new(move |server: &str, event: &OfferEvent| {
                relay(&state, server, event);
            })));
        }
    }

    /// Pass `server`'s updates of `uri` (its own) on as updates of `asked` (the client's).
    /// Whether the client had not subscribed by `asked` yet.
    fn hold(&self, engine: &Engine, key: (String, String), asked: String) -> bool {
        let mut state = locked(&self.state);
        state.engine.get_or_insert_with(|| engine.clone());
        state.subscribed.entry(key).or_default().insert(asked)
    }

    /// Stop passing `asked` on; whether the client had subscribed by it.
    fn drop_held(&self, key: &(String, String), asked: &str) -> bool {
        let mut state = locked(&self.state);
        let Some(uris) = state.subscribed.get_mut(key) else {
            return false;
        };
        let removed = uris.remove(asked);
        if uris.is_empty() {
            state.subscribed.remove(key);
        }
        removed
    }
}

impl Drop for Relay {
    /// The client is gone: each subscription it held is let go of (the last client of one
    /// ends it downstream).
    fn drop(&mut self) {
        let mut state = locked(&self.state);
        let Some(engine) = state.engine.take() else { return };
        let held: Vec<((String, String), usize)> =
            state.subscribed.drain().map(|(key, uris)| (key, uris.len())).collect();
        drop(state);
        if held.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            for (key, times) in held {
                for _ in 0..times {
                    engine.release_subscription(&key).await;
                }
            }
        });
    }
}

/// Pass one announcement of `server` on.
fn relay(state: &Arc<Mutex<RelayState>>, server: &str, event: &OfferEvent) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let mut guard = locked(state);
    let Some(out) = guard.out.clone() else { return };
    match event {
        OfferEvent::ResourceUpdated { uri } => {
            let Some(targets) = guard.subscribed.get(&(server.to_owned(), uri.clone())).cloned() else {
                return;
            };
            runtime.spawn(async move {
                for uri in targets {
                    if !out.resource_updated(uri).await {
                        return;
                    }
                }
            });
        }
        OfferEvent::PromptsChanged | OfferEvent::ResourcesChanged => {
            // A server the caller does not see changes nothing they can list.
            if let Some((engine, caller)) = &guard.hears {
                if !engine.shows_offers_of(caller, server) {
                    return;
                }
            }
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
                out.list_changed(if prompts { Changed::Prompts } else { Changed::Resources })
                    .await;
            });
        }
    }
}

/// `resources/subscribe`: routed to the owning server; its updates reach the client under
/// the URI it subscribed with. Without a session (`relay` is `None`: the HTTP face, where a
/// 2025-11-25 client has no stream to get updates on) the URI is checked as for a read and
/// nothing is held: a 2026-07-28 client subscribes with `subscriptions/listen`.
pub(super) async fn subscribe(
    engine: &Engine,
    relay: Option<&Relay>,
    caller: &Caller,
    params: SubscribeRequestParams,
) -> Result<(), ErrorData> {
    let Some(relay) = relay else {
        engine
            .resource_key(caller, &params.uri)
            .await
            .map_err(|e| rpc_error(&e))?;
        return Ok(());
    };
    let key = engine
        .subscribe_resource(caller, &params.uri)
        .await
        .map_err(|e| rpc_error(&e))?;
    if !relay.hold(engine, key.clone(), params.uri) {
        // Subscribed by that URI already: the client holds it once.
        engine.release_subscription(&key).await;
    }
    Ok(())
}

/// `resources/unsubscribe`, routed the same way; the server is told when no other client
/// holds the subscription.
pub(super) async fn unsubscribe(
    engine: &Engine,
    relay: Option<&Relay>,
    caller: &Caller,
    params: UnsubscribeRequestParams,
) -> Result<(), ErrorData> {
    let key = engine
        .resource_key(caller, &params.uri)
        .await
        .map_err(|e| rpc_error(&e))?;
    if relay.is_some_and(|relay| relay.drop_held(&key, &params.uri)) {
        engine.release_subscription(&key).await;
    }
    Ok(())
}

/// One 2026-07-28 `subscriptions/listen` stream, until the client cancels it: the servers'
/// changed prompt and resource lists (of the servers the caller sees, coalesced), changes of
/// the tools shown directly, and updates of the resources in `resourceSubscriptions` under
/// the URIs the client gave, each subscribed downstream while the stream lasts. A URI no
/// server the caller sees has is accepted and never updated, as any unknown URI.
pub(super) async fn listen(engine: &Engine, context: SubscriptionContext) -> Result<(), ErrorData> {
    let caller = Caller::of_request(&context.request_context().extensions);
    let sink = context.sink().clone();
    let accepted = context.accepted().clone();
    let relay = Relay::for_listen(engine, &caller, sink.clone());
    let _tools = if accepted.tools_list_changed == Some(true) {
        Some(super::exposed::Announcer::for_listen(engine, &caller, Out::Listen(sink)).await)
    } else {
        None
    };
    for uri in accepted.resource_subscriptions.iter().flatten() {
        match engine.subscribe_resource(&caller, uri).await {
            Ok(key) => {
                if !relay.hold(engine, key.clone(), uri.clone()) {
                    engine.release_subscription(&key).await; // listed twice
                }
            }
            Err(error) => tracing::debug!(%error, "subscriptions/listen: a resource is not subscribed"),
        }
    }
    context.cancelled().await;
    drop(relay); // lets go of its subscriptions
    Ok(())
}
