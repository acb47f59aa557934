//! What the servers offer beside tools: prompts, resources, resource templates and
//! completions, gathered from every enabled server and routed back to the one that owns each.
//!
//! Names and URIs are rewritten so each item keeps one owner:
//! - A prompt is listed as `<server>__<prompt>`: letters, digits, `_` and `-` are all the
//!   slash-command forms of Claude Code (`/mcp__<gateway>__<prompt>`), VS Code
//!   (`/mcp.<gateway>.<prompt>`) and Cursor keep as they are, and `__` is the separator Claude
//!   Code itself uses between server and tool. The longest server name that prefixes it wins.
//! - A resource (or template) keeps its URI when no server before it (in config order) that
//!   the caller sees lists the same one, so the URI a user knows from the server still works.
//!   A later server's colliding URI is served as `anygpt://<server>/<original URI>`, which
//!   routes to that server and is given back to it unchanged.
//! - A URI read that no listing holds (one filled in from a template) goes to the server whose
//!   template's fixed prefix matches longest.
//!
//! Each request is a caller's ([`Sees`]): a server whose offers the caller may not see
//! (`RuleSet::sees_offers`: they follow its tools) is, to every listing, route and error, a
//! server that is not configured. The local user sees every server's.
//!
//! A server that is not running (idle: served from its tool snapshot, or closed for idleness)
//! is not started to list these: its lists as last stored beside its snapshot answer for it.
//! Each listing that reached a server stores what it gave.
//!
//! A per-user server (`connection.oauth.perUser`) is asked through the caller's own connection
//! only (`State::connection_for`, the one a tool call uses), and its lists are never stored:
//! they are the caller's own. A listing leaves out a server the caller has not signed in to;
//! any other request of it answers [`Error::SignInRequired`] with the caller's link. Its
//! resource subscriptions are refused: [`Subscriptions`] holds one per URI for every client.
//!
//! Every answer is scrubbed of registered secrets; resource contents obey `maxResultBytes`
//! like tool results.
//!
//! A server holds one subscription per URI whoever asked; [`Subscriptions`] counts the
//! clients on each, ends it downstream with the last, and makes it again in each new session
//! of its server.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::join_all;
use rmcp::model::{
    ClientRequest, CompleteRequest, CompleteRequestParams, CompleteResult, ContentBlock, GetPromptRequest,
    GetPromptRequestParams, GetPromptResult, PaginatedRequestParams, Prompt, PromptMessage, ReadResourceRequest,
    ReadResourceRequestParams, ReadResourceResult, Reference, RequestOptionalParam, Resource, ResourceContents,
    ResourceTemplate, Role, ServerCapabilities, ServerResult, SubscribeRequestParams, UnsubscribeRequestParams,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::state::{Server, State};
use super::Engine;
use crate::caller::Caller;
use crate::catalog::snapshot::{OfferKind, SnapshotStore};
use crate::error::{Error, Result};
use crate::upstream::{ServerState, UpstreamError};

/// Between a server's name and its prompt's name.
pub const PROMPT_SEPARATOR: &str = "__";
/// The scheme of a URI the gateway gave a resource whose URI an earlier server already has.
pub const GATEWAY_SCHEME: &str = "anygpt://";
/// Servers whose lists make one page of the gateway's listing: a client with hundreds of
/// servers behind the gateway gets them a few dozen at a time, each page asking only its own.
const PAGE_SERVERS: usize = 32;
/// Pages read from one server per listing: a server that never stops paging is cut here.
const MAX_PAGES: usize = 32;

/// Which of the kinds of offers a request is about.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Prompts,
    Resources,
    Completions,
}

impl Kind {
    fn offered(self, capabilities: &ServerCapabilities) -> bool {
        match self {
            Self::Prompts => capabilities.prompts.is_some(),
            Self::Resources => capabilities.resources.is_some(),
            Self::Completions => capabilities.completions.is_some(),
        }
    }
}

/// One kind of listing the gateway gathers from every server it shows: how to ask for a page
/// and read one, and where an idle server's stored list is kept.
trait Listed: Serialize + DeserializeOwned + Send {
    const KIND: Kind;
    const STORED: OfferKind;
    fn request(cursor: Option<PaginatedRequestParams>) -> ClientRequest;
    fn page(answer: ServerResult) -> Option<(Vec<Self>, Option<String>)>;
}

impl Listed for Prompt {
    const KIND: Kind = Kind::Prompts;
    const STORED: OfferKind = OfferKind::Prompts;
    fn request(cursor: Option<PaginatedRequestParams>) -> ClientRequest {
        ClientRequest::ListPromptsRequest(paged(cursor))
    }
    fn page(answer: ServerResult) -> Option<(Vec<Self>, Option<String>)> {
        match answer {
            ServerResult::ListPromptsResult(page) => Some((page.prompts, page.next_cursor)),
            _ => None,
        }
    }
}

impl Listed for Resource {
    const KIND: Kind = Kind::Resources;
    const STORED: OfferKind = OfferKind::Resources;
    fn request(cursor: Option<PaginatedRequestParams>) -> ClientRequest {
        ClientRequest::ListResourcesRequest(paged(cursor))
    }
    fn page(answer: ServerResult) -> Option<(Vec<Self>, Option<String>)> {
        match answer {
            ServerResult::ListResourcesResult(page) => Some((page.resources, page.next_cursor)),
            _ => None,
        }
    }
}

