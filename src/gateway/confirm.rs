//! The gateway's way of asking the human before a call a toolRules `confirm` covers: a form
//! elicitation to the client with the question `crate::confirm` words (server, tool, the
//! arguments scrubbed and bounded) and no field to fill, so accept is the yes. It travels as
//! the call's other questions do (`to_client`): on the session, or as an input-required result
//! on protocol 2026-07-28. A client that did not declare elicitation, or a sessionless older
//! client over HTTP, cannot be asked: the engine then refuses or runs the call as the rule says.

use std::sync::Arc;

use rmcp::model::{ClientResult, ElicitationAction, ServerRequest};
use serde_json::json;

use super::to_client::Channel;
use crate::confirm::{Answer, Asker};

/// The asker for this call's client, or `None` when it cannot be asked.
pub(super) fn asker(channel: &Channel) -> Option<Asker> {
    if let Err(why) = channel.can_ask("elicitation") {
        tracing::debug!(%why, "a confirmation cannot be asked");
        return None;
    }
    let channel = channel.clone();
    Some(Arc::new(move |question: String| {
        let channel = channel.clone();
        Box::pin(async move {
            match channel.ask(question_request(&question)).await {
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
