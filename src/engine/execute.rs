//! `execute` after parsing, in order: find the server's handle (once), the tool, rules,
//! trust (`discovery.security`), schema, call through the handle, cap the result; and the
//! audit record of it.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::cap_result;
use super::dto::ExecuteOptions;
use super::state::{Server, State};
use crate::caller::Caller;
use crate::config::ServerSpec;
use crate::confirm::Answer;
use crate::error::{Error, Result};
use crate::rules::Sight;
use crate::upstream::{CallError, UpstreamError};

impl State {
    pub(super) async fn execute(
        &self,
        caller: &Caller,
        server: &str,
        tool: &str,
        arguments: Option<&Value>,
        options: ExecuteOptions,
        answered: &mut Option<Answer>,
    ) -> Result<CallToolResult> {
        log_call(server, tool, arguments);
        let handle = self.server(server)?;
        // A per-user server is called through the caller's own connection.
        let (handle, token) = self.connection_for(handle, caller).await?;
        let handle = &handle;
        // This call needs the server: a sign-in it asks for may open the browser, and one a
        // background connect did not start starts now.
        let _sign_in = crate::upstream::sign_in_wanted(server);
        // The tool may wait for its server's first tool list: an abort must not wait with it.
        let cancel = options.cancel.clone().unwrap_or_default();
        let startup = Duration::from_millis(self.spec_of(handle).startup_timeout_ms());
        or_cancelled(&cancel, handle.sign_in_for_call(startup)).await;
        let (entry, sight) = or_cancelled(&cancel, self.find_tool(handle, tool, caller))
            .await
            .ok_or_else(|| cancelled(server, tool))??;
        if sight != Sight::Enabled {
            return Err(Error::ToolDisabled {
                server: server.to_owned(),
                tool: tool.to_owned(),
            });
        }
        if let Some(reason) = self.block_reason(&entry) {
            return Err(Error::ToolBlocked {
                server: server.to_owned(),
                tool: tool.to_owned(),
                reason,
            });
        }
        // Owned: validation may leave out optional nulls, and what it keeps is what is sent.
        let mut arguments = arguments.cloned();
        match &mut arguments {
            Some(arguments) => self.validators.check(&entry, arguments)?,
            // Absent arguments are checked as `{}` (an empty map does not allocate).
            None => self.validators.check(&entry, &mut Value::Object(JsonObject::new()))?,
        }
        // Only calls that would reach the server count against its limits.
        super::rate::admit(&self.shared, &self.config.discovery.rate_limits, caller, server, tool).await?;
        // Last before the call: the human is asked only about a call that would run.
        if let Some(confirm) = self.config.confirm().decide(server, tool) {
            let asked = crate::confirm::ask(confirm, options.confirm.as_ref(), (server, tool), arguments.as_ref());
            let answer = or_cancelled(&cancel, asked).await.unwrap_or(Answer::Cancelled);
            *answered = Some(answer);
            if !answer.allows() {
                return Err(Error::NotConfirmed {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                    answer,
                });
            }
        }
        // The config's timeout, not the handle's: a reload may have changed it and kept the server.
        let options = ExecuteOptions {
            timeout_ms: Some(
                options
                    .timeout_ms
                    .unwrap_or_else(|| self.spec_of(handle).call_timeout_ms()),
            ),
            ..options
        };
        // The downstream call's span; its `traceparent` goes to the server in `_meta`.
        let mut span = self
            .tracer
            .as_ref()
            .map(|tracer| tracer.tool_call_span(server, entry.upstream_name(), options.trace.as_ref()));
        let outcome = call(
            handle,
            (tool, entry.upstream_name()),
            match arguments {
                Some(Value::Object(arguments)) => Some(arguments),
                _ => None,
            },
            options,
            span.as_ref().map(crate::telemetry::Span::context),
            &cancel,
        )
        .await;
        if let Some(span) = &mut span {
            match &outcome {
                Ok(result) if result.is_error == Some(true) => span.fail("tool_error"),
                Ok(_) => {}
                Err(error) => span.fail(error.code().as_str()),
            }
        }
        drop(span);
        // The server refused the caller's own token (revoked before its expiry): they sign in
        // again, now (or, with token exchange, their next call exchanges again).
        if let (Err(_), Some(token)) = (&outcome, &token) {
            if let Some(again) = self.if_token_refused(caller, server, token).await {
                return Err(again);
            }
        }
        let mut result = outcome?;
        if cap_result(&mut result, self.config.discovery.max_result_bytes()) {
            tracing::warn!(tool = %entry.id(), "result capped at maxResultBytes");
        }
        Ok(result)
    }