impl Listed for ResourceTemplate {
    const KIND: Kind = Kind::Resources;
    const STORED: OfferKind = OfferKind::ResourceTemplates;
    fn request(cursor: Option<PaginatedRequestParams>) -> ClientRequest {
        ClientRequest::ListResourceTemplatesRequest(paged(cursor))
    }
    fn page(answer: ServerResult) -> Option<(Vec<Self>, Option<String>)> {
        match answer {
            ServerResult::ListResourceTemplatesResult(page) => Some((page.resource_templates, page.next_cursor)),
            _ => None,
        }
    }
}

/// The servers whose offers one caller sees ([`RuleSet::sees_offers`](crate::rules::RuleSet::sees_offers)),
/// in config order: every server for the local user and any caller no caller rule is for.
/// A server the caller does not see is, to its offers, a server that is not configured.
pub(super) struct Sees {
    /// `None`: every server.
    only: Option<HashSet<String>>,
}

impl Sees {
    /// What `caller` sees under `state`'s rules, once the stored tool lists are loaded (so a
    /// server's tools decide for it as soon as they are known).
    pub(super) async fn of(state: &State, caller: &Caller) -> Self {
        if !state.config.rules().reach(caller).is_empty() {
            state.indexed().await;
        }
        Self::now(state, caller)
    }

    /// What `caller` sees with the tool lists known now.
    fn now(state: &State, caller: &Caller) -> Self {
        let rules = state.config.rules();
        let reach = rules.reach(caller);
        if reach.is_empty() {
            return Self { only: None };
        }
        let catalog = state.read_catalog();
        let view = state.view(&catalog, caller);
        let only = state
            .upstream
            .handles()
            .map(|server| server.spec.name.as_str())
            .filter(|name| {
                let tools = catalog
                    .server_tools(name)
                    .map(|tools| (0..tools.len()).map(|at| catalog.sight(view.as_deref(), name, at)));
                rules.sees_offers(name, tools, &reach)
            })
            .map(str::to_owned)
            .collect();
        Self { only: Some(only) }
    }

    /// Whether the caller sees `server`'s offers.
    pub(super) fn server(&self, server: &str) -> bool {
        self.only.as_ref().is_none_or(|only| only.contains(server))
    }
}

/// Where the last listings found each URI and template: the routing table for reads, and
/// what decides which server keeps a URI two of them list.
#[derive(Debug, Default)]
pub(super) struct Routes {
    inner: Mutex<RouteTable>,
}

#[derive(Debug, Default)]
struct RouteTable {
    /// Each server's URIs as it listed them last.
    uris: HashMap<String, HashSet<String>>,
    /// Each server's templates as it listed them last.
    templates: HashMap<String, Vec<String>>,
}

impl Routes {
    fn table(&self) -> std::sync::MutexGuard<'_, RouteTable> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl RouteTable {
    /// The first server in config order (`order`) that the caller sees and that listed
    /// `uri`: the one a plain `uri` means to that caller.
    fn owner<'o>(&self, order: &'o [String], sees: &Sees, uri: &str) -> Option<&'o str> {
        order
            .iter()
            .filter(|server| sees.server(server))
            .find(|server| self.uris.get(*server).is_some_and(|uris| uris.contains(uri)))
            .map(String::as_str)
    }

    /// As [`RouteTable::owner`] for a template.
    fn template_owner<'o>(&self, order: &'o [String], sees: &Sees, template: &str) -> Option<&'o str> {
        order
            .iter()
            .filter(|server| sees.server(server))
            .find(|server| {
                self.templates
                    .get(*server)
                    .is_some_and(|templates| templates.iter().any(|t| t == template))
            })
            .map(String::as_str)
    }

    /// The server a URI filled in from a template goes to: the seen server whose template's
    /// fixed prefix matches it longest (the first in config order among equals).
    fn template_route(&self, order: &[String], sees: &Sees, uri: &str) -> Option<String> {
        let mut best: Option<(usize, &String)> = None;
        for server in order.iter().filter(|server| sees.server(server)) {
            for template in self.templates.get(server).into_iter().flatten() {
                let prefix = fixed_prefix(template);
                if uri.starts_with(prefix) && best.is_none_or(|(len, _)| prefix.len() > len) {
                    best = Some((prefix.len(), server));
                }
            }
        }
        best.map(|(_, server)| server.clone())
    }
}

/// The downstream resource subscriptions clients hold: (server, its URI) → how many
/// subscriptions of clients (a legacy `resources/subscribe`, a `subscriptions/listen`) rest on
/// it. A server has one subscription per URI whoever asked, so only the last client to leave
/// ends it; and a server whose session ended forgets it, so each one held is made again when
/// the server is ready anew.
#[derive(Debug, Default)]
pub(super) struct Subscriptions {
    held: Arc<Mutex<HashMap<(String, String), usize>>>,
    /// Servers with a task that re-subscribes when their session is reopened.
    kept: Arc<Mutex<HashSet<String>>>,
    /// One change at a time per server (its subscribe or unsubscribe sent, then counted), so
    /// a server hears them in the order the counts changed: a client leaving as another
    /// arrives never has its unsubscribe land after the newcomer's subscribe.
    turns: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Subscriptions {
    /// `server`'s turn to change its subscriptions.
    fn turn(&self, server: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        turns.entry(server.to_owned()).or_default().clone()
    }

    /// One more client on `key`; whether it is the first.
    fn hold(&self, key: &(String, String)) -> bool {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let count = held.entry(key.clone()).or_default();
        *count += 1;
        *count == 1
    }

    /// One client less on `key`; whether it was the last (then the server should be told).
    fn release(&self, key: &(String, String)) -> bool {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        match held.get_mut(key) {
            Some(count) if *count > 1 => {
                *count -= 1;
                false
            }
            Some(_) => {
                held.remove(key);
                true
            }
            None => false,
        }
    }

    /// The URIs of `server` held now.
    fn of(&self, server: &str) -> Vec<String> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.keys()
            .filter(|(s, _)| s == server)
            .map(|(_, uri)| uri.clone())
            .collect()
    }

