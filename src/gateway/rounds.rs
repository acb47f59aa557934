//! Calls that ask their client something, on protocol 2026-07-28 (SEP-2322, multi round-trip
//! requests): a server may no longer send its client requests, so a question during a call —
//! a downstream server's elicitation, sampling or roots request, or the gateway's own
//! confirmation — ends the current round as an input-required result carrying the question
//! and a sealed `requestState`; the client retries the same `tools/call` with its answer in
//! `inputResponses` and that state, and the call goes on where it stopped.
//!
//! The call itself keeps running in this process between rounds (a downstream server is
//! waiting for the answer), parked under a random id. The `requestState` is that id sealed
//! with rmcp's HMAC codec under a key made at start, bound to the caller and to the request
//! (tool name and arguments) and valid for [`ROUND_TTL`]: a state another caller sends back,
//! or one sent with other arguments, forged, expired, or already used, opens no call. A
//! parked call nobody resumes within [`ROUND_TTL`] is cancelled (its question unanswered).
//! Parked calls are bounded per caller and in all ([`MAX_PARKED_PER_CALLER`],
//! [`MAX_PARKED`]): past either, the question is refused to whoever asked it and the call
//! goes on without an answer.
//!
//! A retry that reaches another process (a replica behind a load balancer) finds no call
//! there and is told so: the state opens only where it was sealed.

// Sampling and roots are deprecated by SEP-2577 (protocol 2026-07-28), but servers on
// 2025-11-25 and before still send them, and those are the servers whose questions go here.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolResponse, CallToolResult, ClientResult, CreateMessageResult, ElicitResult, ElicitationAction, InputRequest,
    InputRequests, InputRequiredResult, InputResponses, JsonObject, ListRootsResult, RequestStateCodec, SealOptions,
    ServerRequest,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::meta_tool::error_result;
use super::to_client::{Channel, Question};
use super::tools::execute_tool::{self, progress_to_client, ExecuteTool, Leg};
use crate::caller::Caller;
use crate::engine::{Engine, ProgressSink, ProgressUpdate};

/// How long a parked call waits for the client's next round.
pub const ROUND_TTL: Duration = Duration::from_secs(600);
/// Calls one caller may have waiting for an answer at once.
pub const MAX_PARKED_PER_CALLER: usize = 16;
/// Calls all callers may have waiting at once.
pub const MAX_PARKED: usize = 1024;

/// The calls of one gateway waiting for their client's next round.
pub(crate) struct Rounds {
    codec: RequestStateCodec,
    parked: Mutex<HashMap<String, Parked>>,
}

impl std::fmt::Debug for Rounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rounds").finish_non_exhaustive()
    }
}

impl Default for Rounds {
    fn default() -> Self {
        Self {
            codec: RequestStateCodec::try_new(random_bytes::<32>()).expect("32 random bytes are a long enough key"),
            parked: Mutex::default(),
        }
    }
}

/// A call running apart from the request that started it.
struct Running {
    questions: mpsc::Receiver<Question>,
    done: JoinHandle<CallToolResult>,
    /// Cancels the call: the client went away, or its round never came.
    cancel: CancellationToken,
    /// Where the call's progress goes: the round open now.
    progress: Arc<Mutex<Option<ProgressSink>>>,
}

/// A call waiting for the answer to `key`.
struct Parked {
    running: Running,
    owner: String,
    key: String,
    asked: Asked,
    reply: oneshot::Sender<Result<ClientResult, ErrorData>>,
}

/// What kind of answer a question wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Elicitation,
    Sampling,
    Roots,
}

/// A round's `tools/call` as the rounds need it.
pub(crate) struct Round {
    /// What its state is bound to ([`binding`]).
    pub binding: Vec<u8>,
    pub request_state: Option<String>,
    pub input_responses: Option<InputResponses>,
}

