//! The gateway's side of the client connection: newline-delimited JSON-RPC over a byte stream,
//! in place of rmcp's `AsyncRwTransport`.
//!
//! Inbound, every line is classified by `inbound::parse`; a line that is not a usable message
//! is answered here with its JSON-RPC error (rmcp would drop it). Outbound, a message over
//! `MAX_MESSAGE_BYTES` is replaced by an error for its id, so one oversized answer cannot make
//! the client drop the session. End of input cancels `eof`, which the serve loop turns into
//! cancelling the calls in flight (rmcp alone waits up to 5 s for them).
//!
//! Backpressure: rmcp starts a task per request it is handed, so a client sending requests
//! faster than their answers leave (or not reading at all) would grow memory without end.
//! Reading stops while [`MAX_OWED`] answers are owed — an answer is paid once it is written,
//! or when the client cancels its request (a cancelled request gets no answer). A request
//! reusing the id of one still owed is answered with an error here and never handed on: ids
//! are how owed answers are counted, so repeating one would slip past the limit. Each request
//! reaches rmcp under an id of ours ([`Owed`]), so a cancelled request's id is free for the
//! client's next request at once, and the cancelled one's late answer is never sent.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use rmcp::model::{ClientJsonRpcMessage, ClientNotification, ErrorCode, RequestId, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleServer;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::bound::MAX_MESSAGE_BYTES;
use super::inbound::{self, Inbound, Rejection};

/// Longest line read from the client, as in rmcp: longer ones are skipped and answered.
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// How much of an oversized line is kept to find its id.
const HEAD_BYTES: usize = 4096;
/// Answers the gateway may owe the client before it stops reading: far above what a client
/// runs at once, far below what would cost memory (each owed request holds a task).
const MAX_OWED: usize = 1024;

/// The client's requests not answered yet, each under an id of our own while rmcp holds it.
///
/// rmcp keys a request's cancellation by its id: a request reusing the id of one the client
/// cancelled (which the spec allows — a cancelled request is over) would take the cancelled
/// request's late answer, and its own answer would be dropped. So every request reaches rmcp
/// under a fresh id, mapped back on the way out; a cancellation frees the client's id at once
/// and drops whatever answer the cancelled request still produces (the spec says the receiver
/// should not respond).
#[derive(Debug, Default)]
struct Owed {
    ids: std::sync::Mutex<OwedIds>,
    /// One permit per payment, so a waiting reader never misses one.
    paid: Notify,
}

#[derive(Debug, Default)]
struct OwedIds {
    /// Our id of each request not answered (nor cancelled) yet, by the client's id.
    ours: HashMap<RequestId, RequestId>,
    /// The client's id of each of ours not answered (nor cancelled) yet.
    theirs: HashMap<RequestId, RequestId>,
    /// Ours whose answers are being written: still owed (the limit counts them), their
    /// client ids already free.
    writing: usize,
    /// The last id of ours given out.
    last: i64,
}