    /// Watch `server` while any subscription of it is held: each time it is ready in a new
    /// session (restarted after a crash, reopened after idleness), subscribe again.
    fn keep(&self, server: &Arc<Server>, timeout_ms: u64) {
        let name = server.spec.name.clone();
        if !self
            .kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.clone())
        {
            return;
        }
        let (held, kept, server) = (self.held.clone(), self.kept.clone(), server.clone());
        let this = Self {
            held,
            kept: kept.clone(),
            turns: Mutex::default(),
        };
        let mut states = server.watch_state();
        states.borrow_and_update();
        tokio::spawn(async move {
            let session = |server: &Server| matches!(server.state(), ServerState::Ready).then(|| server.attempt());
            let mut last = session(&server);
            while states.changed().await.is_ok() {
                let uris = {
                    let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                    let uris = this.of(&name);
                    if uris.is_empty() {
                        // Under `kept`'s lock: a new holder either came before (and is seen
                        // here) or finds no watcher and starts one.
                        kept.remove(&name);
                        return;
                    }
                    uris
                };
                let now = session(&server);
                if now.is_some() && now != last {
                    tracing::debug!(server = %name, count = uris.len(), "new session: subscribing again");
                    for uri in uris {
                        let timeout = Duration::from_millis(timeout_ms);
                        if let Err(error) = server.request(subscribe_request(&uri), timeout).await {
                            tracing::debug!(server = %name, %error, "resources/subscribe again failed");
                        }
                    }
                }
                last = now;
            }
            kept.lock().unwrap_or_else(PoisonError::into_inner).remove(&name);
        });
    }
}

/// `resources/subscribe` of `uri` as its server knows it.
fn subscribe_request(uri: &str) -> ClientRequest {
    // Servers before protocol 2026-07-28 (all those met today) subscribe this way.
    #[allow(deprecated)]
    ClientRequest::SubscribeRequest(rmcp::model::SubscribeRequest::new(SubscribeRequestParams::new(uri)))
}

impl Engine {
    /// Whether `caller` sees `server`'s prompts and resources now (what decides whether a
    /// change of them is worth telling the caller).
    #[must_use]
    pub fn shows_offers_of(&self, caller: &Caller, server: &str) -> bool {
        Sees::now(&self.current(), caller).server(server)
    }

    /// Each seen server's full list of `T` on the page at `cursor`, and the next cursor.
    async fn listing<T: Listed>(
        &self,
        state: &State,
        (caller, sees): (&Caller, &Sees),
        cursor: Option<&str>,
    ) -> Result<(Vec<(String, Vec<T>)>, Option<String>)> {
        let (mut servers, next) = page(state, cursor)?;
        servers.retain(|server| sees.server(&server.spec.name));
        Ok((gather::<T>(&servers, state, caller).await, next))
    }

    /// One page of the prompts of the enabled servers `caller` sees, named
    /// `<server>__<prompt>`, in config order, and the cursor of the next page.
    ///
    /// # Errors
    /// `VALIDATION_ERROR` for a cursor this gateway did not give.
    pub async fn list_prompts(&self, caller: &Caller, cursor: Option<&str>) -> Result<(Vec<Prompt>, Option<String>)> {
        let state = self.current();
        let sees = Sees::of(&state, caller).await;
        let (lists, next) = self.listing::<Prompt>(&state, (caller, &sees), cursor).await?;
        let mut prompts = Vec::new();
        for (server, list) in lists {
            for mut prompt in list {
                prompt.name = format!("{server}{PROMPT_SEPARATOR}{}", prompt.name);
                prompts.push(scrubbed(prompt));
            }
        }
        Ok((prompts, next))
    }

    /// `prompts/get` of a listed name, sent to its server under the server's own name.
    ///
    /// # Errors
    /// `VALIDATION_ERROR` for a name no server `caller` sees prefixes; `SERVER_CONNECTION_ERROR`,
    /// or the server's own error as `TOOL_EXECUTION_ERROR`.
    pub async fn get_prompt(&self, caller: &Caller, mut params: GetPromptRequestParams) -> Result<GetPromptResult> {
        let state = self.current();
        let sees = Sees::of(&state, caller).await;
        let (server, prompt) = split_prompt(&state, &sees, &params.name)?;
        params.name = prompt;
        let answer = send(
            &state,
            (caller, &server),
            ClientRequest::GetPromptRequest(GetPromptRequest::new(params)),
        )
        .await?;
        match answer {
            ServerResult::GetPromptResult(result) => {
                let mut result = scrubbed(result);
                cap_messages(&mut result, state.config.discovery.max_result_bytes());
                Ok(result)
            }
            _ => Err(unexpected(&server.spec.name, "prompts/get")),
        }
    }

