//! Rule evaluation: which rule decides a tool's `enabled`, and which tags it gets.
//!
//! Semantics (DESIGN §4): rules apply in order; a rule with `server` only sees that server's
//! tools; the first matching rule that sets `enabled` decides; tags accumulate from every
//! matching rule, deduplicated in order; if any rule says `enabled: true`, tools no rule
//! enables are disabled (whitelist mode), otherwise they are enabled.

use super::pattern::PatternList;

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub server: Option<String>,
    pub patterns: PatternList,
    pub enabled: Option<bool>,
    pub tags: Vec<String>,
}

impl Rule {
    fn applies_to(&self, server: &str, tool: &str) -> bool {
        self.server.as_deref().is_none_or(|s| s == server) && self.patterns.is_match(tool)
    }
}

/// What the rules say about one tool, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub enabled: bool,
    pub tags: Vec<String>,
    /// Index of the rule that decided `enabled`; `None` when the default decided.
    pub deciding_rule: Option<usize>,
}

/// All rules of a config, compiled once.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    whitelist: bool,
}

impl RuleSet {
    #[must_use]
    pub fn new(rules: Vec<Rule>) -> Self {
        let whitelist = rules.iter().any(|r| r.enabled == Some(true));
        Self { rules, whitelist }
    }

    /// Whether any rule enables tools explicitly (then the default is disabled).
    #[must_use]
    pub fn is_whitelist(&self) -> bool {
        self.whitelist
    }

    /// Decide `enabled` and tags for `server`'s tool `tool`.
    #[must_use]
    pub fn decide(&self, server: &str, tool: &str) -> Decision {
        let mut decision = Decision {
            enabled: !self.whitelist,
            tags: Vec::new(),
            deciding_rule: None,
        };
        for (index, rule) in self.rules.iter().enumerate() {
            if !rule.applies_to(server, tool) {
                continue;
            }
            if let (Some(enabled), None) = (rule.enabled, decision.deciding_rule) {
                decision.enabled = enabled;
                decision.deciding_rule = Some(index);
            }
            for tag in &rule.tags {
                if !decision.tags.contains(tag) {
                    decision.tags.push(tag.clone());
                }
            }
        }
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(server: Option<&str>, patterns: &[&str], enabled: Option<bool>, tags: &[&str]) -> Rule {
        Rule {
            server: server.map(str::to_owned),
            patterns: PatternList::parse(patterns).unwrap(),
            enabled,
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        }
    }

    #[test]
    fn no_rules_enables_everything() {
        let set = RuleSet::new(vec![]);
        let d = set.decide("any", "tool");
        assert!(d.enabled);
        assert!(d.tags.is_empty());
        assert_eq!(d.deciding_rule, None);
    }

    #[test]
    fn blacklist_disables_only_matches() {
        let set = RuleSet::new(vec![rule(None, &["*delete*"], Some(false), &["dangerous"])]);
        assert!(!set.decide("fs", "delete_file").enabled);
        assert!(set.decide("fs", "read_file").enabled);
        assert_eq!(set.decide("fs", "delete_file").tags, ["dangerous"]);
    }

    #[test]
    fn whitelist_mode_disables_the_rest() {
        let set = RuleSet::new(vec![rule(None, &["*github*", "/issue/i"], Some(true), &["github"])]);
        assert!(set.is_whitelist());
        assert!(set.decide("gh", "github_list").enabled);
        assert!(set.decide("jira", "create_Issue").enabled);
        assert!(!set.decide("fs", "read_file").enabled);
    }

    #[test]
    fn server_scoped_rule_ignores_other_servers() {
        let set = RuleSet::new(vec![rule(
            Some("filesystem"),
            &["*delete*", "*remove*"],
            Some(false),
            &[],
        )]);
        assert!(!set.decide("filesystem", "delete_file").enabled);
        assert!(set.decide("github", "delete_repo").enabled);
    }

    #[test]
    fn first_rule_setting_enabled_decides() {
        let set = RuleSet::new(vec![
            rule(None, &["*file*"], None, &["files"]),
            rule(None, &["*delete*"], Some(false), &["dangerous"]),
            rule(None, &["*"], Some(true), &["all"]),
        ]);
        let delete = set.decide("fs", "delete_file");
        assert!(!delete.enabled);
        assert_eq!(delete.deciding_rule, Some(1));
        assert_eq!(delete.tags, ["files", "dangerous", "all"]);
        let read = set.decide("fs", "read_file");
        assert!(read.enabled);
        assert_eq!(read.deciding_rule, Some(2));
    }

    #[test]
    fn a_later_rule_cannot_override_an_earlier_decision_with_the_default_value() {
        // Whitelist mode (default off): rule 0 disables explicitly; rule 1 must not re-enable.
        let set = RuleSet::new(vec![
            rule(None, &["*delete*"], Some(false), &[]),
            rule(None, &["*"], Some(true), &[]),
        ]);
        assert!(!set.decide("fs", "delete_file").enabled);
        assert!(set.decide("fs", "read_file").enabled);
    }

    #[test]
    fn tags_accumulate_deduplicated_in_order() {
        let set = RuleSet::new(vec![
            rule(None, &["*"], None, &["a", "b"]),
            rule(None, &["*x*"], None, &["b", "c"]),
        ]);
        assert_eq!(set.decide("s", "x").tags, ["a", "b", "c"]);
        assert_eq!(set.decide("s", "y").tags, ["a", "b"]);
    }
}