impl Owed {
    fn ids(&self) -> std::sync::MutexGuard<'_, OwedIds> {
        self.ids
            .lock()
            .expect("owed lock is never poisoned: no panics while held")
    }

    /// How many answers are owed.
    fn count(&self) -> usize {
        let ids = self.ids();
        ids.ours.len() + ids.writing
    }

    /// Owe an answer to the client's request `id`: the id rmcp sees it under, or `None` when
    /// `id` is already owed.
    fn owe(&self, id: &RequestId) -> Option<RequestId> {
        let mut ids = self.ids();
        if ids.ours.contains_key(id) {
            return None;
        }
        ids.last += 1;
        let ours = RequestId::Number(ids.last);
        ids.ours.insert(id.clone(), ours.clone());
        ids.theirs.insert(ours.clone(), id.clone());
        Some(ours)
    }

    /// An answer was written (or given up on).
    fn pay(&self) {
        {
            let mut ids = self.ids();
            ids.writing = ids.writing.saturating_sub(1);
        }
        self.paid.notify_one();
    }

    /// The client cancelled its request `id`: our id of it (for rmcp to cancel), and the
    /// client's id is free again. `None` when it is not owed (answered already, or unknown).
    fn cancel(&self, id: &RequestId) -> Option<RequestId> {
        let ours = {
            let mut ids = self.ids();
            let ours = ids.ours.remove(id)?;
            ids.theirs.remove(&ours);
            ours
        };
        self.paid.notify_one();
        Some(ours)
    }

    async fn below_limit(&self) {
        while self.count() >= MAX_OWED {
            self.paid.notified().await;
        }
    }

    /// Put `message` from the client under our ids: a request gets one of its own, a
    /// cancellation names ours. `Err` is the error to answer instead of handing it on (a
    /// request whose id is still owed); `Ok(None)`: nothing to hand on (a cancellation of a
    /// request not owed, which must not cancel another of ours that has its number).
    fn note_inbound(&self, mut message: ClientJsonRpcMessage) -> Result<Option<ClientJsonRpcMessage>, Rejection> {
        match &mut message {
            ClientJsonRpcMessage::Request(request) => match self.owe(&request.id) {
                Some(ours) => request.id = ours,
                None => {
                    return Err(Rejection {
                        id: serde_json::to_value(&request.id).ok(),
                        code: ErrorCode::INVALID_REQUEST,
                        message: "this request id is already in use by a request not answered yet; \
                                  give every request a new id"
                            .into(),
                    })
                }
            },
            ClientJsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) = &mut notification.notification {
                    if let Some(id) = &mut cancelled.params.request_id {
                        match self.cancel(id) {
                            Some(ours) => *id = ours,
                            None => return Ok(None),
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(Some(message))
    }

    /// Put `message` to the client back under the client's ids: the message to write (`None`
    /// for the answer to a cancelled request, which is not sent), and whether it is an answer
    /// to [`pay`](Self::pay) once written. The client's id is free from here on.
    fn note_outbound(&self, mut message: ServerJsonRpcMessage) -> (Option<ServerJsonRpcMessage>, bool) {
        let id = match &mut message {
            ServerJsonRpcMessage::Response(response) => &mut response.id,
            ServerJsonRpcMessage::Error(error) => match &mut error.id {
                Some(id) => id,
                None => return (Some(message), false),
            },
            ServerJsonRpcMessage::Request(_) | ServerJsonRpcMessage::Notification(_) => return (Some(message), false),
        };
        let ours = id.clone();
        let theirs = {
            let mut ids = self.ids();
            let theirs = ids.theirs.remove(&ours);
            if let Some(theirs) = &theirs {
                ids.ours.remove(theirs);
                ids.writing += 1;
            }
            theirs
        };
        let Some(theirs) = theirs else {
            tracing::debug!(%ours, "dropping the answer to a request the client cancelled");
            return (None, false);
        };
        *id = theirs;
        (Some(message), true)
    }
}

/// One JSON-RPC message per line over `R`/`W`.
pub(crate) struct LineTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Inside a line already rejected as too long, until its newline.
    discarding: bool,
    write: Arc<Mutex<W>>,
    /// The last rejection being written.
    answering: Option<JoinHandle<()>>,
    owed: Arc<Owed>,
    eof: CancellationToken,
}

enum LineRead {
    Line,
    /// Too long: skipped; the answer is built from its first bytes.
    Oversized(Vec<u8>),
    End,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub(crate) fn new(read: R, write: W, eof: CancellationToken) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            write: Arc::new(Mutex::new(write)),
            answering: None,
            owed: Arc::default(),
            eof,
        }
    }

    /// Read one line into `self.line`, never buffering more than `MAX_LINE_BYTES`. Cancel-safe:
    /// `receive` is polled in a `select!`; a partial line stays in `self.line` for the next call.
    async fn read_line(&mut self) -> LineRead {
        loop {
            let available = match self.read.fill_buf().await {
                Ok([]) => return LineRead::End,
                Ok(available) => available,
                Err(error) => {
                    tracing::warn!(%error, "cannot read from the client");
                    return LineRead::End;
                }
            };
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let mut outcome = None;
            if self.discarding {
                self.discarding = newline.is_none();
            } else if self.line.len() + take > MAX_LINE_BYTES {
                let mut head = std::mem::take(&mut self.line);
                head.extend_from_slice(&available[..take.min(HEAD_BYTES)]);
                head.truncate(HEAD_BYTES);
                self.discarding = newline.is_none();
                outcome = Some(LineRead::Oversized(head));
            } else {
                self.line.extend_from_slice(&available[..take]);
                if newline.is_some() {
                    outcome = Some(LineRead::Line);
                }
            }
            self.read.consume(take);
            if let Some(outcome) = outcome {
                return outcome;
            }
        }
    }

    /// Write `rejection` in a task of its own, so a cancelled `receive` never leaves half a
    /// line on the wire. `receive` waits for it before reading on.
    fn answer(&mut self, rejection: &Rejection) {
        tracing::debug!(id = ?rejection.id, code = rejection.code.0, message = %rejection.message, "answering a malformed message");
        let write = Arc::clone(&self.write);
        let line = rejection.to_line();
        self.answering = Some(tokio::spawn(async move {
            if let Err(error) = write_line(&write, &line).await {
                tracing::debug!(%error, "cannot answer a malformed message");
            }
        }));
    }
}