    /// One page of the resources of the enabled servers `caller` sees; a URI an earlier
    /// server (of those it sees) has is served under `anygpt://<server>/<uri>`.
    ///
    /// # Errors
    /// `VALIDATION_ERROR` for a cursor this gateway did not give.
    pub async fn list_resources(
        &self,
        caller: &Caller,
        cursor: Option<&str>,
    ) -> Result<(Vec<Resource>, Option<String>)> {
        let state = self.current();
        let sees = Sees::of(&state, caller).await;
        let (lists, next) = self.listing::<Resource>(&state, (caller, &sees), cursor).await?;
        let order = config_order(&state);
        let mut table = self.routes.table();
        for (server, list) in &lists {
            let uris = list.iter().map(|resource| resource.uri.clone()).collect();
            table.uris.insert(server.clone(), uris);
        }
        let mut resources = Vec::new();
        for (server, list) in lists {
            for mut resource in list {
                let owner = table.owner(&order, &sees, &resource.uri);
                resource.uri = shown_uri(owner, &server, std::mem::take(&mut resource.uri));
                resources.push(scrubbed(resource));
            }
        }
        Ok((resources, next))
    }

    /// One page of the resource templates of the enabled servers `caller` sees, colliding
    /// ones renamed as resources are.
    ///
    /// # Errors
    /// `VALIDATION_ERROR` for a cursor this gateway did not give.
    pub async fn list_resource_templates(
        &self,
        caller: &Caller,
        cursor: Option<&str>,
    ) -> Result<(Vec<ResourceTemplate>, Option<String>)> {
        let state = self.current();
        let sees = Sees::of(&state, caller).await;
        let (lists, next) = self
            .listing::<ResourceTemplate>(&state, (caller, &sees), cursor)
            .await?;
        let order = config_order(&state);
        let mut table = self.routes.table();
        for (server, list) in &lists {
            let templates = list.iter().map(|template| template.uri_template.clone()).collect();
            table.templates.insert(server.clone(), templates);
        }
        let mut templates = Vec::new();
        for (server, list) in lists {
            for mut template in list {
                let owner = table.template_owner(&order, &sees, &template.uri_template);
                template.uri_template = shown_uri(owner, &server, std::mem::take(&mut template.uri_template));
                templates.push(scrubbed(template));
            }
        }
        Ok((templates, next))
    }

