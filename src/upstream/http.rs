//! The HTTP client under rmcp's streamable-HTTP transport: reqwest, plus what real servers
//! need beyond the spec.
//!
//! The spec says a server answers a request for a session it no longer knows (it restarted,
//! or expired the session) with 404, and rmcp then opens a new session and retries. Servers
//! built on the official TypeScript SDK answer 400 with a JSON-RPC error that has no `id`
//! (`-32000 "Bad Request: No valid session ID provided"`). rmcp hands that error on as a
//! message no request can claim, so the call waited for its whole timeout, every time, until
//! the gateway restarted. Here an id-less error answering one of our requests is claimed:
//! with a session attached and the code such servers use for session trouble (-32000,
//! -32001), it is a lost session (rmcp re-initializes and retries once); otherwise it is the
//! answer to that request, so the caller gets the server's message at once.
//!
//! A renewed session may belong to a redeployed server with other tools, and rmcp keeps the
//! renewal to itself: each `notifications/initialized` the server accepts after the first is
//! reported as `tools/list_changed`, so the catalog lists the server's tools again. rmcp
//! renews a session only when a POST finds it lost; when the server refuses the event stream
//! of a session whose stream worked before (400 or 404 on the GET), the tools are listed again
//! too, and that POST renews the session, so the server's notifications flow again without
//! waiting for the model's next call. Reports are at most one per [`MIN_REPORT_INTERVAL`]: a
//! server that loses every session must not turn them into a loop.
//!
//! A server that signs in (`super::oauth`) gets its token on every request here; a 401
//! refreshes it once, then signs in, and a 403 `insufficient_scope` signs in for more scopes
//! (at most [`MAX_STEP_UPS`] times per request); the request is then sent again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use reqwest::StatusCode;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, ErrorCode, JsonRpcMessage, RequestId};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};
use tokio::sync::Notify;

use super::oauth::{Authorizer, MAX_STEP_UPS};

/// JSON-RPC codes TypeScript-SDK servers give session trouble: -32000 ("No valid session ID",
/// "Server not initialized") and -32001 ("Session not found").
const SESSION_ERROR_CODES: [ErrorCode; 2] = [ErrorCode(-32000), ErrorCode(-32001)];

/// Shortest time between two "list the tools again" reports for one server. A server that
/// loses every session (serverless hosting, a load balancer without session affinity) would
/// otherwise loop: re-list, lost session, renewal, report, re-list…
const MIN_REPORT_INTERVAL: Duration = Duration::from_secs(10);

/// reqwest with the lost-session rule above, reporting renewed sessions for one server.
#[derive(Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    server: String,
    /// Woken to list this server's tools again.
    relist: Arc<Notify>,
    /// What this server's sessions did (shared by rmcp's clones of this client).
    sessions: Arc<Mutex<Sessions>>,
    /// This server's sign-in, when it has no static `Authorization` header.
    auth: Option<Arc<Authorizer>>,
}

#[derive(Default)]
struct Sessions {
    /// Sessions begun so far.
    begun: usize,
    /// The session whose event stream last opened: only a stream that worked and is then
    /// refused means a lost session (some servers refuse every GET with 400).
    streamed: Option<Arc<str>>,
    /// When the tools were last reported as possibly changed.
    reported: Option<Instant>,
}

type EventStream = BoxStream<'static, Result<Sse, SseError>>;

impl HttpClient {
    pub fn new(client: reqwest::Client, server: String, relist: Arc<Notify>) -> Self {
        Self {
            client,
            server,
            relist,
            sessions: Arc::default(),
            auth: None,
        }
    }

    /// Requests carry `auth`'s token and sign in when the server asks.
    pub fn with_auth(mut self, auth: Option<Arc<Authorizer>>) -> Self {
        self.auth = auth;
        self
    }

