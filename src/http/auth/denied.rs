//! A refused request, and the answer it gets (RFC 6750 §3, MCP authorization).
//!
//! 401 when no valid token came — `WWW-Authenticate: Bearer` with `resource_metadata` (where
//! a client learns which authorization server to ask, RFC 9728) and the `scope` to ask for,
//! plus `error="invalid_token"` when a token came but was bad; 403 `insufficient_scope` naming
//! the scope needed. The reasons are fixed texts: nothing from the token is ever echoed.

use std::sync::Arc;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// What the challenge of every refusal carries: where the metadata is, which scope to ask for.
#[derive(Debug)]
pub(super) struct Challenge {
    pub metadata_url: String,
    /// Space-separated scopes a client should request; empty when none is needed.
    pub scope: String,
}

/// Why a request was refused. The texts are safe to show: they never hold token content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Problem {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A token came and is not acceptable; the text says why, for the client's developer.
    InvalidToken(&'static str),
    /// A valid token without the scopes this resource needs (space-separated).
    InsufficientScope(String),
}

/// A refused request: answers 401 or 403 with the `WWW-Authenticate` challenge.
#[derive(Debug, Clone)]
pub struct Denied {
    problem: Problem,
    challenge: Arc<Challenge>,
}

impl Denied {
    pub(super) fn new(problem: Problem, challenge: Arc<Challenge>) -> Self {
        Self { problem, challenge }
    }

    /// The HTTP status: 403 for a valid token lacking scope, else 401.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        match self.problem {
            Problem::InsufficientScope(_) => StatusCode::FORBIDDEN,
            Problem::Missing | Problem::InvalidToken(_) => StatusCode::UNAUTHORIZED,
        }
    }

    /// The OAuth error code (`invalid_token`, `insufficient_scope`), none when no token came.
    #[must_use]
    pub fn error_code(&self) -> Option<&'static str> {
        match self.problem {
            Problem::Missing => None,
            Problem::InvalidToken(_) => Some("invalid_token"),
            Problem::InsufficientScope(_) => Some("insufficient_scope"),
        }
    }

    /// What went wrong, for the client's developer: a fixed text, never token content.
    #[must_use]
    pub fn description(&self) -> &'static str {
        match self.problem {
            Problem::Missing => "this endpoint needs an access token: send `Authorization: Bearer <token>`",
            Problem::InvalidToken(why) => why,
            Problem::InsufficientScope(_) => "the token does not grant the scope this endpoint needs",
        }
    }

    /// The `WWW-Authenticate` header value.
    #[must_use]
    pub fn www_authenticate(&self) -> String {
        let mut params = Vec::with_capacity(4);
        if let Some(code) = self.error_code() {
            params.push(format!("error=\"{code}\""));
            params.push(format!("error_description=\"{}\"", quotable(self.description())));
        }
        params.push(format!("resource_metadata=\"{}\"", self.challenge.metadata_url));
        let scope = match &self.problem {
            Problem::InsufficientScope(needed) => needed.as_str(),
            _ => self.challenge.scope.as_str(),
        };
        if !scope.is_empty() {
            params.push(format!("scope=\"{scope}\""));
        }
        format!("Bearer {}", params.join(", "))
    }
}

/// A fixed description as an RFC 6750 quoted string (no `"` or `\`; backticks read fine).
fn quotable(text: &str) -> String {
    text.chars().filter(|c| !matches!(c, '"' | '\\')).collect()
}

impl IntoResponse for Denied {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "error": self.error_code().unwrap_or("unauthorized"),
            "error_description": self.description(),
        });
        let mut response = (self.status(), body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        // Every part was checked to be printable ASCII when the authenticator was built.
        if let Ok(value) = HeaderValue::from_str(&self.www_authenticate()) {
            headers.insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}