    /// `resources/read`, routed by the URI rule (module docs) among the servers `caller`
    /// sees; contents within `maxResultBytes`.
    ///
    /// # Errors
    /// `VALIDATION_ERROR` for a URI no server `caller` sees lists or templates; the server's
    /// errors.
    pub async fn read_resource(
        &self,
        caller: &Caller,
        mut params: ReadResourceRequestParams,
    ) -> Result<ReadResourceResult> {
        let state = self.current();
        let (server, uri) = self.route_uri(&state, caller, &params.uri).await?;
        let shown = std::mem::replace(&mut params.uri, uri.clone());
        let answer = send(
            &state,
            (caller, &server),
            ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params)),
        )
        .await?;
        let ServerResult::ReadResourceResult(result) = answer else {
            return Err(unexpected(&server.spec.name, "resources/read"));
        };
        let mut result = scrubbed(result);
        // The client asked for `shown`; contents of that very URI are given back under it.
        for contents in &mut result.contents {
            let (ResourceContents::TextResourceContents { uri: own, .. }
            | ResourceContents::BlobResourceContents { uri: own, .. }) = contents
            else {
                continue;
            };
            if *own == uri {
                own.clone_from(&shown);
            }
        }
        cap_contents(&mut result, state.config.discovery.max_result_bytes(), &shown);
        Ok(result)
    }

    /// `completion/complete` for a prompt's or a template's argument, routed to its server.
    ///
    /// # Errors
    /// As [`Engine::get_prompt`] and [`Engine::read_resource`].
    pub async fn complete(&self, caller: &Caller, mut params: CompleteRequestParams) -> Result<CompleteResult> {
        let state = self.current();
        let server = match &mut params.r#ref {
            Reference::Prompt(prompt) => {
                let sees = Sees::of(&state, caller).await;
                let (server, name) = split_prompt(&state, &sees, &prompt.name)?;
                prompt.name = name;
                server
            }
            Reference::Resource(template) => {
                let (server, uri) = self.route_uri(&state, caller, &template.uri).await?;
                template.uri = uri;
                server
            }
            _ => {
                return Err(Error::validation(
                    "`ref`: only `ref/prompt` and `ref/resource` can be completed",
                ))
            }
        };
        let through = state.connection_for(&server, caller).await?;
        if through
            .0
            .live_capabilities()
            .is_some_and(|c| !Kind::Completions.offered(&c))
        {
            return Ok(CompleteResult::default());
        }
        let answer = send_through(
            &state,
            (caller, &through),
            ClientRequest::CompleteRequest(CompleteRequest::new(params)),
        )
        .await?;
        match answer {
            ServerResult::CompleteResult(result) => Ok(scrubbed(result)),
            _ => Err(unexpected(&server.spec.name, "completion/complete")),
        }
    }

    /// `resources/subscribe` of a URI `caller` was given, sent to its server under the
    /// server's own URI, and held for one more client ([`Engine::release_subscription`] lets
    /// go of it). Returns that server and URI: what its `ResourceUpdated` events name. While
    /// held, the subscription is made again each time the server's session is (re)opened.
    ///
    /// # Errors
    /// As [`Engine::read_resource`]; a server without subscriptions answers with its error.
    pub async fn subscribe_resource(&self, caller: &Caller, uri: &str) -> Result<(String, String)> {
        let state = self.current();
        let (server, uri) = self.route_uri(&state, caller, uri).await?;
        if server.is_per_user() {
            // One subscription per URI whoever asked is what a shared connection holds; each
            // caller's own connection would need its own, ended with its caller's session.
            return Err(Error::ServerConnection {
                server: server.spec.name.clone(),
                source: UpstreamError::Failed {
                    reason: "subscriptions to the resources of a per-user server are not served: read the resource again to see it now".to_owned(),
                },
            });
        }
        let turn = self.subscriptions.turn(&server.spec.name);
        let _turn = turn.lock().await;
        send(&state, (caller, &server), subscribe_request(&uri)).await?;
        let key = (server.spec.name.clone(), uri);
        let first = self.subscriptions.hold(&key);
        if first {
            self.subscriptions
                .keep(&server, state.spec_of(&server).call_timeout_ms());
        }
        Ok(key)
    }

    /// The server and URI a subscription of `uri` by `caller` is held under (routed as
    /// [`Engine::subscribe_resource`], nothing sent).
    ///
    /// # Errors
    /// As [`Engine::read_resource`].
    pub async fn resource_key(&self, caller: &Caller, uri: &str) -> Result<(String, String)> {
        let state = self.current();
        let (server, uri) = self.route_uri(&state, caller, uri).await?;
        Ok((server.spec.name.clone(), uri))
    }

    /// One client lets go of a subscription [`Engine::subscribe_resource`] gave: the last one
    /// to do so unsubscribes downstream (a failure is logged; nobody waits on it).
    pub async fn release_subscription(&self, key: &(String, String)) {
        let turn = self.subscriptions.turn(&key.0);
        let _turn = turn.lock().await;
        if !self.subscriptions.release(key) {
            return;
        }
        let state = self.current();
        let Ok(server) = state.server(&key.0) else {
            return; // no longer configured: its session is gone with it
        };
        #[allow(deprecated)]
        let request = ClientRequest::UnsubscribeRequest(rmcp::model::UnsubscribeRequest::new(
            UnsubscribeRequestParams::new(key.1.clone()),
        ));
        // Never a per-user server's: their subscriptions are refused.
        if let Err(error) = send(&state, (&Caller::local(), server), request).await {
            tracing::debug!(server = %key.0, %error, "resources/unsubscribe downstream failed");
        }
    }

    /// The server a URI (or template) `caller` was given belongs to, and the URI that server
    /// knows it by. Lists again when the table has not seen it. A server the caller does not
    /// see is left out exactly as one that is not configured.
    async fn route_uri(&self, state: &State, caller: &Caller, uri: &str) -> Result<(Arc<Server>, String)> {
        let sees = Sees::of(state, caller).await;
        if let Some(rest) = uri.strip_prefix(GATEWAY_SCHEME) {
            let (server, original) = longest_prefixed(state, &sees, rest, "/").ok_or_else(|| {
                Error::validation(format!(
                    "`uri`: `{uri}` names no configured server after `{GATEWAY_SCHEME}`; resources/list gives the URIs to use"
                ))
            })?;
            return Ok((server, original.to_owned()));
        }
        if let Some(server) = self.lookup(state, &sees, uri) {
            return Ok((state.server(&server)?.clone(), uri.to_owned()));
        }
        // Not seen yet (a read before any listing, or a URI filled in from a template).
        self.list_every_page(caller).await?;
        match self.lookup(state, &sees, uri) {
            Some(server) => Ok((state.server(&server)?.clone(), uri.to_owned())),
            None => Err(Error::validation(format!(
                "`uri`: no server lists `{uri}` or a template it fits; resources/list and resources/templates/list give the URIs to use"
            ))),
        }
    }

    /// Every page of the resources and templates `caller` sees, to route by.
    async fn list_every_page(&self, caller: &Caller) -> Result<()> {
        let mut cursor = None;
        loop {
            let (_, next) = self.list_resources(caller, cursor.as_deref()).await?;
            cursor = next;
            if cursor.is_none() {
                break;
            }
        }
        loop {
            let (_, next) = self.list_resource_templates(caller, cursor.as_deref()).await?;
            cursor = next;
            if cursor.is_none() {
                return Ok(());
            }
        }
    }

    /// The seen server a plain `uri` routes to: the first that lists it, else the one whose
    /// template fits it best.
    fn lookup(&self, state: &State, sees: &Sees, uri: &str) -> Option<String> {
        let order = config_order(state);
        let table = self.routes.table();
        if let Some(server) = table.owner(&order, sees, uri) {
            return Some(server.to_owned());
        }
        table.template_route(&order, sees, uri)
    }
}

/// Each of `servers`' full list of `T` for `caller`, in config order; a server that does not
/// offer the kind, or fails, gives nothing (a failure is logged). An idle server's stored list
/// answers for it; a list read in full is stored.
///
/// A per-user server's lists are the caller's own (a resource list is often an account's
/// files): asked through the caller's own connection, never stored nor answered from a stored
/// list. A caller who has not signed in gets nothing of it rather than an error: a listing
/// gathers every server, and using one of its prompts or resources gives the sign-in link.
async fn gather<T: Listed>(servers: &[Arc<Server>], state: &State, caller: &Caller) -> Vec<(String, Vec<T>)> {
    let lists = servers.iter().map(|server| async move {
        let name = server.spec.name.clone();
        if !server.is_per_user() {
            return (name, list_of::<T>(server, state.snapshots()).await);
        }
        match state.signed_in_connection(server, caller).await {
            Ok(Some((own, _))) => (name, list_of::<T>(&own, None).await),
            Ok(None) => (name, Vec::new()),
            Err(error) => {
                tracing::warn!(server = %name, kind = ?T::KIND, %error, "left out of the listing");
                (name, Vec::new())
            }
        }
    });
    join_all(lists).await
}

