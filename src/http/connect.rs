//! `/connect/<server>` and `/connect/callback`: the browser's side of a per-user sign-in
//! (`connection.oauth.perUser`; the flow is `upstream::per_user`'s).
//!
//! No bearer token here: a browser follows the link. The link's `state` is the authority — a
//! random value the gateway gave one caller for one server, kept in the store for ten minutes
//! and spent on first use — so any replica answers either route. `/connect/<server>` redirects
//! only to the authorization endpoint the server's metadata names; `/connect/callback` takes
//! the sign-in its `state` names (spent too), exchanges the code and says so on a small page.
//! Every query parameter is bounded, a repeated one refused, and every text on a page escaped;
//! of a refusal, a page shows the error code only (its description goes to the log).
//! Pages are never cached, framed, or sent as a referrer.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::engine::Engine;

/// Longest server name in a path.
const MAX_SERVER_BYTES: usize = 256;
/// Longest query string read.
const MAX_QUERY_BYTES: usize = 8 * 1024;
/// Longest value of each parameter read.
const MAX_VALUE_BYTES: usize = 4 * 1024;

/// What the routes share: the engine (specs, store) and the origin links are served under.
#[derive(Clone)]
struct Connect {
    engine: Engine,
    origin: Arc<str>,
}

/// The two routes, served under `origin` (`scheme://host[:port]`).
pub(super) fn router(engine: &Engine, origin: Arc<str>) -> Router {
    Router::new()
        .route("/connect/callback", get(callback))
        .route("/connect/{server}", get(start))
        .with_state(Connect {
            engine: engine.clone(),
            origin,
        })
}

/// The query's parameters named in `names`, each at most once and bounded; `Err` says which.
fn params<const N: usize>(uri: &Uri, names: [&str; N]) -> Result<[Option<String>; N], String> {
    let query = uri.query().unwrap_or_default();
    if query.len() > MAX_QUERY_BYTES {
        return Err(format!("the address is longer than {MAX_QUERY_BYTES} bytes"));
    }
    let mut found: [Option<String>; N] = std::array::from_fn(|_| None);
    let parsed = reqwest::Url::parse(&format!("http://gateway/?{query}")).map_err(|e| e.to_string())?;
    for (name, value) in parsed.query_pairs() {
        let Some(i) = names.iter().position(|n| *n == name) else {
            continue;
        };
        if found[i].is_some() {
            return Err(format!("`{}` is given twice", names[i]));
        }
        if value.len() > MAX_VALUE_BYTES {
            return Err(format!("`{}` is longer than {MAX_VALUE_BYTES} bytes", names[i]));
        }
        found[i] = Some(value.into_owned());
    }
    Ok(found)
}

/// `/connect/<server>?state=…`: start the sign-in the link was given for.
async fn start(State(connect): State<Connect>, Path(server): Path<String>, uri: Uri) -> Response {
    if server.len() > MAX_SERVER_BYTES {
        return page(StatusCode::NOT_FOUND, "No such sign-in.");
    }
    let [state] = match params(&uri, ["state"]) {
        Ok(found) => found,
        Err(why) => {
            return page(
                StatusCode::BAD_REQUEST,
                &format!("This sign-in link is malformed: {why}."),
            )
        }
    };
    let Some(state) = state.filter(|s| !s.is_empty()) else {
        return page(
            StatusCode::BAD_REQUEST,
            "This sign-in link has no state: use the whole link your client showed.",
        );
    };
    let redirect_uri = format!("{}/connect/callback", connect.origin);
    let Some(address) = connect.engine.sign_in_address(&server, &state, &redirect_uri).await else {
        return page(
            StatusCode::NOT_FOUND,
            &format!("{server} is not a server you sign in to here."),
        );
    };
    match address {
        Ok(address) => (
            StatusCode::FOUND,
            [
                (header::LOCATION, address),
                (header::CACHE_CONTROL, "no-store".to_owned()),
                (header::REFERRER_POLICY, "no-referrer".to_owned()),
            ],
        )
            .into_response(),
        Err(error) => {
            tracing::info!(%server, "a sign-in link was refused: {error}");
            page(StatusCode::BAD_REQUEST, &error.to_string())
        }
    }
}

