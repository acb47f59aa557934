//! The tools `discovery.expose` shows beside the five meta-tools (`engine::exposed` picks
//! them and `crate::expose` names them): listed with their definitions, called by name
//! through exactly `execute_tool`'s path (the same engine call, rules, trust, validation,
//! audit line, forwarding and result cap), and `notifications/tools/list_changed` sent when
//! the set the client last listed is no longer the set.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{JsonObject, Tool};
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::announce::{Changed, Out};
use super::bound::{cut_text, FIELD_BYTES};
use super::meta_tool::definitions;
use super::tools::execute_tool::ExecuteTool;
use crate::caller::Caller;
use crate::engine::{Engine, ExposedTool};

/// How long changes are gathered into one notification: servers connecting at start, or a
/// server re-listing its tools in a burst, cost the client one re-listing.
const COALESCE: Duration = Duration::from_millis(200);

/// The meta-tools' names: no exposed tool may take one.
fn reserved() -> Vec<&'static str> {
    definitions().iter().map(|t| t.name.as_ref()).collect()
}

async fn exposed(engine: &Engine, caller: &Caller) -> Vec<ExposedTool> {
    engine.exposed_tools(&reserved(), caller).await
}

/// The definitions `tools/list` adds to the five; descriptions bounded as every text the
/// gateway passes on.
pub(super) async fn definitions_of(engine: &Engine, caller: &Caller) -> Vec<Tool> {
    exposed(engine, caller)
        .await
        .into_iter()
        .map(|t| shown(t.definition))
        .collect()
}

fn shown(mut tool: Tool) -> Tool {
    if let Some(description) = &tool.description {
        if let std::borrow::Cow::Owned(cut) = cut_text(description, FIELD_BYTES) {
            tool.description = Some(cut.into());
        }
    }
    tool
}

/// What the tools shown directly add to the client's context.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExposedCost {
    /// How many tools `discovery.expose` shows beside the five.
    pub tools: usize,
    /// Their definitions' o200k tokens, as `tools/list` sends them.
    pub tokens: usize,
}

/// The cost of the tools exposed to `caller`; `None` when the config exposes none.
pub(crate) async fn cost(engine: &Engine, caller: &Caller) -> Option<ExposedCost> {
    if !engine.exposes() {
        return None;
    }
    let shown = definitions_of(engine, caller).await;
    Some(ExposedCost {
        tools: shown.len(),
        tokens: crate::setup::savings::tokens_of(&shown),
    })
}

/// Whether `name` is a meta-tool's (those are never looked up among the exposed tools).
pub(super) fn is_meta_tool(name: &str) -> bool {
    definitions().iter().any(|t| t.name == name)
}

/// The `execute_tool` call an exposed tool's name stands for, if `name` is one; the
/// arguments are handed back when it is not.
pub(super) async fn call_of(
    engine: &Engine,
    caller: &Caller,
    name: &str,
    arguments: Option<JsonObject>,
) -> Result<ExecuteTool, Option<JsonObject>> {
    match exposed(engine, caller).await.into_iter().find(|t| t.name == name) {
        Some(found) => Ok(ExecuteTool::new(found.server, found.tool, arguments.map(Value::Object))),
        None => Err(arguments),
    }
}

/// What a list of tool definitions is, for telling two apart.
fn fingerprint(tools: &[Tool]) -> u64 {
    let text = serde_json::to_vec(tools).unwrap_or_default();
    crate::hash::fnv1a(&text)
}

/// Tells one session's client when the exposed tools change.
#[derive(Debug, Default)]
pub(super) struct Announcer {
    /// The fingerprint of the exposed tools the client was last given (`None`: never listed).
    listed: Arc<Mutex<Option<u64>>>,
    /// Ends the watching task with the session (its handler, which owns this, is dropped).
    stop: CancellationToken,
}

impl Drop for Announcer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Announcer {
    /// Remember what the client was given.
    pub(super) fn listed(&self, exposed: &[Tool]) {
        *self.listed.lock().unwrap_or_else(PoisonError::into_inner) = Some(fingerprint(exposed));
    }

    /// Watch the engine for `peer`'s session until the client goes (only when something is
    /// exposed: otherwise the set never changes).
    pub(super) fn start(&self, engine: &Engine, peer: Peer<RoleServer>) {
        // Sessions that get notifications this way are stdio ones: the local user's set.
        self.watch(engine, Caller::local(), Out::Peer(peer));
    }

    /// An announcer for one 2026-07-28 `subscriptions/listen` stream of `caller`: the set
    /// `caller` has when the stream opens is what a change is measured against. It stops
    /// when dropped (the stream ended).
    pub(super) async fn for_listen(engine: &Engine, caller: &Caller, out: Out) -> Self {
        let announcer = Self::default();
        announcer.listed(&definitions_of(engine, caller).await);
        announcer.watch(engine, caller.clone(), out);
        announcer
    }

    fn watch(&self, engine: &Engine, caller: Caller, out: Out) {
        let mut changes = engine.watch_tools();
        let (engine, listed, stop) = (engine.clone(), self.listed.clone(), self.stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    next = changes.changed() => if next.is_err() { return },
                }
                tokio::time::sleep(COALESCE).await;
                changes.mark_unchanged();
                let now = fingerprint(&definitions_of(&engine, &caller).await);
                let due = {
                    let mut listed = listed.lock().unwrap_or_else(PoisonError::into_inner);
                    let due = listed.is_some_and(|before| before != now);
                    if due {
                        *listed = Some(now);
                    }
                    due
                };
                if due && !out.list_changed(Changed::Tools).await {
                    return; // the client is gone
                }
            }
        });
    }
}