/// `server`'s full list of `T` (see [`gather`]), kept in `store` when one is given.
async fn list_of<T: Listed>(server: &Arc<Server>, store: Option<&SnapshotStore>) -> Vec<T> {
    let kind = T::KIND;
    let name = server.spec.name.as_str();
    let mut items = Vec::new();
    if matches!(server.state(), ServerState::Idle) {
        if let Some(items) = store.and_then(|s| s.load_offers(&server.spec, T::STORED)) {
            return items;
        }
    }
    let mut cursor = None;
    let mut complete = false;
    // A server known not to offer the kind is not asked (nor warned about).
    let not_offered = || server.live_capabilities().is_some_and(|c| !kind.offered(&c));
    if not_offered() {
        return items;
    }
    for _ in 0..MAX_PAGES {
        let params = cursor
            .take()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let timeout = Duration::from_millis(server.spec.startup_timeout_ms());
        let answer = match server.request(T::request(params), timeout).await {
            Ok((_, Some(capabilities))) if !kind.offered(&capabilities) => {
                complete = true;
                break;
            }
            Ok((answer, _)) => answer,
            Err(error) => {
                if !not_offered() {
                    tracing::warn!(server = %name, ?kind, %error, "left out of the listing");
                }
                break;
            }
        };
        let Some((more, next)) = T::page(answer) else {
            tracing::warn!(server = %name, ?kind, "the server answered a listing with another result type");
            break;
        };
        items.extend(more);
        cursor = next;
        if cursor.is_none() {
            complete = true;
            break;
        }
    }
    if complete {
        if let Some(store) = store {
            store.save_offers(&server.spec, T::STORED, &items);
        }
    }
    items
}

/// The servers' names in config order.
fn config_order(state: &State) -> Vec<String> {
    state
        .upstream
        .handles()
        .map(|server| server.spec.name.clone())
        .collect()
}

/// The servers of the page at `cursor` (the index of its first server), and the next cursor.
fn page(state: &State, cursor: Option<&str>) -> Result<(Vec<Arc<Server>>, Option<String>)> {
    let servers: Vec<Arc<Server>> = state.upstream.handles().cloned().collect();
    let (range, next) = page_range(servers.len(), cursor)?;
    Ok((servers[range].to_vec(), next))
}

/// Which of `total` servers the page at `cursor` covers, and the cursor after it.
fn page_range(total: usize, cursor: Option<&str>) -> Result<(std::ops::Range<usize>, Option<String>)> {
    let start = match cursor {
        None => 0,
        Some(cursor) => cursor.parse::<usize>().ok().filter(|start| *start < total).ok_or_else(|| {
            Error::validation(format!(
                "`cursor`: `{}` is not a cursor this gateway gave (or the servers changed since); list again without one",
                cursor.chars().take(64).collect::<String>()
            ))
        })?,
    };
    let end = (start + PAGE_SERVERS).min(total);
    Ok((start..end, (end < total).then(|| end.to_string())))
}

/// A listing request for the page at `cursor`.
fn paged<M: Default>(cursor: Option<PaginatedRequestParams>) -> RequestOptionalParam<M, PaginatedRequestParams> {
    RequestOptionalParam {
        method: M::default(),
        params: cursor,
        extensions: rmcp::model::Extensions::default(),
    }
}

/// Send `request` to `server` for `caller` within its call timeout: through the caller's own
/// connection for a per-user server ([`Error::SignInRequired`] when they have not signed in).
async fn send(
    state: &State,
    (caller, server): (&Caller, &Arc<Server>),
    request: ClientRequest,
) -> Result<ServerResult> {
    let through = state.connection_for(server, caller).await?;
    send_through(state, (caller, &through), request).await
}

/// [`send`] through the connection [`State::connection_for`] gave: a per-user server that
/// refused the caller's token answers with a new sign-in link.
async fn send_through(
    state: &State,
    (caller, (server, token)): (&Caller, &(Arc<Server>, Option<String>)),
    request: ClientRequest,
) -> Result<ServerResult> {
    let timeout = Duration::from_millis(state.spec_of(server).call_timeout_ms());
    let name = server.spec.name.clone();
    let method = request.method().to_owned();
    let outcome = server.request(request, timeout).await;
    if let (Err(_), Some(token)) = (&outcome, token) {
        if let Some(again) = state.if_token_refused(caller, &name, token).await {
            return Err(again);
        }
    }
    match outcome {
        Ok((answer, _)) => Ok(answer),
        Err(source @ UpstreamError::Remote { .. }) => Err(Error::Request {
            server: name,
            method,
            source,
        }),
        Err(source) => Err(Error::ServerConnection { server: name, source }),
    }
}

fn unexpected(server: &str, method: &str) -> Error {
    Error::ServerConnection {
        server: server.to_owned(),
        source: UpstreamError::protocol(format!("the server answered {method} with another result type")),
    }
}

