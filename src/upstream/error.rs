//! Why a downstream server could not be reached or did not answer, as a typed value.
//!
//! Every text held here can reach the model (through a server's status or an error body), so
//! each is scrubbed of registered secrets and cut to [`MAX_TEXT_BYTES`] with a marker when built, and none is a `Debug` rendering
//! (rmcp's transport errors name their Rust types, thousands of characters long).

use std::time::Duration;

/// Longest text one error carries (a server's message, a stderr tail, an exit explanation).
pub const MAX_TEXT_BYTES: usize = 2048;

/// Everything a downstream server can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// The launch spec cannot be used as written (an unset variable, a bad URL or header):
    /// trying again changes nothing until the config does.
    #[error("{field}: {reason}")]
    Spec { field: String, reason: String },
    /// The process could not be started; the cause names what to fix (a missing `cwd` is not
    /// a missing command).
    #[error(transparent)]
    Spawn(#[from] super::launcher::SpawnError),
    /// The server did not complete `initialize` and `tools/list`; the text says what it did.
    #[error("{reason}")]
    Handshake { reason: String },
    /// No answer within a limit (the startup budget, or a call's timeout).
    #[error("{what} within {} ms", limit.as_millis())]
    Timeout { what: &'static str, limit: Duration },
    /// The session ended: the exit status and the last words of the process, when known.
    #[error("{detail}")]
    Closed { detail: String },
    /// The server broke the protocol (an answer of the wrong type).
    #[error("{detail}")]
    Protocol { detail: String },
    /// The server answered the request with an error of its own.
    #[error("{message}")]
    Remote { message: String },
    /// The server stopped reading what we send: a request was stuck in its input pipe.
    #[error("the server stopped reading its input (a request waited {} ms to be written); it is being restarted", blocked.as_millis())]
    Wedged { blocked: Duration },
    /// A person must sign in to the server first (`oauth`); the text says how, naming the
    /// command that does it.
    #[error("{detail}")]
    NeedsSignIn { detail: String },
    /// The last attempt failed; the next one is scheduled.
    #[error("{reason} (next attempt in {} s)", retry_in.as_secs().max(1))]
    Unavailable { reason: String, retry_in: Duration },
    /// It cannot start as configured (a spec error seen before); the config must change.
    #[error("{reason}")]
    Failed { reason: String },
    #[error("the gateway is shutting down")]
    ShuttingDown,
    #[error("cancelled by the client")]
    Cancelled,
}

impl UpstreamError {
    pub(crate) fn spec(field: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        Self::Spec {
            field: field.into(),
            reason: clip(&reason.to_string()),
        }
    }

    pub(crate) fn handshake(reason: impl AsRef<str>) -> Self {
        Self::Handshake {
            reason: clip(reason.as_ref()),
        }
    }

    pub(crate) fn closed(detail: impl AsRef<str>) -> Self {
        Self::Closed {
            detail: clip(detail.as_ref()),
        }
    }

    pub(crate) fn protocol(detail: impl AsRef<str>) -> Self {
        Self::Protocol {
            detail: clip(detail.as_ref()),
        }
    }

    pub(crate) fn remote(message: impl AsRef<str>) -> Self {
        Self::Remote {
            message: clip(message.as_ref()),
        }
    }

    /// Whether trying again later can help (not for a spec that cannot work as written).
    #[must_use]
    pub fn is_retriable(&self) -> bool {
        !matches!(self, Self::Spec { .. } | Self::ShuttingDown | Self::Cancelled)
    }
}

/// `text` without registered secrets, cut to [`MAX_TEXT_BYTES`] at a character boundary with
/// a marker saying how much was left out. Scrubbed first: a cut through a key would leave its
/// start, which no whole-token scrub finds afterwards.
#[must_use]
pub fn clip(text: &str) -> String {
    clip_to(&crate::secrets::scrub(text), MAX_TEXT_BYTES)
}

fn clip_to(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} more bytes cut]", &text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_are_cut_at_a_char_boundary_with_a_marker() {
        assert_eq!(clip_to("short", 10), "short");
        let cut = clip_to("ééééé", 5);
        assert_eq!(cut, "éé… [6 more bytes cut]");
        let error = UpstreamError::remote("x".repeat(20 * 1024 * 1024));
        let shown = error.to_string();
        assert!(shown.len() < MAX_TEXT_BYTES + 64, "{} bytes", shown.len());
        assert!(shown.ends_with("more bytes cut]"), "{}", &shown[shown.len() - 40..]);
    }

    #[test]
    fn unavailable_names_the_wait_in_whole_seconds() {
        let error = UpstreamError::Unavailable {
            reason: "command `x` not found".into(),
            retry_in: Duration::from_millis(300),
        };
        assert_eq!(error.to_string(), "command `x` not found (next attempt in 1 s)");
    }

    #[test]
    fn a_spec_error_is_not_worth_retrying() {
        assert!(!UpstreamError::spec("url", "relative URL without a base").is_retriable());
        assert!(UpstreamError::handshake("closed").is_retriable());
    }
}
