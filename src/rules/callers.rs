//! Which callers a rule is for: a toolRule's `callers` (subjects and groups).
//!
//! A caller matches when its subject matches `subjects` or its groups match `groups` (either
//! is enough: a rule names the people and the teams it is for). `subjects` is one pattern list
//! read against the subject; `groups` is one pattern list read in order against the set of
//! groups ([`PatternList::is_match_any`]): `["!contractors", "*"]` is every caller in some
//! group and in no group called `contractors`. The local user (stdio, CLI, Node API) has no
//! identity and matches no caller rule: the config's owner sees what the rules without
//! `callers` decide.

use super::pattern::PatternList;
use crate::caller::Caller;

/// The compiled `callers` of one rule.
#[derive(Debug, Clone, Default)]
pub struct CallerMatcher {
    pub subjects: Option<PatternList>,
    pub groups: Option<PatternList>,
}

impl CallerMatcher {
    /// Whether the rule is for `caller`.
    #[must_use]
    pub fn matches(&self, caller: &Caller) -> bool {
        let Some(subject) = caller.subject.as_deref() else {
            return false;
        };
        self.subjects.as_ref().is_some_and(|list| list.is_match(subject))
            || self
                .groups
                .as_ref()
                .is_some_and(|list| list.is_match_any(&caller.groups))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(subjects: Option<&[&str]>, groups: Option<&[&str]>) -> CallerMatcher {
        CallerMatcher {
            subjects: subjects.map(|p| PatternList::parse(p).unwrap()),
            groups: groups.map(|p| PatternList::parse(p).unwrap()),
        }
    }

    fn caller(subject: &str, groups: &[&str]) -> Caller {
        Caller::member(subject, groups)
    }

    #[test]
    fn the_local_user_matches_no_caller_rule() {
        let everyone = matcher(Some(&["*"]), Some(&["*"]));
        assert!(!everyone.matches(&Caller::local()));
        assert!(everyone.matches(&caller("bob", &[])));
    }

    #[test]
    fn subjects_or_groups_match() {
        let m = matcher(Some(&["alice"]), Some(&["admins"]));
        assert!(m.matches(&caller("alice", &[])));
        assert!(m.matches(&caller("bob", &["devs", "admins"])));
        assert!(!m.matches(&caller("bob", &["devs"])));
    }

    #[test]
    fn a_negated_group_excludes_a_caller_in_it_whatever_other_groups_it_has() {
        let m = matcher(None, Some(&["!contractors", "*"]));
        assert!(m.matches(&caller("a", &["devs"])));
        assert!(!m.matches(&caller("b", &["devs", "contractors"])));
        assert!(!m.matches(&caller("c", &[])), "no group, nothing to match");
    }

    #[test]
    fn subject_patterns_are_the_tool_pattern_syntax() {
        let m = matcher(Some(&["/^svc-/i", "*@example.com"]), None);
        assert!(m.matches(&caller("SVC-ci", &[])));
        assert!(m.matches(&caller("alice@example.com", &[])));
        assert!(!m.matches(&caller("alice@example.org", &[])));
    }
}