/// The server and its own prompt name for a listed `<server>__<prompt>`, among the servers
/// the caller sees.
fn split_prompt(state: &State, sees: &Sees, name: &str) -> Result<(Arc<Server>, String)> {
    longest_prefixed(state, sees, name, PROMPT_SEPARATOR)
        .map(|(server, prompt)| (server, prompt.to_owned()))
        .ok_or_else(|| {
            Error::validation(format!(
                "`name`: no server's prompt is named `{name}`; prompts/list gives the names (`<server>{PROMPT_SEPARATOR}<prompt>`)"
            ))
        })
}

/// The seen server whose name followed by `separator` starts `text` (the longest such
/// name), and what follows.
fn longest_prefixed<'t>(state: &State, sees: &Sees, text: &'t str, separator: &str) -> Option<(Arc<Server>, &'t str)> {
    state
        .upstream
        .handles()
        .filter(|server| sees.server(&server.spec.name))
        .filter_map(|server| {
            let rest = text.strip_prefix(server.spec.name.as_str())?.strip_prefix(separator)?;
            Some((server.clone(), rest))
        })
        .max_by_key(|(server, _)| server.spec.name.len())
}

/// `uri` as listed for `server`: as it is when `server` is its `owner` (no earlier server
/// has it), else under the gateway scheme.
fn shown_uri(owner: Option<&str>, server: &str, uri: String) -> String {
    if owner.is_none_or(|owner| owner == server) {
        uri
    } else {
        format!("{GATEWAY_SCHEME}{server}/{uri}")
    }
}

/// What every URI of a template starts with: the text before its first expression.
fn fixed_prefix(template: &str) -> &str {
    template.find('{').map_or(template, |at| &template[..at])
}

/// `value` with registered secrets scrubbed from every string in it. A value that does not
/// survive the round trip (it always does: same type both ways) is kept as it was.
fn scrubbed<T: Serialize + DeserializeOwned>(value: T) -> T {
    if !crate::secrets::any_registered() {
        return value;
    }
    let Ok(mut json) = serde_json::to_value(&value) else {
        return value;
    };
    crate::secrets::scrub_json(&mut json);
    serde_json::from_value(json).unwrap_or(value)
}

/// Keep a prompt's messages within `max_bytes`, as tool results are: text is cut, another
/// block that does not fit is dropped with its message, and a last message says what was
/// removed.
fn cap_messages(result: &mut GetPromptResult, max_bytes: usize) {
    let size = |block: &ContentBlock| match block {
        ContentBlock::Text(text) => text.text.len(),
        other => serde_json::to_string(other).map_or(0, |s| s.len()),
    };
    let total: usize = result.messages.iter().map(|m| size(&m.content)).sum();
    if total <= max_bytes {
        return;
    }
    let mut budget = max_bytes;
    let mut kept = Vec::with_capacity(result.messages.len() + 1);
    for mut message in std::mem::take(&mut result.messages) {
        let bytes = size(&message.content);
        if bytes <= budget {
            budget -= bytes;
            kept.push(message);
        } else if let ContentBlock::Text(text) = &mut message.content {
            let mut end = budget;
            while !text.text.is_char_boundary(end) {
                end -= 1;
            }
            text.text.truncate(end);
            budget = 0;
            kept.push(message);
        }
    }
    kept.push(PromptMessage::new_text(
        Role::User,
        format!("[anygpt-discovery: prompt truncated: {total} bytes exceed maxResultBytes {max_bytes}]"),
    ));
    result.messages = kept;
}

