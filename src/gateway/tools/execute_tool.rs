//! `execute_tool`: run a downstream tool; its result comes back unchanged.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ProgressNotificationParam, ServerRequest, Tool};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::caller::Caller;
use crate::config::SecuritySpec;
use crate::engine::{Engine, ExecuteOptions, ProgressSink, ProgressUpdate};
use crate::error::{Error, Result};
use crate::gateway::bound::{cut_text, FIELD_BYTES, FORWARDED_REQUEST_BYTES};
use crate::gateway::forwarded;
use crate::gateway::sign_in::{self, SignIn, SignInOrigin};
use crate::gateway::to_client::Channel;
use tokio_util::sync::CancellationToken;

pub const NAME: &str = "execute_tool";

/// Longest per-call timeout, as the Node API takes it (`setTimeout`'s ceiling, ~24.8 days): a
/// timer past it is no timeout, and `Instant` arithmetic far out overflows.
const MAX_TIMEOUT_MS: u64 = 2_147_483_647;

pub fn definition() -> Tool {
    super::tool(
        NAME,
        "Run a tool. arguments must match its input schema from get_tool_details.",
        json!({
            "type": "object",
            "properties": {
                "server": { "type": "string" },
                "tool": { "type": "string" },
                "arguments": { "type": "object" },
                "timeoutMs": { "type": "integer" }
            },
            "required": ["server", "tool"]
        }),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecuteTool {
    server: String,
    tool: String,
    #[serde(default)]
    arguments: Option<Value>,
    /// Overrides the server's `timeoutMs` for this call.
    #[serde(default, rename = "timeoutMs")]
    timeout_ms: Option<u64>,
}

impl ExecuteTool {
    /// The call of `server`'s `tool` that a tool shown directly stands for (`gateway::exposed`).
    pub(crate) fn new(server: String, tool: String, arguments: Option<Value>) -> Self {
        Self {
            server,
            tool,
            arguments,
            timeout_ms: None,
        }
    }

    pub async fn apply(
        self,
        engine: &Engine,
        caller: &Caller,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult> {
        let trace = crate::telemetry::CallTrace::of(engine.tracer().as_ref(), context, NAME);
        let leg = Leg {
            channel: Channel::of(context),
            cancel: context.ct.clone(),
            progress: progress_to_client(context),
            trace: trace.parent(),
            sign_in_origin: SignInOrigin::of_request(&context.extensions),
        };
        // Boxed: the engine's call is a large future, and every meta-tool's dispatch holds it.
        let outcome = Box::pin(self.run(engine, caller, leg)).await;
        trace.end(&outcome);
        outcome
    }

    /// Run the call, asking its client through `leg.channel`.
    pub(crate) async fn run(self, engine: &Engine, caller: &Caller, leg: Leg) -> Result<CallToolResult> {
        let (channel, cancel) = (leg.channel.clone(), leg.cancel.clone());
        let options = ExecuteOptions {
            timeout_ms: checked_timeout(self.timeout_ms)?,
            cancel: Some(leg.cancel),
            progress: leg.progress,
            confirm: crate::gateway::confirm::asker(&leg.channel),
            trace: leg.trace,
        };
        // What the server asks its client during the call (elicitation, sampling) goes to ours,
        // named, checked and bounded (`gateway::forwarded`).
        let forwarder = requests_to_client(leg.channel, &self.server, engine.security());
        let _forwarding = crate::upstream::forward_requests(&self.server, &caller.identity(), forwarder);
        let outcome = engine
            .execute(
                caller,
                &self.server,
                &self.tool,
                self.arguments.clone(),
                options.clone(),
            )
            .await;
        // A per-user server the caller has not signed in to: put the link to them, and run the
        // call once they have (`gateway::sign_in`).
        let Err(Error::SignInRequired { server, link }) = &outcome else {
            return outcome;
        };
        let link = sign_in::absolute(link, leg.sign_in_origin.as_deref());
        match sign_in::ask(engine, caller, &channel, (server, &link), &cancel).await {
            SignIn::Done => {
                engine
                    .execute(caller, &self.server, &self.tool, self.arguments, options)
                    .await
            }
            SignIn::Answer(result) => Ok(result),
            SignIn::Refused(error) => Err(error),
        }
    }
}

/// How one call reaches its client: questions, cancellation, progress; and the trace it
/// belongs to.
pub(crate) struct Leg {
    pub channel: Channel,
    pub cancel: CancellationToken,
    pub progress: Option<ProgressSink>,
    pub trace: Option<crate::telemetry::SpanContext>,
    /// Where sign-in links of per-user servers are served (`gateway::sign_in`).
    pub sign_in_origin: Option<String>,
}

/// Forward `server`'s request to the client, when the client declared the capability it needs
/// and the server is within `security.forwarded`; refuse it with the reason otherwise.
fn requests_to_client(channel: Channel, server: &str, security: SecuritySpec) -> crate::upstream::RequestForwarder {
    let (server, security) = (Arc::<str>::from(server), Arc::new(security));
    Arc::new(move |request: ServerRequest| {
        let (channel, server, security) = (channel.clone(), server.clone(), security.clone());
        Box::pin(async move {
            let what = match &request {
                ServerRequest::ElicitRequest(_) => "elicitation",
                ServerRequest::CreateMessageRequest(_) => "sampling",
                ServerRequest::ListRootsRequest(_) => "roots",
                _ => "this request",
            };
            if let Err(why) = channel.can_ask(what) {
                return Err(ErrorData::invalid_request(why.to_string(), None));
            }
            // Held until the client answers: it counts toward `maxConcurrent` meanwhile.
            let _admitted = forwarded::admit(&server, what, security.forwarded)?;
            let request = fit_for_client(request, what)?;
            let request = forwarded::attribute(request, &server, what, &security)?;
            channel.ask(request).await
        })
    })
}

/// A downstream server's request as the client may see it: refused when it is over
/// [`FORWARDED_REQUEST_BYTES`] (the transport would drop it, and the server would wait out its
/// call), and without registered secrets (a server may quote its own token in an elicitation
/// message or a sampling prompt, and a person or a model reads those).
fn fit_for_client(request: ServerRequest, what: &str) -> std::result::Result<ServerRequest, ErrorData> {
    let encoding_failed = |error: serde_json::Error| {
        ErrorData::internal_error(
            format!("the gateway cannot re-encode the {what} request: {error}"),
            None,
        )
    };
    let mut value = serde_json::to_value(&request).map_err(encoding_failed)?;
    let size = serde_json::to_vec(&value).map_err(encoding_failed)?.len();
    if size > FORWARDED_REQUEST_BYTES {
        return Err(ErrorData::invalid_request(
            format!(
                "the {what} request is {size} bytes, over the {FORWARDED_REQUEST_BYTES} bytes the gateway forwards to its client; send a shorter one"
            ),
            None,
        ));
    }
    if !crate::secrets::any_registered() {
        return Ok(request);
    }
    crate::secrets::scrub_json(&mut value);
    serde_json::from_value(value).map_err(encoding_failed)
}

/// `timeoutMs` within 1..=[`MAX_TIMEOUT_MS`], or the validation error the model can correct.
fn checked_timeout(timeout_ms: Option<u64>) -> Result<Option<u64>> {
    match timeout_ms {
        Some(ms) if !(1..=MAX_TIMEOUT_MS).contains(&ms) => Err(Error::validation(format!(
            "{NAME}: `timeoutMs`: must be an integer from 1 to {MAX_TIMEOUT_MS} (milliseconds); got {ms}"
        ))),
        ok => Ok(ok),
    }
}

/// When the client asked for progress (a `progressToken` in `_meta`), forward the downstream
/// server's progress to it under the client's own token. One forwarding task per call keeps
/// the notifications in order; it ends when the call drops the sink. Only the newest report
/// waits to be sent: a server reporting faster than the client reads cannot grow memory (the
/// reports in between are superseded, never reordered).
pub(crate) fn progress_to_client(context: &RequestContext<RoleServer>) -> Option<ProgressSink> {
    let token = context.meta.get_progress_token()?;
    let peer = context.peer.clone();
    let (sender, mut updates) = tokio::sync::watch::channel::<Option<ProgressUpdate>>(None);
    tokio::spawn(async move {
        // `changed` yields a report not yet seen even after the sink is gone, so the last one
        // is not lost.
        while updates.changed().await.is_ok() {
            let Some(update) = updates.borrow_and_update().clone() else {
                continue;
            };
            let mut params = ProgressNotificationParam::new(token.clone(), update.progress);
            params.total = update.total;
            // A downstream server writes this text; the client reads it.
            params.message = update.message.map(|m| cut_text(&m, FIELD_BYTES).into_owned());
            if let Err(error) = peer.notify_progress(params).await {
                tracing::debug!(%error, "cannot forward progress to the client");
            }
        }
    });
    Some(Arc::new(move |update: ProgressUpdate| {
        sender.send_replace(Some(update));
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elicitation(message: &str) -> ServerRequest {
        serde_json::from_value(json!({
            "method": "elicitation/create",
            "params": { "message": message, "requestedSchema": { "type": "object", "properties": {} } }
        }))
        .unwrap()
    }

    fn message_of(request: &ServerRequest) -> String {
        serde_json::to_value(request).unwrap()["params"]["message"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn a_forwarded_request_loses_registered_secrets() {
        crate::secrets::register("fit-for-client", ["sk-fit-for-client-0123456789".to_owned()]);
        let request = elicitation("Confirm the key sk-fit-for-client-0123456789 for the deploy?");
        let fitted = fit_for_client(request, "elicitation").unwrap();
        assert_eq!(message_of(&fitted), "Confirm the key *** for the deploy?");
    }

    #[test]
    fn an_oversized_forwarded_request_is_refused_with_its_size() {
        let request = elicitation(&"x".repeat(FORWARDED_REQUEST_BYTES));
        let error = fit_for_client(request, "elicitation").unwrap_err();
        let size = serde_json::to_vec(&elicitation(&"x".repeat(FORWARDED_REQUEST_BYTES)))
            .unwrap()
            .len();
        assert_eq!(
            error.message,
            format!(
                "the elicitation request is {size} bytes, over the {FORWARDED_REQUEST_BYTES} bytes the gateway forwards to its client; send a shorter one"
            )
        );
    }

    #[test]
    fn timeout_ms_is_checked_like_the_node_apis() {
        assert_eq!(checked_timeout(None).unwrap(), None);
        assert_eq!(checked_timeout(Some(1)).unwrap(), Some(1));
        assert_eq!(checked_timeout(Some(MAX_TIMEOUT_MS)).unwrap(), Some(MAX_TIMEOUT_MS));
        for bad in [0, MAX_TIMEOUT_MS + 1, u64::MAX] {
            let error = checked_timeout(Some(bad)).unwrap_err();
            assert_eq!(error.code(), crate::error::ErrorCode::ValidationError);
            assert_eq!(
                error.to_string(),
                format!(
                    "invalid arguments: execute_tool: `timeoutMs`: must be an integer from 1 to 2147483647 (milliseconds); got {bad}"
                )
            );
        }
    }
}
