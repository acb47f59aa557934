//! What moving servers behind the gateway saves: the tool definitions a client loads into the
//! model's context for them, before (every tool of every server) and after (the gateway's
//! five), in o200k tokens of their `tools/list` JSON.
//!
//! Measured, not guessed: each server's tools come from its catalog snapshot or, when it may
//! be started, its real `tools/list`; only a server that cannot be reached is estimated, and
//! says so. Tokens are counted with the o200k vocabulary itself (`tiktoken-rs`), on the tools
//! serialized as the server listed them (fields the gateway's MCP library does not model, as
//! `execution`, included: `upstream::as_listed`).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::Tool;
use serde::Serialize;

use crate::catalog::snapshot::SnapshotStore;
use crate::config::{Config, ServerSpec};
use crate::engine::Engine;
use crate::upstream::as_listed;

/// A server that could not be measured is counted as this many tools…
const TYPICAL_TOOLS: usize = 10;
/// …and tokens, unless some servers were measured: then as their average.
const TYPICAL_TOKENS: usize = 1_500;

/// The longest a measurement waits for servers to list their tools.
const MEASURE_BUDGET: Duration = Duration::from_secs(60);

/// A server's tools and where they came from.
type Listed = (Vec<Arc<Tool>>, &'static str);

/// One server's share.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerCost {
    pub server: String,
    pub tools: usize,
    pub tokens: usize,
    /// `snapshot`, `tools/list` or `estimate`.
    pub from: &'static str,
}

/// Before and after.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Savings {
    pub servers: Vec<ServerCost>,
    pub tools_before: usize,
    pub tokens_before: usize,
    pub tools_after: usize,
    pub tokens_after: usize,
    /// Whether any figure is an estimate.
    pub estimated: bool,
}

impl Savings {
    /// Tokens saved per conversation (never negative).
    #[must_use]
    pub fn saved(&self) -> usize {
        self.tokens_before.saturating_sub(self.tokens_after)
    }

    /// One line for people.
    #[must_use]
    pub fn line(&self) -> String {
        let estimated: Vec<&str> = self
            .servers
            .iter()
            .filter(|s| s.from == "estimate")
            .map(|s| s.server.as_str())
            .collect();
        let note = if estimated.is_empty() {
            String::new()
        } else {
            format!(" (estimate for {}: not reachable, no snapshot)", estimated.join(", "))
        };
        format!(
            "tool definitions loaded by the client: {} tools, {} o200k tokens before; {} tools, {} tokens after; {} tokens saved per conversation{note}",
            self.tools_before,
            self.tokens_before,
            self.tools_after,
            self.tokens_after,
            self.saved()
        )
    }
}

/// o200k tokens of `tools` serialized as a `tools/list` result's `tools` array.
#[must_use]
pub fn tokens_of(tools: &[impl Serialize]) -> usize {
    let text = serde_json::to_string(tools).unwrap_or_default();
    tiktoken_rs::o200k_base_singleton().encode_ordinary(&text).len()
}

