//! The newline-delimited JSON-RPC transport to a stdio server, with a direct parse for the
//! answers to our `tools/call` and `tools/list` requests.
//!
//! rmcp reads a server message by buffering it and trying each JSON-RPC shape and then each of
//! about twenty result types in turn (untagged enums). For a proxied `execute_tool` that was
//! the largest share of the gateway's own CPU per call. We know which request ids are
//! `tools/call`, so their answers are parsed straight into a `CallToolResult`; everything
//! else (and anything the direct parse does not accept) goes through rmcp's own parser, so
//! the meaning of every message stays rmcp's. Writing uses rmcp's codec unchanged.
//!
//! A `tools/list` answer is read tool by tool (`listing`): rmcp would fail the whole page over
//! one invalid tool, or one nested past serde's limit, and parse every tool of a huge page
//! before the cap could apply. Each tool stays text until it is read; past the cap the rest are
//! skipped, and what was left out is kept for the listing under the request's id.
//!
//! An answer rmcp cannot read at all (longer than [`MAX_LINE_BYTES`], nested deeper than
//! serde's 128 levels, not JSON) would leave its request waiting out its whole timeout, and a
//! start waiting out the startup budget with no reason given. Its id is recovered from the
//! line's ends (as the gateway does for the client's lines, `crate::lenient_json`) and the
//! request fails at once with an error that says what was wrong with the answer.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use futures::{Sink, SinkExt, Stream, StreamExt};
use rmcp::model::{
    CallToolResult, ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage,
    JsonRpcResponse, JsonRpcVersion2_0, NumberOrString, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{Decoder, FramedRead, FramedWrite};

use super::listing::{self, PagesRead};

/// rmcp's own limit for one incoming line; longer lines are dropped (the request they answer
/// fails), the session stays open.
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// Longest line read when it is a page of tools answering our `tools/list`: a server with
/// tens of thousands of tools may send them in one page longer than [`MAX_LINE_BYTES`], and
/// the first [`MAX_TOOLS`](super::listing::MAX_TOOLS) of them are still served.
pub(crate) const MAX_PAGE_BYTES: usize = 64 * 1024 * 1024;
/// How much of each end of an oversized line is kept to find its id: the members before and
/// after one huge value.
const KEPT_END_BYTES: usize = 64 * 1024;
/// Marks the error we make up for an unreadable answer (in `ErrorData::data`), so the caller
/// reports a protocol error rather than the server's own.
const UNREADABLE_MARKER: &str = "anygpt/unreadableAnswer";

/// Ids of `tools/call` requests still waiting for an answer. A call abandoned without one
/// leaves its id behind; past this many the set is cleared, which costs those calls nothing
/// but the fast path.
const MAX_TRACKED_CALLS: usize = 4096;

type CallIds = Arc<Mutex<HashSet<RequestId>>>;

/// Our requests whose answers this transport reads itself: `tools/call` (straight into a
/// `CallToolResult`) and `tools/list` (tool by tool, what it leaves out kept in `pages`).
#[derive(Clone, Default)]
struct Awaited {
    calls: CallIds,
    lists: CallIds,
    pages: PagesRead,
}

/// The sink and stream rmcp drives as a client transport over `read`/`write`.
pub fn transport<R, W>(
    read: R,
    write: W,
    server: String,
    pages: PagesRead,
) -> (
    impl Sink<ClientJsonRpcMessage, Error = JsonRpcMessageCodecError> + Send + Unpin + 'static,
    impl Stream<Item = ServerJsonRpcMessage> + Send + Unpin + 'static,
)
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let calls = Awaited {
        pages,
        ..Awaited::default()
    };
    let sent = calls.clone();
    let sink = FramedWrite::new(write, JsonRpcMessageCodec::<ClientJsonRpcMessage>::default()).with(
        move |message: ClientJsonRpcMessage| {
            note_call(&sent, &message);
            futures::future::ready(Ok::<_, JsonRpcMessageCodecError>(message))
        },
    );
    // A read error ends the stream, and so the session (rmcp does the same).
    let lists = calls.lists.clone();
    let decoder = LineDecoder::new(MAX_LINE_BYTES).longer_for(MAX_PAGE_BYTES, move |head| {
        !lock(&lists).is_empty() && crate::lenient_json::is_tools_page(head)
    });
    let stream = FramedRead::new(read, decoder)
        .take_while(|line| futures::future::ready(line.is_ok()))
        .filter_map(move |line| {
            let message = match line {
                // Only a page of tools may be longer (see `LineDecoder::longer_for`).
                Ok(Line::Complete(bytes)) if bytes.len() > MAX_LINE_BYTES + 1 => {
                    let head = &bytes[..KEPT_END_BYTES];
                    std::str::from_utf8(&bytes)
                        .ok()
                        .and_then(|text| parse_direct(text.trim_end(), &calls, true))
                        .or_else(|| oversized_answer(head, &bytes[bytes.len() - KEPT_END_BYTES..], MAX_LINE_BYTES))
                }
                Ok(Line::Complete(bytes)) => parse(&bytes, &calls, &server),
                Ok(Line::Oversized { head, tail }) => {
                    tracing::warn!(server = %server, "dropping a message over {MAX_LINE_BYTES} bytes");
                    oversized_answer(&head, &tail, MAX_LINE_BYTES)
                }
                Err(_) => None,
            };
            futures::future::ready(message)
        });
    (Box::pin(sink), Box::pin(stream))
}

