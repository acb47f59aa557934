//! One error type for the whole engine, with stable codes.
//!
//! Variants hold data, not preformatted text; `Error::code` is the single mapping to the
//! public `ErrorCode`. The faces convert at their edge: the gateway into `isError` tool results
//! (its compact JSON body is the gateway's, `gateway::meta_tool`), the CLI into an exit status,
//! the Node binding into a JS `Error` with `code`.

use crate::upstream::UpstreamError;

/// The stable codes shared by every face (MCP results, CLI, Node errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    ConfigurationError,
    ServerConnectionError,
    ServerNotFound,
    ToolNotFound,
    ToolDisabled,
    ValidationError,
    ToolExecutionError,
    ToolExecutionTimeout,
    /// The trust checks stopped a call (`security.blockFlagged`, `security.onToolChange: "block"`).
    ToolBlocked,
    /// A toolRules `confirm` wanted a human yes and none came (declined, dismissed, or no one
    /// could be asked).
    ToolNotConfirmed,
    /// A rate limit (`discovery.rateLimits`) held the call back: retry after the time given.
    RateLimited,
}

impl ErrorCode {
    /// The `SCREAMING_SNAKE` name clients match on.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConfigurationError => "CONFIGURATION_ERROR",
            Self::ServerConnectionError => "SERVER_CONNECTION_ERROR",
            Self::ServerNotFound => "SERVER_NOT_FOUND",
            Self::ToolNotFound => "TOOL_NOT_FOUND",
            Self::ToolDisabled => "TOOL_DISABLED",
            Self::ValidationError => "VALIDATION_ERROR",
            Self::ToolExecutionError => "TOOL_EXECUTION_ERROR",
            Self::ToolExecutionTimeout => "TOOL_EXECUTION_TIMEOUT",
            Self::ToolBlocked => "TOOL_BLOCKED",
            Self::ToolNotConfirmed => "TOOL_NOT_CONFIRMED",
            Self::RateLimited => "RATE_LIMITED",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything the engine can fail with. A downstream server's failure is carried typed, as
/// the source; its text is bounded where it is built (`upstream::error`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A config file or object is invalid. `origin` is the file (or `<object>`), `path` the
    /// place inside it, e.g. `discovery.toolRules[2].pattern[0]`.
    #[error("{origin}: {path}: {reason}")]
    Configuration {
        origin: String,
        path: String,
        reason: String,
    },
    #[error("server `{server}` is not connected: {source}")]
    ServerConnection {
        server: String,
        #[source]
        source: UpstreamError,
    },
    #[error("no server named `{server}`")]
    ServerNotFound { server: String, suggestions: Vec<String> },
    #[error("server `{server}` has no tool named `{tool}`")]
    ToolNotFound {
        server: String,
        tool: String,
        suggestions: Vec<String>,
    },
    #[error("tool `{server}:{tool}` is disabled by toolRules")]
    ToolDisabled { server: String, tool: String },
    /// Bad arguments. Each problem names where it is (`limit`, `/path`, …).
    #[error("invalid arguments: {}", problems.join("; "))]
    Validation { problems: Vec<String> },
    #[error("tool `{server}:{tool}` failed: {source}")]
    ToolExecution {
        server: String,
        tool: String,
        #[source]
        source: UpstreamError,
    },
    #[error("tool `{server}:{tool}` did not answer within {timeout_ms} ms")]
    ToolExecutionTimeout {
        server: String,
        tool: String,
        timeout_ms: u64,
    },
    /// The server never sees the call. `reason` says which check and what it found; the
    /// message ends with the fix.
    #[error("tool `{server}:{tool}` is blocked: {reason}; after review, accept it with `anygpt-discovery trust {server} {tool}` (or engine.trustTools)")]
    ToolBlocked {
        server: String,
        tool: String,
        reason: String,
    },
    /// A toolRules `confirm` wanted a human yes and got none: the server never sees the call.
    #[error("{}", not_confirmed(server, tool, *answer))]
    NotConfirmed {
        server: String,
        tool: String,
        answer: crate::confirm::Answer,
    },
    /// A per-user server (`connection.oauth.perUser`) the caller has not signed in to yet:
    /// `link` starts their sign-in (`/connect/<server>?state=…`, made absolute by the HTTP face
    /// that knows its address). The call did not reach the server.
    #[error("server `{server}` needs your own sign-in: open {link} in your browser, sign in, then call the tool again (the link works once, for 10 minutes)")]
    SignInRequired { server: String, link: String },
    /// A rate limit held the call back before the server saw it.
    #[error("tool `{server}:{tool}` did not run: {limit}; retry after {:.1} s", retry_after.as_secs_f64())]
    RateLimited {
        server: String,
        tool: String,
        /// Whose limit, and what it allows (`caller alice may make 5 calls a second, 10 at once`).
        limit: String,
        retry_after: std::time::Duration,
    },
    /// A request other than a tool call (a prompt, a resource read, a completion) failed at
    /// the server that owns it: the server's own error.
    #[error("{method} on server `{server}` failed: {source}")]
    Request {
        server: String,
        method: String,
        #[source]
        source: UpstreamError,
    },
}

