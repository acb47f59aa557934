//! The newline-delimited JSON-RPC transport to a stdio server, with a direct parse for the
//! answers to our `tools/call` requests.
//!
//! rmcp reads a server message by buffering it and trying each JSON-RPC shape and then each of
//! about twenty result types in turn (untagged enums). For a proxied `execute_tool` that was
//! the largest share of the gateway's own CPU per call. We know which request ids are
//! `tools/call`, so their answers are parsed straight into a `CallToolResult`; everything
//! else (and anything the direct parse does not accept) goes through rmcp's own parser, so
//! the meaning of every message stays rmcp's. Writing uses rmcp's codec unchanged.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::{Sink, SinkExt, Stream, StreamExt};
use rmcp::model::{
    CallToolResult, ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, JsonRpcResponse, JsonRpcVersion2_0, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec, LinesCodecError};

/// rmcp's own limit for one incoming line; longer lines are dropped, the session stays open.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Ids of `tools/call` requests still waiting for an answer. A call abandoned without one
/// leaves its id behind; past this many the set is cleared, which costs those calls nothing
/// but the fast path.
const MAX_TRACKED_CALLS: usize = 4096;

type CallIds = Arc<Mutex<HashSet<RequestId>>>;

/// The sink and stream rmcp drives as a client transport over `read`/`write`.
pub fn transport<R, W>(
    read: R,
    write: W,
    server: String,
) -> (
    impl Sink<ClientJsonRpcMessage, Error = JsonRpcMessageCodecError> + Send + Unpin + 'static,
    impl Stream<Item = ServerJsonRpcMessage> + Send + Unpin + 'static,
)
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let calls = CallIds::default();
    let sent = calls.clone();
    let sink = FramedWrite::new(write, JsonRpcMessageCodec::<ClientJsonRpcMessage>::default()).with(
        move |message: ClientJsonRpcMessage| {
            note_call(&sent, &message);
            futures::future::ready(Ok::<_, JsonRpcMessageCodecError>(message))
        },
    );
    let stream = FramedRead::new(read, LinesCodec::new_with_max_length(MAX_LINE_BYTES))
        .take_while(|line| futures::future::ready(!matches!(line, Err(LinesCodecError::Io(_)))))
        .filter_map(move |line| {
            let message = match line {
                Ok(line) => parse(&line, &calls, &server),
                Err(error) => {
                    tracing::warn!(server = %server, "dropping a message: {error}");
                    None
                }
            };
            futures::future::ready(message)
        });
    (Box::pin(sink), Box::pin(stream))
}

fn note_call(calls: &CallIds, message: &ClientJsonRpcMessage) {
    if let JsonRpcMessage::Request(request) = message {
        if matches!(request.request, ClientRequest::CallToolRequest(_)) {
            let mut calls = lock(calls);
            if calls.len() >= MAX_TRACKED_CALLS {
                calls.clear();
            }
            calls.insert(request.id.clone());
        }
    }
}

/// Just enough of a message to tell an answer to one of our `tools/call` requests.
#[derive(Deserialize)]
struct Envelope<'a> {
    id: Option<RequestId>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
}

/// One line from the server as rmcp would read it; `None` for what rmcp would skip.
fn parse(line: &str, calls: &CallIds, server: &str) -> Option<ServerJsonRpcMessage> {
    let line = line.strip_prefix('\u{feff}').unwrap_or(line);
    if line.trim().is_empty() {
        return None;
    }
    if let Some(message) = parse_call_answer(line, calls) {
        return Some(message);
    }
    match serde_json::from_str::<ServerJsonRpcMessage>(line) {
        Ok(message) => Some(message),
        Err(error) => {
            // Like rmcp: an unreadable line is dropped, not fatal (the stdout tap has already
            // noted lines that are not JSON at all, for the error a user sees).
            tracing::debug!(server = %server, "skipping a message rmcp cannot read: {error}");
            None
        }
    }
}

/// The direct parse: an answer (with a `result`) to a tracked `tools/call` id whose result
/// reads as a `CallToolResult`. Errors and anything unexpected return `None` for rmcp to read.
fn parse_call_answer(line: &str, calls: &CallIds) -> Option<ServerJsonRpcMessage> {
    let envelope: Envelope = serde_json::from_str(line).ok()?;
    let id = envelope.id?;
    if !lock(calls).remove(&id) {
        return None;
    }
    let result: CallToolResult = serde_json::from_str(envelope.result?.get()).ok()?;
    Some(JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc: JsonRpcVersion2_0,
        id,
        result: ServerResult::CallToolResult(result),
    }))
}

