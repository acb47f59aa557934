//! Rule evaluation: which rule decides a tool's `enabled`, and which tags it gets.
//!
//! Semantics (DESIGN §4): rules apply in order; a rule with `server` only sees that server's
//! tools; the first matching rule that sets `enabled` decides; tags accumulate from every
//! matching rule, deduplicated in order; if any rule says `enabled: true`, tools no rule
//! enables are disabled (whitelist mode), otherwise they are enabled.
//!
//! Rules with `callers` ([`CallerMatcher`]) say what one caller sees, on top of that:
//! - They apply only to the callers they match (never to the local user), in their place in
//!   the order: the first applicable rule that sets `enabled` still decides.
//! - A caller rule that decides `false` hides the tool from that caller ([`Sight::Hidden`]:
//!   it does not exist for them, even with `includeDisabled`); one that decides `true` lets
//!   them see and run it, even if a later rule (or whitelist mode) disables it for others.
//! - They never turn on whitelist mode: granting a team a tool must not disable every other
//!   tool for everyone. They carry no tags (tags are searched, and the index is shared by
//!   every caller), so they always set `enabled` (config validation checks both).
//!
//! [`RuleSet::decide`] is the decision without callers: what the local user sees and what the
//! catalog stores. [`RuleSet::sight`] adds the caller rules a caller [`Reach`]es.

use super::callers::CallerMatcher;
use super::pattern::PatternList;
use crate::caller::Caller;

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub server: Option<String>,
    pub patterns: PatternList,
    pub enabled: Option<bool>,
    pub tags: Vec<String>,
    /// Only for these callers (`None`: for everyone).
    pub callers: Option<CallerMatcher>,
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

/// What one caller may do with a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sight {
    /// Searched, listed and run.
    Enabled,
    /// Disabled for everyone: shown only to `includeDisabled`, never run.
    Disabled,
    /// Hidden from this caller by a caller rule: as if it did not exist.
    Hidden,
}

impl Sight {
    #[must_use]
    pub fn of_enabled(enabled: bool) -> Self {
        if enabled {
            Self::Enabled
        } else {
            Self::Disabled
        }
    }
}

/// The caller rules one caller matches (their indices in the rule list): all the rules look
/// at of a caller, so two callers with the same reach see the same tools — the key of a
/// cached per-caller view. Empty for the local user, who then sees what [`RuleSet::decide`]
/// says.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Reach(Box<[u32]>);

impl Reach {
    /// Whether no caller rule applies (the caller sees what the local user sees).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn contains(&self, rule: usize) -> bool {
        u32::try_from(rule).is_ok_and(|rule| self.0.binary_search(&rule).is_ok())
    }
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
        let whitelist = rules.iter().any(|r| r.enabled == Some(true) && r.callers.is_none());
        Self { rules, whitelist }
    }

    /// Whether any rule is for some callers only.
    #[must_use]
    pub fn has_caller_rules(&self) -> bool {
        self.rules.iter().any(|r| r.callers.is_some())
    }

    /// Which caller rules apply to `caller`.
    #[must_use]
    pub fn reach(&self, caller: &Caller) -> Reach {
        if caller.is_local() {
            return Reach::default();
        }
        Reach(
            self.rules
                .iter()
                .enumerate()
                .filter(|(_, rule)| rule.callers.as_ref().is_some_and(|m| m.matches(caller)))
                .filter_map(|(i, _)| u32::try_from(i).ok())
                .collect(),
        )
    }

    /// What a caller with `reach` may do with `server`'s tool `tool`.
    #[must_use]
    pub fn sight(&self, server: &str, tool: &str, reach: &Reach) -> Sight {
        for (index, rule) in self.rules.iter().enumerate() {
            let Some(enabled) = rule.enabled else {
                continue;
            };
            let for_caller = rule.callers.is_none() || reach.contains(index);
            if !for_caller || !rule.applies_to(server, tool) {
                continue;
            }
            return match (enabled, rule.callers.is_some()) {
                (true, _) => Sight::Enabled,
                (false, false) => Sight::Disabled,
                (false, true) => Sight::Hidden,
            };
        }
        Sight::of_enabled(!self.whitelist)
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
            if rule.callers.is_some() || !rule.applies_to(server, tool) {
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
            callers: None,
        }
    }

    fn for_groups(rule: Rule, groups: &[&str]) -> Rule {
        Rule {
            callers: Some(CallerMatcher {
                subjects: None,
                groups: Some(PatternList::parse(groups).unwrap()),
            }),
            ..rule
        }
    }

    fn caller(subject: &str, groups: &[&str]) -> Caller {
        Caller::member(subject, groups)
    }

    #[test]
    fn only_admins_see_a_server_and_the_local_user_keeps_seeing_it() {
        let set = RuleSet::new(vec![
            for_groups(rule(Some("github"), &["*"], Some(true), &[]), &["admins"]),
            for_groups(rule(Some("github"), &["*"], Some(false), &[]), &["*"]),
        ]);
        assert!(!set.is_whitelist(), "a caller rule's `true` is no whitelist");
        let admin = set.reach(&caller("ann", &["admins", "devs"]));
        let dev = set.reach(&caller("dan", &["devs"]));
        assert_eq!(set.sight("github", "create_issue", &admin), Sight::Enabled);
        assert_eq!(set.sight("github", "create_issue", &dev), Sight::Hidden);
        assert_eq!(
            set.sight("fs", "read_file", &dev),
            Sight::Enabled,
            "other servers untouched"
        );
        let local = set.reach(&Caller::local());
        assert!(local.is_empty());
        assert_eq!(set.sight("github", "create_issue", &local), Sight::Enabled);
        assert!(set.decide("github", "create_issue").enabled);
    }

    #[test]
    fn a_caller_rule_is_in_the_first_match_order() {
        let set = RuleSet::new(vec![
            rule(None, &["*_delete"], Some(false), &["dangerous"]),
            for_groups(rule(None, &["*"], Some(true), &[]), &["admins"]),
            for_groups(rule(None, &["*_write"], Some(false), &[]), &["admins"]),
        ]);
        let admin = set.reach(&caller("ann", &["admins"]));
        // An earlier rule for everyone decides before the caller rule.
        assert_eq!(set.sight("fs", "file_delete", &admin), Sight::Disabled);
        // The caller rule decides before a later one.
        assert_eq!(set.sight("fs", "file_write", &admin), Sight::Enabled);
        let other = set.reach(&caller("bob", &["devs"]));
        assert!(other.is_empty());
        assert_eq!(set.sight("fs", "file_write", &other), Sight::Enabled);
        assert_eq!(set.sight("fs", "file_delete", &other), Sight::Disabled);
    }

    #[test]
    fn a_caller_rule_can_grant_what_whitelist_mode_leaves_disabled() {
        let set = RuleSet::new(vec![
            rule(None, &["read_*"], Some(true), &[]),
            for_groups(rule(None, &["write_*"], Some(true), &[]), &["writers"]),
        ]);
        assert!(set.is_whitelist());
        let writer = set.reach(&caller("w", &["writers"]));
        assert_eq!(set.sight("fs", "write_file", &writer), Sight::Enabled);
        assert_eq!(set.sight("fs", "write_file", &Reach::default()), Sight::Disabled);
        assert!(!set.decide("fs", "write_file").enabled);
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