/// One newline-terminated line, or the news that one was too long and was dropped, with its
/// first and last bytes (up to [`KEPT_END_BYTES`] each).
#[derive(Debug, PartialEq)]
enum Line {
    Complete(BytesMut),
    Oversized { head: Bytes, tail: Bytes },
}

/// Splits the stream into lines without judging them: `LinesCodec` errors on a line that is
/// not UTF-8 or too long, and a framed stream ends at its decoder's first error, which would
/// end a session over one bad line. Holds at most `max` bytes of a line (and, of a longer
/// one, its first bytes and a window of its last).
struct LineDecoder {
    max: usize,
    /// Bytes kept of each end of an oversized line.
    kept: usize,
    /// How far the buffer has been searched for a newline.
    searched: usize,
    /// Dropping the rest of an oversized line, whose first bytes are these.
    discarding: Option<Bytes>,
    /// A longer limit, for the lines whose first bytes this accepts.
    longer: Option<(usize, LongerIf)>,
    /// The limit of the line being read, once it has passed `max` (`None`: not yet).
    line_max: Option<usize>,
}

type LongerIf = Box<dyn Fn(&[u8]) -> bool + Send>;

impl LineDecoder {
    fn new(max: usize) -> Self {
        Self {
            max,
            kept: KEPT_END_BYTES.min(max),
            searched: 0,
            discarding: None,
            longer: None,
            line_max: None,
        }
    }

    /// Read lines up to `max` long when `accepts` their first bytes.
    fn longer_for(mut self, max: usize, accepts: impl Fn(&[u8]) -> bool + Send + 'static) -> Self {
        self.longer = Some((max, Box::new(accepts)));
        self
    }

    /// The limit of the line starting `line` (decided once, when it first passes `max`).
    fn limit(&mut self, line: &[u8]) -> usize {
        let max = self.max;
        *self.line_max.get_or_insert_with(|| match &self.longer {
            Some((longer, accepts)) if accepts(&line[..line.len().min(KEPT_END_BYTES)]) => *longer,
            _ => max,
        })
    }

    fn oversized(&self, head: Bytes, line: &[u8]) -> Line {
        let tail = &line[line.len().saturating_sub(self.kept)..];
        Line::Oversized {
            head,
            tail: Bytes::copy_from_slice(tail),
        }
    }
}