    /// `call` with this server's token (or `given`, a static header), reacting to the
    /// server's verdict as the module docs say.
    async fn authorized<T, F, Fut>(&self, given: Option<String>, call: F) -> HttpResult<T>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: std::future::Future<Output = HttpResult<T>>,
    {
        let Some(auth) = self.auth.as_ref().filter(|_| given.is_none()) else {
            let outcome = call(given.clone()).await;
            // A per-user caller's token the server refused: their next call signs in again.
            if let (Err(StreamableHttpError::AuthRequired(_)), Some(token)) = (&outcome, &given) {
                super::oauth::per_user::refused(token);
            }
            return outcome;
        };
        let mut token = auth.token().await?;
        let (mut refreshed, mut signed_in, mut step_ups) = (false, false, 0);
        loop {
            match call(token.clone()).await {
                // Only a Bearer challenge is the MCP authorization spec's; another scheme
                // (Basic, an API key) is refused as it is, without opening a browser.
                Err(StreamableHttpError::AuthRequired(challenge)) if is_bearer(&challenge.www_authenticate_header) => {
                    if let Some(sent) = token.as_deref().filter(|_| !refreshed) {
                        refreshed = true;
                        if let Some(fresh) = auth.refreshed(sent).await {
                            token = Some(fresh);
                            continue;
                        }
                    }
                    if signed_in {
                        return Err(StreamableHttpError::AuthRequired(challenge));
                    }
                    signed_in = true;
                    token = Some(
                        auth.sign_in(&challenge.www_authenticate_header, token.as_deref())
                            .await?,
                    );
                }
                Err(StreamableHttpError::InsufficientScope(challenge)) if step_ups < MAX_STEP_UPS => {
                    step_ups += 1;
                    tracing::info!(server = %self.server, "the server asks for more scopes; signing in again");
                    token = Some(
                        auth.sign_in(&challenge.www_authenticate_header, token.as_deref())
                            .await?,
                    );
                }
                outcome => return outcome,
            }
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ask the engine to list the tools again, at most once per [`MIN_REPORT_INTERVAL`]: a
    /// renewal within it follows a listing that is already fetching the new session's tools.
    fn report_tools_may_have_changed(&self, sessions: &mut Sessions) {
        if sessions.reported.is_some_and(|at| at.elapsed() < MIN_REPORT_INTERVAL) {
            return;
        }
        sessions.reported = Some(Instant::now());
        tracing::info!(server = %self.server, "listing tools again");
        self.relist.notify_one();
    }

    /// Track `session`'s event stream: a GET answered 400/404 after it once worked means the
    /// server no longer knows the session (module docs). rmcp keeps retrying the GET.
    fn stream_opened(&self, session: Option<&Arc<str>>, opened: &HttpResult<EventStream>) {
        let Some(session) = session else { return };
        let mut sessions = self.sessions();
        match opened {
            Ok(_) => sessions.streamed = Some(session.clone()),
            Err(StreamableHttpError::Client(error))
                if matches!(error.status(), Some(StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND))
                    && sessions.streamed.as_ref() == Some(session) =>
            {
                sessions.streamed = None;
                tracing::info!(server = %self.server, "the server refused our session's event stream; renewing the session");
                self.report_tools_may_have_changed(&mut sessions);
            }
            Err(_) => {}
        }
    }

    /// The POST's answer, claimed as the module docs say, with renewed sessions noted: a
    /// session begins when the server accepts its `notifications/initialized`.
    fn answered(
        &self,
        asked: Asked,
        response: HttpResult<StreamableHttpPostResponse>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let accepted = matches!(
            response,
            Ok(StreamableHttpPostResponse::Accepted
                | StreamableHttpPostResponse::Json(JsonRpcMessage::Response(_) | JsonRpcMessage::Notification(_), _))
        );
        if asked.initialized && accepted {
            let mut sessions = self.sessions();
            sessions.begun += 1;
            if sessions.begun > 1 {
                tracing::info!(server = %self.server, "new session after the server lost ours");
                self.report_tools_may_have_changed(&mut sessions);
            }
        }
        asked.claim(&self.server, response)
    }
}

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

/// Whether a `WWW-Authenticate` value is a Bearer challenge (RFC 6750; the scheme is
/// case-insensitive).
fn is_bearer(www_authenticate: &str) -> bool {
    www_authenticate
        .trim_start()
        .split(|c: char| c.is_whitespace() || c == ',')
        .next()
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer"))
}

impl StreamableHttpClient for HttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let asked = Asked::of(&message, session_id.is_some());
        let response = self
            .authorized(auth_header, |token| {
                self.client.post_message(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    token,
                    custom_headers.clone(),
                )
            })
            .await;
        self.answered(asked, response)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let asked = Asked::of(&message, session_id.is_some());
        let response = self
            .authorized(auth_header, |token| {
                self.client.post_message_with_max_sse_event_size(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    token,
                    custom_headers.clone(),
                    max_sse_event_size,
                )
            })
            .await;
        self.answered(asked, response)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let asked = Asked::of(&message, session_id.is_some());
        let response = self
            .authorized(auth_header, |token| {
                self.client.post_message_with_response_limits(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    token,
                    custom_headers.clone(),
                    limits,
                )
            })
            .await;
        self.answered(asked, response)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        self.authorized(auth_header, |token| {
            self.client
                .delete_session(uri.clone(), session_id.clone(), token, custom_headers.clone())
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<EventStream> {
        let opened = self
            .authorized(auth_header, |token| {
                self.client.get_stream(
                    uri.clone(),
                    session_id.clone(),
                    last_event_id.clone(),
                    token,
                    custom_headers.clone(),
                )
            })
            .await;
        self.stream_opened(session_id.as_ref(), &opened);
        opened
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<EventStream> {
        let opened = self
            .authorized(auth_header, |token| {
                self.client.get_stream_with_max_sse_event_size(
                    uri.clone(),
                    session_id.clone(),
                    last_event_id.clone(),
                    token,
                    custom_headers.clone(),
                    max_sse_event_size,
                )
            })
            .await;
        self.stream_opened(session_id.as_ref(), &opened);
        opened
    }
}

/// What one POST asked: the request it carried (if any), whether it named a session, and
/// whether it was the `notifications/initialized` that completes a handshake.
struct Asked {
    request: Option<RequestId>,
    in_session: bool,
    initialized: bool,
}

impl Asked {
    fn of(message: &ClientJsonRpcMessage, in_session: bool) -> Self {
        let request = match message {
            JsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let initialized = matches!(
            message,
            JsonRpcMessage::Notification(n) if matches!(n.notification, ClientNotification::InitializedNotification(_))
        );
        Self {
            request,
            in_session,
            initialized,
        }
    }

    /// The POST's answer, with an id-less error answering our request claimed.
    fn claim(
        self,
        server: &str,
        response: HttpResult<StreamableHttpPostResponse>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        match (response?, self.request) {
            (StreamableHttpPostResponse::Json(JsonRpcMessage::Error(mut error), session), Some(id))
                if error.id.is_none() =>
            {
                if self.in_session && SESSION_ERROR_CODES.contains(&error.error.code) {
                    tracing::info!(%server, message = %error.error.message, "the server lost our session");
                    return Err(StreamableHttpError::SessionExpired);
                }
                error.id = Some(id);
                Ok(StreamableHttpPostResponse::Json(JsonRpcMessage::Error(error), session))
            }
            (response, _) => Ok(response),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, ServerJsonRpcMessage};

    fn request(id: i64) -> ClientJsonRpcMessage {
        serde_json::from_value(serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "ping"})).unwrap()
    }

    fn idless_error() -> StreamableHttpPostResponse {
        idless(-32000, "Bad Request: No valid session ID provided")
    }

    fn idless(code: i32, text: &str) -> StreamableHttpPostResponse {
        let error = ErrorData::new(ErrorCode(code), text.to_owned(), None);
        let message = ServerJsonRpcMessage::Error(JsonRpcError::new(None, error));
        StreamableHttpPostResponse::Json(message, None)
    }

    fn error_id(response: HttpResult<StreamableHttpPostResponse>) -> Option<RequestId> {
        match response {
            Ok(StreamableHttpPostResponse::Json(JsonRpcMessage::Error(error), _)) => error.id,
            other => panic!("expected a JSON error, got {other:?}"),
        }
    }

    #[test]
    fn only_bearer_challenges_start_a_sign_in() {
        assert!(is_bearer(
            r#"Bearer resource_metadata="https://h/.well-known/oauth-protected-resource""#
        ));
        assert!(is_bearer("bearer"));
        assert!(is_bearer("  BEARER, error=\"invalid_token\""));
        assert!(!is_bearer(r#"Basic realm="x""#));
        assert!(!is_bearer("Bearerish"));
        assert!(!is_bearer(""));
    }

    #[test]
    fn an_idless_error_in_a_session_is_a_lost_session() {
        let claimed = Asked::of(&request(7), true).claim("s", Ok(idless_error()));
        assert!(
            matches!(claimed, Err(StreamableHttpError::SessionExpired)),
            "{claimed:?}"
        );
    }

    #[test]
    fn other_idless_errors_in_a_session_answer_the_request() {
        // A healthy server's parse or internal error: the caller gets it, nothing is re-sent.
        for code in [-32700, -32603] {
            let claimed = Asked::of(&request(7), true).claim("s", Ok(idless(code, "Parse error")));
            assert_eq!(error_id(claimed), Some(RequestId::Number(7)));
        }
    }

    /// The relist signal seen as a queue of at most one report.
    struct Received(Arc<Notify>);

    impl Received {
        fn try_recv(&mut self) -> Result<(), ()> {
            use futures::FutureExt;
            self.0.notified().now_or_never().ok_or(())
        }
    }

    #[test]
    fn sessions_after_the_first_are_reported_as_tool_changes_at_a_bounded_rate() {
        let relist = Arc::new(Notify::new());
        let client = HttpClient::new(
            super::super::remote::http_client().unwrap(),
            "remote".into(),
            relist.clone(),
        );
        let mut received = Received(relist);
        let initialized: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/initialized"
        }))
        .unwrap();
        let accepted = || Ok(StreamableHttpPostResponse::Accepted);
        client.answered(Asked::of(&initialized, true), accepted()).unwrap();
        assert!(received.try_recv().is_err(), "the first session is not a change");
        client.answered(Asked::of(&request(1), true), accepted()).unwrap();
        assert!(received.try_recv().is_err(), "other messages are not a session");
        // A refused `initialized` begins no session.
        let _ = client.answered(Asked::of(&initialized, true), Ok(idless_error()));
        assert!(received.try_recv().is_err(), "a refused initialized is not a session");

        client
            .clone()
            .answered(Asked::of(&initialized, true), accepted())
            .unwrap();
        assert!(received.try_recv().is_ok(), "a renewed session is reported");
        // A server losing every session: the next renewal follows the listing just asked
        // for, and is not reported again within the interval.
        client.answered(Asked::of(&initialized, true), accepted()).unwrap();
        assert!(received.try_recv().is_err(), "reports are rate-limited");
    }

    #[test]
    fn an_idless_error_before_a_session_answers_the_request() {
        let claimed = Asked::of(&request(7), false).claim("s", Ok(idless_error()));
        assert_eq!(error_id(claimed), Some(RequestId::Number(7)));
    }

    #[test]
    fn errors_with_an_id_and_other_messages_pass_unchanged() {
        let notification: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/initialized"
        }))
        .unwrap();
        assert_eq!(
            error_id(Asked::of(&notification, true).claim("s", Ok(idless_error()))),
            None
        );

        let error = ErrorData::new(ErrorCode(-32602), "bad", None);
        let with_id = ServerJsonRpcMessage::Error(JsonRpcError::new(Some(RequestId::Number(3)), error));
        let claimed = Asked::of(&request(3), true).claim("s", Ok(StreamableHttpPostResponse::Json(with_id, None)));
        assert_eq!(error_id(claimed), Some(RequestId::Number(3)));
    }
}