impl Rounds {
    /// Run one round of `call`: start it (no `requestState`) or resume the parked call the
    /// state names with the answer in `inputResponses`; answer with its result, or with the
    /// next question as an input-required result.
    ///
    /// # Errors
    /// Invalid params for a `requestState` that opens no call of this caller and request.
    pub async fn round(
        self: &Arc<Self>,
        engine: &Engine,
        call: ExecuteTool,
        round: Round,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = Caller::of_request(&context.extensions);
        let binding = round.binding;
        let running = match round.request_state {
            None => Self::start(engine, call, &caller, context),
            Some(state) => {
                let parked = self.resume(&state, &binding, &caller)?;
                let answer = answer_of(parked.asked, &parked.key, round.input_responses);
                // The call may have ended meanwhile (timed out waiting): then nobody listens.
                let _ = parked.reply.send(answer);
                parked.running
            }
        };
        *lock(&running.progress) = progress_to_client(context);
        self.drive(running, caller.identity(), &binding, context).await
    }

    /// Start `call` apart from this request, its questions coming back here.
    fn start(engine: &Engine, call: ExecuteTool, caller: &Caller, context: &RequestContext<RoleServer>) -> Running {
        let (asks, questions) = mpsc::channel(1);
        let cancel = CancellationToken::new();
        let progress: Arc<Mutex<Option<ProgressSink>>> = Arc::default();
        // One trace for the whole call, whatever number of rounds it takes.
        let trace = crate::telemetry::CallTrace::of(engine.tracer().as_ref(), context, execute_tool::NAME);
        let leg = Leg {
            channel: Channel::rounds(context, asks),
            cancel: cancel.clone(),
            progress: Some(progress_into(progress.clone())),
            trace: trace.parent(),
            sign_in_origin: super::sign_in::SignInOrigin::of_request(&context.extensions),
        };
        let (engine, caller) = (engine.clone(), caller.clone());
        let done = tokio::spawn(async move {
            // Boxed: the engine's call is a large future.
            let outcome = Box::pin(call.run(&engine, &caller, leg)).await;
            trace.end(&outcome);
            outcome.unwrap_or_else(|error| error_result(&error))
        });
        Running {
            questions,
            done,
            cancel,
            progress,
        }
    }

    /// The parked call `state` names, taken out: it is resumed once.
    fn resume(&self, state: &str, binding: &[u8], caller: &Caller) -> Result<Parked, ErrorData> {
        let again = "call the tool again without requestState to start over";
        let id = self.codec.open_with(state, binding).map_err(|error| {
            ErrorData::invalid_params(
                format!(
                    "requestState is not one this gateway gave for this caller and these arguments ({error}); {again}"
                ),
                None,
            )
        })?;
        let id = String::from_utf8(id).unwrap_or_default();
        let mut parked = lock(&self.parked);
        match parked.remove(&id) {
            Some(call) if call.owner == caller.identity() => Ok(call),
            Some(call) => {
                // Cannot happen with the binding in the seal; kept out of reach all the same.
                parked.insert(id, call);
                Err(ErrorData::invalid_params(
                    format!("no call waits under this requestState; {again}"),
                    None,
                ))
            }
            None => Err(ErrorData::invalid_params(
                format!(
                    "no call waits under this requestState: it was answered already, waited longer than {} s, \
                     or was started on another gateway process; {again}",
                    ROUND_TTL.as_secs()
                ),
                None,
            )),
        }
    }

    /// Wait for the call's result or its next question, whichever comes first.
    async fn drive(
        self: &Arc<Self>,
        mut running: Running,
        owner: String,
        binding: &[u8],
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        loop {
            tokio::select! {
                done = &mut running.done => {
                    return Ok(done.unwrap_or_else(|error| {
                        tracing::warn!(%error, "a call run in rounds ended without a result");
                        CallToolResult::error(vec![rmcp::model::ContentBlock::text(
                            "the call ended without a result (the gateway's task failed)",
                        )])
                    }).into());
                }
                Some(question) = running.questions.recv() => {
                    match self.park(running, owner.clone(), question, binding) {
                        Ok(asked) => return Ok(asked.into()),
                        Err(back) => running = back,
                    }
                }
                () = context.ct.cancelled() => {
                    running.cancel.cancel();
                    return Err(ErrorData::internal_error("the call was cancelled", None));
                }
            }
        }
    }