/// Measure `servers`. `connect`: servers without a snapshot may be started to list their tools
/// (the client's own user-scope servers); otherwise only snapshots are read.
pub async fn measure(servers: &[ServerSpec], connect: bool) -> Savings {
    let store = SnapshotStore::in_cache_dir();
    let mut found: Vec<Option<Listed>> = servers
        .iter()
        .map(|spec| {
            let snapshot = store.as_ref()?.load(spec)?;
            Some((snapshot.tools.into_iter().map(Arc::new).collect(), "snapshot"))
        })
        .collect();
    let missing: Vec<&ServerSpec> = servers
        .iter()
        .zip(&found)
        .filter(|(_, f)| f.is_none())
        .map(|(s, _)| s)
        .collect();
    if connect && !missing.is_empty() {
        let listed = list_live(&missing).await;
        for (spec, tools) in missing.iter().zip(listed) {
            if let (Some(tools), Some(slot)) = (tools, servers.iter().position(|s| s.name == spec.name)) {
                found[slot] = Some((tools, "tools/list"));
            }
        }
    }
    let mut costs: Vec<ServerCost> = servers
        .iter()
        .zip(&found)
        .map(|(spec, f)| match f {
            Some((tools, from)) => ServerCost {
                server: spec.name.clone(),
                tools: tools.len(),
                tokens: tokens_of(&tools.iter().map(|tool| as_listed(tool)).collect::<Vec<_>>()),
                from,
            },
            None => ServerCost {
                server: spec.name.clone(),
                tools: 0,
                tokens: 0,
                from: "estimate",
            },
        })
        .collect();
    estimate_missing(&mut costs);
    let definitions = crate::gateway::meta_tool::definitions();
    Savings {
        tools_before: costs.iter().map(|c| c.tools).sum(),
        tokens_before: costs.iter().map(|c| c.tokens).sum(),
        tools_after: definitions.len(),
        tokens_after: tokens_of(definitions),
        estimated: costs.iter().any(|c| c.from == "estimate"),
        servers: costs,
    }
}

/// Fill in the servers that were not measured: the average of those that were, else a typical
/// server.
fn estimate_missing(costs: &mut [ServerCost]) {
    let measured: Vec<&ServerCost> = costs.iter().filter(|c| c.from != "estimate").collect();
    let (tools, tokens) = if measured.is_empty() {
        (TYPICAL_TOOLS, TYPICAL_TOKENS)
    } else {
        let n = measured.len();
        (
            measured.iter().map(|c| c.tools).sum::<usize>() / n,
            measured.iter().map(|c| c.tokens).sum::<usize>() / n,
        )
    };
    for cost in costs.iter_mut().filter(|c| c.from == "estimate") {
        cost.tools = tools;
        cost.tokens = tokens;
    }
}

/// Start `servers` in an engine of their own and take each one's tool list (`None` for one
/// that fails or does not answer within the budget). The engine stores what it lists as
/// snapshots, so the gateway's first start answers at once.
async fn list_live(servers: &[&ServerSpec]) -> Vec<Option<Vec<Arc<Tool>>>> {
    let specs: Vec<serde_json::Value> = servers.iter().filter_map(|s| serde_json::to_value(s).ok()).collect();
    let document = serde_json::json!({ "discovery": { "servers": specs } });
    let Ok(config) = Config::from_value(document, "<setup>") else {
        return vec![None; servers.len()];
    };
    let engine = Engine::new(config);
    engine.start();
    let lists = servers.iter().map(|spec| {
        let engine = engine.clone();
        async move {
            tokio::time::timeout(MEASURE_BUDGET, engine.tool_definitions(&spec.name))
                .await
                .ok()
                .and_then(Result::ok)
        }
    });
    let listed = futures::future::join_all(lists).await;
    engine.close().await;
    listed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(from: &'static str, tools: usize, tokens: usize) -> ServerCost {
        ServerCost {
            server: from.into(),
            tools,
            tokens,
            from,
        }
    }

    #[test]
    fn an_unreachable_server_is_estimated_from_the_measured_ones() {
        let mut costs = [
            cost("snapshot", 4, 400),
            cost("tools/list", 2, 200),
            cost("estimate", 0, 0),
        ];
        estimate_missing(&mut costs);
        assert_eq!((costs[2].tools, costs[2].tokens), (3, 300));
        let mut alone = [cost("estimate", 0, 0)];
        estimate_missing(&mut alone);
        assert_eq!((alone[0].tools, alone[0].tokens), (TYPICAL_TOOLS, TYPICAL_TOKENS));
    }

    #[test]
    fn the_gateway_costs_its_five_definitions() {
        let definitions = crate::gateway::meta_tool::definitions();
        let tokens = tokens_of(definitions);
        // The gateway's own budget (gateway/tools): five tools under 400 tokens.
        assert!(tokens > 100 && tokens < 400, "{tokens}");
    }
}
