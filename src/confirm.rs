//! `confirm` in toolRules: which tools need a human yes before each call, and what the human
//! is shown.
//!
//! The first rule matching a tool that sets `confirm` decides (as with `enabled`): `true`
//! asks and refuses the call when the client cannot ask; `"when-supported"` asks when the
//! client can and runs the call otherwise; `false` never asks. The faces ask (the gateway
//! through elicitation, the CLI on its terminal); this module owns the decision and the
//! question's text: server, tool and arguments, secrets scrubbed and size-bounded.

use serde_json::Value;

use crate::config::{ConfirmMode, ConfirmSpec};
use crate::rules::PatternList;

/// How much of the arguments the question shows.
pub const SHOWN_ARGUMENT_BYTES: usize = 2048;

/// What the rules say about one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirm {
    /// Ask; refuse when the client cannot ask.
    Required,
    /// Ask when the client can; run otherwise.
    WhenSupported,
}

/// The `confirm` settings of the tool rules, compiled.
#[derive(Debug, Clone, Default)]
pub struct ConfirmRules {
    rules: Vec<(Option<String>, PatternList, ConfirmSpec)>,
}

impl ConfirmRules {
    /// The rules that set `confirm`, in order: each with its `server` and patterns.
    pub fn new(rules: impl IntoIterator<Item = (Option<String>, PatternList, ConfirmSpec)>) -> Self {
        Self {
            rules: rules.into_iter().collect(),
        }
    }

    /// Whether a call of `server`'s `tool` needs a yes first.
    #[must_use]
    pub fn decide(&self, server: &str, tool: &str) -> Option<Confirm> {
        let (_, _, spec) = self
            .rules
            .iter()
            .find(|(only, patterns, _)| only.as_deref().is_none_or(|s| s == server) && patterns.is_match(tool))?;
        match spec {
            ConfirmSpec::Always(true) => Some(Confirm::Required),
            ConfirmSpec::Always(false) => None,
            ConfirmSpec::Mode(ConfirmMode::WhenSupported) => Some(Confirm::WhenSupported),
        }
    }
}

/// The question put to the human: which server, which tool, with what (registered secrets
/// and key-shaped values masked, cut to [`SHOWN_ARGUMENT_BYTES`]).
#[must_use]
pub fn question(server: &str, tool: &str, arguments: Option<&Value>) -> String {
    let shown = shown_arguments(arguments);
    format!("Allow the call of tool `{tool}` on server `{server}`?\nArguments: {shown}")
}

/// The arguments as the question shows them.
#[must_use]
pub fn shown_arguments(arguments: Option<&Value>) -> String {
    let text = arguments.map_or_else(|| "{}".to_owned(), Value::to_string);
    let text = crate::secrets::scrub(&crate::secrets::mask_key_shaped(&text)).into_owned();
    if text.len() <= SHOWN_ARGUMENT_BYTES {
        return text;
    }
    let mut end = SHOWN_ARGUMENT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

/// Why a call that needed a yes did not run: what the model reads and the audit keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The human said no.
    Declined,
    /// The human dismissed the question.
    Cancelled,
    /// Nobody could be asked.
    CannotAsk,
}

impl Refusal {
    /// The word the audit log keeps (`confirm` field).
    #[must_use]
    pub fn audit_word(self) -> &'static str {
        match self {
            Self::Declined => "declined",
            Self::Cancelled => "cancelled",
            Self::CannotAsk => "unasked",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(list: &[(Option<&str>, &[&str], ConfirmSpec)]) -> ConfirmRules {
        ConfirmRules::new(
            list.iter()
                .map(|(s, p, c)| (s.map(str::to_owned), PatternList::parse(p).unwrap(), *c)),
        )
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let set = rules(&[
            (Some("github"), &["delete_*"], ConfirmSpec::Always(true)),
            (None, &["*_safe"], ConfirmSpec::Always(false)),
            (None, &["*"], ConfirmSpec::Mode(ConfirmMode::WhenSupported)),
        ]);
        assert_eq!(set.decide("github", "delete_repo"), Some(Confirm::Required));
        assert_eq!(set.decide("gitlab", "delete_repo"), Some(Confirm::WhenSupported));
        assert_eq!(set.decide("github", "read_safe"), None);
        assert_eq!(ConfirmRules::default().decide("a", "b"), None);
    }

    #[test]
    fn the_question_masks_secrets_and_is_bounded() {
        crate::secrets::register("confirm-test", ["sk-confirm-test-0123456789abcdef".to_owned()]);
        let asked = question(
            "github",
            "delete_repo",
            Some(&json!({ "repo": "a/b", "token": "sk-confirm-test-0123456789abcdef" })),
        );
        assert!(asked.starts_with("Allow the call of tool `delete_repo` on server `github`?"), "{asked}");
        assert!(asked.contains("\"repo\":\"a/b\""), "{asked}");
        assert!(!asked.contains("sk-confirm-test"), "{asked}");
        let long = shown_arguments(Some(&json!({ "text": "y".repeat(10_000) })));
        assert!(long.len() < SHOWN_ARGUMENT_BYTES + 40, "{}", long.len());
        assert!(long.ends_with("bytes in all)"), "{long}");
    }
}