    /// `caller`'s own connection to the per-user server `handle` stands for, with their token;
    /// without one, [`Error::SignInRequired`] with a new sign-in link.
    pub(super) async fn caller_connection(
        &self,
        handle: &Arc<Server>,
        caller: &Caller,
    ) -> Result<(Arc<Server>, String)> {
        match self.signed_in_connection(handle, caller).await? {
            Some(found) => Ok(found),
            None => Err(self.sign_in_link(&handle.spec.name, caller).await),
        }
    }

    /// [`State::caller_connection`] without making a sign-in link: `None` when `caller` has
    /// no usable token (what a listing answers for a server the caller has not signed in to).
    pub(super) async fn signed_in_connection(
        &self,
        handle: &Arc<Server>,
        caller: &Caller,
    ) -> Result<Option<(Arc<Server>, String)>> {
        use crate::upstream::per_user;
        let name = handle.spec.name.as_str();
        let store = &self.shared.store;
        let unreachable = |detail: String| Error::ServerConnection {
            server: name.to_owned(),
            source: UpstreamError::NeedsSignIn { detail },
        };
        let mut got = per_user::token(store, &handle.spec, caller).await;
        if let Ok(Some(token)) = &got {
            // Refused by the server since it was issued: dropped, and, where the caller's
            // token is exchanged, exchanged anew at once (no person is needed for that).
            if per_user::drop_if_refused(store, &handle.spec, caller, token).await {
                got = match handle.spec.token_exchange() {
                    Some(_) => per_user::token(store, &handle.spec, caller).await,
                    None => Ok(None),
                };
            }
        }
        match got {
            Ok(Some(token)) => {
                let own = handle
                    .for_caller(&connection_key(&handle.spec, caller), &token)
                    .ok_or_else(|| {
                        unreachable(
                            "the authorization server issued a token that is not a bearer token (RFC 6750)".into(),
                        )
                    })?;
                own.start();
                Ok(Some((own, token)))
            }
            Ok(None) => Ok(None),
            Err(error) => Err(unreachable(error.to_string())),
        }
    }

    /// What a call answers when the per-user server `spec` refused the caller's own token: a
    /// new sign-in link, or, where tokens are exchanged, that the next call exchanges again.
    async fn refused_own_token(&self, spec: &ServerSpec, caller: &Caller) -> Error {
        let server = spec.name.as_str();
        if spec.token_exchange().is_none() {
            return self.sign_in_link(server, caller).await;
        }
        Error::ServerConnection {
            server: server.to_owned(),
            source: UpstreamError::NeedsSignIn {
                detail: format!("{server} refused the token the identity provider exchanged for this caller's; it is forgotten, and the next call exchanges a new one"),
            },
        }
    }

    /// The connection `caller`'s requests to `handle`'s server go through: the server's own,
    /// or for a per-user server the caller's, with the token it was opened with (see
    /// [`State::if_token_refused`]); [`Error::SignInRequired`] when the caller has none.
    pub(super) async fn connection_for(
        &self,
        handle: &Arc<Server>,
        caller: &Caller,
    ) -> Result<(Arc<Server>, Option<String>)> {
        if !handle.is_per_user() {
            return Ok((handle.clone(), None));
        }
        let (own, token) = self.caller_connection(handle, caller).await?;
        Ok((own, Some(token)))
    }