    /// Park the call until its client answers `question`: the input-required result that asks
    /// it. A question that cannot be parked (limits, a kind a round cannot carry) is refused
    /// to its asker at once and the call goes on (`Err` gives it back).
    fn park(
        self: &Arc<Self>,
        running: Running,
        owner: String,
        question: Question,
        binding: &[u8],
    ) -> Result<InputRequiredResult, Running> {
        let Question { request, reply } = question;
        let (asked, input) = match request {
            ServerRequest::ElicitRequest(r) => (Asked::Elicitation, InputRequest::Elicitation(r)),
            ServerRequest::CreateMessageRequest(r) => (Asked::Sampling, InputRequest::CreateMessage(r)),
            ServerRequest::ListRootsRequest(r) => (Asked::Roots, InputRequest::ListRoots(r)),
            _ => {
                let _ = reply.send(Err(ErrorData::invalid_request(
                    "this request cannot travel in an input-required result",
                    None,
                )));
                return Err(running);
            }
        };
        let id = hex(&random_bytes::<16>());
        {
            let mut parked = lock(&self.parked);
            let mine = parked.values().filter(|p| p.owner == owner).count();
            if mine >= MAX_PARKED_PER_CALLER || parked.len() >= MAX_PARKED {
                drop(parked);
                let _ = reply.send(Err(ErrorData::invalid_request(
                    format!(
                        "the gateway refused this question: {mine} call(s) of this user already wait for \
                         answers (at most {MAX_PARKED_PER_CALLER} per user, {MAX_PARKED} in all)"
                    ),
                    None,
                )));
                return Err(running);
            }
            let key = format!("anygpt-{}", &id[..8]);
            let mut requests = InputRequests::new();
            requests.insert(key.clone(), input);
            parked.insert(
                id.clone(),
                Parked {
                    running,
                    owner,
                    key,
                    asked,
                    reply,
                },
            );
            self.expire_later(id.clone());
            let state = self.codec.seal_with(
                id.as_bytes(),
                &SealOptions::new().associated_data(binding).ttl(ROUND_TTL),
            );
            Ok(InputRequiredResult::new(Some(requests), Some(state)))
        }
    }

    /// Cancel the call parked under `id` if its next round has not come within [`ROUND_TTL`].
    fn expire_later(self: &Arc<Self>, id: String) {
        let rounds = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(ROUND_TTL).await;
            let Some(rounds) = rounds.upgrade() else { return };
            let expired = lock(&rounds.parked).remove(&id);
            if let Some(parked) = expired {
                tracing::info!(
                    "a call waited {} s for its next round and is cancelled",
                    ROUND_TTL.as_secs()
                );
                parked.running.cancel.cancel();
            }
        });
    }
}

/// What a state is bound to: the caller and the request (tool name and arguments, keys in
/// order so a client re-encoding them still matches).
pub(crate) fn binding(caller: &Caller, tool: &str, arguments: Option<&JsonObject>) -> Vec<u8> {
    let arguments = arguments.map_or(Value::Null, |a| sorted(&Value::Object(a.clone())));
    let text = serde_json::json!([caller.identity(), tool, arguments]).to_string();
    ring::digest::digest(&ring::digest::SHA256, text.as_bytes())
        .as_ref()
        .to_vec()
}

