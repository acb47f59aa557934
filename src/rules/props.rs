//! Property tests of the pattern and rule semantics (module docs of `pattern` and `rule_set`),
//! checked against a reference model built from single-pattern matches.

use proptest::prelude::*;

use super::{match_pattern, CallerMatcher, Pattern, PatternList, Rule, RuleSet, Sight};
use crate::caller::Caller;

/// Whether the body of `pattern` (without a leading `!`) matches `name`.
fn body_matches(pattern: &str, name: &str) -> bool {
    Pattern::parse(pattern).unwrap().body_matches(name)
}

/// Tool-like names over a small alphabet, so that patterns below often match.
fn name() -> impl Strategy<Value = String> {
    "[abAB_]{1,6}"
}

/// Valid patterns of every kind: literal, glob, regex (with and without `i`), each maybe negated.
fn pattern() -> impl Strategy<Value = String> {
    let body = prop_oneof![
        "[abAB_]{1,4}",
        "[abAB_*?]{1,4}".prop_filter("not empty", |g| !g.is_empty()),
        "[abAB_]{1,3}".prop_map(|s| format!("/^{s}/")),
        "[ab]{1,3}".prop_map(|s| format!("/{s}$/i")),
    ];
    (any::<bool>(), body).prop_map(|(negated, body)| if negated { format!("!{body}") } else { body })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any text is either a pattern or an error; compiling and matching never panics.
    #[test]
    fn any_pattern_string_compiles_or_errs_without_panic(source in "\\PC{0,24}|[!/\\[\\]{}*?\\\\a-z,^$()|+]{0,16}", candidate in "\\PC{0,12}") {
        if let Ok(pattern) = Pattern::parse(&source) {
            let _ = pattern.body_matches(&candidate);
            let _ = match_pattern(&candidate, &[source.as_str()]);
        }
    }

    /// A list decides by its first pattern whose body matches: a negation excludes, a positive
    /// pattern includes; no match at all excludes.
    #[test]
    fn first_matching_pattern_decides(patterns in prop::collection::vec(pattern(), 1..6), candidate in name()) {
        let expected = patterns.iter().find_map(|p| {
            let (negated, body) = p.strip_prefix('!').map_or((false, p.as_str()), |b| (true, b));
            body_matches(body, &candidate).then_some(!negated)
        });
        prop_assert_eq!(match_pattern(&candidate, &patterns).unwrap(), expected == Some(true));
    }

    /// A negation alone never matches, and in front of a positive pattern it only removes.
    #[test]
    fn negation_only_excludes(excluded in pattern(), included in pattern(), candidate in name()) {
        let excluded = excluded.trim_start_matches('!').to_owned();
        let included = included.trim_start_matches('!').to_owned();
        let negation = format!("!{excluded}");
        prop_assert!(!match_pattern(&candidate, &[negation.as_str()]).unwrap());
        prop_assert_eq!(
            match_pattern(&candidate, &[negation.as_str(), included.as_str()]).unwrap(),
            !body_matches(&excluded, &candidate) && body_matches(&included, &candidate)
        );
    }

    /// On literal names a glob and an anchored regex agree, and both mean equality.
    #[test]
    fn glob_and_regex_agree_on_literal_names(literal in "[a-z0-9_-]{1,12}", other in "[a-z0-9_-]{0,12}", same in any::<bool>()) {
        let candidate = if same { literal.clone() } else { other };
        let glob = match_pattern(&candidate, &[literal.as_str()]).unwrap();
        let regex = match_pattern(&candidate, &[format!("/^{}$/", regex::escape(&literal))]).unwrap();
        prop_assert_eq!(glob, regex);
        prop_assert_eq!(glob, candidate == literal);
    }

    /// Globs are case-sensitive; the `i` flag makes a regex not.
    #[test]
    fn only_the_i_flag_ignores_case(literal in "[a-z]{1,8}") {
        let upper = literal.to_uppercase();
        prop_assert!(!match_pattern(&upper, &[literal.as_str()]).unwrap());
        let regex = format!("/^{literal}$/i");
        prop_assert!(match_pattern(&upper, &[regex.as_str()]).unwrap());
    }

    /// The first applicable rule that sets `enabled` decides; with no such rule the default is
    /// disabled exactly when some rule enables (whitelist mode); tags come from every
    /// applicable rule, once each.
    #[test]
    fn rules_decide_in_order(
        rules in prop::collection::vec((prop::option::of("[st]"), prop::collection::vec(pattern(), 1..3), prop::option::of(any::<bool>()), prop::collection::vec("[xyz]", 0..3)), 0..6),
        server in "[st]",
        tool in name(),
    ) {
        let compiled: Vec<Rule> = rules.iter().map(|(server, patterns, enabled, tags)| Rule {
            server: server.clone(),
            patterns: PatternList::parse(patterns).unwrap(),
            enabled: *enabled,
            tags: tags.clone(),
            callers: None,
        }).collect();
        let applies = |(rule_server, patterns, _, _): &(Option<String>, Vec<String>, Option<bool>, Vec<String>)| {
            rule_server.as_deref().is_none_or(|s| s == server) && match_pattern(&tool, patterns).unwrap()
        };
        let deciding = rules.iter().position(|r| applies(r) && r.2.is_some());
        let whitelist = rules.iter().any(|r| r.2 == Some(true));
        let mut tags: Vec<String> = Vec::new();
        for tag in rules.iter().filter(|r| applies(r)).flat_map(|r| r.3.iter()) {
            if !tags.contains(tag) {
                tags.push(tag.clone());
            }
        }
        let decision = RuleSet::new(compiled).decide(&server, &tool);
        prop_assert_eq!(decision.deciding_rule, deciding);
        prop_assert_eq!(decision.enabled, deciding.map_or(!whitelist, |i| rules[i].2 == Some(true)));
        prop_assert_eq!(decision.tags, tags);
    }

    /// A set of groups matches a list as the first pattern matching any of them says.
    #[test]
    fn groups_match_by_the_first_pattern_matching_any_group(patterns in prop::collection::vec(pattern(), 1..5), groups in prop::collection::vec(name(), 0..4)) {
        let expected = patterns.iter().find_map(|p| {
            let (negated, body) = p.strip_prefix('!').map_or((false, p.as_str()), |b| (true, b));
            groups.iter().any(|g| body_matches(body, g)).then_some(!negated)
        });
        prop_assert_eq!(PatternList::parse(&patterns).unwrap().is_match_any(&groups), expected == Some(true));
    }

    /// With caller rules mixed in: the local user (and a caller no caller rule is for) sees
    /// exactly what `decide` says; a caller sees what the first applicable rule setting
    /// `enabled` among those for everyone and those for them says (a caller rule's `false`
    /// hides), and only rules for everyone turn on whitelist mode.
    #[test]
    fn caller_rules_decide_in_order_for_their_callers_only(
        rules in prop::collection::vec((prop::option::of("[st]"), prop::collection::vec(pattern(), 1..3), prop::option::of(any::<bool>()), prop::option::of(prop::collection::vec("[gh]", 1..3))), 0..6),
        server in "[st]",
        tool in name(),
        groups in prop::collection::vec("[gh]", 0..3),
    ) {
        let compiled: Vec<Rule> = rules.iter().map(|(server, patterns, enabled, callers)| Rule {
            server: server.clone(),
            patterns: PatternList::parse(patterns).unwrap(),
            enabled: if callers.is_some() { Some(enabled.unwrap_or(false)) } else { *enabled },
            tags: Vec::new(),
            callers: callers.as_ref().map(|groups| CallerMatcher { subjects: None, groups: Some(PatternList::parse(groups).unwrap()) }),
        }).collect();
        let set = RuleSet::new(compiled.clone());
        let caller = Caller { subject: Some("someone".into()), groups: groups.clone(), ..Caller::default() };
        let local = set.sight(&server, &tool, &set.reach(&Caller::local()));
        prop_assert_eq!(local, Sight::of_enabled(set.decide(&server, &tool).enabled));

        let whitelist = compiled.iter().any(|r| r.enabled == Some(true) && r.callers.is_none());
        let expected = compiled.iter().find_map(|r| {
            // Matching a group list is checked against its own model above.
            let for_caller = r.callers.as_ref().is_none_or(|m| m.groups.as_ref().is_some_and(|g| g.is_match_any(&groups)));
            let applies = r.server.as_deref().is_none_or(|s| s == server) && r.patterns.is_match(&tool);
            match (r.enabled, for_caller && applies) {
                (Some(enabled), true) => Some(match (enabled, r.callers.is_some()) {
                    (true, _) => Sight::Enabled,
                    (false, false) => Sight::Disabled,
                    (false, true) => Sight::Hidden,
                }),
                _ => None,
            }
        }).unwrap_or(Sight::of_enabled(!whitelist));
        prop_assert_eq!(set.sight(&server, &tool, &set.reach(&caller)), expected);
    }
}