fn lock(calls: &CallIds) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
    calls
        .lock()
        .expect("the call id set is never poisoned: no panics while held")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolRequest, CallToolRequestParams, JsonRpcRequest, NumberOrString};

    /// rmcp's message types do not all implement `PartialEq`: compare what they serialize to.
    fn json(message: Option<&ServerJsonRpcMessage>) -> serde_json::Value {
        serde_json::to_value(message).unwrap()
    }

    fn tracked(ids: &[i64]) -> CallIds {
        let calls = CallIds::default();
        lock(&calls).extend(ids.iter().map(|&id| NumberOrString::Number(id)));
        calls
    }

    /// The direct parse and rmcp's own must agree wherever the direct one answers.
    #[test]
    fn call_answers_read_the_same_as_through_rmcp() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}],"isError":true,"_meta":{"k":1}}}"#,
            r#"{"result":{"structuredContent":{"a":[1,2]},"content":[]},"id":7,"jsonrpc":"2.0"}"#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}",
        ];
        for line in lines {
            let direct = parse_call_answer(line.trim_start_matches('\u{feff}'), &tracked(&[7]));
            assert!(direct.is_some(), "{line}");
            let rmcp: ServerJsonRpcMessage = serde_json::from_str(line.trim_start_matches('\u{feff}')).unwrap();
            assert!(
                matches!(&rmcp, JsonRpcMessage::Response(r) if matches!(r.result, ServerResult::CallToolResult(_)))
            );
            assert_eq!(json(direct.as_ref()), json(Some(&rmcp)), "{line}");
            assert_eq!(
                json(parse(line, &tracked(&[7]), "t").as_ref()),
                json(Some(&rmcp)),
                "{line}"
            );
        }
    }

    #[test]
    fn only_tracked_ids_take_the_direct_path_and_only_once() {
        let calls = tracked(&[1]);
        let line = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
        assert!(parse_call_answer(line, &calls).is_some());
        assert!(
            parse_call_answer(line, &calls).is_none(),
            "the id is forgotten once answered"
        );
        // Untracked: rmcp reads it (here as whichever result type it picks).
        assert!(parse(line, &calls, "t").is_some());
    }

    #[test]
    fn errors_notifications_and_odd_results_fall_back_to_rmcp() {
        let calls = tracked(&[2, 3]);
        let error = r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"bad"}}"#;
        assert!(matches!(parse(error, &calls, "t"), Some(JsonRpcMessage::Error(_))));
        assert!(
            !lock(&calls).contains(&NumberOrString::Number(2)),
            "an error answer ends the call too"
        );
        let progress =
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}"#;
        assert!(matches!(
            parse(progress, &calls, "t"),
            Some(JsonRpcMessage::Notification(_))
        ));
        // A task-style result is not a CallToolResult: rmcp decides what it is.
        let task = r#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"task","task":{"taskId":"x"}}}"#;
        let rmcp: Option<ServerJsonRpcMessage> = serde_json::from_str(task).ok();
        assert_eq!(json(parse(task, &calls, "t").as_ref()), json(rmcp.as_ref()));
    }

    #[test]
    fn garbage_and_blank_lines_are_skipped() {
        let calls = tracked(&[]);
        for line in ["", "   ", "Starting server...", "{\"half\":", "[1,2]"] {
            assert!(parse(line, &calls, "t").is_none(), "{line:?}");
        }
    }

    #[test]
    fn outgoing_calls_are_tracked_and_the_set_stays_bounded() {
        let calls = CallIds::default();
        for id in 0..i64::try_from(MAX_TRACKED_CALLS).unwrap() + 10 {
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("echo")));
            let message = JsonRpcMessage::Request(JsonRpcRequest::new(NumberOrString::Number(id), request));
            note_call(&calls, &message);
        }
        let tracked = lock(&calls).len();
        assert!(tracked > 0 && tracked <= MAX_TRACKED_CALLS, "{tracked}");
    }
}