impl Decoder for LineDecoder {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, Self::Error> {
        if let Some(at) = buf[self.searched..].iter().position(|&b| b == b'\n') {
            let length = self.searched + at;
            let line = buf.split_to(length + 1);
            self.searched = 0;
            let body = &line[..length];
            let limit = if length > self.max { self.limit(body) } else { self.max };
            self.line_max = None;
            return Ok(Some(match self.discarding.take() {
                Some(head) => self.oversized(head, body),
                None if length > limit => {
                    let head = Bytes::copy_from_slice(&body[..self.kept.min(length)]);
                    self.oversized(head, body)
                }
                None => Line::Complete(line),
            }));
        }
        if self.discarding.is_none() && buf.len() > self.max && buf.len() > self.limit(buf) {
            self.discarding = Some(Bytes::copy_from_slice(&buf[..self.kept.min(buf.len())]));
        }
        if self.discarding.is_some() {
            // Keep only the window the tail may come from.
            let drop = buf.len().saturating_sub(self.kept);
            let _ = buf.split_to(drop);
        }
        self.searched = buf.len();
        Ok(None)
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, Self::Error> {
        // Bytes after the last newline are an incomplete message: nothing to deliver.
        let line = self.decode(buf)?;
        if line.is_none() {
            buf.clear();
            self.searched = 0;
            self.discarding = None;
            self.line_max = None;
        }
        Ok(line)
    }
}

fn note_call(awaited: &Awaited, message: &ClientJsonRpcMessage) {
    if let JsonRpcMessage::Request(request) = message {
        let ids = match request.request {
            ClientRequest::CallToolRequest(_) => &awaited.calls,
            ClientRequest::ListToolsRequest(_) => &awaited.lists,
            _ => return,
        };
        let mut ids = lock(ids);
        if ids.len() >= MAX_TRACKED_CALLS {
            ids.clear();
        }
        ids.insert(request.id.clone());
    }
}

/// Just enough of a message to tell an answer to one of our `tools/call` requests, with the
/// shape checks rmcp makes (version, and a response carries neither `method` nor `error`).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "jsonrpc")]
    _version: JsonRpcVersion2_0,
    id: Option<RequestId>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    method: Option<IgnoredAny>,
    error: Option<IgnoredAny>,
}

/// One line from the server as rmcp would read it; `None` for what rmcp would skip.
fn parse(line: &[u8], calls: &Awaited, server: &str) -> Option<ServerJsonRpcMessage> {
    let line = line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line);
    if line.trim_ascii().is_empty() {
        return None;
    }
    if let Some(message) = std::str::from_utf8(line)
        .ok()
        .and_then(|text| parse_direct(text, calls, false))
    {
        return Some(message);
    }
    match serde_json::from_slice::<ServerJsonRpcMessage>(line) {
        Ok(message) => Some(message),
        Err(error) => {
            // Like rmcp: an unreadable line is dropped, not fatal (the stdout tap has already
            // noted lines that are not JSON at all, for the error a user sees). But an answer
            // to one of our requests fails that request now rather than at its timeout.
            tracing::debug!(server = %server, "skipping a message rmcp cannot read: {error}");
            let found = crate::lenient_json::scan(line);
            if !found.answer || found.method {
                return None;
            }
            if let Some(id) = &found.id {
                if let Ok(id) = serde_json::from_value::<RequestId>(id.clone()) {
                    lock(&calls.calls).remove(&id);
                    lock(&calls.lists).remove(&id);
                }
            }
            unreadable_answer(found.id, &unreadable_reason(&error))
        }
    }
}

/// The error for the request an oversized line answers, found from the line's two ends.
fn oversized_answer(head: &[u8], tail: &[u8], max: usize) -> Option<ServerJsonRpcMessage> {
    let found = crate::lenient_json::scan(head);
    // Only an answer fails a request of ours: a server's own request numbers its ids itself.
    if !found.answer || found.method {
        return None;
    }
    let id = found.id.or_else(|| crate::lenient_json::id_at_end(tail));
    unreadable_answer(id, &format!("longer than {}", size_text(max)))
}

