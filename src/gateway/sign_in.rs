//! A call of a per-user server (`connection.oauth.perUser`) by a caller who has not signed in to
//! it yet: the engine answers [`Error::SignInRequired`] with a one-use link to the gateway's
//! `/connect/<server>` (`crate::http`'s connect routes), and this puts the link to the caller.
//!
//! As a URL-mode elicitation (MCP 2025-11-25) where the client declared `elicitation.url`: on
//! protocol 2026-07-28 as an `inputRequests` entry of an input-required result (`rounds`), on
//! a session as `elicitation/create`. Once the client answers `accept` — the person opened the
//! link — the call waits (at most [`SIGN_IN_WAIT`]) for the token the sign-in keeps in the
//! store, then runs with it. A client that cannot be asked gets a tool error whose text carries
//! the link and says to call again after signing in. The link is the caller's alone: its state
//! is bound to their identity in the store, and it is put only to the client of their own call.

use std::time::Duration;

use rmcp::model::{CallToolResult, ClientResult, ElicitationAction, ServerRequest};
use serde_json::json;

use super::to_client::{Channel, ToClient};
use crate::caller::Caller;
use crate::engine::Engine;
use crate::error::Error;

/// How long a call whose client accepted the sign-in waits for it to finish in the browser.
pub const SIGN_IN_WAIT: Duration = Duration::from_secs(120);
/// How often the store is read for the token meanwhile.
const POLL: Duration = Duration::from_millis(250);

/// The origin (`scheme://host[:port]`) the HTTP face serves sign-in links under: its
/// `publicUrl`'s, else its bound address's. The face puts it in each request's extensions.
#[derive(Debug, Clone)]
pub struct SignInOrigin(pub std::sync::Arc<str>);

impl SignInOrigin {
    /// The origin the face left in the request's extensions, if any.
    pub(crate) fn of_request(extensions: &rmcp::model::Extensions) -> Option<String> {
        extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Self>())
            .map(|origin| origin.0.to_string())
    }
}

/// What became of the sign-in the call needed.
pub(crate) enum SignIn {
    /// The caller holds a token now: run the call again.
    Done,
    /// The call's answer: why it did not run, with the link where it helps.
    Answer(CallToolResult),
    /// The call did not run: the error says why, and carries the link.
    Refused(Error),
}

/// Put `link` (absolute) for `server` to the caller through `channel`, and wait for the token.
pub(crate) async fn ask(
    engine: &Engine,
    caller: &Caller,
    channel: &Channel,
    (server, link): (&str, &str),
    cancel: &tokio_util::sync::CancellationToken,
) -> SignIn {
    let refused = || {
        SignIn::Refused(Error::SignInRequired {
            server: server.to_owned(),
            link: link.to_owned(),
        })
    };
    if !can_open_links(channel) {
        return refused();
    }
    match channel.ask(url_request(server, link)).await {
        Ok(ClientResult::ElicitResult(result)) if result.action == ElicitationAction::Accept => {}
        Ok(ClientResult::ElicitResult(_)) => {
            return SignIn::Answer(CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
                "the user did not sign in to {server}; the call did not run"
            ))]));
        }
        Ok(_) | Err(_) => return refused(),
    }
    let deadline = tokio::time::Instant::now() + SIGN_IN_WAIT;
    loop {
        if engine.has_own_token(caller, server).await {
            return SignIn::Done;
        }
        if tokio::time::Instant::now() >= deadline {
            return refused();
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = cancel.cancelled() => return refused(),
        }
    }
}

/// `link` (a gateway path) under the request's sign-in origin, when the face gave one.
pub(crate) fn absolute(link: &str, origin: Option<&str>) -> String {
    match origin {
        Some(origin) => format!("{origin}{link}"),
        None => link.to_owned(),
    }
}