/// `/connect/callback?code=…&state=…[&iss=…]` (or `error=…`): finish the sign-in.
async fn callback(State(connect): State<Connect>, uri: Uri) -> Response {
    let [code, state, issuer, error, description] =
        match params(&uri, ["code", "state", "iss", "error", "error_description"]) {
            Ok(found) => found,
            Err(why) => {
                return page(
                    StatusCode::BAD_REQUEST,
                    &format!("This sign-in answer is malformed: {why}."),
                )
            }
        };
    let Some(state) = state.filter(|s| !s.is_empty()) else {
        return page(StatusCode::BAD_REQUEST, "This sign-in answer has no state.");
    };
    // Spent whatever the answer: a state works once.
    let flow = match connect.engine.sign_in_flow(&state).await {
        Ok(flow) => flow,
        Err(error) => return page(StatusCode::BAD_REQUEST, &error.to_string()),
    };
    let server = flow.server().to_owned();
    if let Some(error) = error {
        // The description is the log's, not the page's: whoever holds a flow's state (their
        // own) can write one, and the page is the gateway's, which a person trusts.
        let description = crate::secrets::scrub(description.as_deref().unwrap_or_default()).into_owned();
        tracing::info!(%server, %error, %description, "the authorization server refused a sign-in");
        return page(
            StatusCode::OK,
            &format!(
                "Signing in to {server} was refused ({}). Call the tool again for a new link.",
                oauth_error_code(&error).unwrap_or("an error the authorization server named")
            ),
        );
    }
    let Some(code) = code.filter(|c| !c.is_empty()) else {
        return page(StatusCode::BAD_REQUEST, "This sign-in answer has no code.");
    };
    let Some(finished) = connect
        .engine
        .finish_sign_in(&flow, &code, &state, issuer.as_deref())
        .await
    else {
        return page(
            StatusCode::NOT_FOUND,
            &format!("{server} is no longer a server you sign in to here."),
        );
    };
    match finished {
        Ok(()) => page(
            StatusCode::OK,
            &format!("Signed in to {server}. Go back to your client: the call runs now (or call the tool again)."),
        ),
        Err(error) => {
            tracing::warn!(%server, "a per-user sign-in failed: {error}");
            page(StatusCode::BAD_GATEWAY, &error.to_string())
        }
    }
}

/// `error` if it reads as an OAuth error code (the registered ones, RFC 6749 §4.1.2.1, are
/// short words of letters and `_`): a page shows nothing else an answer carries.
fn oauth_error_code(error: &str) -> Option<&str> {
    (!error.is_empty()
        && error.len() <= 64
        && error
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')))
    .then_some(error)
}

/// A small page saying `text` (escaped; scrubbed of registered secrets).
fn page(status: StatusCode, text: &str) -> Response {
    let text = crate::secrets::scrub(text);
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>anygpt-discovery</title><p>{}</p>",
        html_escape(&text)
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; frame-ancestors 'none'",
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_bounded_and_given_once() {
        let uri: Uri = "/connect/callback?code=a&state=b&other=x".parse().unwrap();
        let [code, state] = params(&uri, ["code", "state"]).unwrap();
        assert_eq!((code.as_deref(), state.as_deref()), (Some("a"), Some("b")));
        let twice: Uri = "/connect/callback?state=a&state=b".parse().unwrap();
        assert_eq!(params(&twice, ["state"]).unwrap_err(), "`state` is given twice");
        let long: Uri = format!("/connect/callback?state={}", "a".repeat(MAX_VALUE_BYTES + 1))
            .parse()
            .unwrap();
        assert!(params(&long, ["state"]).unwrap_err().contains("longer than"));
    }

    #[test]
    fn only_an_error_code_of_an_authorization_answer_reaches_its_page() {
        assert_eq!(oauth_error_code("access_denied"), Some("access_denied"));
        assert_eq!(
            oauth_error_code("Your session expired: sign in at https://evil.example"),
            None
        );
        assert_eq!(oauth_error_code(&"a".repeat(65)), None);
        assert_eq!(oauth_error_code(""), None);
    }

    #[test]
    fn page_text_is_escaped() {
        assert_eq!(html_escape("<script>\"x\"&'"), "&lt;script&gt;&quot;x&quot;&amp;&#39;");
    }
}