    /// After a request through `caller`'s own connection to `server` (opened with `token`)
    /// failed: if the server refused the token (revoked before its expiry), it is dropped and
    /// the answer is a new sign-in link, now ([`State::refused_own_token`]); `None` when the
    /// failure was another.
    pub(super) async fn if_token_refused(&self, caller: &Caller, server: &str, token: &str) -> Option<Error> {
        // The configured server's spec (this state's, so it is there): the caller's own
        // connection carries a fixed bearer instead of its oauth settings.
        let spec = &self.server(server).ok()?.spec;
        if crate::upstream::per_user::drop_if_refused(&self.shared.store, spec, caller, token).await {
            return Some(self.refused_own_token(spec, caller).await);
        }
        None
    }

    /// [`Error::SignInRequired`] with a new sign-in link of `caller` for `server`.
    async fn sign_in_link(&self, server: &str, caller: &Caller) -> Error {
        match crate::upstream::per_user::begin(&self.shared.store, server, caller).await {
            Ok(state) => Error::SignInRequired {
                server: server.to_owned(),
                link: connect_path(server, &state),
            },
            Err(error) => Error::ServerConnection {
                server: server.to_owned(),
                source: UpstreamError::NeedsSignIn {
                    detail: error.to_string(),
                },
            },
        }
    }

    /// Whether `caller` holds a usable token for the per-user server `server` (refreshed if
    /// due): a call now would run.
    pub(super) async fn has_own_token(&self, caller: &Caller, server: &str) -> bool {
        let Ok(handle) = self.server(server) else { return false };
        matches!(
            crate::upstream::per_user::token(&self.shared.store, &handle.spec, caller).await,
            Ok(Some(_))
        )
    }

    // One argument per field of the audit line.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn audit(
        &self,
        caller: &Caller,
        server: &str,
        tool: &str,
        arguments: Option<&JsonObject>,
        outcome: &Result<CallToolResult>,
        finished: crate::audit::Finished,
        answered: Option<Answer>,
    ) {
        if let Some(audit) = &self.audit {
            let outcome = match outcome {
                Ok(result) => Ok(result.is_error == Some(true)),
                Err(error) => Err(error.code()),
            };
            audit.record(
                &caller.label(),
                server,
                tool,
                arguments,
                outcome,
                finished,
                answered.map(Answer::audit_word),
            );
        }
    }
}

/// Which of a per-user server's connections is `caller`'s: one per caller, and where tokens are
/// exchanged one per token they present: a person with two clients (two tokens, two exchanged
/// tokens) would otherwise replace one client's connection with the other's at every call.
pub(super) fn connection_key(spec: &crate::config::ServerSpec, caller: &Caller) -> String {
    match (spec.token_exchange(), &caller.presented) {
        (Some(_), Some(presented)) => format!(
            "{} {}",
            caller.identity(),
            crate::hash::sha256_hex(presented.token().as_bytes())
        ),
        _ => caller.identity(),
    }
}

/// The gateway path that starts a sign-in to the per-user server `server` for the link's
/// `state` (`http::connect`).
pub(crate) fn connect_path(server: &str, state: &str) -> String {
    format!("/connect/{}?state={state}", utf8_percent_encode(server))
}

/// `text` with everything but unreserved characters percent-encoded (a server name may hold
/// any character but `:` and whitespace).
fn utf8_percent_encode(text: &str) -> String {
    use std::fmt::Write;
    text.bytes().fold(String::with_capacity(text.len()), |mut out, b| {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
        out
    })
}

/// A debug line per call: the argument keys, as the audit log has them; values only under
/// `--log-arguments` (they can carry anything the model passes on).
fn log_call(server: &str, tool: &str, arguments: Option<&Value>) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let arguments = arguments.and_then(Value::as_object);
    if crate::secrets::log_arguments() {
        let values = arguments.map(|a| Value::Object(a.clone())).unwrap_or_default();
        tracing::debug!(%server, %tool, arguments = %values, "execute_tool");
    } else {
        let keys: Vec<&str> = arguments
            .map(|a| a.keys().map(String::as_str).collect())
            .unwrap_or_default();
        tracing::debug!(%server, %tool, argument_keys = ?keys, "execute_tool");
    }
}