/// Keep `result` within `max_bytes`: text is cut, a blob that does not fit is dropped, and a
/// text entry says what was removed (as `cap_result` does for tool results).
fn cap_contents(result: &mut ReadResourceResult, max_bytes: usize, uri: &str) {
    let size = |c: &ResourceContents| match c {
        ResourceContents::TextResourceContents { text, .. } => text.len(),
        ResourceContents::BlobResourceContents { blob, .. } => blob.len(),
        other => serde_json::to_string(other).map_or(0, |s| s.len()),
    };
    let total: usize = result.contents.iter().map(size).sum();
    if total <= max_bytes {
        return;
    }
    let mut budget = max_bytes;
    let mut kept = Vec::with_capacity(result.contents.len() + 1);
    for mut contents in std::mem::take(&mut result.contents) {
        let bytes = size(&contents);
        if bytes <= budget {
            budget -= bytes;
            kept.push(contents);
        } else if let ResourceContents::TextResourceContents { text, .. } = &mut contents {
            let mut end = budget;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            budget = 0;
            kept.push(contents);
        }
    }
    kept.push(ResourceContents::TextResourceContents {
        uri: uri.to_owned(),
        mime_type: Some("text/plain".to_owned()),
        text: format!("[anygpt-discovery: resource truncated: {total} bytes exceed maxResultBytes {max_bytes}]"),
        meta: None,
    });
    result.contents = kept;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(uris: &[(&str, &[&str])], templates: &[(&str, &[&str])]) -> RouteTable {
        let own = |list: &[(&str, &[&str])]| -> HashMap<String, Vec<String>> {
            list.iter()
                .map(|(server, items)| ((*server).to_owned(), items.iter().map(|i| (*i).to_owned()).collect()))
                .collect()
        };
        RouteTable {
            uris: own(uris)
                .into_iter()
                .map(|(server, uris)| (server, uris.into_iter().collect()))
                .collect(),
            templates: own(templates),
        }
    }

    fn order(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    fn seeing(servers: &[&str]) -> Sees {
        Sees {
            only: Some(servers.iter().map(|s| (*s).to_owned()).collect()),
        }
    }

    #[test]
    fn the_first_lister_keeps_a_uri_and_a_later_one_gets_the_gateway_scheme() {
        let table = table(&[("a", &["file:///x"]), ("b", &["file:///x", "file:///y"])], &[]);
        let order = order(&["a", "b"]);
        let all = Sees { only: None };
        let shown =
            |server: &str, uri: &str, sees: &Sees| shown_uri(table.owner(&order, sees, uri), server, uri.into());
        assert_eq!(shown("a", "file:///x", &all), "file:///x");
        assert_eq!(shown("b", "file:///x", &all), "anygpt://b/file:///x");
        assert_eq!(shown("b", "file:///y", &all), "file:///y");
        assert_eq!(table.owner(&order, &all, "file:///x"), Some("a"));
    }

    #[test]
    fn a_caller_who_does_not_see_the_first_lister_gets_the_uri_plain_from_the_next() {
        let table = table(
            &[("a", &["file:///x"]), ("b", &["file:///x"])],
            &[("a", &["t://{id}", "t://long/{id}"]), ("b", &["t://{id}"])],
        );
        let order = order(&["a", "b"]);
        let only_b = seeing(&["b"]);
        assert_eq!(table.owner(&order, &only_b, "file:///x"), Some("b"));
        assert_eq!(
            shown_uri(table.owner(&order, &only_b, "file:///x"), "b", "file:///x".into()),
            "file:///x",
            "nothing tells b's caller that a hidden server has the same URI"
        );
        assert_eq!(table.template_owner(&order, &only_b, "t://{id}"), Some("b"));
        let all = Sees { only: None };
        assert_eq!(table.template_route(&order, &all, "t://long/1").as_deref(), Some("a"));
        assert_eq!(
            table.template_route(&order, &all, "t://1").as_deref(),
            Some("a"),
            "first among equals"
        );
        assert_eq!(
            table.template_route(&order, &only_b, "t://long/1").as_deref(),
            Some("b")
        );
        assert_eq!(table.template_route(&order, &seeing(&[]), "t://1"), None);
        assert_eq!(table.owner(&order, &seeing(&[]), "file:///x"), None);
    }

    #[test]
    fn a_subscription_ends_downstream_only_with_its_last_holder() {
        let subscriptions = Subscriptions::default();
        let key = ("everything".to_owned(), "demo://a".to_owned());
        assert!(subscriptions.hold(&key), "the first holder");
        assert!(!subscriptions.hold(&key));
        assert_eq!(subscriptions.of("everything"), ["demo://a"]);
        assert!(!subscriptions.release(&key), "another client still holds it");
        assert!(subscriptions.release(&key), "the last one: tell the server");
        assert!(!subscriptions.release(&key), "nothing held: nothing to tell");
        assert!(subscriptions.of("everything").is_empty());
    }

    #[test]
    fn pages_cover_every_server_once_and_refuse_a_foreign_cursor() {
        let (first, next) = page_range(70, None).unwrap();
        assert_eq!((first, next.as_deref()), (0..32, Some("32")));
        let (second, next) = page_range(70, Some("32")).unwrap();
        assert_eq!((second, next.as_deref()), (32..64, Some("64")));
        let (last, next) = page_range(70, Some("64")).unwrap();
        assert_eq!((last, next), (64..70, None));
        assert_eq!(page_range(0, None).unwrap(), (0..0, None));
        for bad in ["70", "-1", "abc"] {
            let error = page_range(70, Some(bad)).unwrap_err().to_string();
            assert!(error.contains("list again without one"), "{error}");
        }
    }

    #[test]
    fn a_template_prefix_stops_at_its_first_expression() {
        assert_eq!(
            fixed_prefix("demo://resource/dynamic/text/{id}"),
            "demo://resource/dynamic/text/"
        );
        assert_eq!(fixed_prefix("plain://x"), "plain://x");
    }

    #[test]
    fn oversized_prompt_messages_are_cut_and_say_so() {
        let mut result = GetPromptResult::new(vec![
            PromptMessage::new_text(Role::User, "abcdef"),
            PromptMessage::new_text(Role::Assistant, "ghijkl"),
        ]);
        cap_messages(&mut result, 8);
        let texts: Vec<String> = result
            .messages
            .iter()
            .map(|m| match &m.content {
                ContentBlock::Text(text) => text.text.clone(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(texts[..2], ["abcdef", "gh"]);
        assert!(texts[2].contains("12 bytes exceed maxResultBytes 8"), "{}", texts[2]);
    }

    #[test]
    fn oversized_contents_are_cut_and_say_so() {
        let mut result = ReadResourceResult::new(vec![
            ResourceContents::text("é".repeat(10), "u"),
            ResourceContents::blob("A".repeat(100), "u"),
        ]);
        cap_contents(&mut result, 5, "u");
        assert_eq!(result.contents.len(), 2);
        let ResourceContents::TextResourceContents { text, .. } = &result.contents[0] else {
            panic!("text first")
        };
        assert_eq!(text, "éé");
        let ResourceContents::TextResourceContents { text, .. } = &result.contents[1] else {
            panic!("a note")
        };
        assert!(text.contains("120 bytes exceed maxResultBytes 5"), "{text}");
    }
}