async fn write_line<W: AsyncWrite + Unpin>(write: &Mutex<W>, line: &[u8]) -> std::io::Result<()> {
    let mut write = write.lock().await;
    write.write_all(line).await?;
    write.flush().await
}

/// `message` as one line, or — when that line would exceed `MAX_MESSAGE_BYTES` — an error for
/// its id in its place (nothing for a notification, which has no one waiting on it).
fn encode(message: &ServerJsonRpcMessage) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    if line.len() > MAX_MESSAGE_BYTES {
        let size = line.len();
        let id = match message {
            ServerJsonRpcMessage::Response(response) => Some(&response.id),
            ServerJsonRpcMessage::Error(error) => error.id.as_ref(),
            ServerJsonRpcMessage::Request(_) => {
                tracing::warn!(size, "dropped a request to the client over the message size limit");
                return Ok(None);
            }
            ServerJsonRpcMessage::Notification(_) => {
                tracing::warn!(size, "dropped a notification over the message size limit");
                return Ok(None);
            }
        };
        tracing::warn!(size, "an answer over the message size limit was replaced by an error");
        return Ok(Some(oversized_answer(
            id.map(|id| serde_json::to_value(id).unwrap_or(Value::Null)),
            size,
        )));
    }
    line.push(b'\n');
    Ok(Some(line))
}