/// The downstream call through `handle`, its failures as the engine's errors, with `trace`'s
/// context in its `_meta`. `tool` is the
/// name the model used (for errors) and the name the server knows (for the call); they
/// differ only when the server's name held characters the model is not shown.
async fn call(
    handle: &std::sync::Arc<Server>,
    (tool, upstream_name): (&str, &str),
    arguments: Option<JsonObject>,
    options: ExecuteOptions,
    trace: Option<&crate::telemetry::SpanContext>,
    cancel: &CancellationToken,
) -> Result<CallToolResult> {
    let server = handle.spec.name.as_str();
    let timeout_ms = options.timeout_ms.unwrap_or_else(|| handle.spec.call_timeout_ms());
    let mut params = CallToolRequestParams::new(upstream_name.to_owned());
    params.arguments = arguments;
    if let Some(trace) = trace {
        // Where the MCP spec's OpenTelemetry guidance (SEP-414) puts the trace context; rmcp
        // adds its progress token and protocol keys beside it.
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.set_traceparent(trace.traceparent());
        if let Some(state) = &trace.trace_state {
            meta.set_tracestate(state.clone());
        }
        params.meta = Some(meta);
    }
    let call = handle.call(params, Duration::from_millis(timeout_ms), options.progress);
    match or_cancelled(cancel, call).await {
        None => Err(cancelled(server, tool)),
        Some(Ok(result)) => Ok(result),
        Some(Err(CallError::Connect(source))) => Err(Error::ServerConnection {
            server: server.to_owned(),
            source,
        }),
        Some(Err(CallError::Call(UpstreamError::Timeout { .. }))) => Err(Error::ToolExecutionTimeout {
            server: server.to_owned(),
            tool: tool.to_owned(),
            timeout_ms,
        }),
        Some(Err(CallError::Call(source))) => Err(Error::ToolExecution {
            server: server.to_owned(),
            tool: tool.to_owned(),
            source,
        }),
    }
}

/// `work`, unless `cancel` fires first. Checked first, so a call cancelled before it starts
/// is never written downstream.
async fn or_cancelled<T>(cancel: &CancellationToken, work: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => None,
        output = work => Some(output),
    }
}

fn cancelled(server: &str, tool: &str) -> Error {
    Error::ToolExecution {
        server: server.to_owned(),
        tool: tool.to_owned(),
        source: UpstreamError::Cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caller::Presented;

    fn spec(oauth: &serde_json::Value) -> crate::config::ServerSpec {
        serde_json::from_value(serde_json::json!({
            "name": "tickets", "connection": { "type": "http", "url": "https://t.example/mcp", "oauth": oauth }
        }))
        .unwrap()
    }

    #[test]
    fn a_caller_with_two_tokens_has_two_exchanged_connections_but_one_signed_in_connection() {
        let alice = |token: &str| Caller {
            issuer: Some("https://id.example".into()),
            subject: Some("alice".into()),
            presented: Some(Presented::new(token, None)),
            ..Caller::default()
        };
        let (laptop, phone) = (alice("laptop-token"), alice("phone-token"));
        let exchanged = spec(&serde_json::json!({ "perUser": true, "clientId": "g",
            "tokenExchange": { "tokenEndpoint": "https://id.example/token" } }));
        assert_ne!(connection_key(&exchanged, &laptop), connection_key(&exchanged, &phone));
        assert_eq!(
            connection_key(&exchanged, &laptop),
            connection_key(&exchanged, &alice("laptop-token"))
        );
        assert!(!connection_key(&exchanged, &laptop).contains("laptop-token"));
        let signed_in = spec(&serde_json::json!({ "perUser": true }));
        assert_eq!(connection_key(&signed_in, &laptop), laptop.identity());
        assert_eq!(connection_key(&signed_in, &laptop), connection_key(&signed_in, &phone));
    }
}
