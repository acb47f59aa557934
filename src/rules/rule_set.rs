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
        self.names(server) && self.patterns.is_match(tool)
    }

    /// Whether the rule is about `server`'s tools (it names that server, or none).
    fn names(&self, server: &str) -> bool {
        self.server.as_deref().is_none_or(|s| s == server)
    }

    /// What the rule, when it decides, makes of a tool: a caller rule's `false` hides it.
    fn sight(&self, enabled: bool) -> Sight {
        match (enabled, self.callers.is_some()) {
            (true, _) => Sight::Enabled,
            (false, false) => Sight::Disabled,
            (false, true) => Sight::Hidden,
        }
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
            return rule.sight(enabled);
        }
        Sight::of_enabled(!self.whitelist)
    }

    /// Whether a caller with `reach` sees what `server` offers beside tools (its prompts,
    /// resources and templates, and completion of them), given the sights its known tools
    /// have for that caller (`None`: its tools are not known yet).
    ///
    /// Offers follow the server's tools, so the rules an admin wrote for tools say it:
    /// - A caller no caller rule is for (the local user) sees every server's offers.
    /// - A server with tools: its offers are seen when at least one of its tools is (enabled
    ///   or disabled for everyone, not hidden from this caller).
    /// - A server without tools: the rules are read against the server as a whole. The first
    ///   rule for this caller (or everyone) that sets `enabled`, names this server or none and
    ///   whose pattern covers every name (`*`) decides; a caller rule's `false` hides them.
    /// - A server whose tools are not known yet (still starting for the first time) fails
    ///   closed: hidden while any caller rule of this caller could hide a tool of it.
    #[must_use]
    pub fn sees_offers(&self, server: &str, tools: Option<impl IntoIterator<Item = Sight>>, reach: &Reach) -> bool {
        if reach.is_empty() {
            return true;
        }
        match tools {
            Some(tools) => {
                let mut any = false;
                for sight in tools {
                    if sight != Sight::Hidden {
                        return true;
                    }
                    any = true;
                }
                if any {
                    return false;
                }
            }
            None if self.may_hide(server, reach) => return false,
            None => {}
        }
        self.whole_server(server, reach) != Sight::Hidden
    }

    /// What the rules make of `server` as a whole for a caller with `reach`: only rules
    /// whose pattern covers every name speak for it.
    fn whole_server(&self, server: &str, reach: &Reach) -> Sight {
        for (index, rule) in self.rules.iter().enumerate() {
            let Some(enabled) = rule.enabled else {
                continue;
            };
            let for_caller = rule.callers.is_none() || reach.contains(index);
            if for_caller && rule.names(server) && rule.patterns.covers_every_name() {
                return rule.sight(enabled);
            }
        }
        Sight::of_enabled(!self.whitelist)
    }

    /// Whether a caller rule of a caller with `reach` could hide some tool of `server`.
    fn may_hide(&self, server: &str, reach: &Reach) -> bool {
        self.rules
            .iter()
            .enumerate()
            .any(|(index, rule)| rule.enabled == Some(false) && reach.contains(index) && rule.names(server))
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

    /// What a caller sees of `server`'s offers when its tools are `tools` (`None`: unknown).
    fn sees_offers(set: &RuleSet, server: &str, tools: Option<&[&str]>, who: &Caller) -> bool {
        let reach = set.reach(who);
        let sights = tools.map(|tools| {
            tools
                .iter()
                .map(|tool| set.sight(server, tool, &reach))
                .collect::<Vec<_>>()
        });
        set.sees_offers(server, sights, &reach)
    }

    #[test]
    fn offers_follow_the_tools_a_caller_sees() {
        let set = RuleSet::new(vec![
            for_groups(rule(Some("github"), &["*"], Some(true), &[]), &["admins"]),
            for_groups(rule(Some("github"), &["*"], Some(false), &[]), &["*"]),
            for_groups(rule(Some("fs"), &["write_*"], Some(false), &[]), &["*"]),
            for_groups(rule(Some("docs"), &["get_*"], Some(false), &[]), &["*"]),
        ]);
        let (admin, dev) = (caller("ann", &["admins"]), caller("dan", &["devs"]));
        let github: &[&str] = &["create_issue", "list_issues"];
        assert!(sees_offers(&set, "github", Some(github), &admin));
        assert!(
            !sees_offers(&set, "github", Some(github), &dev),
            "every tool hidden: no offers"
        );
        // One tool left is enough; all tools hidden by a pattern that is not `*` is too.
        assert!(sees_offers(&set, "fs", Some(&["write_file", "read_file"]), &dev));
        assert!(!sees_offers(&set, "docs", Some(&["get_page", "get_index"]), &dev));
        // The local user sees what it always saw.
        assert!(sees_offers(&set, "github", Some(github), &Caller::local()));
        assert!(sees_offers(&set, "github", None, &Caller::local()));
    }

    #[test]
    fn a_server_without_tools_is_judged_by_the_rules_that_cover_it_whole() {
        let set = RuleSet::new(vec![
            rule(None, &["*"], Some(false), &[]),
            for_groups(rule(Some("prompts"), &["*"], Some(true), &[]), &["writers"]),
            for_groups(rule(Some("prompts"), &["*"], Some(false), &[]), &["*"]),
            for_groups(rule(None, &["*_delete"], Some(false), &[]), &["*"]),
        ]);
        let (writer, dev) = (caller("w", &["writers"]), caller("d", &["devs"]));
        // Disabled for everyone by a rule without callers: as for the local user, still seen.
        assert!(sees_offers(&set, "other", Some(&[]), &dev));
        let set = RuleSet::new(set.rules[1..].to_vec());
        assert!(sees_offers(&set, "prompts", Some(&[]), &writer));
        assert!(!sees_offers(&set, "prompts", Some(&[]), &dev));
        // `*_delete` is about some tools, not the server: a toolless server stays seen.
        assert!(sees_offers(&set, "other", Some(&[]), &dev));
        assert!(sees_offers(&set, "prompts", Some(&[]), &Caller::local()));
    }

    #[test]
    fn a_server_whose_tools_are_not_known_yet_fails_closed() {
        let set = RuleSet::new(vec![
            for_groups(rule(Some("docs"), &["get_*"], Some(false), &[]), &["devs"]),
            for_groups(rule(Some("fs"), &["*"], Some(true), &[]), &["devs"]),
        ]);
        let dev = caller("d", &["devs"]);
        assert!(
            !sees_offers(&set, "docs", None, &dev),
            "a rule could hide its every tool"
        );
        assert!(
            sees_offers(&set, "fs", None, &dev),
            "no rule of theirs hides anything there"
        );
        assert!(
            sees_offers(&set, "docs", None, &caller("o", &["ops"])),
            "no rule is for them"
        );
        assert!(
            sees_offers(&set, "docs", Some(&["list_pages"]), &dev),
            "known: its tools decide"
        );
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