/// What the model (or the CLI's user) reads when a call needing a yes did not get one.
fn not_confirmed(server: &str, tool: &str, answer: crate::confirm::Answer) -> String {
    use crate::confirm::Answer;
    match answer {
        Answer::Declined => format!(
            "the user declined the call of tool `{server}:{tool}`; it did not run: do not call it again unless the user asks"
        ),
        Answer::Unasked => format!(
            "tool `{server}:{tool}` needs the user's confirmation (toolRules `confirm: true`) and nobody can be asked here (the client does not support elicitation, or the command has no terminal); it did not run. To allow it, set `confirm: \"when-supported\"` in that rule (runs without asking where nobody can be asked), or run it from a terminal: `anygpt-discovery execute {server} {tool}` (`--yes` answers beforehand)"
        ),
        _ => format!("the user dismissed the confirmation of tool `{server}:{tool}`; it did not run"),
    }
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for a configuration error.
    pub(crate) fn config(origin: impl Into<String>, path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Configuration {
            origin: origin.into(),
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// Shorthand for a single validation problem.
    pub(crate) fn validation(problem: impl Into<String>) -> Self {
        Self::Validation {
            problems: vec![problem.into()],
        }
    }

    /// The stable code for this error.
    #[must_use]
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Configuration { .. } => ErrorCode::ConfigurationError,
            Self::ServerConnection { .. } | Self::SignInRequired { .. } => ErrorCode::ServerConnectionError,
            Self::ServerNotFound { .. } => ErrorCode::ServerNotFound,
            Self::ToolNotFound { .. } => ErrorCode::ToolNotFound,
            Self::ToolDisabled { .. } => ErrorCode::ToolDisabled,
            Self::Validation { .. } => ErrorCode::ValidationError,
            // A request other than a tool call that the server failed counts as its tool would.
            Self::ToolExecution { .. } | Self::Request { .. } => ErrorCode::ToolExecutionError,
            Self::ToolExecutionTimeout { .. } => ErrorCode::ToolExecutionTimeout,
            Self::ToolBlocked { .. } => ErrorCode::ToolBlocked,
            Self::NotConfirmed { .. } => ErrorCode::ToolNotConfirmed,
            Self::RateLimited { .. } => ErrorCode::RateLimited,
        }
    }

    /// "Did you mean" candidates, as `server:tool` or server names.
    #[must_use]
    pub fn suggestions(&self) -> &[String] {
        match self {
            Self::ServerNotFound { suggestions, .. } | Self::ToolNotFound { suggestions, .. } => suggestions,
            _ => &[],
        }
    }

    /// The server and tool the error is about, when it is about one.
    #[must_use]
    pub fn subject(&self) -> (Option<&str>, Option<&str>) {
        match self {
            Self::ServerConnection { server, .. }
            | Self::SignInRequired { server, .. }
            | Self::ServerNotFound { server, .. }
            | Self::Request { server, .. } => (Some(server), None),
            Self::ToolNotFound { server, tool, .. }
            | Self::ToolDisabled { server, tool }
            | Self::ToolExecution { server, tool, .. }
            | Self::ToolExecutionTimeout { server, tool, .. }
            | Self::ToolBlocked { server, tool, .. }
            | Self::NotConfirmed { server, tool, .. }
            | Self::RateLimited { server, tool, .. } => (Some(server), Some(tool)),
            Self::Configuration { .. } | Self::Validation { .. } => (None, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_failure_is_the_source_and_its_text_part_of_the_message() {
        let err = Error::ServerConnection {
            server: "slow".into(),
            source: UpstreamError::Unavailable {
                reason: "command `nope` not found".into(),
                retry_in: std::time::Duration::from_secs(2),
            },
        };
        assert_eq!(
            err.to_string(),
            "server `slow` is not connected: command `nope` not found (next attempt in 2 s)"
        );
        let source = std::error::Error::source(&err).expect("the upstream error is the source");
        assert!(source.downcast_ref::<UpstreamError>().is_some());
    }

    #[test]
    fn configuration_error_names_origin_and_path() {
        let err = Error::config("a.json", "discovery.toolRules[2].pattern[0]", "bad glob");
        assert_eq!(err.code(), ErrorCode::ConfigurationError);
        assert_eq!(err.to_string(), "a.json: discovery.toolRules[2].pattern[0]: bad glob");
    }
}