/// Why serde could not read a line, in the words of the protocol.
fn unreadable_reason(error: &serde_json::Error) -> String {
    if error.to_string().starts_with("recursion limit exceeded") {
        "nested deeper than 128 levels".to_owned()
    } else if error.is_syntax() || error.is_eof() {
        "not valid JSON".to_owned()
    } else {
        "not a JSON-RPC answer".to_owned()
    }
}

/// "16 MiB" for a whole number of MiB, else bytes.
fn size_text(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// The error that ends the request `id` is waiting on, when its answer could not be read
/// (`None` without an id: there is no request to end).
fn unreadable_answer(id: Option<serde_json::Value>, why: &str) -> Option<ServerJsonRpcMessage> {
    let id = match id? {
        serde_json::Value::String(s) => NumberOrString::String(s.into()),
        serde_json::Value::Number(n) => NumberOrString::Number(n.as_i64()?),
        _ => return None,
    };
    let message = format!("protocol error: the server's answer could not be read: it is {why}");
    Some(JsonRpcMessage::Error(JsonRpcError::new(
        Some(id),
        ErrorData::new(
            ErrorCode::INTERNAL_ERROR,
            message,
            Some(serde_json::json!({ UNREADABLE_MARKER: true })),
        ),
    )))
}

/// Whether `error` is one [`transport`] made up for an answer it could not read.
pub(super) fn is_unreadable_answer(error: &ErrorData) -> bool {
    error
        .data
        .as_ref()
        .and_then(|data| data.get(UNREADABLE_MARKER))
        .is_some()
}

/// The direct parse: an answer (with a `result`) to a tracked `tools/call` id whose result
/// reads as a `CallToolResult`, or to a tracked `tools/list` id whose result is a page of
/// tools. Errors and anything unexpected return `None` for rmcp to read.
fn parse_direct(line: &str, awaited: &Awaited, lists_only: bool) -> Option<ServerJsonRpcMessage> {
    let envelope: Envelope = serde_json::from_str(line).ok()?;
    // A request from the server may reuse one of our ids: it is not an answer.
    if envelope.method.is_some() {
        return None;
    }
    let id = envelope.id?;
    // An answer ends the request, error or not; only a clean result takes the direct path.
    let result = if !lists_only && lock(&awaited.calls).remove(&id) {
        let result: CallToolResult =
            serde_json::from_str(envelope.error.is_none().then_some(envelope.result?)?.get()).ok()?;
        ServerResult::CallToolResult(result)
    } else if lock(&awaited.lists).remove(&id) {
        let (page, read) = listing::read_json_page(envelope.error.is_none().then_some(envelope.result?)?.get())?;
        listing::keep_page(&awaited.pages, id.clone(), read);
        ServerResult::ListToolsResult(page)
    } else {
        return None;
    };
    Some(JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc: JsonRpcVersion2_0,
        id,
        result,
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

    fn tracked(ids: &[i64]) -> Awaited {
        let awaited = Awaited::default();
        lock(&awaited.calls).extend(ids.iter().map(|&id| NumberOrString::Number(id)));
        awaited
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
            let direct = parse_direct(line.trim_start_matches('\u{feff}'), &tracked(&[7]), false);
            assert!(direct.is_some(), "{line}");
            let rmcp: ServerJsonRpcMessage = serde_json::from_str(line.trim_start_matches('\u{feff}')).unwrap();
            assert!(
                matches!(&rmcp, JsonRpcMessage::Response(r) if matches!(r.result, ServerResult::CallToolResult(_)))
            );
            assert_eq!(json(direct.as_ref()), json(Some(&rmcp)), "{line}");
            assert_eq!(
                json(parse(line.as_bytes(), &tracked(&[7]), "t").as_ref()),
                json(Some(&rmcp)),
                "{line}"
            );
        }
    }

    #[test]
    fn only_tracked_ids_take_the_direct_path_and_only_once() {
        let calls = tracked(&[1]);
        let line = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
        assert!(parse_direct(line, &calls, false).is_some());
        assert!(
            parse_direct(line, &calls, false).is_none(),
            "the id is forgotten once answered"
        );
        // Untracked: rmcp reads it (here as whichever result type it picks).
        assert!(parse(line.as_bytes(), &calls, "t").is_some());
    }

    #[test]
    fn errors_notifications_and_odd_results_fall_back_to_rmcp() {
        let calls = tracked(&[2, 3]);
        let error = r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"bad"}}"#;
        assert!(matches!(
            parse(error.as_bytes(), &calls, "t"),
            Some(JsonRpcMessage::Error(_))
        ));
        assert!(
            !lock(&calls.calls).contains(&NumberOrString::Number(2)),
            "an error answer ends the call too"
        );
        let progress =
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}"#;
        assert!(matches!(
            parse(progress.as_bytes(), &calls, "t"),
            Some(JsonRpcMessage::Notification(_))
        ));
        // A task-style result is not a CallToolResult: rmcp decides what it is.
        let task = r#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"task","task":{"taskId":"x"}}}"#;
        let rmcp: Option<ServerJsonRpcMessage> = serde_json::from_str(task).ok();
        assert_eq!(json(parse(task.as_bytes(), &calls, "t").as_ref()), json(rmcp.as_ref()));
    }

    #[test]
    fn the_direct_path_keeps_rmcps_shape_checks() {
        // A result next to an error, a wrong version, a request reusing our id: not answers.
        let both = r#"{"jsonrpc":"2.0","id":4,"result":{"content":[]},"error":{"code":1,"message":"x"}}"#;
        let calls = tracked(&[4]);
        assert!(parse_direct(both, &calls, false).is_none());
        assert!(!lock(&calls.calls).contains(&NumberOrString::Number(4)));
        let version = r#"{"jsonrpc":"1.0","id":5,"result":{"content":[]}}"#;
        assert!(parse_direct(version, &tracked(&[5]), false).is_none());
        let request = r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#;
        let calls = tracked(&[6]);
        assert!(parse_direct(request, &calls, false).is_none());
        assert!(
            lock(&calls.calls).contains(&NumberOrString::Number(6)),
            "the call still waits for its answer"
        );
        assert!(matches!(
            parse(request.as_bytes(), &calls, "t"),
            Some(JsonRpcMessage::Request(_))
        ));
    }

    #[test]
    fn garbage_and_blank_lines_are_skipped() {
        let calls = tracked(&[]);
        for line in ["", "   ", "Starting server...", "{\"half\":", "[1,2]"] {
            assert!(parse(line.as_bytes(), &calls, "t").is_none(), "{line:?}");
        }
        assert!(parse(b"\xff\xfe not utf-8\n", &calls, "t").is_none());
    }

    /// Lines from a reader, as the transport's stream sees them.
    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        FramedRead::new(input, LineDecoder::new(max))
            .map(Result::unwrap)
            .collect()
            .await
    }

    fn oversized(head: &'static [u8], tail: &'static [u8]) -> Line {
        Line::Oversized {
            head: Bytes::from_static(head),
            tail: Bytes::from_static(tail),
        }
    }

    #[tokio::test]
    async fn bad_lines_are_dropped_and_reading_goes_on() {
        let input = b"{\"a\":1}\r\n\xff\xfe\n0123456789012345\nshort\n{\"b\":2}\npartial";
        let got = lines(input, 10).await;
        let complete = |s: &[u8]| Line::Complete(BytesMut::from(s));
        assert_eq!(
            got,
            vec![
                complete(b"{\"a\":1}\r\n"),
                complete(b"\xff\xfe\n"),
                oversized(b"0123456789", b"6789012345"),
                complete(b"short\n"),
                complete(b"{\"b\":2}\n"),
            ]
        );
    }

    #[tokio::test]
    async fn a_long_line_arriving_in_pieces_is_dropped_without_being_held() {
        use tokio::io::AsyncWriteExt;
        // A 4-byte pipe: every read returns at most 4 bytes, so the long line spans many.
        let (mut writer, reader) = tokio::io::duplex(4);
        tokio::spawn(async move {
            writer
                .write_all(b"ok\nthis line is far too long\nok again\n")
                .await
                .unwrap();
        });
        let got: Vec<Line> = FramedRead::new(reader, LineDecoder::new(10))
            .map(Result::unwrap)
            .collect()
            .await;
        let complete = |s: &[u8]| Line::Complete(BytesMut::from(s));
        assert_eq!(
            got,
            vec![
                complete(b"ok\n"),
                oversized(b"this line ", b"r too long"),
                complete(b"ok again\n")
            ]
        );
    }

    /// A page of tools may be longer than other lines, whole or in pieces; no line is longer
    /// than the longer limit.
    #[tokio::test]
    async fn a_page_of_tools_may_be_longer() {
        use tokio::io::AsyncWriteExt;
        let tools = format!("tools{}\n", "t".repeat(20));
        let other = format!("other{}\n", "o".repeat(20));
        let huge = format!("tools{}\n", "t".repeat(40));
        for pipe in [4, 1024] {
            let (mut writer, reader) = tokio::io::duplex(pipe);
            let input = format!("{tools}{other}{huge}ok\n");
            tokio::spawn(async move { writer.write_all(input.as_bytes()).await.unwrap() });
            let decoder = LineDecoder::new(10).longer_for(30, |head| head.starts_with(b"tools"));
            let got: Vec<Line> = FramedRead::new(reader, decoder).map(Result::unwrap).collect().await;
            assert_eq!(got.len(), 4, "{got:?}");
            assert_eq!(got[0], Line::Complete(BytesMut::from(tools.as_bytes())), "pipe {pipe}");
            assert!(matches!(got[1], Line::Oversized { .. }), "pipe {pipe}: {got:?}");
            assert!(matches!(got[2], Line::Oversized { .. }), "pipe {pipe}: {got:?}");
            assert_eq!(got[3], Line::Complete(BytesMut::from(&b"ok\n"[..])), "pipe {pipe}");
        }
    }

    #[tokio::test]
    async fn the_stream_still_yields_messages_after_a_bad_line() {
        let input = b"\xff oops\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n";
        let (_sink, stream) = transport(&input[..], tokio::io::sink(), "t".into(), PagesRead::default());
        let messages: Vec<_> = stream.collect().await;
        assert_eq!(messages.len(), 1);
        assert!(matches!(messages[0], JsonRpcMessage::Notification(_)));
    }

    /// What the transport's stream yields for `input`, read with a small line limit.
    async fn read_all(input: Vec<u8>) -> Vec<ServerJsonRpcMessage> {
        let calls = tracked(&[1, 2]);
        FramedRead::new(&input[..], LineDecoder::new(64))
            .filter_map(|line| {
                futures::future::ready(match line.unwrap() {
                    Line::Complete(bytes) => parse(&bytes, &calls, "t"),
                    Line::Oversized { head, tail } => oversized_answer(&head, &tail, 64),
                })
            })
            .collect()
            .await
    }

    fn error_of(message: &ServerJsonRpcMessage) -> (Option<RequestId>, &ErrorData) {
        match message {
            JsonRpcMessage::Error(error) => (error.id.clone(), &error.error),
            other => panic!("not an error: {}", json(Some(other))),
        }
    }

    #[tokio::test]
    async fn an_answer_too_long_to_read_fails_its_request_at_once() {
        let big = "x".repeat(500);
        // The TypeScript SDK writes the id last; others first.
        let input = format!(
            "{{\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{big}\"}}]}},\"jsonrpc\":\"2.0\",\"id\":1}}\n\
             {{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"result\":{{\"text\":\"{big}\"}}}}\n"
        );
        let messages = read_all(input.into_bytes()).await;
        assert_eq!(messages.len(), 2);
        let (id, error) = error_of(&messages[0]);
        assert_eq!(id, Some(NumberOrString::Number(1)));
        assert_eq!(
            error.message,
            "protocol error: the server's answer could not be read: it is longer than 64 bytes"
        );
        assert!(is_unreadable_answer(error));
        assert_eq!(error_of(&messages[1]).0, Some(NumberOrString::String("b".into())));
    }

    #[tokio::test]
    async fn an_answer_nested_too_deep_fails_its_request_at_once() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let line = format!("{{\"jsonrpc\":\"2.0\",\"result\":{{\"a\":{deep}}},\"id\":2}}\n");
        let calls = tracked(&[2]);
        let message = parse(line.as_bytes(), &calls, "t").expect("an error for id 2");
        let (id, error) = error_of(&message);
        assert_eq!(id, Some(NumberOrString::Number(2)));
        assert!(
            error.message.ends_with("it is nested deeper than 128 levels"),
            "{}",
            error.message
        );
        assert!(lock(&calls.calls).is_empty(), "the call is over");
    }

    #[tokio::test]
    async fn only_answers_with_an_id_fail_a_request() {
        let big = "x".repeat(500);
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let lines = [
            // The server's own request, too long or too deep: its id is from its numbering.
            format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"sampling/createMessage\",\"params\":\"{big}\"}}"),
            format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{deep}}}"),
            // No id to be found.
            format!("{{\"jsonrpc\":\"2.0\",\"result\":\"{big}\"}}"),
            format!("{{\"result\":{{\"text\":\"{big}\"}}, \"id\": 1}} trailing"),
        ];
        let input = lines.join("\n") + "\n";
        assert!(read_all(input.into_bytes()).await.is_empty());
    }

    /// A page with a tool nested past serde's limit: rmcp could not read the line at all; here
    /// the other tools are served and the deep one kept as dropped, by the request's id.
    #[test]
    fn a_list_answer_is_read_tool_by_tool() {
        let awaited = Awaited::default();
        lock(&awaited.lists).insert(NumberOrString::Number(3));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":3,"result":{{"tools":[{{"name":"a","inputSchema":{{}}}},{{"name":"d","inputSchema":{deep}}},{{"name":"b","inputSchema":{{}}}}],"nextCursor":"n"}}}}"#
        );
        assert!(
            serde_json::from_str::<ServerJsonRpcMessage>(&line).is_err(),
            "rmcp cannot read it"
        );
        let Some(JsonRpcMessage::Response(response)) = parse(line.as_bytes(), &awaited, "t") else {
            panic!("an answer for id 3");
        };
        let ServerResult::ListToolsResult(page) = response.result else {
            panic!("a page of tools");
        };
        let names: Vec<&str> = page.tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(page.next_cursor.as_deref(), Some("n"));
        let read = awaited
            .pages
            .lock()
            .unwrap()
            .remove(&NumberOrString::Number(3))
            .unwrap();
        assert_eq!(read.dropped[0].name, "#2");
        assert!(!read.unread);
        assert_eq!(read.dropped_count, 1);
        // An error answer to a listing is rmcp's to read.
        lock(&awaited.lists).insert(NumberOrString::Number(4));
        let error = r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"no"}}"#;
        assert!(matches!(
            parse(error.as_bytes(), &awaited, "t"),
            Some(JsonRpcMessage::Error(_))
        ));
    }

    #[test]
    fn outgoing_calls_are_tracked_and_the_set_stays_bounded() {
        let calls = Awaited::default();
        for id in 0..i64::try_from(MAX_TRACKED_CALLS).unwrap() + 10 {
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("echo")));
            let message = JsonRpcMessage::Request(JsonRpcRequest::new(NumberOrString::Number(id), request));
            note_call(&calls, &message);
        }
        let tracked = lock(&calls.calls).len();
        assert!(tracked > 0 && tracked <= MAX_TRACKED_CALLS, "{tracked}");
    }
}
