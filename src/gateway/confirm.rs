//! The gateway's way of asking the human before a call a toolRules `confirm` covers: a form
//! elicitation to the client with the question `crate::confirm` words (server, tool, the
//! arguments scrubbed and bounded) and no field to fill, so accept is the yes. A client that
//! did not declare elicitation cannot be asked, nor can one on protocol 2026-07-28, which
//! forbids requests to the client: the engine then refuses or runs the call as the rule says.

use std::sync::Arc;

use rmcp::model::{ClientResult, ElicitationAction, ProtocolVersion, ServerRequest};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::json;

use crate::confirm::{Answer, Asker};

/// The asker for this request's client, or `None` when it cannot be asked.
pub(super) fn asker(context: &RequestContext<RoleServer>) -> Option<Asker> {
    let declared = context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.elicitation.is_some());
    // From 2026-07-28 a server may not send the client requests (an input-required result
    // would carry the question, which this gateway does not answer with yet): such a session
    // is one nobody can be asked in.
    let forbidden = context
        .protocol_version()
        .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
    if !declared || forbidden {
        return None;
    }
    let peer = context.peer.clone();
    Some(Arc::new(move |question: String| {
        let peer = peer.clone();
        Box::pin(async move {
            match peer.send_request(question_request(&question)).await {
                Ok(ClientResult::ElicitResult(result)) => match result.action {
                    ElicitationAction::Accept => Answer::Accepted,
                    ElicitationAction::Decline => Answer::Declined,
                    // Cancel, and any action a later protocol adds: no yes.
                    _ => Answer::Cancelled,
                },
                Ok(_) => {
                    tracing::warn!("the client answered the confirmation with something else; the call does not run");
                    Answer::Cancelled
                }
                Err(error) => {
                    tracing::warn!(%error, "the client did not answer the confirmation; the call does not run");
                    Answer::Cancelled
                }
            }
        })
    }))
}

/// The form elicitation that puts `question`: nothing to fill in, accept is the yes.
fn question_request(question: &str) -> ServerRequest {
    serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": { "mode": "form", "message": question, "requestedSchema": { "type": "object", "properties": {} } }
    }))
    .expect("a form elicitation of a message and an empty schema parses")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_is_a_form_elicitation_with_nothing_to_fill() {
        let request = serde_json::to_value(question_request("Allow?")).unwrap();
        assert_eq!(request["method"], "elicitation/create");
        assert_eq!(request["params"]["message"], "Allow?");
        assert_eq!(request["params"]["requestedSchema"]["properties"], json!({}));
    }
}
