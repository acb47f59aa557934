//! One rmcp client session with one downstream server.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use process_wrap::tokio::{CommandWrap, ProcessGroup as GroupWrap};
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, Tool};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::process::ProcessGroup;
use crate::config::{expand, ServerSpec, TransportKind};

/// Lines of a server's stderr kept to explain a failure.
const STDERR_TAIL_LINES: usize = 8;
/// How long closing stdin may take before the group is signalled.
const CLOSE_GRACE: Duration = Duration::from_millis(500);
/// How long SIGTERM may take before SIGKILL.
pub(super) const TERM_GRACE: Duration = Duration::from_millis(700);

/// The client side we present to downstream servers.
#[derive(Debug, Clone)]
pub struct UpstreamClient;

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("anygpt-discovery", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// The last lines a server wrote to stderr, for error reasons.
#[derive(Debug, Clone, Default)]
struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self
            .0
            .lock()
            .expect("stderr tail lock is never poisoned: no panics while held");
        if lines.len() == STDERR_TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// Explain `reason` with the server's last stderr line, when it wrote one.
    fn explain(&self, reason: &str) -> String {
        let lines = self
            .0
            .lock()
            .expect("stderr tail lock is never poisoned: no panics while held");
        match lines.iter().rev().find(|l| !l.trim().is_empty()) {
            Some(last) => format!("{reason} (stderr: {})", last.trim()),
            None => reason.to_owned(),
        }
    }
}

/// Why a call failed, as the engine needs to tell it apart.
#[derive(Debug)]
pub enum CallFailure {
    Timeout,
    /// The session is gone (crash, exit); the next call should reconnect.
    Closed(String),
    /// The server answered with an error.
    Server(String),
}

/// A live session.
pub struct Connection {
    service: RunningService<RoleClient, UpstreamClient>,
    group: ProcessGroup,
    stderr: StderrTail,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Spawn `spec`, complete the handshake and list every tool (all pages), all within the
    /// server's startup timeout. `base_dir` resolves a relative `cwd`.
    ///
    /// # Errors
    /// A reason a person can act on: unset variable, command not found, timeout, protocol error.
    pub async fn open(
        spec: &ServerSpec,
        base_dir: Option<&Path>,
        shutdown: &CancellationToken,
    ) -> Result<(Self, Vec<Tool>), String> {
        if spec.connection.kind == TransportKind::Http {
            return Err("http connections are not supported by this version yet; use a stdio command".into());
        }
        let command = build_command(spec, base_dir)?;
        let program = spec.connection.command.clone().unwrap_or_default();
        let (transport, stderr) = TokioChildProcess::builder(command)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => format!("command `{program}` not found"),
                _ => format!("cannot start `{program}`: {e}"),
            })?;
        let group = ProcessGroup::new(transport.id());
        let tail = StderrTail::default();
        if let Some(stderr) = stderr {
            tokio::spawn(forward_stderr(spec.name.clone(), stderr, tail.clone()));
        }
        let timeout = Duration::from_millis(spec.startup_timeout_ms());
        let handshake = async {
            let service = UpstreamClient
                .serve(transport)
                .await
                .map_err(|e| format!("handshake failed: {e}"))?;
            let tools = service
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| format!("tools/list failed: {e}"))?;
            Ok::<_, String>((service, tools))
        };
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(timeout, handshake) => outcome,
            () = shutdown.cancelled() => Ok(Err("the gateway is shutting down".to_owned())),
        };
        let result = match outcome {
            Ok(Ok((service, tools))) => Ok((
                Self {
                    service,
                    group,
                    stderr: tail.clone(),
                },
                tools,
            )),
            Ok(Err(reason)) => Err(reason),
            Err(_) => Err(format!(
                "did not answer initialize and tools/list within {} ms",
                timeout.as_millis()
            )),
        };
        if result.is_err() {
            group.terminate(TERM_GRACE).await;
            // Give the stderr forwarder a moment to record the server's last words.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        result.map_err(|reason| tail.explain(&reason))
    }

    /// Whether the session has ended (the server exited or closed stdout).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }

    /// Call a tool with a timeout. Dropping the returned future cancels the call downstream
    /// (rmcp sends `notifications/cancelled`).
    ///
    /// # Errors
    /// Timeout, closed session, or the server's own error.
    pub async fn call(&self, params: CallToolRequestParams, timeout: Duration) -> Result<CallToolResult, CallFailure> {
        match tokio::time::timeout(timeout, self.service.peer().call_tool(params)).await {
            Err(_) => Err(CallFailure::Timeout),
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(e))) => Err(CallFailure::Server(e.message.into_owned())),
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => Err(CallFailure::Closed(
                self.stderr.explain("the server closed the connection"),
            )),
            Ok(Err(other)) => Err(CallFailure::Server(other.to_string())),
        }
    }

    /// The process group, to end it even while a call still holds the session.
    #[must_use]
    pub fn group(&self) -> ProcessGroup {
        self.group
    }

    /// Close stdin, then end the whole process group.
    pub async fn close(mut self) {
        let _ = self.service.close_with_timeout(CLOSE_GRACE).await;
        self.group.terminate(TERM_GRACE).await;
    }
}

fn build_command(spec: &ServerSpec, base_dir: Option<&Path>) -> Result<CommandWrap, String> {
    let conn = &spec.connection;
    let expand = |what: &str, text: &str| expand::expand_env(text).map_err(|e| format!("{what}: {e}"));
    let program = expand("command", conn.command.as_deref().unwrap_or_default())?;
    let mut command = tokio::process::Command::new(program);
    for (i, arg) in conn.args.iter().enumerate() {
        command.arg(expand(&format!("args[{i}]"), arg)?);
    }
    for (key, value) in &conn.env {
        command.env(key, expand(&format!("env.{key}"), value)?);
    }
    if let Some(cwd) = &conn.cwd {
        let cwd = Path::new(&expand("cwd", cwd)?).to_path_buf();
        let cwd = match base_dir {
            Some(base) if cwd.is_relative() => base.join(cwd),
            _ => cwd,
        };
        command.current_dir(cwd);
    }
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(GroupWrap::leader());
    Ok(wrapped)
}

async fn forward_stderr(server: String, stderr: tokio::process::ChildStderr, tail: StderrTail) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "downstream", server = %server, "{line}");
        tail.push(line);
    }
}