/// `error` with its sign-in link, if it carries one, made absolute under `origin`: what a
/// meta tool other than `execute_tool` answers for a per-user server the caller has not
/// signed in to (as the tool error a client that cannot open links gets from a call).
pub(crate) fn with_origin(error: Error, origin: Option<&str>) -> Error {
    match error {
        Error::SignInRequired { server, link } => Error::SignInRequired {
            link: absolute(&link, origin),
            server,
        },
        other => other,
    }
}

/// The JSON-RPC error of a request other than a tool call (`prompts/get`, `resources/read`,
/// `completion/complete`) that needs the caller's own sign-in to `server`: MCP 2025-11-25's
/// `URLElicitationRequiredError` (-32042) carrying the URL-mode elicitation of `link`, which a
/// client that declared `elicitation.url` opens before asking again; its message carries the
/// link too, for a client that does not.
pub(crate) fn url_required_error(server: &str, link: &str) -> rmcp::ErrorData {
    let elicitation = json!({
        "mode": "url",
        "message": format!("Sign in to {server} with your own account, then ask again."),
        "url": link,
        "elicitationId": format!("sign-in-{}", crate::hash::random_hex(16)),
    });
    rmcp::ErrorData::new(
        rmcp::model::ErrorCode(URL_ELICITATION_REQUIRED),
        format!(
            "SERVER_CONNECTION_ERROR: server `{server}` needs your own sign-in: open {link} in your browser, sign in, then ask again (the link works once, for 10 minutes)"
        ),
        Some(json!({ "elicitations": [elicitation] })),
    )
}

/// MCP 2025-11-25's error code for a request that needs a URL-mode elicitation first.
pub const URL_ELICITATION_REQUIRED: i32 = -32042;

/// Whether the call's client can be asked to open a link: it can be asked at all, and it
/// declared URL-mode elicitation.
fn can_open_links(channel: &Channel) -> bool {
    !matches!(channel.to_client, ToClient::Nobody)
        && channel.declared.elicitation.as_ref().is_some_and(|e| e.url.is_some())
}

/// The URL-mode elicitation that puts the sign-in link.
fn url_request(server: &str, link: &str) -> ServerRequest {
    serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "message": format!("Sign in to {server} with your own account to run this call."),
            "url": link,
            "elicitationId": format!("sign-in-{}", crate::hash::random_hex(16)),
        }
    }))
    .expect("a URL elicitation of a message and a link parses")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_goes_out_as_a_url_elicitation() {
        let request = serde_json::to_value(url_request("gh", "https://gw.example/connect/gh?state=abc")).unwrap();
        assert_eq!(request["method"], "elicitation/create");
        assert_eq!(request["params"]["mode"], "url");
        assert_eq!(request["params"]["url"], "https://gw.example/connect/gh?state=abc");
        assert!(request["params"]["message"].as_str().unwrap().contains("gh"));
    }

    #[test]
    fn a_request_that_is_not_a_tool_call_gets_the_link_in_a_url_elicitation_required_error() {
        let error = url_required_error("gh", "https://gw.example/connect/gh?state=abc");
        assert_eq!(error.code.0, -32042);
        assert!(
            error.message.contains("open https://gw.example/connect/gh?state=abc"),
            "{}",
            error.message
        );
        let data = error.data.unwrap();
        let elicitation = &data["elicitations"][0];
        assert_eq!(elicitation["mode"], "url");
        assert_eq!(elicitation["url"], "https://gw.example/connect/gh?state=abc");
        assert!(elicitation["elicitationId"].as_str().unwrap().starts_with("sign-in-"));
        assert_eq!(
            with_origin(
                Error::SignInRequired {
                    server: "gh".into(),
                    link: "/connect/gh?state=abc".into()
                },
                Some("https://gw.example")
            )
            .to_string(),
            "server `gh` needs your own sign-in: open https://gw.example/connect/gh?state=abc in your browser, sign in, then call the tool again (the link works once, for 10 minutes)"
        );
    }
}
