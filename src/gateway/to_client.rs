//! How a call reaches the gateway's client with a question while it runs — a downstream
//! server's elicitation, sampling or roots request, or the gateway's own confirmation — and
//! what that client declared it can answer.
//!
//! Three ways, by how the client is served:
//! - **A session** (stdio, where one connection carries both directions, or an HTTP session):
//!   the question is a request to the client and its answer comes back to the session.
//! - **Rounds** (protocol 2026-07-28, any transport): a server may not send its client
//!   requests, so the question ends the current round of the call as an input-required result
//!   and its answer comes with the client's retry (`rounds`).
//! - **Nobody** (an older client over HTTP, served without a session): the client's answer
//!   would come back in a POST of its own, which nothing routes to the waiting call; the
//!   question is refused with that reason. With `discovery.http.legacySessions` such a client
//!   has a session in this process, and is asked as on stdio.

use rmcp::model::{ClientCapabilities, ClientResult, ProtocolVersion, ServerRequest};
use rmcp::service::{RequestContext, ServiceError};
use rmcp::{ErrorData, Peer, RoleServer};
use tokio::sync::{mpsc, oneshot};

/// One question of a running call, and where its answer goes (`rounds`).
#[derive(Debug)]
pub(crate) struct Question {
    pub request: ServerRequest,
    pub reply: oneshot::Sender<Result<ClientResult, ErrorData>>,
}

/// The way to the client of one call.
#[derive(Clone)]
pub(crate) enum ToClient {
    Session(Peer<RoleServer>),
    Rounds(mpsc::Sender<Question>),
    Nobody,
}

/// The way to the client and what it declared, for one call.
#[derive(Clone)]
pub(crate) struct Channel {
    pub to_client: ToClient,
    pub declared: ClientCapabilities,
}

/// Why a call's client cannot be asked a `what` request.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CannotAsk {
    #[error("{what} cannot be forwarded: {}", SESSIONLESS)]
    Sessionless { what: &'static str },
    #[error("the gateway's client does not support {what} (it did not declare the capability)")]
    Undeclared { what: &'static str },
}

/// Why a sessionless client over HTTP cannot be asked.
const SESSIONLESS: &str = "the gateway's client is served over HTTP without a session, where its answer to a \
     request would arrive in a POST nothing routes to the waiting call; a client on protocol 2026-07-28 gets \
     such questions as input-required results, `discovery.http.legacySessions: true` gives older clients a \
     session in one gateway process, and the gateway over stdio forwards them to any client";

impl Channel {
    /// The channel of a request answered in one round: a session's, or nobody's.
    pub fn of(context: &RequestContext<RoleServer>) -> Self {
        let declared = context.client_capabilities().unwrap_or_default();
        // Over HTTP only a session (`discovery.http.legacySessions`) routes the client's answer,
        // a POST of its own, back to the call.
        let to_client = if sessionless_http(&context.extensions) || needs_rounds(context) {
            ToClient::Nobody
        } else {
            ToClient::Session(context.peer.clone())
        };
        Self { to_client, declared }
    }

    /// The channel of a call run in rounds (`rounds`).
    pub fn rounds(context: &RequestContext<RoleServer>, questions: mpsc::Sender<Question>) -> Self {
        Self {
            to_client: ToClient::Rounds(questions),
            declared: context.client_capabilities().unwrap_or_default(),
        }
    }

    /// Whether the client can be asked at all (a `what` request: `elicitation`, `sampling`,
    /// `roots`); the reason it cannot otherwise.
    pub fn can_ask(&self, what: &'static str) -> Result<(), CannotAsk> {
        if matches!(self.to_client, ToClient::Nobody) {
            return Err(CannotAsk::Sessionless { what });
        }
        let declared = match what {
            "elicitation" => self.declared.elicitation.is_some(),
            "sampling" => self.declared.sampling.is_some(),
            "roots" => self.declared.roots.is_some(),
            _ => false,
        };
        if declared {
            Ok(())
        } else {
            Err(CannotAsk::Undeclared { what })
        }
    }

    /// Put `request` to the client and wait for its answer.
    pub async fn ask(&self, request: ServerRequest) -> Result<ClientResult, ErrorData> {
        match &self.to_client {
            ToClient::Session(peer) => match peer.send_request(request).await {
                Ok(answer) => Ok(answer),
                Err(ServiceError::McpError(error)) => Err(error),
                Err(error) => Err(ErrorData::internal_error(
                    format!("the gateway's client did not answer: {error}"),
                    None,
                )),
            },
            ToClient::Rounds(questions) => {
                let (reply, answer) = oneshot::channel();
                let unanswered = || {
                    ErrorData::internal_error(
                        "the gateway's client did not answer: the call's next round never came (it expired or the client went away)",
                        None,
                    )
                };
                questions
                    .send(Question { request, reply })
                    .await
                    .map_err(|_| unanswered())?;
                answer.await.map_err(|_| unanswered())?
            }
            ToClient::Nobody => Err(ErrorData::invalid_request(SESSIONLESS, None)),
        }
    }
}

/// Whether a request or notification came over the HTTP face without a session (rmcp leaves
/// the HTTP request's parts in its extensions; a session's carry its `Mcp-Session-Id`).
pub(crate) fn sessionless_http(extensions: &rmcp::model::Extensions) -> bool {
    extensions
        .get::<http::request::Parts>()
        .is_some_and(|parts| !parts.headers.contains_key("mcp-session-id"))
}

/// Whether this request is on protocol 2026-07-28 or later, where questions to the client
/// travel as input-required results.
pub(crate) fn needs_rounds(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
}
