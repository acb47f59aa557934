//! `--json`: exactly one JSON document on stdout, on one line, for every command, errors
//! included (`{"error":{"code","message","suggestions"?,"hint"?}}`). The shapes are the
//! engine's DTOs (camelCase), documented in the README's CLI section.

use serde::Serialize;

use super::human;
use crate::error::Error;

/// `value` as one compact JSON line, characters a terminal acts on escaped
/// (`terminal::json_safe`).
pub fn document<T: Serialize + ?Sized>(value: &T) -> String {
    let mut text = super::terminal::json_safe(serde_json::to_string(value).expect("CLI results serialize"));
    text.push('\n');
    text
}

/// An error as JSON.
#[derive(Debug, Serialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize)]
pub struct ErrorDetail {
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub suggestions: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<&'static str>,
}

impl ErrorBody {
    #[must_use]
    pub fn of(error: &Error) -> Self {
        Self {
            error: ErrorDetail::of(error),
        }
    }
}

impl ErrorDetail {
    #[must_use]
    pub fn of(error: &Error) -> Self {
        Self {
            code: error.code().as_str(),
            message: crate::engine::scrub_secrets(&error.to_string()).into_owned(),
            suggestions: error.suggestions().to_vec(),
            hint: human::hint(error.code()),
        }
    }
}