/// `value` with every object's keys sorted.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&fields[k]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The client's answer to the question under `key`, as the asker expects it. A missing
/// answer to an elicitation is a cancel; to anything else, an error.
fn answer_of(asked: Asked, key: &str, responses: Option<InputResponses>) -> Result<ClientResult, ErrorData> {
    let answer = responses.and_then(|mut r| r.remove(key));
    let malformed = |error: serde_json::Error| {
        ErrorData::invalid_params(format!("the client's answer under `{key}` is malformed: {error}"), None)
    };
    match (asked, answer) {
        (Asked::Elicitation, None) => Ok(ClientResult::ElicitResult(ElicitResult::new(ElicitationAction::Cancel))),
        (_, None) => Err(ErrorData::invalid_params(
            format!("the client's retry has no answer under `{key}` in inputResponses"),
            None,
        )),
        (Asked::Elicitation, Some(answer)) => serde_json::from_value::<ElicitResult>(answer)
            .map(ClientResult::ElicitResult)
            .map_err(malformed),
        (Asked::Sampling, Some(answer)) => serde_json::from_value::<CreateMessageResult>(answer)
            .map(|result| ClientResult::CreateMessageResult(Box::new(result)))
            .map_err(malformed),
        (Asked::Roots, Some(answer)) => serde_json::from_value::<ListRootsResult>(answer)
            .map(ClientResult::ListRootsResult)
            .map_err(malformed),
    }
}

/// A progress sink that passes each report to the round open now (if it asked for progress).
fn progress_into(current: Arc<Mutex<Option<ProgressSink>>>) -> ProgressSink {
    Arc::new(move |update: ProgressUpdate| {
        if let Some(sink) = lock(&current).as_ref() {
            sink(update);
        }
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

use crate::hash::{hex, random_bytes};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: &Value) -> JsonObject {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn the_binding_ignores_key_order_but_not_values_callers_or_tools() {
        let alice = Caller::member("alice", &[]);
        let a = args(&json!({ "b": 1, "a": { "y": 2, "x": 3 } }));
        let reordered = args(&json!({ "a": { "x": 3, "y": 2 }, "b": 1 }));
        let changed = args(&json!({ "a": { "x": 3, "y": 2 }, "b": 2 }));
        assert_eq!(binding(&alice, "t", Some(&a)), binding(&alice, "t", Some(&reordered)));
        assert_ne!(binding(&alice, "t", Some(&a)), binding(&alice, "t", Some(&changed)));
        assert_ne!(binding(&alice, "t", Some(&a)), binding(&alice, "u", Some(&a)));
        let bob = Caller::member("bob", &[]);
        assert_ne!(binding(&alice, "t", Some(&a)), binding(&bob, "t", Some(&a)));
        assert_ne!(binding(&alice, "t", None), binding(&Caller::local(), "t", None));
    }

    #[test]
    fn answers_are_read_as_the_question_wants() {
        let key = "anygpt-1";
        let responses = |v: Value| Some(InputResponses::from([(key.to_owned(), v)]));
        let accepted = answer_of(
            Asked::Elicitation,
            key,
            responses(json!({ "action": "accept", "content": {} })),
        );
        assert!(matches!(accepted, Ok(ClientResult::ElicitResult(r)) if r.action == ElicitationAction::Accept));
        let missing = answer_of(Asked::Elicitation, key, None);
        assert!(matches!(missing, Ok(ClientResult::ElicitResult(r)) if r.action == ElicitationAction::Cancel));
        let no_sample = answer_of(Asked::Sampling, key, None).unwrap_err();
        assert!(
            no_sample.message.contains("no answer under `anygpt-1`"),
            "{}",
            no_sample.message
        );
        let bad = answer_of(Asked::Elicitation, key, responses(json!({ "action": 3 }))).unwrap_err();
        assert!(bad.message.contains("malformed"), "{}", bad.message);
        let roots = answer_of(
            Asked::Roots,
            key,
            responses(json!({ "roots": [{ "uri": "file:///w" }] })),
        );
        assert!(matches!(roots, Ok(ClientResult::ListRootsResult(r)) if r.roots.len() == 1));
    }

    #[test]
    fn a_state_opens_only_for_its_binding() {
        let rounds = Rounds::default();
        let bound = b"alice|t|{}";
        let state = rounds
            .codec
            .seal_with(b"id-1", &SealOptions::new().associated_data(bound).ttl(ROUND_TTL));
        assert_eq!(rounds.codec.open_with(&state, bound).unwrap(), b"id-1");
        assert!(rounds.codec.open_with(&state, b"bob|t|{}").is_err());
        // Another process (another key) cannot open it either.
        assert!(Rounds::default().codec.open_with(&state, bound).is_err());
    }
}
