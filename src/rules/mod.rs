//! Tool rules: which tools are enabled and which tags they carry (DESIGN §4, seed semantics).
//!
//! `pattern` owns the syntax of one pattern (glob, `/regex/flags`, `!negation`) and the
//! in-order evaluation of a pattern list; `rule_set` owns rule order, server scoping,
//! first-match-decides and whitelist mode. Both compile once at config load and are then
//! matched many times.

mod callers;
mod pattern;
#[cfg(test)]
mod props;
mod rule_set;

pub use callers::CallerMatcher;
pub use pattern::{match_pattern, Pattern, PatternError, PatternList};
pub use rule_set::{Decision, Reach, Rule, RuleSet, Sight};
