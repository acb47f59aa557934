//! The HTTP client under rmcp's streamable-HTTP transport: reqwest, plus what real servers
//! need beyond the spec.
//!
//! The spec says a server answers a request for a session it no longer knows (it restarted,
//! or expired the session) with 404, and rmcp then opens a new session and retries. Servers
//! built on the official TypeScript SDK answer 400 with a JSON-RPC error that has no `id`
//! (`"Bad Request: No valid session ID provided"`). rmcp hands that error on as a message
//! no request can claim, so the call waited for its whole timeout, every time, until the
//! gateway restarted. Here an id-less error answering a request is read as what it is:
//! with a session attached, a lost session (rmcp re-initializes and retries once);
//! without one, the answer to that request (so a failed handshake fails at once).

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, RequestId};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};

/// reqwest with the lost-session rule above.
#[derive(Clone)]
pub struct HttpClient(pub reqwest::Client);

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

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
            .0
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        asked.claim(response)
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
            .0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        asked.claim(response)
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
            .0
            .post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
            .await;
        asked.claim(response)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        self.0
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        self.0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

/// What one POST asked: the request it carried (if any) and whether it named a session.
struct Asked {
    request: Option<RequestId>,
    in_session: bool,
}

impl Asked {
    fn of(message: &ClientJsonRpcMessage, in_session: bool) -> Self {
        let request = match message {
            JsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        Self { request, in_session }
    }

    /// The POST's answer, with an id-less error answering our request made claimable.
    fn claim(self, response: HttpResult<StreamableHttpPostResponse>) -> HttpResult<StreamableHttpPostResponse> {
        match (response?, self.request) {
            (StreamableHttpPostResponse::Json(JsonRpcMessage::Error(error), _), Some(_))
                if error.id.is_none() && self.in_session =>
            {
                tracing::debug!(message = %error.error.message, "id-less error in a session: session lost");
                Err(StreamableHttpError::SessionExpired)
            }
            (StreamableHttpPostResponse::Json(JsonRpcMessage::Error(mut error), session), Some(id))
                if error.id.is_none() =>
            {
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
        let error = ErrorData::new(ErrorCode(-32000), "Bad Request: No valid session ID provided", None);
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
    fn an_idless_error_in_a_session_is_a_lost_session() {
        let claimed = Asked::of(&request(7), true).claim(Ok(idless_error()));
        assert!(
            matches!(claimed, Err(StreamableHttpError::SessionExpired)),
            "{claimed:?}"
        );
    }

    #[test]
    fn an_idless_error_before_a_session_answers_the_request() {
        let claimed = Asked::of(&request(7), false).claim(Ok(idless_error()));
        assert_eq!(error_id(claimed), Some(RequestId::Number(7)));
    }

    #[test]
    fn errors_with_an_id_and_other_messages_pass_unchanged() {
        let notification: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/initialized"
        }))
        .unwrap();
        assert_eq!(error_id(Asked::of(&notification, true).claim(Ok(idless_error()))), None);

        let error = ErrorData::new(ErrorCode(-32602), "bad", None);
        let with_id = ServerJsonRpcMessage::Error(JsonRpcError::new(Some(RequestId::Number(3)), error));
        let claimed = Asked::of(&request(3), true).claim(Ok(StreamableHttpPostResponse::Json(with_id, None)));
        assert_eq!(error_id(claimed), Some(RequestId::Number(3)));
    }
}
