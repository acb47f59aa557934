//! `confirm` in toolRules: which tools need a human yes before each call, and what the human
//! is shown.
//!
//! The first rule matching a tool that sets `confirm` decides (as with `enabled`): `true`
//! asks and refuses the call when the client cannot ask; `"when-supported"` asks when the
//! client can and runs the call otherwise; `false` never asks. The faces ask (the gateway
//! through elicitation, the CLI on its terminal); this module owns the decision and the
//! question's text: server, tool and arguments, secrets scrubbed and size-bounded.

use std::sync::Arc;

use futures::future::BoxFuture;
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

/// How a face asks its human: given the question, the answer. A face that cannot ask (a
/// client without elicitation, no terminal) gives none.
pub type Asker = Arc<dyn Fn(String) -> BoxFuture<'static, Answer> + Send + Sync>;

/// The human's answer, or how the call went on without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Yes.
    Accepted,
    /// No.
    Declined,
    /// The question was dismissed (or could not be put): no yes.
    Cancelled,
    /// Said beforehand (the CLI's `--yes`).
    Preapproved,
    /// Nobody could be asked: refused under `confirm: true`.
    Unasked,
    /// Nobody could be asked and `confirm: "when-supported"` let the call run.
    Unsupported,
}

impl Answer {
    /// Whether the call may run.
    #[must_use]
    pub fn allows(self) -> bool {
        matches!(self, Self::Accepted | Self::Preapproved | Self::Unsupported)
    }

    /// The word the audit log keeps (its `confirm` field).
    #[must_use]
    pub fn audit_word(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Declined => "declined",
            Self::Cancelled => "cancelled",
            Self::Preapproved => "preapproved",
            Self::Unasked => "unasked",
            Self::Unsupported => "unsupported",
        }
    }
}

/// Ask through `asker` (if any) whether `server`'s `tool` may run with `arguments`, as
/// `confirm` says.
pub async fn ask(
    confirm: Confirm,
    asker: Option<&Asker>,
    (server, tool): (&str, &str),
    arguments: Option<&Value>,
) -> Answer {
    match (asker, confirm) {
        (Some(asker), _) => asker(question(server, tool, arguments)).await,
        (None, Confirm::Required) => Answer::Unasked,
        (None, Confirm::WhenSupported) => Answer::Unsupported,
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
        assert!(
            asked.starts_with("Allow the call of tool `delete_repo` on server `github`?"),
            "{asked}"
        );
        assert!(asked.contains("\"repo\":\"a/b\""), "{asked}");
        assert!(!asked.contains("sk-confirm-test"), "{asked}");
        let long = shown_arguments(Some(&json!({ "text": "y".repeat(10_000) })));
        assert!(long.len() < SHOWN_ARGUMENT_BYTES + 40, "{}", long.len());
        assert!(long.ends_with("bytes in all)"), "{long}");
    }
}