fn oversized_answer(id: Option<Value>, size: usize) -> Vec<u8> {
    Rejection {
        id,
        code: ErrorCode::INTERNAL_ERROR,
        message: format!(
            "the answer was {size} bytes, over the {MAX_MESSAGE_BYTES} bytes the gateway sends in one message; \
             ask for less (a smaller limit, or maxResultBytes for tool results)"
        ),
    }
    .to_line()
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = std::io::Result<()>> + Send + 'static {
        let write = Arc::clone(&self.write);
        let owed = Arc::clone(&self.owed);
        let (outgoing, answered) = owed.note_outbound(item);
        let line = outgoing.as_ref().map(encode).transpose();
        async move {
            let written = match line.map(Option::flatten) {
                Ok(Some(line)) => write_line(&write, &line).await,
                Ok(None) => Ok(()),
                Err(error) => Err(error),
            };
            // Paid once on the wire: a client that does not read keeps its requests owed.
            if answered {
                owed.pay();
            }
            written
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            // A client flooding malformed lines is slowed to the pace it reads their answers.
            // Awaiting through `&mut` keeps this cancel-safe.
            if let Some(answering) = self.answering.as_mut() {
                let _ = answering.await;
                self.answering = None;
            }
            self.owed.below_limit().await;
            match self.read_line().await {
                LineRead::Line => {}
                LineRead::Oversized(head) => {
                    self.answer(&inbound::oversized(&head, MAX_LINE_BYTES));
                    continue;
                }
                LineRead::End => {
                    self.eof.cancel();
                    return None;
                }
            }
            let line = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let parsed = if line.iter().all(u8::is_ascii_whitespace) {
                Inbound::Ignore
            } else {
                inbound::parse(line)
            };
            self.line.clear();
            match parsed {
                Inbound::Message(message) => match self.owed.note_inbound(*message) {
                    Ok(Some(message)) => return Some(message),
                    Ok(None) => {}
                    Err(rejection) => self.answer(&rejection),
                },
                Inbound::Ignore => {}
                Inbound::Reject(rejection) => self.answer(&rejection),
            }
        }
    }

    async fn close(&mut self) -> std::io::Result<()> {
        if let Some(answering) = self.answering.take() {
            let _ = answering.await;
        }
        self.write.lock().await.flush().await
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        CallToolResult, ContentBlock, NumberOrString, ProgressNotificationParam, ProgressToken, ServerNotification,
        ServerResult,
    };
    use serde_json::json;

    use super::*;

    fn text_of_size(bytes: usize) -> String {
        "x".repeat(bytes)
    }

    #[test]
    fn an_answer_within_the_limit_is_one_line() {
        let result = CallToolResult::success(vec![ContentBlock::text("ok")]);
        let message = ServerJsonRpcMessage::response(ServerResult::CallToolResult(result), NumberOrString::Number(1));
        let line = encode(&message).unwrap().unwrap();
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(line.iter().position(|&b| b == b'\n'), Some(line.len() - 1));
    }

    #[test]
    fn an_oversized_answer_becomes_an_error_for_its_id() {
        let result = CallToolResult::success(vec![ContentBlock::text(text_of_size(MAX_MESSAGE_BYTES))]);
        let message =
            ServerJsonRpcMessage::response(ServerResult::CallToolResult(result), NumberOrString::String("a".into()));
        let line = encode(&message).unwrap().unwrap();
        let answer: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(answer["id"], json!("a"));
        assert_eq!(answer["error"]["code"], json!(-32603));
        insta::assert_snapshot!(
            answer["error"]["message"].as_str().unwrap(),
            @"the answer was 8388723 bytes, over the 8388608 bytes the gateway sends in one message; ask for less (a smaller limit, or maxResultBytes for tool results)"
        );
    }

    /// `MAX_OWED + 1` pings from a client that reads nothing back: the first `MAX_OWED` are
    /// handed on, the next waits until one answer is written (paused time: no real sleep).
    #[tokio::test(start_paused = true)]
    async fn reading_stops_while_too_many_answers_are_owed() {
        use tokio::io::AsyncWriteExt as _;
        let (client, server) = tokio::io::duplex(1 << 20);
        let (read, write) = tokio::io::split(server);
        let mut transport = LineTransport::new(read, write, CancellationToken::new());
        let (_client_read, mut client_write) = tokio::io::split(client);
        let mut pings = String::new();
        for id in 0..=MAX_OWED {
            pings.push_str(&json!({ "jsonrpc": "2.0", "id": id, "method": "ping" }).to_string());
            pings.push('\n');
        }
        client_write.write_all(pings.as_bytes()).await.unwrap();
        for _ in 0..MAX_OWED {
            assert!(transport.receive().await.is_some());
        }
        let waiting = tokio::time::timeout(std::time::Duration::from_secs(5), transport.receive()).await;
        assert!(
            waiting.is_err(),
            "a request was read while {MAX_OWED} answers were owed"
        );

        // rmcp answers under our id of the first request (ours count from 1).
        let answer = ServerJsonRpcMessage::response(ServerResult::empty(()), NumberOrString::Number(1));
        transport.send(answer).await.unwrap();
        let next = tokio::time::timeout(std::time::Duration::from_secs(5), transport.receive()).await;
        assert!(next.expect("reading resumes once an answer is written").is_some());
    }

    fn message(line: &str) -> ClientJsonRpcMessage {
        serde_json::from_str(line).unwrap()
    }

    fn request_id(message: Option<ClientJsonRpcMessage>) -> RequestId {
        match message {
            Some(ClientJsonRpcMessage::Request(request)) => request.id,
            other => panic!("not a request: {other:?}"),
        }
    }

    #[test]
    fn a_cancelled_request_is_no_longer_owed() {
        let owed = Owed::default();
        let ours = request_id(
            owed.note_inbound(message(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#))
                .unwrap(),
        );
        assert_eq!(owed.count(), 1);
        let cancelled = owed
            .note_inbound(message(
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#,
            ))
            .unwrap();
        assert_eq!(owed.count(), 0);
        let Some(ClientJsonRpcMessage::Notification(notification)) = cancelled else {
            panic!("the cancellation is handed on");
        };
        let ClientNotification::CancelledNotification(cancelled) = notification.notification else {
            panic!("still a cancellation");
        };
        assert_eq!(cancelled.params.request_id, Some(ours), "rmcp cancels our id");
        // A cancellation of nothing owed is not handed on: our numbers are not the client's.
        let stray = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#;
        assert!(owed.note_inbound(message(stray)).unwrap().is_none());
    }

    /// The spec lets a client reuse the id of a request it cancelled: the cancelled request's
    /// late answer is not sent, the new request's answer is, under the client's id.
    #[test]
    fn a_cancelled_id_is_free_again_and_its_late_answer_dropped() {
        let owed = Owed::default();
        let ping = r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#;
        let first = request_id(owed.note_inbound(message(ping)).unwrap());
        owed.note_inbound(message(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#,
        ))
        .unwrap();
        let second = request_id(owed.note_inbound(message(ping)).unwrap());
        assert_ne!(first, second);
        let late = ServerJsonRpcMessage::response(ServerResult::empty(()), first);
        assert!(
            matches!(owed.note_outbound(late), (None, false)),
            "no answer for the cancelled request"
        );
        let answer = ServerJsonRpcMessage::response(ServerResult::empty(()), second);
        let (Some(ServerJsonRpcMessage::Response(answer)), true) = owed.note_outbound(answer) else {
            panic!("the new request is answered");
        };
        assert_eq!(answer.id, NumberOrString::String("a".into()));
        assert_eq!(owed.count(), 1, "owed until written");
        owed.pay();
        assert_eq!(owed.count(), 0);
    }

    /// A client repeating one id cannot grow the owed count past its limit: the repeat is
    /// answered with an error for that id and not handed on.
    #[tokio::test]
    async fn a_request_reusing_an_owed_id_is_answered_and_not_handed_on() {
        use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
        let (client, server) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server);
        let mut transport = LineTransport::new(read, write, CancellationToken::new());
        let (client_read, mut client_write) = tokio::io::split(client);
        let ping = json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }).to_string();
        let second = json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" }).to_string();
        client_write
            .write_all(format!("{ping}\n{ping}\n{second}\n").as_bytes())
            .await
            .unwrap();
        // Handed on under ids of ours, counting from 1: the repeat takes none.
        let first = transport.receive().await.unwrap();
        assert!(matches!(first, ClientJsonRpcMessage::Request(ref r) if r.id == NumberOrString::Number(1)));
        let next = transport.receive().await.unwrap();
        assert!(
            matches!(next, ClientJsonRpcMessage::Request(ref r) if r.id == NumberOrString::Number(2)),
            "the repeated id was handed on: {next:?}"
        );
        assert_eq!(
            transport.owed.ids().theirs.get(&NumberOrString::Number(2)),
            Some(&NumberOrString::Number(2))
        );
        let mut answer = String::new();
        BufReader::new(client_read).read_line(&mut answer).await.unwrap();
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["id"], json!(1));
        assert_eq!(answer["error"]["code"], json!(-32600));
        assert_eq!(transport.owed.count(), 2);
    }

    #[test]
    fn an_oversized_notification_is_dropped() {
        let mut params = ProgressNotificationParam::new(ProgressToken(NumberOrString::Number(1)), 1.0);
        params.message = Some(text_of_size(MAX_MESSAGE_BYTES));
        let message = ServerJsonRpcMessage::notification(ServerNotification::ProgressNotification(
            rmcp::model::Notification::new(params),
        ));
        assert!(encode(&message).unwrap().is_none());
    }
}
